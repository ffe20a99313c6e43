"""The files the dashboard shows: those named on the command line, and those in the folders
named there (looked at again on every listing, so a campaign started later appears).

Each file is told by its content: a campaign (SQLite), a `stat` trace (JSON lines from
`corecast stat --format json`), a `meters` recording (a Dataset whose metadata has
notes.meters: `corecast meters --record`), or another Dataset (CSV or JSON). A CSV's
metadata sidecar (FILE.csv.meta.json) is not listed by itself. The server reads them and never
writes.

Anyone who can write into a served folder can fill it, so a folder's scan is bounded: at most
MAX_FOLDER_NAMES names are read from it and MAX_FOLDER_ENTRIES files of the kinds above looked
at (the rest left out, with a note the page shows), each file's kind is told from at most
JSON_SNIFF_BYTES of it, and a file that did not change since the last scan (the same device,
inode, size and modification time) is not opened again, whether it was shown or not. The scan
runs in a worker thread, never on the server's event loop (Registry.refresh).
"""
from __future__ import annotations

import asyncio
import bisect
import codecs
import hashlib
import json
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError, opened
from ..parsing import MAX_DATASET_BYTES, json_document

SQLITE_MAGIC = b"SQLite format 3\x00"
SUFFIXES = (".db", ".sqlite", ".csv", ".json", ".jsonl", ".ndjson")
KINDS = ("campaign", "dataset", "stat-trace", "meters-recording")
SIDECAR = ".meta.json"
#: How much of a JSON Dataset (or of a CSV's metadata) is read to find notes.meters. corecast
#: writes a Dataset's metadata before its rows (Dataset.to_json: format, version, machine, command,
#: corecast_version, columns, notes, tables, then rows; a sidecar with sorted keys, notes after
#: columns), so the note ends within the metadata, whose bulk is `columns`: about 200 bytes a
#: column. A meters recording has a column per meter and scope (a dozen meters per core), about
#: 1 MB of metadata on a 384-core machine; 4 MiB leaves room for four times that. A note that
#: ends further in is not seen: the file is shown as a plain Dataset.
JSON_SNIFF_BYTES = 4 << 20
HEAD_BYTES = 4096            # what every file's kind is first told from
#: The files of the listed kinds one folder's scan looks at (in the folder's own order, then
#: sorted by name); the rest are left out with a note (Registry.notes, on the page).
MAX_FOLDER_ENTRIES = 10_000
#: The names one folder's scan reads at most, of any kind: a folder of a million other files
#: costs no more than this.
MAX_FOLDER_NAMES = 10 * MAX_FOLDER_ENTRIES
#: The largest stat trace the dashboard reads: a trace is held whole in memory (its lines, indexed
#: by time), and anyone who can write into a folder given to `serve` can drop one there, so it is
#: bounded as a Dataset is (a ~500-byte sample line at 0.1 s is 256 MiB after about 14 hours).
MAX_TRACE_BYTES = MAX_DATASET_BYTES


def sniff(path: Path) -> str:
    """The kind of a file, from its first bytes. UserError when it is none of them, and for
    anything but a regular file: the server reads its files again while it runs, and a FIFO
    or a device would block it or never be the same twice. Every read is from the one
    descriptor checked to be a regular file (a name swapped for a FIFO meanwhile is never read)
    and at most JSON_SNIFF_BYTES long."""
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
        head = os.pread(fd, HEAD_BYTES, 0)
        if not head:
            raise UserError(f"{path}: empty file (not a campaign, Dataset, stat trace or meters recording)")
        if head.startswith(SQLITE_MAGIC):
            return "campaign"
        if b"\x00" in head:
            raise UserError(f"{path}: not a campaign, Dataset (CSV/JSON), stat trace or meters recording (binary data)")
        first = head.split(b"\n", 1)[0].strip()
        if first.startswith(b"{") and b'"type"' in first and b'"header"' in first and b'"corecast-stat"' in first:
            return "stat-trace"
        return "meters-recording" if _meters_notes(path, head, fd) else "dataset"
    finally:
        os.close(fd)


