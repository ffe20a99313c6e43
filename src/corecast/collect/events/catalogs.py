"""Backend-stall event catalogs: the fine-grained stall events the stall-based method (ESTIMA)
counts, per micro-architecture, each with the document it comes from.

Every entry gives the event select, unit mask and counter mask as the vendor documents them,
and the libpfm4 name that encodes the same event (the test suite checks that both agree, so
a typo in either is caught). Aggregate "any stall" events are left out where a fine-grained
breakdown exists; the Haswell `RESOURCE_STALLS.ANY` (01A2h) is kept because the ESTIMA paper
uses it as the total next to its parts.

Sources:
- INTEL_SDM: Intel 64 and IA-32 Architectures Software Developer's Manual, Vol. 3B, chapter
  "Performance-Monitoring Events", the table of each micro-architecture (Haswell, Skylake,
  Ice Lake, Golden Cove), and Intel's perfmon event lists (HSX, SKX, ICX, SPR core events).
- AMD_BKDG_10H: AMD BIOS and Kernel Developer's Guide for Family 10h Processors, pub. 31116,
  section 3.14 "Performance Counter Events", EventSelect 0D1h-0DAh.
- AMD_PPR_17H_01: Processor Programming Reference for Family 17h Model 01h, pub. 54945,
  PMCx0AE/PMCx0AF.
- AMD_PPR_17H_31: PPR for Family 17h Model 31h (Zen 2), pub. 55803, PMCx0AE/PMCx0AF.
- AMD_PPR_19H_01: PPR for Family 19h Model 01h (Zen 3), pub. 56214, PMCx0AE/PMCx0AF.
- AMD_PPR_19H_11: PPR for Family 19h Model 11h (Zen 4), pub. 55901, PMCx0AE/PMCx0AF/PMCx1A0.
- AMD_PPR_1AH_02: PPR for Family 1Ah Model 02h (Zen 5), pub. 57238, PMCx0AE/PMCx0AF (also
  Linux tools/perf/pmu-events/arch/x86/amdzen5/decoder.json).
"""
from __future__ import annotations

from dataclasses import dataclass

SOURCES = {
    "INTEL_SDM": "Intel SDM Vol. 3B, Performance-Monitoring Events, and Intel perfmon event lists",
    "AMD_BKDG_10H": "AMD BKDG for Family 10h Processors, pub. 31116, sec. 3.14",
    "AMD_PPR_17H_01": "AMD PPR for Family 17h Model 01h, pub. 54945",
    "AMD_PPR_17H_31": "AMD PPR for Family 17h Model 31h, pub. 55803",
    "AMD_PPR_19H_01": "AMD PPR for Family 19h Model 01h, pub. 56214",
    "AMD_PPR_19H_11": "AMD PPR for Family 19h Model 11h, pub. 55901",
    "AMD_PPR_1AH_02": "AMD PPR for Family 1Ah Model 02h, pub. 57238",
}


@dataclass(frozen=True)
class StallEvent:
    key: str            # short name, used as the column/stall category
    event: int          # event select (AMD: up to 12 bits)
    umask: int
    description: str
    pfm_name: str | None
    source: str
    cmask: int = 0
    inv: bool = False
    edge: bool = False
    aggregate: bool = False

    @property
    def notation(self) -> str:
        """The vendor manuals' notation: umask and event as hex, e.g. 10A2h."""
        return f"{self.umask:02X}{self.event:02X}h" if self.umask else f"{self.event:03X}h"


def _i(key, event, umask, desc, pfm, cmask=0, aggregate=False):
    return StallEvent(key, event, umask, desc, pfm, "INTEL_SDM", cmask=cmask, aggregate=aggregate)


