"""The files the dashboard shows: those named on the command line, and those in the folders
named there (looked at again on every listing, so a campaign started later appears).

Each file is told by its content: a campaign (SQLite), a `stat` trace (JSON lines from
`corecast stat --format json`), a `meters` recording (a Dataset whose metadata has
notes.meters: `corecast meters --record`), or another Dataset (CSV or JSON). A CSV's
metadata sidecar (FILE.csv.meta.json) is not listed by itself. The server reads them and never
writes.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError, opened
from ..parsing import MAX_DATASET_BYTES, json_document

SQLITE_MAGIC = b"SQLite format 3\x00"
SUFFIXES = (".db", ".sqlite", ".csv", ".json", ".jsonl", ".ndjson")
KINDS = ("campaign", "dataset", "stat-trace", "meters-recording")
SIDECAR = ".meta.json"
JSON_SNIFF_BYTES = 64 << 20  # a JSON Dataset larger than this is not looked into for notes.meters
#: The largest stat trace the dashboard reads: a trace is held whole in memory (its lines, indexed
#: by time), and anyone who can write into a folder given to `serve` can drop one there, so it is
#: bounded as a Dataset is (a ~500-byte sample line at 0.1 s is 256 MiB after about 14 hours).
MAX_TRACE_BYTES = MAX_DATASET_BYTES


def sniff(path: Path) -> str:
    """The kind of a file, from its first bytes. UserError when it is none of them, and for
    anything but a regular file: the server reads its files again while it runs, and a FIFO
    or a device would block it or never be the same twice."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        with opened(path, "rb"):                     # its one line (no such file, permission denied)
            pass
        raise UserError(f"{path}: cannot open: {err.strerror or err}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UserError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
            raise UserError(f"{path}: {kind}: the dashboard shows regular files (it reads them again while it runs)")
        head = os.pread(fd, 4096, 0)
    finally:
        os.close(fd)
    if not head:
        raise UserError(f"{path}: empty file (not a campaign, Dataset, stat trace or meters recording)")
    if head.startswith(SQLITE_MAGIC):
        return "campaign"
    if b"\x00" in head:
        raise UserError(f"{path}: not a campaign, Dataset (CSV/JSON), stat trace or meters recording (binary data)")
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"{") and b'"type"' in first and b'"header"' in first and b'"corecast-stat"' in first:
        return "stat-trace"
    return "meters-recording" if _meters_notes(path, head) else "dataset"


def _meters_notes(path: Path, head: bytes) -> bool:
    """Whether a Dataset's metadata has notes.meters (a `corecast meters --record` recording):
    a CSV's `# corecast:` first line or its sidecar, a JSON Dataset's own metadata. A file whose
    metadata cannot be read is a plain Dataset here (its page says what is wrong with it)."""
    meta: Any = None
    try:
        if head.lstrip().startswith((b"{", b"[")):
            if path.stat().st_size > JSON_SNIFF_BYTES:
                return False
            meta = json_document(path.read_bytes(), str(path))
        else:
            first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
            if first.startswith("# corecast:"):
                meta = json_document(first[len("# corecast:"):], str(path))
            else:
                side = path.with_name(path.name + SIDECAR)
                if side.is_file() and side.stat().st_size <= JSON_SNIFF_BYTES:
                    meta = json_document(side.read_bytes(), str(side))
    except (OSError, ValueError, UserError):
        return False
    notes = meta.get("notes") if isinstance(meta, dict) else None
    return isinstance(notes, dict) and isinstance(notes.get("meters"), dict)


def is_sidecar(path: Path) -> bool:
    """FILE.meta.json beside the FILE it describes."""
    return path.name.endswith(SIDECAR) and path.with_name(path.name[:-len(SIDECAR)]).is_file()


def file_id(path: Path) -> str:
    return hashlib.sha1(str(path).encode()).hexdigest()[:12]


@dataclass
class Entry:
    id: str
    path: Path
    kind: str
    origin: str           # "argument" | the folder it was found in

    def describe(self) -> dict[str, Any]:
        try:
            st = self.path.stat()
            size, mtime, exists = st.st_size, st.st_mtime, True
        except OSError:
            size, mtime, exists = None, None, False
        return {"id": self.id, "path": str(self.path), "name": self.path.name, "kind": self.kind,
                "size": size, "mtime": mtime, "exists": exists, "origin": self.origin}

    def signature(self) -> tuple[Any, ...]:
        """Changes whenever the file does (for a campaign, its write-ahead log too)."""
        sig: list[Any] = []
        for p in (self.path, Path(str(self.path) + "-wal")):
            try:
                st = p.stat()
                sig.append((st.st_size, st.st_mtime_ns))
            except OSError:
                sig.append(None)
        return tuple(sig)


def check(e: Entry) -> None:
    """A file named on the command line must be one of the kinds (UserError, one line): the
    server refuses to start on a file it could never show. A stat trace and a meters recording
    are told by their content (a header line, notes.meters); a campaign is opened, not loaded
    (one being measured may have no finished run yet); anything else must load as a Dataset.
    A file of a known kind that is damaged is shown as its one line on the page."""
    if e.kind == "campaign":
        import sqlite3
        from .. import store
        try:
            camp = store.Campaign.open(e.path, write=False)
            try:
                camp.meta()
            finally:
                camp.close()
        except sqlite3.DatabaseError as err:
            raise UserError(f"{e.path}: not a readable campaign file ({err})") from None
    elif e.kind == "dataset":
        from .. import dataset
        dataset.load(e.path)


