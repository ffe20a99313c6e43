"""The built-in policies: HSP, RR, A-DWRR, EQP, ACFS, an energy-aware one and a CFS-like
baseline; and the two references the metrics need (an application alone, the all-small machine).

Where each rule comes from, and what was chosen here, is in docs/sched.md. In short:

- hsp: big cores to the applications that gain most from them, ranked by the application-wide
  speedup a big core brings, (SF - 1) / TLP (CAMP's utility of a parallel application falls with
  the threads that cannot all have a big core); an application's threads take turns on what it
  was given.
- rr: big cores shared equally among applications: every `period` the big cores pass to the
  next applications in a circular order (periodic migrations).
- adwrr: every thread gets equal CPU time scaled by the computing power (speed) of the cores it
  ran on, weighted by priority; the least served threads run on the fastest cores.
- eqp: equal progress per thread: the threads with the highest estimated slowdown,
  (c_big + c_small) / (c_big + c_small / SF), run on the big cores each quantum; SF by IPC sampling.
- acfs: equal slowdown per application: per-thread progress counters (CPU time scaled to
  big-core time with the thread's SF), an application's slowdown is its threads' mean of
  runnable time over progress; weighted by priority, the most slowed applications get the big
  cores each quantum.
- energy: the placement that minimises the energy-delay product of finishing the remaining work
  at the current rates (power / throughput^2), big cores to the highest SFs.
- cfs: asymmetry-agnostic: per-core run queues, a waking thread goes to an idle core else its
  previous one, idle cores pull threads from the busiest; speed is never looked at.
"""
from __future__ import annotations

from abc import abstractmethod
import math
import os
from pathlib import Path
import stat
import sys
import types

import numpy as np

from ..errors import UserError, read_fd
from .policy import Policy, View, fair_shares, ranked, sample_first, spread


def _slow_rows(v: View, demand: np.ndarray) -> np.ndarray:
    """Rows on the slower types for threads that each need a slower core `demand` of their time:
    fastest slow types first; when the demand is more than the slow cores, shared evenly."""
    K = v.types
    rows = np.zeros((len(demand), K))
    if K == 1 or len(demand) == 0:
        return rows
    D = float(demand.sum())
    if D <= 0:
        return rows
    used = np.zeros(K)
    left = D
    for k in range(1, K):
        used[k] = min(v.counts[k], left)
        left -= used[k]
    factor = min(1.0, used.sum() / D)
    return np.outer(demand * factor, used / used.sum())


class HSP(Policy):
    """HSP: big cores to the applications with the highest application-wide speedup."""

    name = "hsp"
    label = "HSP"
    period = None          # the ranking changes only when threads start or stop
    trusted = True

    def decide(self, v: View) -> np.ndarray:
        run = v.runnable
        if v.types == 1 or len(run) == 0:
            return ranked(v, run)
        A = len(v.app_threads)
        tlp = v.app_runnable
        sf_sum = np.bincount(v.app[run], weights=v.sf[run], minlength=A)
        sf = np.where(tlp > 0, sf_sum / np.maximum(tlp, 1), 1.0)
        # the whole application's speedup with b of its tlp threads' time on big cores is
        # 1 + (SF - 1) * b / tlp: what one big core brings is (SF - 1) / tlp
        gain = (sf - 1.0) / np.maximum(tlp, 1)
        big = np.zeros(A)
        free = float(v.counts[0])
        order = np.argsort(-gain, kind="stable")
        for a in order:
            if tlp[a] == 0 or free <= 0 or gain[a] <= 0:
                continue
            big[a] = min(free, tlp[a])
            free -= big[a]
        # big cores nobody gains from: still better than threads waiting for a slow core
        waiting = float((tlp - big).sum()) - float(v.counts[1:].sum())
        for a in order:
            if free <= 0 or waiting <= 0:
                break
            extra = min(free, tlp[a] - big[a], waiting)
            big[a] += extra
            free -= extra
            waiting -= extra
        S = np.zeros((v.threads, v.types))
        f_big = big[v.app[run]] / tlp[v.app[run]]          # each thread's time on big cores
        S[run, 0] = f_big
        S[run] += _slow_rows(v, 1.0 - f_big)
        return S


