"""What `corecast meters` costs: CPU time of the daemon at --interval 1ms (and 10 ms), as a
percentage of one core, against its peers measured in the same run: `perf stat -a -I 1000`
and Prometheus's node_exporter answering one scrape per second; and the floor, a C loop that
only wakes every millisecond. Then, in the same run, the blackboard's seqlock: the writer's
rate with 4 readers against its rate alone, by wall time (bench/meters_seqlock.py's runs,
interleaved; --seq-reps 0 leaves them out).

The daemon runs with every meter this machine gives (the default, the memory-latency probe at
one 2 ms burst a second included) unless a line says otherwise.
Each configuration runs for --seconds (default 20) after it has started; its CPU time is the sum
of its threads' schedstat run time (ns) over that span, so start-up is left out. The
configurations are interleaved and repeated (--reps, default 3); medians and the spread are
printed, and the daemon's cost as ratios to the peers'. The machine's load is printed before
and after: on a shared machine the figures move with it.

    .venv/bin/python bench/meters_overhead.py [--seconds 20] [--reps 3] [--seq-reps 5]
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402
import meters_seqlock  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

WAKER = r"""
#include <time.h>
#include <stdlib.h>
int main(int c, char **v) {
    long n = atol(v[1]);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long long d = t.tv_sec * 1000000000LL + t.tv_nsec;
    for (long i = 0; i < n; i++) {
        d += 1000000;
        struct timespec a = {d / 1000000000LL, d % 1000000000LL};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &a, 0);
    }
    return 0;
}
"""


def cpu_ns(pid: int) -> int:
    """Run time of every live thread of `pid`, from schedstat (ns)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def measure(cmd: list[str], seconds: float, ready, scrape: str | None = None) -> float:
    """% of one core `cmd` used over `seconds` once `ready()` is true (scraping `scrape` once a
    second meanwhile, when given)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while not ready() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.5)
        c0, t0 = cpu_ns(p.pid), time.monotonic()
        nxt = t0
        while time.monotonic() - t0 < seconds:
            if scrape:
                try:
                    urllib.request.urlopen(scrape, timeout=5).read()
                except OSError:
                    pass
            nxt += 1.0
            time.sleep(max(0.0, min(nxt, t0 + seconds) - time.monotonic()))
        c1, t1 = cpu_ns(p.pid), time.monotonic()
    finally:
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return 100.0 * (c1 - c0) * 1e-9 / (t1 - t0)


def board_ready(name: str):
    """The daemon ticks, and its memory-latency probe (when it has one) has built its buffer and
    given a value: the steady state, start-up left out."""
    def ready() -> bool:
        try:
            from corecast.meters import Board
            with Board.open(name) as b:
                probe = [m for m in b.meters() if m.name == "mem_latency" and m.quality != "unavailable"]
                return b.state == "running" and (not probe or b.read("mem_latency").current is not None)
        except Exception:
            return False
    return ready


def url_ready(url: str):
    def ready() -> bool:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return True
        except OSError:
            return False
    return ready


def tick_work_us(meters: str, ticks: int = 20000) -> tuple[float, int]:
    """The work of one tick without its wake-up: the daemon's engine ticked back to back on
    this thread (every source read and parsed, every meter computed and published), CPU
    microseconds a tick; and how many meters are live."""
    import resource
    from corecast.meters.daemon import Daemon, Options
    d = Daemon(Options(interval_s=0.001, window_s=0.1, meters=meters, blackboard=f"bench-tick-{os.getpid()}"))
    try:
        d.writer.running()
        t = time.monotonic_ns()
        for i in range(200):
            d.engine.tick(t + i * 1_000_000)
        r0 = resource.getrusage(resource.RUSAGE_THREAD)
        for i in range(ticks):
            d.engine.tick(t + (200 + i) * 1_000_000)
        r1 = resource.getrusage(resource.RUSAGE_THREAD)
        return 1e6 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / ticks, \
            sum(i.available for i in d.instances)
    finally:
        d.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seq-reps", type=int, default=5, help="seqlock runs (0: none)")
    ap.add_argument("--seq-seconds", type=float, default=3.0)
    a = ap.parse_args()
    _machine.header("corecast meters: daemon CPU, % of one core (median of reps; min-max)")
    print(f"# load before: {os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp())
    (tmp / "waker.c").write_text(WAKER)
    subprocess.run(["gcc", "-O2", "-o", str(tmp / "waker"), str(tmp / "waker.c")], check=True)
    py = [sys.executable, "-m", "corecast", "meters"]
    port = free_port()
    configs = {
        "floor: a C loop waking every 1 ms": ([str(tmp / "waker"), str(int((a.seconds + 40) * 1000))],
                                              lambda: True, None),
        "corecast meters --interval 1ms": (py + ["--interval", "1ms", "--blackboard", "bench1"],
                                           board_ready("bench1"), None),
        "corecast meters --interval 1ms, /metrics scraped every 1 s":
            (py + ["--interval", "1ms", "--blackboard", "bench2", "--listen", str(port)], board_ready("bench2"),
             f"http://127.0.0.1:{port}/metrics"),
        "corecast meters --interval 1ms, without the memory-latency probe":
            (py + ["--interval", "1ms", "--blackboard", "bench5", "--meters", "software,hardware"],
             board_ready("bench5"), None),
        "corecast meters --interval 1ms --meters cpu_busy,psi_cpu_some":
            (py + ["--interval", "1ms", "--blackboard", "bench4", "--meters", "cpu_busy,psi_cpu_some"],
             board_ready("bench4"), None),
        "corecast meters --interval 10ms": (py + ["--interval", "10ms", "--blackboard", "bench3"],
                                            board_ready("bench3"), None),
    }
    if shutil.which("perf"):
        configs["perf stat -a -I 1000"] = (["perf", "stat", "-a", "-I", "1000", "-x", ",", "-o", "/dev/null"],
                                          lambda: True, None)
    ne = shutil.which("prometheus-node-exporter")
    if ne:
        nport = free_port()
        configs["node_exporter, a scrape every 1 s"] = (
            [ne, f"--web.listen-address=127.0.0.1:{nport}"], url_ready(f"http://127.0.0.1:{nport}/metrics"),
            f"http://127.0.0.1:{nport}/metrics")
    got: dict[str, list[float]] = {k: [] for k in configs}
    for rep in range(a.reps):
        for name, (cmd, ready, scrape) in configs.items():
            got[name].append(measure(cmd, a.seconds, ready, scrape))
            print(f"  rep {rep + 1} {name}: {got[name][-1]:.3f}%", flush=True)
    print(f"# load after the daemon runs: {os.getloadavg()}")
    print(f"{'configuration':62s} {'median %':>9s} {'min':>7s} {'max':>7s}")
    med = {}
    for name, v in got.items():
        med[name] = statistics.median(v)
        print(f"{name:62s} {med[name]:9.3f} {min(v):7.3f} {max(v):7.3f}")
    d1 = med["corecast meters --interval 1ms"]
    floor = med["floor: a C loop waking every 1 ms"]
    for peer in ("perf stat -a -I 1000", "node_exporter, a scrape every 1 s", "floor: a C loop waking every 1 ms"):
        if peer in med and med[peer] > 0:
            print(f"ratio corecast meters 1 ms / {peer}: {d1 / med[peer]:.2f}")
    print(f"corecast meters at 1 ms less the floor (the sampling itself): {d1 - floor:.3f}% of one core; "
          f"without the probe {med['corecast meters --interval 1ms, without the memory-latency probe'] - floor:.3f}%")
    print(f"target: at most 1% of one core at 1 ms -- {'met' if d1 <= 1.0 else 'not met'} ({d1:.2f}%); "
          f"the floor alone is {floor:.2f}%")
    for meters in ("software,hardware", "psi_cpu_some"):
        w = [tick_work_us(meters) for _ in range(3)]
        print(f"work of a tick without its wake-up, --meters {meters} ({w[0][1]} meters): "
              f"{statistics.median(x[0] for x in w):.2f} us (median of 3; {min(x[0] for x in w):.2f}-"
              f"{max(x[0] for x in w):.2f}) = {statistics.median(x[0] for x in w) / 10:.2f}% of a core at 1 ms")
    if a.seq_reps > 0 and (os.cpu_count() or 1) >= 2:
        rt = meters_seqlock.rt_ok()
        print(f"# seqlock: writer pinned to CPU 0 at {'real-time priority (chrt -f 1)' if rt else 'normal priority'}, "
              "4 readers pinned to CPU 1, alone and with readers interleaved")
        stress = str(meters_seqlock.native_path("corecast-meters-stress"))
        res = meters_seqlock.series(stress, a.seq_seconds, 64, a.seq_reps, [0, 1000], rt)
        print(f"# load after: {os.getloadavg()}")
        ratios = meters_seqlock.summary(res, a.seq_seconds)
        print(f"target: writer with 4 readers within 10% of alone, by wall time -- "
              f"{'met' if ratios[0][0] >= 0.9 else 'not met'} ({ratios[0][0]:.3f} with readers reading as fast as "
              f"they can, {ratios[1000][0]:.3f} pausing 1 us between passes)")


if __name__ == "__main__":
    main()
