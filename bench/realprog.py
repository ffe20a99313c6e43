"""Real programs through `corecast measure` and `corecast predict`: the program list
(bench/real_programs.toml), the inputs each needs, one campaign and its prediction.

Used by bench/real_programs.py (the table), tests/test_real_programs.py (the checks at 1 and 2
cores) and meant for a many-core machine's ground-truth kit: `campaign(..., cores=[1, 2, 4, 8,
16], scale=8)` runs any program of the list at any core counts.

    import realprog
    progs = realprog.load()                       # every program, in the file's order
    p = progs["xz"]
    work = realprog.prepare(p, tmpdir, scale=1)   # its input (a text file, a C tree, ...)
    db = realprog.campaign(p, work, [1, 2], reps=3, out=tmpdir / "xz.db")
    doc = realprog.predict(db, [4, 8, 16])        # corecast predict --json, as a dict
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
LIST = HERE / "real_programs.toml"
KINDS = ("blocks", "lock", "serial", "bandwidth", "imbalance", "fixed-time", "server")
SETUPS = ("text", "ctree", "pyblas", "memcached", "none")


@dataclass
class Program:
    name: str
    command: list[str]
    known: str
    kind: str
    setup: str = "none"
    needs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    throughput: str = ""
    size_mb: float = 0.0
    files: int = 0
    slow: bool = False

    def missing(self) -> list[str]:
        """The commands it needs that are not on PATH."""
        return [c for c in self.needs if shutil.which(c) is None]


def load(path: Path = LIST) -> dict[str, Program]:
    """The program list, by name, checked."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    out: dict[str, Program] = {}
    for i, d in enumerate(data.get("program", [])):
        known = set(Program.__dataclass_fields__)
        extra = set(d) - known
        if extra:
            raise ValueError(f"{path}: program {i + 1}: unknown field(s) {', '.join(sorted(extra))}")
        p = Program(**d)
        if p.kind not in KINDS or p.setup not in SETUPS:
            raise ValueError(f"{path}: {p.name}: kind must be one of {KINDS}, setup one of {SETUPS}")
        if p.name in out:
            raise ValueError(f"{path}: {p.name} twice")
        out[p.name] = p
    return out


# ============================================================================ inputs
def text_file(path: Path, size_mb: float, seed: int = 29) -> Path:
    """`size_mb` MiB of lines of pseudo-words (compressible like prose, sortable), the same for
    the same seed and size."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(5000)]
    target = int(size_mb * 1024 * 1024)
    size = 0
    with open(path, "w") as fh:
        while size < target:
            line = " ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + "\n"
            fh.write(line)
            size += len(line)
    return path


def c_tree(d: Path, files: int, seed: int = 24) -> Path:
    """A small C program of `files` translation units (25 functions each, a fraction of a second
    of gcc -O2 apiece) and a Makefile that compiles them independently and links them."""
    rng = random.Random(seed)
    d.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        fns = []
        for j in range(25):
            body = "\n".join(f"        x = x * {rng.randint(3, 99)}u + (x >> {rng.randint(1, 7)}) ^ {rng.randint(1, 999)}u;"
                             for _ in range(12))
            fns.append(f"unsigned long f{i}_{j}(unsigned long x) {{\n    for (int k = 0; k < (int)(x & 7); k++) {{\n"
                       f"{body}\n    }}\n    return x;\n}}\n")
        fns.append(f"unsigned long unit{i}(unsigned long x) {{\n"
                   + "".join(f"    x = f{i}_{j}(x);\n" for j in range(25)) + "    return x;\n}\n")
        (d / f"u{i}.c").write_text("\n".join(fns))
    decl = "".join(f"unsigned long unit{i}(unsigned long);\n" for i in range(files))
    calls = "".join(f"    x = unit{i}(x);\n" for i in range(files))
    (d / "main.c").write_text(f"#include <stdio.h>\n{decl}int main(void) {{\n    unsigned long x = 1;\n{calls}"
                              "    printf(\"%lu\\n\", x);\n    return 0;\n}\n")
    objs = " ".join(f"u{i}.o" for i in range(files)) + " main.o"
    (d / "Makefile").write_text(f"CC ?= gcc\nCFLAGS = -O2\nprog: {objs}\n\t$(CC) -o $@ {objs}\n"
                                "%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n")
    return d


BLAS_SCRIPT = '''"""Matrix products with NumPy on its BLAS threads (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS)."""
import sys
import time

import numpy as np

n, reps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a, b = rng.random((n, n)), rng.random((n, n))
t0 = time.perf_counter()
for _ in range(reps):
    c = a @ b
dt = time.perf_counter() - t0
print(f"checksum: {float(c[0, 0]):.6g}")
print(f"throughput: {reps * 2 * n ** 3 / dt / 1e9:.4f} GFLOP/s")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(p: Program, work: Path, scale: int = 1) -> dict[str, str]:
    """Make the program's input in `work` and return the values of its @placeholders@."""
    work.mkdir(parents=True, exist_ok=True)
    vals = {"python": sys.executable, "scale": str(scale),
            "user": "-u root" if os.geteuid() == 0 else ""}
    if p.setup == "text":
        vals["input"] = str(text_file(work / f"{p.name}-input.txt", p.size_mb * scale))
    elif p.setup == "ctree":
        vals["dir"] = str(c_tree(work / f"{p.name}-tree", p.files * scale))
    elif p.setup == "pyblas":
        script = work / "blas_matmul.py"
        script.write_text(BLAS_SCRIPT)
        vals["script"] = str(script)
    elif p.setup == "memcached":
        vals["port"] = str(free_port())
    return vals


