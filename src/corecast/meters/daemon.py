"""`corecast meters`: the daemon that keeps the blackboard.

Set-up, in the order in which mistakes are found (each one line and exit status 2): the
options, the trigger file, the meters (an unknown name; a trigger on a meter this machine
cannot give), the watched process, the HTTP port, the blackboard's name (taken by a live
daemon). Then the C loop (engine.py) ticks; between its calls (every ~100 ms, or at once after
a trigger or advice change) Python runs the trigger actions, follows the watched process's
threads, writes the recording, and checks the duration and signals (SIGINT, SIGTERM, SIGHUP
end the daemon cleanly: the board is marked stopped and removed, the recording completed).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from ..collect import sources, topology
from ..collect.procs import Supervised
from ..collect.events import abi
from ..collect.perf.counting import open_counters
from ..collect.stat.backend import PerfBackend
from ..errors import UserError
from ..memprofile import read_profile
from ..parsing import listen_address
from . import board as B
from . import probe as probe_mod
from . import writer as W
from . import layout as L
from . import triggers as T
from .catalog import BY_NAME, Env, Instance, parse_meters, plan
from .engine import Engine, perf_readings
from .exporter import Exporter
from .record import Recorder
from .tree import Tree, build

MIN_INTERVAL, MAX_INTERVAL = 0.001, 1.0
MAX_WINDOW_TICKS = 100_000
BATCH_S = 0.1          # at most this long in C between two looks from Python ...
QUIET_BATCH_S = 0.5    # ... or this long when Python has nothing to follow between them (no --pid
                       # threads, no recording, no trigger command running): events and signals
                       # bring the loop back at once anyway, and each look costs the daemon ~50 us


@dataclass
class Options:
    interval_s: float = 0.01
    window_s: float = 0.1
    meters: str | None = None
    triggers: str | None = None
    blackboard: str = "default"
    listen: str | None = None
    record: str | None = None
    duration_s: float | None = None
    pid: int | None = None
    max_threads: int = 64
    app_slots: int = 64
    app_mode: int = 0o660
    probe_cpu: int | None = None          # default: the node's last CPU
    probe_period_s: float = 1.0
    memory_profile: str | None = None     # the idle latency (corecast chase --profile, calibrate)


def check(opts: Options) -> None:
    if not MIN_INTERVAL - 1e-12 <= opts.interval_s <= MAX_INTERVAL + 1e-12:
        raise UserError(f"--interval: {opts.interval_s:g} s is outside 1ms ... 1s")
    if opts.window_s < opts.interval_s - 1e-12:
        raise UserError(f"--window ({opts.window_s:g} s) is shorter than --interval ({opts.interval_s:g} s)")
    if opts.window_s / opts.interval_s > MAX_WINDOW_TICKS:
        raise UserError(f"--window: at most {MAX_WINDOW_TICKS} intervals")
    if opts.duration_s is not None and opts.duration_s <= 0:
        raise UserError("--duration must be > 0")
    if opts.pid is not None and not os.path.isdir(f"/proc/{opts.pid}"):
        raise UserError(f"--pid {opts.pid}: no such process")
    if not 1 <= opts.max_threads <= 4096:
        raise UserError("--max-threads: 1 to 4096")
    B.check_name(opts.blackboard)


def event_status(backend: Any, cpu: int) -> Callable[[Any], str | None]:
    """Whether an event can be counted on `cpu` through `backend`: None, or why not."""
    def status(spec: Any) -> str | None:
        try:
            h = backend.open([spec], -1, cpu, False, False, False)
        except UserError as err:
            return str(err)
        try:
            v = h.read()[0]
        finally:
            h.close()
        return None if v.status == "ok" else f"{spec.name}: {v.status}" + (f" ({v.message})" if v.message else "")
    return status


def meter_plan(meters: str | None, pid: int | None = None, backend: Any = None) -> list[Instance]:
    """The meters this machine gives (and why not the others), without starting a daemon."""
    if pid is not None and not os.path.isdir(f"/proc/{pid}"):
        raise UserError(f"--pid {pid}: no such process")
    tree = build(pid=pid, max_threads=1 if pid else 0)
    env = Env(status=event_status(backend or PerfBackend(), tree.cpus[0]))
    return plan(tree, parse_meters(meters, pid), env)


class Daemon:
    def __init__(self, opts: Options, backend: Any = None, env: Env | None = None, tree: Tree | None = None,
                 log: TextIO = sys.stderr):
        check(opts)
        self.opts, self.log_to = opts, log
        self.backend = backend or PerfBackend()
        self.tree = tree or build(pid=opts.pid, max_threads=opts.max_threads if opts.pid else 0)
        self.env = env or Env()
        if self.env.status is None:                  # ask the backend
            self.env.status = event_status(self.backend, self.tree.cpus[0])
        wanted = parse_meters(opts.meters, opts.pid)
        defs, policy = T.load(opts.triggers) if opts.triggers else ([], T.Policy())
        where = opts.triggers or "triggers"
        for d in defs:
            m = BY_NAME.get(d.meter)
            if m is None:
                raise UserError(f"{where}: trigger '{d.name}': unknown meter '{d.meter}' (known: {', '.join(BY_NAME)})")
            if m.group == "process" and opts.pid is None:
                raise UserError(f"{where}: trigger '{d.name}': meter '{d.meter}' needs --pid PID")
            if m not in wanted:
                wanted.append(m)
        self.probe = self._probe(wanted)
        self.instances: list[Instance] = plan(self.tree, wanted, self.env)
        self.triggers = T.expand(defs, self.tree, where)
        self.rec_of = {(i.meter.name, i.scope.name): k for k, i in enumerate(self.instances)}
        for t in self.triggers:
            k = self.rec_of.get((t.definition.meter, t.scope.name))
            if k is None:
                raise UserError(f"{where}: trigger '{t.name}': meter '{t.definition.meter}' has no value at scope "
                                f"'{t.scope.name}' (it exists at: {', '.join(BY_NAME[t.definition.meter].levels)})")
            if not self.instances[k].available:
                raise UserError(f"{where}: trigger '{t.name}': meter {t.definition.meter} at {t.scope.name} is "
                                f"{self.instances[k].source}")
        self.policy = policy
        self.advice_scopes = [self.tree.node] + [s for s in dict.fromkeys(
            t.scope for t in self.triggers if t.definition.advise) if s.kind != "node"]
        self.exporter = self.writer = self.engine = self.reader = self.recorder = None
        self.handles: list[tuple[Any, list[tuple[str, int]]]] = []
        self.commands: list[tuple[str, Supervised]] = []
        self.stopping = False
        self.slots: dict[int, int] = {}        # slot -> tid
        self.slot_fds: dict[int, int] = {}
        self._said: set[str] = set()
        self._t0: float | None = None
        self._next_row = 0.0
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ set-up
    def _probe(self, wanted: list) -> probe_mod.Probe | None:
        """The memory-latency probe when a probe meter is wanted and chase's kernel is here."""
        o = self.opts
        if not any(d.group == "probe" for d in wanted):
            return None
        why = probe_mod.unavailable()
        if why:
            self.env.probe_reason = why
            return None
        cpu = self.tree.cpus[-1] if o.probe_cpu is None else o.probe_cpu
        if cpu not in self.tree.cpus:
            raise UserError(f"--probe-cpu {cpu}: not an online CPU (CPUs: {self.tree.node.cpus_text})")
        idle, where = None, ""
        if o.memory_profile:
            prof = read_profile(o.memory_profile)
            idle = prof.idle_latency_ns or prof.dram_latency_ns
            if not idle:
                raise UserError(f"--memory-profile {o.memory_profile}: it has no idle (or DRAM) latency")
            where = f"{'the' if prof.idle_latency_ns else 'the DRAM latency of the'} profile {o.memory_profile}"
        p = probe_mod.Probe(cpu, o.probe_period_s, idle, where)
        self.env.probe_source = p.source
        return p

    def _layout(self) -> W.Layout:
        scopes = [W.scope_struct(s.name, s.kind, s.parent, s.cpus, s.cpus_text) for s in self.tree.scopes]
        meters = [W.meter_struct(i.meter.name, i.scope.name, i.scope.index, i.meter.unit, i.quality, i.meter.kind,
                                 i.has_total, i.meter.total_unit if i.has_total else "", i.source)
                  for i in self.instances]
        adv_index = {s.name: k for k, s in enumerate(self.advice_scopes)}
        trigs = [W.trigger_struct(t.name, t.definition.meter, t.scope.name, self.rec_of[(t.definition.meter,
                                  t.scope.name)], t.scope.index, t.definition.low, t.definition.high,
                                  round(t.definition.dwell_s * 1e9),
                                  adv_index.get(t.scope.name, -1) if t.definition.advise else -1, _actions(t))
                 for t in self.triggers]
        interval = self.policy.interval_s or self.opts.window_s
        advice = [W.advice_struct(s.name, s.index, self.policy.min_workers, self._max_workers(s), round(interval * 1e9),
                                  self.policy.policy) for s in self.advice_scopes]
        return W.Layout(scopes, meters, trigs, advice)

    def _max_workers(self, scope) -> int:
        n = self.policy.max_workers or len(scope.cpus) or len(self.tree.cpus)
        return max(n, self.policy.min_workers)

    def _start(self) -> None:
        o = self.opts
        if o.listen is not None:
            host, port = listen_address(o.listen)
            self.exporter = Exporter(host, port, lambda: self.reader.snapshot(),
                                     app_path=Path(f"{B.board_path(o.blackboard)}.app"))
        interval_ns, window_ns = round(o.interval_s * 1e9), round(o.window_s * 1e9)
        self.writer = W.Writer.create(o.blackboard, self._layout(), interval_ns, window_ns, o.app_slots, o.app_mode)
        self.writer.say = self.say            # subscribers refused: in the daemon's own log
        if self.writer.replaced:
            self.say(self.writer.replaced)
        self.engine = Engine(self.writer.base, interval_ns, window_ns)
        fds = self.perf_fds = self._open_perf()
        for k, inst in enumerate(self.instances):
            if inst.available:
                self.engine.add_instance(k, inst, fds)
        for k, t in enumerate(self.triggers):
            d = t.definition
            self.engine.add_trigger(k, self.rec_of[(d.meter, t.scope.name)], d.low, d.high, round(d.dwell_s * 1e9))
        for k, s in enumerate(self.advice_scopes):
            linked = [j for j, t in enumerate(self.triggers) if t.definition.advise and t.scope.name == s.name]
            self.engine.add_advice(k, self.policy.min_workers, self._max_workers(s),
                                   round((self.policy.interval_s or o.window_s) * 1e9), self.policy.policy == "one",
                                   linked)
        self.reader = B.Board.open(o.blackboard)
        if o.record:
            self.recorder = Recorder(o.record, self.reader.snapshot(), topology.machine_info(self.tree.topology),
                                     " ".join(["corecast", "meters"] + sys.argv[2:]), len(self.tree.cpus))
        self.python_fed = bool(self.handles) and any(fd is None for fd in fds.values())
        if self.probe is not None and any(i.available and i.meter.group == "probe" for i in self.instances):
            self.probe.start()

    def _open_perf(self) -> dict[tuple[str, int], Any]:
        """Open every perf counter the instances read, per CPU; (event, cpu) -> its descriptor,
        None when the backend has none (read in Python: set_external each tick), or (leader fd,
        position, members, words per member) for the software events of a CPU, opened as one
        group read in one call: reading another CPU's counters costs an inter-processor
        interrupt per read (~13 us on this project's VM), so one read for the CPU's three
        software events instead of three. Hardware events stay apart (a group is scheduled on
        the PMU all or none)."""
        want: dict[int, list[str]] = {}
        for inst in self.instances:
            if not inst.available:
                continue
            for inp in inst.num + inst.den:
                if inp.file[0] == "perf" and inp.file[1] not in want.setdefault(inp.file[2], []):
                    want[inp.file[2]].append(inp.file[1])
        fds: dict[tuple[str, int], Any] = {}
        for cpu, names in sorted(want.items()):
            pairs = [(n, self.env.specs[n]) for n in names]
            soft = [(n, s) for n, s in pairs if s.type == abi.PERF_TYPE_SOFTWARE]
            if isinstance(self.backend, PerfBackend) and len(soft) > 1:
                g = open_counters([s for _, s in soft], pid=-1, cpu=cpu, group_read=True)
                opened = g.opened
                if len(opened) == len(soft):
                    self.handles.append((g, [(n, cpu) for n, _ in soft]))
                    for (n, _), c in zip(soft, g.counters):
                        fds[(n, cpu)] = (opened[0].fd, c.group_index, len(opened), c.words())
                    pairs = [p for p in pairs if p not in soft]
                else:
                    g.close()
            if not pairs:
                continue
            h = self.backend.open([s for _, s in pairs], -1, cpu, False, False, True)
            counters = getattr(h, "counters", None)
            keys = [(n, cpu) for n, _ in pairs]
            self.handles.append((h, keys))
            for j, key in enumerate(keys):
                fds[key] = counters[j].fd if counters is not None else None
        return fds

    # ------------------------------------------------------------------ running
    def say(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"corecast meters: {stamp} {text}", file=self.log_to, flush=True)

    def step(self, t_ns: int) -> None:
        """One tick at `t_ns`, the perf counts read in Python (a backend without descriptors),
        then what Python does between ticks."""
        if self.python_fed:
            for (name, cpu), (raw, en, run, ok) in perf_readings(self.handles).items():
                idx = self.engine.perf.get((name, cpu))
                if idx is not None:
                    self.engine.set_external(idx, raw, en or 1, run, ok)
        self.engine.tick(t_ns)
        self.after(t_ns * 1e-9)

    def run(self) -> int:
        o = self.opts
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            if self.exporter:
                self.exporter.start()
                self.say(f"serving http://{_host(self.exporter.host)}:{self.exporter.port}/metrics")
            self.writer.running()
            self.say(f"blackboard {self.writer.path}: {sum(i.available for i in self.instances)} meters live, "
                     f"{sum(not i.available for i in self.instances)} unavailable; {len(self.triggers)} triggers; "
                     f"every {o.interval_s * 1e3:g} ms, window {o.window_s * 1e3:g} ms")
            t0 = time.monotonic()
            self.after(t0)
            busy = max(1, round(BATCH_S / o.interval_s))
            quiet = max(1, round(max(BATCH_S, min(QUIET_BATCH_S, o.probe_period_s / 2)) / o.interval_s))
            while not self.stopping:
                if self.python_fed:
                    deadline = t0 + (int((time.monotonic() - t0) / o.interval_s) + 1) * o.interval_s
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    self.step(time.monotonic_ns())
                else:
                    follow = o.pid is not None or self.recorder is not None or bool(self.commands)
                    left = None if o.duration_s is None else o.duration_s - (time.monotonic() - t0)
                    batch = busy if follow or (left is not None and left < QUIET_BATCH_S) else quiet
                    self.engine.run(batch)
                    self.after(time.monotonic())
                if o.duration_s is not None and time.monotonic() - t0 >= o.duration_s:
                    break
        finally:
            # close under our handler: a second signal while it joins the threads (`timeout`
            # signals the daemon and then its process group; a second Ctrl-C) only stops again.
            # Restored first, it raised KeyboardInterrupt there and left the board behind.
            try:
                self.close()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
        return 0

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def after(self, now_s: float) -> None:
        for ev in self.engine.events():
            if ev.kind == "trigger":
                self._trigger_changed(ev)
            else:
                s = self.advice_scopes[ev.index]
                self.say(f"allowed_workers@{s.name}: {ev.previous} -> {ev.state} ({int(ev.value)} trigger(s) high)")
        if self.opts.pid is not None:
            self._follow_threads()
        if self.probe is not None:
            self._probe_values()
        self.commands = [(n, p) for n, p in self.commands if not self._reaped(n, p)]
        if self._t0 is None:
            self._t0, self._next_row = now_s, now_s + self.opts.window_s
        if self.recorder is not None and now_s >= self._next_row - 1e-9:
            self.recorder.add(round(now_s - self._t0, 6), self.reader.snapshot())
            while self._next_row <= now_s + 1e-9:
                self._next_row += self.opts.window_s

    def _probe_values(self) -> None:
        r = self.probe.latest()
        if self.probe.error and "probe" not in self._said:
            self._said.add("probe")
            self.say(f"the memory-latency probe stopped: {self.probe.error}")
        for name, value in (("probe_ratio", None if r is None or r.ratio is None else r.ratio * 1e6),
                            ("probe_latency", None if r is None else r.latency_ns * 1e3),
                            ("probe_cost", None if r is None else r.cost * 1e6)):
            idx = self.engine.external.get(name)
            if idx is not None:
                self.engine.set_external(idx, round(value or 0), ok=value is not None and not self.probe.error)

    def _trigger_changed(self, ev) -> None:
        t = self.triggers[ev.index]
        d = t.definition
        new, old = L.STATES.get(ev.state, "?"), L.STATES.get(ev.previous, "?")
        self.writer.notify()
        if d.log:
            cmp_ = f"> high {d.high:g}" if new == "high" else f"< low {d.low:g}"
            self.say(f"trigger {d.name} at {t.scope.name}: {old} -> {new} ({d.meter} avg {ev.value:.4g} {cmp_} "
                     f"for {d.dwell_s:g} s)")
        if d.command:
            env = dict(os.environ, CORECAST_TRIGGER=d.name, CORECAST_METER=d.meter, CORECAST_SCOPE=t.scope.name,
                       CORECAST_STATE=new, CORECAST_PREVIOUS_STATE=old, CORECAST_VALUE=repr(ev.value),
                       CORECAST_LOW=repr(d.low), CORECAST_HIGH=repr(d.high), CORECAST_BLACKBOARD=self.opts.blackboard,
                       CORECAST_TIME=f"{time.time():.6f}")
            # through corecast-launch, in a process group of its own (the terminal's Ctrl-C is
            # the daemon's): what it leaves running is killed when it ends, and its whole tree
            # when the daemon stops or dies, SIGKILL included (it outlived the daemon)
            try:
                p = Supervised(["/bin/sh", "-c", d.command], env=env, stdin=os.devnull)
                p.start()
                if p.exec_error is not None:
                    p.close()
                    self.say(f"trigger {d.name}: cannot run its command: {os.strerror(p.exec_error)}")
                else:
                    self.commands.append((d.name, p))
            except UserError as err:
                self.say(f"trigger {d.name}: cannot run its command: {err}")

    def _reaped(self, name: str, p: Supervised) -> bool:
        rc = p.poll()
        if rc is None:
            return False
        if rc != 0:
            self.say(f"trigger {name}: its command exited with status {rc}")
        return True

    def _stop_commands(self, grace_s: float = 2.0) -> None:
        """The trigger commands still running when the daemon stops: given `grace_s` to end on
        their own, then stopped (SIGTERM, SIGKILL) with their whole tree."""
        deadline = time.monotonic() + grace_s
        for name, p in self.commands:
            if not self._reaped(name, p):
                p.poll(max(0.0, deadline - time.monotonic()))
            if not p.ended:
                self.say(f"trigger {name}: its command was still running; stopped")
                p.stop(grace=1.0)
            p.close()
        self.commands = []

    def _follow_threads(self) -> None:
        pid = self.opts.pid
        tids = sources.list_threads(pid)
        if not tids and "ended" not in self._said:
            self._said.add("ended")
            self.say(f"process {pid} ended; its meters have no value from now on")
        live = set(tids)
        slot_recs = {s.slot: [k for k, i in enumerate(self.instances) if i.scope is s and i.available]
                     for s in self.tree.of_kind("thread")}
        for slot, tid in list(self.slots.items()):
            if tid not in live:
                self._assign(slot, None, slot_recs[slot])
        followed = set(self.slots.values())
        free = [s for s in sorted(slot_recs) if s not in self.slots]
        for tid in tids:
            if tid in followed:
                continue
            if not free:
                if "slots" not in self._said:
                    self._said.add("slots")
                    self.say(f"process {pid} has more threads than --max-threads {self.opts.max_threads}: "
                             "the others are not followed")
                break
            slot = free.pop(0)
            self._assign(slot, tid, slot_recs[slot])
        idx = self.engine.external.get("threads")
        if idx is not None:
            self.engine.set_external(idx, len(self.slots), ok=bool(tids))

    def _assign(self, slot: int, tid: int | None, recs: list[int]) -> None:
        old = self.slot_fds.pop(slot, None)
        fd = -1
        if tid is not None:
            try:
                fd = os.open(f"/proc/{self.opts.pid}/task/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return
            self.slots[slot] = tid
            self.slot_fds[slot] = fd
        else:
            self.slots.pop(slot, None)
        self.engine.set_thread(slot, fd)
        for k in recs:
            self.engine.reset_meter(k, tid or 0)
        if old is not None:
            os.close(old)

    # ------------------------------------------------------------------ the end
    def close(self) -> None:
        if getattr(self, "commands", None):
            self._stop_commands()
        if getattr(self, "probe", None) is not None:
            self.probe.stop()
            self.probe = None
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        if self.writer is not None:
            self.writer.stop()
            self.writer = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        for h, _k in self.handles:
            h.close()
        self.handles = []
        for fd in self.slot_fds.values():
            os.close(fd)
        self.slot_fds = {}


def _actions(t: T.Trigger) -> str:
    d = t.definition
    return ",".join(["blackboard", "notify"] + (["log"] if d.log else []) + (["command"] if d.command else []))


def _host(h: str) -> str:
    return f"[{h}]" if ":" in h else h
