"""Build corecast's C components.

Every directory `native/<part>/` and `workloads/<part>/` that holds a `build.toml` describes
one or more targets:

    [[target]]
    name = "libcorecast_shim.so"      # file name of the product
    kind = "shared"                    # shared | executable | header
    sources = ["*.c"]                  # globs, relative to the directory
    cflags = ["-O2"]                   # added to the defaults of the kind
    ldflags = ["-ldl"]

Products land flat in one output directory (the package's `corecast/_native/`, headers in
its `include/`), so names must be unique across parts. This script is used by `setup.py`
(for `pip install`) and can be run by hand: `python native/build.py OUTDIR`.
"""
from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PART_DIRS = ("native", "workloads")

DEFAULT_CFLAGS = ["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter"]
KIND_FLAGS = {
    "shared": (["-fPIC", "-fvisibility=hidden"], ["-shared"]),
    "executable": ([], []),
}


def find_targets(root: Path = ROOT) -> list[tuple[Path, dict]]:
    targets = []
    for part in PART_DIRS:
        for spec in sorted((root / part).glob("*/build.toml")):
            with open(spec, "rb") as fh:
                data = tomllib.load(fh)
            for t in data.get("target", []):
                targets.append((spec.parent, t))
    names = [t["name"] for _, t in targets]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"native/build.py: target names used twice: {', '.join(sorted(dup))}")
    return targets


def compiler() -> str:
    cc = os.environ.get("CC")
    if cc:
        return cc
    for cand in ("gcc", "cc", "clang"):
        if shutil.which(cand):
            return cand
    raise SystemExit("native/build.py: no C compiler found (install gcc: apt-get install gcc)")


def build_target(directory: Path, target: dict, outdir: Path, cc: str, verbose: bool) -> Path:
    kind = target.get("kind", "executable")
    name = target["name"]
    if kind == "header":
        dest_dir = outdir / "include"
        dest_dir.mkdir(parents=True, exist_ok=True)
        for pattern in target.get("sources", []):
            for src in sorted(directory.glob(pattern)):
                shutil.copy2(src, dest_dir / src.name)
        return dest_dir
    if kind not in KIND_FLAGS:
        raise SystemExit(f"native/build.py: {directory}/build.toml: unknown kind {kind!r}")
    sources: list[str] = []
    for pattern in target.get("sources", ["*.c"]):
        found = sorted(glob.glob(str(directory / pattern)))
        if not found:
            raise SystemExit(f"native/build.py: {directory}/build.toml: {pattern!r} matches nothing")
        sources.extend(found)
    cflags, ldkind = KIND_FLAGS[kind]
    out = outdir / name
    cmd = [cc, *DEFAULT_CFLAGS, *cflags, *target.get("cflags", []),
           f"-I{directory}", f"-I{ROOT / 'native' / 'include'}",
           "-o", str(out), *sources, *ldkind, *target.get("ldflags", [])]
    if verbose:
        print("  " + " ".join(shlex.quote(c) for c in cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"native/build.py: building {name} failed")
    if res.stderr.strip() and verbose:
        sys.stderr.write(res.stderr)
    return out


def build_all(outdir: Path, verbose: bool = True) -> list[Path]:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    targets = find_targets()
    if not targets:
        return []
    cc = compiler()
    built = []
    for directory, target in targets:
        if verbose:
            print(f"building {target['name']} ({directory.relative_to(ROOT)})")
        built.append(build_target(directory, target, outdir, cc, verbose))
    return built


if __name__ == "__main__":
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src" / "corecast" / "_native"
    build_all(dest, verbose="-q" not in sys.argv)
