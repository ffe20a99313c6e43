"""corecast meters against the other users of the machine: the application area (writable by
--app-mode) rewritten or truncated under its readers and publishers, and the subscribers'
socket (an abstract name, reachable by anyone and bindable by anyone first): who may
subscribe, how many at once, running out of descriptors, and a name held by another user."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from corecast.errors import UserError
from corecast.meters import Board, board as B, writer as W
from corecast.meters.catalog import Env
from corecast.meters.daemon import Daemon, Options
from corecast.meters.tree import build
from corecast.native import include_dir

from conftest import board_name
from fakes import HZ, FakePMU, FakeProc, two_cpus

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a child process takes another uid")


def fake_daemon(tmp_path):
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, status=lambda spec: None, cpu="skylake")
    FakeProc(tmp_path / "proc")
    pmu = FakePMU({"context_switches": 1e-6, "cpu_migrations": 0.0, "page_faults": 0.0}, {})
    o = Options(interval_s=0.01, window_s=0.05, meters="cpu_busy", blackboard=board_name())
    d = Daemon(o, backend=pmu, env=env, tree=build(two_cpus()))
    d.writer.running()
    return d


def as_user(fn, uid=NOBODY, gid=NOBODY, groups=()):
    """fn() in a forked child as `uid` (it does socket work only, then _exit): its pid; the
    exit status is fn's return value (99: it raised)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            code = fn()
        finally:
            os._exit(code)
    return pid


def exit_code(pid, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"


# ============================================================================================
# the application area rewritten and truncated under its readers

PY_APP = r"""
import os, sys
from corecast.meters import Board
from corecast.errors import UserError
name = sys.argv[1]
path = f"/dev/shm/corecast-{name}.app"
u32 = lambda v: v.to_bytes(4, sys.byteorder)
b = Board.open(name)
b.publish("before", 1)
fd = os.open(path, os.O_WRONLY)
os.pwrite(fd, u32(0x7ffffff8) + u32(0xffffffff) + u32(8), 12)     # header_size, slot_count, slot_size
os.pwrite(fd, b"A" * 72, 64 + 5 * 128 + 32)                        # slot 5: app and key without a NUL
os.pwrite(fd, u32(1234), 64 + 5 * 128 + 104)                       # and an owner
os.close(fd)
apps = b.apps()                                                    # the geometry copied at open
assert len(apps) == 2 and {a.key for a in apps} == {"before", "A" * 40}, apps
assert [a.app for a in apps if a.key != "before"] == ["A" * 32], apps
b.publish("after", 2)
with Board.open(name) as c:                                        # opened now: the area is refused
    assert c.apps() == []
    try:
        c.publish("x", 1)
        raise AssertionError("published in a damaged area")
    except UserError as e:
        assert "no application area" in str(e), e
os.truncate(path, 0)                                               # truncated under the mapping
assert b.apps() == []
try:
    b.publish("after", 3)
    raise AssertionError("published past the file's end")
except UserError as e:
    assert "truncated" in str(e), e
print("ok")
"""

C_APP = r"""
#include <corecast_meters.h>
static void put(const char *path, off_t off, const void *p, size_t n) {
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, p, n, off) != (ssize_t)n) exit(2);
    close(fd);
}
static void put32(const char *path, off_t off, uint32_t v) { put(path, off, &v, 4); }
int main(int argc, char **argv) {
    const char *name = argv[1];
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/corecast-%s.app", name);
    ccm_board b, c;
    struct ccm_app_slot s;
    if (argc < 2 || ccm_open(&b, name) || ccm_app_slots(&b) != 64) return 10;
    if (ccm_app_publish(&b, "before", 1.0)) return 11;
    put32(path, 12, 0x7ffffff8u);                  /* header_size */
    put32(path, 16, 0xffffffffu);                  /* slot_count */
    put32(path, 20, 8);                            /* slot_size */
    char text[72];
    memset(text, 'A', sizeof text);
    put(path, 64 + 5 * 128 + 32, text, sizeof text);   /* slot 5: app and key without a NUL */
    if (ccm_app_slots(&b) != 64) return 12;        /* the geometry copied at open */
    int found = 0;
    for (uint32_t i = 0; i < ccm_app_slots(&b); i++)
        if (ccm_read_app(&b, i, &s) == 0 && s.owner && strcmp(s.key, "before") == 0)
            found = 1;
    if (!found) return 13;
    if (ccm_read_app(&b, 64, &s) != -1 || ccm_read_app(&b, 0xffffffffu, &s) != -1) return 14;
    if (ccm_read_app(&b, 5, &s) != 0 || strlen(s.key) != 39 || strlen(s.app) != 31) return 15;
    if (ccm_app_publish(&b, "after", 2.0)) return 16;
    if (ccm_open(&c, name) || c.app || ccm_app_slots(&c) != 0 || ccm_app_publish(&c, "x", 1) != -ENOENT)
        return 17;                                 /* opened now: the damaged area is refused */
    ccm_close(&c);
    if (truncate(path, 0)) return 2;               /* truncated under the mapping */
    if (ccm_read_app(&b, 0, &s) != -1) return 18;
    if (ccm_app_publish(&b, "after", 3.0) != -ESTALE) return 19;
    ccm_close(&b);
    puts("ok");
    return 0;
}
"""


def compile_c(tmp_path, source, name):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I",
                        str(include_dir("corecast_meters.h")), "-o", str(exe), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.mark.parametrize("reader", ["python", "c"])
def test_app_area_rewritten_or_truncated_is_read_within_bounds(tmp_path, reader):
    cmd = ([sys.executable, "-c", PY_APP] if reader == "python" else [str(compile_c(tmp_path, C_APP, "app"))])
    d = fake_daemon(tmp_path)
    try:
        r = subprocess.run([*cmd, d.opts.blackboard], capture_output=True, text=True, timeout=60)
        # a crash (SIGSEGV, SIGBUS) is a negative status
        assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-2000:])
    finally:
        d.close()


