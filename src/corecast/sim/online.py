"""A program's trace as it runs: QEMU user mode with corecast's plugin writes its records into a
shared-memory ring (native/include/ccring.h), and this module reads them out of it in slices,
adds the branch and uop records of their instructions as they come (objdump, decoded once per
instruction), and hands each slice on -- to the simulator (`sim --online`), the miss-rate
curves (`sim mrc --online`) or a compressed trace file (`sim capture`) -- with no file between.

    with OnlineRun(["sort", "big.txt"]) as run:
        for records in run.records():
            sim.feed(records)
    run.info["exit_status"], run.info["annotated_fraction"]

The ring is a memfd (private to corecast and the QEMU it starts, gone with the last of them);
the program's file mappings come from its /proc/PID/maps while it runs and from a second memfd
the plugin fills at exit. Nothing is written in a file system, and QEMU dies with corecast
(its parent-death signal), so nothing is left behind on any exit, SIGKILL included.

The records are the ones a capture writes, in the same order: the plugin's blocks, each
thread's in order; the decoding of an instruction does not depend on when it is asked for
(`x86.decoded` of objdump's line for it, as `build_annotation` does after a run), so the
records handed on are those of `corecast sim capture` of the same run, exactly (tests/
test_sim_online.py compares a run simulated online with its own trace simulated afterwards).
"""
from __future__ import annotations

import ctypes as C
import os
import shutil
import time
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..collect import procs
from ..errors import UserError
from ..native import native_path, system_program
from . import native as N
from . import x86
from .synth import pack_uop

# The ring: half a million records in flight at most, read 128 Ki records (2 MiB, one frame of a
# trace) at a time. Small enough that the blocks the plugin copies in are still in the host's
# last-level cache when corecast reads them: with 64 MiB and 4 MiB takes, `sim capture` of sort
# of 100,000 lines cost 0.4 s more CPU (4.28 s against 3.86, bench/sim_online.py's 2-vCPU VM;
# the ring's pages first touched, and every record fetched from memory twice).
RING_BYTES = 8 << 20
TAKE_BYTES = 2 << 20
_MARKER = 0x80                 # an instruction that starts a transaction (the annotation's flag)


class Ring:
    """corecast's side of the ring (native/sim/ring.c)."""

    def __init__(self, capacity: int = RING_BYTES):
        self._L = N.lib()
        self._r = self._L.cc_ring_create(capacity)
        if not self._r:
            err = C.get_errno()
            raise UserError(f"cannot make the shared-memory ring for the trace: {os.strerror(err) if err else 'no memory'}")

    @property
    def fd(self) -> int:
        return int(self._L.cc_ring_fd(self._r))

    def wait(self, min_bytes: int, timeout_ms: int) -> int:
        """Bytes ready (whole records), after waiting up to `timeout_ms` for `min_bytes`."""
        return int(self._L.cc_ring_wait(self._r, min_bytes, timeout_ms))

    def view(self, nbytes: int) -> np.ndarray:
        """The next `nbytes` as records, in place: valid until `release`."""
        buf = (C.c_char * nbytes).from_address(self._L.cc_ring_at(self._r))
        return np.frombuffer(buf, dtype=N.RECORD_DTYPE)

    def release(self, nbytes: int) -> None:
        self._L.cc_ring_release(self._r, nbytes)

    def done(self) -> bool:
        return bool(self._L.cc_ring_done(self._r))

    def counts(self) -> tuple[int, int]:
        """Records and instructions the plugin has written so far."""
        r, f = C.c_uint64(), C.c_uint64()
        self._L.cc_ring_counts(self._r, C.byref(r), C.byref(f))
        return r.value, f.value

    def threads(self) -> int:
        """Threads that wrote records (-1: too many to tell)."""
        return int(self._L.cc_ring_threads(self._r))

    def close(self) -> None:
        if self._r:
            self._L.cc_ring_close(self._r)
            self._r = None


