"""Shared test helpers: fixtures every test module may use, and helpers a test module imports
(`from conftest import ...`). Fakes built in code live in fakes.py. A test module never imports
another test module (tests/test_test_imports.py)."""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def pytest_sessionstart(session):
    """The C parts that changed are rebuilt before the tests run, in the development install
    `make setup` makes (no loader rebuilds them at import there: scripts/dev_install.py); a
    product the build gained is linked into src/corecast/_native."""
    build, links = ROOT / "build" / "editable", ROOT / "src" / "corecast" / "_native"
    if not (build / "build.ninja").is_file() or not links.is_dir():
        return
    ninja = Path(sys.executable).with_name("ninja")
    ninja = str(ninja) if ninja.exists() else shutil.which("ninja")
    if ninja is None:
        return
    r = subprocess.run([ninja, "-C", str(build)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.exit(f"building the C parts failed (ninja -C {build}):\n{(r.stdout + r.stderr)[-3000:]}", returncode=1)
    if "no work to do" not in r.stdout:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "dev_install.py"), "--links", str(build)], check=True)


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    """Run `corecast ARGS...` in-process; returns exit code, stdout, stderr."""
    from corecast.cli import main

    def run(*args: str) -> CliResult:
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run


def run_corecast(*args: str, **kw) -> subprocess.CompletedProcess:
    """Run corecast in a child process (for signals, preloading, real exit paths)."""
    return subprocess.run([sys.executable, "-m", "corecast", *map(str, args)],
                          capture_output=True, text=True, **kw)


@pytest.fixture
def data_dir() -> Path:
    return DATA


# ============================================================================ programs: compiled once per session
# Small C programs with a known behaviour, for the perf layer and `stat` run for real.

PROGS = {
    "sleeper": "#include <unistd.h>\nint main(void){ usleep(300000); return 0; }\n",
    # spins until it has used 300 ms of CPU time since main(), however loaded the machine is
    # (CPU time the forked child spent before exec does not count)
    "spinner": ("#include <time.h>\nint main(void){ struct timespec a,b; clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&a);"
                " volatile unsigned long x=0; do { for(int i=0;i<100000;i++) x+=i;"
                " clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&b);}"
                " while((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec) < 3e8); return 0; }\n"),
    # spins until it has used argv[1] ms of CPU time
    "spin_ms": ("#include <stdlib.h>\n#include <time.h>\nint main(int c,char**v){ double lim=atof(v[1])*1e6;"
                " struct timespec b; volatile unsigned long x=0; do { for(int i=0;i<100000;i++) x+=i;"
                " clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&b);} while(b.tv_sec*1e9+b.tv_nsec < lim);"
                " return 0; }\n"),
    # blocks N times: each usleep is one voluntary context switch
    "yielder": ("#include <stdlib.h>\n#include <unistd.h>\nint main(int c,char**v){ int n=atoi(v[1]);"
                " for(int i=0;i<n;i++) usleep(200); return 0; }\n"),
    # N threads, each spins S ms of its own CPU time (however loaded the machine is), created
    # one after another D ms apart
    "threads": ("#include <pthread.h>\n#include <stdlib.h>\n#include <time.h>\n#include <unistd.h>\n"
                "static int ms;\nstatic void spin(int m){struct timespec a,b; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&a);"
                " volatile unsigned long x=0; do{ for(int i=0;i<10000;i++) x+=i; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&b);}"
                " while((b.tv_sec-a.tv_sec)*1000+(b.tv_nsec-a.tv_nsec)/1000000 < m);}\n"
                "static void*w(void*a){ spin(ms); return a;}\n"
                "int main(int c,char**v){ int n=atoi(v[1]); ms=atoi(v[2]); int d=atoi(v[3]);"
                " pthread_t t[64]; for(int i=0;i<n;i++){ pthread_create(&t[i],0,w,0); usleep(d*1000);}"
                " for(int i=0;i<n;i++) pthread_join(t[i],0); return 0; }\n"),
    # N threads one after another, each spinning U us of its own CPU time; the main thread
    # sleeps A ms before and B ms after them
    "short_threads": ("#include <pthread.h>\n#include <stdlib.h>\n#include <time.h>\n#include <unistd.h>\n"
                      "static long us;\nstatic void*w(void*a){ struct timespec x,y; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&x);"
                      " volatile unsigned long k=0; do{ for(int i=0;i<1000;i++) k+=i; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&y);}"
                      " while((y.tv_sec-x.tv_sec)*1000000L+(y.tv_nsec-x.tv_nsec)/1000 < us); return a;}\n"
                      "int main(int c,char**v){ int n=atoi(v[1]); us=atol(v[2]); usleep(atoi(v[3])*1000);"
                      " for(int i=0;i<n;i++){ pthread_t t; pthread_create(&t,0,w,0); pthread_join(t,0);}"
                      " usleep(atoi(v[4])*1000); return 0; }\n"),
}


@pytest.fixture(scope="session")
def progs(tmp_path_factory):
    d = tmp_path_factory.mktemp("progs")
    out = {}
    for name, src in PROGS.items():
        c = d / f"{name}.c"
        c.write_text(src)
        exe = d / name
        subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(c)], check=True)
        out[name] = str(exe)
    return out


