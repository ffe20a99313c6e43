"""One vocabulary of units (issue 27, item 5): every command's time and size options read the
same spellings through corecast.parsing, and refuse the same bad ones with one line and exit
status 2; the files corecast reads (machine sizes, trigger durations) speak the same units."""
from __future__ import annotations

import argparse

import pytest

from corecast import parsing as P
from corecast.errors import UserError

# (command words before the option, the option, what the parser needs besides, its dest, a
# value within the option's bounds, in seconds or bytes; "ms" where a bare number is in ms)
TIME_OPTIONS = [
    (["stat"], "-T", [], "interval", 0.5, "s"),
    (["stat"], "--interval-print", [], "interval", 0.5, "ms"),
    (["stat"], "--duration", [], "duration", 0.5, "s"),
    (["meters"], "--interval", [], "interval", 0.5, "s"),
    (["meters"], "--window", [], "window", 0.5, "s"),
    (["meters"], "--duration", [], "duration", 0.5, "s"),
    (["meters"], "--probe-period", [], "probe_period", 0.5, "s"),
    (["sched", "sim", "pmctrack-mix"], "--quantum", [], "quantum", 0.5, "s"),
    (["sched", "sim", "pmctrack-mix"], "--period", [], "period", 0.5, "s"),
    (["sched", "sim", "pmctrack-mix"], "--migration-cost", [], "migration_cost", 0.5, "s"),
    (["sched", "paper"], "--quantum", [], "quantum", 0.5, "s"),
    (["sched", "paper"], "--migration-cost", [], "migration_cost", 0.5, "s"),
    (["sched", "run"], "--quantum", ["--policy", "rr"], "quantum", 0.5, "s"),
    (["sched", "run"], "--period", ["--policy", "rr"], "period", 0.5, "s"),
    (["throughput"], "--target", ["--mpki", "w.toml"], "target", 0.5, "s"),
    (["throughput"], "--think-time", ["--mpki", "w.toml"], "think_time", 0.5, "s"),
    (["chase"], "--duration", [], "duration", 0.5, "s"),
    (["measure"], "--timeout", [], "timeout", 0.5, "s"),
    (["sim", "mrc-online"], "--interval", [], "interval", 0.5, "s"),
]
ZERO_TIME = {"--migration-cost", "--think-time"}      # 0 is a time they take

SIZE_OPTIONS = [
    (["chase"], "--size", [], "size", 65536),
    (["chase"], "--line", [], "line", 65536),
    (["sim", "gen", "stream"], "--stride", ["-o", "x.cctrace"], "stride", 65536),
    (["sim", "gen", "random"], "--working-set", ["-o", "x.cctrace"], "working_set", 65536),
    (["sim", "mrc", "t.cctrace"], "--line", [], "line", 65536),
    (["throughput"], "--cache-size", ["--mpki", "w.toml"], "cache_size", 65536),
]

BAD_TIMES = ["fast", "1x", "nan", "inf", "-1", "-1ms", "1e308", "1e400s", "", "0x10", "1 ms ms", "5sec",
             "10MS", "1.5.2s", "100 kHz"]
BAD_SIZES = ["lots", "1.5", "-1", "1e400", "2048TiB", "64 KiBs", "0x40", "nan", "0", "1.5B", "4 KHz"]


def _parse(words: list[str]) -> argparse.Namespace:
    from corecast.cli import build_parser
    return build_parser(words).parse_args(words)


def _given(option: str, text: str) -> list[str]:
    """`option` with `text` as one word, so that argparse never takes `-1` for an option."""
    if option.startswith("--"):
        return [f"{option}={text}"]
    return [option + text] if text.startswith("-") else [option, text]


def _spellings(value: float, table: dict[str, float], bare: str) -> list[str]:
    """`value` written in every unit of `table` (and bare, in the unit a bare number means)."""
    out = [f"{value / table[bare]!r}"]
    for unit, scale in table.items():
        out += [f"{value / scale!r}{unit}", f"{value / scale!r} {unit}"]
    return out