class OnlineAnnotator:
    """The annotation pass of `corecast sim capture` (branch records, uops, markers), built up
    as the instructions turn up: a batch is annotated until a fetch of an instruction not seen
    yet; those of the rest of the batch are looked up (the objects the program has mapped,
    objdump's line for each, decoded), added, and the batch goes on."""

    def __init__(self, maps: Callable[[], str], exclude: Sequence[str], markers: Sequence[str] = (),
                 decode: bool = True):
        self._L = N.lib()
        z8, z32, z64 = np.zeros(1, np.uint8), np.zeros(1, np.uint32), np.zeros(1, np.uint64)
        self._h = self._L.cc_annot_new(z64.ctypes.data, z8.ctypes.data, z8.ctypes.data, z32.ctypes.data,
                                       z8.ctypes.data, None, 0)
        if not self._h:
            raise MemoryError("annotation table")
        self._maps, self._exclude, self.decode = maps, tuple(exclude), decode
        self.objects: list[x86.LoadedObject] = []
        self.used: list[str] = []
        self._lines: dict[tuple[str, int, int], dict[int, tuple[int, str]]] = {}
        self.markers: dict[str, int | None] = {}
        for m in markers:
            self.markers[m] = int(m, 16) if m.lower().startswith("0x") else None
        self._placeholder = pack_uop([], [], N.UNIT_ALU, first=False, placeholder=True)

    def run(self, recs: np.ndarray) -> np.ndarray:
        recs = np.ascontiguousarray(recs)
        out = np.empty(len(recs) * 8 + 8, dtype=N.RECORD_DTYPE)
        o = start = 0
        n = len(recs)
        size = N.RECORD_DTYPE.itemsize
        while start < n:
            used = C.c_size_t()
            o += self._L.cc_annotate_until_unknown(self._h, recs.ctypes.data + start * size, n - start,
                                                   out.ctypes.data + o * size, C.byref(used))
            start += used.value
            if start < n:
                self._resolve(recs[start:])
        return out[:o]

    def counts(self) -> tuple[int, int]:
        f, m = C.c_uint64(), C.c_uint64()
        self._L.cc_annot_counts(self._h, C.byref(f), C.byref(m))
        return f.value, m.value

    # ------------------------------------------------------------------ looking instructions up
    def _refresh(self) -> None:
        """The objects the program has mapped now; the symbol markers found in new ones."""
        known = {(o.path, o.avma) for o in self.objects}
        for o in x86.objects_from_maps_text(self._maps(), self._exclude):
            if (o.path, o.avma) not in known:
                self.objects.append(o)
                for m, addr in self.markers.items():
                    if addr is None and not m.lower().startswith("0x"):
                        a = x86.symbol_address(o.path, m)
                        if a is not None:
                            self.markers[m] = a + o.bias

    def _ranges(self) -> list[tuple[x86.LoadedObject, int, int]]:
        return [(o, lo, hi) for o in self.objects for lo, hi in x86.exec_ranges(o.path)]

    def _resolve(self, rest: np.ndarray) -> None:
        pcs = np.empty(len(rest), np.uint64)
        k = self._L.cc_annot_unknown(self._h, rest.ctypes.data, len(rest), pcs.ctypes.data, len(rest))
        todo = np.unique(pcs[:k])
        if self.decode:
            ranges = self._ranges()
            covered = np.zeros(len(todo), bool)
            for o, lo, hi in ranges:
                covered |= (todo >= np.uint64(lo + o.bias)) & (todo < np.uint64(hi + o.bias))
            if not covered.all():
                self._refresh()
                ranges = self._ranges()
        table: dict[int, x86.Decoded] = {}
        if self.decode:
            for o, lo, hi in ranges:
                sel = todo[(todo >= np.uint64(lo + o.bias)) & (todo < np.uint64(hi + o.bias))]
                if not len(sel):
                    continue
                if o.path not in self.used:
                    self.used.append(o.path)
                key = (o.path, lo, hi)
                if key not in self._lines:
                    self._lines[key] = x86.objdump_lines(o.path, lo, hi)
                lines = self._lines[key]
                for pc in sel.tolist():
                    hit = lines.get(pc - o.bias)
                    if hit is not None:
                        table[pc] = x86.decoded(*hit)
        marks = {a for a in self.markers.values() if a is not None}
        n = len(todo)
        lens, br = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        start, count, missing = np.zeros(n, np.uint32), np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        flat: list[int] = []
        for i, pc in enumerate(todo.tolist()):
            d = table.get(pc)
            if d is not None:
                lens[i], br[i], start[i], count[i] = min(d.length, 255), d.branch, len(flat), len(d.uops)
                flat.extend(d.uops)
                if pc in marks:
                    br[i] |= _MARKER
            elif pc in marks:        # a marker no decoding covers: one placeholder uop (as _add_markers)
                lens[i], br[i], start[i], count[i] = 1, _MARKER, len(flat), 1
                flat.append(self._placeholder)
            else:
                lens[i], missing[i] = 1, 1
        uops = np.array(flat or [0], dtype=np.uint64)
        if self._L.cc_annot_add(self._h, todo.ctypes.data, lens.ctypes.data, br.ctypes.data, start.ctypes.data,
                                count.ctypes.data, uops.ctypes.data, n, missing.ctypes.data):
            raise MemoryError("annotation table")

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._L.cc_annot_free(h)
            self._h = None


