"""The one machine description schema (corecast.machines, docs/machines.md): every bundled file
reads and serves a command, no other folder of machine files exists, each unit spelling, a
missing section or key is one line, the old forms read as the new one (with a note), bounds, and
calibrate's JSON read back."""
from __future__ import annotations

import json
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest

from corecast import memprofile
from corecast import target as T
from corecast.errors import UserError
from corecast.machines import schema
from corecast.sched import machine as sched_machine
from corecast.sim import machine as sim_machine

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")


def _one_line(r) -> str:
    lines = [line for line in r.err.strip().splitlines() if line]
    assert r.code == 2, (r.out, r.err)
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    return lines[0]


# ------------------------------------------------------------------ the bundled files
def test_every_bundled_file_reads_under_its_own_name():
    names = schema.bundled()
    assert len(names) >= 12
    for n in names:
        d = schema.bundled_description(n)
        assert d.name == n and d.form == "" and d.uses(), n
        assert d.source, f"{n}: a bundled machine says where its numbers come from"


def test_every_bundled_file_is_used_by_some_command():
    """Each file is listed by the command(s) it serves and loads there; together the commands'
    lists cover every file."""
    used: dict[str, set[str]] = {n: set() for n in schema.bundled()}
    for n in T.bundled():
        assert T.parse_spec(n).name == n
        used[schema.bundled_name(n)].add("predict")
    for n in sim_machine.bundled():
        m = sim_machine.load_machine(n)
        assert m.name == n and m.caches
        used[schema.bundled_name(n)].add("sim")
    for n in sched_machine.bundled_machines():
        assert sched_machine.load_machine(n).cores >= 2
        used[schema.bundled_name(n)].add("sched")
    assert all(used.values()), {n: u for n, u in used.items() if not u}
    assert used["epyc-9654-2s"] == {"predict", "sim"}      # one machine, described once
    assert used["2b-2s"] == {"sched"} and used["xeon-e5-2660-2s"] == {"predict"}


def _looks_like_a_machine(data: dict) -> bool:
    return bool({"topology", "core_type", "cache", "clock", "sockets", "cores_per_socket", "frequency_hz",
                 "penalties"} & set(data))


def test_no_other_folder_of_machine_files():
    src = ROOT / "src" / "corecast"
    for old in ("targets", "sim/machines", "sched/machines"):
        assert not (src / old).exists(), old
    folders = set()
    for p in src.rglob("*.toml"):
        with open(p, "rb") as fh:
            if _looks_like_a_machine(tomllib.load(fh)):
                folders.add(p.parent)
    assert folders == {src / "machines"}


def test_the_old_names_keep_working():
    """zen4-genoa (sim's name for the EPYC 9654's core) finds the one EPYC file; sim names its
    results as before, whichever name it was given; predict reads the same file."""
    assert schema.ALIASES["zen4-genoa"] == "epyc-9654-2s"
    for alias, real in schema.ALIASES.items():
        assert schema.bundled_name(alias) == real
        assert schema.bundled_description(real).sim.name == alias
    a, b = sim_machine.load_machine("zen4-genoa"), sim_machine.load_machine("epyc-9654-2s")
    assert a.to_dict() == b.to_dict() and a.name == "zen4-genoa" and a.cores == 8
    assert a.frequency_hz == 2.4e9 and a.penalties["l3_hit"] == 50 and a.penalties["dram"] == 260
    spec = T.parse_spec("epyc-9654-2s")
    assert (spec.sockets, spec.cores_per_socket, spec.threads_per_core, spec.numa_nodes, spec.ghz) == (2, 96, 2, 2, 2.4)
    assert T.parse_spec("zen4-genoa").cpus == 384


# ------------------------------------------------------------------ units
@pytest.mark.parametrize("text", ['"2.4GHz"', '"2400MHz"', '"2.4 GHz"', '"2.4ghz"', '"2400000kHz"', "2.4e9",
                                  "2400000000", '"2.4e9"'])
def test_each_frequency_spelling(text):
    d = schema.parse(tomllib.loads(f"[topology]\ncores_per_socket = 4\n[clock]\nfrequency = {text}\n"), "m.toml")
    assert d.frequency_hz == 2.4e9
    assert T.spec_of(d, "m.toml").ghz == 2.4


@pytest.mark.parametrize("text", ['"32KiB"', '"32k"', '"32KB"', '"32 kib"', "32768", '"0.03125MiB"', '"32768B"'])
def test_each_size_spelling(text):
    body = f'[clock]\nfrequency = "1GHz"\n[[cache]]\nlevel = 1\nkind = "unified"\nsize = {text}\nways = 8\n'
    m = sim_machine.parse_machine(tomllib.loads(body), "m.toml")
    assert m.caches[0].size == 32768 and m.caches[0].sets == 64