class RR(Policy):
    """RR: big cores fair-shared among applications, passed on every period (periodic migrations)."""

    name = "rr"
    label = "RR"
    period = None
    period_s = 0.1
    trusted = True

    def setup(self, v: View) -> None:
        A = len(v.app_threads)
        self.next_app = 0
        self.cursor = np.zeros(A, dtype=np.int64)
        self.holders: list[int] = []
        self.next_swap = 0.0

    def decide(self, v: View) -> np.ndarray:
        run = v.runnable
        if v.types == 1 or len(run) == 0:
            return ranked(v, run)
        A = len(v.app_threads)
        B = int(v.counts[0])
        swap = v.time >= self.next_swap - 1e-9 * v.quantum or not any(v.app_runnable[a] for a in self.holders)
        if swap:
            self.next_swap = v.time + max(1, round(self.period_s / v.quantum)) * v.quantum
            holders, got, a = [], 0, self.next_app
            for _ in range(A):
                if got >= B:
                    break
                if v.app_runnable[a] > 0:
                    holders.append(a)
                    got += int(v.app_runnable[a])
                a = (a + 1) % A
            self.holders, self.next_app = holders, a
        big: list[int] = []
        for a in self.holders:
            th = run[v.app[run] == a]
            if len(th) == 0:
                continue
            take = np.roll(th, -int(self.cursor[a] % len(th)))[: B - len(big)]
            big.extend(take.tolist())
            if swap:
                self.cursor[a] += len(take)
            if len(big) >= B:
                break
        # the others in circular order from the next application (they fill big cores left free)
        rest = run[~np.isin(run, big)]
        rest = rest[np.argsort((v.app[rest] - self.next_app) % A, kind="stable")]
        return ranked(v, np.concatenate([np.array(big, dtype=np.int64), rest]))


class _Ranked(Policy):
    """A policy that ranks the runnable threads every quantum and fills the cores fastest first
    in that order (`ranked`); IPC sampling's wishes go first. `kind` names the same ranking in
    the native loop (native/sched/sched.c), which runs the quanta between events for these
    policies; `order` is the reference, and tests hold the two equal."""

    period = 1
    trusted = True
    kind = 0

    @abstractmethod
    def order(self, v: View) -> np.ndarray:
        """The runnable threads, most deserving of a big core first."""

    def decide(self, v: View) -> np.ndarray | None:
        if len(v.runnable) == 0:
            return None
        return ranked(v, sample_first(v, self.order(v)))


class ADWRR(_Ranked):
    """A-DWRR: equal CPU time scaled by core speed per thread (weighted); least served on the fastest cores."""

    name = "adwrr"
    label = "A-DWRR"
    kind = 1

    def setup(self, v: View) -> None:
        self.offset = np.zeros(v.threads)      # where a thread joined the others' virtual time
        self.last_run = v.run_id.copy()

    def vtime(self, v: View) -> np.ndarray:
        return (v.cpu * v.speeds).sum(1) / v.weight * 1024.0 + self.offset

    def order(self, v: View) -> np.ndarray:
        run = v.runnable
        new = v.run_id != self.last_run
        if new.any():
            # a restarted application's threads join at the least virtual time of the others
            # (as CFS places a new task at min_vruntime), not at zero
            self.offset[new] = 0.0
            others = run[~new[run]]
            self.offset[new] = self.vtime(v)[others].min() if len(others) else 0.0
            self.last_run = v.run_id.copy()
        return run[np.argsort(self.vtime(v)[run], kind="stable")]


class EQP(_Ranked):
    """EQP: equal progress per thread; the highest estimated slowdowns run on the big cores (IPC-sampled SF)."""

    name = "eqp"
    label = "EQP"
    kind = 2
    default_sf_source = "ipc-sampling"

    def order(self, v: View) -> np.ndarray:
        run = v.runnable
        cb = v.cpu[run, 0]
        cs = v.cpu[run, 1:].sum(1)
        sf = np.maximum(v.sf[run], 1e-9)
        tot = cb + cs
        slow = np.where(tot > 0, tot / np.maximum(cb + cs / sf, 1e-300), 1.0)
        return run[np.argsort(-slow, kind="stable")]


