"""Event specs: everything a user can write where corecast takes events.

One spec string may name several events, separated by commas:

- mnemonics: `instr`, `cycles`, `llc_misses`, `backend_stalls`, `task_clock`, ... with perf's
  modifiers `:u` (user only), `:k` (kernel only) and `:ebs=N` (a sample each N events);
  perf's own generic names (`instructions`, `cache-misses`, `cs`, `L1-dcache-load-misses`) too;
- PMCTrack's raw form `pmc0,pmc3=0x2e,umask3=0x41` with per-counter flags `umaskN`, `cmaskN`,
  `edgeN`, `invN`, `anyN`, `usrN`, `osN`, `ebsN[=period]`;
- perf's form `cpu/event=0x2e,umask=0x41,cmask=1/` (any PMU under
  /sys/bus/event_source/devices, using its `format/` description), `sw/task-clock/`, `rNNNN`;
- tracepoints `sched:sched_switch`;
- full event names through libpfm4: `INST_RETIRED:ANY_P`, `skl::CYCLE_ACTIVITY:STALLS_L2_MISS`.

`resolve(spec, pmu)` turns a string into `EventSpec`s; any mistake is a `UserError` naming the
offending part of the spec.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from ...errors import UserError
from . import abi, kernel, pfm
from . import catalogs as _catalogs
from .catalogs import SOURCES, load_mnemonics, raw_config
from .cpu import CpuId, host_cpu, parse_cpu, pfm_pmu_for

DEFAULT_EBS_PERIOD = 1_000_000
MAX_SPEC_LEN = 4096


@dataclass(frozen=True)
class EventSpec:
    """One event, ready for perf_event_open.

    `name` is what the user wrote (or a canonical form of it) and heads its column; `pmc` is
    the PMCTrack counter index when the spec named one; `sample_period` is set for
    event-based sampling (`ebs`)."""

    name: str
    type: int
    config: int
    config1: int = 0
    config2: int = 0
    exclude_user: bool = False
    exclude_kernel: bool = False
    exclude_hv: bool = False
    sample_period: int | None = None
    pmc: int | None = None
    description: str = ""
    origin: str = ""          # mnemonic | generic | raw | perf | pmctrack | tracepoint | libpfm | catalog
    pmu: str | None = None    # perf PMU (cpu, software, tracepoint, ...) or libpfm PMU for named models
    unit: str = "count"       # count | ns
    encoding: str = ""        # human-readable raw encoding, e.g. "event=0x2e,umask=0x41"

    @property
    def flags(self) -> tuple[str, ...]:
        out = []
        if self.exclude_user:
            out.append("exclude_user")
        if self.exclude_kernel:
            out.append("exclude_kernel")
        if self.exclude_hv:
            out.append("exclude_hv")
        if self.sample_period:
            out.append(f"ebs={self.sample_period}")
        return tuple(out)

    @property
    def kind(self) -> str:
        """hardware | software | tracepoint | raw | other, for status messages."""
        if self.type in (abi.PERF_TYPE_HARDWARE, abi.PERF_TYPE_HW_CACHE, abi.PERF_TYPE_RAW):
            return "hardware"
        return {abi.PERF_TYPE_SOFTWARE: "software", abi.PERF_TYPE_TRACEPOINT: "tracepoint"}.get(
            self.type, "pmu")

    @property
    def ident(self) -> str:
        """The name as an identifier, for derived-metric expressions."""
        s = re.sub(r"[^A-Za-z0-9_]", "_", self.name)
        s = re.sub(r"_+", "_", s).strip("_") or "event"
        return s if not s[0].isdigit() else "e_" + s

    @property
    def label(self) -> str:
        return f"pmc{self.pmc}" if self.pmc is not None else self.name

    def translate(self) -> str:
        """One line like PMCTrack's pmc-events: the perf attribute that encodes it."""
        tname = abi.TYPE_NAMES.get(self.type, self.pmu or str(self.type))
        parts = [f"type={self.type} ({tname})", f"config={self.config:#x}"]
        if self.config1:
            parts.append(f"config1={self.config1:#x}")
        if self.config2:
            parts.append(f"config2={self.config2:#x}")
        parts.extend(self.flags)
        enc = f"  [{self.encoding}]" if self.encoding else ""
        return f"{self.name}: {' '.join(parts)}{enc}"

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "config": self.config, "config1": self.config1,
                "config2": self.config2, "flags": list(self.flags), "pmc": self.pmc,
                "sample_period": self.sample_period, "description": self.description,
                "origin": self.origin, "pmu": self.pmu, "unit": self.unit, "encoding": self.encoding}


