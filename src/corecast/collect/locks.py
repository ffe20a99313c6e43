"""The sync shim's per-lock table: which lock, taken where, how often, how long waited for and
held -- one run's rows of the campaign's `locks` side table.

The shim (`native/shim/locktab.c`) counts, per thread, every acquisition of a mutex, spin lock
or rwlock by (lock address, call site), with the waits of the contended ones and the hold time
of a random sample of them, and writes the table and the process's file-backed mappings into
its report when the process exits. `lock_rows(reports, ticks_per_s)` takes every report of
the run, adds the threads up, symbolizes the addresses (`corecast.collect.symbols`) and returns
one row per (lock, call site):

    lock             `&queue_lock` (a global or static, from the ELF symbol table: `&name`,
                     `&name[i]` or `&name+off`), or `lock in push()` for one that is not (heap,
                     stack): named after the function of its busiest call site, so that the
                     same lock has the same name in every run
    lock_file        the source file of a static lock (`pool.c`), when the symbol table says it
    lock_kind        mutex, spin, rdlock, wrlock; `trylock` true for a site that takes it with
                     a trylock (its waits are the program's, outside the shim's view)
    instances        distinct lock objects (per process) under this name at this site
    site             `pool.c:41 worker` (file:line from the debug information, where there is
                     some; else the function; else the object and offset)
    call             `pthread_mutex_lock(&queue_lock)`: what a programmer would grep for
    acquisitions, contended, trylock_failures
    wait_s, max_wait_s            time waited in the contended acquisitions
    hold_s           mean hold time per acquisition over the timed sample, leaving out samples
                     more than HOLD_OUTLIER times the median (a holder preempted or descheduled:
                     the machine's doing, not the program's); hold_mean_all_s keeps them
    hold_samples, hold_outliers, hold_max_s, threads

Rows are at most MAX_ROWS per run (the busiest by wait + hold); what was left out, and the
acquisitions the fixed-size per-thread tables had no room for, are said in `LockTable.notes`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import symbols

MAX_ROWS = 200                 # rows kept per run
MAX_LOCK_LINES = 1_000_000     # lock lines read per report (the shim writes at most 256 a thread)
HOLD_OUTLIER = 32.0            # a hold sample above this many times the median is an outlier

CALLS = {"mutex": "pthread_mutex_lock", "spin": "pthread_spin_lock", "rdlock": "pthread_rwlock_rdlock",
         "wrlock": "pthread_rwlock_wrlock", "mutex-try": "pthread_mutex_trylock",
         "spin-try": "pthread_spin_trylock", "rdlock-try": "pthread_rwlock_tryrdlock",
         "wrlock-try": "pthread_rwlock_trywrlock"}
KIND_SIZE = {"mutex": 40, "spin": 4, "rdlock": 56, "wrlock": 56}   # sizeof on x86-64 glibc


@dataclass
class Entry:
    """One (lock, site) of one process, over its threads; times in clock ticks."""

    addr: int
    site: int
    kind: str
    acq: int = 0
    contended: int = 0
    wait: int = 0
    wait_max: int = 0
    tryfail: int = 0
    hold_n: int = 0
    hold_sum: int = 0
    hold_max: int = 0
    hist: dict[int, list[int]] = field(default_factory=dict)    # bucket -> [count, sum]
    threads: int = 0

    def add(self, kv: dict[str, str], hist: dict[int, list[int]]) -> None:
        self.acq += int(kv.get("acq", 0))
        self.contended += int(kv.get("contended", 0))
        self.wait += int(kv.get("wait", 0))
        self.wait_max = max(self.wait_max, int(kv.get("max", 0)))
        self.tryfail += int(kv.get("tryfail", 0))
        self.hold_n += int(kv.get("hold_n", 0))
        self.hold_sum += int(kv.get("hold_sum", 0))
        self.hold_max = max(self.hold_max, int(kv.get("hold_max", 0)))
        for b, (n, s) in hist.items():
            h = self.hist.setdefault(b, [0, 0])
            h[0] += n
            h[1] += s
        self.threads += 1


@dataclass
class ProcessLocks:
    pid: int
    tick_cost: int = 0
    entries: dict[tuple[int, int], Entry] = field(default_factory=dict)
    overflow: int = 0
    untracked: int = 0
    maps: list[str] = field(default_factory=list)


def _hist(text: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    if text in ("", "-"):
        return out
    for part in text.split(","):
        b, n, s = part.split(":")
        out[int(b)] = [int(n), int(s)]
    return out


def parse_report(text: str) -> ProcessLocks | None:
    """The lock lines of one shim report (None for a report without any: a program that never
    locked, or a shim from before the lock table)."""
    pl: ProcessLocks | None = None
    pid = 0
    nlock = 0
    for ln in text.splitlines():
        if ln.startswith("pid "):
            pid = int(ln.split()[1])
        elif ln.startswith("lt_tick_cost "):
            pl = ProcessLocks(pid=pid, tick_cost=int(ln.split()[1]))
        elif pl is None:
            continue
        elif ln.startswith("lock "):
            nlock += 1
            if nlock > MAX_LOCK_LINES:
                continue
            parts = ln.split()
            if len(parts) < 7 or len(parts) % 2 == 0:
                continue
            try:
                addr, site, kind = int(parts[2], 16), int(parts[3], 16), parts[4]
                kv = dict(zip(parts[5::2], parts[6::2]))
                hist = _hist(kv.pop("hist", "-"))
                e = pl.entries.setdefault((addr, site), Entry(addr, site, kind if kind in CALLS else "mutex"))
                e.add(kv, hist)
            except (ValueError, IndexError):
                continue
        elif ln.startswith("locktab "):
            parts = ln.split()
            kv = dict(zip(parts[2::2], parts[3::2]))
            pl.overflow += int(kv.get("overflow", 0)) if kv.get("overflow", "0").isdigit() else 0
        elif ln.startswith("lt_untracked "):
            v = ln.split()[1]
            pl.untracked = int(v) if v.isdigit() else 0
        elif ln.startswith("map ") and len(pl.maps) < symbols.MAX_MAPS:
            pl.maps.append(ln)
    return pl


def robust_hold(hist: dict[int, list[int]]) -> tuple[float | None, int]:
    """(mean hold in ticks over the samples not far above the median, samples left out), from
    the octave histogram: the buckets HOLD_OUTLIER times above the median's are left out whole
    (their sums are exact, so what remains is an exact mean of the samples kept)."""
    n = sum(v[0] for v in hist.values())
    if n == 0:
        return None, 0
    acc, med = 0, 0
    for b in sorted(hist):
        acc += hist[b][0]
        if 2 * acc >= n:
            med = b
            break
    cut = med + int(round(math.log2(HOLD_OUTLIER)))
    kept = [v for b, v in hist.items() if b <= cut]
    kn = sum(v[0] for v in kept)
    return (sum(v[1] for v in kept) / kn if kn else None), n - kn


@dataclass
class LockTable:
    rows: list[dict[str, Any]]
    notes: list[str]
    summary: dict[str, Any]


def _lock_name(var: symbols.Variable, kind: str) -> str | None:
    if not var.name:
        return None
    size = KIND_SIZE.get(kind.removesuffix("-try"), 0)
    if var.offset == 0:
        return f"&{var.name}"
    if size and var.offset % size == 0 and var.size >= var.offset + size:
        return f"&{var.name}[{var.offset // size}]"
    return f"&{var.name}+{var.offset}"


def _site_label(s: symbols.Site) -> str:
    if s.file and s.line:
        where = f"{symbols.short(s.file)}:{s.line}"
        return f"{where} {s.function}" if s.function else where
    if s.function:
        return f"{s.function} ({symbols.short(s.object)})" if s.object else s.function
    if s.object:
        return f"{symbols.short(s.object)}+{s.offset:#x}"
    return "unknown site"


def lock_rows(reports: Iterable[str], ticks_per_s: float | None) -> LockTable | None:
    """The run's per-lock rows (see the module doc) from its processes' reports, as
    `collect.shim.read_reports` read them whole (`ShimSummary.report_texts`: a report cut short
    is left out there); None when no report has a lock table."""
    procs: list[ProcessLocks] = []
    for text in reports:
        try:
            pl = parse_report(text)
        except ValueError:
            continue
        if pl is not None:
            procs.append(pl)
    if not procs:
        return None
    rate = ticks_per_s if ticks_per_s and ticks_per_s > 0 else None
    sec = (lambda t: t / rate) if rate else (lambda t: None)
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    overflow = untracked = 0
    for pl in procs:
        overflow += pl.overflow
        untracked += pl.untracked
        if not pl.entries:
            continue
        space = symbols.AddressSpace(symbols.parse_maps(pl.maps))
        sites = symbols.symbolize_sites(space, {e.site for e in pl.entries.values()})
        # a lock that is not a variable is named after the function of its busiest site
        busiest: dict[int, Entry] = {}
        for e in pl.entries.values():
            b = busiest.get(e.addr)
            if b is None or e.acq + e.tryfail > b.acq + b.tryfail:
                busiest[e.addr] = e
        names: dict[int, tuple[str, symbols.Variable]] = {}
        for addr, e in busiest.items():
            var = symbols.symbolize_variable(space, addr)
            nm = _lock_name(var, e.kind)
            if nm is None:
                fn = sites[e.site].function
                nm = f"lock in {fn}()" if fn else f"lock at {_site_label(sites[e.site])}"
            names[addr] = (nm, var)
        for e in pl.entries.values():
            nm, var = names[e.addr]
            s = sites[e.site]
            key = (nm, _site_label(s), e.kind)
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"lock": nm, "lock_file": symbols.short(var.file) or None,
                                   "lock_object": symbols.short(var.object) or None,
                                   "lock_kind": e.kind.removesuffix("-try"), "trylock": e.kind.endswith("-try"),
                                   "lock_addr": hex(e.addr), "site": key[1], "site_function": s.function,
                                   "site_file": s.file, "site_line": s.line,
                                   "site_object": symbols.short(s.object) or None,
                                   "site_offset": None if s.offset is None else hex(s.offset),
                                   "call": f"{CALLS[e.kind]}({nm})" if nm.startswith("&") else CALLS[e.kind],
                                   "_addrs": set(), "_entry": Entry(0, 0, e.kind), "_cost": pl.tick_cost}
            g["_addrs"].add((pl.pid, e.addr))
            acc: Entry = g["_entry"]
            acc.add({"acq": str(e.acq), "contended": str(e.contended), "wait": str(e.wait), "max": str(e.wait_max),
                     "tryfail": str(e.tryfail), "hold_n": str(e.hold_n), "hold_sum": str(e.hold_sum),
                     "hold_max": str(e.hold_max)}, e.hist)
            acc.threads += e.threads - 1
    rows = []
    for g in groups.values():
        e: Entry = g.pop("_entry")
        addrs = g.pop("_addrs")
        g.pop("_cost")
        hold, outliers = robust_hold(e.hist)
        g.update({"instances": len(addrs), "acquisitions": e.acq, "contended": e.contended,
                  "trylock_failures": e.tryfail, "wait_s": sec(e.wait), "max_wait_s": sec(e.wait_max),
                  "hold_s": None if hold is None else sec(hold),
                  "hold_mean_all_s": sec(e.hold_sum / e.hold_n) if e.hold_n else None,
                  "hold_samples": e.hold_n, "hold_outliers": outliers,
                  "hold_max_s": sec(e.hold_max) if e.hold_n else None, "threads": e.threads,
                  "wait_ticks": e.wait})
        rows.append(g)

    def weight(r: dict[str, Any]) -> float:
        return r["wait_ticks"] + (r["hold_s"] or 0.0) * (rate or 1.0) * r["acquisitions"]

    rows.sort(key=weight, reverse=True)
    notes = []
    left_out = 0
    if len(rows) > MAX_ROWS:
        left_out = sum(int(r["acquisitions"]) for r in rows[MAX_ROWS:])
        notes.append(f"lock table: {len(rows) - MAX_ROWS} (lock, call site) rows past the busiest {MAX_ROWS} "
                     "left out")
        rows = rows[:MAX_ROWS]
    for r in rows:
        r.pop("wait_ticks")
    if overflow:
        notes.append(f"lock table: {overflow:,} acquisitions found no room in their thread's table "
                     "(256 (lock, call site) entries a thread) and are counted in the totals only")
    if untracked:
        notes.append(f"lock table: {untracked} threads past the shim's table limit are counted in the totals only")
    if rate is None:
        notes.append("lock table: the shim's clock rate is unknown, so its waits and holds have no time")
    summary = {"rows": len(rows), "overflow": overflow, "left_out_acquisitions": left_out,
               "untracked_threads": untracked,
               "processes": len(procs)}
    return LockTable(rows=rows, notes=notes, summary=summary)
