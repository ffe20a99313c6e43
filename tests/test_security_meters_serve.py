"""Safe to run as root beside other users (issue 25, items 2 and 3): the meters blackboard
cannot be hijacked, the dashboard and the meters endpoint obey only their owner and their own
Host, and every mistake around them is one line.

The proof is a second, unprivileged user made for this module (useradd, removed at the end;
the module is skipped without root, as it cannot make one): it plants symbolic links,
regular files and FIFOs at the blackboard's names, and tries to drive a root-owned
`corecast serve --allow-commands`.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corecast.errors import UserError
from corecast.meters import board as B
from corecast.meters import httpd

from conftest import SYSTEM_PYTHON as PY
from conftest import as_user, run_corecast

SHM = Path("/dev/shm")


def uniq(tag: str) -> str:
    return f"sec{os.getpid()}-{tag}"


def shm_left(name: str) -> list[str]:
    """What a daemon of board `name` left in /dev/shm."""
    return sorted(p.name for p in SHM.iterdir() if p.name.startswith((f"corecast-{name}", f".corecast-{name}.")))


def one_line(r: subprocess.CompletedProcess, text: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        p.rmdir()
    elif os.path.lexists(p):
        p.unlink()


# ============================================================================================
# the second user

@pytest.fixture(scope="module")
def other(other_user):
    """A fresh unprivileged user: (name, uid, gid) (conftest's `other_user`). Removed at the end."""
    return other_user


# ============================================================================================
# the blackboard

def test_symlinks_planted_at_the_temporary_names_are_never_written_through(other, tmp_path):
    """Item 2: the other user plants symbolic links at the pid-predictable temporary names of
    the next 3,000 pids; root's daemon writes through none of them (its root-owned mode-600
    target keeps its bytes and mode), and the board it makes is its own regular file, mode
    0644, owned by root."""
    name = uniq("link")
    target = tmp_path / "secret"
    target.write_bytes(b"root's own file\n")
    target.chmod(0o600)
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    top = int(Path("/proc/sys/kernel/pid_max").read_text())
    pids = {q if q < top else q - top + 300 for q in range(last + 1, last + 3001)}    # pids wrap to 300
    plant = ("import os, sys\nfor p in sys.argv[3:]:\n    for n in (f'.corecast-{sys.argv[2]}.{p}.tmp', "
             "f'.corecast-{sys.argv[2]}.app.{p}.tmp'):\n        os.symlink(sys.argv[1], '/dev/shm/' + n)\n")
    assert as_user(other, PY, "-c", plant, str(target), name, *map(str, pids)).returncode == 0
    p = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, "--meters", "cpu_busy",
                          "--duration", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.pid in pids           # the daemon's own names were planted: the test means something
        _wait_board(name, p)
        st = os.lstat(SHM / f"corecast-{name}")
        assert stat.S_ISREG(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o644
        with B.Board.open(name) as b:
            assert b.pid == p.pid and b.read("cpu_busy").count >= 0
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
        for q in pids:
            remove(SHM / f".corecast-{name}.{q}.tmp")
            remove(SHM / f".corecast-{name}.app.{q}.tmp")
    assert target.read_bytes() == b"root's own file\n" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert p.returncode == 0 and shm_left(name) == []


def _wait_board(name: str, p: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if p.poll() is not None:
            raise AssertionError(f"the daemon ended: {p.stderr.read()}")
        try:
            with B.Board.open(name) as b:
                if b.state == "running" and b.pid == p.pid:
                    return
        except UserError:
            pass
        time.sleep(0.05)
    raise AssertionError("the daemon did not start")


@pytest.mark.parametrize("where", ["board", "app"])
def test_a_file_another_user_planted_at_the_names_is_refused(other, where):
    """Item 2: a regular file of the other user at the board's name (or its application
    area's) is refused by root's daemon and by `meters show`, with the reason; it stays as it
    was (the old daemon made it the live board, owned by that user)."""
    name = uniq(f"file-{where}")
    path = SHM / (f"corecast-{name}" + (".app" if where == "app" else ""))
    assert as_user(other, "sh", "-c", f"echo planted > {path}").returncode == 0
    try:
        r = run_corecast("meters", "--blackboard", name, "--duration", "1", timeout=60)
        one_line(r, f"{path} is owned by uid {other[1]}, not you or root")
        if where == "board":
            one_line(run_corecast("meters", "show", "--blackboard", name, timeout=60),
                     f"is owned by uid {other[1]}, not you or root")
        st = os.lstat(path)
        assert st.st_uid == other[1] and path.read_text() == "planted\n"
        assert shm_left(name) == [path.name]
    finally:
        remove(path)


def test_a_fifo_at_the_board_name_never_blocks(other):
    """Item 2: a FIFO the other user made at the board's name: `meters show` and the daemon
    each end at once with one line (they blocked forever before)."""
    name = uniq("fifo")
    path = SHM / f"corecast-{name}"
    assert as_user(other, "mkfifo", "-m", "0666", str(path)).returncode == 0
    try:
        one_line(run_corecast("meters", "show", "--blackboard", name, timeout=60),
                 f"{path} is a FIFO, not a blackboard")
        one_line(run_corecast("meters", "--blackboard", name, "--duration", "1", timeout=60),
                 f"{path} is a FIFO, not a blackboard")
        assert stat.S_ISFIFO(os.lstat(path).st_mode)
    finally:
        remove(path)


def test_a_symlink_at_the_board_name_is_refused(other, tmp_path):
    name = uniq("blink")
    path = SHM / f"corecast-{name}"
    target = tmp_path / "t"
    target.write_bytes(b"x" * 100)
    assert as_user(other, "ln", "-s", str(target), str(path)).returncode == 0
    try:
        one_line(run_corecast("meters", "show", "--blackboard", name, timeout=60),
                 f"{path} is a symbolic link, not a blackboard")
        one_line(run_corecast("meters", "--blackboard", name, "--duration", "1", timeout=60),
                 f"{path} is a symbolic link, not a blackboard")
        assert target.read_bytes() == b"x" * 100
    finally:
        remove(path)


def test_a_directory_at_the_board_name_is_one_line_and_leaves_nothing():
    name = uniq("dir")
    path = SHM / f"corecast-{name}"
    path.mkdir()
    try:
        one_line(run_corecast("meters", "--blackboard", name, "--duration", "1", timeout=60),
                 f"{path} is a directory, not a blackboard")
        assert shm_left(name) == [path.name]          # no .tmp, no .app
        one_line(run_corecast("meters", "show", "--blackboard", name, timeout=60), "is a directory")
    finally:
        path.rmdir()


def test_a_board_writable_by_others_is_not_trusted():
    """A reader trusts a board only its owner can write: others could write the values that
    runtimes act on (allowed_workers)."""
    name = uniq("mode")
    p = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, "--meters", "cpu_busy",
                          "--duration", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_board(name, p)
        path = SHM / f"corecast-{name}"
        path.chmod(0o666)
        with pytest.raises(UserError, match=r"is writable by other users \(mode 0666\)"):
            B.Board.open(name)
        path.chmod(0o644)
        B.Board.open(name).close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)


@pytest.mark.parametrize("args, text", [
    (["meters", "--blackboard", "", "--duration", "1"], "'' is not a blackboard name"),
    (["meters", "show", "--blackboard", ""], "'' is not a blackboard name"),
    (["meters", "--blackboard", "a/b", "--duration", "1"], "'a/b' is not a blackboard name"),
    (["meters", "show", "--blackboard", "x" * 200], "is not a blackboard name (1 to 24"),
])
def test_board_names_are_checked(args, text):
    one_line(run_corecast(*args, timeout=60), text)


def test_a_board_with_indexes_out_of_range_is_refused(cli):
    """A board whose descriptors name a scope, meter or advice index it does not have is
    damaged: refused with the reason, never shown with another scope's (or a garbage) name."""
    from corecast.meters import writer as W
    name = uniq("idx")
    scopes = [W.scope_struct("node", "node", -1, [0], "0")]
    meters = [W.meter_struct("cpu_busy", "node", 0, "ratio", 0, 2, False, "", "measured: test"),
              W.meter_struct("cpu_steal", "core7", 99, "ratio", 0, 2, False, "", "measured: test")]
    w = W.Writer.create(name, W.Layout(scopes, meters, [], []), 10_000_000, 100_000_000, app_slots=0)
    try:
        with pytest.raises(UserError, match=r"damaged blackboard: meter 1 \(cpu_steal@core7\) has scope index 99 "
                                            r"\(1 scopes\)"):
            B.Board.open(name)
        r = cli("meters", "show", "--blackboard", name)
        assert r.code == 2 and "damaged blackboard" in r.err and "core7" not in r.out
    finally:
        w.stop()
    assert shm_left(name) == []


def test_meters_list_of_a_process_that_does_not_exist():
    pid = next(p for p in range(999_999, 10**7) if not os.path.exists(f"/proc/{p}"))
    one_line(run_corecast("meters", "list", "--pid", str(pid), timeout=60), f"--pid {pid}: no such process")


def test_replay_of_an_unknown_scope_names_the_known_ones(tmp_path):
    name = uniq("rec")
    rec = tmp_path / "m.csv"
    r = run_corecast("meters", "--blackboard", name, "--meters", "cpu_busy", "--interval", "10ms", "--window",
                     "50ms", "--duration", "0.5", "--record", str(rec), timeout=120)
    assert r.returncode == 0, r.stderr
    r = run_corecast("meters", "replay", str(rec), "--scope", "bogus", timeout=60)
    one_line(r, f"--scope: 'bogus' is not in {rec} (it has: ")
    assert "node" in r.stderr and "core0" in r.stderr
    assert run_corecast("meters", "replay", str(rec), "--scope", "node", timeout=60).returncode == 0


# ============================================================================================
# the meters endpoint: its Host, a bounded server

def _get(port: int, path: str = "/metrics", host: str | None = None, method: str = "GET") -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.putrequest(method, path, skip_host=True)
        c.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        c.endheaders()
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_meters_endpoint_checks_host_and_holds_idle_connections_in_one_thread():
    """Item 3: a foreign Host is refused (421); 50 idle connections cost the daemon no thread
    (55 threads before), and the endpoint still answers with 100 of them open (more than it
    keeps: the idle longest are closed)."""
    name = uniq("prom")
    p = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, "--meters", "cpu_busy",
                          "--listen", "127.0.0.1:0", "--duration", "120"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    idle: list[socket.socket] = []
    try:
        port = None
        while port is None:
            line = p.stderr.readline()
            assert line, "the daemon ended"
            m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
            port = int(m.group(1)) if m else None
        _wait_board(name, p)
        assert _get(port)[0] == 200
        assert _get(port, host=f"localhost:{port}")[0] == 200
        for bad in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1:{port + 1}", "[::1"):
            assert _get(port, host=bad)[0] == 421, bad
        time.sleep(0.5)
        before = _threads(p.pid)
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\n")          # a request that never ends
            idle.append(s)
        time.sleep(1.0)
        during = _threads(p.pid)
        assert during - before <= 1, (before, during)
        for _ in range(50):
            idle.append(socket.create_connection(("127.0.0.1", port)))
        status, body = _get(port)
        assert status == 200 and b"corecast_meters_up" in body
    finally:
        for s in idle:
            s.close()
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)


def _answer(path: str) -> httpd.Answer:
    if path == "/bug":
        raise ZeroDivisionError("a bug")
    return 200, "text/plain", f"path {path}\n".encode()


def _serve_http(monkeypatch, idle_s: float = 0.5):
    monkeypatch.setattr(httpd, "IDLE_S", idle_s)
    monkeypatch.setattr(httpd, "MAX_CONNECTIONS", 8)
    srv = httpd.Server("127.0.0.1", 0, _answer)
    srv.start()
    return srv


def test_httpd_closes_idle_connections_and_keeps_a_bounded_number(monkeypatch):
    srv = _serve_http(monkeypatch)
    try:
        quiet = socket.create_connection(("127.0.0.1", srv.port))
        quiet.settimeout(10)
        assert quiet.recv(10) == b""                         # closed by the server once idle
        socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(20)]
        time.sleep(0.2)
        assert len(srv.conns) <= 8
        assert _get(srv.port, "/x?y")[1] == b"path /x\n"
        for s in socks:
            s.close()
    finally:
        srv.stop()


def test_httpd_answers_pipelined_requests_and_refuses_the_rest(monkeypatch):
    srv = _serve_http(monkeypatch, idle_s=5)
    try:
        host = f"127.0.0.1:{srv.port}".encode()
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GET /a HTTP/1.1\r\nHost: " + host + b"\r\n\r\nHEAD /b HTTP/1.1\r\nHost: " + host
                  + b"\r\n\r\nGET /c HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
        data = b""
        s.settimeout(10)
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        assert data.count(b"HTTP/1.1 200 OK") == 3 and b"path /a\n" in data and b"path /c\n" in data
        assert b"path /b" not in data                        # HEAD: no body
        assert _get(srv.port, method="POST")[0] == 405
        assert _get(srv.port, "/bug") == (500, b"internal error: ZeroDivisionError: a bug\n")
        assert _get(srv.port, "/after")[0] == 200                      # the server went on
        assert _get(srv.port, host="evil.example")[0] == 421
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * 10_000)
        s.settimeout(10)
        assert s.recv(100).startswith(b"HTTP/1.1 431")
        s.close()
    finally:
        srv.stop()


