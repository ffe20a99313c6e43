"""Derived metrics of `corecast stat` (ipc=instr/cycles and the like): parsed safely from an
expression over event and virtual-counter names."""
from __future__ import annotations

import math
from dataclasses import dataclass

from typing import Any, Sequence

from ...errors import UserError
from ..events import abi
from ..events.spec import EventSpec



# ============================================================================================
# derived metrics

BUILTIN_METRICS = {
    "ipc": "instr / cycles",
    "cpi": "cycles / instr",
    "mpki": "1000 * llc_misses / instr",
    "miss_rate": "llc_misses / llc_refs",
    "branch_miss_rate": "branch_misses / branches",
    "stall_ratio": "backend_stalls / cycles",
    "utilization": "task_clock / interval_ns",
}
#: PMCTrack's fixed counters by their generic hardware event (config): the mnemonic each counts.
_FIXED_ALIASES = {1: "instr", 0: "cycles", 9: "ref_cycles"}


def aliases(e: EventSpec) -> tuple[str, ...]:
    """The mnemonic a PMCTrack fixed counter counts (pmc0 instr, pmc1 cycles, pmc2
    ref_cycles), so that a metric over those names (the built-in ipc, cpi) reads
    `-c pmc0,pmc1` as PMCTrack's users write it; no other event has one."""
    if e.origin == "pmctrack" and e.type == abi.PERF_TYPE_HARDWARE and e.config in _FIXED_ALIASES:
        return (_FIXED_ALIASES[e.config],)
    return ()


def _allowed_nodes() -> tuple[type, ...]:
    """The syntax a metric may use (ast is imported when a metric is parsed: for start-up time)."""
    import ast

    return (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div,
            ast.USub, ast.UAdd, ast.Constant, ast.Name, ast.Load, ast.Pow)


@dataclass
class Metric:
    name: str
    expr: str
    names: tuple[str, ...]
    _code: Any = None

    def evaluate(self, env: dict[str, float | None]) -> float | None:
        vals = {}
        for n in self.names:
            v = env.get(n)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return None
            vals[n] = v
        try:
            r = eval(self._code, {"__builtins__": {}}, vals)  # noqa: S307 -- AST checked below
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
        return float(r)


def parse_metric(text: str) -> Metric:
    """`NAME=EXPR` (or a built-in NAME: ipc, cpi, mpki, miss_rate, branch_miss_rate,
    stall_ratio, utilization). EXPR uses event names (mnemonics, pmcN, stall_*,
    backend_stalls = sum of the stall events), virtual counters, interval_ns, numbers,
    + - * / ** and parentheses."""
    name, eq, expr = text.partition("=")
    name = name.strip()
    if not eq:
        if name in BUILTIN_METRICS:
            expr = BUILTIN_METRICS[name]
        else:
            raise UserError(f"-m '{text}': write NAME=EXPR, or a built-in metric "
                            f"({', '.join(BUILTIN_METRICS)})")
    if not name.isidentifier():
        raise UserError(f"-m '{text}': metric name '{name}' must be an identifier")
    expr = expr.strip()
    if not expr:
        raise UserError(f"-m '{text}': empty expression")
    import ast

    allowed = _allowed_nodes()
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise UserError(f"-m '{text}': cannot parse the expression '{expr}'") from None
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise UserError(f"-m '{text}': only numbers, names, + - * / ** and parentheses are allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise UserError(f"-m '{text}': '{node.value!r}' is not a number")
        if isinstance(node, ast.Name):
            names.append(node.id)
    return Metric(name, expr, tuple(dict.fromkeys(names)), compile(tree, "<metric>", "eval"))


def check_metric_names(metrics: Sequence[Metric], sets: Sequence[Sequence[EventSpec]],
                       virtual: Sequence[str]) -> None:
    known = {"interval_ns"} | set(virtual)
    for s in sets:
        for e in s:
            known |= {e.ident, e.label, *aliases(e)}
            if e.name.startswith("stall_"):
                known.add("backend_stalls")
    for m in metrics:
        missing = [n for n in m.names if n not in known]
        if missing:
            raise UserError(f"-m {m.name}={m.expr}: unknown name(s) {', '.join(missing)} "
                            f"(events and virtual counters here: {', '.join(sorted(known))})")
