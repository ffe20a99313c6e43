"""The programs corecast starts, and what it must not leave behind: one place for `measure`,
`stat -- PROGRAM` and `sched run`.

Two small C programs do the work that must survive corecast's own death (SIGKILL cannot be
caught, so nothing inside corecast's process can clean up after it):

- **corecast-launch** (`Supervised`) starts each program. It is a child subreaper with a
  parent-death signal: when the program ends it kills every process still descending from it
  (those that left the process group with setsid included: orphans are reparented to the
  subreaper, so they cannot get away), and when corecast dies -- whatever the signal -- it is
  told by the kernel and kills the whole tree before it exits. The program itself is killed by
  its own parent-death signal if the supervisor dies. Both ask for the signal and then check
  that their parent is still there, so no moment of the start is left uncovered.
- **corecast-sentinel** (`sentinel()`, started once per command, the first time something is
  created that must not outlive it) holds the read end of a pipe that only corecast can write
  to. corecast names each temporary folder, temporary file and cgroup on the pipe *before*
  creating it, and tells the sentinel to forget it once removed. When the pipe closes --
  corecast exited, normally or not -- the sentinel kills what is left in the named cgroups,
  removes them, and removes the named folders and files (only those owned by its user, never
  through a symbolic link).

Both leave corecast's process group, so a `kill -9 %1` aimed at corecast's job reaches
neither. What they cannot survive is being killed by pid themselves.

Why not a cgroup for every program: creating one changes how the program is scheduled and
accounted wherever a controller is enabled above it (it would compete as one group), which a
measuring tool must not do; a subreaper finds the same processes (docs/measure.md).
"""
from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import UserError
from ..native import native_path

#: Signals a program gets back at their default action (Python ignores SIGPIPE and SIGXFSZ).
_SIGDEF = [signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM]


# ============================================================================ finding a program
def find_program(name: str, env: Mapping[str, str], cwd: str) -> str | None:
    """Full path of the program, looking in PATH and then among corecast's bundled workloads
    (corecast-lockbench, ...): how measure, stat and serve find what they start."""
    if "/" in name:
        p = Path(name) if os.path.isabs(name) else Path(cwd) / name
        return str(p) if p.exists() else None
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    if name.startswith("corecast-"):
        try:
            p = native_path(name)
        except UserError:
            return None
        if os.access(p, os.X_OK):
            return str(p)
    return None


# ============================================================================ the sentinel
class Sentinel:
    """The corecast-sentinel of this process (see the module docstring)."""

    def __init__(self) -> None:
        exe = str(native_path("corecast-sentinel"))
        r, w = os.pipe()                       # both close on exec: only this process writes
        try:
            self.pid = os.posix_spawn(exe, [exe], dict(os.environ),
                                      file_actions=[(os.POSIX_SPAWN_DUP2, r, 0)],
                                      setsigdef=_SIGDEF, setsigmask=[])
        except OSError as err:
            os.close(r)
            os.close(w)
            raise UserError(f"cannot start {exe}: {err.strerror or err}") from None
        os.close(r)
        self.fd: int | None = w
        self.lock = threading.Lock()

    def tell(self, verb: str, path: str | Path) -> None:
        # a relative path is the current folder's (`measure -o c.db`'s journal): the sentinel
        # runs elsewhere, so it is told the whole path
        text = os.path.abspath(str(path))
        if "\n" in text:
            raise UserError(f"{str(path)!r}: not a path corecast can clean up after (a line break in it)")
        with self.lock:
            if self.fd is None:
                return
            try:
                os.write(self.fd, f"{verb} {text}\n".encode())
            except OSError as err:
                raise UserError(f"corecast-sentinel (pid {self.pid}) is gone ({err.strerror or err}): "
                                "nothing would clean up after corecast; not going on") from None

    def close(self, wait_s: float = 10.0) -> None:
        """Close the pipe: the sentinel removes what is still named, then exits; wait for it."""
        with self.lock:
            if self.fd is None:
                return
            os.close(self.fd)
            self.fd = None
        deadline = time.monotonic() + wait_s
        while True:
            try:
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if pid or time.monotonic() >= deadline:
                return
            time.sleep(0.002)


_sentinel: Sentinel | None = None
_sentinel_lock = threading.Lock()


def sentinel() -> Sentinel:
    """This process's sentinel, started the first time it is needed."""
    global _sentinel
    with _sentinel_lock:
        if _sentinel is None:
            _sentinel = Sentinel()
            atexit.register(close_sentinel)
        return _sentinel