# Ice Lake and Golden Cove share these (Golden Cove adds EXE_ACTIVITY.BOUND_ON_LOADS).
_ICL_FIRST = (
        _i("sb_full", 0xA2, 0x08, "RESOURCE_STALLS.SB: store buffer full", "RESOURCE_STALLS:SB"),
        _i("scoreboard", 0xA2, 0x02, "RESOURCE_STALLS.SCOREBOARD: stalled on serializing operations",
           "RESOURCE_STALLS:SCOREBOARD"),
        _i("l1d_miss_stalls", 0xA3, 0x0C, "CYCLE_ACTIVITY.STALLS_L1D_MISS: execution stalls while "
           "an L1D demand-load miss is outstanding", "CYCLE_ACTIVITY:STALLS_L1D_MISS", cmask=0x0C),
        _i("l2_miss_stalls", 0xA3, 0x05, "CYCLE_ACTIVITY.STALLS_L2_MISS: execution stalls while an "
           "L2 demand-load miss is outstanding", "CYCLE_ACTIVITY:STALLS_L2_MISS", cmask=0x05),
        _i("l3_miss_stalls", 0xA3, 0x06, "CYCLE_ACTIVITY.STALLS_L3_MISS: execution stalls while an "
           "L3 demand-load miss is outstanding", "CYCLE_ACTIVITY:STALLS_L3_MISS", cmask=0x06),
)
_ICL_STORE_BOUND = (
        _i("store_bound", 0xA6, 0x40, "EXE_ACTIVITY.BOUND_ON_STORES: store buffer full and no "
           "outstanding load", "EXE_ACTIVITY:BOUND_ON_STORES", cmask=0x02),
)

CATALOGS: dict[str, tuple[StallEvent, ...]] = {
    "haswell": (
        _i("iq_full", 0x87, 0x04, "ILD_STALL.IQ_FULL: cycles the instruction queue is full",
           "ILD_STALL:IQ_FULL"),
        _i("resource_any", 0xA2, 0x01, "RESOURCE_STALLS.ANY: allocation stalled for any resource "
           "(the total of the parts below and more)", "RESOURCE_STALLS:ANY", aggregate=True),
        _i("rs_full", 0xA2, 0x04, "RESOURCE_STALLS.RS: no eligible reservation-station entry",
           "RESOURCE_STALLS:RS"),
        _i("sb_full", 0xA2, 0x08, "RESOURCE_STALLS.SB: store buffer full", "RESOURCE_STALLS:SB"),
        _i("rob_full", 0xA2, 0x10, "RESOURCE_STALLS.ROB: reorder buffer full", "RESOURCE_STALLS:ROB"),
    ),
    "skylake": (
        _i("sb_full", 0xA2, 0x08, "RESOURCE_STALLS.SB: store buffer full", "RESOURCE_STALLS:SB"),
        _i("l1d_miss_stalls", 0xA3, 0x0C, "CYCLE_ACTIVITY.STALLS_L1D_MISS: execution stalls while "
           "an L1D demand-load miss is outstanding (includes the L2 and L3 cases)",
           "CYCLE_ACTIVITY:STALLS_L1D_MISS", cmask=0x0C),
        _i("l2_miss_stalls", 0xA3, 0x05, "CYCLE_ACTIVITY.STALLS_L2_MISS: execution stalls while an "
           "L2 demand-load miss is outstanding", "CYCLE_ACTIVITY:STALLS_L2_MISS", cmask=0x05),
        _i("l3_miss_stalls", 0xA3, 0x06, "CYCLE_ACTIVITY.STALLS_L3_MISS: execution stalls while an "
           "L3 demand-load miss is outstanding", "CYCLE_ACTIVITY:STALLS_L3_MISS", cmask=0x06),
        _i("store_bound", 0xA6, 0x40, "EXE_ACTIVITY.BOUND_ON_STORES: store buffer full and no "
           "outstanding load", "EXE_ACTIVITY:BOUND_ON_STORES"),
    ),
    "icelake": _ICL_FIRST + _ICL_STORE_BOUND,
    "goldencove": _ICL_FIRST + (
        _i("load_bound", 0xA6, 0x21, "EXE_ACTIVITY.BOUND_ON_LOADS: execution stalls while the "
           "memory subsystem has an outstanding load", "EXE_ACTIVITY:BOUND_ON_LOADS", cmask=0x05),
    ) + _ICL_STORE_BOUND,
    "fam10h": tuple(StallEvent(k, ev, 0, d, p, "AMD_BKDG_10H") for k, ev, d, p in (
        ("branch_abort", 0xD2, "Dispatch stall for branch abort to retire", "DISPATCH_STALL_FOR_BRANCH_ABORT"),
        ("rob_full", 0xD5, "Dispatch stall for reorder buffer full", "DISPATCH_STALL_FOR_REORDER_BUFFER_FULL"),
        ("rs_full", 0xD6, "Dispatch stall for reservation station full",
         "DISPATCH_STALL_FOR_RESERVATION_STATION_FULL"),
        ("fpu_full", 0xD7, "Dispatch stall for FPU full", "DISPATCH_STALL_FOR_FPU_FULL"),
        ("ls_full", 0xD8, "Dispatch stall for load/store unit full", "DISPATCH_STALL_FOR_LS_FULL"),
    )),
}


