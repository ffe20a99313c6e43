"""The development install that `make setup` makes: corecast found where it is, no loader.

meson-python's editable install (`pip install -e .`) puts a `.pth` file into site-packages
that imports its loader at every start of Python in that environment (importlib.resources,
inspect, ast, ...: ~65 ms of CPU on the 2-vCPU VM, more than the whole of `perf stat -- true`)
and runs ninja at every `import corecast`. `scripts/setup.sh` still lets pip install corecast
editable (the metadata, the `corecast` command, and the meson build directory), then runs this
with the environment's Python:

- the loader's `.pth` and module are removed, and `corecast-src.pth` puts `src/` on sys.path
  (a plain path entry: Python reads it without importing anything);
- `src/corecast/_native/` (ignored by git, removed by `make clean`, left out of wheels by
  meson.build) gets one symbolic link per compiled product, to the build directory, at the
  path a wheel installs it to (`meson-info/intro-installed.json` says where), so that
  `corecast.native` finds them the one way, a wheel's; links that name nothing the build
  installs are removed. Links, not copies: what ninja rebuilds is seen at once.
- (with either) the environment's `corecast` command (pip's Python script) becomes a link to the
  C front end, once the build has made it:
  `_native/corecast-front` (native/stat/front.c), which counts `stat -c SOFTWARE -- CMD` itself
  and hands every other command to the `python3` beside it: ~5 ms instead of ~80 for that
  `stat`, ~1 ms more for the others.

    .venv/bin/python scripts/dev_install.py [--venv] [--links BUILD_DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
NATIVE = SRC / "corecast" / "_native"
MARK = "/corecast/_native/"
PTH = "corecast-src.pth"


def venv(site: Path | None = None, src: Path = SRC) -> list[str]:
    """This environment (its site-packages `site`) finds corecast in `src` through a path entry,
    and meson-python's loader is gone. Returns what changed."""
    site = site or Path(sysconfig.get_paths()["purelib"])
    changed = []
    for p in [site / "corecast-editable.pth", *site.glob("_corecast_editable_loader*.py"),
              *site.glob("__pycache__/_corecast_editable_loader*")]:
        if p.exists() or p.is_symlink():
            p.unlink()
            changed.append(f"removed {p.name}")
    pth = site / PTH
    want = f"{src}\n"
    if not pth.is_file() or pth.read_text() != want:
        tmp = pth.with_name(f".{PTH}.{os.getpid()}")
        tmp.write_text(want)
        tmp.replace(pth)
        changed.append(f"wrote {PTH}")
    return changed


def wanted_links(build: Path) -> dict[str, Path]:
    """Each compiled product's path under corecast/_native/ -> the file the build makes."""
    installed = json.loads((build / "meson-info" / "intro-installed.json").read_text())
    return {dest.split(MARK, 1)[1]: Path(src) for src, dest in installed.items() if MARK in dest}


def links(build: Path, native: Path = NATIVE) -> list[str]:
    """`native` (src/corecast/_native/) as the build directory `build` installs it. Returns what
    changed."""
    want = wanted_links(build)
    changed = []
    for rel, target in sorted(want.items()):
        link = native / rel
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp = link.with_name(f".{link.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        tmp.replace(link)                   # over a stale link or file: atomic
        changed.append(f"linked {rel}")
    if native.is_dir():
        for p in sorted(native.rglob("*"), reverse=True):
            rel = str(p.relative_to(native))
            if (p.is_symlink() or p.is_file()) and rel not in want:
                p.unlink()
                changed.append(f"removed {rel}")
            elif p.is_dir() and not p.is_symlink() and not any(p.iterdir()):
                p.rmdir()
    return changed


FRONT = "corecast-front"


def front(bin_dir: Path, native: Path = NATIVE) -> list[str]:
    """`bin_dir/corecast` as a link to the C front end in `native` (when the build made it; else
    pip's script is left as it is). Returns what changed."""
    target = native / FRONT
    if not (target.is_symlink() or target.exists()):
        return []
    cmd = bin_dir / "corecast"
    if cmd.is_symlink() and os.readlink(cmd) == str(target):
        return []
    tmp = cmd.with_name(f".corecast.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    tmp.replace(cmd)                        # pip's script is replaced, never written through
    return [f"linked {cmd.parent.name}/corecast to {FRONT}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", action="store_true", help="this environment: the path entry, no loader")
    ap.add_argument("--links", metavar="BUILD_DIR", type=Path, help="link src/corecast/_native to this build")
    a = ap.parse_args()
    changed = []
    if a.venv:
        changed += venv()
    if a.links:
        if not (a.links / "meson-info" / "intro-installed.json").is_file():
            print(f"dev_install: {a.links} is not a configured meson build directory", file=sys.stderr)
            return 1
        changed += links(a.links.resolve())
    if (a.venv or a.links) and sys.prefix != sys.base_prefix:   # a virtual environment's bin/, never the system's
        changed += front(Path(sysconfig.get_paths()["scripts"]))
    if changed:                             # one line: what changed, the first few named
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        print(f"setup: {'; '.join(changed[:3])}{more}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