@pytest.mark.parametrize("section, text, message", [
    ("clock", 'frequency = "2.4 parsecs"', "clock.frequency: '2.4 parsecs' is not a frequency"),
    ("clock", 'frequency = "0GHz"', "clock.frequency: '0GHz' must be more than 0"),
    ("clock", "frequency = true", "clock.frequency: True is not a frequency"),
    ("topology", 'cores_per_socket = "four"', "topology.cores_per_socket: 'four' is not a whole number"),
    ("memory", "bandwidth_gbs_per_socket = -3", "memory.bandwidth_gbs_per_socket: -3 must be positive"),
])
def test_a_bad_value_names_the_file_and_key(section, text, message):
    body = f"[topology]\n{text}\n" if section == "topology" else f"[topology]\ncores_per_socket = 4\n[{section}]\n{text}\n"
    with pytest.raises(UserError, match="m.toml: " + message.replace("(", r"\(").replace(")", r"\)")):
        schema.parse(tomllib.loads(body), "m.toml")


# ------------------------------------------------------------------ what each command needs
SIM_ONLY = '[clock]\nfrequency = "1GHz"\n[[cache]]\nlevel = 1\nkind = "unified"\nsize = "32KiB"\nways = 8\n'
TOPOLOGY_ONLY = "[topology]\nsockets = 2\ncores_per_socket = 8\n"


@pytest.mark.parametrize("command, body, message", [
    (["predict", SPEC, "--cores", "32", "--target-machine", "{f}"], SIM_ONLY,
     "no [topology]: predict needs sockets and cores_per_socket"),
    (["sim", "{trace}", "--machine", "{f}"], TOPOLOGY_ONLY, "no [clock]: the simulator needs the clock frequency"),
    (["sched", "sim", "pmctrack-mix", "--machine", "{f}"], TOPOLOGY_ONLY,
     "no [[core_type]] tables: sched needs a machine's core types"),
    (["predict", SPEC, "--cores", "32", "--target-machine", "{f}"], "[topology]\nsockets = 2\n",
     "topology.cores_per_socket: missing"),
    (["predict", SPEC, "--cores", "32", "--target-machine", "{f}"], TOPOLOGY_ONLY + "[cores]\nx = 1\n",
     "cores: unknown key"),
    (["predict", SPEC, "--cores", "32", "--target-machine", "2b-2s"], "",
     "an asymmetric machine (2 big + 2 small): predict takes machines of identical cores"),
])
def test_a_missing_section_is_one_line(cli, tmp_path, command, body, message):
    f = tmp_path / "m.toml"
    f.write_text(body)
    trace = tmp_path / "t.csv"
    trace.write_text("kind,addr,size\nload,4096,8\n")
    r = cli(*[a.replace("{f}", str(f)).replace("{trace}", str(trace)) for a in command])
    assert message in _one_line(r)


def test_core_types_and_topology_agree():
    body = '[topology]\nsockets = 2\ncores_per_socket = 2\n[[core_type]]\nname = "big"\ncount = 2\nspeed = 1.0\n'
    with pytest.raises(UserError, match="2 x 2 cores, but the core types count 2"):
        schema.parse(tomllib.loads(body), "m.toml")
    ok = schema.parse(tomllib.loads(body.replace("count = 2", "count = 4")), "m.toml")
    assert ok.topology.cores == 4 and ok.uses() == ("predict", "sched")     # one kind of core: predict too


def test_cache_latencies_become_the_simulators_penalties():
    body = SIM_ONLY.replace('kind = "unified"', 'kind = "data"') + (
        '[[cache]]\nlevel = 1\nkind = "instruction"\nsize = "32KiB"\nways = 8\n'
        '[[cache]]\nlevel = 2\nsize = "1MiB"\nways = 8\nlatency_cycles = 12\n'
        "[memory]\nlatency_cycles = 200\n[costs]\ncoherence_miss = 90\n")
    m = sim_machine.parse_machine(tomllib.loads(body), "m.toml")
    assert m.penalties == {"l2_hit": 12.0, "dram": 200.0, "coherence_miss": 90.0}
    with pytest.raises(UserError, match=r"cache\[0\]\.latency_cycles: a level-1 hit is in the base CPI"):
        schema.parse(tomllib.loads(SIM_ONLY + "latency_cycles = 4\n"), "m.toml")
    split = body.replace('level = 2\nsize', 'level = 2\nkind = "data"\nsize') + (
        '[[cache]]\nlevel = 2\nkind = "instruction"\nsize = "1MiB"\nways = 8\nlatency_cycles = 20\n')
    with pytest.raises(UserError, match="level-2 caches give different latency_cycles .12, 20."):
        sim_machine.parse_machine(tomllib.loads(split), "m.toml")


