"""Event specs: parsing, exact encodings (catalogs and libpfm4 for named models), errors, fuzz."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from corecast.collect.events import (CATALOGS, UARCHS, backend_stall_events, parse_cpu, raw_config,
                                     resolve, split_items, tracefs_dir)
from corecast.collect.events import abi, pfm
from corecast.collect.events.cpu import CpuId, uarch_of
from corecast.errors import UserError

needs_libpfm = pytest.mark.skipif(pfm.load() is None, reason="libpfm4 not installed")


def one(spec, pmu=None):
    evs = resolve(spec, pmu)
    assert len(evs) == 1
    return evs[0]


# --- PMCTrack raw form ------------------------------------------------------------------------

def test_pmctrack_raw_form_intel():
    evs = resolve("pmc0,pmc3=0x2e,umask3=0x41", "haswell")
    assert [e.pmc for e in evs] == [0, 3]
    assert evs[0].type == abi.PERF_TYPE_HARDWARE and evs[0].config == 1       # fixed counter 0: instructions
    assert evs[1].type == abi.PERF_TYPE_RAW and evs[1].config == 0x412E       # LLC misses
    assert evs[1].label == "pmc3"


def test_pmctrack_flags():
    e = resolve("pmc1=0xa2,umask1=0x10,cmask1=2,inv1,edge1,usr1", "haswell")[0]
    assert e.config == 0xA2 | 0x10 << 8 | 2 << 24 | 1 << 23 | 1 << 18
    assert e.exclude_kernel and not e.exclude_user
    e = resolve("pmc2=0x3c,os2", "skylake")[0]
    assert e.exclude_user and not e.exclude_kernel
    e = resolve("pmc2=0x3c,usr2=1,os2=1", "skylake")[0]
    assert not e.exclude_user and not e.exclude_kernel


def test_pmctrack_ebs():
    evs = resolve("pmc0,pmc1,ebs0=500000")
    assert evs[0].sample_period == 500000 and evs[1].sample_period is None
    assert resolve("pmc3=0x2e,ebs3")[0].sample_period > 0


def test_amd_12bit_event_select():
    # AMD event select bits 8-11 go to config bits 32-35 (Family 10h L3 miss, EventSelect 4E1h)
    e = resolve("pmc0=0x4e1,umask0=0xf7", "fam10h")[0]
    assert e.config == 0xE1 | 0xF7 << 8 | 0x4 << 32
    with pytest.raises(UserError, match="out of range"):
        resolve("pmc0=0x4e1", "haswell")


@pytest.mark.parametrize("bad, msg", [
    ("pmc3", "needs an event code"),
    ("umask3=0x41", "does not define"),
    ("pmc0,pmc0", "twice"),
    ("task_clock,page_faults,task_clock", "task_clock is given twice"),
    ("instr:u,instr:u", "instr is given twice"),
    ("pmc3=0x2e,umask3", "needs a value"),
    ("pmc3=0x2e,umask3=0x141", "out of range"),
    ("pmc3=0x2e,usr3=0,os3=0", "neither user nor kernel"),
    ("pmc0,pmc1,ebs0,ebs1", "more than one event"),
    ("pmc1,umask1=1", "not a fixed counter"),
    ("instr,,cycles", "empty item"),
    ("cpu/event=0x2e", "unbalanced"),
    ("nosuchevent", "unknown event"),
    ("instr:q", "unknown modifier"),
    ("", "empty event spec"),
])
def test_malformed_specs_one_line(bad, msg):
    with pytest.raises(UserError, match=msg) as ei:
        resolve(bad)
    assert "\n" not in str(ei.value)


# --- perf form, generic, software, tracepoints -------------------------------------------------

def test_perf_form_named_models():
    e = one("cpu/event=0x2e,umask=0x41,cmask=1/", "skylake")
    assert e.type == abi.PERF_TYPE_RAW and e.config == 0x0100412E
    e = one("cpu/event=0x1a0,umask=0x1e/", "zen4")        # 12-bit AMD event
    assert e.config == 0xA0 | 0x1E << 8 | 1 << 32
    e = one("cpu/event=0xc0,period=100000/:u", "haswell")
    assert e.sample_period == 100000 and e.exclude_kernel
    with pytest.raises(UserError, match="no term 'bogus'"):
        resolve("cpu/event=1,bogus=2/", "haswell")
    with pytest.raises(UserError, match="does not fit"):
        resolve("cpu/umask=0x100,event=1/", "haswell")


def test_perf_form_unknown_pmu_lists_pmus():
    with pytest.raises(UserError, match="no PMU 'nosuchpmu'.*software"):
        resolve("nosuchpmu/event=1/")


def test_software_events():
    e = one("sw/task-clock/")
    assert (e.type, e.config, e.unit) == (abi.PERF_TYPE_SOFTWARE, 1, "ns")
    assert one("sw/config=3/").config == 3
    assert one("task_clock").unit == "ns"
    assert one("cs").config == 3 and one("cs").type == abi.PERF_TYPE_SOFTWARE
    e = one("L1-dcache-load-misses")
    assert e.type == abi.PERF_TYPE_HW_CACHE and e.config == 0 | 0 << 8 | 1 << 16
    assert one("LLC-store-misses").config == 2 | 1 << 8 | 1 << 16
    with pytest.raises(UserError, match="unknown software event"):
        resolve("sw/bogus/")


def test_several_events_in_one_spec():
    evs = resolve("instr,cycles,task_clock:u,cpu/event=0xc0/", "skylake")
    assert [e.name for e in evs][:3] == ["instr", "cycles", "task_clock"]
    assert evs[2].exclude_kernel and not evs[2].exclude_user
    assert split_items("a,cpu/event=1,umask=2/,b") == ["a", "cpu/event=1,umask=2/", "b"]


def test_tracepoint_real():
    if tracefs_dir() is None:
        pytest.skip("tracefs not available")
    e = one("sched:sched_switch")
    assert e.type == abi.PERF_TYPE_TRACEPOINT
    assert e.config == int((tracefs_dir() / "events/sched/sched_switch/id").read_text())
    with pytest.raises(UserError, match="no tracepoint sched:no_such_tp"):
        resolve("sched:no_such_tp")


# --- mnemonics per vendor ---------------------------------------------------------------------

@pytest.mark.parametrize("cpu, name, config", [
    ("haswell", "instr", 0xC0), ("haswell", "cycles", 0x3C), ("skylake", "llc_misses", 0x412E),
    ("icelake", "llc_refs", 0x4F2E), ("goldencove", "branches", 0xC4), ("goldencove", "branch_misses", 0xC5),
    ("zen3", "cycles", 0x76), ("zen2", "branches", 0xC2), ("zen4", "branch_misses", 0xC3),
    ("fam10h", "llc_misses", 0xE1 | 0xF7 << 8 | 4 << 32),
])
def test_mnemonic_raw_per_model(cpu, name, config):
    e = one(name, cpu)
    assert e.type == abi.PERF_TYPE_RAW and e.config == config


def test_mnemonic_on_this_machine_is_generic():
    e = one("instr")
    assert e.type == abi.PERF_TYPE_HARDWARE and e.config == 1


def test_cpu_identification():
    assert uarch_of(CpuId("intel", 6, 0x3F)).key == "haswell"
    assert uarch_of(CpuId("intel", 6, 0x55)).key == "skylake"
    assert uarch_of(CpuId("intel", 6, 0x8F)).key == "goldencove"
    assert uarch_of(CpuId("amd", 0x10, 4)).key == "fam10h"
    assert uarch_of(CpuId("amd", 0x17, 0x31)).key == "zen2"
    assert uarch_of(CpuId("amd", 0x19, 0x01)).key == "zen3"
    assert uarch_of(CpuId("amd", 0x19, 0x61)).key == "zen4"
    assert uarch_of(CpuId("amd", 0x1A, 0x02)).key == "zen5"
    assert parse_cpu("GenuineIntel-6-3F").uarch.key == "haswell"
    assert parse_cpu("amd:0x19:0x11").uarch.key == "zen4"
    with pytest.raises(UserError, match="unknown CPU"):
        parse_cpu("pentium-pro-9000")


# --- backend-stall catalogs -------------------------------------------------------------------

def test_haswell_catalog_matches_the_issue():
    evs = backend_stall_events("haswell")
    cfg = {e.name: e.config for e in evs}
    # 0487h IQ full, 01A2h any, 04A2h RS full, 08A2h SB full, 10A2h ROB full
    assert cfg == {"stall_iq_full": 0x0487, "stall_resource_any": 0x01A2, "stall_rs_full": 0x04A2,
                   "stall_sb_full": 0x08A2, "stall_rob_full": 0x10A2}


def test_fam10h_catalog_matches_the_issue():
    cfg = {e.name: e.config for e in backend_stall_events("fam10h")}
    assert cfg == {"stall_branch_abort": 0xD2, "stall_rob_full": 0xD5, "stall_rs_full": 0xD6,
                   "stall_fpu_full": 0xD7, "stall_ls_full": 0xD8}


def test_every_catalog_entry_cites_a_source():
    for key, cat in CATALOGS.items():
        assert cat, key
        for se in cat:
            e = [x for x in backend_stall_events(key) if x.name == f"stall_{se.key}"][0]
            assert "pub." in e.description or "Intel SDM" in e.description


def test_unknown_family_is_empty_with_reason():
    evs = backend_stall_events(CpuId("intel", 6, 0x01))
    assert evs == [] and "no backend-stall catalog" in evs.reason


@needs_libpfm
@pytest.mark.parametrize("uarch", [k for k in CATALOGS if UARCHS[k].pfm_pmu])
def test_catalog_encodings_agree_with_libpfm(uarch):
    """Each catalog entry (from the manuals) encodes exactly as libpfm4's tables say."""
    lib = pfm.load()
    pmu = UARCHS[uarch].pfm_pmu
    ours = {e.name: e.config for e in backend_stall_events(uarch)}
    for se in CATALOGS[uarch]:
        enc = lib.encode(se.pfm_name, pmu=pmu)
        assert enc.config == ours[f"stall_{se.key}"], (uarch, se.key, hex(enc.config))


