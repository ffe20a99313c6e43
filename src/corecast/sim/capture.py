"""Record a real program's trace: with QEMU user mode and corecast's TCG plugin (fast), or
with valgrind lackey (the fallback).

`capture(..., backend="qemu")` runs the program under `qemu-x86_64 -plugin
libcorecast_qemu.so,ring=N,mapsfd=M` (native/qemu/capture_plugin.c) through `online.OnlineRun`:
the plugin writes the same 16-byte records the trace file holds, in blocks, into a shared-memory
ring, with the guest thread as the thread id; corecast reads them as they come, adds the branch
and uop records of their instructions (objdump, decoded once per instruction as it turns up) and
writes them compressed -- no raw file, no pass after the run. `backend="auto"` takes QEMU when
this is an x86-64 machine with qemu-x86_64 installed, else lackey.

`capture(["./app", "arg"], "app.cctrace", backend="lackey")` runs

    valgrind --tool=lackey --trace-mem=yes --trace-sched=yes --vgdb=no -v -v --log-fd=N ./app arg

(`--vgdb=no`: valgrind's gdbserver, on by default, makes three FIFOs and a file in $TMPDIR,
vgdb-pipe-*-PID-*, which valgrind killed with SIGKILL -- as it is when corecast ends early --
leaves behind) and parses lackey's text as it streams out of the pipe (natively, no temporary text file).
`--trace-sched` says which thread runs; `-v -v` says where each object's code was loaded.
Afterwards, when objdump is available, every instruction that ran is disassembled and the
trace gains branch records (outcome from the next instruction's address) and uop records
with register dependencies (see corecast.sim.x86). Markers -- symbols or addresses whose
execution starts a transaction -- become marker records.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .. import outputs
from ..collect import procs
from ..errors import UserError
from ..native import system_program
from . import native as N
from . import x86
from .online import OnlineRun
from .x86 import objects_from_maps, resolve_markers  # noqa: F401  (objects_from_maps: moved to x86, still found here)
from .synth import pack_uop
from .trace import LackeyParser, TraceWriter, read_trace, write_trace


@dataclass
class CaptureInfo:
    path: Path
    records: int
    instructions: int
    threads: int
    exit_status: int
    annotated: bool
    annotated_fraction: float | None
    markers: dict[str, int | None] = field(default_factory=dict)
    objects: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


BACKENDS = ("auto", "qemu", "lackey")


def qemu_path() -> str | None:
    """qemu-x86_64 when it can run this machine's programs (an x86-64 host), else None."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return system_program("qemu-x86_64")


def choose_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise UserError(f"--backend {backend}: choose auto, qemu or lackey")
    if backend == "qemu":
        if qemu_path() is None:
            raise UserError("--backend qemu needs qemu-x86_64 on an x86-64 machine "
                            "(apt-get install qemu-user)")
        return "qemu"
    if backend == "auto":
        return "qemu" if qemu_path() is not None else "lackey"
    return "lackey"


def valgrind_path() -> str:
    v = system_program("valgrind")
    if not v:
        raise UserError("valgrind is not installed (apt-get install valgrind); `corecast sim "
                        "capture` records traces with its lackey tool")
    return v


def _resolve_program(cmd: Sequence[str]) -> None:
    if not cmd:
        raise UserError("no program given: corecast sim capture -o TRACE -- PROGRAM [ARGS]")
    prog = cmd[0]
    if os.sep in prog:
        if not os.path.exists(prog):
            raise UserError(f"{prog}: no such program")
        if not os.access(prog, os.X_OK):
            raise UserError(f"{prog}: not executable")
    elif shutil.which(prog) is None:
        raise UserError(f"{prog}: command not found")