def _amd(src, rows):
    return tuple(StallEvent(k, ev, um, d, p, src) for k, ev, um, d, p in rows)


_ZEN12_AE = (
    ("int_prf_full", 0xAE, 0x01, "PMCx0AE[0] integer physical register file resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:INT_PHY_REG_FILE_RSRC_STALL"),
    ("load_queue_full", 0xAE, 0x02, "PMCx0AE[1] load queue resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:LOAD_QUEUE_RSRC_STALL"),
    ("store_queue_full", 0xAE, 0x04, "PMCx0AE[2] store queue resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:STORE_QUEUE_RSRC_STALL"),
    ("int_sched_misc", 0xAE, 0x08, "PMCx0AE[3] integer scheduler miscellaneous resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:INT_SCHEDULER_MISC_RSRC_STALL"),
    ("taken_branch_buffer_full", 0xAE, 0x10, "PMCx0AE[4] taken branch buffer resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:TAKEN_BRANCH_BUFFER_RSRC_STALL"),
    ("fp_prf_full", 0xAE, 0x20, "PMCx0AE[5] floating-point register file resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:FP_REG_FILE_RSRC_STALL"),
    ("fp_sched_full", 0xAE, 0x40, "PMCx0AE[6] floating-point scheduler resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:FP_SCHEDULER_FILE_RSRC_STALL"),
    ("fp_misc", 0xAE, 0x80, "PMCx0AE[7] floating-point miscellaneous resource unavailable",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:FP_MISC_FILE_RSRC_STALL"),
)
_ZEN34_AE = (
    ("int_prf_full", 0xAE, 0x01, "PMCx0AE[0] integer physical register file resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:INT_PHY_REG_FILE_RSRC_STALL"),
    ("load_queue_full", 0xAE, 0x02, "PMCx0AE[1] load queue resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:LOAD_QUEUE_RSRC_STALL"),
    ("store_queue_full", 0xAE, 0x04, "PMCx0AE[2] store queue resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:STORE_QUEUE_RSRC_STALL"),
    ("taken_branch_buffer_full", 0xAE, 0x10, "PMCx0AE[4] taken branch buffer resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:TAKEN_BRANCH_BUFFER_RSRC_STALL"),
    ("fp_prf_full", 0xAE, 0x20, "PMCx0AE[5] floating-point register file resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:FP_REG_FILE_RSRC_STALL"),
    ("fp_sched_full", 0xAE, 0x40, "PMCx0AE[6] floating-point scheduler resource stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:FP_SCHEDULER_RSRC_STALL"),
    ("fp_flush_recovery", 0xAE, 0x80, "PMCx0AE[7] floating-point flush recovery stall",
     "DISPATCH_RESOURCE_STALL_CYCLES_1:FP_FLUSH_RECOVERY_STALL"),
)
_ZEN34_AF = (
    ("int_sched0_full", 0xAF, 0x01, "PMCx0AF[0] no tokens for integer scheduler queue 0",
     "DISPATCH_RESOURCE_STALL_CYCLES_2:INT_SCHEDULER_0_TOKEN_STALL"),
    ("int_sched1_full", 0xAF, 0x02, "PMCx0AF[1] no tokens for integer scheduler queue 1",
     "DISPATCH_RESOURCE_STALL_CYCLES_2:INT_SCHEDULER_1_TOKEN_STALL"),
    ("int_sched2_full", 0xAF, 0x04, "PMCx0AF[2] no tokens for integer scheduler queue 2",
     "DISPATCH_RESOURCE_STALL_CYCLES_2:INT_SCHEDULER_2_TOKEN_STALL"),
    ("int_sched3_full", 0xAF, 0x08, "PMCx0AF[3] no tokens for integer scheduler queue 3",
     "DISPATCH_RESOURCE_STALL_CYCLES_2:INT_SCHEDULER_3_TOKEN_STALL"),
    ("retire_queue_full", 0xAF, 0x20, "PMCx0AF[5] insufficient retire queue tokens",
     "DISPATCH_RESOURCE_STALL_CYCLES_2:RETIRE_TOKEN_STALL"),
)

CATALOGS.update({
    "zen1": _amd("AMD_PPR_17H_01", _ZEN12_AE + (
        ("alu_tokens", 0xAF, 0x10, "PMCx0AF[4] ALU tokens unavailable",
         "DYNAMIC_TOKENS_DISPATCH_STALLS_CYCLES_0:ALU_TOKEN_STALL"),
        ("agsq_tokens", 0xAF, 0x20, "PMCx0AF[5] address-generation scheduler queue tokens unavailable",
         "DYNAMIC_TOKENS_DISPATCH_STALLS_CYCLES_0:AGSQ_TOKEN_STALL"),
        ("retire_queue_full", 0xAF, 0x40, "PMCx0AF[6] insufficient retire queue tokens",
         "DYNAMIC_TOKENS_DISPATCH_STALLS_CYCLES_0:RETIRE_TOKEN_STALL"),
    )),
    "zen2": _amd("AMD_PPR_17H_31", _ZEN12_AE + (
        ("alu_tokens", 0xAF, 0x08, "PMCx0AF[3] ALU tokens unavailable",
         "DISPATCH_RESOURCE_STALL_CYCLES_0:ALU_TOKEN_STALL"),
    )),
    "zen3": _amd("AMD_PPR_19H_01", _ZEN34_AE + _ZEN34_AF),
    "zen4": _amd("AMD_PPR_19H_11", _ZEN34_AE + _ZEN34_AF),
    "zen5": _amd("AMD_PPR_1AH_02", (
        ("int_prf_full", 0xAE, 0x01, "PMCx0AE[0] integer physical register file resource stall", None),
        ("load_queue_full", 0xAE, 0x02, "PMCx0AE[1] lack of load queue tokens", None),
        ("store_queue_full", 0xAE, 0x04, "PMCx0AE[2] lack of store queue tokens", None),
        ("taken_branch_buffer_full", 0xAE, 0x10, "PMCx0AE[4] taken branch buffer resource stall", None),
        ("fp_sched_full", 0xAE, 0x40, "PMCx0AE[6] floating-point non-schedulable queue token stall", None),
        ("alu_tokens", 0xAF, 0x01, "PMCx0AF[0] ALU tokens unavailable", None),
        ("agen_tokens", 0xAF, 0x02, "PMCx0AF[1] address-generation tokens unavailable", None),
        ("ex_flush_recovery", 0xAF, 0x04, "PMCx0AF[2] pending integer execution flush recovery", None),
        ("retire_queue_full", 0xAF, 0x20, "PMCx0AF[5] retire queue tokens unavailable", None),
    )),
})


def raw_config(vendor: str, event: int, umask: int = 0, cmask: int = 0, inv: bool = False,
               edge: bool = False, any_thread: bool = False) -> int:
    """The perf `config` for a core event on x86 (the PERFEVTSEL layout without USR/OS/EN/INT):
    event select bits 0-7 (AMD: bits 8-11 of the select go to config bits 32-35), unit mask
    8-15, edge 18, any-thread 21 (Intel), invert 23, counter mask 24-31."""
    cfg = (event & 0xFF) | (umask & 0xFF) << 8 | (cmask & 0xFF) << 24
    if edge:
        cfg |= 1 << 18
    if any_thread:
        cfg |= 1 << 21
    if inv:
        cfg |= 1 << 23
    if vendor == "amd":
        cfg |= ((event >> 8) & 0xF) << 32
    elif event > 0xFF:
        raise ValueError(f"Intel event select {event:#x} is wider than 8 bits")
    return cfg
