"""Real programs through `corecast measure` -> `corecast predict` at 1 and 2 cores (the list is
bench/real_programs.toml, read by bench/realprog.py, which bench/real_programs.py tabulates).

Every program: the campaign succeeds, the prediction is finite with a band of non-zero width that
never lies wholly beyond the 2-core measurement without a stated cause, and every wait has a
verdict. The proofs of issue 29: `xz -T` keeps its 2-core time or better at 4 and 8 cores and
no wait is named a bottleneck; a coordinator waiting on a condition variable for independent
workers is predicted within 15% of linear at 8 cores on an 8-core target; lockbench still names
its lock. Each campaign is measured once and shared by the tests that read it. Times are compared
with the same run's own measurements, never with a constant (the machine is shared)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import realprog  # noqa: E402

PROGRAMS = realprog.load()
CORES = [1, 2]
#: the proofs' programs get more repetitions (their medians decide)
REPS = {"xz": 3, "coord": 3, "lockbench": 3}
#: work (items, blocks, ...) per run, as a multiple of the list's: the coordinator's 96 items take
#: about 0.2 s at 1 core, short enough that another program's burst on a loaded machine moves its
#: interference-free time by tens of percent (predicted 4.1x instead of 8x under stress-ng --cpu 4)
SCALE = {"coord": 4}
#: the campaigns run at this niceness (as root): what a performance engineer does on a shared
#: machine. Beside stress-ng --cpu 2 other processes took 66% of the coordinator's core-time at
#: niceness 0, and a lock holder preempted by them made idle waits no run-queue correction can
#: take out (the two-point prediction was 2.3x at 8 cores, not 8x; the interference warning said
#: so); at -19 the program gets ~99% of its cores.
NICE = -19 if os.geteuid() == 0 else None

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")


#: a proof's campaign is measured again (`measured(name, quiet=True)`) while its run-to-run
#: noise (σ of the log interference-free time) or the share of its core-time other processes
#: took (at any count) is above these
QUIET_NOISE = 0.15
QUIET_INTERFERENCE = 0.05


def _noise(doc: dict) -> float:
    return float((doc.get("lost_core_time") or {}).get("noise") or 0.0)


def _interference(doc: dict) -> float:
    counts = (doc.get("lost_core_time") or {}).get("per_count") or []
    return max((c["interference_core_s"] / c["core_s"] for c in counts if c.get("core_s")), default=0.0)


def _busy(doc: dict) -> float:
    """How far the campaign is from a quiet one (0: quiet)."""
    return max(_noise(doc) / QUIET_NOISE, _interference(doc) / QUIET_INTERFERENCE, 1.0) - 1.0


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """name -> (campaign file, `predict --cores 4,8,16 --json`), each measured at most once."""
    work = tmp_path_factory.mktemp("realprog")
    cache: dict[str, tuple[Path, dict]] = {}

    def once(name: str, attempt: int) -> tuple[Path, dict]:
        p = PROGRAMS[name]
        vals = realprog.prepare(p, work, scale=SCALE.get(name, 1))
        db = work / f"{name}-{attempt}.db"
        r = realprog.campaign(p, vals, CORES, REPS.get(name, 2), db, timeout=120, nice=NICE)
        assert r.returncode == 0, f"{name}: corecast measure failed:\n{r.stderr[-2000:]}"
        return db, realprog.predict(db, [4, 8, 16])

    def get(name: str, quiet: bool = False) -> tuple[Path, dict]:
        """The campaign of `name`; `quiet`: measured again (twice at most) while its repetitions
        spread more than QUIET_NOISE or other processes took more than QUIET_INTERFERENCE of
        its core-time, and the quietest kept -- what a user does whose machine was busy: beside
        other jobs on the shared 2-core CI machine the noise reached 40%, and the core-time
        lost to scaling, estimated from times corrected for the others' share, fell so far that
        the lock's charged part was 0.05% of it."""
        if name not in cache:
            p = PROGRAMS[name]
            if p.missing():
                pytest.skip(f"not installed: {', '.join(p.missing())} (scripts/setup.sh installs "
                            "setup/debian-packages.txt)")
            cache[name] = once(name, 0)
        if quiet:
            for attempt in (1, 2):
                if _busy(cache[name][1]) == 0:
                    break
                again = once(name, attempt)
                if _busy(again[1]) < _busy(cache[name][1]):
                    cache[name] = again
        return cache[name]

    return get


def _params():
    for name, p in PROGRAMS.items():
        yield pytest.param(name, marks=[pytest.mark.slow] if p.slow else [], id=name)