def _meters_notes(path: Path, head: bytes, fd: int | None = None) -> bool:
    """Whether a Dataset's metadata has notes.meters (a `corecast meters --record` recording):
    a CSV's `# corecast:` first line or its sidecar, a JSON Dataset's own metadata. `head`: the
    file's first bytes; `fd`: the file, open (else it is opened as sniff opens it), to read on
    from (at most JSON_SNIFF_BYTES). A file whose metadata cannot be read is a plain Dataset
    here (its page says what is wrong with it)."""
    if fd is None:
        fd = _regular_fd(path)
        if fd is None:
            return False
        try:
            return _meters_notes(path, head, fd)
        finally:
            os.close(fd)
    notes: Any = None
    try:
        lead = head.lstrip()
        if lead.startswith(b"["):                    # rows without metadata: no note to look for
            return False
        if lead.startswith(b"{"):
            notes = _json_notes(path, head, fd)
        elif head.startswith(b"# corecast:"):
            if b"\n" not in head and len(head) >= HEAD_BYTES:
                head = os.pread(fd, JSON_SNIFF_BYTES, 0)      # a long first line: read on, bounded
            first, nl, _ = head.partition(b"\n")
            if nl or len(head) < JSON_SNIFF_BYTES:           # the whole line (longer: not looked into)
                meta = json_document(first[len(b"# corecast:"):].decode("utf-8", "replace"), str(path))
                notes = meta.get("notes") if isinstance(meta, dict) else None
        else:
            notes = _sidecar_notes(path.with_name(path.name + SIDECAR))
    except (OSError, ValueError, UserError):
        return False
    return isinstance(notes, dict) and isinstance(notes.get("meters"), dict)


def _json_notes(path: Path, head: bytes, fd: int) -> Any:
    """The `notes` of the JSON object in open file `fd`, whose first bytes are `head`.
    A file of at most JSON_SNIFF_BYTES is parsed whole, as a Dataset is read (one cut short or
    damaged has no notes). A larger one is read member by member from its first JSON_SNIFF_BYTES
    up to `notes` (corecast writes them before the rows), and must end as an object does: a
    recording cut short is a plain Dataset, as when it was parsed whole."""
    size = os.fstat(fd).st_size
    data = head if len(head) >= size else os.pread(fd, JSON_SNIFF_BYTES, 0)
    if len(data) >= size and size <= JSON_SNIFF_BYTES:
        meta = json_document(data, str(path))
        return meta.get("notes") if isinstance(meta, dict) else None
    tail = os.pread(fd, HEAD_BYTES, max(0, size - HEAD_BYTES)).rstrip(b" \t\r\n")
    if not tail.endswith(b"}"):
        return None
    # a character cut at the end is left out; a byte-order mark is read as json.loads reads it
    text = codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=False)
    return _member(text, "notes", stop="rows")