def _markers_before(recs: np.ndarray, addrs: np.ndarray) -> np.ndarray:
    """A marker record before every fetch of a marker address (a run without decoding)."""
    at = np.flatnonzero((recs["kind"] == N.KIND_FETCH) & np.isin(recs["addr"], addrs))
    if not len(at):
        return recs
    mk = recs[at].copy()
    mk["kind"], mk["size"] = N.KIND_MARKER, 0
    return np.insert(recs, at, mk)


#: `stdout=DEVNULL`: the program's output thrown away (subprocess.DEVNULL's value, as callers pass it).
DEVNULL = -3


class OnlineRun:
    """One run of a program under QEMU with the plugin writing into a ring (see the module).
    `records()` yields its records, annotated (unless `annotate` is False or objdump is
    missing), as they come; `progress(instructions, records)` is told what the plugin has
    written twice a second; `info` says how it went once they are all out. `stdout`: a
    descriptor of corecast's the program writes to, DEVNULL, or None (corecast's own)."""

    def __init__(self, cmd: Sequence[str], *, annotate: bool = True, markers: Sequence[str] = (),
                 env: dict[str, str] | None = None, progress: Callable[[int, int], None] | None = None,
                 ring_bytes: int = RING_BYTES, stdout: int | None = None):
        self.qemu = system_program("qemu-x86_64")
        if self.qemu is None or os.uname().machine != "x86_64":
            raise UserError("online simulation runs the program under qemu-x86_64 on an x86-64 machine "
                            "(apt-get install qemu-user)")
        if not cmd:
            raise UserError("no program given: -- PROGRAM [ARGS]")
        self.cmd = list(cmd)
        self.prog = cmd[0] if os.sep in cmd[0] else shutil.which(cmd[0])
        if self.prog is None or not os.path.exists(self.prog):
            raise UserError(f"{cmd[0]}: {'no such program' if os.sep in cmd[0] else 'command not found'}")
        if not os.access(self.prog, os.X_OK):
            raise UserError(f"{cmd[0]}: not executable")
        self.plugin = str(native_path("libcorecast_qemu.so"))
        self.decode = annotate and x86.objdump_available()
        self.warnings: list[str] = []
        if annotate and not self.decode:
            self.warnings.append("objdump not found (apt-get install binutils): the trace has no branch or uop "
                                 "records, so branch MPKI and baseline CPI will be unavailable")
        self.markers = list(markers)
        self.env, self.progress, self.ring_bytes, self.stdout = env, progress, ring_bytes, stdout
        self.info: dict[str, Any] = {}
        self._proc: procs.Supervised | None = None
        self._ring: Ring | None = None
        self._maps_fd = -1
        self._final_maps: str | None = None

    # ------------------------------------------------------------------ the run
    def __enter__(self) -> "OnlineRun":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the program if it still runs, and let the ring and the maps go."""
        p, self._proc = self._proc, None
        if p is not None:
            p.close()               # kills what still runs of the program's tree, and reaps
        if self._ring is not None:
            self._ring.close()
            self._ring = None
        if self._maps_fd >= 0:
            os.close(self._maps_fd)
            self._maps_fd = -1

    def _maps(self) -> str:
        """The program's mappings: its /proc/PID/maps while it runs, then those the plugin saved
        at its exit."""
        if self._final_maps is None and self._proc is not None and self._proc.poll() is None:
            try:
                with open(f"/proc/{self._proc.pid}/maps", errors="replace") as fh:
                    return fh.read()
            except OSError:
                pass
        return self._saved_maps()

    def _saved_maps(self) -> str:
        if self._final_maps is None and self._maps_fd >= 0 and (self._proc is None or self._proc.poll() is not None):
            size = os.fstat(self._maps_fd).st_size
            self._final_maps = os.pread(self._maps_fd, size, 0).decode(errors="replace") if size else ""
        return self._final_maps or ""

    def counts_so_far(self) -> tuple[int, int]:
        """Instructions and threads the plugin has written so far (a run cut short)."""
        if self._ring is None:
            return 0, 1
        threads = self._ring.threads()
        return self._ring.counts()[1], max(1, threads if threads >= 0 else 16384)

    def records(self) -> Iterator[np.ndarray]:
        """The records as the program runs, in slices (each valid until the next is asked for)."""
        t0 = time.monotonic()
        ring = self._ring = Ring(self.ring_bytes)
        self._maps_fd = os.memfd_create("corecast-maps", os.MFD_CLOEXEC)
        args = [self.qemu, "-plugin", f"{self.plugin},ring={ring.fd},mapsfd={self._maps_fd}", self.prog, *self.cmd[1:]]
        try:
            self._proc = procs.start_passing(args, (ring.fd, self._maps_fd), what="qemu-x86_64", env=self.env,
                                             stdout=os.devnull if self.stdout == DEVNULL else self.stdout)
        except UserError:
            self.close()
            raise
        ann = OnlineAnnotator(self._maps, (self.qemu, self.plugin), self.markers, self.decode)
        hex_marks = np.array([int(m, 16) for m in self.markers if m.lower().startswith("0x")], np.uint64)
        shown = [time.monotonic()]

        def tell() -> None:             # at most twice a second, also while the program is quiet
            if self.progress is not None and time.monotonic() - shown[0] >= 0.5:
                records, instructions = ring.counts()
                self.progress(instructions, records)
                shown[0] = time.monotonic()

        try:
            while True:
                n = ring.wait(TAKE_BYTES, 200)
                if n == 0:
                    # ended: its status reported, or its supervisor gone without one (SIGKILLed on
                    # its own: QEMU went with it, and the ring is never done)
                    if ring.done() or self._proc.poll() is not None or self._proc.ended:
                        n = ring.wait(16, 0)
                        if n == 0:
                            break
                    else:
                        tell()
                        continue
                n = min(n, TAKE_BYTES)
                raw = ring.view(n)
                if self.decode:
                    out = ann.run(raw)
                elif len(hex_marks):
                    out = _markers_before(raw, hex_marks)
                else:
                    out = raw
                yield out
                del out, raw
                ring.release(n)
                tell()
            status = self._proc.wait()
        except BaseException:
            self.close()
            raise
        count, instr = ring.counts()            # the plugin's own counts of what it wrote
        threads = ring.threads()
        if self.progress is not None:
            self.progress(instr, count)
        objects = x86.objects_from_maps_text(self._saved_maps(), (self.qemu, self.plugin))
        markers = dict(ann.markers)
        for m, addr in x86.resolve_markers([m for m, a in markers.items() if a is None], objects).items():
            markers[m] = addr
        found, missing = ann.counts()
        self.info = {"exit_status": status, "records": count, "instructions": instr,
                     "threads": threads if threads >= 0 else 16384, "objects": objects, "markers": markers,
                     "annotated": self.decode, "annotated_objects": list(ann.used),
                     "annotated_fraction": (found / (found + missing)) if self.decode and found + missing else None,
                     "warnings": list(self.warnings), "seconds": time.monotonic() - t0}
        if count == 0:
            self.close()
            raise UserError(f"qemu-x86_64 produced no trace for {' '.join(self.cmd)} (exit status {status})")
        if status != 0:
            self.info["warnings"].append(f"the program exited with status {status}; the trace covers what ran")
        frac = self.info["annotated_fraction"]
        if frac is not None and frac < 0.9:
            self.info["warnings"].append(f"only {frac:.0%} of the executed instructions could be decoded "
                                         "(code without a file, e.g. JIT output, counts as independent uops)")
        for m, addr in markers.items():
            if addr is None:
                self.info["warnings"].append(f"marker {m!r} was not found in any object the program loaded")
        self.close()
