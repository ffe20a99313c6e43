"""Topology from sysfs (fake trees of known shape, and this machine) and core orderings."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from corecast.collect import topology as tp
from corecast.errors import UserError


def fake_sysfs(root: Path, sockets: int, cores: int, smt: int, nodes_per_socket: int = 1,
               interleaved: bool = True, offline: tuple[int, ...] = ()) -> tuple[Path, Path]:
    """A sysfs tree like Linux numbers a multi-socket SMT machine.

    With `interleaved`, as on most x86 servers: cpu0..N-1 are the first PU of every core
    (socket by socket), cpuN.. their SMT siblings.
    """
    cpu_root, node_root = root / "cpu", root / "node"
    cpu_root.mkdir(parents=True)
    node_root.mkdir(parents=True)
    ncores = sockets * cores
    pus = []    # (cpu, socket, core_in_socket, thread)
    for t in range(smt):
        for s in range(sockets):
            for c in range(cores):
                if interleaved:
                    cpu = t * ncores + s * cores + c
                else:
                    cpu = (s * cores + c) * smt + t
                pus.append((cpu, s, c, t))
    siblings: dict[tuple[int, int], list[int]] = {}
    for cpu, s, c, _ in pus:
        siblings.setdefault((s, c), []).append(cpu)
    online = sorted(p[0] for p in pus if p[0] not in offline)
    (cpu_root / "online").write_text(tp.format_cpulist(online) + "\n")
    for cpu, s, c, _ in pus:
        d = cpu_root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text(f"{s}\n")
        (d / "core_id").write_text(f"{c}\n")      # repeats across sockets, as on real machines
        (d / "core_cpus_list").write_text(tp.format_cpulist(sorted(siblings[(s, c)])) + "\n")
        (d / "package_cpus_list").write_text(tp.format_cpulist(sorted(p[0] for p in pus if p[1] == s)) + "\n")
    per_node = cores // nodes_per_socket
    for s in range(sockets):
        for n in range(nodes_per_socket):
            nid = s * nodes_per_socket + n
            members = sorted(p[0] for p in pus if p[1] == s and n * per_node <= p[2] < (n + 1) * per_node)
            (node_root / f"node{nid}").mkdir()
            (node_root / f"node{nid}" / "cpulist").write_text(tp.format_cpulist(members) + "\n")
    return cpu_root, node_root


@pytest.fixture
def two_socket(tmp_path):
    """2 sockets x 4 cores x 2 threads; cpu0-7 first threads, cpu8-15 siblings."""
    return tp.read_topology(*fake_sysfs(tmp_path, 2, 4, 2, nodes_per_socket=2))


def test_counts(two_socket):
    t = two_socket
    assert (t.sockets, t.cores, t.threads_per_core, len(t.pus)) == (2, 8, 2, 16)
    assert sorted(t.numa_nodes) == [0, 1, 2, 3]
    assert t.numa_nodes[0] == [0, 1, 8, 9]
    assert t.pu(9).node == 0 and t.pu(13).node == 2 and t.pu(15).node == 3


def test_siblings_and_logical_indexes(two_socket):
    t = two_socket
    # core_id repeats across sockets, yet cores are told apart (hwloc: by sibling sets)
    assert t.pu(0).core != t.pu(4).core
    assert t.pu(0).core == t.pu(8).core and t.pu(8).smt_index == 1 and t.pu(0).smt_index == 0
    assert [p.core for p in t.pus if p.smt_index == 0] == list(range(8))
    assert t.pu(12).package == 1


def test_order_socket_fills_a_socket_physical_first(two_socket):
    assert tp.order_cpus(two_socket, "socket") == [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]


def test_order_smt_last(two_socket):
    assert tp.order_cpus(two_socket, "smt-last") == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]


def test_order_spread_alternates_sockets(two_socket):
    assert tp.order_cpus(two_socket, "spread") == [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]


def test_adjacent_sibling_numbering(tmp_path):
    # cpu0/cpu1 are siblings (as on many ARM and some Intel desktop machines)
    t = tp.read_topology(*fake_sysfs(tmp_path, 1, 4, 2, interleaved=False))
    assert tp.order_cpus(t, "socket") == [0, 2, 4, 6, 1, 3, 5, 7]
    assert t.pu(1).core == t.pu(0).core


def test_explicit_list_and_errors(two_socket):
    assert tp.order_cpus(two_socket, "3,1,8-9") == [3, 1, 8, 9]
    with pytest.raises(UserError, match="listed twice"):
        tp.order_cpus(two_socket, "1,1")
    with pytest.raises(UserError, match="CPU 99 is not online"):
        tp.order_cpus(two_socket, "0,99")
    with pytest.raises(UserError, match="not one of socket"):
        tp.order_cpus(two_socket, "compact")


def test_offline_and_disallowed_cpus_are_left_out(tmp_path):
    roots = fake_sysfs(tmp_path, 1, 4, 2, offline=(3,))
    t = tp.read_topology(*roots, allowed=[0, 1, 2, 3, 4, 5])
    assert t.cpus == [0, 1, 2, 4, 5]
    assert t.cores == 3        # the 4th core (cpu3, cpu7) is offline or not allowed
    assert tp.order_cpus(t, "socket") == [0, 1, 2, 4, 5]


def test_core_counts():
    assert tp.parse_core_counts("1,2,4", 8) == [1, 2, 4]
    assert tp.parse_core_counts("all", 8) == [8]
    assert tp.parse_core_counts("1-4", 8) == [1, 2, 3, 4]
    assert tp.parse_core_counts("2-8:2", 8) == [2, 4, 6, 8]
    assert tp.parse_core_counts("pow2", 12) == [1, 2, 4, 8, 12]
    assert tp.parse_core_counts("4,1,all,1", 6) == [1, 4, 6]
    assert tp.parse_core_counts("1-all", 3) == [1, 2, 3] and tp.parse_core_counts("2-all:2", 6) == [2, 4, 6]
    with pytest.raises(UserError, match="only 2 are usable"):
        tp.parse_core_counts("1,4", 2)
    for bad in ("", "0", "a", "3-1", "1.5"):
        with pytest.raises(UserError):
            tp.parse_core_counts(bad, 8)


def test_cpulist_round_trip():
    assert tp.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert tp.format_cpulist([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert tp.parse_cpulist("0-6:2") == [0, 2, 4, 6]
    with pytest.raises(UserError):
        tp.parse_cpulist("x")


def test_this_machine():
    t = tp.read_topology()
    assert set(t.cpus) == set(os.sched_getaffinity(0)) & set(t.cpus)
    assert len(t.pus) == len(os.sched_getaffinity(0))
    assert t.sockets >= 1 and t.cores >= 1 and t.cores * t.threads_per_core >= len(t.pus)
    m = tp.machine_info(t)
    assert m.logical_cpus == len(t.pus) and m.cores == t.cores and m.sockets == t.sockets
    assert m.kernel and m.kernel.startswith("Linux")
    assert m.cpu_model
    assert m.nominal_freq_hz is None or 1e8 < m.nominal_freq_hz < 1e10


def test_nominal_frequency_sources(tmp_path):
    (tmp_path / "cpu0" / "cpufreq").mkdir(parents=True)
    assert tp.nominal_frequency_hz(tmp_path, {"model name": "Intel Xeon @ 2.40GHz", "cpu MHz": "3100"}) == 2.4e9
    assert tp.nominal_frequency_hz(tmp_path, {"cpu MHz": "2596.120"}) == pytest.approx(2.59612e9)
    (tmp_path / "cpu0" / "cpufreq" / "base_frequency").write_text("2100000\n")
    assert tp.nominal_frequency_hz(tmp_path, {"model name": "X @ 2.40GHz"}) == 2.1e9


def test_huge_ranges_are_refused_before_they_are_made():
    """`--cores 1-100000000` and a CPU list to 10^9 used to build the whole range first."""
    from corecast.collect.topology import parse_core_counts, parse_cpulist
    with pytest.raises(UserError, match="100000000 cores asked for, but only 2 are usable here.*1-all or pow2"):
        parse_core_counts("1-100000000", 2)
    with pytest.raises(UserError, match="goes past CPU 8191"):
        parse_cpulist("0-1000000000")
    assert parse_core_counts("1-all", 2) == [1, 2]
    assert parse_cpulist("0-3:2,7") == [0, 2, 7]
