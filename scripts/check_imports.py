#!/usr/bin/env python3
"""The import directions of docs/DESIGN.md, checked from the source (nothing is imported).

    python scripts/check_imports.py [SRC_ROOT] [--package corecast]

reads every module of the package under SRC_ROOT (default: src/ beside this script), collects
what each imports -- at the top of the file, inside functions and under TYPE_CHECKING alike:
an import anywhere is an arrow -- and fails (exit status 1, one line per finding) on

- an import loop: modules that import each other, directly or through others (importing
  a.b.c runs the __init__ of a.b first, so that counts as importing a.b too);
- an upward import: a module importing a layer above its own.

The layers, top to bottom; a module may import its own layer and any layer below it:

    cli       cli/, __main__: parse arguments, call the API, hand the result to a renderer
    serve     serve/: the web dashboard, on top beside cli (but below it: it never imports cli)
    report    report/: tables, plots, HTML, the --json documents; renders what collectors and
              models produce
    collect   collect/, meters/, chase/, region.py: how numbers are obtained (collectors,
              daemons, benchmarks; region.py is the region API programs import)
    model     model/, sim/, sched/: models and simulators, pure functions over Datasets and
              descriptions; they never import a collector (sched/enforce/, the enforcing mode
              that reads /proc and pins real threads, is a collector)
    base      dataset, store, target, machines, errors, parsing, native, messages, outputs: what every layer
              shares (outputs: the one writer of every file corecast writes)

Nothing imports cli, since nothing is above it. Run by tests/test_import_directions.py, so
`make test` (and CI, .ci/run) fails on a loop or an upward import.
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

#: The layers, top first: a module may import its own layer and those after it.
ORDER = ("cli", "serve", "report", "collect", "model", "base")

#: The layer of a module, by its first name under the package; any other module is "base".
LAYERS: dict[str, str] = {
    "cli": "cli", "__main__": "cli",
    "serve": "serve",
    "report": "report",
    "collect": "collect", "meters": "collect", "chase": "collect", "region": "collect",
    "model": "model", "sim": "model", "sched": "model",
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    implicit: bool = False    # a package whose __init__ runs because a module below it is imported


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for p in sorted((root / package).rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _resolve(name: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute module named by a relative `from` import in module `name`."""
    base = name.split(".") if is_package else name.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports(name: str, path: Path, mods: dict[str, Path], package: str) -> list[Edge]:
    """The modules of the package that `name` imports, with the line of each import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    out: list[Edge] = []

    def add(target: str, line: int) -> None:
        # the deepest module of the package that the dotted name reaches
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if not target or target == name:
            return
        out.append(Edge(name, target, line))
        # Importing a.b.c runs the __init__ of a.b first: an arrow to every package above the
        # target that is not also above the importer (those are already running).
        up = target.rpartition(".")[0]
        while up and not (name + ".").startswith(up + "."):
            out.append(Edge(name, up, line, implicit=True))
            up = up.rpartition(".")[0]

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == package or a.name.startswith(package + "."):
                    add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve(name, is_package, node.level, node.module)
            elif node.module and (node.module == package or node.module.startswith(package + ".")):
                base = node.module
            else:
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                add(sub if sub in mods else base, node.lineno)
    return out


#: Sub-packages whose layer differs from their package's, by their dotted name under corecast.
SUBLAYERS: dict[str, str] = {
    "sched.enforce": "collect",     # sched's enforcing mode reads /proc and sysfs, counts with perf
    "sim.online": "collect",        # runs the program under QEMU (collect.procs supervises it)
    "sim.capture": "collect",       # runs the program under QEMU or valgrind
}


def layer(module: str) -> str:
    parts = module.split(".")
    for sub, lay in SUBLAYERS.items():
        if ".".join(parts[1:1 + sub.count(".") + 1]) == sub:
            return lay
    return LAYERS.get(parts[1], "base") if len(parts) > 1 else "base"


def may_import(source: str, target: str) -> bool:
    return ORDER.index(layer(source)) <= ORDER.index(layer(target))


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def check(root: Path, package: str = "corecast") -> list[str]:
    """Every finding, one line each; empty when the package keeps its directions."""
    mods = modules(root, package)
    edges = [e for name, path in mods.items() for e in imports(name, path, mods, package)]
    problems: list[str] = []
    for e in edges:
        if not e.implicit and not may_import(e.source, e.target):
            problems.append(f"{mods[e.source].relative_to(root)}:{e.line}: upward import: {e.source} "
                            f"({layer(e.source)}) imports {e.target} ({layer(e.target)})")
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for e in edges:
        graph[e.source].add(e.target)
    for comp in loops(graph):
        members = set(comp)
        where = sorted({f"{e.source} -> {e.target} (line {e.line})" for e in edges
                        if e.source in members and e.target in members})
        problems.append(f"import loop among {', '.join(comp)}: " + "; ".join(where))
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent / "src"))
    ap.add_argument("--package", default="corecast")
    args = ap.parse_args(argv)
    problems = check(Path(args.root), args.package)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
