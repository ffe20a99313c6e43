"""ctypes face of native/sched/sched.c: the quanta between events of the ranked policies."""
from __future__ import annotations

import ctypes as C
from typing import Any

import numpy as np

from ..native import native_path

_D = C.POINTER(C.c_double)
_I = C.POINTER(C.c_int64)
_B = C.POINTER(C.c_uint8)


class _State(C.Structure):
    _fields_ = [
        ("T", C.c_int64), ("K", C.c_int64), ("A", C.c_int64),
        ("kind", C.c_int64), ("source", C.c_int64), ("any_dynamic", C.c_int64),
        ("t", C.c_double), ("next_dec", C.c_double), ("until", C.c_double), ("max_time", C.c_double),
        ("quantum", C.c_double), ("mig_cost", C.c_double), ("idle_power", C.c_double),
        ("energy", C.c_double), ("migrations", C.c_double),
        ("decisions", C.c_int64),
        ("counts", _D), ("speeds", _D), ("active_w", _D), ("idle_w", _D), ("pos", _D),
        ("busy", _D),
        ("app", _I), ("weight", _D), ("runnable", _B), ("tdyn", _B),
        ("R", _D),
        ("seg_left", _D), ("S", _D), ("last_row", _D), ("cpu", _D), ("rtime", _D), ("work", _D),
        ("progress", _D), ("sf_seen", _D),
        ("alone_progress", _D), ("alone_rate", _D),
        ("dom", _I),
        ("sf_true", _D), ("sf_est_rows", _D),
        ("offset", _D),
        ("needs_sample", _B),
        ("pool", _D), ("dynamic", _B), ("finished", _B), ("app_threads", _D), ("app_weight", _D),
        ("acc_cpu", _D), ("acc_work", _D), ("last", _D), ("avg", _D), ("nsmp", _D), ("ssf", _D),
        ("valid", _B),
        ("window", C.c_double), ("noise", C.c_double), ("threshold", C.c_double),
        ("round_s", C.c_double), ("next_round", C.c_double),
        ("rng", C.c_uint64),
        ("samples", C.c_int64), ("phase_rounds", C.c_int64),
        ("done", _I), ("ndone", C.c_int64), ("apps_done", _I), ("napps_done", C.c_int64),
        ("key", _D), ("key2", _D), ("rate", _D), ("wbuf", _D),
        ("order", _I), ("tmp", _I), ("run", _I),
        ("abuf", _D),
    ]


_LIB: Any = None


def lib() -> Any:
    global _LIB
    if _LIB is None:
        L = C.CDLL(str(native_path("libcorecast_sched.so")))
        L.cc_sched_run.argtypes = [C.POINTER(_State)]
        L.cc_sched_run.restype = C.c_int
        _LIB = L
    return _LIB


def _p(a: np.ndarray, t: Any) -> Any:
    assert a.flags.c_contiguous, "native sched: arrays must be contiguous"
    return a.ctypes.data_as(t)