def capture(cmd: Sequence[str], out: str | Path, *, markers: Sequence[str] = (),
            annotate: bool = True, chunk_bytes: int = 8 << 20,
            progress: Callable[[int, int], None] | None = None,
            env: dict[str, str] | None = None, backend: str = "lackey",
            decoding: Callable[[int, int], None] | None = None) -> CaptureInfo:
    """Run `cmd` under the chosen back end and write its trace to `out` (`env`: the program's
    environment, default corecast's own). `progress` is called with the instructions and the
    records written so far (a record is an instruction fetch, a load, a store, ...: about two
    an instruction), last with the totals; `decoding` with the records annotated so far and
    their total, in the disassembly pass."""
    if choose_backend(backend) == "qemu":
        return capture_qemu(cmd, out, markers=markers, annotate=annotate, chunk_bytes=chunk_bytes,
                            progress=progress, env=env, decoding=decoding)
    vg = valgrind_path()
    _resolve_program(cmd)
    out = Path(out)
    scratch = _scratch(out)
    try:
        return _capture_lackey(vg, cmd, out, scratch, markers, annotate, chunk_bytes, progress, env, decoding)
    finally:
        procs.remove(scratch)


def _capture_lackey(vg: str, cmd: Sequence[str], out: Path, scratch: Path, markers: Sequence[str],
                    annotate: bool, chunk_bytes: int, progress: Callable[[int], None] | None,
                    env: dict[str, str] | None, decoding: Callable[[int, int], None] | None) -> CaptureInfo:
    t0 = time.monotonic()
    hex_markers = [int(m, 16) for m in markers if re.fullmatch(r"0x[0-9a-fA-F]+", m)]
    use_objdump = annotate and x86.objdump_available()
    warnings: list[str] = []
    if annotate and not use_objdump:
        warnings.append("objdump not found (apt-get install binutils): the trace has no branch "
                        "or uop records, so branch MPKI and baseline CPI will be unavailable")
    # Symbols can only be resolved after the run (load addresses); hex markers can go in now
    # when there is no annotation pass to place them.
    parser = LackeyParser(markers=hex_markers if not use_objdump else ())
    raw_path = scratch / "raw.cctrace" if use_objdump else out
    writer = TraceWriter(raw_path, {"source": "lackey", "command": list(cmd)}, announce=not use_objdump,
                         compress=not use_objdump)       # a raw trace the decoding pass reads at once
    rfd, wfd = os.pipe()
    args = [vg, "--tool=lackey", "--trace-mem=yes", "--trace-sched=yes", "--vgdb=no", "-v", "-v",
            f"--log-fd={wfd}", *cmd]
    try:
        proc = procs.start_passing(args, (wfd,), what="valgrind", env=env)
    except UserError:
        os.close(rfd)
        os.close(wfd)
        writer.abort()
        raise
    os.close(wfd)
    total = 0
    try:
        with os.fdopen(rfd, "rb", buffering=0) as fh:
            while True:
                data = fh.read(chunk_bytes)
                if not data:
                    break
                recs = parser.feed(data)
                writer.write(recs)
                total += int(np.count_nonzero(recs["kind"] == N.KIND_FETCH))
                if progress:
                    progress(total, writer.count)
            writer.write(parser.feed(b"", final=True))
            if progress:
                progress(int(writer.kinds[N.KIND_FETCH]), writer.count)
    except KeyboardInterrupt:
        proc.close()
        _keep_interrupted(writer, raw_path, out)
        raise
    except BaseException:               # a write error (a full disk): valgrind goes too
        proc.close()
        writer.abort()
        raise
    status = proc.wait()
    st = parser.stats()
    if st.trace_lines == 0:
        writer.abort()
        tail = "; ".join(line for line in st.messages[-5:] if "==" in line)[:300]
        raise UserError(f"valgrind produced no trace for {' '.join(cmd)} (exit status "
                        f"{status}){': ' + tail if tail else ''}")
    if status != 0:
        warnings.append(f"the program exited with status {status}; the trace covers what ran")
    meta: dict[str, Any] = {"exit_status": status, "lackey_lines": st.lines,
                            "bad_lines": st.bad_lines}
    if st.threads > 1:
        meta["threads"] = st.threads
    objects = x86.objects_from_valgrind_log(st.messages)
    meta["objects"] = [{"path": o.path, "bias": hex(o.bias)} for o in objects]
    marker_addrs = resolve_markers(markers, objects) if markers else {}
    for name, addr in marker_addrs.items():
        if addr is None:
            warnings.append(f"marker {name!r} was not found in any object the program loaded")
    meta["markers"] = {k: (hex(v) if v is not None else None) for k, v in marker_addrs.items()}
    info = CaptureInfo(path=out, records=writer.count, instructions=int(writer.kinds[0]),
                       threads=max(1, st.threads), exit_status=status, annotated=False,
                       annotated_fraction=None, markers=marker_addrs,
                       objects=[o.path for o in objects], warnings=warnings)
    return _finish(writer, meta, info, raw_path, out, objects, marker_addrs, use_objdump, decoding, t0)