class ACFS(_Ranked):
    """ACFS: equal slowdown per application (weighted by priority) from per-thread progress counters."""

    name = "acfs"
    label = "ACFS"
    kind = 3
    #: what a thread's slowdown is measured against: "alone" (its application alone on the AMP
    #: with its TLP: the slowdown the metrics report) or "big" (a big core of its own)
    reference = "alone"

    def __init__(self, reference: str = "alone"):
        if reference not in ("alone", "big"):
            raise UserError(f"acfs reference '{reference}': choose alone or big")
        self.reference = reference
        if reference == "big":
            self.kind = 4

    def order(self, v: View) -> np.ndarray:
        run = v.runnable
        prog = v.alone_progress if self.reference == "alone" else v.progress
        sd = np.where(prog > 1e-12, v.runnable_time / np.maximum(prog, 1e-12), 1.0)
        app_sd = np.bincount(v.app, weights=sd, minlength=len(v.app_threads)) / v.app_threads
        # priorities: a heavier application should see a proportionally smaller slowdown
        key = app_sd * v.app_weight / 1024.0
        # the most slowed applications first; inside one, its most slowed threads first
        return run[np.lexsort((-sd[run], -key[v.app[run]]))]


class Energy(Policy):
    """energy: the placement of least energy-delay product for the remaining work (big cores to the highest SFs)."""

    name = "energy"
    period = None
    trusted = True

    def decide(self, v: View) -> np.ndarray | None:
        run = v.runnable
        if len(run) == 0:
            return None
        if v.types == 1:
            return ranked(v, run)
        K = v.types
        act = np.array([t.active_w for t in v.machine.types])
        idle = np.array([t.idle_w for t in v.machine.types])
        order = run[np.argsort(-v.sf[run], kind="stable")]
        pos = (v.speeds[0] - v.speeds) / (v.speeds[0] - v.speeds[-1])
        rate = 1.0 / (1.0 + np.outer(np.maximum(v.sf[order], 1e-9) - 1.0, pos))   # (n, K)
        base = float((v.counts * idle).sum())
        n, B = len(order), int(v.counts[0])
        cap = int(v.counts[1:].sum())
        best, choice = (math.inf, 0.0), (min(B, n), min(cap, n - min(B, n)))
        for kb in range(min(B, n) + 1):
            rest = n - kb
            for ks in range(min(cap, rest) + 1):
                if kb + ks == 0:
                    continue
                sh = fair_shares(v.weight[order[kb:]], ks) if rest else np.zeros(0)
                used = self._used(v, ks)
                frac = used / max(used.sum(), 1e-300)
                x = kb + float(sh @ (rate[kb:] @ frac)) if rest else float(kb)
                busy_slow = used * (sh.sum() / ks if ks else 0.0)
                p = base + kb * (act[0] - idle[0]) + float((busy_slow * (act - idle)).sum())
                if x <= 0:
                    continue
                # least EDP rate; between equals (no power figures) the higher throughput
                score = (p / (x * x), -x)
                if score[0] < best[0] * (1 - 1e-12) or (score[0] <= best[0] * (1 + 1e-12) and score[1] < best[1]):
                    best, choice = score, (kb, ks)
        kb, ks = choice
        S = np.zeros((v.threads, K))
        S[order[:kb], 0] = 1.0
        rest = order[kb:]
        if len(rest) and ks:
            used = self._used(v, ks)
            S[rest] = np.outer(fair_shares(v.weight[rest], ks), used / used.sum())
        return S

    @staticmethod
    def _used(v: View, ks: int) -> np.ndarray:
        used = np.zeros(v.types)
        left = float(ks)
        for k in range(1, v.types):
            used[k] = min(v.counts[k], left)
            left -= used[k]
        return used