# another writer of the area truncating it while a process publishes there in a loop: the
# area is cut to nothing and written back whole at once, over and over (so most publishes
# find it whole when they look, and some are cut in the middle of their write)

C_PUBLISHER = r"""
#include <corecast_meters.h>
int main(int argc, char **argv) {
    ccm_board b;
    char go[8];
    if (argc < 3 || ccm_open(&b, argv[1]) || ccm_app_publish(&b, "before", 1.0)) return 10;
    long n = atol(argv[2]), ok = 0, stale = 0, other = 0;
    puts("ready");
    fflush(stdout);
    if (!fgets(go, sizeof go, stdin)) return 12;       /* the area is being cut from now on */
    for (long i = 0; i < n; i++) {
        int r = ccm_app_publish(&b, "phase", (double)i);
        if (r == 0) { ok++; continue; }
        if (r == -ESTALE) stale++; else other++;
        ccm_close(&b);                         /* open the board again, as the error says */
        if (ccm_open(&b, argv[1])) return 11;
    }
    printf("ok %ld stale %ld other %ld\n", ok, stale, other);
    return 0;
}
"""

PY_PUBLISHER = r"""
import sys
from corecast.meters import Board
from corecast.errors import UserError
b = Board.open(sys.argv[1])
b.publish("before", 1)
print("ready", flush=True)
sys.stdin.readline()                                   # the area is being cut from now on
ok = stale = other = 0
for i in range(int(sys.argv[2])):
    try:
        b.publish("phase", i)
        ok += 1
    except UserError as e:
        stale += "truncated" in str(e)
        other += "truncated" not in str(e)
        b.close()
        b = Board.open(sys.argv[1])
print("ok", ok, "stale", stale, "other", other)
"""

