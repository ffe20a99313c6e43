"""The campaign file: an SQLite database that `corecast measure` appends runs to.

Each run is committed in one transaction as soon as it finishes (WAL journal, full sync), so a
campaign that is interrupted -- Ctrl-C, a crash, SIGKILL, a power cut after the commit -- loses
at most the run in progress, and `corecast measure --resume -o FILE` carries on with the runs
not yet in the file. Every planned run has a *slot* (its position in the campaign's plan);
the slot is the primary key, so no run can be there twice.

Tables:
    meta(key, value)         JSON values: format, version, corecast_version, command, config,
                             machine, topology, created_at, updated_at
    runs(slot, ...)          one row per finished run: cores, repetition, warm-up flag, CPUs,
                             argv, status (ok | failed | crashed | timeout | not run), exit
                             status, signal, message, stdout/stderr tails, times, details (JSON)
    run_values(slot, name, value)   every number a run produced (NULL: not obtained)
    columns(name, ...)       what each value is: kind, unit, source, status, description
    notices(at, text)        things said once during the campaign (e.g. "no hardware PMU")
    run_tables(slot, name, row, data)   a source's side table: rows that are not one number per
                             run (data: a JSON object per row), written with the run

Only tables and transactions live here: `corecast.dataset.read_campaign(path)` reads a campaign
as a Dataset, beside the Dataset's other readers.

A campaign may be another user's file, read by root (`corecast info`, `serve`'s folders), so
every campaign is opened in one place (`Campaign.open`) that checks its schema before any of
its data is read (`_check_schema`: no view, trigger, virtual table or generated column, which
would run SQL the file brings on every read), and every connection is bounded (`_harden`: no
untrusted function in schema SQL, no value over MAX_VALUE; a reader's SQLite work is bounded
by the file's size).

Size: the campaign file's format and everything that makes opening one safe -- its journal
files, its schema, its bounds -- is one subject, kept together so no opening path misses one.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import sqlite3
import stat
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

from . import __version__, messages, outputs
from .errors import UserError, opened

FORMAT = "corecast-campaign"
VERSION = 1
OK = "ok"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
    slot INTEGER PRIMARY KEY,
    cores INTEGER NOT NULL,
    repetition INTEGER NOT NULL,
    warmup INTEGER NOT NULL DEFAULT 0,
    cpus TEXT NOT NULL,
    argv TEXT NOT NULL,
    status TEXT NOT NULL,
    exit_status INTEGER,
    signal INTEGER,
    message TEXT,
    stdout_tail TEXT,
    stderr_tail TEXT,
    started_at REAL,
    finished_at REAL,
    details TEXT
);
CREATE TABLE IF NOT EXISTS run_values(
    slot INTEGER NOT NULL REFERENCES runs(slot),
    name TEXT NOT NULL,
    value REAL,
    PRIMARY KEY(slot, name)
);
CREATE TABLE IF NOT EXISTS columns(
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    kind TEXT NOT NULL,
    unit TEXT,
    source TEXT,
    status TEXT NOT NULL,
    description TEXT
);
CREATE TABLE IF NOT EXISTS notices(id INTEGER PRIMARY KEY, at REAL NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run_tables(
    slot INTEGER NOT NULL REFERENCES runs(slot),
    name TEXT NOT NULL,
    row INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY(slot, name, row)
);
"""
#: The side tables, made when a campaign from before them is opened for writing.
RUN_TABLES = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS run_tables"):]
#: The tables SCHEMA makes, all the names corecast reads (run_tables absent from older campaigns).
TABLES = ("meta", "runs", "run_values", "columns", "notices", "run_tables")