class StallEventList(list):
    """A list of EventSpec with `.reason` saying why it is empty (unknown family)."""

    reason: str | None = None
    cpu: CpuId | None = None


# --------------------------------------------------------------------------------------------
# mnemonics

@dataclass(frozen=True)
class Mnemonic:
    name: str
    description: str
    type: int                      # generic perf type used on the running machine
    config: int
    unit: str = "count"
    # raw encodings per vendor for a named model: (event, umask, cmask, pfm name per uarch)
    intel: tuple[int, int] | None = None
    amd: tuple[int, int] | None = None
    amd_fam10h: tuple[int, int] | None = None


_HW, _SW, _HC = abi.PERF_TYPE_HARDWARE, abi.PERF_TYPE_SOFTWARE, abi.PERF_TYPE_HW_CACHE


def _hc(cache: str, op: str, result: str) -> int:
    return abi.HW_CACHE_IDS[cache] | abi.HW_CACHE_OPS[op] << 8 | abi.HW_CACHE_RESULTS[result] << 16


_TYPES = {"hardware": _HW, "software": _SW, "hw_cache": _HC}


def _mnemonics() -> tuple[dict[str, Mnemonic], dict[str, str]]:
    """The mnemonics of catalogs/mnemonics.toml as Mnemonic objects, and their aliases."""
    rows, aliases = load_mnemonics()
    out: dict[str, Mnemonic] = {}
    for r in rows:
        config = _hc(*r["cache"]) if r["type"] == "hw_cache" else int(r["config"])
        out[r["name"]] = Mnemonic(r["name"], r["description"], _TYPES[r["type"]], config, unit=r.get("unit", "count"),
                                  **{v: tuple(r[v]) for v in ("intel", "amd", "amd_fam10h") if v in r})
    return out, aliases


MNEMONICS, MNEMONIC_ALIASES = _mnemonics()
BACKEND_STALLS = "backend_stalls"


def _perf_generic(name: str) -> tuple[int, int, str] | None:
    """perf's own generic event names."""
    if name in abi.HW_EVENTS:
        return _HW, abi.HW_EVENTS[name], "count"
    if name in abi.SW_EVENTS:
        return _SW, abi.SW_EVENTS[name], "ns" if name in ("task-clock", "cpu-clock") else "count"
    m = re.fullmatch(r"(L1-dcache|L1-icache|LLC|dTLB|iTLB|branch|node)-(loads?|stores?|prefetch(?:es)?)"
                     r"(?:-(misses|miss))?", name)
    if m:
        return _HC, _hc(m.group(1), m.group(2), m.group(3) or ""), "count"
    m = re.fullmatch(r"(L1-dcache|L1-icache|LLC|dTLB|iTLB|branch|node)-(misses|miss)", name)
    if m:
        return _HC, _hc(m.group(1), "loads", "misses"), "count"
    return None


# --------------------------------------------------------------------------------------------
# context: which CPU the spec is for

@dataclass
class _Ctx:
    cpu: CpuId
    named: bool          # True: a named model (translation), False: this machine

    @property
    def vendor(self) -> str:
        return self.cpu.vendor


def _ctx(pmu: str | CpuId | None) -> _Ctx:
    if pmu is None:
        return _Ctx(_host(), False)
    if isinstance(pmu, CpuId):
        return _Ctx(pmu, True)
    return _Ctx(parse_cpu(pmu), True)


_HOST: CpuId | None = None


def _host() -> CpuId:
    global _HOST
    if _HOST is None:
        forced = os.environ.get("CORECAST_CPU")
        _HOST = parse_cpu(forced) if forced else host_cpu()
    return _HOST


# --------------------------------------------------------------------------------------------
# splitting