# ------------------------------------------------------------------ bounds (moved from target.py)
@pytest.mark.parametrize("body, message", [
    ("[topology]\nsockets = 65\ncores_per_socket = 1\n", "sockets = 65 is above 64"),
    ("[topology]\ncores_per_socket = 4097\n", "cores_per_socket = 4,097 is above 4,096"),
    ("[topology]\ncores_per_socket = 8\nthreads_per_core = 17\n", "threads_per_core = 17 is above 16"),
    ("[topology]\nsockets = 64\ncores_per_socket = 2048\nthreads_per_core = 2\n", "262,144 logical CPUs is above"),
    ("[topology]\ncores_per_socket = 8\nnuma_nodes = 1025\n", "numa_nodes = 1,025 is above 1,024"),
    ("[topology]\nsockets = 0\ncores_per_socket = 8\n", "sockets must be a whole number of at least 1"),
    ("".join(f'[[core_type]]\nname = "t{i}"\ncount = 1\nspeed = 1\n' for i in range(9)), "9 core types; at most 8"),
    ('[[core_type]]\nname = "a"\ncount = 4097\nspeed = 1\n', r"core_type\[0\]\.count: 4,097 is above 4,096"),
])
def test_the_bounds_are_the_readers(body, message):
    with pytest.raises(UserError, match=message):
        schema.parse(tomllib.loads(body), "m.toml")


# ------------------------------------------------------------------ the old forms
OLD_SIM = """name = "old"
frequency_hz = 2.5e9
cores = 4
[penalties]
l2_hit = 15
dram = 250
stlb_hit = 2
coherence_miss = 120
[pipeline]
fetch_depth = 4
scheduler_size = 32
drain_ipc = 4
[[cache]]
level = 1
kind = "data"
size = "32KiB"
ways = 8
[[cache]]
level = 1
kind = "instruction"
size = "32KiB"
ways = 8
[[cache]]
level = 2
size = "6MiB"
ways = 24
shared = 2
[[tlb]]
level = 1
kind = "data"
entries = 16
"""
NEW_SIM = """name = "old"
[clock]
frequency = "2.5GHz"
[sim]
cores = 4
[pipeline]
fetch_depth = 4
scheduler_size = 32
drain_ipc = 4
[[cache]]
level = 1
kind = "data"
size = "32KiB"
ways = 8
[[cache]]
level = 1
kind = "instruction"
size = "32KiB"
ways = 8
[[cache]]
level = 2
size = "6MiB"
ways = 24
shared = 2
latency_cycles = 15
[[tlb]]
level = 1
kind = "data"
entries = 16
[memory]
latency_cycles = 250
[costs]
stlb_hit = 2
coherence_miss = 120
"""
OLD_TARGET = 'name = "t"\nmodel = "M"\nsockets = 2\ncores_per_socket = 8\nthreads_per_core = 2\nnuma_nodes = 2\n' \
             'ghz = 2.2\nmemory_bandwidth_gbs_per_socket = 51.2\n'
NEW_TARGET = 'name = "t"\nmodel = "M"\n[topology]\nsockets = 2\ncores_per_socket = 8\nthreads_per_core = 2\n' \
             'numa_nodes = 2\n[clock]\nfrequency = "2.2GHz"\n[memory]\nbandwidth_gbs_per_socket = 51.2\n'


def _view(text: str, tmp_path: Path, name: str, command: str) -> dict:
    p = tmp_path / name
    p.write_text(text)
    if command == "sim":
        d = sim_machine.load_machine(p).to_dict()
        d.pop("path", None)
        return d
    d = T.parse_spec(str(p)).to_dict()
    d.pop("source")
    return d


@pytest.mark.parametrize("old, new, command", [(OLD_SIM, NEW_SIM, "sim"), (OLD_TARGET, NEW_TARGET, "predict")])
def test_an_old_file_reads_as_its_new_form(tmp_path, old, new, command):
    assert _view(old, tmp_path, "old.toml", command) == _view(new, tmp_path, "new.toml", command)