#: The longest single value (string, blob, row) any connection reads or writes: what corecast
#: stores is kilobytes (a run's details, a side table's row, the machine and its topology as
#: JSON), so 64 MiB is generous; SQLite's own default (1 GB per value) lets a planted file make
#: a reader hold gigabytes. A longer value is SQLite's "string or blob too big", one line here.
MAX_VALUE = 64 << 20
#: A read-only connection's budget of SQLite work (virtual-machine steps), for all its reads
#: together: READ_STEPS_PER_BYTE per byte of the file and its WAL, and at least READ_STEPS_MIN.
#: Reading a real campaign takes under half a step a byte (the bundled ones 0.03, a dense one of
#: 3,000 runs x 60 values 0.4), so this is no limit a real campaign meets but the last guard
#: against a read that passed the schema checks and still never ends, or grows with the square
#: of the file (30,000 side tables of one row, each a scan: 46 s for 1 MB, stopped here in ~1 s).
#: SQLite does ~10^8 steps a second; counted every READ_STEP_TICK: one Python call per ~1 ms.
READ_STEPS_PER_BYTE = 100
READ_STEPS_MIN = 100_000_000
READ_STEP_TICK = 100_000


class ColumnDescription(Protocol):
    """What the campaign stores about a column (a `corecast.dataset.ColumnInfo` is one)."""

    name: str
    kind: str
    unit: str | None
    source: str | None
    status: str
    description: str | None


@dataclass
class RunRecord:
    """One finished run, as the runner hands it to the store."""

    slot: int
    cores: int
    repetition: int
    warmup: bool
    cpus: list[int]
    argv: list[str]
    status: str                       # ok | failed | crashed | timeout | not run
    exit_status: int | None = None    # exit code, or 128 + signal
    signal: int | None = None
    message: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    started_at: float = 0.0
    finished_at: float = 0.0
    values: dict[str, float | None] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # a source's side tables

    @property
    def ok(self) -> bool:
        return self.status == OK


#: The kind of each metadata value corecast writes (what reading a damaged file checks).
_META_TYPES: dict[str, Any] = {"format": str, "version": int, "corecast_version": str, "command": list,
                               "config": dict, "machine": dict, "topology": dict,
                               "created_at": (int, float), "updated_at": (int, float)}

_NULLABLE = ("metadata 'machine'", "metadata 'topology'")
_STRINGS = ("metadata 'command'",)
_KIND_NAMES = {str: "a string", int: "a whole number", list: "a list", dict: "an object"}

#: How long a campaign file locked by another program is waited for.
LOCK_WAIT_S = 30.0


def _harden(con: sqlite3.Connection) -> sqlite3.Connection:
    """Bounds on what a file can make this connection do, set before its first query: SQL kept
    in the schema (a default, an index's expression, a CHECK) may call no function SQLite does
    not call innocuous (trusted_schema=OFF), and no value may be longer than MAX_VALUE."""
    con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE)
    con.execute("PRAGMA trusted_schema=OFF")
    return con


def _check_schema(con: sqlite3.Connection, p: Path) -> None:
    """Refuse a file whose schema holds what corecast never makes, reading sqlite_master alone
    (no table's data): a view, or a virtual table, under a table's name runs the file's query on
    every read -- an endless recursive CTE never returns and ignores Ctrl-C (SQLite runs without
    the GIL), a printf() view fills memory -- a generated column is computed on every read (a
    stored one on every write), and a trigger runs on every write. The names corecast reads must
    be plain tables where present (a missing one stays SQLite's "no such table")."""
    found = None
    for kind, name, rootpage, sql in con.execute("SELECT type, name, rootpage, sql FROM sqlite_master").fetchall():
        if kind in ("view", "trigger"):
            found = f"a {kind}"
        elif kind == "table" and (not rootpage or str(sql or "").lstrip()[:14].upper() == "CREATE VIRTUAL"):
            found = "a virtual table"
        elif kind == "table" and any(h for (h,) in con.execute("SELECT hidden FROM pragma_table_xinfo(?)",
                                                              (name,)).fetchall()):
            found = "a generated column in table"
        elif str(name).lower() in TABLES and kind != "table":
            found = f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"
        if found:
            raise UserError(f"{p}: not a corecast campaign: it holds {found} {ascii(str(name))[:60]}, which "
                            "corecast never makes")


