"""The region API: the C library and the Python context manager, and `corecast stat` reading
their results back."""
from __future__ import annotations

import subprocess

import pytest

from corecast import region as reg
from conftest import region_program

C_PROG = r"""
#include <corecast_region.h>
#include <pthread.h>
#include <unistd.h>
static void *worker(void *a) {
    corecast_region_begin("spin");
    volatile unsigned long x = 0; for (unsigned long i = 0; i < 60000000ul; i++) x += i;
    corecast_region_end("spin");
    return a;
}
int main(void) {
    for (int i = 0; i < 5; i++) { corecast_region_begin("nap"); usleep(10000); corecast_region_end("nap"); }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, worker, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return corecast_region_end("never-begun") == -1 ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def cprog(tmp_path_factory):
    return region_program(tmp_path_factory.mktemp("region"), C_PROG)


def test_c_regions_written_and_loaded(cprog, tmp_path):
    out = tmp_path / "r.jsonl"
    r = subprocess.run([cprog], env={"CORECAST_REGION_OUT": str(out)})
    assert r.returncode == 0
    res = reg.load(out)
    assert res["nap"]["calls"] == 5 and res["spin"]["calls"] == 2
    assert res["nap"]["wall_ns"] >= 5 * 10e6
    assert res["nap"]["context_switches"] >= 5            # each usleep blocks once
    assert res["nap"]["task_clock_ns"] < 0.2 * res["nap"]["wall_ns"]   # sleeping: little CPU
    assert res["spin"]["task_clock_ns"] > 20e6           # spinning: CPU time, from both threads
    assert "never-begun" not in res


def test_stat_reads_regions_of_its_command(cli, cprog):
    r = cli("stat", "-c", "task_clock", "-A", "--", cprog)
    assert r.code == 0, r.err
    assert "[Regions]" in r.err
    line = [l for l in r.err.splitlines() if l.startswith("nap")][0]
    assert line.split()[1] == "5"


def test_python_region(tmp_path, monkeypatch):
    monkeypatch.setenv("CORECAST_REGION_OUT", str(tmp_path / "p.jsonl"))

    @reg.region("busy")
    def busy():
        x = 0
        for i in range(300000):
            x += i
        return x

    import time
    for _ in range(3):
        busy()
    with reg.region("idle"):
        time.sleep(0.05)
    t = reg.totals()
    assert t["busy"]["calls"] == 3 and t["busy"]["task_clock_ns"] > 1e6
    assert t["idle"]["task_clock_ns"] < 0.5 * t["idle"]["wall_ns"]
    p = reg.report()
    back = reg.load(p)
    assert back["busy"]["calls"] == 3 and back["idle"]["calls"] == 1
    assert reg.totals() == {}


def test_load_rejects_garbage(tmp_path):
    from corecast.errors import UserError
    f = tmp_path / "bad.jsonl"
    f.write_text("{not json}\n")
    with pytest.raises(UserError, match="bad.jsonl:1"):
        reg.load(f)
