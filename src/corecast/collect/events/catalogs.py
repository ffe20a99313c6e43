"""Backend-stall event catalogs: the fine-grained stall events the stall-based method (ESTIMA)
counts, per micro-architecture, each with the document it comes from. The catalogues are data:
`catalogs/<uarch>.toml` (and `catalogs/mnemonics.toml` for the mnemonics), read here.

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

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


#: The catalogue files: one TOML file per micro-architecture (as perf's pmu-events JSON and
#: LIKWID's group files are data), and mnemonics.toml; read by `load_catalogs` and `load_mnemonics`.
#: (A plain path beside this module, in a wheel and in the development install alike: not
#: importlib.resources, which costs `corecast stat` ~3 ms of start-up with zipfile, bz2 and lzma.)
CATALOG_DIR = Path(__file__).resolve().parent / "catalogs"
_EVENT_KEYS = {"key", "event", "umask", "cmask", "inv", "edge", "aggregate", "description", "pfm"}


def _read(name: str) -> dict[str, Any]:
    f = CATALOG_DIR / name
    try:
        return tomllib.loads(f.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:       # a packaging mistake, not a user's: say where
        raise ValueError(f"event catalogue {name}: {err}") from None


def load_catalogs() -> dict[str, tuple[StallEvent, ...]]:
    """Every micro-architecture's backend-stall events, from catalogs/<uarch>.toml."""
    out: dict[str, tuple[StallEvent, ...]] = {}
    for f in sorted(CATALOG_DIR.iterdir(), key=lambda f: f.name):
        if not f.name.endswith(".toml") or f.name == "mnemonics.toml":
            continue
        d = _read(f.name)
        src = d["source"]
        if src not in SOURCES:
            raise ValueError(f"event catalogue {f.name}: unknown source {src!r}")
        evs = []
        for e in d.get("event", []):
            unknown = set(e) - _EVENT_KEYS
            if unknown:
                raise ValueError(f"event catalogue {f.name}: unknown key {sorted(unknown)[0]!r} in {e.get('key')!r}")
            evs.append(StallEvent(e["key"], int(e["event"]), int(e.get("umask", 0)), e["description"], e.get("pfm"),
                                  src, cmask=int(e.get("cmask", 0)), inv=bool(e.get("inv", False)),
                                  edge=bool(e.get("edge", False)), aggregate=bool(e.get("aggregate", False))))
        out[f.name[:-5]] = tuple(evs)
    return out


def load_mnemonics() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The mnemonics (as catalogs/mnemonics.toml gives them) and their aliases."""
    d = _read("mnemonics.toml")
    return list(d.get("mnemonic", [])), dict(d.get("aliases", {}))


_catalogs: dict[str, tuple[StallEvent, ...]] | None = None


def __getattr__(name: str) -> Any:
    """CATALOGS, read on first use: the ten micro-architecture files cost a few milliseconds to
    parse, which a command counting software events (`corecast stat -c task_clock`) never needs."""
    global _catalogs
    if name == "CATALOGS":
        if _catalogs is None:
            _catalogs = load_catalogs()
        return _catalogs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