def _size_spellings(value: int) -> list[str]:
    out = [str(value)]
    for unit, scale in P.SIZE_UNITS.items():
        if not unit:
            continue
        n = repr(value / scale) if value % scale else str(value // scale)
        canonical = unit[0].upper() + ("iB" if unit.endswith("ib") else unit[1:].upper())
        out += [f"{n}{unit}", f"{n}{unit.upper()}", f"{n}{canonical}", f"{n} {canonical}"]
    return out


@pytest.mark.parametrize("words, option, extra, dest, value, bare", TIME_OPTIONS,
                         ids=[f"{' '.join(w[:2])} {o}" for w, o, *_ in TIME_OPTIONS])
def test_every_time_option_reads_every_unit(words, option, extra, dest, value, bare):
    spellings = _spellings(value, P.TIME_UNITS, bare)
    assert len(spellings) >= 2 * 9            # ns us µs μs ms s m min h, with and without a space
    for text in spellings:
        got = getattr(_parse([*words, *extra, option, text]), dest)
        assert got == pytest.approx(value, rel=1e-12), (option, text)


@pytest.mark.parametrize("words, option, extra, dest, value, bare", TIME_OPTIONS,
                         ids=[f"{' '.join(w[:2])} {o}" for w, o, *_ in TIME_OPTIONS])
def test_every_time_option_refuses_the_same_mistakes(capsys, words, option, extra, dest, value, bare):
    bad = BAD_TIMES + ([] if option in ZERO_TIME else ["0", "0ms"])
    for text in bad:
        with pytest.raises(SystemExit) as exc:
            _parse([*words, *extra, *_given(option, text)])
        assert exc.value.code == 2, (option, text)
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "error: argument " in err and f"'{text}'" in err, (option, text, err)
    if option in ZERO_TIME:
        assert getattr(_parse([*words, *extra, option, "0"]), dest) == 0.0


@pytest.mark.parametrize("words, option, extra, dest, value", SIZE_OPTIONS,
                         ids=[f"{' '.join(w[:2])} {o}" for w, o, *_ in SIZE_OPTIONS])
def test_every_size_option_reads_every_unit(words, option, extra, dest, value):
    spellings = _size_spellings(value)
    assert {"65536", "64KiB", "64K", "64KB", "64kb", "0.0625MiB", "0.0625M"} <= set(spellings)
    for text in spellings:
        got = getattr(_parse([*words, *extra, option, text]), dest)
        assert got == value and isinstance(got, int), (option, text)


@pytest.mark.parametrize("words, option, extra, dest, value", SIZE_OPTIONS,
                         ids=[f"{' '.join(w[:2])} {o}" for w, o, *_ in SIZE_OPTIONS])
def test_every_size_option_refuses_the_same_mistakes(capsys, words, option, extra, dest, value):
    for text in BAD_SIZES:
        with pytest.raises(SystemExit) as exc:
            _parse([*words, *extra, *_given(option, text)])
        assert exc.value.code == 2, (option, text)
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "error: argument " in err and f"'{text}'" in err, (option, text, err)


def _all_options():
    """Every option of every command and sub-action: (where, option strings, its type)."""
    from corecast.cli import build_parser, sched, sim

    parsers = []
    top = build_parser(None)
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers += [(f"corecast {name}", p) for name, p in action.choices.items()]
    parsers += [(f"corecast sched {n}", p) for n, p in sched._sub_parsers("corecast sched").items()]
    parsers += [(f"corecast sim {n}", p) for n, p in sim._sub_parsers("corecast sim").items()]
    for where, p in parsers:
        for a in p._actions:
            if a.option_strings:
                yield where, tuple(a.option_strings), a.type, a.metavar


#: Options named like a time or a size that are not one (a problem size, a count of cores).
NOT_UNITS = {("corecast predict", "--size"), ("corecast evaluate", "--size"), ("corecast predict", "--target-size"),
             ("corecast sched run", "--small-speed")}


def test_the_table_holds_every_time_and_size_option():
    """An option typed as a time or a size is in the tables above (so every spelling is tested
    on it), and no option that takes a time or a size reads it some other way."""
    typed = {(where, opts[-1] if opts[-1].startswith("--") else opts[0]): getattr(t, "__name__", "")
             for where, opts, t, _ in _all_options() if t is not None}
    times = {k for k, name in typed.items() if name == "time_s"}
    sizes = {k for k, name in typed.items() if name == "size_bytes"}
    table_t = {("corecast " + " ".join(w[:2] if w[0] in ("sched", "sim") else w[:1]), o) for w, o, *_ in TIME_OPTIONS}
    table_s = {("corecast " + " ".join(w[:2] if w[0] in ("sched", "sim") else w[:1]), o) for w, o, *_ in SIZE_OPTIONS}
    table_t = {(w, "--interval" if o == "-T" else o) for w, o in table_t}
    assert times == table_t
    assert sizes == table_s
    # options whose name or metavar says time or bytes, read by anything else
    wordy = ("interval", "duration", "timeout", "quantum", "period", "think-time", "window", "cost")
    for where, opts, t, metavar in _all_options():
        name = getattr(t, "__name__", "")
        key = (where, opts[-1])
        if key in NOT_UNITS or name in ("time_s", "size_bytes"):
            continue
        assert not any(w in o for o in opts for w in wordy), (where, opts, name)
        assert metavar not in ("TIME", "T", "S", "MS", "BYTES", "SIZE"), (where, opts, metavar)


def test_files_speak_the_same_units(tmp_path):
    """A machine description's sizes, the meters' trigger durations and chase's lists read
    corecast.parsing's units: the same values from the same spellings, the same refusals."""
    from corecast.collect.chase import parse_pattern, parse_sizes
    from corecast.meters.triggers import duration
    from corecast.sim.machine import parse_size

    for text in _size_spellings(65536):
        assert parse_size(text, "m.toml") == 65536
        assert parse_sizes(f"{text},1MiB", 64) == [65536, 1 << 20]
        assert parse_pattern(f"stride:{text}") == ("stride", 65536)
    for text in _spellings(0.5, P.TIME_UNITS, "s"):
        assert duration(text, "dwell") == pytest.approx(0.5, rel=1e-12)
    for text in BAD_SIZES:
        with pytest.raises(UserError, match="m.toml"):
            parse_size(text, "m.toml")
    for text in BAD_TIMES:
        with pytest.raises(ValueError, match="dwell"):
            duration(text, "dwell")


def test_each_mistake_names_the_value_and_the_bound():
    with pytest.raises(UserError, match=r"^--quantum: '1e308' is out of bounds: at most 10 s$"):
        P.time_s("1e308", "--quantum", high=10.0)
    with pytest.raises(UserError, match=r"^-T: '500ns' is out of bounds: at least 10ms$"):
        P.time_s("500ns", "-T", low=0.01)
    with pytest.raises(UserError, match=r"at most 720h"):
        P.time_s("1e308", "-T")                       # the time parser's own bound
    with pytest.raises(UserError, match=r"^--size: '2048TiB' is out of bounds: at most 1024TiB$"):
        P.size_bytes("2048TiB", "--size")
    with pytest.raises(UserError, match=r"^--frequency: '2THz' is not a frequency"):
        P.frequency_hz("2THz", "--frequency")
    with pytest.raises(UserError, match=r"at least 0$"):
        P.seed("-1", "--seed")
    assert P.count("1e6", "-n") == 1_000_000
    assert P.frequency_hz("2.5GHz") == P.frequency_hz("2500MHz") == P.frequency_hz("2.5e9") == 2.5e9
    assert P.rate_per_s("128/ms") == P.rate_per_s("128000/s") == P.rate_per_s("128000") == 128000.0
    assert P.rate_per_s("30/min") == pytest.approx(0.5)
    assert P.percentile("p99.9") == pytest.approx(0.999) and P.percentile("mean") is None
    assert P.fraction("0.13") == 0.13 and P.fraction("1", one=True) == 1.0
    with pytest.raises(UserError):
        P.fraction("1")


def test_a_bound_in_a_help_text_is_the_bound_applied():
    """sched's quantum says 1us to 10 s in its help: those two pass, one step past each fails."""
    for ok in ("1us", "10s"):
        assert _parse(["sched", "sim", "w", "--quantum", ok]).quantum == P.time_s(ok)
    for bad in ("999ns", "10.001s"):
        with pytest.raises(SystemExit):
            _parse(["sched", "sim", "w", "--quantum", bad])
