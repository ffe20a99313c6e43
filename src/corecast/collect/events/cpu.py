"""Which CPU: vendor, family, model, and the micro-architecture corecast's tables are keyed by.

The running CPU comes from /proc/cpuinfo. A CPU can also be named, so that encodings can be
checked on any machine: `haswell`, `skylake`, `zen3`, a libpfm4 PMU name (`hsw`, `skx`,
`amd64_fam19h_zen3`), `intel:6:0x3f`, `amd:0x19:0x11`, or perf's cpuid form
`GenuineIntel-6-3F` / `AuthenticAMD-25-11`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import UserError
from . import pfm


@dataclass(frozen=True)
class Uarch:
    """A micro-architecture family sharing one event catalog."""

    key: str                    # haswell | skylake | icelake | goldencove | fam10h | zen1..zen5
    vendor: str                 # intel | amd
    label: str
    pfm_pmu: str | None         # libpfm4 PMU that encodes its events (None: libpfm lacks it)
    aliases: tuple[str, ...] = ()


UARCHS: dict[str, Uarch] = {u.key: u for u in (
    Uarch("haswell", "intel", "Intel Haswell/Broadwell", "hsw",
          ("hsw", "hsw_ep", "haswellx", "bdw", "bdw_ep", "broadwell", "broadwellx")),
    Uarch("skylake", "intel", "Intel Skylake/Cascade Lake/Kaby Lake/Coffee Lake", "skl",
          ("skl", "skx", "clx", "skylakex", "cascadelake", "kabylake", "coffeelake", "cometlake")),
    Uarch("icelake", "intel", "Intel Ice Lake/Tiger Lake/Rocket Lake", "icl",
          ("icl", "icx", "icelakex", "tigerlake", "rocketlake")),
    Uarch("goldencove", "intel", "Intel Golden Cove and later P-cores (Sapphire/Emerald/Granite Rapids, "
          "Alder/Raptor/Meteor Lake)", "spr",
          ("spr", "sapphirerapids", "emeraldrapids", "graniterapids", "alderlake", "raptorlake",
           "meteorlake", "adl", "adl_glc", "glc")),
    Uarch("fam10h", "amd", "AMD Family 10h (K10: Barcelona/Shanghai/Istanbul)", "amd64_fam10h_barcelona",
          ("k10", "barcelona", "shanghai", "istanbul", "amd64_fam10h_barcelona",
           "amd64_fam10h_shanghai", "amd64_fam10h_istanbul")),
    Uarch("zen1", "amd", "AMD Zen 1 (Family 17h models 00h-2Fh)", "amd64_fam17h_zen1",
          ("zen", "amd64_fam17h_zen1", "amd64_fam17h")),
    Uarch("zen2", "amd", "AMD Zen 2 (Family 17h models 30h-FFh)", "amd64_fam17h_zen2",
          ("amd64_fam17h_zen2", "rome")),
    Uarch("zen3", "amd", "AMD Zen 3 (Family 19h models 00h-0Fh, 20h-5Fh)", "amd64_fam19h_zen3",
          ("amd64_fam19h_zen3", "milan")),
    Uarch("zen4", "amd", "AMD Zen 4 (Family 19h models 10h-1Fh, 60h-AFh)", "amd64_fam19h_zen4",
          ("amd64_fam19h_zen4", "genoa")),
    Uarch("zen5", "amd", "AMD Zen 5 (Family 1Ah)", None,
          ("amd64_fam1ah_zen5", "turin")),
)}

_ALIASES = {a: u for u in UARCHS.values() for a in (u.key, *u.aliases)}

# Intel family 6 model numbers (Intel SDM Vol. 4, Table 2-1; Linux arch/x86/include/asm/intel-family.h)
_INTEL_MODELS = {
    "haswell": (0x3C, 0x3F, 0x45, 0x46, 0x3D, 0x47, 0x4F, 0x56),
    "skylake": (0x4E, 0x5E, 0x55, 0x8E, 0x9E, 0xA5, 0xA6),
    "icelake": (0x7D, 0x7E, 0x6A, 0x6C, 0x8C, 0x8D, 0xA7),
    "goldencove": (0x8F, 0xCF, 0xAD, 0xAE, 0x97, 0x9A, 0xB7, 0xBA, 0xBF, 0xAA, 0xAC, 0xC5, 0xC6, 0xBD),
}
# a representative (family, model) per uarch for naming a uarch without a model
_REPRESENTATIVE = {"haswell": (6, 0x3F), "skylake": (6, 0x55), "icelake": (6, 0x6A),
                   "goldencove": (6, 0x8F), "fam10h": (0x10, 0x02), "zen1": (0x17, 0x01),
                   "zen2": (0x17, 0x31), "zen3": (0x19, 0x01), "zen4": (0x19, 0x11), "zen5": (0x1A, 0x02)}


@dataclass(frozen=True)
class CpuId:
    vendor: str          # intel | amd | arm | unknown
    family: int
    model: int
    model_name: str = ""
    forced_pmu: str | None = None   # a libpfm PMU named explicitly

    @property
    def uarch(self) -> Uarch | None:
        return uarch_of(self)

    def describe(self) -> str:
        u = self.uarch
        base = f"{self.vendor} family {self.family:#x} model {self.model:#x}"
        if self.model_name:
            base = f"{self.model_name} ({base})"
        return f"{base}, {u.label}" if u else f"{base}, micro-architecture not in corecast's tables"


def uarch_of(cpu: CpuId) -> Uarch | None:
    if cpu.forced_pmu and cpu.forced_pmu in _ALIASES:
        return _ALIASES[cpu.forced_pmu]
    if cpu.vendor == "intel" and cpu.family == 6:
        for key, models in _INTEL_MODELS.items():
            if cpu.model in models:
                return UARCHS[key]
        return None
    if cpu.vendor == "amd":
        f, m = cpu.family, cpu.model
        if f == 0x10:
            return UARCHS["fam10h"]
        if f == 0x17:
            return UARCHS["zen1" if m < 0x30 else "zen2"]
        if f == 0x19:
            return UARCHS["zen4" if (0x10 <= m <= 0x1F or 0x60 <= m <= 0xAF) else "zen3"]
        if f == 0x1A:
            return UARCHS["zen5"]
    return None


def host_cpu(cpuinfo: str | Path = "/proc/cpuinfo") -> CpuId:
    vendor, family, model, name = "unknown", 0, 0, ""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return CpuId(vendor, family, model)
    for line in text.splitlines():
        if ":" not in line:
            if not line.strip() and vendor != "unknown":
                break
            continue
        k, v = (s.strip() for s in line.split(":", 1))
        if k == "vendor_id":
            vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "amd"}.get(v, v.lower())
        elif k == "cpu family":
            family = int(v)
        elif k == "model":
            model = int(v)
        elif k == "model name":
            name = v
        elif k == "CPU implementer":
            vendor = "arm"
    return CpuId(vendor, family, model, name)


_CPUID_RE = re.compile(r"^(GenuineIntel|AuthenticAMD|HygonGenuine)-(\w+)-(\w+)$", re.I)
_TRIPLE_RE = re.compile(r"^(intel|amd):(0x[0-9a-f]+|\d+):(0x[0-9a-f]+|\d+)$", re.I)


def parse_cpu(text: str) -> CpuId:
    """A named CPU: micro-architecture, libpfm PMU name, `vendor:family:model` or perf cpuid."""
    t = text.strip()
    key = t.lower()
    if key in _ALIASES:
        u = _ALIASES[key]
        fam, mod = _REPRESENTATIVE[u.key]
        pmu = key if key.startswith(("amd64_", "hsw", "bdw", "skl", "skx", "clx", "icl", "icx", "spr")) else None
        return CpuId(u.vendor, fam, mod, u.label, forced_pmu=pmu or u.key)
    m = _TRIPLE_RE.match(key)
    if m:
        return CpuId(m.group(1).lower(), int(m.group(2), 0), int(m.group(3), 0))
    m = _CPUID_RE.match(t)
    if m:
        vendor = "intel" if m.group(1).lower() == "genuineintel" else "amd"
        fam = int(m.group(2), 10) if vendor == "intel" or m.group(2).isdigit() else int(m.group(2), 16)
        return CpuId(vendor, fam, int(m.group(3), 16))
    lib = pfm.load()
    if lib is not None and key in lib.pmu_names():
        return CpuId("unknown", 0, 0, forced_pmu=key)
    known = ", ".join(sorted(UARCHS))
    raise UserError(f"unknown CPU '{text}': name a micro-architecture ({known}), a libpfm4 PMU "
                    "(hsw, skx, amd64_fam19h_zen3, ...), 'intel:6:0x3f' or 'GenuineIntel-6-3F'")


def pfm_pmu_for(cpu: CpuId) -> str | None:
    """The libpfm4 PMU whose tables encode this CPU's core events."""
    if cpu.forced_pmu and not cpu.forced_pmu in UARCHS:
        return cpu.forced_pmu
    u = cpu.uarch
    if u is None:
        return None
    if u.key == "fam10h":
        return {2: "amd64_fam10h_barcelona", 4: "amd64_fam10h_shanghai", 5: "amd64_fam10h_shanghai",
                6: "amd64_fam10h_shanghai", 8: "amd64_fam10h_istanbul", 9: "amd64_fam10h_istanbul"}.get(
                    cpu.model, "amd64_fam10h_barcelona")
    if u.key == "haswell" and cpu.model in (0x3F,):
        return "hsw_ep"
    if u.key == "haswell" and cpu.model in (0x3D, 0x47):
        return "bdw"
    if u.key == "haswell" and cpu.model in (0x4F, 0x56):
        return "bdw_ep"
    if u.key == "skylake" and cpu.model == 0x55:
        return "skx"
    if u.key == "icelake" and cpu.model in (0x6A, 0x6C):
        return "icx"
    return u.pfm_pmu