@pytest.mark.parametrize("header, listen, local, ok", [
    ("127.0.0.1:9464", "127.0.0.1", "127.0.0.1", True),
    ("localhost:9464", "127.0.0.1", "127.0.0.1", True),
    ("[::1]:9464", "127.0.0.1", "127.0.0.1", True),
    ("evil.example:9464", "127.0.0.1", "127.0.0.1", False),
    ("127.0.0.1:9465", "127.0.0.1", "127.0.0.1", False),
    ("127.0.0.1", "127.0.0.1", "127.0.0.1", False),          # port 80 implied
    ("10.1.2.3:9464", "0.0.0.0", "10.1.2.3", True),          # every address: the one it came in on
    ("10.1.2.4:9464", "0.0.0.0", "10.1.2.3", False),
    ("evil.example:9464", "0.0.0.0", "10.1.2.3", False),
    ("localhost:9464", "0.0.0.0", "127.0.0.1", True),
    ("localhost:9464", "0.0.0.0", "10.1.2.3", False),
    (f"{socket.gethostname()}:9464", "0.0.0.0", "10.1.2.3", True),
    ("10.1.2.3:9464", "10.1.2.3", "10.1.2.3", True),
    ("localhost:9464", "10.1.2.3", "10.1.2.3", False),
    (None, "127.0.0.1", "127.0.0.1", True),                  # HTTP/1.0 without a Host: not a browser
    ("a b:9464", "127.0.0.1", "127.0.0.1", False),
])
def test_host_rule(header, listen, local, ok):
    assert httpd.host_allowed(header, listen, 9464, local) is ok