def _connect(path: Path, immutable: bool = False) -> sqlite3.Connection:
    """A connection (`_harden`ed) that waits for a file another program has locked -- after
    saying so once on stderr, never in silence -- and gives up with a UserError after
    LOCK_WAIT_S. `immutable`: the main file alone, read-only, with no journal file opened or
    made beside it."""
    if immutable:
        return _harden(sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1", uri=True,
                                       isolation_level=None))
    con = _harden(sqlite3.connect(str(path), timeout=0.2, isolation_level=None))
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        if not isinstance(err, sqlite3.OperationalError) or ("locked" not in str(err) and "busy" not in str(err)):
            con.close()                     # a malformed file: closed before the caller says so
            raise
        # a wait, however quiet the command was asked to be: said at every verbosity
        messages.warning(f"{path} is locked by another program (an open transaction); waiting up to "
                         f"{LOCK_WAIT_S:g} s")
        con.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_S * 1000)}")
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            con.close()
            raise UserError(f"{path}: still locked by another program after {LOCK_WAIT_S:g} s") from None
    con.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_S * 1000)}")
    return con


#: The files SQLite keeps beside a campaign under fixed names: its journal, WAL and WAL index.
SIDE_SUFFIXES = ("-journal", "-wal", "-shm")


def _wal_header(p: Path) -> bool:
    """Whether the database header says WAL (its read and write versions are 2)."""
    try:
        with open(p, "rb") as fh:
            return fh.read(20)[18:20] == b"\x02\x02"
    except OSError:
        return False


def _hold_side_files(p: Path, wal: bool) -> list[tuple[Path, int]]:
    """Make SQLite's files beside the campaign ours before SQLite opens them by name: it opens
    them without O_EXCL (following no link, but taking any regular file there), so in /tmp
    another user could plant `c.db-wal` or a hot `c.db-journal` and have their pages read into
    the campaign -- its command included, which `--resume` runs. A name that exists must be a
    regular file of the campaign's owner with one name (else a UserError); one that does not is
    made here with O_EXCL|O_NOFOLLOW, by the owner (or root) only: an empty journal (never hot)
    always, the WAL and its index in WAL mode (`wal`). In a sticky folder nobody else can remove
    or replace them. The journal made (path, inode) is removed by `_release_side_files`; the WAL
    and its index are SQLite's (it removes them at the last close: removing an empty WAL here
    could pull it from under another connection)."""
    try:
        owner = os.stat(p)
    except OSError:
        return []                           # SQLite's own open says what is wrong
    held: list[tuple[Path, int]] = []
    euid = os.geteuid()
    for suffix in SIDE_SUFFIXES:
        if euid not in (0, owner.st_uid) or (suffix != "-journal" and not wal):
            continue
        q = p.with_name(p.name + suffix)
        try:
            fd = os.open(q, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         stat.S_IMODE(owner.st_mode) & 0o666)
        except OSError:
            continue                        # there already (checked below), or a folder we cannot write to
        try:
            if euid == 0 and owner.st_uid != 0:
                os.fchown(fd, owner.st_uid, owner.st_gid)      # as SQLite gives them, run by root
            if suffix == "-journal":
                held.append((q, os.fstat(fd).st_ino))
        finally:
            os.close(fd)
    for suffix in SIDE_SUFFIXES:            # and whatever else is there already
        q = p.with_name(p.name + suffix)
        if os.path.lexists(q):
            _check_side_file(p, q, owner.st_uid)
    return held


def _check_side_file(p: Path, q: Path, uid: int) -> None:
    try:
        st = os.lstat(q)
    except FileNotFoundError:
        return
    except OSError as err:
        raise UserError(f"{p}: cannot look at {q.name} beside it ({err.strerror or err})") from None
    checks = ((stat.S_ISLNK(st.st_mode), "is a symbolic link"),
              (not stat.S_ISREG(st.st_mode), "is not a regular file"),
              (st.st_uid != uid, f"is owned by uid {st.st_uid}, not by the campaign's owner (uid {uid})"),
              (st.st_nlink != 1, f"has {st.st_nlink} names (hard links)"))
    why = next((w for bad, w in checks if bad), None)
    if why:
        raise UserError(f"{p}: {q} {why}: SQLite would use it as the campaign's journal, so it is not "
                        "opened (remove it; another user may have put it there)")


def _settled_and_not_mine(p: Path) -> bool:
    """A campaign this user reads but neither owns nor may write, with no WAL beside it (no
    measure is writing it; all is in the main file): read as it is. SQLite would make its WAL
    and index here under this user's name -- files the campaign's owner then refuses."""
    try:
        st = os.stat(p)
    except OSError:
        return False
    return (os.geteuid() not in (0, st.st_uid) and not os.access(p, os.W_OK)
            and not any(os.path.lexists(p.with_name(p.name + s)) for s in SIDE_SUFFIXES))