class Loop:
    """Runs the simulator's quanta natively for a ranked policy (`engine._native_loop`)."""

    SOURCES = {"true": 0, "ipc-sampling": 1, "model": 2}

    def __init__(self, sim: Any):
        self.sim = sim
        self.L = lib()
        T, A = sim.T, sim.A
        self.scratch = [np.zeros(T) for _ in range(4)] + [np.zeros(T, dtype=np.int64) for _ in range(3)] \
            + [np.zeros(max(A, 1))]
        self.done = np.zeros(T, dtype=np.int64)
        self.apps_done = np.zeros(max(A, 1), dtype=np.int64)
        self.app_threads = sim.view.app_threads.astype(float)
        self.tdyn = sim.tdyn.astype(np.uint8)
        self.dynamic = sim.dynamic.astype(np.uint8)
        self.zeros_tk = np.zeros((T, sim.K))
        self.offset = getattr(sim.policy, "offset", None)
        if self.offset is None:
            self.offset = np.zeros(T)

    @classmethod
    def create(cls, sim: Any) -> "Loop | None":
        try:
            return cls(sim)
        except Exception:       # the library missing: the Python loop does the same work
            return None

    def run(self, next_dec: float, until: float) -> tuple[int, np.ndarray, np.ndarray]:
        s = self.sim
        o = s.o
        st = _State()
        st.T, st.K, st.A = s.T, s.K, s.A
        st.kind = s.policy.kind
        st.source = self.SOURCES[s.source]
        st.any_dynamic = int(s.any_dynamic)
        st.t, st.next_dec, st.until, st.max_time = s.t, next_dec, until, o.max_time
        st.quantum, st.mig_cost, st.idle_power = o.quantum, o.migration_cost, s.idle_power
        st.energy, st.migrations, st.decisions = s.energy, s.migrations, s.decisions
        keep = []          # every array handed to C lives until the call returns
        for name, arr in (("counts", s.counts), ("speeds", s.m.speeds), ("active_w", s.active_w),
                          ("idle_w", s.idle_w), ("pos", s.pos), ("busy", s.busy), ("weight", s.weight),
                          ("R", s.R), ("seg_left", s.seg_left), ("S", s.S), ("last_row", s.last_row),
                          ("cpu", s.cpu), ("rtime", s.rtime), ("work", s.work), ("progress", s.progress),
                          ("alone_progress", s.alone_progress), ("alone_rate", s.alone_rate),
                          ("sf_seen", s.sf_seen), ("sf_true", s.sf_true), ("sf_est_rows", s.sf_est_rows),
                          ("offset", self.offset), ("pool", s.pool), ("app_threads", self.app_threads),
                          ("app_weight", s.view.app_weight)):
            arr = np.ascontiguousarray(arr, dtype=float)
            keep.append(arr)
            setattr(st, name, _p(arr, _D))
        st.app = _p(s.tapp, _I)
        st.dom = _p(s.dom, _I)
        st.runnable = _p(s.runnable.view(np.uint8), _B)
        st.finished = _p(s.finished.view(np.uint8), _B)
        st.tdyn = _p(self.tdyn, _B)
        st.dynamic = _p(self.dynamic, _B)
        st.needs_sample = _p(s.view.needs_sample.view(np.uint8), _B)
        sm = s.sampler
        if sm is not None:
            for name, arr in (("acc_cpu", sm.acc_cpu), ("acc_work", sm.acc_work), ("last", sm.last),
                              ("avg", sm.avg), ("nsmp", sm.n), ("ssf", sm.sf)):
                setattr(st, name, _p(arr, _D))
            st.valid = _p(sm.valid.view(np.uint8), _B)
            st.window, st.noise, st.threshold = sm.window, sm.noise, sm.threshold
            st.round_s, st.next_round, st.rng = sm.round_s, sm.next_round, sm.rng.state
            st.samples, st.phase_rounds = sm.samples, sm.phase_rounds
        else:
            z = _p(self.zeros_tk, _D)
            st.acc_cpu = st.acc_work = st.last = st.avg = st.nsmp = z
            st.ssf = _p(s.sf_seen, _D)
            st.valid = _p(s.view.needs_sample.view(np.uint8), _B)
            st.next_round = float("inf")
        st.done, st.apps_done = _p(self.done, _I), _p(self.apps_done, _I)
        k1, k2, rate, wb, order, tmp, run, ab = self.scratch
        st.key, st.key2, st.rate, st.wbuf = (_p(a, _D) for a in (k1, k2, rate, wb))
        st.order, st.tmp, st.run = (_p(a, _I) for a in (order, tmp, run))
        st.abuf = _p(ab, _D)
        assert s.S.flags.c_contiguous and s.S.dtype == float
        status = self.L.cc_sched_run(C.byref(st))
        del keep
        s.t, s.energy, s.migrations, s.decisions = st.t, st.energy, st.migrations, st.decisions
        if sm is not None:
            sm.next_round, sm.samples, sm.phase_rounds = st.next_round, st.samples, st.phase_rounds
            sm.rng.state = st.rng
        if status == 2:
            from ..errors import UserError
            raise UserError(f"{s.wl.name}: still running after {o.max_time:g} simulated seconds "
                            f"under {s.policy.name}: is a thread starved?")
        if status == 3:
            raise RuntimeError("native sched loop: nothing can progress")
        return status, self.done[: st.ndone].copy(), self.apps_done[: st.napps_done].copy()