# ============================================================================================
# serve: only its owner

class Serve:
    """`corecast serve` in a child process; `url` the base, `secret` the token it printed."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "corecast", "serve", *args], stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True)
        seen = ""
        for _ in range(20):
            line = self.proc.stderr.readline()
            seen += line
            m = re.search(r"http://([^/]+):(\d+)/\?token=([A-Za-z0-9_-]+) ", line)
            if m or not line:
                break
        if not m:
            self.proc.kill()
            raise AssertionError(f"no address: {seen}{self.proc.stderr.read()}")
        self.host, self.port, self.secret = m.group(1), int(m.group(2)), m.group(3)

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None,
                host: str | None = None, timeout: float = 30) -> tuple[int, dict, str]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.putrequest(method, path, skip_host=True)
            c.putheader("Host", host or f"127.0.0.1:{self.port}")
            data = json.dumps(body).encode() if body is not None else b""
            for k, v in {**({"Content-Type": "application/json"} if body is not None else {}),
                         "Content-Length": str(len(data)), **(headers or {})}.items():
                c.putheader(k, v)
            c.endheaders(data)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
        finally:
            c.close()

    def owner(self) -> dict[str, str]:
        return {"Authorization": f"token {self.secret}"}

    def page_token(self) -> str:
        status, _, page = self.request("GET", "/", headers=self.owner())
        assert status == 200
        return re.search(r'name="corecast-token" content="([^"]+)"', page).group(1)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30) -> str:
        self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"corecast serve did not stop in {timeout} s after signal {sig}")
        return err


OTHER_USER = r"""
import http.client, json, re, sys
port, marker = int(sys.argv[1]), sys.argv[2]
def req(method, path, body=None, headers={}):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, body=data, headers={"Content-Type": "application/json", **headers})
    r = c.getresponse()
    return r.status, r.read().decode()