class CFS(Policy):
    """cfs: asymmetry-agnostic, per-core run queues (wake to an idle core, idle cores pull from the busiest)."""

    name = "cfs"
    label = "CFS"
    period = None
    trusted = True

    def setup(self, v: View) -> None:
        self.ncores = int(v.counts.sum())
        self.ctype = np.repeat(np.arange(v.types), v.counts.astype(int))
        self.core = np.full(v.threads, -1, dtype=np.int64)
        self.was = np.zeros(v.threads, dtype=bool)
        self.rank = v.rng.permutation(self.ncores)     # the order in which cores are tried
        self.rng = v.rng

    def decide(self, v: View) -> np.ndarray:
        run = v.runnable
        load = np.zeros(self.ncores)
        stay = run[self.was[run] & (self.core[run] >= 0)]
        np.add.at(load, self.core[stay], v.weight[stay])
        for i in run[~self.was[run] | (self.core[run] < 0)]:
            # a thread that starts or wakes: an idle core, else its previous core, else the least loaded
            idle = np.flatnonzero(load == 0)
            if len(idle):
                c = int(idle[np.argmin(self.rank[idle])]) if self.core[i] < 0 else int(self.rng.choice(idle))
            elif self.core[i] >= 0:
                c = int(self.core[i])
            else:
                c = int(np.argmin(load + self.rank / (10.0 * self.ncores)))
            self.core[i] = c
            load[c] += v.weight[i]
        # idle cores pull a thread from the busiest queue (one with two or more threads)
        while len(run):
            idle = np.flatnonzero(load == 0)
            if not len(idle):
                break
            cnt = np.bincount(self.core[run], minlength=self.ncores)
            busiest = int(np.argmax(cnt))
            if cnt[busiest] < 2:
                break
            i = int(self.rng.choice(run[self.core[run] == busiest]))
            dst = int(self.rng.choice(idle))
            load[busiest] -= v.weight[i]
            load[dst] += v.weight[i]
            self.core[i] = dst
        self.was[:] = False
        self.was[run] = True
        S = np.zeros((v.threads, v.types))
        for c in np.unique(self.core[run]):
            th = run[self.core[run] == c]
            S[th, self.ctype[c]] = v.weight[th] / v.weight[th].sum()
        return S


# ------------------------------------------------------------------------ references
def _everywhere(v: View, run: np.ndarray) -> np.ndarray:
    """Every thread of `run` an equal (weighted) share of every core."""
    S = np.zeros((v.threads, v.types))
    if len(run):
        S[run] = np.outer(fair_shares(v.weight[run], v.counts.sum()), v.counts / v.counts.sum())
    return S


class Alone(Policy):
    """alone: the reference of slowdowns -- runnable threads take turns on the fastest cores, one per core."""

    name = "alone"
    period = None
    trusted = True

    def decide(self, v: View) -> np.ndarray:
        run = v.runnable
        return _everywhere(v, run) if len(run) > v.counts.sum() else spread(v, run)


class FairShare(Policy):
    """fair: every runnable thread an equal (weighted) share of every core -- the all-small reference of ASP."""

    name = "fair"
    period = None
    trusted = True

    def decide(self, v: View) -> np.ndarray:
        return _everywhere(v, v.runnable)


class ACFSBig(ACFS):
    """acfs-big: ACFS with slowdowns measured against a big core rather than the application alone."""

    name = "acfs-big"
    label = "ACFS (big ref.)"

    def __init__(self) -> None:
        super().__init__("big")


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (HSP, RR, ADWRR, EQP, ACFS, Energy, CFS)}
VARIANTS: dict[str, type[Policy]] = {ACFSBig.name: ACFSBig}
REFERENCES: dict[str, type[Policy]] = {p.name: p for p in (Alone, FairShare)}


