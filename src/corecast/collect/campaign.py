"""Setting a campaign up: `prepare` checks a new campaign's settings, creates its file and
returns its runner; `resume` opens an interrupted one to run what it has not recorded yet,
with its own settings. The runs themselves are `corecast.collect.runner`'s; the settings of
each source (--throughput, --plugin, --no-shim, --events, ...) are declared by the source
(`corecast.collect.runsources`).

The command a campaign runs is stored twice -- in its metadata (what `info` and the summary
show) and in its settings (what --resume runs); a file where they disagree was altered and is
refused, so what is shown is always what is run.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

from ..errors import UserError
from ..store import Campaign, RunRecord
from . import plugins as plug
from . import procs
from . import runsources
from .runner import CampaignConfig, Reporter, Runner, find_program, placeholders, plan
from .source import Host
from .topology import machine_info, order_cpus, parse_core_counts, read_topology


def parse_env(items: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        name, eq, value = it.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserError(f"--env: '{it}' is not NAME=VALUE")
        out[name] = value
    return out


def _watched(camp: Campaign) -> Campaign:
    """The empty journal corecast made beside the campaign (store: `held_files`) named to
    corecast-sentinel, so that a SIGKILL of measure does not leave it behind; forgotten at close."""
    try:
        for q in camp.held_files:
            procs.sentinel().tell("file", q)
            camp.after_close.append(lambda q=q: procs.untrack(q))
    except BaseException:
        camp.close()
        raise
    return camp


class Prepared:
    """A campaign ready to run: its file is open (and locked) and its plan is known."""

    def __init__(self, runner: Runner, campaign: Campaign):
        self.runner = runner
        self.campaign = campaign

    def run(self) -> list[RunRecord]:
        return self.runner.run()

    def recorded(self) -> int:
        """The measured runs recorded so far; warm-ups are not runs of the data (`info` and
        `predict` leave them out: counting them said "2 run(s) are in x.db" of a campaign that
        `info` then called empty)."""
        return self.campaign.run_count(warmups=False)

    def close(self) -> None:
        self.campaign.close()


def validate(cfg: CampaignConfig) -> None:
    """Refuse, before anything runs, what would fail every run: every source's settings
    (plugins, the throughput regex, the shim missing, ...), options out of range, the program
    not found."""
    runsources.validate(cfg)
    if cfg.timeout is not None and not cfg.timeout > 0:
        raise UserError("--timeout must be a positive number of seconds")
    if cfg.threads_per_core < 1:
        raise UserError("--threads-per-core must be at least 1")
    s = plan(cfg.cores, cfg.reps, cfg.warmup)[0]
    sub = placeholders(s.cores, cfg.threads_per_core, s.repetition)
    argv0 = plug.substitute(cfg.command[0], sub)
    env = dict(os.environ)
    env.update({k: plug.substitute(v, sub) for k, v in cfg.env.items()})
    prog = find_program(argv0, env, cfg.cwd)
    if prog is None:
        where = "" if "/" in argv0 else " (not in PATH, nor a bundled corecast workload)"
        raise UserError(f"program '{argv0}' not found{where}")
    # a path that names something which cannot be run failed every run as `not run` (exit 1)
    if os.path.isdir(prog):
        raise UserError(f"program '{argv0}' is a directory, not a program")
    if not os.access(prog, os.X_OK):
        raise UserError(f"program '{argv0}' is not executable (chmod +x it, or name its interpreter: "
                        f"-- sh {argv0} ...)")


#: The keywords of `prepare` that are not a source's option.
CORE_OPTIONS = ("cores", "reps", "warmup", "timeout", "order", "env", "threads_per_core")


def prepare(command: Sequence[str], *, output: str, reporter: Reporter | None = None,
            cores: str | None = None, reps: int | None = None, warmup: int | None = None,
            timeout: float | None = None, order: str | None = None, env: Sequence[str] | None = None,
            threads_per_core: int | None = None, cwd: str | None = None, **source_options: Any) -> Prepared:
    """Check everything, create the campaign file, and return the runner for it.
    `source_options`: the sources' options by their argparse names (throughput, plugin,
    no_shim, events, ...; see runsources.options()); None or absent: the default."""
    reporter = reporter or Reporter()
    if not command:
        raise UserError("no command to measure")
    declared = runsources.options()
    unknown = set(source_options) - {o.dest for o in declared}
    if unknown:
        raise TypeError(f"prepare() got unknown options {sorted(unknown)}")
    topo = read_topology()
    cpu_order = order_cpus(topo, order or "socket")
    counts = parse_core_counts("pow2" if cores is None else cores, len(cpu_order))
    cfg = CampaignConfig(command=list(command), cores=counts, reps=3 if reps is None else reps,
                         warmup=1 if warmup is None else warmup, timeout=timeout, order=order or "socket",
                         cpu_order=cpu_order, env=parse_env(env),
                         threads_per_core=1 if threads_per_core is None else threads_per_core,
                         cwd=str(Path(cwd or os.getcwd()).resolve()),
                         options={o.key: o.setting(source_options.get(o.dest)) for o in declared})
    plan(cfg.cores, cfg.reps, cfg.warmup)
    validate(cfg)
    machine = machine_info(topo)
    host = Host(machine.nominal_freq_hz)
    sources = runsources.create(cfg, host)          # a bad --events is refused before the file exists
    camp = _watched(Campaign.create(output, command=cfg.command, config=cfg.to_dict(), machine=machine.to_dict(),
                                    topology=topo.to_dict()))
    try:
        runner = Runner(cfg, camp, reporter=reporter, sources=sources, host=host)
    except BaseException:
        camp.close()
        raise
    return Prepared(runner, camp)


#: What each stored setting must be (a damaged campaign file is refused, not run); the
#: sources' settings add theirs (`Option.kind`, `Option.items`).
_CONFIG_KINDS: dict[str, Any] = {
    "command": list, "cores": list, "reps": int, "warmup": int, "timeout": (int, float, type(None)),
    "order": str, "cpu_order": list, "env": dict, "threads_per_core": int, "cwd": str, "grace_s": (int, float)}
_ITEMS: dict[str, Any] = {"command": str, "cores": int, "cpu_order": int}


def _stored_config(d: Any, output: str) -> CampaignConfig:
    """The settings a campaign file records, checked kind by kind."""
    def damaged(what: str) -> UserError:
        return UserError(f"{output}: damaged campaign file: its settings (metadata 'config') {what}; "
                         "start a new campaign")
    kinds = dict(_CONFIG_KINDS, **{o.key: o.kind for o in runsources.options()})
    items = dict(_ITEMS, **{o.key: o.items for o in runsources.options() if o.items is not None})
    for key, kind in kinds.items():
        if key not in d:
            if key in ("command", "cores"):
                raise damaged(f"have no '{key}'")
            continue
        v = d[key]
        bad = not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool)
        if not bad and key in items:
            bad = not all(isinstance(x, items[key]) and not isinstance(x, bool) for x in v)
        if not bad and key == "env":
            bad = not all(isinstance(x, str) for kv in v.items() for x in kv)
        if bad:
            raise damaged(f"give '{key}' as {json.dumps(v)[:40]}")
    if not all(c > 0 for c in d["cores"]) or d.get("reps", 1) < 0 or d.get("warmup", 0) < 0:
        raise damaged("have a count out of range")
    return CampaignConfig.from_dict(d)


def _one_line(argv: Sequence[str], limit: int = 120) -> str:
    """A command for a one-line message: line breaks escaped, at most `limit` characters."""
    text = json.dumps(" ".join(argv))[1:-1]
    return text if len(text) <= limit else text[:limit - 1] + "…"


def trusted_to_run(path: str | Path) -> None:
    """Resuming runs the command and the environment (LD_PRELOAD included) recorded in the
    campaign file, as the user resuming: a file another user owns, or one that others may
    write, could have had any command put in it, so it is refused with one line. (`info`
    shows what a campaign would run; a copy of it the user owns can be resumed.)"""
    st = os.stat(path)
    if st.st_uid != os.geteuid():
        raise UserError(f"{path}: a campaign of another user (uid {st.st_uid}): resuming runs the command recorded "
                        "in it, so it is not resumed (look at it with `corecast info`; a copy of your own can be)")
    if st.st_mode & 0o022:
        who = "its group and others" if st.st_mode & 0o022 == 0o022 else ("others" if st.st_mode & 0o002 else
                                                                             "its group")
        raise UserError(f"{path}: {who} may write to this campaign file (mode {st.st_mode & 0o777:o}): resuming runs "
                        f"the command recorded in it, so it is not resumed (`chmod go-w {path}` if that is "
                        "yours to decide)")


def resume(output: str, command: Sequence[str] | None = None, *, reporter: Reporter | None = None) -> Prepared:
    """Open an interrupted campaign to run what it has not recorded yet, with its own settings
    (only a file of the user's own that no one else may write: `trusted_to_run`)."""
    reporter = reporter or Reporter()
    camp = _watched(Campaign.open(output))
    try:
        trusted_to_run(camp.path)
        meta = camp.meta()
        cfg = _stored_config(meta.get("config") or {}, output)
        if not cfg.command:
            raise UserError(f"{output}: the campaign records no command")
        if "command" in meta and meta["command"] != cfg.command:
            raise UserError(f"{output}: damaged campaign file: its metadata 'command' (`{_one_line(meta['command'])}`) "
                            f"and its settings' command (`{_one_line(cfg.command)}`) disagree; start a new campaign")
        if command and list(command) != cfg.command:
            raise UserError(f"{output}: the campaign measures `{' '.join(cfg.command)}`, not `{' '.join(command)}` "
                            "(drop the command to resume, or start a new campaign)")
        usable = set(read_topology().cpus)
        missing = [c for c in cfg.cpu_order[:max(cfg.cores)] if c not in usable]
        if missing:
            raise UserError(f"{output}: the campaign runs on CPU {missing[0]}, which is not usable here")
        validate(cfg)
        machine = machine_info()
        old = meta.get("machine") or {}
        if old.get("hostname") not in (None, machine.hostname) or old.get("cpu_model") not in (None, machine.cpu_model):
            reporter.notice(f"resuming on a different machine ({machine.hostname}, {machine.cpu_model}) than the "
                            f"campaign started on ({old.get('hostname')}, {old.get('cpu_model')})")
        host = Host(old.get("nominal_freq_hz") or machine.nominal_freq_hz)
        runner = Runner(cfg, camp, reporter=reporter, sources=runsources.create(cfg, host), host=host)
    except BaseException:
        camp.close()
        raise
    return Prepared(runner, camp)