def split_items(spec: str) -> list[str]:
    """Split at top-level commas (not inside perf's `pmu/.../`)."""
    items, cur, inside = [], [], False
    for ch in spec:
        if ch == "/":
            inside = not inside
        if ch == "," and not inside:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if inside:
        raise UserError(f"event spec '{spec}': unbalanced '/' (perf form is pmu/term=value,.../)")
    items.append("".join(cur))
    return [i.strip() for i in items]


def _int(text: str, what: str, spec: str, lo: int = 0, hi: int = (1 << 64) - 1) -> int:
    try:
        v = int(text, 0)
    except (ValueError, TypeError):
        raise UserError(f"event spec '{spec}': {what} '{text}' is not a number (decimal or 0x hex)") from None
    if not lo <= v <= hi:
        raise UserError(f"event spec '{spec}': {what} {text} is out of range ({lo}..{hi:#x})")
    return v


# --------------------------------------------------------------------------------------------
# the parser

_PMC_RE = re.compile(r"pmc(\d+)(?:=(.*))?", re.I)
_FLAG_RE = re.compile(r"(umask|cmask|edge|inv|any|usr|os|ebs)(\d+)(?:=(.*))?", re.I)
_EBS_RE = re.compile(r"(?:ebs|period)(?:=(.*))?", re.I)
_PERF_RE = re.compile(r"([A-Za-z_][\w.\-]*)/(.*)/((?::[A-Za-z]+)*)")
_RAWR_RE = re.compile(r"r([0-9a-fA-F]{1,16})((?::[A-Za-z]+)*)")
_NAME_MOD_RE = re.compile(r"([A-Za-z_][\w\-.]*?)((?::(?:[ukhp]+|ebs=[^:]*))*)")
_TP_RE = re.compile(r"([a-z0-9_]+):([a-z0-9_]+)")


