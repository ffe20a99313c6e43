"""An emulated AMP on a machine whose CPUs are alike: the "small" CPUs are slowed to a fraction
`speed` of their capacity, either

- by a cgroup CPU bandwidth limit: threads placed on the small CPUs also go into a cgroup whose
  quota is speed x period x (number of small CPUs): with cgroup v1's cpu controller
  (cpu.cfs_quota_us, threads moved through `tasks`) or cgroup v2's (cpu.max, in a threaded
  subtree, threads moved through `cgroup.threads`); or
- by a duty-cycle stealer: a SCHED_FIFO process on each small CPU that spins (1 - speed) of every
  10 ms and sleeps the rest, so that whatever else runs there gets `speed` of the CPU.

Both need root (or the matching capabilities). Every output of the enforcing mode says which
one slowed what: numbers from an emulated AMP are not a hybrid machine's.

The cgroup `corecast-sched-PID` is named to corecast's sentinel (`corecast.collect.procs`)
before it is made: if corecast dies, or an error cuts the set-up short, the sentinel kills what
is left in it and removes it. `close()` removes it on every other path (also registered with
atexit; and while a cgroup emulation is set up, SIGTERM raises KeyboardInterrupt as Ctrl-C does,
where nothing else handles SIGTERM, so that the same clean-up runs).

cgroup v2: the `cpu` controller must be enabled in the root's cgroup.subtree_control. When it
was not, this run enables it and gives it back at the end when nothing else uses it by then
(`cpuctl.give_back`); a keeper process (`cpuctl`, started before the write) does the same
after the sentinel has removed the cgroup when corecast could not (SIGKILL). A controller that
was on before is never touched.

A cgroup an earlier run left (its corecast and its sentinel both killed) is removed by the next
cgroup emulation when it is empty (`sweep`).
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ...collect import procs
from ...errors import UserError
from ...messages import note, warning
from . import cpuctl
from .hybrid import format_cpus

PERIOD_US = 10_000          # the bandwidth period: throttling within 10 ms keeps the slow CPU smooth
KINDS = ("auto", "cgroup", "stealer", "none")


def nice_weight(tid: int) -> int:
    """The scheduler's weight of a thread at its nice value (CFS: 1024 at nice 0, about 1.25 times
    more for each step down); 0 for a thread that is gone."""
    try:
        nice = os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return 0
    return int(round(1024 * 1.25 ** -nice))


def _rmdir(path: Path) -> None:
    """Remove a cgroup (one place, so that tests on a fake tree of plain folders can replace it)."""
    path.rmdir()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False                   # there, another user's
    return False


def sweep(parent: Path) -> None:
    """Remove the cgroups earlier runs left in `parent`: a `corecast-sched-PID` whose corecast is
    gone. The sentinel removes a run's cgroup when corecast dies; when the sentinel was killed
    with it (`pkill -9 -f corecast`, the OOM killer taking the group) nothing did, and a later
    run did not either. Only an empty cgroup is removed (the kernel refuses rmdir of one that
    holds a thread: then it is left, with a warning); a live run's (its pid is there) is never
    looked at."""
    try:
        found = sorted(p for p in parent.iterdir() if p.name.startswith(cpuctl.PREFIX))
    except OSError:
        return
    for p in found:
        pid = p.name[len(cpuctl.PREFIX):]
        if not pid.isdigit() or int(pid) == os.getpid() or not _gone(int(pid)) or p.is_symlink():
            continue
        try:
            for d in ("small", "big"):
                if (p / d).is_dir():
                    _rmdir(p / d)
            _rmdir(p)
        except FileNotFoundError:
            continue                   # its sentinel removed it meanwhile
        except OSError as err:
            warning(f"{p}, the cgroup of an earlier run (pid {pid}, gone), could not be removed: "
                    f"{err.strerror or err}")
            continue
        note(f"removed {p}, the cgroup an earlier run (pid {pid}) left when it was killed")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt()


class _TermAsInterrupt:
    """SIGTERM raises KeyboardInterrupt (as Ctrl-C does) while a cgroup emulation is set up, so
    that the `finally` and atexit clean-up runs instead of the process ending at once; only in
    the main thread, and only where SIGTERM had its default action (a handler someone else set
    is left alone)."""

    def __init__(self) -> None:
        self.old = None
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _raise_interrupt)
                self.old = signal.SIG_DFL
        except (ValueError, OSError):
            self.old = None

    def restore(self) -> None:
        if self.old is None or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) is _raise_interrupt:
                signal.signal(signal.SIGTERM, self.old)
        except (ValueError, OSError):
            pass
        self.old = None


_KEEPER_FDS: set[int] = set()      # the keepers' pipes: a forked child that does not exec closes them


def _forget_keepers() -> None:
    for fd in list(_KEEPER_FDS):
        try:
            os.close(fd)
        except OSError:
            pass
    _KEEPER_FDS.clear()


os.register_at_fork(after_in_child=_forget_keepers)


class _Keeper:
    """cpuctl.py run as a script: gives the cpu controller back after corecast died (see cpuctl)."""

    def __init__(self, mount: Path, cgroup: Path):
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                [sys.executable, "-I", cpuctl.__file__, str(mount), str(cgroup)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, start_new_session=True)
        except OSError as err:
            raise UserError(f"cannot start the keeper of the cpu controller ({sys.executable}): "
                            f"{err.strerror or err}") from None
        if self.proc.stdin is not None:
            _KEEPER_FDS.add(self.proc.stdin.fileno())

    def dismiss(self) -> None:
        """corecast gave the controller back itself (or never enabled it): the keeper ends."""
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.stdin is not None:
            _KEEPER_FDS.discard(p.stdin.fileno())
            try:
                p.stdin.write(b"done\n")
                p.stdin.close()
            except OSError:
                pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Emulation:
    kind = "none"

    def describe(self) -> str:
        return "no emulation: the CPUs run at their own speeds"

    def place(self, tid: int, small: bool) -> None:
        """Put a thread with the big or the small CPUs' limit."""

    def adopt(self, pid: int) -> None:
        """A new program's process (cgroup v2 moves processes into its subtree first)."""

    def close(self) -> None:
        pass


