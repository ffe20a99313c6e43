"""The seam between a `measure` run and what is measured about it: one `Source` per stall or
metric source (rusage and time, PSI, the throughput regex, plugins, the sync shim, the sampled
run-queue delay, perf counters), each behind the same hooks, and each bringing its own
command-line options and campaign settings (`Option`). The registry that lists them is
`corecast.collect.runsources`; the runner calls every registered source at the same points:

    create(cfg, host)   once per campaign: None when the source does not take part (its
                        option is off), else the object that will see every run
    prepare(run)        before launch: add environment variables (LD_PRELOAD ...), files
    start(run)          after launch, before the program executes: run.pid is known
    sample(run)         every `interval` seconds while the program runs (if interval is set)
    stop(run)           after the program ended -- on every path, errors and interrupts
                        included (release what start took; run.ran says if it ran to its end)
    collect(run)        when it ran: a `Collected` (values, their columns, provenance for
                        the run's details, notes, and optional side tables)

A side table is rows of one name (`Collected.tables`), stored with the run in the campaign
file's `run_tables` (`Campaign.run_tables(name)` reads them back): what does not fit one number
per run (a per-lock table, say) goes there. docs/extending.md says how to add a source.

The sources' modules import `corecast.dataset.ColumnInfo` where they make a column, not at
their top, for start-up time: `measure -h` declares every source's options, and the Dataset
module loads numpy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

from ..store import RunRecord

if TYPE_CHECKING:     # corecast.dataset loads numpy: `measure -h` reads the options without it
    from ..dataset import ColumnInfo

TAIL_LINES = 20
TAIL_CHARS = 4000
OUTPUT_SCAN_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Option:
    """One setting of a source: its campaign setting `key` (stored in the campaign file, used
    again on --resume) and its command-line option `flag`.

    `default` is the setting when the option is not given; `convert` turns what the command
    line (or the API) gives into the setting (e.g. --no-shim into shim = False); `kind` (and
    `items` for a list) is what a stored setting must be, checked when a campaign is resumed.
    The remaining fields go to argparse."""

    key: str
    flag: str
    default: Any
    kind: Any
    help: str
    metavar: str | None = None
    action: str | None = None
    items: type | None = None
    convert: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        """The argparse destination (and the keyword of `campaign.prepare`)."""
        return self.flag.lstrip("-").replace("-", "_")

    def argparse_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"default": None, "help": self.help}
        if self.action:
            kw["action"] = self.action
        if self.metavar and self.action != "store_true":
            kw["metavar"] = self.metavar
        return kw

    def setting(self, given: Any) -> Any:
        """The campaign setting for what was given (None: not given)."""
        if given is None:
            return self.default() if callable(self.default) else self.default
        return self.convert(given) if self.convert else given


class Host:
    """What a source may tell: a notice said once per campaign and kept in its file
    (`notice_once`), or a passing line on the terminal (`notice`). Notices made before the
    campaign file exists wait for it (`attach`)."""

    def __init__(self, nominal_hz: float | None = None):
        self.nominal_hz = nominal_hz
        self._pending: list[tuple[str, str]] = []
        self._once: Callable[[str, str], None] | None = None
        self._say: Callable[[str], None] = lambda text: None

    def notice_once(self, key: str, text: str) -> None:
        if self._once is None:
            self._pending.append((key, text))
        else:
            self._once(key, text)

    def notice(self, text: str) -> None:
        self._say(text)

    def attach(self, once: Callable[[str, str], None], say: Callable[[str], None]) -> None:
        self._once, self._say = once, say
        pending, self._pending = self._pending, []
        for key, text in pending:
            once(key, text)


@dataclass
class Run:
    """One run as the sources see it."""

    record: RunRecord                 # slot, cores, repetition, cpus; status once it ended
    argv: list[str]
    env: dict[str, str]               # the program's environment (prepare may add to it)
    folder: Path                      # the run's private folder, removed after the run
    sub: Mapping[str, str]            # {cores}, {threads}, {rep}
    cfg: Any                          # the campaign's CampaignConfig
    host: Host
    pid: int | None = None            # the program's pid, from start on
    report: dict[str, str] = field(default_factory=dict)   # corecast-launch's report
    ran: bool = False                 # the program executed and its end was reported
    _out: dict[str, str] = field(default_factory=dict, repr=False)

    def output(self, which: str) -> str:
        """The program's stdout or stderr (its last 16 MiB), read once."""
        if which not in self._out:
            self._out[which] = _read_output(self.folder / which)
        return self._out[which]

    @property
    def stdout(self) -> str:
        return self.output("stdout")

    @property
    def stderr(self) -> str:
        return self.output("stderr")


@dataclass
class Collected:
    """What a source obtained about one run."""

    values: dict[str, float | None] = field(default_factory=dict)
    columns: list[ColumnInfo] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)    # added to the run's details
    notes: list[str] = field(default_factory=list)              # the run's notes
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # side tables


class Source:
    """The base of every source: each hook does nothing until a source says otherwise."""

    name: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    interval: float | None = None

    @classmethod
    def validate(cls, cfg: Any) -> None:
        """Refuse (UserError) settings that would fail every run, before anything is made."""

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "Source | None":
        return cls()

    def prepare(self, run: Run) -> None:
        pass

    def start(self, run: Run) -> None:
        pass

    def sample(self, run: Run) -> None:
        pass

    def stop(self, run: Run) -> None:
        pass

    def collect(self, run: Run) -> Collected | None:
        return None


def _read_output(path: Path) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size > OUTPUT_SCAN_BYTES:
                fh.seek(size - OUTPUT_SCAN_BYTES)
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def tail(text: str) -> str:
    lines = text.splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]
