"""Where the compiled parts (native/, workloads/) live once corecast is installed.

A wheel holds them flat in `corecast/_native/` (headers in its `include/`); so does the
development install that `make setup` makes, with links into the build directory
(scripts/dev_install.py). A plain `pip install -e .` (meson-python's editable loader) leaves them
in the build directory and maps each one into the package: they are then looked up through
`importlib.resources`, which knows that map.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Callable

from .errors import UserError

#: The folder of the compiled parts in an installed wheel.
NATIVE_DIR = Path(__file__).resolve().parent / "_native"


def _lookup(*parts: str) -> Path | None:
    p = NATIVE_DIR.joinpath(*parts)
    if p.exists():
        return p
    import importlib.resources     # here: only a plain `pip install -e .` (meson-python's loader) gets here
    try:
        res = importlib.resources.files(__package__).joinpath("_native", *parts)
    except (ModuleNotFoundError, TypeError, ValueError):
        return None
    # A real path when corecast is installed from a wheel or editable; anything else (a zip, a
    # mapped folder) is not something a program can be run or linked from.
    if isinstance(res, Path) and res.exists():
        return res
    return None


def native_path(name: str) -> Path:
    """Path of a compiled product (a shared library or an executable).

    Raises UserError when it is missing: corecast was installed without a C compiler, or a
    source checkout was never built.
    """
    p = _lookup(name)
    if p is None:
        raise UserError(
            f"corecast's compiled component '{name}' is missing "
            "(install gcc, then reinstall corecast with `pip install .` or run `make setup`)")
    return p


def include_dir(header: str = "corecast_region.h") -> Path:
    """The folder holding a header corecast installs for programs: corecast_region.h (the
    region API) or corecast_meters.h (the meters' blackboard reader and advice). In a wheel
    both are in _native/include; in an editable install each is where its source is."""
    p = _lookup("include", header)
    if p is None:
        raise UserError(f"corecast's header '{header}' is missing "
                        "(reinstall corecast with `pip install .` or run `make setup`)")
    return p.parent


def library_dir(name: str = "libcorecast_region.so") -> Path:
    """The folder of a shared library, for `-L` and `-Wl,-rpath` when linking against it."""
    return native_path(name).parent


def load_library(name: str) -> ctypes.CDLL:
    """A compiled shared library loaded with ctypes; a UserError naming it when it is missing
    or cannot be loaded. (Each caller declares its functions' types and caches the result.)"""
    path = native_path(name)
    try:
        return ctypes.CDLL(str(path))
    except OSError as err:
        raise UserError(f"cannot load {path}: {err}") from None


def system_program(name: str) -> str | None:
    """The full path of a system tool corecast runs as a helper (addr2line, mount, ...), found in
    PATH; None where there is none it may run.

    Only absolute PATH entries are looked in: an empty entry or `.` is the current folder, which
    may be /tmp. Run as root, only a program that no other user can change is taken: its folder
    in PATH and the file it resolves to (with every folder above each) belong to root and are
    writable by no other user. As root, a folder of a user's that PATH names (a PATH kept by
    `sudo -E`, a user's ~/bin) would otherwise run that user's program as root."""
    import os
    import stat as st_

    root = os.geteuid() == 0
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(folder):
            continue
        path = os.path.join(folder, name)
        try:
            info = os.stat(path)
        except OSError:
            continue
        if not st_.S_ISREG(info.st_mode) or not os.access(path, os.X_OK):
            continue
        if root and not (_root_only(os.path.realpath(folder)) and _root_only(os.path.realpath(path))):
            continue
        return path
    return None


def _root_only(real: str) -> bool:
    """`real` (a resolved path) and every folder above it belong to root, and no other user may
    write to any of them (a group's write only where the group is root's)."""
    import os

    p = real
    while True:
        try:
            info = os.stat(p)
        except OSError:
            return False
        if info.st_uid != 0 or info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != 0):
            return False
        parent = os.path.dirname(p)
        if parent == p:
            return True
        p = parent


#: prctl(2): the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1


def ending_with_parent(sig: int) -> Callable[[], None]:
    """What a child runs first (a `preexec_fn`, a fork pool's initializer) to end when the
    process that started it does, however that ends (SIGKILL included): it asks the kernel for
    `sig` then (Linux's parent-death signal), and ends at once if its parent is already gone
    (an end before the request would otherwise leave it running). The signal follows the thread
    that started the child: start it from one that lives as long as the process. prctl is
    looked up now, in the parent, so that the child only calls it."""
    import os
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(125)

    return arm