TRUNCATER = r"""
import os, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDWR)
whole = os.pread(fd, os.fstat(fd).st_size, 0)
sys.stdout.write("ready\n"); sys.stdout.flush()
os.set_blocking(0, False)
while True:
    try:
        if os.read(0, 1) is not None:
            break
    except BlockingIOError:
        pass
    os.ftruncate(fd, 0)
    os.pwrite(fd, whole, 0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("publisher", ["c", "python"])
def test_a_publisher_survives_the_area_truncated_under_it(tmp_path, publisher):
    n = 100_000 if publisher == "c" else 30_000
    cmd = ([str(compile_c(tmp_path, C_PUBLISHER, "publisher"))] if publisher == "c"
           else [sys.executable, "-c", PY_PUBLISHER])
    d = fake_daemon(tmp_path)
    name = d.opts.blackboard
    pub = subprocess.Popen([*cmd, name, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    cut = None
    try:
        assert pub.stdout.readline().strip() == "ready"                 # it has the area open
        cut = subprocess.Popen([sys.executable, "-c", TRUNCATER, f"{B.board_path(name)}.app"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert cut.stdout.readline().strip() == "ready"
        out, err = pub.communicate("go\n", timeout=600)
        # killed by SIGBUS (a negative status) before: the publisher wrote through its mapping
        # after the file was cut under it
        assert pub.returncode == 0, (pub.returncode, out, err[-2000:])
        counts = out.split()
        assert counts[0] == "ok", out
        assert int(counts[1]) > 0 and int(counts[3]) > 0, out     # both happened
    finally:
        if pub.poll() is None:
            pub.kill()
        pub.communicate()
        if cut is not None:
            cut.stdin.close()                  # it stops at the end of its input
            try:
                cut.wait(10)
            except subprocess.TimeoutExpired:
                cut.kill()
                cut.wait()
        d.close()


C_OTHER_SIGBUS = r"""
#include <corecast_meters.h>
int main(int argc, char **argv) {
    ccm_board b;
    if (argc < 3 || ccm_open(&b, argv[1]) || ccm_app_publish(&b, "x", 1.0)) return 10;   /* the handler is in */
    if (argv[2][0] == 'k') { kill(getpid(), SIGBUS); return 11; }                           /* sent */
    if (argv[2][0] == 'a') {        /* the kernel's asynchronous notice of a memory error elsewhere */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        si.si_signo = SIGBUS;
        si.si_code = BUS_MCEERR_AO;
        si.si_addr = &si;
        if (syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGBUS, &si)) return 15;
        return 16;
    }
    int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);                              /* a fault elsewhere */
    if (fd < 0 || ftruncate(fd, 4096)) return 12;
    volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || ftruncate(fd, 0)) return 13;
    p[0] = 1;
    return 14;
}
"""


@pytest.mark.parametrize("how", ["kill", "fault", "mce_notice"])
def test_a_publishers_other_sigbus_still_kills_it(tmp_path, how):
    """The publisher's SIGBUS handler takes only faults inside an area it publishes to: a SIGBUS
    sent to it, a fault in another mapping, or the kernel's asynchronous notice of a memory
    error (BUS_MCEERR_AO: a positive si_code, but no instruction faults again after it; the
    handler swallowed it and the process ran on) still ends it as the default action does."""
    exe = compile_c(tmp_path, C_OTHER_SIGBUS, "other")
    d = fake_daemon(tmp_path)
    try:
        arg = {"kill": "k", "mce_notice": "a"}.get(how, str(tmp_path / "f"))
        r = subprocess.run([str(exe), d.opts.blackboard, arg],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == -7, (r.returncode, r.stderr)            # SIGBUS
    finally:
        d.close()


# ============================================================================================
# the subscribers' socket

def _subscriber(name, wait_s=5.0):
    """As a child: connect to board `name`'s socket; 0 when a trigger byte arrives (kept as a
    subscriber), 1 when the daemon closes the connection (refused), 2 when nothing comes."""
    def run():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(B.socket_address(name))
        s.settimeout(wait_s)
        try:
            return 0 if s.recv(1) == b"!" else 1
        except OSError:
            return 2
    return run


def _notify_when(d, n, pid, timeout=5.0):
    """Tell the subscribers of a trigger change once `n` are connected (or the child ended)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and d.writer.subscribers() < n:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            raise AssertionError("the child ended before it was a subscriber")
        time.sleep(0.01)
    d.writer.notify()


