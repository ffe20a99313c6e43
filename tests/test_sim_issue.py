"""The issue-rate model on hand-made dependency chains, and the x86 decoder that feeds it."""
from __future__ import annotations

import pytest

from corecast.sim import synth
from corecast.sim.engine import SimOptions, simulate
from corecast.sim.machine import parse_machine
from corecast.sim.native import UNIT_ALU, UNIT_BRANCH, UNIT_FP, UNIT_LOAD, UNIT_STORE
from corecast.sim.synth import unpack_uop
from corecast.sim.x86 import FLAGS, TMP_LOAD, TMP_OP, decode


def machine(sched=32, width=4, **units):
    u = {"alu": 3, "load": 1, "store": 1}
    u.update(units)
    return parse_machine({"name": "m", "frequency_hz": 1e9,
                          "pipeline": {"scheduler_size": sched, "issue_width": width,
                                       "fetch_depth": 5, "drain_ipc": 4, "units": u},
                          "cache": [{"level": 1, "kind": "unified", "size": 4096, "ways": 4}]})


def issue(recs, m):
    r = simulate(recs, m, options=SimOptions(tlb=False))
    return r.issue


def test_single_chain_one_per_cycle():
    iss = issue(synth.chains(100, width=1), machine())
    assert iss["cycles"] == 100
    assert iss["baseline_cpi"] == pytest.approx(1.0)
    assert iss["uops"] == 100 and iss["instructions"] == 100


def test_two_chains_two_per_cycle():
    assert issue(synth.chains(100, width=2), machine())["cycles"] == 50


def test_four_chains_limited_by_three_alus():
    # 4 ready uops per cycle but 3 ALUs: 100 instructions in ceil(100/3) = 34 cycles
    assert issue(synth.chains(100, width=4), machine())["cycles"] == 34
    assert issue(synth.chains(100, width=4), machine(alu=4))["cycles"] == 25


def test_issue_width_limits():
    assert issue(synth.independent(100), machine(width=2, alu=4))["cycles"] == 50


def test_scheduler_size_one_serialises():
    assert issue(synth.chains(100, width=4), machine(sched=1, alu=4))["cycles"] == 100
    # a window of 2 sees two independent chains at a time
    assert issue(synth.chains(100, width=2), machine(sched=2))["cycles"] == 50


def test_window_exposes_parallelism_behind_a_chain():
    # A chain of 10 dependent uops, then 20 independent ones. A window of 32 holds all of
    # them: the independent uops issue alongside the chain (3 ALUs: 1 chain + 2 others per
    # cycle): 10 cycles. A window of 4 fills with the chain and crawls.
    prog = [[([1], [1], UNIT_ALU)] for _ in range(10)] + \
           [[((), (10 + i,), UNIT_ALU)] for i in range(20)]
    assert issue(synth.program(prog), machine(sched=32))["cycles"] == 10
    assert issue(synth.program(prog), machine(sched=4))["cycles"] > 10


def test_unit_classes():
    loads = synth.program([[((), (i % 50,), UNIT_LOAD)] for i in range(60)])
    assert issue(loads, machine())["cycles"] == 60
    assert issue(loads, machine(load=2))["cycles"] == 30
    stores = synth.program([[((), (), UNIT_STORE)] for _ in range(40)])
    assert issue(stores, machine(store=2))["cycles"] == 20
    # branch and fp uops share the ALUs unless the machine gives them units
    br = synth.program([[((), (), UNIT_BRANCH)] for _ in range(30)])
    assert issue(br, machine())["cycles"] == 10
    assert issue(br, machine(branch=1))["cycles"] == 30
    fp = synth.program([[((), (60,), UNIT_FP)] for _ in range(30)])
    assert issue(fp, machine(fp=2))["cycles"] == 15


def test_multi_uop_instruction_dependency():
    # load -> add -> store of one instruction, repeated on the same register: each add waits
    # for its load; the next load is independent (no memory dependence), so the loads
    # pipeline; 1 load unit and 1 store unit bound it at one instruction per cycle.
    ins = [[((5,), (TMP_LOAD,), UNIT_LOAD), ((TMP_LOAD, 1), (1, FLAGS), UNIT_ALU),
            ((5, 1), (), UNIT_STORE)] for _ in range(50)]
    iss = issue(synth.program(ins), machine())
    assert iss["uops"] == 150 and iss["instructions"] == 50
    assert iss["uops_per_instruction"] == pytest.approx(3.0)
    # the add chain through %1 (1/cycle) and the single load/store units: 50 + 2 cycles
    assert iss["cycles"] == 52