@needs_libpfm
@pytest.mark.parametrize("cpu, mnemonic, pfm_name", [
    ("haswell", "instr", "INST_RETIRED:ANY_P"), ("skylake", "llc_misses", "LONGEST_LAT_CACHE:MISS"),
    ("skylake", "llc_refs", "LONGEST_LAT_CACHE:REFERENCE"), ("haswell", "branch_misses", "BR_MISP_RETIRED:ALL_BRANCHES"),
    ("zen3", "instr", "RETIRED_INSTRUCTIONS"), ("zen3", "cycles", "CYCLES_NOT_IN_HALT"),
    ("fam10h", "cycles", "CPU_CLK_UNHALTED"), ("zen2", "branch_misses", "RETIRED_BRANCH_INSTRUCTIONS_MISPREDICTED"),
])
def test_mnemonics_agree_with_libpfm(cpu, mnemonic, pfm_name):
    lib = pfm.load()
    from corecast.collect.events import pfm_pmu_for
    enc = lib.encode(pfm_name, pmu=pfm_pmu_for(parse_cpu(cpu)))
    assert one(mnemonic, cpu).config == enc.config


@needs_libpfm
def test_libpfm_names_through_resolve(monkeypatch):
    e = one("RESOURCE_STALLS:ROB", "haswell")
    assert e.origin == "libpfm" and e.config == 0x10A2
    e = one("skl::CYCLE_ACTIVITY:STALLS_L2_MISS")
    assert e.config == raw_config("intel", 0xA3, 0x05, cmask=5)
    with pytest.raises(UserError, match="cannot encode|unknown event"):
        resolve("RESOURCE_STALLS:NOPE", "haswell")