@as_root
def test_subscribers_must_be_allowed_to_read_the_board(tmp_path):
    d = fake_daemon(tmp_path)
    log = []
    d.writer.say = log.append
    name, path = d.opts.blackboard, B.board_path(d.opts.blackboard)
    try:
        # a board of mode 0644 (what the daemon makes): any user may read it, and subscribe
        pid = as_user(_subscriber(name))
        _notify_when(d, 1, pid)
        assert exit_code(pid) == 0
        # owner only: another user is refused at once, and that is logged
        os.chmod(path, 0o600)
        before = d.writer.subscribers()
        assert exit_code(as_user(_subscriber(name))) == 1
        assert d.writer.subscribers() == before
        assert any(f"uid {NOBODY}" in line and "may not read" in line for line in log), log
        # group-readable: a member of its group may (by a supplementary group too), others not
        os.chown(path, 0, 4242)
        os.chmod(path, 0o640)
        pid = as_user(_subscriber(name), groups=[4242])
        _notify_when(d, before + 1, pid)
        assert exit_code(pid) == 0
        assert exit_code(as_user(_subscriber(name, 0.5), gid=4242)) == 2    # admitted (no byte sent)
        assert exit_code(as_user(_subscriber(name), groups=[4243])) == 1   # refused: closed, not silent
    finally:
        d.close()


CAP = getattr(W, "MAX_SUBSCRIBERS", 64)


def test_subscribers_are_capped(tmp_path):
    d = fake_daemon(tmp_path)
    log = []
    d.writer.say = log.append
    name = d.opts.blackboard
    subs = []
    try:
        for _ in range(CAP):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(B.socket_address(name))
            subs.append(s)
        end = time.monotonic() + 10
        while d.writer.subscribers() < CAP and time.monotonic() < end:
            time.sleep(0.01)
        extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        extra.connect(B.socket_address(name))
        extra.settimeout(5)
        assert extra.recv(1) == b""                        # refused: closed at once
        extra.close()
        assert d.writer.subscribers() == CAP
        assert any(f"{CAP} subscribers connected already" in line for line in log), log
        subs.pop().close()                                 # one goes away: its place is free again
        again = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        again.connect(B.socket_address(name))
        subs.append(again)
        # admitted once the accepting thread has seen it (the count stays CAP: the closed one is
        # dropped as the new one comes): notify until its byte arrives, however loaded the machine
        again.settimeout(0.2)
        got, end = None, time.monotonic() + 10
        while got is None and time.monotonic() < end:
            d.writer.notify()
            try:
                got = again.recv(1)
            except TimeoutError:
                pass
        assert got == b"!"                                 # not b"": refused would be closed
    finally:
        for s in subs:
            s.close()
        d.close()


PER_USER = getattr(W, "MAX_SUBSCRIBERS_PER_USER", 16)


def _hog(name, n, go_r):
    """As a child: connect `n` times to board `name`'s socket, keep them all until a byte comes
    on `go_r`; the exit status is how many the daemon closed (refused) by then."""
    def run():
        subs = []
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(B.socket_address(name))
            subs.append(s)
        os.read(go_r, 1)
        refused = 0
        for s in subs:
            s.settimeout(0)
            try:
                refused += s.recv(1) == b""
            except BlockingIOError:
                pass
        return refused
    return run