# ============================================================================ meters: blackboards and daemons

_BOARDS = itertools.count()


def region_program(folder: Path, source: str, name: str = "r") -> str:
    """`source` (C) compiled in `folder` against corecast's region library; the executable."""
    from corecast.native import include_dir, library_dir
    inc, lib = include_dir(), library_dir("libcorecast_region.so")
    src = folder / f"{name}.c"
    src.write_text(source)
    exe = folder / name
    subprocess.run(["gcc", f"-I{inc}", "-pthread", "-o", str(exe), str(src), f"-L{lib}", "-lcorecast_region",
                    f"-Wl,-rpath,{lib}"], check=True)
    return str(exe)


def run_api(dash, fn, owner: bool = True):
    """Run `fn(client)` against a serve Dashboard's app on a test server (127.0.0.1); `owner`: the
    client first opens the address the server prints (its secret becomes the client's cookie)."""
    from aiohttp.test_utils import TestClient, TestServer

    async def go():
        server = TestServer(dash.app(), host="127.0.0.1", port=0)
        async with TestClient(server) as client:
            dash.port = server.port
            if owner:
                r = await client.get(f"/?token={dash.guard.secret}", allow_redirects=False)
                assert r.status == 302 and client.session.cookie_jar.filter_cookies(
                    client.make_url("/")).get(dash.guard.cookie_name) is not None
            return await fn(client)
    import asyncio
    return asyncio.run(asyncio.wait_for(go(), 120))


def board_name() -> str:
    """A blackboard name no other test (nor another engineer's test run) uses."""
    return f"t{os.getpid()}-{next(_BOARDS)}"


def start_daemon(name, *args, **kw):
    p = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    wait_running(name, p)
    return p


def wait_running(name, p=None, timeout=30.0, ticks=2):
    from corecast.errors import UserError
    from corecast.meters import Board
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if p is not None and p.poll() is not None:
            raise AssertionError(f"the daemon ended: {p.stderr.read()}")
        try:
            with Board.open(name) as b:
                if b.state == "running" and b.header.ticks >= ticks and b.pid == (p.pid if p else b.pid):
                    return
        except UserError:
            pass
        time.sleep(0.05)
    raise AssertionError("the daemon did not start")


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out, err


# ------------------------------------------------------------------ a headless browser (browserkit.py)
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install '.[test]')")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--proxy-server=127.0.0.1:9"):
        o.add_argument(a)            # the proxy: anything off this machine fails (the page works offline)
    from browserkit import CHROMEDRIVER, CHROMIUM
    o.binary_location = CHROMIUM
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # chromium's singleton folders (org.chromium.Chromium.*) go to a folder of the test's own, not
    # /tmp, where each browser left one behind for good when the driver ended it
    tmp = tmp_path_factory.mktemp("chromium")
    env = {**os.environ, "TMPDIR": str(tmp)}
    d = webdriver.Chrome(options=o, service=Service(CHROMEDRIVER, env=env))
    d.set_page_load_timeout(60)
    yield d
    d.quit()


def stderr_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run corecast with its standard error on a pseudo-terminal; return status and what it drew."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "corecast", *args], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave, cwd=cwd)
    os.close(slave)
    out = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:              # EIO: the other side is closed
            break
        if not data:
            break
        out.append(data)
    os.close(master)
    return p.wait(timeout=300), b"".join(out).decode(errors="replace")

# ============================================================================ a second, unprivileged user

#: A Python any user can run (the tests' own may be in /root, which others cannot enter).
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def other_user():
    """A fresh unprivileged local user for the module: (name, uid, gid), removed at its end.
    Skipped without root (only root can make one) or without useradd and runuser."""
    import pwd
    import shutil
    if os.geteuid() != 0:
        pytest.skip("needs root: the test makes a second user (useradd) and acts as root beside it")
    if not (shutil.which("useradd") and shutil.which("runuser") and os.access(SYSTEM_PYTHON, os.X_OK)):
        pytest.skip(f"useradd, runuser or {SYSTEM_PYTHON} is missing")
    name = f"cc{os.getpid()}-{next(_USERS)}"[:31]
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
                   check=True, capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        yield name, pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)      # its commands all ended (runuser waits)


_USERS = itertools.count()


def as_user(user, *argv: str, **kw) -> subprocess.CompletedProcess:
    """Run argv as `user` (an `other_user`), from /, within a minute."""
    return subprocess.run(["runuser", "-u", user[0], "--", *argv], capture_output=True, text=True, cwd="/",
                          timeout=60, **kw)


def marked_pids(var: str, token: str) -> list[int]:
    """The processes (other than this one) whose environment carries var=token: what a test
    started, found again wherever it went (a killed supervisor's orphans included)."""
    from corecast.collect import procs
    return procs.carrying(var, token)


@contextlib.contextmanager
def high_priority(nice: int = -19):
    """Run the body (and the programs it starts) at niceness `nice` as root, as a performance
    engineer measures on a shared machine; as any other user, unchanged."""
    old = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        if os.geteuid() == 0:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, old)