def register(cls: type[Policy]) -> type[Policy]:
    """Add a policy class to the registry under its `name` (usable as a class decorator): `sched
    sim` compares it with the others by default, `sched policies` lists it, `--policy NAME`
    and experiment files take it. Its name must be new."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"{cls!r} is not a subclass of corecast.sched.Policy")
    if cls.name in POLICIES or cls.name in VARIANTS or cls.name in REFERENCES or cls.name == Policy.name:
        raise ValueError(f"policy '{cls.name}' registered twice (give the class a name of its own)")
    POLICIES[cls.name] = cls
    return cls


def policy_names() -> list[str]:
    return list(POLICIES)


def make_policy(spec: str, period_s: float | None = None) -> Policy:
    """A policy by name, or a user's class: FILE.py:ClassName (a subclass of Policy); `period_s`
    replaces the period of a periodic policy (RR's migrations)."""
    pol = _make(spec)
    if period_s is not None:
        if not (period_s > 0 and math.isfinite(period_s)):
            raise UserError(f"--period {period_s}: must be a positive time")
        if getattr(pol, "period_s", None) is None:
            raise UserError(f"--period: policy {pol.name} has no period of its own (it decides "
                            f"{'every quantum' if pol.period == 1 else 'when threads start or stop'})")
        pol.period_s = period_s
    return pol


def _make(spec: str) -> Policy:
    if spec in POLICIES:
        return POLICIES[spec]()
    if spec in REFERENCES:
        return REFERENCES[spec]()
    if spec in VARIANTS:
        return VARIANTS[spec]()
    if ":" in spec and spec.split(":", 1)[0].endswith(".py"):
        return _user_policy(spec)
    raise UserError(f"unknown policy '{spec}': choose {', '.join([*POLICIES, *VARIANTS])} or give FILE.py:ClassName")


#: The largest policy file read (a policy is a class; a larger file is a mistake).
MAX_POLICY_BYTES = 4 << 20


def _policy_source(path: str) -> str:
    """The text of a user's policy file, read from the file whose owner and mode were checked
    (one open: no name swapped in between). It is code corecast runs as the user running it --
    root, for `sched run` -- so it must be that user's or root's and writable by no one else:
    another user's file, or one anyone may write, in /tmp say, would be that user's code run as
    root. No bytecode cache is read or written beside it (Python's import machinery would read a
    `__pycache__/NAME.cpython-*.pyc` another user planted there, matching the source's time and
    size, instead of the source checked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UserError(f"{path}: no such policy file") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read the policy file ({err.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path}: not a regular file (a policy is a Python file)")
        if st.st_uid not in (os.geteuid(), 0):
            raise UserError(f"{path}: owned by uid {st.st_uid}, not by you or root: its code is not run "
                            "(a policy file is code corecast runs as you)")
        if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid not in (os.getegid(), 0)):
            raise UserError(f"{path}: writable by {'anyone' if st.st_mode & stat.S_IWOTH else f'group {st.st_gid}'}: "
                            "its code is not run (chmod go-w it)")
        data = read_fd(fd, path, "policy file", MAX_POLICY_BYTES, regular=True)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text (a policy is a Python file)") from None


def _user_policy(spec: str) -> Policy:
    path, cls = spec.rsplit(":", 1)
    p = Path(path)
    source = _policy_source(path)
    name = f"corecast_user_policy_{p.stem}"
    mod = types.ModuleType(name)
    mod.__file__ = str(p)
    try:
        code = compile(source, str(p), "exec", dont_inherit=True)
        sys.modules[name] = mod          # what a class's module is looked up as (dataclasses, pickle)
        exec(code, mod.__dict__)
    except Exception as err:  # a user's file: any failure is their mistake
        raise UserError(f"{path}: {type(err).__name__}: {err}") from None
    except SystemExit as err:  # sys.exit() in it ended corecast with that status, saying nothing
        raise UserError(f"{path}: called sys.exit({err.code!r}) as it was loaded (a policy file only "
                        "defines its class)") from None
    klass = getattr(mod, cls, None)
    if not (isinstance(klass, type) and issubclass(klass, Policy)):
        raise UserError(f"{spec}: {path} has no class {cls} derived from corecast.sched.Policy")
    try:
        obj = klass()
    except Exception as err:
        raise UserError(f"{spec}: {type(err).__name__}: {err}") from None
    obj.trusted = False
    return obj