@needs_libpfm
def test_libpfm_force_pmu_is_honoured(tmp_path):
    """LIBPFM_FORCE_PMU=hsw makes unprefixed names Haswell's, in a fresh process."""
    import subprocess, sys, os
    code = ("from corecast.collect.events import resolve\n"
            "print(hex(resolve('ILD_STALL:IQ_FULL')[0].config))")
    env = dict(os.environ, LIBPFM_FORCE_PMU="hsw")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0x487"


# --- fuzz ---------------------------------------------------------------------------------------

_alphabet = st.sampled_from(list("pmcumaskinvedgeusrosb0123456789x=,/:_-abcdefABCDEF") + ["pmc", "umask", "cpu/", "sw/", "ebs", "0x", ","])


@settings(max_examples=300, deadline=None)
@given(st.lists(_alphabet, max_size=20).map("".join))
def test_fuzz_parser_never_crashes(text):
    try:
        evs = resolve(text, "haswell")
    except UserError as err:
        assert "\n" not in str(err) and str(err)
        return
    for e in evs:
        assert isinstance(e.config, int) and 0 <= e.config < 1 << 64
        assert e.name


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 0xFF), st.integers(0, 0xFF), st.integers(0, 0xFF), st.booleans(), st.booleans(),
       st.integers(0, 15))
def test_fuzz_pmctrack_encoding_roundtrip(event, umask, cmask, inv, edge, n):
    spec = f"pmc{n}={event:#x},umask{n}={umask:#x},cmask{n}={cmask}" + (f",inv{n}" if inv else "") + \
        (f",edge{n}=1" if edge else "")
    e = resolve(spec, "skylake")[0]
    assert e.config & 0xFF == event and e.config >> 8 & 0xFF == umask and e.config >> 24 & 0xFF == cmask
    assert bool(e.config >> 23 & 1) == inv and bool(e.config >> 18 & 1) == edge


def test_catalogue_says_why_once_for_the_events_it_concerns(capsys):
    """A VM without a PMU printed the same sentence under each of its 25 events."""
    from corecast.report.events import render_catalogue
    why = "this machine has no hardware PMU for it"
    data = {"cpu": "x", "perf_event_paranoid": 2, "pmus": ["software"], "tracefs": None, "libpfm": "-",
            "events": [{"name": f"e{i}", "status": "not supported", "description": f"event {i}", "message": why}
                       for i in range(25)] + [{"name": "task_clock", "status": "ok", "description": "t",
                                               "message": None}],
            "backend_stalls": "9 events", "sources": {"psi": "ok"}}
    render_catalogue(data)
    out = capsys.readouterr().out
    assert out.count(why) == 1
    assert f"[1] {why} (25 events)" in out
    assert out.count("not supported [1]") == 25