def resolve(spec: str, pmu: str | CpuId | None = None) -> list[EventSpec]:
    """The events one spec string names, for this machine (`pmu=None`) or a named CPU model."""
    if not isinstance(spec, str):
        raise UserError("event spec must be text")
    if len(spec) > MAX_SPEC_LEN:
        raise UserError(f"event spec is too long ({len(spec)} characters, at most {MAX_SPEC_LEN})")
    if not spec.strip():
        raise UserError("empty event spec")
    if any(ord(c) < 32 for c in spec):
        raise UserError(f"event spec {spec!r}: control characters are not allowed")
    ctx = _ctx(pmu)
    items = split_items(spec.strip())
    out: list[EventSpec] = []
    pmcs: dict[int, int] = {}          # pmc index -> position in out
    raw_state: dict[int, dict] = {}    # pmc index -> pending raw fields
    modes: dict[int, dict[str, bool]] = {}   # pmc index -> usr/os flags
    for item in items:
        if not item:
            raise UserError(f"event spec '{spec}': empty item (two commas, or a trailing comma)")
        m = _PMC_RE.fullmatch(item)
        if m:
            n = _int(m.group(1), "counter number", spec, 0, 63)
            if n in pmcs:
                raise UserError(f"event spec '{spec}': pmc{n} is given twice")
            if m.group(2) is None:
                if n > 2:
                    raise UserError(f"event spec '{spec}': pmc{n} needs an event code (pmc{n}=0x2e); "
                                    "only pmc0-pmc2 are fixed counters")
                fixed = [("instructions", 1, "instructions retired (fixed counter 0)"),
                         ("cycles", 0, "core cycles (fixed counter 1)"),
                         ("ref-cycles", 9, "reference cycles (fixed counter 2)")][n]
                ev = EventSpec(name=f"pmc{n}", type=_HW, config=fixed[1], pmc=n, description=fixed[2],
                               origin="pmctrack", pmu="cpu", encoding=f"generic {fixed[0]}")
            else:
                code = _int(m.group(2), f"pmc{n} event code", spec, 0,
                            0xFFF if ctx.vendor == "amd" else 0xFF)
                raw_state[n] = {"event": code, "umask": 0, "cmask": 0, "edge": False, "inv": False,
                                "any": False}
                ev = EventSpec(name=f"pmc{n}", type=abi.PERF_TYPE_RAW, config=0, pmc=n,
                               description=f"raw event {code:#x}", origin="pmctrack", pmu="cpu")
            pmcs[n] = len(out)
            out.append(ev)
            continue
        m = _FLAG_RE.fullmatch(item)
        if m:
            flag, n, val = m.group(1).lower(), int(m.group(2)), m.group(3)
            if n not in pmcs:
                raise UserError(f"event spec '{spec}': {flag}{n} refers to pmc{n}, which the spec "
                                f"does not define before it")
            pos = pmcs[n]
            ev = out[pos]
            if flag in ("umask", "cmask"):
                if val is None:
                    raise UserError(f"event spec '{spec}': {flag}{n} needs a value ({flag}{n}=0x01)")
                if n not in raw_state:
                    raise UserError(f"event spec '{spec}': {flag}{n} needs pmc{n}=CODE, not a fixed counter")
                raw_state[n][flag] = _int(val, f"{flag}{n}", spec, 0, 0xFF)
            elif flag in ("edge", "inv", "any"):
                on = True if val is None else bool(_int(val, f"{flag}{n}", spec, 0, 1))
                if n not in raw_state:
                    raise UserError(f"event spec '{spec}': {flag}{n} needs pmc{n}=CODE, not a fixed counter")
                if flag == "any" and ctx.vendor == "amd":
                    raise UserError(f"event spec '{spec}': any{n} (any thread) exists on Intel only")
                raw_state[n][flag] = on
            elif flag in ("usr", "os"):
                on = True if val is None else bool(_int(val, f"{flag}{n}", spec, 0, 1))
                modes.setdefault(n, {})[flag] = on
            elif flag == "ebs":
                period = DEFAULT_EBS_PERIOD if val is None else _int(val, f"ebs{n} period", spec, 1)
                out[pos] = replace(out[pos], sample_period=period)
            continue
        m = _EBS_RE.fullmatch(item)
        if m:
            if not out:
                raise UserError(f"event spec '{spec}': '{item}' must follow the event it samples")
            period = DEFAULT_EBS_PERIOD if m.group(1) is None else _int(m.group(1), "ebs period", spec, 1)
            out[-1] = replace(out[-1], sample_period=period)
            continue
        out.extend(_resolve_item(item, spec, ctx))
    # finish PMCTrack raw events
    for n, st in raw_state.items():
        pos = pmcs[n]
        ev = out[pos]
        cfg = raw_config(ctx.vendor if ctx.vendor in ("intel", "amd") else "intel", st["event"],
                         st["umask"], st["cmask"], st["inv"], st["edge"], st["any"])
        enc = [f"event={st['event']:#x}", f"umask={st['umask']:#x}"]
        if st["cmask"]:
            enc.append(f"cmask={st['cmask']:#x}")
        for f in ("edge", "inv", "any"):
            if st[f]:
                enc.append(f)
        text = f"pmc{n}={st['event']:#x}" + (f",umask{n}={st['umask']:#x}" if st["umask"] else "") + \
            (f",cmask{n}={st['cmask']:#x}" if st["cmask"] else "")
        out[pos] = replace(ev, name=text, config=cfg, encoding=",".join(enc))
    for n, md in modes.items():
        pos = pmcs[n]
        usr, os_ = md.get("usr"), md.get("os")
        # PMCTrack: usrN alone counts user mode only, osN alone kernel mode only
        excl_user = not bool(usr)
        excl_kernel = not bool(os_)
        if excl_user and excl_kernel:
            raise UserError(f"event spec '{spec}': pmc{n} counts neither user nor kernel mode")
        out[pos] = replace(out[pos], exclude_user=excl_user, exclude_kernel=excl_kernel)
    seen: set[tuple] = set()
    for e in out:
        key = (e.name, e.type, e.config, e.exclude_user, e.exclude_kernel)
        if key in seen:          # counted twice, its rows would add up to twice the process total
            raise UserError(f"event spec '{spec}': {e.name} is given twice in one set")
        seen.add(key)
    ebs = [e for e in out if e.sample_period]
    if len(ebs) > 1:
        raise UserError(f"event spec '{spec}': event-based sampling (ebs) on more than one event "
                        f"({', '.join(e.name for e in ebs)}); put ebs on one event")
    return out