def test_the_list_is_complete_and_runs_at_any_core_count():
    assert {"xz", "zstd", "pigz", "sort", "make", "numpy-blas", "sysbench-cpu", "memcached", "lockbench",
            "pool", "barrier", "membw", "phases", "coord"} <= set(PROGRAMS)
    vals = {"input": "IN", "dir": "DIR", "python": "PY", "script": "S.py", "port": "1234", "scale": "8", "user": ""}
    for p in PROGRAMS.values():
        args = realprog.measure_args(p, vals, [1, 2, 4, 8, 16], 3, Path("x.db"))
        assert args[args.index("--cores") + 1] == "1,2,4,8,16"
        cmd = " ".join(args[args.index("--") + 1:])
        assert "@" not in cmd, (p.name, cmd)                       # every placeholder of realprog filled
        assert "{threads}" in " ".join(args), p.name                # the thread count follows the cores
        assert p.known and p.kind in realprog.KINDS


@pytest.mark.parametrize("name", list(_params()))
def test_a_real_program_is_measured_and_predicted(measured, name):
    db, doc = measured(name)
    preds = doc["predictions"]
    assert [q["cores"] for q in preds] == [4, 8, 16]
    lost = doc["lost_core_time"]
    assert lost is not None and lost["cpu_time_known"], "a campaign records the CPU time"
    (c1, c2) = lost["per_count"]
    assert c1["cpu_s"] > 0 and c2["cpu_s"] > 0
    assert 0 < c2["interference_free_wall_s"] <= c2["wall_s"] * (1 + 1e-9)
    t2 = c2["interference_free_wall_s"]
    for q in preds:
        assert np.isfinite(q["time_s"]) and q["time_s"] > 0
        assert q["low"] < q["time_s"] < q["high"], f"{name}: a band of zero width at {q['cores']}"
        if q["low"] > t2:                        # wholly slower than measured at 2: the cause is stated
            assert any("grows faster than the cores" in w for w in doc["warnings"]), (name, q, doc["warnings"])
        if q["high"] < t2 * 2 / q["cores"]:      # wholly faster than linear: never
            pytest.fail(f"{name}: band wholly faster than linear at {q['cores']}: {q}")
    for c in lost["categories"]:
        assert c["verdict"], c
        assert c["charged_core_s"] <= c["wait_core_s"] + 1e-9
    p = PROGRAMS[name]
    if p.kind == "blocks":          # independent pieces: no wait of theirs limits the scaling
        assert not any(realprog.is_named(b) for b in doc["bottlenecks"]), (name, doc["bottlenecks"])


def test_xz_keeps_scaling_and_no_wait_is_a_bottleneck(measured):
    db, doc = measured("xz")
    from corecast.dataset import read_campaign
    ds = read_campaign(db)
    t2_measured = float(np.median(ds.metrics["time_s"][ds.cores == 2]))
    lost = doc["lost_core_time"]
    t2_free = lost["per_count"][1]["interference_free_wall_s"]
    at = {q["cores"]: q["time_s"] for q in doc["predictions"]}
    for n in (4, 8):
        assert at[n] <= t2_free * (1 + 1e-9), (n, at[n], t2_free)     # the 2-core time, less other processes' share
        assert at[n] <= t2_measured
    assert not any(realprog.is_named(b) for b in doc["bottlenecks"]), doc["bottlenecks"]
    cond = next(c for c in lost["categories"] if c["category"] == "cond_wait_cycles")
    # the main thread's waits for its workers: most of them overlap the workers' running
    assert cond["wait_core_s"] > 0 and cond["verdict"].startswith("waiting while other threads work")


def test_a_coordinator_with_independent_workers_scales_linearly_to_8_cores(measured):
    db, _ = measured("coord")
    doc = realprog.predict(db, [1, 8], "--target-machine", "cpus=8")
    t1, t8 = (q["time_s"] for q in doc["predictions"])
    assert t1 / t8 == pytest.approx(8.0, rel=0.15), doc["predictions"]
    assert not any(realprog.is_named(b) for b in doc["bottlenecks"])
    lost = doc["lost_core_time"]
    cond = next(c for c in lost["categories"] if c["category"] == "cond_wait_cycles")
    assert cond["verdict"].startswith("waiting while other threads work")


def test_lockbench_still_names_its_lock(measured):
    _, doc = measured("lockbench", quiet=True)
    named = [b["category"] for b in doc["bottlenecks"] if realprog.is_named(b)]
    if _busy(doc) > 0:
        # three campaigns and the machine still too busy to tell (stress-ng --cpu 4 beside it:
        # noise 26-40%, or 73% of the lock's waits read as overlapping work): nothing else may
        # be named in the lock's place, and the output says how noisy or how shared the runs were
        assert named in ([], ["lock_wait_cycles"]), named
        said = [w for w in doc["warnings"] if f"run-to-run noise ({100 * _noise(doc):.1f}%)" in w
                or "other processes took" in w]
        assert said, doc["warnings"]
        return
    assert named[:1] == ["lock_wait_cycles"], ([(b["category"], b["verdict"], b["growth"]) for b in doc["bottlenecks"]],
                                               [(c["category"], c["verdict"]) for c in doc["lost_core_time"]["categories"]],
                                               doc["warnings"])
    lock = next(c for c in doc["lost_core_time"]["categories"] if c["category"] == "lock_wait_cycles")
    assert lock["critical"] and lock["charged_share"] > 0.5