out = {}
out["page"] = req("GET", "/")
out["state"] = req("GET", "/api/state")
out["static"] = req("GET", "/static/app.js")
m = re.search(r'corecast-token" content="([^"]+)"', out["page"][1])
token = m.group(1) if m else "guessed"
cmd = {"events": ["task_clock"], "interval": 0.1, "command": f"touch {marker}"}
out["post"] = req("POST", "/api/stat", cmd, {"X-Corecast-Token": token})
out["post_token_in_query"] = req("POST", "/api/stat?token=guessed", cmd, {"X-Corecast-Token": token})
print(json.dumps(out))
"""


def test_another_user_cannot_start_a_command_through_serve(other, tmp_path):
    """Item 3: root's `serve --allow-commands`; the other user fetches the page (403, no token
    in it), the state (403) and POSTs a command that would make a file (403: the file is never
    made). The owner, with the secret from the terminal, gets the page and starts a command."""
    tmp_path.chmod(0o777)
    marker = tmp_path / "made-by-the-other-user"
    srv = Serve("--listen", "127.0.0.1:0", "--allow-commands")
    try:
        r = as_user(other, PY, "-c", OTHER_USER, str(srv.port), str(marker))
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        for what in ("page", "state", "static", "post", "post_token_in_query"):
            assert out[what][0] == 403, (what, out[what])
            assert srv.secret not in out[what][1] and "corecast-token" not in out[what][1]
        time.sleep(1.0)
        assert not marker.exists()
        # the owner: the address printed, then the cookie; the page's token on a POST
        status, headers, _ = srv.request("GET", f"/?token={srv.secret}")
        assert status == 302 and headers["Location"] == "/"
        cookie = headers["Set-Cookie"]
        assert f"corecast-serve-{srv.port}={srv.secret}" in cookie and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        cookie_hdr = {"Cookie": f"corecast-serve-{srv.port}={srv.secret}"}
        assert srv.request("GET", "/api/state", headers=cookie_hdr)[0] == 200
        owner_marker = tmp_path / "made-by-the-owner"
        token = srv.page_token()
        cmd = {"events": ["task_clock"], "interval": 0.1, "command": f"touch {owner_marker}"}
        assert srv.request("POST", "/api/stat", cmd, headers=cookie_hdr)[0] == 403          # no page token
        assert srv.request("POST", "/api/stat", cmd, headers={**cookie_hdr, "X-Corecast-Token": token,
                                                              "Origin": "http://evil.example"})[0] == 403
        status, _, text = srv.request("POST", "/api/stat", cmd, headers={**cookie_hdr, "X-Corecast-Token": token})
        assert status == 200, text
        end = time.monotonic() + 60
        while not owner_marker.exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert owner_marker.exists()
    finally:
        log = srv.stop()
    assert "Traceback" not in log


def test_serve_on_every_address_refuses_a_foreign_host():
    """Item 3: with --listen 0.0.0.0:P a foreign Host is refused (421), as docs/serve.md says;
    the address the request came in on is answered."""
    srv = Serve("--listen", "0.0.0.0:0")
    try:
        auth = srv.owner()
        assert srv.request("GET", "/api/state", headers=auth)[0] == 200
        for bad in ("attacker.example", f"attacker.example:{srv.port}", f"127.0.0.1:{srv.port + 1}"):
            assert srv.request("GET", "/api/state", headers=auth, host=bad)[0] == 421, bad
    finally:
        srv.stop()


def test_stat_with_a_bad_duration_or_events_is_400_with_one_line():
    srv = Serve("--listen", "127.0.0.1:0")
    try:
        token = srv.page_token()
        h = {**srv.owner(), "X-Corecast-Token": token}
        for body, text in (({"events": ["task_clock"], "duration": "soon", "command": "true"},
                            'duration "soon" is not a number of seconds'),
                           ({"events": 5, "command": "true"}, "events: a list of names, not 5"),
                           ({"events": ["task_clock"], "duration": -1, "command": "true"},
                            "duration -1: give a positive number of seconds"),
                           ({"events": ["task_clock"], "interval": [1], "command": "true"}, "interval [1]"),
                           ({"events": ["task_clock"], "command": {"a": 1}}, "command: a command line"),
                           ({"events": ["task_clock"], "pid": True}, "pid 'True' is not a process id")):
            status, _, text_ = srv.request("POST", "/api/stat", body, headers=h)
            assert status == 400, (body, status, text_)
            err = json.loads(text_)["error"]
            assert text in err and "\n" not in err, (body, err)
    finally:
        log = srv.stop()
    assert "Traceback" not in log and "internal error" not in log


@pytest.mark.parametrize("kind", ["empty", "invalid", "fifo"])
def test_serve_refuses_to_start_on_an_empty_invalid_or_fifo_file(tmp_path, kind):
    f = tmp_path / f"{kind}.csv"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        f.write_text("" if kind == "empty" else "hello\nthis is not a dataset\n")
    r = run_corecast("serve", "--listen", "127.0.0.1:0", str(f), timeout=60, stdin=subprocess.DEVNULL)
    text = {"empty": "empty file", "invalid": str(f), "fifo": "a FIFO"}[kind]
    one_line(r, text)


def test_a_fifo_at_a_board_name_never_blocks_serve_and_sigterm_stops_it(other):
    """Item 2 and 3: the other user's FIFO at /dev/shm/corecast-NAME; the server's board list
    (read on every /api/state) and a watch of that board answer at once, and SIGTERM stops
    the server (it blocked in the list, then ignored SIGTERM)."""
    name = uniq("sfifo")
    path = SHM / f"corecast-{name}"
    assert as_user(other, "mkfifo", "-m", "0666", str(path)).returncode == 0
    srv = Serve("--listen", "127.0.0.1:0")
    try:
        status, _, text = srv.request("GET", "/api/state", headers=srv.owner(), timeout=30)
        assert status == 200 and name not in text
        h = {**srv.owner(), "X-Corecast-Token": srv.page_token()}
        status, _, text = srv.request("POST", "/api/meters", {"blackboard": name}, headers=h, timeout=30)
        assert status == 400 and json.loads(text)["error"] == f"{path} is a FIFO, not a blackboard"
    finally:
        try:
            log = srv.stop(signal.SIGTERM)
        finally:
            remove(path)
    assert "Traceback" not in log


def test_a_page_that_closes_a_live_stream_is_one_log_line():
    """Issue 26 item 8: a page closing a live stream (the connection reset) logs no traceback;
    every line of the server's log is one of its own."""
    srv = Serve("--listen", "127.0.0.1:0")
    try:
        h = {**srv.owner(), "X-Corecast-Token": srv.page_token()}
        status, _, text = srv.request("POST", "/api/stat", {"events": ["task_clock"], "interval": 0.05,
                                                            "command": "sleep 30"}, headers=h)
        assert status == 200, text
        sid = json.loads(text)["id"]
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(f"GET /api/sessions/{sid}/stream HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                      f"Authorization: token {srv.secret}\r\n\r\n".encode())
            s.settimeout(30)
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()                                          # a reset, as a closed tab gives
            time.sleep(1.0)                                    # the next lines meet the reset
        assert srv.request("GET", "/api/state", headers=srv.owner())[0] == 200
    finally:
        log = srv.stop()
    assert "Traceback" not in log and "Error handling request" not in log, log
    assert all(line.startswith("corecast serve") for line in log.splitlines()), log


def test_logging_never_prints_a_traceback():
    import logging
    from corecast.serve.server import OneLine
    f = OneLine("corecast serve: %(message)s")
    try:
        raise ConnectionResetError("Cannot write to closing transport")
    except ConnectionResetError:
        rec = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Error handling request", (),
                                sys.exc_info())
    assert f.format(rec) == ("corecast serve: Error handling request: ConnectionResetError: Cannot write to "
                             "closing transport")