def _regular_fd(path: Path) -> int | None:
    """`path` opened to read as sniff opens it (a FIFO never blocks), when it is a regular file;
    else None (for the quiet looks into a file's metadata; sniff says why it refuses)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


def _sidecar_notes(side: Path) -> Any:
    """The notes of a CSV's metadata sidecar, read as the file itself is (a FIFO never blocks,
    at most JSON_SNIFF_BYTES); None when there is none."""
    fd = _regular_fd(side)
    if fd is None:
        return None
    try:
        head = os.pread(fd, HEAD_BYTES, 0)
        return _json_notes(side, head, fd) if head.removeprefix(codecs.BOM_UTF8).lstrip().startswith(b"{") else None
    finally:
        os.close(fd)


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _member(text: str, key: str, stop: str) -> Any:
    """The value of member `key` of the JSON object `text` begins (the whole object or its first
    part), read member by member; None when it does not come before member `stop`, the object's
    end or the end of `text` (a value cut there does not parse). Only the members before it are
    parsed, the rest of `text` not at all."""
    i = _WS.match(text).end()
    if not text.startswith("{", i):
        return None
    i = _WS.match(text, i + 1).end()
    try:
        while text.startswith('"', i):
            name, i = _DECODER.raw_decode(text, i)
            i = _WS.match(text, i).end()
            if not text.startswith(":", i) or name == stop:
                return None
            value, i = _DECODER.raw_decode(text, _WS.match(text, i + 1).end())
            if name == key:
                return value
            i = _WS.match(text, i).end()
            if not text.startswith(",", i):
                return None
            i = _WS.match(text, i + 1).end()
    except (ValueError, RecursionError):            # cut by the bound, damaged, or nested too deep
        return None
    return None


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
    """Files named on the command line and the contents of folders named there.

    `files` is replaced whole by each scan, never changed in place: a handler on the event
    loop reads it while a scan runs in a worker thread."""

    def __init__(self, paths: list[str]):
        self.files: dict[str, Entry] = {}
        self.folders: list[Path] = []
        self.notes: list[str] = []        # what the last scan left out, one line a folder
        # kind (None: not one) by (st_dev, st_ino, st_size, st_mtime_ns) of the file and of its
        # sidecar: a name that did not change is not opened again, nor another name of the same
        # file (hard links); kept for the names the last scan saw only, so it stays bounded
        self._kinds: dict[tuple[Any, ...], str | None] = {}
        self._lock = threading.Lock()     # one scan at a time (the server's, a test's)
        self._inflight: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
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
        """Look into the folders for files not yet listed (blocking: the server calls it in a
        worker thread, through `refresh`)."""
        with self._lock:
            found: dict[str, Entry] = {}
            kinds: dict[tuple[Any, ...], str | None] = {}
            notes: list[str] = []
            for folder in self.folders:
                names, note = _folder_names(folder)
                if note:
                    notes.append(note)
                present = set(names)
                for name in names:
                    p = folder / name
                    fid = file_id(p)
                    if fid in self.files or fid in found:
                        continue
                    kind = self._kind(p, name + SIDECAR in present, kinds)
                    if kind is not None:
                        found[fid] = Entry(fid, p, kind, str(folder))
            self._kinds = kinds
            self.notes = notes
            if found:
                self.files = {**self.files, **found}

    def _kind(self, p: Path, has_sidecar: bool, kinds: dict[tuple[Any, ...], str | None]) -> str | None:
        """The kind of the file named `p` (None: not a regular file, a sidecar, or none of the
        kinds), from the cache when neither it nor its sidecar changed; the answer goes into
        `kinds`, the cache the next scan sees."""
        try:
            st = os.stat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or is_sidecar(p):
            return None
        side: Any = None
        if has_sidecar:               # a CSV's note may be in it: a new sidecar is a new answer
            try:
                sst = os.stat(p.with_name(p.name + SIDECAR))
                side = (sst.st_dev, sst.st_ino, sst.st_size, sst.st_mtime_ns)
            except OSError:
                pass
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, side)
        if key in kinds:
            return kinds[key]
        if key in self._kinds:
            kind = self._kinds[key]
        else:
            try:
                kind = sniff(p)
            except UserError:
                kind = None
        kinds[key] = kind
        return kind

    async def refresh(self) -> None:
        """`scan` in a worker thread (the loop's default executor, the server's pool), so that
        a scan, however long, never stops the other requests and the live streams. A request
        that comes while a scan runs waits for that one rather than start another."""
        loop = asyncio.get_running_loop()
        if self._inflight is None or self._inflight[0] is not loop or self._inflight[1].done():
            self._inflight = (loop, asyncio.ensure_future(loop.run_in_executor(None, self.scan)))
        # shielded: a request that goes away does not cancel the scan the others wait for
        await asyncio.shield(self._inflight[1])

    def entries(self) -> list[dict[str, Any]]:
        """The files as last scanned (a stat each: called in a worker thread)."""
        return [e.describe() for e in list(self.files.values())]

    def list(self) -> list[dict[str, Any]]:
        self.scan()
        return self.entries()

    async def alist(self) -> list[dict[str, Any]]:
        """`list` for a handler: the scan and the stats in worker threads."""
        await self.refresh()
        return await asyncio.to_thread(self.entries)

    def get(self, fid: str, kinds: tuple[str, ...] = KINDS) -> Entry:
        if fid not in self.files:
            self.scan()
        return self._checked(fid, kinds)

    async def aget(self, fid: str, kinds: tuple[str, ...] = KINDS) -> Entry:
        """`get` for a handler: a file not yet listed is looked for by a scan in a worker thread
        (one listed keeps its kind: no scan needed)."""
        if fid not in self.files:
            await self.refresh()
        return self._checked(fid, kinds)

    def _checked(self, fid: str, kinds: tuple[str, ...]) -> Entry:
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


def _folder_names(folder: Path) -> tuple[list[str], str]:
    """The names in `folder` that may be shown (their suffix one of SUFFIXES, not hidden), sorted,
    and a note when some were left out: at most MAX_FOLDER_NAMES names are read and
    MAX_FOLDER_ENTRIES kept, so that a folder of a million names costs a bounded scan."""
    names: list[str] = []
    note = ""
    try:
        with os.scandir(folder) as it:
            for n, d in enumerate(it):
                if n >= MAX_FOLDER_NAMES:
                    note = (f"{folder}: more than {MAX_FOLDER_NAMES:,} names: only the first {MAX_FOLDER_NAMES:,} "
                            "the folder lists were looked at, the rest are left out")
                    break
                name = d.name
                if name.startswith(".") or not name.lower().endswith(SUFFIXES):
                    continue
                if len(names) >= MAX_FOLDER_ENTRIES:
                    note = (f"{folder}: more than {MAX_FOLDER_ENTRIES:,} files: only the first {MAX_FOLDER_ENTRIES:,} "
                            "the folder lists are shown, the rest are left out")
                    break
                names.append(name)
    except OSError:
        return [], ""
    return sorted(names), note


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