class Registry:
    """Files named on the command line and the contents of folders named there."""

    def __init__(self, paths: list[str]):
        self.files: dict[str, Entry] = {}
        self.folders: list[Path] = []
        for raw in paths:
            p = Path(raw).expanduser().resolve()
            if not p.exists():
                raise UserError(f"{raw}: no such file or folder")
            if p.is_dir():
                if not os.access(p, os.R_OK | os.X_OK):
                    raise UserError(f"{raw}: folder not readable")
                self.folders.append(p)
                continue
            kind = sniff(p)
            e = Entry(file_id(p), p, kind, "argument")
            check(e)
            self.files[e.id] = e

    def scan(self) -> None:
        for folder in self.folders:
            try:
                names = sorted(folder.iterdir())
            except OSError:
                continue
            for p in names:
                if not p.is_file() or p.suffix.lower() not in SUFFIXES or p.name.startswith(".") or is_sidecar(p):
                    continue
                fid = file_id(p)
                if fid in self.files:
                    continue
                try:
                    kind = sniff(p)
                except UserError:
                    continue
                self.files[fid] = Entry(fid, p, kind, str(folder))

    def list(self) -> list[dict[str, Any]]:
        self.scan()
        return [e.describe() for e in self.files.values()]

    def get(self, fid: str, kinds: tuple[str, ...] = KINDS) -> Entry:
        self.scan()
        e = self.files.get(fid)
        if e is None:
            raise UserError(f"no file '{fid}' on this dashboard")
        if e.kind not in kinds:
            raise UserError(f"{e.path.name}: a {e.kind}, not a {' or '.join(kinds)}")
        try:
            st = os.stat(e.path)
        except OSError as err:
            raise UserError(f"{e.path}: {err.strerror or err}") from None
        if not stat.S_ISREG(st.st_mode):          # replaced by a FIFO while served: never read (it could block)
            raise UserError(f"{e.path}: no longer a regular file")
        return e


# ============================================================================ traces
@dataclass
class Trace:
    """A recorded `stat` trace: its JSON lines, indexed by time."""

    path: Path
    signature: tuple[Any, ...]
    header: str | None = None
    summary: str | None = None
    regions: str | None = None
    times: list[float] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def window(self, start: float, end: float, limit: int) -> tuple[list[str], bool]:
        """The sample lines with start <= time_s <= end (at most `limit`; True when cut)."""
        a = bisect.bisect_left(self.times, start)
        b = bisect.bisect_right(self.times, end)
        if b - a > limit:
            return self.lines[b - limit:b], True
        return self.lines[a:b], False


def read_trace(path: Path, expect: str) -> Trace:
    """Read a JSON-lines trace. A damaged line ends in a UserError naming it, except a last line
    cut short (a trace still being written), which is left out with a note."""
    sig = Entry("", path, "", "").signature()
    t = Trace(path, sig)
    with opened(path, "rb", "stat trace") as fh:
        # Refused whole rather than shown in part: the header is the first line and the summary
        # the last, and a replay that silently started hours into a run would mislead. The size
        # is looked at first (no read at all of a huge file), and the read is bounded all the
        # same, for a file that grows after the look.
        size = os.fstat(fh.fileno()).st_size
        data = b"" if size > MAX_TRACE_BYTES else fh.read(MAX_TRACE_BYTES + 1)
        if size > MAX_TRACE_BYTES or len(data) > MAX_TRACE_BYTES:
            how = f"{size:,} bytes, more than" if size > MAX_TRACE_BYTES else "grew while read past"
            raise UserError(f"{path}: {how} the {MAX_TRACE_BYTES:,} bytes the dashboard reads from a stat "
                            "trace (record a shorter one, or at a longer -T)")
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (a JSON-lines trace expected)") from None
    if "\r" in raw:                                  # as text mode read it (universal newlines)
        raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    rows = raw.split("\n")
    last = len(rows) - 1
    while last >= 0 and not rows[last].strip():
        last -= 1
    for i, line in enumerate(rows):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json_document(line, f"{path}: line {i + 1}")
        except json.JSONDecodeError as err:
            if i == last and not raw.endswith("\n"):
                t.notes.append(f"line {i + 1} is incomplete (the trace is still being written?): left out")
                continue
            raise UserError(f"{path}: line {i + 1}: not JSON ({err.msg})") from None
        if not isinstance(obj, dict) or "type" not in obj:
            raise UserError(f"{path}: line {i + 1}: not a trace record (no \"type\")")
        typ = obj["type"]
        if typ == "header":
            if obj.get("format") != expect:
                raise UserError(f"{path}: line {i + 1}: a '{obj.get('format')}' header, not '{expect}'")
            t.header = line
        elif t.header is None:
            raise UserError(f"{path}: line {i + 1}: a '{typ}' record before the header")
        elif typ == "summary":
            t.summary = line
        elif typ == "regions":
            t.regions = line
        else:
            ts = obj.get("time_s")
            if not isinstance(ts, (int, float)):
                raise UserError(f"{path}: line {i + 1}: a '{typ}' record without a time_s")
            t.times.append(float(ts))
            t.lines.append(line)
    if t.header is None:
        raise UserError(f"{path}: empty trace (no header line)")
    if any(b < a for a, b in zip(t.times, t.times[1:])):
        order = sorted(range(len(t.times)), key=t.times.__getitem__)
        t.times = [t.times[k] for k in order]
        t.lines = [t.lines[k] for k in order]
    return t