def capture_qemu(cmd: Sequence[str], out: str | Path, *, markers: Sequence[str] = (),
                 annotate: bool = True, chunk_bytes: int = 8 << 20,
                 progress: Callable[[int, int], None] | None = None,
                 decoding: Callable[[int, int], None] | None = None,
                 env: dict[str, str] | None = None) -> CaptureInfo:
    """`capture` through QEMU user mode and corecast's TCG plugin: the records come through the
    plugin's shared-memory ring, are decoded as they come (`online.OnlineRun`) and written
    compressed (see the module doc). `decoding` is not called: there is no pass after the run."""
    if qemu_path() is None:
        raise UserError("qemu-x86_64 is not installed (apt-get install qemu-user)")
    _resolve_program(cmd)
    out = Path(out)
    outputs.check(out)
    t0 = time.monotonic()
    # Without decoding, the records are the plugin's fetches and data accesses (and markers),
    # whose instructions and threads the ring counts: the writer takes no census of its own.
    with OnlineRun(cmd, annotate=annotate, markers=markers, env=env, progress=progress) as run, \
            TraceWriter(out, {"source": "qemu", "command": list(cmd)}, census=run.decode) as writer:
        try:
            for recs in run.records():
                writer.write(recs)
        except KeyboardInterrupt:
            if not run.decode:
                writer.counted(*run.counts_so_far())
            run.close()
            writer.close({"interrupted": True}, what=f"{writer.count:,} records, interrupted")
            raise
        r = run.info
        if not run.decode:
            writer.counted(r["instructions"], max(1, r["threads"]))
        objects = r["objects"]
        meta = qemu_trace_meta(r)
        info = CaptureInfo(path=out, records=writer.count, instructions=int(writer.kinds[N.KIND_FETCH]),
                           threads=max(1, r["threads"]), exit_status=r["exit_status"], annotated=r["annotated"],
                           annotated_fraction=r["annotated_fraction"], markers=r["markers"],
                           objects=[o.path for o in objects], warnings=list(r["warnings"]),
                           seconds=time.monotonic() - t0)
        writer.close(meta, what=_summary(info))
    return info


def qemu_trace_meta(r: dict[str, Any]) -> dict[str, Any]:
    """A trace's metadata from a finished `OnlineRun`'s `info` (sim capture, sim --online --save-trace)."""
    meta: dict[str, Any] = {"exit_status": r["exit_status"], "capture": "qemu-user TCG plugin, online",
                            "objects": [{"path": o.path, "bias": hex(o.bias)} for o in r["objects"]],
                            "markers": {k: (hex(v) if v is not None else None) for k, v in r["markers"].items()}}
    if r["threads"] > 1:
        meta["threads"] = r["threads"]
    if r["annotated"]:
        meta.update({"annotated": True, "annotated_objects": r["annotated_objects"],
                     "annotated_fraction": r["annotated_fraction"]})
    return meta


def _scratch(out: Path) -> Path:
    """A private folder (mode 700, a fresh name) for what a capture makes on the way (the
    undecoded trace, the plugin's maps and count): beside the trace when that is a file (one
    file system), else in the temporary folder; named to the sentinel, so that it goes even
    when corecast is killed (its undecoded trace can be gigabytes). The trace itself is checked
    first (corecast.outputs: its folder exists, it is no folder and no planted link)."""
    kind = outputs.check(out)
    return procs.temp_dir(".corecast-capture-", parent=out.parent if kind in ("new", "regular") else None)


def _summary(info: CaptureInfo) -> str:
    """What the file holds, said when it is named on standard error."""
    return (f"{info.records:,} records, {info.instructions:,} instructions, "
            f"{info.threads} thread{'s' if info.threads > 1 else ''}"
            + (f", {info.annotated_fraction:.1%} of instructions decoded"
               if info.annotated and info.annotated_fraction is not None else "")
            + f" ({info.seconds:.1f} s)")