class _Cgroup(Emulation):
    def __init__(self, small: list[int], speed: float):
        self.small, self.speed = small, speed
        self.quota = max(1000, int(round(speed * PERIOD_US * len(small))))
        self.where: dict[int, bool] = {}

    def describe(self) -> str:
        return (f"EMULATED AMP: small CPUs {format_cpus(self.small)} slowed to {self.speed:.0%} of their "
                f"capacity by a {self.kind} bandwidth limit ({self.quota} µs every {PERIOD_US} µs for "
                f"{len(self.small)} CPU{'s' if len(self.small) > 1 else ''}); the big CPUs run at full speed")

    def _write(self, path: Path, text: str) -> None:
        try:
            path.write_text(text)
        except OSError as err:
            raise UserError(f"{path}: cannot write '{text.strip()}': {err.strerror or err}") from None


def _own_cgroup(mount: Path, controller: str = "cpu") -> Path:
    """This process's cgroup in a v1 hierarchy (where threads on big CPUs stay: a cgroup of their
    own would weigh as one task against the machine's other work, whatever their nice values)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if controller in ctrls.split(","):
                return mount / path.lstrip("/")
    except (OSError, ValueError):
        pass
    return mount


class CgroupV1(_Cgroup):
    kind = "cgroup v1 cpu.cfs_quota_us"

    def __init__(self, mount: Path, small: list[int], speed: float):
        super().__init__(small, speed)
        self.home = _own_cgroup(mount)
        self.base = self.home / f"corecast-sched-{os.getpid()}"
        sweep(self.home)
        self._term = _TermAsInterrupt()
        atexit.register(self.close)
        procs.track_cgroup(self.base)
        try:
            try:
                (self.base / "small").mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise UserError(f"{self.base}: cannot make the emulation's cgroup: {err.strerror or err}") from None
            self._write(self.base / "small" / "cpu.cfs_period_us", str(PERIOD_US))
            self._write(self.base / "small" / "cpu.cfs_quota_us", str(self.quota))
        except BaseException:
            self.close()
            raise

    def place(self, tid: int, small: bool) -> None:
        if self.where.get(tid, False) is small:
            return
        try:
            (self.base / "small" / "tasks" if small else self.home / "tasks").write_text(str(tid))
            self.where[tid] = small
        except ProcessLookupError:
            return                     # the thread ended meanwhile
        except OSError as err:
            if err.errno == 3:         # ESRCH
                return
            raise UserError(f"{self.base}: cannot move thread {tid}: {err.strerror or err}") from None
        self._weigh()

    def _weigh(self) -> None:
        """The small CPUs' cgroup weighs, against the machine's other work, what its threads
        would at their nice values outside it (a cgroup weighs as one nice-0 task by default:
        a thread at nice -15 on a small CPU lost to any busy neighbour, on a big CPU it did not)."""
        shares = sum(nice_weight(t) for t, s in self.where.items() if s)
        shares = min(max(shares, 2), 262144)                  # cpu.shares' range
        for d in (self.base, self.base / "small"):
            try:
                (d / "cpu.shares").write_text(str(shares))
            except OSError:
                pass                    # a kernel without it: the default weight stays

    def close(self) -> None:
        try:
            for line in (self.base / "small" / "tasks").read_text().split():
                try:
                    (self.home / "tasks").write_text(line)
                except OSError:
                    pass
            _rmdir(self.base / "small")
        except OSError:
            pass
        self._term.restore()
        try:
            _rmdir(self.base)
        except FileNotFoundError:
            pass
        except OSError:
            return                     # still busy: the sentinel keeps it and removes it later
        procs.untrack(self.base)


class CgroupV2(_Cgroup):
    kind = "cgroup v2 cpu.max"

    def __init__(self, mount: Path, small: list[int], speed: float):
        super().__init__(small, speed)
        self.mount = mount
        self.base = mount / f"corecast-sched-{os.getpid()}"
        sweep(mount)
        self.enabled_cpu = False       # this run enabled the root's cpu controller: it gives it back
        self.left_on: str | None = None    # why it was left enabled, when it was
        self._keeper: _Keeper | None = None
        self._done = False
        self._term = _TermAsInterrupt()
        atexit.register(self.close)
        procs.track_cgroup(self.base)
        try:
            try:
                self.base.mkdir(exist_ok=True)
            except OSError as err:
                raise UserError(f"{self.base}: cannot make the emulation's cgroup: {err.strerror or err}") from None
            before = cpuctl.enabled(mount)
            if before is None or "cpu" not in before:
                if before is not None:
                    self._keeper = _Keeper(mount, self.base)    # before the write, as the sentinel
                # unreadable before: whether it was on is not known, so it is never disabled.
                # Said before the write: a SIGTERM or Ctrl-C (KeyboardInterrupt) between the
                # write and this line left the controller on with the keeper dismissed; where
                # the write never happened, close() finds it off and has nothing to give back.
                self.enabled_cpu = before is not None
                try:
                    self._write(mount / "cgroup.subtree_control", "+cpu")
                except UserError:
                    self.enabled_cpu = False             # the kernel refused: it was not enabled
                    raise
            for d in ("big", "small"):
                try:
                    (self.base / d).mkdir(exist_ok=True)
                except OSError as err:
                    raise UserError(f"{self.base / d}: {err.strerror or err}") from None
                self._write(self.base / d / "cgroup.type", "threaded")
            self._write(self.base / "cgroup.subtree_control", "+cpu")
            self._write(self.base / "small" / "cpu.max", f"{self.quota} {PERIOD_US}")
        except BaseException:
            self.close()
            raise

    def adopt(self, pid: int) -> None:
        try:
            (self.base / "cgroup.procs").write_text(str(pid))
        except OSError as err:
            if err.errno != 3:
                raise UserError(f"{self.base}: cannot adopt process {pid}: {err.strerror or err}") from None

    def place(self, tid: int, small: bool) -> None:
        if self.where.get(tid) is small:
            return
        try:
            (self.base / ("small" if small else "big") / "cgroup.threads").write_text(str(tid))
            self.where[tid] = small
        except OSError as err:
            if err.errno == 3:
                return
            raise UserError(f"{self.base}: cannot move thread {tid}: {err.strerror or err}") from None

    def close(self) -> None:
        if self._done:
            return
        self._term.restore()
        try:
            pids = (self.base / "cgroup.procs").read_text().split()
        except OSError:
            pids = []
        for line in pids:              # back to the root: then the cgroups below can go
            try:
                (self.mount / "cgroup.procs").write_text(line)
            except OSError:
                pass
        for d in ("small", "big"):
            try:
                _rmdir(self.base / d)
            except OSError:
                pass
        try:
            _rmdir(self.base)
        except FileNotFoundError:
            pass
        except OSError:
            # still busy: the sentinel removes it when corecast ends, and the keeper then gives
            # the cpu controller back (its pipe closes at the same moment)
            return
        procs.untrack(self.base)
        if self.enabled_cpu:
            self.enabled_cpu = False
            self.left_on = cpuctl.give_back(self.mount, self.base.name)
            if self.left_on:
                warning(f"the cpu controller this run enabled is left enabled in "
                        f"{self.mount}/cgroup.subtree_control: {self.left_on}")
        if self._keeper is not None:
            self._keeper.dismiss()
            self._keeper = None
        self._done = True


_STEALER = r"""
import os, sys, time
cpu, busy, idle, parent = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
sys.stdout.write("ready\n"); sys.stdout.flush()
while os.getppid() == parent:
    end = time.perf_counter() + busy
    while time.perf_counter() < end:
        pass
    time.sleep(idle)