# ============================================================================================
# serve: what a stranger's connections may cost

def _closed(s: socket.socket) -> bool:
    """Whether the server closed this connection (EOF or a reset); never blocks."""
    try:
        return s.recv(65536, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _half_head(port: int, fields: int = 4) -> socket.socket:
    """A connection that sends a request head of `fields` 8,000-byte fields and never ends it."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
              + b"".join(b"X-Pad%d: " % i + b"a" * 8000 + b"\r\n" for i in range(fields)))
    return s


def _server_sockets(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def test_a_strangers_connections_are_bounded_and_the_owner_is_still_answered():
    """Any local user can reach the port. Before, every connection that never finished its
    request head was held (aiohttp's keep-alive: an hour), with what it sent: 1,000 of them,
    1 MB each, made the root server 2 GB. Now at most guard.MAX_STRANGERS connections without
    the owner's secret are held (a new one closes the oldest): of 200, at least 136 are closed
    at once, the server holds about 64 sockets, and the owner is answered meanwhile."""
    from corecast.serve.guard import MAX_STRANGERS
    srv = Serve("--listen", "127.0.0.1:0")
    socks: list[socket.socket] = []
    try:
        socks = [_half_head(srv.port) for _ in range(200)]
        end = time.monotonic() + 60
        while sum(map(_closed, socks)) < 200 - MAX_STRANGERS and time.monotonic() < end:
            time.sleep(0.1)
        assert sum(map(_closed, socks)) >= 200 - MAX_STRANGERS
        assert _server_sockets(srv.proc.pid) <= MAX_STRANGERS + 8
        status, _, text = srv.request("GET", "/api/state", headers=srv.owner())
        assert status == 200, text
    finally:
        for s in socks:
            s.close()
        log = srv.stop()
    assert "Traceback" not in log


@pytest.mark.slow
def test_a_strangers_connection_is_closed_after_its_grace_and_the_owners_is_kept():
    """A connection that has not carried the owner's secret is closed guard.STRANGER_S after
    it was made (a head never finished, or requests refused 403); one whose request was the
    owner's stays open for the next."""
    from corecast.serve.guard import STRANGER_S
    srv = Serve("--listen", "127.0.0.1:0")
    half = refused = None
    owner = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        t0 = time.monotonic()
        half = _half_head(srv.port, fields=1)
        refused = socket.create_connection(("127.0.0.1", srv.port))
        refused.sendall(f"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n\r\n".encode())
        owner.request("GET", "/api/state", headers=srv.owner())
        r = owner.getresponse()
        assert r.status == 200
        r.read()
        end = time.monotonic() + STRANGER_S + 60
        while not (_closed(half) and _closed(refused)) and time.monotonic() < end:
            time.sleep(0.2)
        assert _closed(half) and _closed(refused)
        assert time.monotonic() - t0 >= STRANGER_S - 1         # not before its grace
        owner.request("GET", "/api/state", headers=srv.owner())  # the same connection, still open
        r = owner.getresponse()
        assert r.status == 200 and json.loads(r.read())["version"]
    finally:
        for s in (half, refused):
            if s is not None:
                s.close()
        owner.close()
        log = srv.stop()
    assert "Traceback" not in log


def test_refused_requests_are_not_a_log_line_each():
    """Each request without the owner's secret was a line of the owner's log, its path in it
    (up to 8 KiB): any local user could write the log without end. Now a kind of refusal is
    one line per guard.REFUSALS_EVERY_S, with a count of the others, and a path is cut."""
    from corecast.serve.guard import REFUSALS_EVERY_S
    srv = Serve("--listen", "127.0.0.1:0")
    try:
        t0 = time.monotonic()
        for i in range(300):
            assert srv.request("GET", "/api/state" + "x" * (4000 if i == 0 else 0))[0] in (403, 404)
        elapsed = time.monotonic() - t0
        assert srv.request("GET", "/api/state", headers=srv.owner())[0] == 200
    finally:
        log = srv.stop()
    refusals = [line for line in log.splitlines() if "refused GET" in line]
    assert 1 <= len(refusals) <= 2 + elapsed / REFUSALS_EVERY_S, log
    assert max(map(len, log.splitlines())) < 1000
    assert "(4010 characters)" in refusals[0]


def test_a_throttled_flood_is_one_line_a_window_with_the_count_held_back(monkeypatch):
    """messages.Throttle, which serve's refusals and the meters daemon's refused subscribers
    share: the first line of a kind goes, the rest of its window are counted and said with the
    next line; another kind has its own window."""
    from corecast import messages
    now = [1000.0]
    monkeypatch.setattr(messages.time, "monotonic", lambda: now[0])
    t = messages.Throttle(10.0)
    assert t.line("owner", "refused a") == "refused a"
    assert [t.line("owner", f"refused {i}") for i in range(5)] == [None] * 5
    assert t.line("host", "refused h") == "refused h"
    now[0] += 12.0
    assert t.line("owner", "refused b") == "refused b (5 more refused like it in the last 12 s)"
    assert t.line("owner", "refused c") is None