def fill(text: str, vals: dict[str, str]) -> str:
    """Replace @name@ and @scale*N@ (N × scale); corecast's {threads} and {cores} stay."""
    def one(m: re.Match) -> str:
        key = m.group(1)
        if key.startswith("scale*"):
            return str(int(float(key[6:]) * int(vals["scale"])))
        if key not in vals:
            raise KeyError(f"no value for @{key}@")
        return vals[key]
    return re.sub(r"@([a-z]+(?:\*[0-9.]+)?)@", one, text)


# ============================================================================ campaign, prediction
def corecast() -> list[str]:
    return [sys.executable, "-m", "corecast"]


def measure_args(p: Program, vals: dict[str, str], cores: Sequence[int], reps: int, out: Path,
                 warmup: int = 0, timeout: float = 300.0) -> list[str]:
    """`corecast measure ...` for the program (without the leading command)."""
    args = ["measure", "-q", "--cores", ",".join(str(c) for c in cores), "--reps", str(reps),
            "--warmup", str(warmup), "--timeout", f"{timeout:g}", "-o", str(out)]
    if p.throughput:
        args += ["--throughput", p.throughput]
    for k, v in p.env.items():
        args += ["--env", f"{k}={fill(v, vals)}"]
    return args + ["--"] + [fill(a, vals) for a in p.command]


def campaign(p: Program, vals: dict[str, str], cores: Sequence[int], reps: int, out: Path,
             warmup: int = 0, timeout: float = 300.0, nice: int | None = None) -> subprocess.CompletedProcess:
    """Run `corecast measure` for the program; the campaign lands in `out`. `nice`: run the
    measurement (corecast and the program) at this niceness (`nice -n`; below 0 needs root): on
    a machine other programs keep busy, -19 gives the measured program ~99% of its cores."""
    pre = ["nice", "-n", str(nice)] if nice is not None else []
    return subprocess.run(pre + corecast() + measure_args(p, vals, cores, reps, out, warmup, timeout),
                          capture_output=True, text=True)


def predict(db: Path, cores: Sequence[int], *extra: str) -> dict[str, Any]:
    """`corecast predict DB --cores ... --json` as a dict."""
    r = subprocess.run(corecast() + ["predict", str(db), "--cores", ",".join(str(c) for c in cores), "--json",
                                     *extra], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"corecast predict {db}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def verdict(doc: dict[str, Any]) -> str:
    """The bottleneck verdict in a line: the categories named scaling bottlenecks, or why none is."""
    named = [b["category"] for b in doc.get("bottlenecks", []) if is_named(b)]
    if named:
        return "bottleneck: " + ", ".join(named)
    lost = doc.get("lost_core_time") or {}
    cats = lost.get("categories") or []
    waiting = [c["category"] for c in cats if c["verdict"].startswith("waiting while other threads work")]
    out = "no wait is a scaling bottleneck"
    if waiting:
        out += f" ({', '.join(waiting)}: waiting while other threads work)"
    return out


def is_named(b: dict[str, Any]) -> bool:
    """Does a bottleneck row name its category a scaling bottleneck?"""
    v = b.get("verdict", "")
    return ("scaling bottleneck" in v or "stops scaling" in v) and "not a bottleneck" not in v