def _apply_mods(ev: EventSpec, mods: str, spec: str) -> EventSpec:
    if not mods:
        return ev
    for mod in mods.split(":")[1:]:
        if mod.startswith("ebs="):
            ev = replace(ev, sample_period=_int(mod[4:], "ebs period", spec, 1))
            continue
        u, k = "u" in mod, "k" in mod
        bad = set(mod) - set("ukhp")
        if bad:
            raise UserError(f"event spec '{spec}': unknown modifier ':{mod}' (use :u, :k, :ebs=N)")
        if "p" in mod and ev.kind != "hardware":
            raise UserError(f"event spec '{spec}': ':p' (precise) applies to hardware events only")
        if u or k:
            ev = replace(ev, exclude_user=not u, exclude_kernel=not k, exclude_hv=True)
    return ev


def _resolve_item(item: str, spec: str, ctx: _Ctx) -> list[EventSpec]:
    m = _PERF_RE.fullmatch(item)
    if m:
        return [_apply_mods(_perf_form(m.group(1), m.group(2), item, spec, ctx), m.group(3), spec)]
    m = _RAWR_RE.fullmatch(item)
    if m and not item.lower() in MNEMONICS:
        cfg = int(m.group(1), 16)
        ev = EventSpec(name=item.split(":")[0], type=abi.PERF_TYPE_RAW, config=cfg, origin="raw", pmu="cpu",
                       description=f"raw event {cfg:#x}", encoding=f"config={cfg:#x}")
        return [_apply_mods(ev, m.group(2), spec)]
    m = _NAME_MOD_RE.fullmatch(item)
    if m:
        base, mods = m.group(1), m.group(2)
        key = base.lower()
        key = MNEMONIC_ALIASES.get(key, key)
        if key == BACKEND_STALLS:
            evs = backend_stall_events(ctx.cpu)
            if not evs:
                if ctx.named:
                    raise UserError(f"event spec '{spec}': no backend-stall catalog for {ctx.cpu.describe()}")
                return [_apply_mods(EventSpec(
                    name="backend_stalls", type=_HW, config=8, origin="generic", pmu="cpu",
                    description=f"kernel's generic stalled-cycles-backend ({evs.reason})"), mods, spec)]
            return [_apply_mods(e, mods, spec) for e in evs]
        if key in MNEMONICS:
            return [_apply_mods(_mnemonic(MNEMONICS[key], ctx), mods, spec)]
        gen = _perf_generic(base)
        if gen:
            t, c, unit = gen
            return [_apply_mods(EventSpec(name=base, type=t, config=c, origin="generic", unit=unit,
                                          pmu="software" if t == _SW else "cpu",
                                          description=f"perf generic event {base}"), mods, spec)]
    base, colon, rest = item.partition(":")
    bkey = MNEMONIC_ALIASES.get(base.lower(), base.lower())
    if colon and (bkey in MNEMONICS or bkey == BACKEND_STALLS or _perf_generic(base)):
        raise UserError(f"event spec '{spec}': unknown modifier ':{rest}' on {base} (use :u, :k, :ebs=N)")
    tp = _TP_RE.fullmatch(item)
    if tp:
        found = kernel.tracepoint_id(tp.group(1), tp.group(2))
        if found is not None:
            return [EventSpec(name=item, type=abi.PERF_TYPE_TRACEPOINT, config=found, origin="tracepoint",
                              pmu="tracepoint", description=f"tracepoint {item}",
                              encoding=f"tracepoint id {found}")]
    if re.fullmatch(r"[\w.\-]+(::[\w.\-]+)?(:[\w.=\-]+)*", item):
        lib_ev = _libpfm(item, spec, ctx)
        if lib_ev is not None:
            return [lib_ev]
    hint = ""
    if tp:
        hint = (f"; no tracepoint {item} under {kernel.tracefs_dir() or 'tracefs (not mounted)'}")
    raise UserError(f"event spec '{spec}': unknown event '{item}' (not a mnemonic, perf event, "
                    f"tracepoint or libpfm4 event{hint}; `corecast events` lists them)")