def test_an_old_file_is_read_with_a_note_naming_the_new_form(cli, tmp_path):
    (tmp_path / "old.toml").write_text(OLD_TARGET)
    r = cli("predict", SPEC, "--cores", "32", "--method", "usl", "--target-machine", tmp_path / "old.toml", "--json")
    assert r.code == 0, r.err
    assert r.json()["target_machine"]["cpus"] == 32
    notes = [line for line in r.err.splitlines() if "old form" in line]
    assert len(notes) == 1 and "[topology] sockets, cores_per_socket" in notes[0] and "docs/machines.md" in notes[0]
    (tmp_path / "new.toml").write_text(NEW_TARGET)
    r = cli("predict", SPEC, "--cores", "32", "--method", "usl", "--target-machine", tmp_path / "new.toml", "--json")
    assert r.code == 0 and "old form" not in r.err
    (tmp_path / "bad.toml").write_text(OLD_SIM.replace("l2_hit = 15", "l4_hit = 15"))
    trace = tmp_path / "t.csv"
    trace.write_text("kind,addr,size\nload,4096,8\n")
    assert "penalties.l4_hit: unknown key" in _one_line(cli("sim", trace, "--machine", tmp_path / "bad.toml"))


def test_an_old_penalty_for_a_cache_the_machine_lacks_is_one_line():
    with pytest.raises(UserError, match="penalties.l3_hit: the machine has no level-3 cache"):
        sim_machine.parse_machine(tomllib.loads(OLD_SIM.replace("dram = 250", "l3_hit = 40")), "m.toml")


# ------------------------------------------------------------------ calibrate's JSON
MACHINE = {"cpu_model": "Test CPU", "sockets": 2, "cores": 16, "threads_per_core": 2, "logical_cpus": 32,
           "numa_nodes": 2, "nominal_freq_hz": 2.5954e9}
C2C = {"smt": 12.0, "same_socket": 40.0, "cross_socket": 110.0,
       "pairs": [{"cpus": [0, 8], "kind": "cross_socket", "ns": 110.0, "min_ns": 100.0, "max_ns": 130.0}],
       "not_measured": {}, "method": "ping-pong"}
PROFILE = {"kind": "corecast-memory-profile", "version": 1, "caches": [{"level": "L1", "latency_ns": 1.0, "size_bytes": 32768}],
           "idle_latency_ns": 90.0, "peak_bandwidth_bytes_s_per_socket": 40e9}


def test_calibrate_writes_the_schema_and_predict_reads_it_back(tmp_path):
    doc = schema.calibration_doc(MACHINE, C2C, PROFILE, elapsed_s=3.0)
    assert doc["kind"] == "corecast-machine" and doc["clock"] == {"frequency": "2.595GHz"}
    p = tmp_path / "target.json"
    schema.write_calibration(doc, p)
    spec = T.parse_spec(str(p))
    assert (spec.sockets, spec.cores_per_socket, spec.threads_per_core, spec.numa_nodes) == (2, 8, 2, 2)
    assert spec.ghz == 2.595 and spec.memory_bandwidth_gbs_per_socket == 40.0 and spec.to_dict()["calibrated"]
    assert spec.calibration["core_to_core_ns"]["cross_socket"] == 110.0
    assert memprofile.read_profile(p).idle_latency_ns == 90.0          # the meters' probe reads it too
    # the first calibration files ("kind": "corecast-target") read to the same machine
    old = {"kind": "corecast-target", "version": 1, "core_to_core_ns": C2C, "memory": PROFILE,
           "machine": {"sockets": 2, "cores_per_socket": 8, "threads_per_core": 2, "numa_nodes": 2, "cpus": 32,
                       "ghz": 2.595, "model": "Test CPU"}, "memory_bandwidth_gbs_per_socket": 40.0}
    (tmp_path / "old.json").write_text(json.dumps(old))
    before = T.parse_spec(str(tmp_path / "old.json"))
    assert asdict(before) | {"source": ""} == asdict(spec) | {"source": ""}
    assert memprofile.read_profile(tmp_path / "old.json").idle_latency_ns == 90.0


def test_calibrate_json_mistakes_are_one_line(tmp_path):
    doc = schema.calibration_doc(MACHINE, C2C, None)
    for change, message in (({"version": 2}, "version: 2 is newer"), ({"kind": "corecast-thing"}, None),
                            ({"costs": {"core_to_core_ns": {"cross_socket": "far"}}},
                             "costs.core_to_core_ns.cross_socket: 'far' is not a number"),
                            ({"memory": {"profile": {"kind": "nope"}}}, "memory.profile: not a memory profile")):
        p = tmp_path / "c.json"
        p.write_text(json.dumps({**doc, **change}))
        with pytest.raises(UserError, match=message or "neither `lscpu -J` output nor a machine description"):
            T.parse_spec(str(p))
    p.write_text(json.dumps({**doc, "memory": None}))
    with pytest.raises(UserError, match="without a memory profile"):
        memprofile.read_profile(p)
