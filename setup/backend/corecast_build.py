"""corecast's build backend: meson-python's, with one check on editable installs.

An editable install built by meson-python runs meson's build (ninja, and meson itself when a
meson.build changed) at every `import corecast`, by the absolute paths it found at install time.
A plain `pip install -e .` builds in an isolated environment that pip deletes when the install
ends, so every command of that corecast died with FileNotFoundError: .../pip-build-env-.../ninja
(issue 26). Here, before meson-python builds an editable wheel:

- ninja and meson that outlive the install (outside a temporary directory) are used as found;
- else the environment being installed into has its own (`make setup` puts them there; so does
  `pip install meson-python meson ninja`): they are used instead (NINJA and MESON);
- else the install stops at once, saying the command that works.

Wheels and sdists are meson-python's, unchanged.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import mesonpy
from mesonpy import (build_sdist, build_wheel, get_requires_for_build_sdist,  # noqa: F401 - the hooks
                     get_requires_for_build_wheel)

get_requires_for_build_editable = mesonpy.get_requires_for_build_editable

WORKS = ("python -m pip install meson-python meson ninja && "
         "python -m pip install --no-build-isolation -e .   (or: make setup)")


def throwaway(path: str | None) -> bool:
    """A tool that will not be there after the install: missing, or in a temporary directory
    (pip's isolated build environment, /tmp/pip-build-env-*; python -m build's likewise)."""
    if not path:
        return True
    p = Path(path).resolve()
    tmp = Path(tempfile.gettempdir()).resolve()
    return tmp in p.parents or any(part.startswith(("pip-build-env-", "build-env-")) for part in p.parts)


def lasting(name: str, prefix: str | None = None) -> str | None:
    """`name` in the environment being installed into (its bin directory), if it is there."""
    p = Path(prefix or sys.prefix) / "bin" / name
    return str(p) if p.is_file() and os.access(p, os.X_OK) else None


def tools(env: dict[str, str], prefix: str | None = None) -> dict[str, str]:
    """NINJA and MESON for an editable build that outlives the install: the ones found when
    they last; else the environment's own. Raises SystemExit with the command that works."""
    found = {"NINJA": env.get("NINJA") or shutil.which("ninja", path=env.get("PATH")),
             "MESON": env.get("MESON") or shutil.which("meson", path=env.get("PATH"))}
    out = {}
    for var, path in found.items():
        if not throwaway(path):
            continue
        own = lasting(var.lower(), prefix)
        if own is None:
            sys.stderr.write(
                f"corecast: an editable install runs {var.lower()} at every import (it rebuilds the C parts that "
                f"changed), and the {var.lower()} of this build ({path or 'none found'}) is in a build environment "
                f"that is deleted when the install ends. Install the build tools into this environment and build "
                f"without isolation:\n    {WORKS}\n")
            raise SystemExit(1)
        out[var] = own
    return out


def build_editable(wheel_directory: str, config_settings: dict | None = None,
                   metadata_directory: str | None = None) -> str:
    os.environ.update(tools(dict(os.environ)))
    return mesonpy.build_editable(wheel_directory, config_settings, metadata_directory)