@as_root
def test_one_user_cannot_take_every_subscriber_place(tmp_path):
    """One local user opening as many subscriptions as the daemon takes in all gets
    MAX_SUBSCRIBERS_PER_USER of them; another user still gets in (before, the first user's 64
    locked everyone else out)."""
    d = fake_daemon(tmp_path)
    log = []
    d.writer.say = log.append
    name = d.opts.blackboard
    go_r, go_w = os.pipe()
    hog = other = None
    try:
        hog = as_user(_hog(name, CAP, go_r))
        end = time.monotonic() + 30
        while d.writer.subscribers() < PER_USER and time.monotonic() < end:
            time.sleep(0.01)
        assert d.writer.subscribers() == min(PER_USER, CAP)
        # another user: connected after all of the first one's (the socket's queue is in order)
        other = as_user(_subscriber(name, 20.0), uid=NOBODY - 1, gid=NOBODY - 1)
        _notify_when(d, PER_USER + 1, other, timeout=30)
        assert exit_code(other, 30) == 0                   # admitted: the trigger byte came
        other = None
        assert d.writer.subscribers() == PER_USER + 1
        os.write(go_w, b"x")
        assert exit_code(hog, 30) == CAP - PER_USER       # the first user's others were refused
        hog = None
        assert any(f"uid {NOBODY}" in line and f"{PER_USER} subscribers connected already" in line
                   for line in log), log
    finally:
        os.write(go_w, b"x")
        for pid in (hog, other):
            if pid is not None:
                exit_code(pid, 1)
        os.close(go_r)
        os.close(go_w)
        d.close()


EMFILE = r"""
import os, resource, sys, time
from corecast.meters import writer as W
w = W.Writer.create(sys.argv[1], W.Layout([], [], [], []), 10_000_000, 100_000_000)
w.say = lambda text: print("LOG", text, flush=True)
w.running()
import socket
from corecast.meters import board as B
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)      # one round: the accepting thread is
c.connect(B.socket_address(sys.argv[1]))                    # in its loop, waiting in accept()
while w.subscribers() < 1:
    time.sleep(0.01)
time.sleep(0.2)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
hog = []
try:
    while True:
        hog.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
print("full", flush=True)
sys.stdin.readline()
for fd in hog:
    os.close(fd)
before = w.subscribers()
print("freed", flush=True)
sys.stdin.readline()
end = time.monotonic() + 5
while w.subscribers() <= before and time.monotonic() < end:
    time.sleep(0.01)
print("subs", w.subscribers() - before, w._accept.is_alive(), flush=True)
w.stop()
"""


def test_subscribers_thread_survives_running_out_of_descriptors():
    name = board_name()
    p = subprocess.Popen([sys.executable, "-c", EMFILE, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "full"
        # the first may take the descriptor that the accepting thread, blocked in accept(),
        # reserved before the others ran out; the next is accepted on the spare one and closed
        first, c = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2))
        first.connect(B.socket_address(name))
        c.connect(B.socket_address(name))
        c.settimeout(5)
        assert c.recv(1) == b""                  # refused at once (not left waiting)
        c.close()
        p.stdin.write("\n")
        p.stdin.flush()
        lines = []
        while (line := p.stdout.readline().strip()) != "freed":
            assert line, p.stderr.read()
            lines.append(line)
        assert any("no descriptor to accept it" in line for line in lines), lines
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(B.socket_address(name))
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "subs 1 True"       # the thread lived on
        c.close()
        first.close()
        assert p.wait(10) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _squat(name, ready_w, done_r):
    """As a child: bind and listen on board `name`'s socket name, until told to stop."""
    def run():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(B.socket_address(name))
        s.listen(8)
        os.write(ready_w, b"1")
        os.read(done_r, 1)
        return 0
    return run


class Squatter:
    """Another user holding a board's socket name (the daemon is not there)."""

    def __init__(self, name):
        ready_r, ready_w = os.pipe()
        self.done_r, self.done_w = os.pipe()
        self.pid = as_user(_squat(name, ready_w, self.done_r))
        os.close(ready_w)
        assert os.read(ready_r, 1) == b"1"
        os.close(ready_r)

    def stop(self):
        os.write(self.done_w, b"1")
        assert exit_code(self.pid) == 0
        for fd in (self.done_r, self.done_w):
            os.close(fd)


C_SUBSCRIBE = r"""
#include <corecast_meters.h>
int main(int argc, char **argv) {
    int fd = ccm_subscribe(argc > 1 ? argv[1] : NULL);
    printf("%d\n", fd < 0 ? fd : 0);
    return 0;
}
"""