def _mnemonic(mn: Mnemonic, ctx: _Ctx) -> EventSpec:
    u = ctx.cpu.uarch
    raw = None
    if ctx.vendor == "intel":
        raw = mn.intel
    elif ctx.vendor == "amd":
        raw = mn.amd_fam10h if (u is not None and u.key == "fam10h") else mn.amd
    if raw is not None:
        ev, um = raw
        cfg = raw_config(ctx.vendor, ev, um)
        enc = f"event={ev:#x},umask={um:#x}"
    else:
        cfg, enc = None, ""
    if ctx.named and cfg is not None:
        return EventSpec(name=mn.name, type=abi.PERF_TYPE_RAW, config=cfg, origin="mnemonic", pmu="cpu",
                         description=f"{mn.description} on {ctx.cpu.describe()}", encoding=enc, unit=mn.unit)
    # this machine (or no raw encoding for the named model): the kernel's generic event, which
    # the kernel maps to the right encoding for the running model
    desc = mn.description
    if enc and mn.type == _HW:
        desc += f" (kernel generic event; on this model {enc})"
    return EventSpec(name=mn.name, type=mn.type, config=mn.config, origin="mnemonic",
                     pmu="software" if mn.type == _SW else "cpu", description=desc, encoding=enc,
                     unit=mn.unit)


# --------------------------------------------------------------------------------------------
# perf form pmu/terms/

_X86_FORMAT_INTEL = {"event": [("config", 0, 7)], "umask": [("config", 8, 15)], "edge": [("config", 18, 18)],
                     "pc": [("config", 19, 19)], "any": [("config", 21, 21)], "inv": [("config", 23, 23)],
                     "cmask": [("config", 24, 31)], "in_tx": [("config", 32, 32)],
                     "in_tx_cp": [("config", 33, 33)]}
_X86_FORMAT_AMD = {"event": [("config", 0, 7), ("config", 32, 35)], "umask": [("config", 8, 15)],
                   "edge": [("config", 18, 18)], "inv": [("config", 23, 23)], "cmask": [("config", 24, 31)]}


def _perf_form(pmu: str, body: str, item: str, spec: str, ctx: _Ctx) -> EventSpec:
    terms: list[tuple[str, str | None]] = []
    for t in body.split(","):
        t = t.strip()
        if not t:
            continue
        k, eq, v = t.partition("=")
        terms.append((k.strip(), v.strip() if eq else None))
    if pmu in ("sw", "software"):
        if len(terms) != 1:
            raise UserError(f"event spec '{spec}': {item}: name one software event, e.g. sw/task-clock/")
        k, v = terms[0]
        if k == "config" and v is not None:
            cfg = _int(v, "config", spec, 0, 0xFFFF)
            name = next((n for n, c in abi.SW_EVENTS.items() if c == cfg), f"sw-{cfg}")
        elif v is None and (k in abi.SW_EVENTS or k.replace("_", "-") in abi.SW_EVENTS):
            name = k.replace("_", "-")
            cfg = abi.SW_EVENTS[name]
        else:
            raise UserError(f"event spec '{spec}': {item}: unknown software event '{k}' "
                            f"(known: {', '.join(sorted(abi.SW_EVENTS))})")
        return EventSpec(name=item, type=_SW, config=cfg, origin="perf", pmu="software",
                         unit="ns" if name in ("task-clock", "cpu-clock") else "count",
                         description=f"software event {name}", encoding=f"config={cfg}")
    pmu_dir = kernel.SYSFS_PMUS / pmu
    is_core = pmu in ("cpu", "cpu_core", "cpu_atom")
    if ctx.named and is_core:
        fmt = _X86_FORMAT_AMD if ctx.vendor == "amd" else _X86_FORMAT_INTEL
        ptype = abi.PERF_TYPE_RAW
    elif pmu_dir.is_dir():
        fmt = kernel.read_format(pmu_dir)
        try:
            ptype = int((pmu_dir / "type").read_text().strip())
        except (OSError, ValueError):
            raise UserError(f"event spec '{spec}': cannot read the type of PMU '{pmu}'") from None
        if is_core and not fmt:
            fmt = _X86_FORMAT_AMD if ctx.vendor == "amd" else _X86_FORMAT_INTEL
    elif is_core:
        # no core PMU here (a VM without one): encode as the vendor documents, report later
        fmt = _X86_FORMAT_AMD if ctx.vendor == "amd" else _X86_FORMAT_INTEL
        ptype = abi.PERF_TYPE_RAW
    else:
        raise UserError(f"event spec '{spec}': no PMU '{pmu}' on this machine "
                        f"(PMUs here: {', '.join(kernel.sysfs_pmus()) or 'none'})")
    cfg = {"config": 0, "config1": 0, "config2": 0}
    period = None
    name = None
    enc = []
    for k, v in terms:
        if k in ("config", "config1", "config2"):
            if v is None:
                raise UserError(f"event spec '{spec}': {k} needs a value")
            cfg[k] |= _int(v, k, spec)
            enc.append(f"{k}={cfg[k]:#x}")
        elif k in ("period", "ebs"):
            period = DEFAULT_EBS_PERIOD if v is None else _int(v, k, spec, 1)
        elif k == "name":
            if not v:
                raise UserError(f"event spec '{spec}': name= needs a value")
            name = v
        elif k in fmt:
            val = 1 if v is None else _int(v, k, spec)
            for fld, bits in kernel.place(val, fmt[k], k, spec).items():
                cfg[fld] |= bits
            enc.append(f"{k}={val:#x}" if v is not None else k)
        else:
            known = ", ".join(sorted(set(fmt) | {"config", "config1", "config2", "period", "name"}))
            raise UserError(f"event spec '{spec}': PMU '{pmu}' has no term '{k}' (terms: {known})")
    if is_core and not any(k == "event" or k == "config" for k, _ in terms):
        raise UserError(f"event spec '{spec}': {item} needs event=CODE")
    return EventSpec(name=name or item, type=ptype, config=cfg["config"], config1=cfg["config1"],
                     config2=cfg["config2"], sample_period=period, origin="perf", pmu=pmu,
                     description=f"{pmu} event {','.join(enc)}", encoding=",".join(enc))