def test_no_uops_means_unavailable():
    r = simulate(synth.stream(100), machine(), options=SimOptions(tlb=False))
    assert r.issue is None
    assert "baseline_cpi" in r.unavailable


def test_pack_roundtrip():
    w = synth.pack_uop([1, 2, 3], [4, 16], UNIT_STORE)
    assert unpack_uop(w) == ([1, 2, 3], [4, 16], UNIT_STORE, 1)
    with pytest.raises(ValueError):
        synth.pack_uop([1, 2, 3, 4, 5], [])


# ----------------------------------------------------------------------------------------
# x86 decoding (AT&T, as objdump prints it)

RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI = range(8)


def uops(text):
    return [unpack_uop(u)[:3] for u in decode(text, 4).uops]


def test_decode_loads_stores_and_rmw():
    assert uops("mov    0x8(%rsp),%rdi") == [([RSP], [RDI], UNIT_LOAD)]
    assert uops("mov    %eax,0x10(%rbx)") == [([RBX, RAX], [], UNIT_STORE)]
    assert uops("add    %rax,(%rdi)") == [([RDI], [TMP_LOAD], UNIT_LOAD),
                                          ([TMP_LOAD, RAX], [TMP_OP, FLAGS], UNIT_ALU),
                                          ([RDI, TMP_OP], [], UNIT_STORE)]
    assert uops("cmpl   $0x0,0x8(%rbp)") == [([RBP], [TMP_LOAD], UNIT_LOAD),
                                             ([TMP_LOAD], [FLAGS], UNIT_ALU)]


def test_decode_registers_and_idioms():
    assert uops("add    %rsi,%rax") == [([RSI, RAX], [RAX, FLAGS], UNIT_ALU)]
    assert uops("xor    %eax,%eax") == [([], [RAX, FLAGS], UNIT_ALU)]   # zero idiom
    assert uops("lea    0x8(%rsp,%rbx,4),%rdi") == [([RSP, RBX], [RDI], UNIT_ALU)]
    assert uops("mov    %r9d,%r10d") == [([9], [10], UNIT_ALU)]
    assert uops("cmovne %rdx,%rax") == [([RDX, RAX, FLAGS], [RAX], UNIT_ALU)]
    assert uops("imul   $0x7,%rsi,%rax") == [([RSI], [RAX, FLAGS], UNIT_ALU)]
    assert uops("div    %rcx") == [([RCX, RAX, RDX], [RAX, RDX], UNIT_ALU)]
    assert uops("vaddps %ymm2,%ymm1,%ymm0") == [([19, 18], [17], UNIT_FP)]


def test_decode_control_flow():
    from corecast.sim.native import BR_CALL, BR_COND, BR_INDIRECT, BR_RET
    d = decode("jne    1012 <_init+0x12>", 2)
    assert d.branch == BR_COND and uops("jne    1012 <x>") == [([FLAGS], [], UNIT_BRANCH)]
    assert decode("jmp    401000 <f>", 5).branch == 0
    assert decode("jmp    *%rax", 2).branch == BR_INDIRECT
    assert decode("call   401000 <f>", 5).branch == BR_CALL
    assert decode("call   *0x8(%rax)", 3).branch == BR_CALL | BR_INDIRECT
    assert decode("ret", 1).branch == BR_RET | BR_INDIRECT
    assert uops("push   %rbp") == [([RSP], [RSP], UNIT_ALU), ([RSP, RBP], [], UNIT_STORE)]
    assert uops("pop    %rbx") == [([RSP], [RBX], UNIT_LOAD), ([RSP], [RSP], UNIT_ALU)]
    assert decode("lock cmpxchg %edx,(%rdi)", 4).uops[-1] >> 48 & 0xFF == UNIT_STORE
    assert decode("nopw   0x0(%rax,%rax,1)", 6).branch == 0