"""


class Stealer(Emulation):
    kind = "duty-cycle stealer"

    def __init__(self, small: list[int], speed: float):
        self.small, self.speed = small, speed
        self.procs: list[subprocess.Popen] = []
        busy = (1.0 - speed) * PERIOD_US / 1e6
        idle = speed * PERIOD_US / 1e6
        try:
            for c in small:
                p = subprocess.Popen([sys.executable, "-P", "-c", _STEALER, str(c), repr(busy), repr(idle), str(os.getpid())],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.procs.append(p)
                line = p.stdout.readline() if p.stdout else ""
                if line.strip() != "ready":
                    err = (p.stderr.read() if p.stderr else "").strip().splitlines()
                    raise UserError("the duty-cycle stealer could not start on CPU "
                                    f"{c}: {err[-1] if err else 'no reason given'} (it needs SCHED_FIFO: root)")
        except BaseException:
            self.close()
            raise

    def describe(self) -> str:
        return (f"EMULATED AMP: small CPUs {format_cpus(self.small)} slowed to {self.speed:.0%} by a duty-cycle "
                f"stealer (a SCHED_FIFO spinner taking {1 - self.speed:.0%} of every {PERIOD_US // 1000} ms); "
                "the big CPUs run at full speed")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.procs = []


def _mounts(root: Path) -> list[tuple[str, Path, set[str]]]:
    try:
        text = (root / "proc/self/mounts").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] in ("cgroup", "cgroup2"):
            out.append((f[2], root / f[1].lstrip("/"), set(f[3].split(","))))
    return out


def cgroup_mount(root: str | Path = "/") -> tuple[str, Path] | None:
    """Where a cgroup cpu controller can be used: ("v1", mount) or ("v2", mount), or None."""
    root = Path(root)
    for kind, mnt, opts in _mounts(root):
        if kind == "cgroup" and "cpu" in opts:
            return "v1", mnt
    for kind, mnt, opts in _mounts(root):
        if kind == "cgroup2":
            try:
                if "cpu" in (mnt / "cgroup.controllers").read_text().split():
                    return "v2", mnt
            except OSError:
                continue
    return None


def make(kind: str, small: list[int], speed: float, root: str | Path = "/") -> Emulation:
    """The emulation asked for (`auto`: a cgroup where one is usable, else the stealer)."""
    if kind not in KINDS:
        raise UserError(f"--emulate {kind}: choose {', '.join(KINDS)}")
    if kind == "none":
        return Emulation()
    if not (0 < speed < 1):
        raise UserError(f"--small-speed {speed}: the small CPUs' emulated speed must be between 0 and 1")
    if kind in ("auto", "cgroup"):
        found = cgroup_mount(root)
        if found is not None:
            v, mnt = found
            return CgroupV1(mnt, small, speed) if v == "v1" else CgroupV2(mnt, small, speed)
        if kind == "cgroup":
            raise UserError("--emulate cgroup: no cgroup cpu controller is mounted (v1 'cpu' or v2 with "
                            "'cpu' in cgroup.controllers); try --emulate stealer")
    return Stealer(small, speed)
