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
is left in it and removes it. `close()` removes it on every other path.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ...collect import procs
from ...errors import UserError
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
            (self.base / "small").rmdir()
        except OSError:
            pass
        try:
            self.base.rmdir()
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
        procs.track_cgroup(self.base)
        try:
            try:
                self.base.mkdir(exist_ok=True)
            except OSError as err:
                raise UserError(f"{self.base}: cannot make the emulation's cgroup: {err.strerror or err}") from None
            self._write(mount / "cgroup.subtree_control", "+cpu")
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
        for d in ("small", "big"):
            try:
                (self.base / d).rmdir()
            except OSError:
                pass
        try:
            for line in (self.base / "cgroup.procs").read_text().split():
                try:
                    (self.mount / "cgroup.procs").write_text(line)
                except OSError:
                    pass
            self.base.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return                     # still busy: the sentinel keeps it and removes it later
        procs.untrack(self.base)


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