def _finish(writer: TraceWriter, meta: dict[str, Any], info: CaptureInfo, raw_path: Path, out: Path,
            objects: list[x86.LoadedObject], marker_addrs: dict[str, int | None], use_objdump: bool,
            decoding: Callable[[int, int], None] | None, t0: float) -> CaptureInfo:
    """Close the raw trace: it is the trace, or (with objdump) the input of the decoding pass."""
    info.seconds = time.monotonic() - t0
    writer.close(meta, what=_summary(info))
    if use_objdump:
        _annotate_file(raw_path, out, objects, [a for a in marker_addrs.values() if a is not None], info,
                       decoding, t0)
    info.seconds = time.monotonic() - t0
    return info


def _keep_interrupted(writer: TraceWriter, raw_path: Path, out: Path) -> None:
    """Ctrl-C: what was traced is kept under the trace's name, undecoded."""
    writer.close({"interrupted": True}, what=f"{writer.count:,} records, interrupted")
    if raw_path != out:
        tr = read_trace(raw_path)
        write_trace(out, tr, what=f"{len(tr):,} records, interrupted (not decoded)")


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def _annotate_file(raw: Path, out: Path, objects: list[x86.LoadedObject],
                   marker_pcs: list[int], info: CaptureInfo,
                   decoding: Callable[[int, int], None] | None = None, t0: float | None = None) -> None:
    tr = read_trace(raw)
    if decoding:
        decoding(0, len(tr.records))
    pcs = []
    for chunk in tr.chunks(1 << 22):
        f = chunk["addr"][chunk["kind"] == N.KIND_FETCH]
        pcs.append(np.unique(f))
    seen = np.unique(np.concatenate(pcs)) if pcs else np.zeros(0, np.uint64)
    ann = x86.build_annotation(objects, seen)
    ann = _add_markers(ann, marker_pcs)
    annot = x86.Annotator(ann)
    meta = dict(tr.meta)
    w = TraceWriter(out, meta)
    try:
        chunks = list(range(0, len(tr.records), 1 << 20))
        for i, start in enumerate(chunks):
            part = np.ascontiguousarray(tr.records[start:start + (1 << 20)])
            w.write(annot.run(part, final=(i == len(chunks) - 1)))
            if decoding:
                decoding(start + len(part), len(tr.records))
    except BaseException:
        w.abort()
        raise
    found, missing = annot.counts()
    frac = found / (found + missing) if found + missing else None
    meta.update({"annotated": True, "annotated_objects": ann.objects,
                 "annotated_fraction": frac})
    info.annotated = True
    info.annotated_fraction = frac
    info.records = w.count
    if t0 is not None:
        info.seconds = time.monotonic() - t0
    w.close(meta, what=_summary(info))
    del tr
    if frac is not None and frac < 0.9:
        info.warnings.append(f"only {frac:.0%} of the executed instructions could be decoded "
                             "(code without a file, e.g. JIT output, counts as independent uops)")


def _add_markers(ann: x86.Annotation, marker_pcs: list[int]) -> x86.Annotation:
    if not marker_pcs:
        return ann
    pcs = ann.pcs.tolist()
    index = {pc: i for i, pc in enumerate(pcs)}
    extra = [pc for pc in marker_pcs if pc not in index]
    br = ann.brflags.copy()
    for pc in marker_pcs:
        if pc in index:
            br[index[pc]] |= 0x80
    if not extra:
        return x86.Annotation(ann.pcs, ann.lens, br, ann.uop_start, ann.uop_count, ann.uops,
                              ann.objects)
    placeholder = pack_uop([], [], N.UNIT_ALU, first=False, placeholder=True)
    uops = np.concatenate([ann.uops, np.full(len(extra), placeholder, dtype=np.uint64)])
    return x86.Annotation(
        np.concatenate([ann.pcs, np.array(extra, dtype=np.uint64)]),
        np.concatenate([ann.lens, np.ones(len(extra), np.uint8)]),
        np.concatenate([br, np.full(len(extra), 0x80, np.uint8)]),
        np.concatenate([ann.uop_start, np.arange(len(ann.uops), len(ann.uops) + len(extra),
                                                  dtype=np.uint32)]),
        np.concatenate([ann.uop_count, np.ones(len(extra), np.uint8)]),
        uops, ann.objects)