@as_root
def test_a_socket_name_held_by_another_user_is_not_trusted(tmp_path, cli):
    exe = compile_c(tmp_path, C_SUBSCRIBE, "subscribe")
    name = board_name()
    squat = Squatter(name)
    board = B.board_path(name)
    try:
        # a board of root's there (ccm_subscribe looks at its owner), the socket another user's
        board.write_bytes(b"\0" * 4096)
        board.chmod(0o644)
        r = subprocess.run([str(exe), name], capture_output=True, text=True)
        assert r.stdout.strip() == "-1", r.stdout + r.stderr           # -EPERM
        with pytest.raises(UserError, match=f"held by uid {NOBODY}"):
            B.subscribe(name)
        board.unlink()
        # the daemon says who holds its name, in one line
        r = cli("meters", "--blackboard", name, "--duration", "1")
        assert r.code == 2 and r.err.count("\n") == 1, r.err
        assert f"held by another user (uid {NOBODY}" in r.err and "Traceback" not in r.err, r.err
    finally:
        squat.stop()
        if board.exists():
            board.unlink()


def test_subscribing_to_the_real_daemon(tmp_path):
    exe = compile_c(tmp_path, C_SUBSCRIBE, "subscribe")
    d = fake_daemon(tmp_path)
    try:
        r = subprocess.run([str(exe), d.opts.blackboard], capture_output=True, text=True)
        assert r.stdout.strip() == "0", r.stdout + r.stderr
        with Board.open(d.opts.blackboard) as b, b.subscribe() as s:
            # notified until the byte comes: the accepting thread may admit this subscriber after
            # a first notify (the C subscriber's closed connection can still be counted)
            s.settimeout(0.2)
            got = b""
            end = time.monotonic() + 20
            while not got and time.monotonic() < end:
                d.writer.notify()
                try:
                    got = s.recv(1)
                except TimeoutError:
                    continue
            assert got == b"!"
    finally:
        d.close()


# ---------------------------------------------------------------- the endpoint's app slots
def _snapshot_with_an_app():
    from corecast.meters.board import AppValue, Snapshot
    return Snapshot(name="t", pid=1, state="running", stale=None, interval_s=0.001, window_s=1.0, ticks=1,
                    late_ticks=0, heartbeat_real_s=0.0, started_real_s=0.0,
                    apps=[AppValue(pid=7, app="secretapp", key="phase", value=3.0, t_ns=0, alive=True)])


def _get_as(uid: int, url: str) -> str:
    """GET `url` from a child running as `uid` (its socket is that user's)."""
    import urllib.request
    "127.0.0.1".encode("idna")           # loaded here: the child's user may not read the Python install
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            body = urllib.request.urlopen(url, timeout=30).read()
            os.write(w, body)
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the clients are other users")
@pytest.mark.parametrize("mode, group, nobody_sees", [(0o640, 0, False), (0o644, 0, True), (0o640, 65534, True)])
def test_the_endpoint_shows_app_slots_only_to_users_who_may_read_the_area(tmp_path, mode, group, nobody_sees):
    # the endpoint showed every slot to every local user whatever the .app file's mode: now the
    # mode guards seeing them too (nobody: not in root's group; in nogroup when the area is)
    from corecast.meters.exporter import Exporter
    app = tmp_path / "board.app"
    app.write_bytes(b"\0" * 64)
    os.chown(app, 0, group)
    app.chmod(mode)
    tmp_path.chmod(0o755)
    ex = Exporter("127.0.0.1", 0, _snapshot_with_an_app, app_path=app)
    ex.start()
    try:
        for path in ("/metrics", "/meters.json"):
            url = f"http://127.0.0.1:{ex.port}{path}"
            assert "secretapp" in _get_as(0, url)                        # root (and the daemon's user)
            seen = _get_as(65534, url)
            assert ("corecast_" in seen or '"blackboard"' in seen), seen   # answered, either way
            assert ("secretapp" in seen) == nobody_sees, (mode, group, seen[:300])
    finally:
        ex.stop()