def _release_side_files(held: list[tuple[Path, int]]) -> None:
    """Remove the empty journal `_hold_side_files` made, if it is still that file and empty."""
    for q, ino in held:
        try:
            st = os.lstat(q)
            if stat.S_ISREG(st.st_mode) and st.st_ino == ino and st.st_size == 0:
                os.unlink(q)
        except OSError:
            pass


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class Campaign:
    """An open campaign file, held exclusively by this process while it is open for writing."""

    def __init__(self, path: Path, con: sqlite3.Connection, lock_fd: int | None):
        self.path = path
        self._con = con
        self._lock_fd = lock_fd
        self._held: list[tuple[Path, int]] = []     # the empty journal made beside it (_hold_side_files)
        self.after_close: list[Callable[[], None]] = []    # called once the campaign is closed
        self._allowed = self._budget = 0    # SQLite steps given to, and left to, a reader (_bound_reads)
        self._spent = False                 # a read was stopped for spending them all

    @property
    def held_files(self) -> list[Path]:
        """The empty journal corecast made beside the campaign, removed at `close` (a command
        that must leave nothing behind, SIGKILL included, names it to its sentinel)."""
        return [q for q, _ in self._held]

    # ------------------------------------------------------------ opening
    @staticmethod
    def _lock(path: Path) -> int:
        fd = os.open(str(path), os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UserError(f"{path}: another corecast measure is writing this campaign right now") from None
        return fd

    @classmethod
    def create(cls, path: str | Path, *, command: list[str], config: Mapping[str, Any],
               machine: Mapping[str, Any], topology: Mapping[str, Any] | None = None) -> "Campaign":
        """A new campaign file, made whole (schema and metadata) under a hidden name and then
        linked into place, so that no crash or full disk leaves a half-made file under its
        name. A half-made one left by an older corecast (empty, or without metadata and runs)
        is recognised and replaced. `machine`: the Machine's description (`Machine.to_dict()`).
        The hidden name lies in a private folder made for it (mode 700, a fresh name), so no
        other user can plant a link where SQLite creates its files."""
        p = Path(path)
        kind = outputs.check(p)         # its folder exists; no folder, no planted link
        if kind not in ("new", "regular"):
            raise UserError(f"{p}: not a regular file (a campaign is an SQLite file): choose another -o")
        for suffix in SIDE_SUFFIXES:         # another user's file where SQLite will keep its journal
            side = p.with_name(p.name + suffix)
            _check_side_file(p, side, os.geteuid())
            if os.path.lexists(side) and not os.path.lexists(p):    # SQLite would replay a WAL into the new file
                raise UserError(f"{p}: {side} is there without the campaign (left by an earlier file of this "
                                "name?): remove it, or choose another -o")
        if p.exists():
            if not half_created(p):
                raise UserError(f"{p}: already exists (continue it with --resume, or choose another -o)")
            _remove_db(p)
        try:
            private = Path(tempfile.mkdtemp(prefix=f".{p.name[:100]}.creating-", dir=p.parent))
        except OSError as err:
            raise UserError(f"{p}: cannot create the campaign file ({err.strerror or err})") from None
        tmp = private / p.name
        now = time.time()
        try:
            con = _connect(tmp)
            try:
                con.execute("PRAGMA journal_mode=WAL")     # from birth: its WAL is held beside it (open)
                con.executescript(SCHEMA)
                con.execute("BEGIN")
                for k, v in {"format": FORMAT, "version": VERSION, "corecast_version": __version__,
                             "command": list(command), "config": dict(config), "machine": dict(machine),
                             "topology": dict(topology or {}), "created_at": now, "updated_at": now}.items():
                    con.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (k, json.dumps(v)))
                con.execute("COMMIT")
            finally:
                con.close()
            os.link(tmp, p)              # fails if the name was taken meanwhile
        except FileExistsError:
            raise UserError(f"{p}: already exists (continue it with --resume, or choose another -o)") from None
        except sqlite3.Error as err:
            raise UserError(f"{p}: cannot create the campaign file ({err})") from None
        except OSError as err:
            raise UserError(f"{p}: cannot create the campaign file ({err.strerror or err})") from None
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return cls.open(p)

    @classmethod
    def open(cls, path: str | Path, *, write: bool = True) -> "Campaign":
        p = Path(path)
        if not p.exists():
            raise UserError(f"{p}: no such campaign file")
        if half_created(p):
            raise UserError(f"{p}: a campaign whose creation never finished (nothing was measured in it); "
                            "run the measurement again without --resume and it will be replaced")
        _check_magic(p)
        lock = cls._lock(p) if write else None
        wal = _wal_header(p)
        self = None
        held: list[tuple[Path, int]] = []
        try:
            held = _hold_side_files(p, wal)
            self = cls(p, _connect(p, immutable=not write and _settled_and_not_mine(p)), lock)
            self._held = held
            _check_schema(self._con, p)               # before any of its data is read
            if not write:                             # a writer is `measure`, on its own file, for hours
                self._bound_reads()
            meta = self.meta()
            if meta.get("format") != FORMAT:
                raise UserError(f"{p}: an SQLite file, but not a corecast campaign")
            if int(meta.get("version", 0)) > VERSION:
                raise UserError(f"{p}: campaign format version {meta['version']} is newer than this corecast "
                                "understands")
            if write:                                  # only a campaign is written to
                self._con.execute("PRAGMA journal_mode=WAL")
                self._con.execute("PRAGMA synchronous=FULL")
                self._con.executescript(RUN_TABLES)          # a campaign made before side tables
                if not wal:                            # the WAL SQLite has just made: ours, not a plant
                    _hold_side_files(p, False)
        except BaseException as err:
            if self is not None:
                self.close()
            else:                                     # refused before a Campaign held them
                _release_side_files(held)             # (a malformed file: the empty journal made for it)
                if lock is not None:
                    os.close(lock)
            if isinstance(err, sqlite3.DatabaseError):
                raise UserError(f"{p}: not a readable campaign file ({err})") from None
            raise
        return self

    def close(self) -> None:
        try:
            self._con.close()
            _release_side_files(self._held)
            self._held = []
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            hooks, self.after_close = self.after_close, []
            for hook in hooks:
                hook()

    def __enter__(self) -> "Campaign":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ transactions
    class _Tx:
        def __init__(self, con: sqlite3.Connection):
            self.con = con

        def __enter__(self) -> sqlite3.Connection:
            self.con.execute("BEGIN IMMEDIATE")
            return self.con

        def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
            if et is None:
                self.con.execute("COMMIT")
            else:
                self.con.execute("ROLLBACK")

    def _tx(self) -> "Campaign._Tx":
        return Campaign._Tx(self._con)

    # ------------------------------------------------------------ reading
    def _bound_reads(self) -> None:
        """Give this read-only connection its budget of SQLite work (READ_STEPS_PER_BYTE): a
        progress handler that stops the read in progress once all is spent. It also lets Ctrl-C
        stop a long read (Python runs the signal's handler in it; see `_rows`)."""
        size = 0
        for q in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                size += q.stat().st_size
            except OSError:
                pass
        self._allowed = self._budget = max(READ_STEPS_MIN, READ_STEPS_PER_BYTE * size)

        def tick() -> int:
            self._budget -= READ_STEP_TICK
            self._spent = self._budget < 0
            return int(self._spent)
        self._con.set_progress_handler(tick, READ_STEP_TICK)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of one read, as SQLite steps to each (a list of them all first would cost a
        tenth more time on a big campaign), with its bounds said in one line: a value over
        MAX_VALUE, or a read past the connection's budget of work. A read stopped by neither was
        stopped by Ctrl-C (the KeyboardInterrupt raised in the progress handler ends the query;
        SQLite says only "interrupted"), and is that again."""
        try:
            yield from self._con.execute(sql, args)
        except sqlite3.DataError as err:
            if "too big" not in str(err):
                raise
            raise UserError(f"{self.path}: not a readable campaign file: it holds a value over {MAX_VALUE >> 20} "
                            "MiB (corecast stores kilobytes)") from None
        except sqlite3.OperationalError as err:
            if str(err) != "interrupted":
                raise
            if not self._spent:
                raise KeyboardInterrupt from None
            raise UserError(f"{self.path}: not a readable campaign file: reading it took over "
                            f"{self._allowed:,} steps of SQLite's work, far more than a campaign of "
                            "its size needs") from None

    def meta(self) -> dict[str, Any]:
        """The campaign's metadata; a value that is not what corecast wrote (damaged JSON, or
        the wrong kind of value) is a UserError naming it."""
        out = {}
        for k, v in self._rows("SELECT key, value FROM meta"):
            out[k] = self._value(v, f"metadata '{k}'", _META_TYPES.get(k))
        return out

    def _value(self, text: Any, what: str, kind: Any = None) -> Any:
        try:
            v = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            raise UserError(f"{self.path}: damaged campaign file: {what} is not valid JSON (or nested "
                            "too deep)") from None
        if kind is None or (v is None and what in _NULLABLE):
            return v
        if not isinstance(v, kind) or isinstance(v, bool) or (
                kind is list and what in _STRINGS and not all(isinstance(a, str) for a in v)):
            raise UserError(f"{self.path}: damaged campaign file: {what} is "
                            f"{json.dumps(v)[:40]}, not {_KIND_NAMES.get(kind, 'a number')}")
        return v

    def run_count(self, warmups: bool = True) -> int:
        """The runs recorded; without `warmups`, the measured ones only."""
        sql = "SELECT COUNT(*) FROM runs" + ("" if warmups else " WHERE NOT warmup")
        return int(next(self._rows(sql))[0])

    def done_slots(self) -> set[int]:
        return {r[0] for r in self._rows("SELECT slot FROM runs")}

    def columns(self) -> dict[str, dict[str, Any]]:
        """The column descriptions in the order the columns appeared: name -> kind, unit,
        source, status, description."""
        out = {}
        for name, kind, unit, source, status, desc in self._rows(
                "SELECT name, kind, unit, source, status, description FROM columns ORDER BY position"):
            out[name] = dict(kind=kind, unit=unit, source=source, status=status, description=desc)
        return out

    def runs(self) -> list[dict[str, Any]]:
        names = ["slot", "cores", "repetition", "warmup", "cpus", "argv", "status", "exit_status", "signal",
                 "message", "stdout_tail", "stderr_tail", "started_at", "finished_at", "details"]
        rows = []
        for rec in self._rows(f"SELECT {', '.join(names)} FROM runs ORDER BY slot"):
            r = dict(zip(names, rec))
            r["warmup"] = bool(r["warmup"])
            r["cpus"] = self._value(r["cpus"], f"run {r['slot']}'s cpus", list)
            r["argv"] = self._value(r["argv"], f"run {r['slot']}'s command", list)
            if not all(isinstance(a, str) for a in r["argv"]):
                raise UserError(f"{self.path}: damaged campaign file: run {r['slot']}'s command is not a list "
                                "of strings")
            r["details"] = self._value(r["details"] or "{}", f"run {r['slot']}'s details", dict)
            rows.append(r)
        values: dict[int, dict[str, float | None]] = {}
        for slot, name, value in self._rows("SELECT slot, name, value FROM run_values"):
            values.setdefault(slot, {})[name] = value
        for r in rows:
            r["values"] = values.get(r["slot"], {})
        return rows

    def run_tables(self, name: str, limit: int = -1) -> list[dict[str, Any]]:
        """A side table's rows (more than `limit` is one line), each with its run's `slot`, in run
        and row order (none in a campaign made before side tables)."""
        try:
            got = list(self._rows("SELECT slot, row, data FROM run_tables WHERE name = ? ORDER BY slot, row LIMIT ?",
                                  (name, limit + 1 if limit >= 0 else -1)))
        except sqlite3.OperationalError:
            return []
        if 0 <= limit < len(got):
            raise UserError(f"{self.path}: its side table '{name}' holds more than {limit:,} rows")
        return [{"slot": slot, **self._value(data, f"run {slot}'s table '{name}' row {row}", dict)}
                for slot, row, data in got]

    def run_table_names(self) -> list[str]:
        """The names of the side tables some run has rows of."""
        try:
            return [n for (n,) in self._rows("SELECT DISTINCT name FROM run_tables ORDER BY name")]
        except sqlite3.OperationalError:
            return []

    def notices(self) -> list[str]:
        return [t for (t,) in self._rows("SELECT text FROM notices ORDER BY id")]

    # ------------------------------------------------------------ writing
    def record_run(self, run: RunRecord, columns: Iterable[ColumnDescription] = ()) -> None:
        """Store one finished run (and the descriptions of any new columns) atomically."""
        try:
            with self._tx() as con:
                self._upsert_columns(con, columns)
                con.execute(
                    "INSERT INTO runs(slot, cores, repetition, warmup, cpus, argv, status, exit_status, signal, "
                    "message, stdout_tail, stderr_tail, started_at, finished_at, details) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run.slot, run.cores, run.repetition, int(run.warmup), json.dumps(run.cpus), json.dumps(run.argv),
                     run.status, run.exit_status, run.signal, run.message, run.stdout_tail, run.stderr_tail,
                     run.started_at, run.finished_at, json.dumps(run.details, default=str)))
                con.executemany("INSERT INTO run_values(slot, name, value) VALUES (?, ?, ?)",
                                [(run.slot, k, _num(v)) for k, v in run.values.items()])
                con.executemany("INSERT INTO run_tables(slot, name, row, data) VALUES (?, ?, ?, ?)",
                                [(run.slot, name, i, json.dumps(r, default=str))
                                 for name, rows in run.tables.items() for i, r in enumerate(rows)])
                con.execute("UPDATE meta SET value = ? WHERE key = 'updated_at'", (json.dumps(time.time()),))
        except sqlite3.IntegrityError:
            raise UserError(f"{self.path}: run {run.slot} is already in the campaign") from None
        except sqlite3.Error as err:
            raise UserError(f"{self.path}: cannot record run {run.slot} ({err})") from None

    def _upsert_columns(self, con: sqlite3.Connection, columns: Iterable[ColumnDescription]) -> None:
        for c in columns:
            row = con.execute("SELECT position FROM columns WHERE name = ?", (c.name,)).fetchone()
            if row is None:
                pos = con.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM columns").fetchone()[0]
                con.execute("INSERT INTO columns(name, position, kind, unit, source, status, description) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (c.name, pos, c.kind, c.unit, c.source, c.status, c.description))
            else:
                con.execute("UPDATE columns SET kind = ?, unit = ?, source = ?, status = ?, description = ? "
                            "WHERE name = ?", (c.kind, c.unit, c.source, c.status, c.description, c.name))

    def add_notice(self, text: str) -> None:
        with self._tx() as con:
            con.execute("INSERT INTO notices(at, text) VALUES (?, ?)", (time.time(), text))


def half_created(p: Path) -> bool:
    """True for a campaign file whose creation was cut short (SIGKILL in its first
    milliseconds, a full disk): empty, or SQLite with no corecast metadata and no run. Anything
    else -- another program's file included -- is not touched."""
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):         # a pipe or a device is never a campaign
            return False
        if st.st_size == 0:
            return True
        with open(p, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return False
    except OSError:
        return False
    try:
        # immutable: the main file alone, with no lock and no journal or WAL opened or made beside
        # it (a campaign's metadata is in its main file from birth: created, then linked)
        con = _harden(sqlite3.connect(f"file:{urllib.parse.quote(str(p))}?mode=ro&immutable=1", uri=True,
                                      timeout=1.0))
        try:
            try:
                _check_schema(con, p)       # a planted view or generated column: not ours to replace
            except UserError:
                return False                # (Campaign.open then says what it holds)
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" in tables and con.execute("SELECT 1 FROM meta WHERE key='format'").fetchone():
                return False
            if "runs" in tables and con.execute("SELECT 1 FROM runs LIMIT 1").fetchone():
                return False
            return not (tables - {"meta", "runs", "run_values", "columns", "notices", "run_tables"})
        finally:
            con.close()
    except sqlite3.Error:
        return False


def _remove_db(p: Path) -> None:
    for q in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm"), p.with_name(p.name + "-journal")):
        try:
            q.unlink()
        except FileNotFoundError:
            pass


def _check_magic(p: Path) -> None:
    with opened(p, "rb", what="campaign file") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        raise UserError(f"{p}: not a campaign file (not SQLite)")