# --------------------------------------------------------------------------------------------
# libpfm4

def _libpfm(item: str, spec: str, ctx: _Ctx) -> EventSpec | None:
    lib = pfm.load()
    if lib is None:
        return None
    pmu = None
    if ctx.named and "::" not in item:
        pmu = pfm_pmu_for(ctx.cpu)
        if pmu is None:
            raise UserError(f"event spec '{spec}': libpfm4 {lib.version} has no tables for "
                            f"{ctx.cpu.describe()}")
    try:
        enc = lib.encode(item, pmu=pmu)
    except LookupError:
        return None
    except ValueError as err:
        raise UserError(f"event spec '{spec}': {err}") from None
    return EventSpec(name=item, type=enc.type, config=enc.config, config1=enc.config1, config2=enc.config2,
                     exclude_user=enc.exclude_user, exclude_kernel=enc.exclude_kernel, origin="libpfm",
                     pmu=enc.pmu, description=enc.description, encoding=enc.name)


# --------------------------------------------------------------------------------------------
# backend stalls

def backend_stall_events(cpu: str | CpuId | None = None) -> StallEventList:
    """The fine-grained backend-stall events for the running CPU, or a named one.

    Empty (with `.reason`) when corecast has no catalog for the CPU's family."""
    c = _host() if cpu is None else (cpu if isinstance(cpu, CpuId) else parse_cpu(cpu))
    out = StallEventList()
    out.cpu = c
    u = c.uarch
    if u is None or u.key not in _catalogs.CATALOGS:
        out.reason = (f"no backend-stall catalog for {c.describe()} (known: Intel Haswell to Golden "
                      "Cove, AMD Family 10h and Zen 1-5)")
        return out
    vendor = u.vendor
    for se in _catalogs.CATALOGS[u.key]:
        cfg = raw_config(vendor, se.event, se.umask, se.cmask, se.inv, se.edge)
        enc = f"event={se.event:#x},umask={se.umask:#x}" + (f",cmask={se.cmask:#x}" if se.cmask else "")
        out.append(EventSpec(
            name=f"stall_{se.key}", type=abi.PERF_TYPE_RAW, config=cfg, origin="catalog", pmu="cpu",
            description=f"{se.description} [{se.notation}; {SOURCES[se.source]}]"
                        + (" (aggregate)" if se.aggregate else ""),
            encoding=enc))
    return out