def close_sentinel() -> None:
    """End the sentinel now (it cleans up what is still named); the next need starts another."""
    global _sentinel
    with _sentinel_lock:
        s, _sentinel = _sentinel, None
    if s is not None:
        s.close()


def _forget_in_child() -> None:
    """A forked child that does not exec must not hold the pipe open, nor close it for us."""
    global _sentinel
    s, _sentinel = _sentinel, None
    if s is not None and s.fd is not None:
        try:
            os.close(s.fd)
        except OSError:
            pass


os.register_at_fork(after_in_child=_forget_in_child)


def _fresh_name(prefix: str, suffix: str = "", parent: str | None = None) -> str:
    base = os.path.abspath(parent or tempfile.gettempdir())
    # os.urandom, as secrets.token_hex reads it (secrets costs ~3 ms of start-up: hmac, hashlib, random)
    return os.path.join(base, f"{prefix}{os.getpid()}-{os.urandom(6).hex()}{suffix}")


def temp_dir(prefix: str, parent: str | Path | None = None) -> Path:
    """A new private folder (mode 700) in the temporary folder (or in `parent`), named to the
    sentinel before it is made: it is removed when corecast ends, however it ends. Remove it
    with `remove`."""
    s = sentinel()
    for _ in range(100):
        path = _fresh_name(prefix, parent=None if parent is None else str(parent))
        s.tell("dir", path)
        try:
            os.mkdir(path, 0o700)
            return Path(path)
        except FileExistsError:
            s.tell("drop", path)
        except OSError as err:
            s.tell("drop", path)
            raise UserError(f"cannot make a temporary folder {path}: {err.strerror or err}") from None
    raise UserError(f"cannot make a temporary folder in {parent or tempfile.gettempdir()}: every name tried exists")


def temp_file(prefix: str, suffix: str = "") -> Path:
    """A new empty private file (mode 600) in the temporary folder, removed when corecast ends
    whatever way (see temp_dir). Remove it with `remove`."""
    s = sentinel()
    for _ in range(100):
        path = _fresh_name(prefix, suffix)
        s.tell("file", path)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            return Path(path)
        except FileExistsError:
            s.tell("drop", path)
        except OSError as err:
            s.tell("drop", path)
            raise UserError(f"cannot make a temporary file {path}: {err.strerror or err}") from None
    raise UserError(f"cannot make a temporary file in {tempfile.gettempdir()}: every name tried exists")


def remove(path: str | Path) -> None:
    """Remove a folder or file made by temp_dir or temp_file, and tell the sentinel."""
    import shutil
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        try:
            p.unlink()
        except OSError:
            pass
    if _sentinel is not None:
        _sentinel.tell("drop", p)


def track_cgroup(path: str | Path) -> None:
    """Name a cgroup about to be made: if corecast ends without removing it, the sentinel kills
    what is in it and removes it (with the cgroups below it)."""
    sentinel().tell("cgroup", path)


def track_mount(path: str | Path) -> None:
    """Name a mount point about to be mounted (tracefs): if it is still mounted when corecast
    ends, however it ends, the sentinel unmounts it (unless it is in use)."""
    sentinel().tell("mount", path)


def untrack(path: str | Path) -> None:
    """corecast removed `path` itself: the sentinel forgets it."""
    if _sentinel is not None:
        _sentinel.tell("drop", path)


def carrying(var: str, value: str) -> list[int]:
    """The processes (other than this one) whose environment carries var=value: what was started
    with a marker, found again wherever it went (a killed supervisor's orphans, a child that left
    with setsid). A process whose environment cannot be read (another user's, gone) is skipped."""
    needle = f"{var}={value}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    out.append(int(name))
        except OSError:
            pass
    return out


# ============================================================================ a supervised program
class LineReader:
    """Lines from a pipe, with a timeout per line (None: wait as long as it takes)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""
        self.eof = False

    def readline(self, timeout: float | None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                break
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            r, _, _ = select.select([self.fd], [], [], wait)
            if not r:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
        if b"\n" in self.buf:
            line, _, self.buf = self.buf.partition(b"\n")
            return line.decode(errors="replace")
        if self.buf:
            line, self.buf = self.buf, b""
            return line.decode(errors="replace")
        return None


class Supervised:
    """A program started by corecast-launch, stopped before it executes: open counters on
    `.pid` (enabled at exec), then `start()`. Its tree is killed when it ends, when it is
    stopped, and when corecast dies.

    `report` holds what the supervisor said ("exit", "signal", "timeout", "stray",
    "leftovers", "wall_ns", "rusage", ...); `status` is the exit status, or -N for a program
    ended by signal N (as os.waitstatus_to_exitcode). `stdout`/`stderr`: a path to write to,
    one of corecast's descriptors to share, or None to inherit corecast's; `stdin` None
    inherits, else a path to read from.
    `keep_group`: the program stays in corecast's process group, so that the terminal's
    Ctrl-C reaches it as it reaches corecast (`stat`); otherwise it leads a group of its own
    (the timeout and `kill` reach the whole group)."""

    def __init__(self, argv: Sequence[str], *, program: str | None = None, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, cpus: str = "-", timeout: float = 0.0, grace: float = 2.0,
                 stdin: str | None = None, stdout: str | int | None = None, stderr: str | int | None = None,
                 keep_group: bool = False):
        if not argv:
            raise UserError("no command to run")
        self.argv = list(argv)
        self.launcher = str(native_path("corecast-launch"))
        self.keep_group = keep_group
        go_r, go_w = os.pipe()
        rep_r, rep_w = os.pipe()
        os.set_inheritable(go_r, True)
        os.set_inheritable(rep_w, True)
        largv = [self.launcher, "--parent", str(os.getpid()), *(["--keep-group"] if keep_group else []),
                 str(go_r), str(rep_w), cpus, repr(float(timeout)), repr(float(grace)), "--",
                 program or self.argv[0], *self.argv[1:]]
        actions: list[tuple] = []
        if stdin is not None:
            actions.append((os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0))
        for fd, where in ((1, stdout), (2, stderr)):
            if isinstance(where, int):
                actions.append((os.POSIX_SPAWN_DUP2, where, fd))
            elif where is not None:
                actions.append((os.POSIX_SPAWN_OPEN, fd, where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        old_cwd = os.getcwd() if cwd else None
        try:
            if cwd:
                os.chdir(cwd)
            self.sup = os.posix_spawn(self.launcher, largv, dict(os.environ if env is None else env),
                                      file_actions=actions, setsigdef=_SIGDEF, setsigmask=[])
        except OSError as err:
            for fd in (go_r, go_w, rep_r, rep_w):
                os.close(fd)
            raise UserError(f"cannot start {self.launcher}: {err.strerror or err}") from None
        finally:
            if old_cwd is not None:
                os.chdir(old_cwd)
        os.close(go_r)
        os.close(rep_w)
        self._go: int | None = go_w
        self._reader = LineReader(rep_r)
        self._lock = threading.Lock()
        self.report: dict[str, str] = {}
        self.started = False
        self.ended = False                 # the supervisor said "end" (or closed its report)
        self.status: int | None = None
        self.exec_error: int | None = None
        self.pid = -1
        line = self._reader.readline(None)
        if line is None or not line.startswith("pid "):
            self.close()
            raise UserError(f"{self.launcher} failed to start '{self.argv[0]}': {line or 'no answer'}")
        self.pid = int(line.split()[1])

    # ------------------------------------------------------------ the report
    def _take(self, line: str) -> None:
        key, _, rest = line.partition(" ")
        if key == "error":
            raise UserError(f"{self.launcher}: {rest}")
        if key == "end":
            self._ended(reported=True)
            return
        self.report[key] = rest
        if key == "exec_error":
            self.exec_error = int(rest)

    def _ended(self, reported: bool = False) -> None:
        """The supervisor said "end" (`reported`), or its report closed without it: it died
        (killed on its own: corecast's death would have ended corecast first)."""
        self.ended = True
        if "signal" in self.report:
            self.status = -int(self.report["signal"])
        elif "exit" in self.report:
            self.status = int(self.report["exit"])
        if not reported and self.pid > 0 and not self.keep_group:
            # The supervisor kills the tree as it ends; killed with SIGKILL it cannot, and the
            # program's first process goes (its parent-death signal) while its children, in
            # its process group, ran on under init. The group outlives its leader while any of
            # them is in it (the kernel reuses no pid that is a group's id), so this reaches
            # only them.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._reap()

    def _reap(self) -> None:
        if self.sup > 0:
            try:
                os.waitpid(self.sup, 0)
            except ChildProcessError:
                pass
            self.sup = -1
        if self._reader.fd >= 0:
            os.close(self._reader.fd)
            self._reader.fd = -1

    def _read(self, timeout: float | None) -> bool:
        """Take what the supervisor says for up to `timeout` seconds (None: until it ends).
        True when it has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ended:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            line = self._reader.readline(left)
            if line is None:
                if self._reader.eof:
                    self._ended()
                    break
                return False
            self._take(line)
        return True

    def start(self) -> None:
        """Let the program execute; returns once it has (`exec_error` says if it could not)."""
        if self._go is None:
            return
        try:
            os.write(self._go, b"g")
        except OSError:
            pass                  # the supervisor is gone: its report says so (or ends)
        os.close(self._go)
        self._go = None
        self.started = True
        with self._lock:
            while not self.ended and "exec" not in self.report and self.exec_error is None:
                line = self._reader.readline(None)
                if line is None:
                    self._ended()
                    break
                self._take(line)

    def poll(self, timeout: float = 0.0) -> int | None:
        """The exit status once the supervisor has reported it, else None (after waiting up to
        `timeout` seconds for it). Another thread already waiting: None."""
        if self.ended:
            return self.status
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self.status if self._read(timeout) else None
        finally:
            self._lock.release()

    def wait(self) -> int:
        with self._lock:
            self._read(None)
        if self.status is None:
            raise UserError(f"{self.launcher} ended without reporting how '{self.argv[0]}' ended "
                            f"(report: {self.report})")
        return self.status

    def kill(self, sig: int = signal.SIGTERM) -> None:
        """A signal to the program (its whole group unless keep_group) while it runs."""
        if self.ended or self.pid <= 0:
            return
        try:
            if self.keep_group:
                os.kill(self.pid, sig)
            else:
                os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace: float = 2.0) -> int | None:
        """SIGTERM, then SIGKILL if the program is still there after `grace` seconds; its
        status (None if it never started)."""
        if not self.started:
            self.abandon()
            return None
        self.kill(signal.SIGTERM)
        if self.poll(grace) is None:
            self.kill(signal.SIGKILL)
        return self.wait()

    def abandon(self) -> None:
        """Never start the program: the supervisor kills it and exits."""
        if self._go is not None:
            os.close(self._go)
            self._go = None
        self.close()

    def close(self) -> None:
        """Kill the program and its supervisor if they are still there, and reap them (an
        error path: the supervisor kills the tree when its parent-death signal comes, but
        corecast is still alive here, so it is killed directly)."""
        if not self.ended:
            if self.pid > 0:
                self.kill(signal.SIGKILL)
            if self.sup > 0:
                try:
                    os.kill(self.sup, signal.SIGTERM)      # it kills the tree, then exits
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline:
                    try:
                        if os.waitpid(self.sup, os.WNOHANG)[0]:
                            self.sup = -1
                            break
                    except ChildProcessError:
                        self.sup = -1
                        break
                    time.sleep(0.002)
                if self.sup > 0:
                    os.kill(self.sup, signal.SIGKILL)
            self.ended = True
        if self._go is not None:
            os.close(self._go)
            self._go = None
        # another thread waiting on the report closes it itself when the supervisor's end reaches it
        if self._lock.acquire(timeout=10.0):
            try:
                self._reap()
            finally:
                self._lock.release()


def start_passing(argv: Sequence[str], fds: Sequence[int], *, what: str, env: Mapping[str, str] | None = None,
                  stdout: str | int | None = None) -> Supervised:
    """Start `argv` under corecast-launch (`Supervised`), running at once, with the descriptors
    `fds` passed to it at the same numbers (a ring, a pipe the program writes into): what
    `subprocess.Popen(pass_fds=...)` would start, except that the program's whole tree is
    killed when it ends and when corecast dies, SIGKILL included (QEMU or valgrind under
    `sim`, and whatever the program started in the background, were left running). The
    program stays in corecast's process group, so a terminal's Ctrl-C reaches it as before.
    `what`: the program's name in the error when it cannot be executed."""
    for fd in fds:
        os.set_inheritable(fd, True)
    try:
        s = Supervised(argv, env=env, stdout=stdout, keep_group=True)
    finally:
        for fd in fds:
            os.set_inheritable(fd, False)
    s.start()
    if s.exec_error is not None:
        s.close()
        raise UserError(f"cannot run {what}: {os.strerror(s.exec_error)}")
    return s
