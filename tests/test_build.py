"""The build: meson-python, incremental, and a wheel tagged for what it holds."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from corecast.native import include_dir, library_dir, native_path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTS = ["corecast-launch", "corecast-sentinel", "corecast-front", "libcorecast_region.so", "libcorecast_shim.so", "corecast-shim-bench",
            "libcorecast_sim.so", "libcorecast_ticks.so", "corecast-barrier", "corecast-lockbench",
            "corecast-membw", "corecast-phases", "corecast-pool", "libcorecast_meters.so", "corecast-meters-stress"]


def elf_section_names(data: bytes) -> list[str]:
    """Section names of a 64-bit little-endian ELF file (enough to see debug info)."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit LE ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = sections[shstrndx][4], sections[shstrndx][5]
    strtab = data[str_off:str_off + str_size]
    return [strtab[s[0]:strtab.index(b"\0", s[0])].decode() for s in sections]


def test_every_product_is_found():
    for name in PRODUCTS:
        p = native_path(name)
        assert p.is_file(), name
        if not name.endswith(".so"):
            assert os.access(p, os.X_OK), name
    assert (include_dir() / "corecast_region.h").is_file()
    assert (include_dir("corecast_meters.h") / "corecast_meters.h").is_file()
    assert (library_dir() / "libcorecast_region.so").is_file()


def test_elf_reader_sees_debug_sections(tmp_path):
    """The reader used below on the wheel finds .debug_info when there is some."""
    src = tmp_path / "x.c"
    src.write_text("int f(int x) { return x + 1; }\n")
    for flag, expect in (("-g", True), ("-g0", False)):
        obj = tmp_path / f"x{flag}.o"
        subprocess.run(["cc", "-c", flag, "-o", str(obj), str(src)], check=True)
        assert (".debug_info" in elf_section_names(obj.read_bytes())) is expect


@pytest.mark.skipif(not (ROOT / "build" / "editable" / "build.ninja").exists(),
                    reason="not the editable install that `make setup` makes")
def test_unchanged_tree_has_nothing_to_build():
    ninja = Path(sys.executable).parent / "ninja"
    r = subprocess.run([str(ninja if ninja.exists() else "ninja"), "-C", str(ROOT / "build" / "editable"), "-n"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "no work to do" in r.stdout


@pytest.mark.skipif(not (ROOT / ".venv" / ".corecast-setup").exists(),
                    reason="not the environment that `make setup` makes")
def test_second_setup_does_not_reinstall():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "installing corecast" not in r.stdout
    assert "creating .venv" not in r.stdout
    # the byte code of every module is there and fresh: meson-python's editable loader reads it
    # but never writes it, so without it every start compiled what it imported (~65 ms of
    # `corecast stat -- true`)
    import importlib.util
    stale = []
    for src in (ROOT / "src" / "corecast").rglob("*.py"):
        pyc = Path(importlib.util.cache_from_source(str(src)))
        if not pyc.exists() or int.from_bytes(pyc.read_bytes()[8:12], "little") != int(src.stat().st_mtime):
            stale.append(str(src.relative_to(ROOT)))
    assert not stale, stale[:5]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_wheel_is_platform_specific_without_abi_and_without_debug_info(tmp_path):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                        "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    wheels = list(tmp_path.glob("corecast-*.whl"))
    assert len(wheels) == 1
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheels[0].name.endswith(f"-py3-none-{platform}.whl"), wheels[0].name
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
        wheel_meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
        assert "Root-Is-Purelib: false" in wheel_meta
        native = {n.rsplit("/", 1)[1]: n for n in names if "/corecast/_native/" in n and not n.endswith("/")}
        for name in PRODUCTS:
            assert name in native, name
            assert not [s for s in elf_section_names(z.read(native[name])) if s.startswith(".debug")], name
        assert any(n.endswith("/corecast/_native/include/corecast_region.h") for n in names)
        assert any(n.endswith("/corecast/_native/include/corecast_meters.h") for n in names)
        assert any(n.endswith("/corecast/machines/epyc-9654-2s.toml") for n in names)
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        scripts = {n.rsplit("/", 1)[1] for n in names if ".data/scripts/" in n}
        assert {"corecast-barrier", "corecast-lockbench", "corecast-membw"} <= scripts


# ------------------------------------------------------------------ `pip install -e .` (issue 26)
def _backend():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "setup" / "backend"))
    import corecast_build
    return corecast_build


def _tool_dir(d: Path) -> Path:
    d.mkdir(parents=True)
    for name in ("ninja", "meson"):
        (d / name).write_text("#!/bin/sh\nexit 0\n")
        (d / name).chmod(0o755)
    return d


def test_pyproject_builds_with_corecast_s_backend():
    import tomllib
    t = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert t["build-system"]["build-backend"] == "corecast_build"
    assert t["build-system"]["backend-path"] == ["setup/backend"]


def test_editable_build_with_throwaway_tools_stops_with_the_command_that_works(tmp_path, capsys):
    """A plain `pip install -e .` built with pip's isolated environment's ninja: every command of
    that corecast then died with FileNotFoundError: .../pip-build-env-.../ninja."""
    b = _backend()
    overlay = _tool_dir(tmp_path / "pip-build-env-x1y2" / "overlay" / "bin")
    bare = tmp_path / "venv"
    (bare / "bin").mkdir(parents=True)
    with pytest.raises(SystemExit) as e:
        b.tools({"PATH": str(overlay)}, prefix=str(bare))
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "pip-build-env-x1y2" in err and "deleted when the install ends" in err
    assert "python -m pip install --no-build-isolation -e ." in err and "make setup" in err


def test_editable_build_uses_the_environment_s_own_tools(tmp_path):
    """Where the environment being installed into has ninja and meson (make setup puts them
    there), they replace the build environment's, which pip deletes."""
    b = _backend()
    overlay = _tool_dir(tmp_path / "pip-build-env-x1y2" / "overlay" / "bin")
    venv = tmp_path / "venv"
    _tool_dir(venv / "bin")
    assert b.tools({"PATH": str(overlay)}, prefix=str(venv)) == {
        "NINJA": str(venv / "bin" / "ninja"), "MESON": str(venv / "bin" / "meson")}
    # tools that outlive the install (not in a temporary directory) are used as found
    assert not b.throwaway("/usr/bin/ninja") and b.throwaway(str(overlay / "ninja")) and b.throwaway(None)
    assert b.tools({"PATH": str(overlay), "NINJA": "/usr/bin/ninja", "MESON": "/usr/bin/meson"},
                   prefix=str(venv)) == {}


# ------------------------------------------------------------------ the development install (issue 28)
def _dev_install():
    sys.path.insert(0, str(ROOT / "scripts"))
    import dev_install
    return dev_install


def test_dev_install_replaces_meson_python_s_loader_with_a_path_entry(tmp_path):
    """An environment an earlier set-up gave meson-python's editable loader (imported at every
    Python start: ~65 ms) keeps only a plain path entry to src/, whatever ran before."""
    d = _dev_install()
    site, src = tmp_path / "site-packages", tmp_path / "tree" / "src"
    (site / "__pycache__").mkdir(parents=True)
    (site / "corecast-editable.pth").write_text("import _corecast_editable_loader; _corecast_editable_loader.init()")
    (site / "_corecast_editable_loader.py").write_text("")
    (site / "__pycache__" / "_corecast_editable_loader.cpython-311.pyc").write_bytes(b"")
    (site / "other.pth").write_text("/elsewhere\n")
    assert d.venv(site, src)
    assert sorted(p.name for p in site.iterdir() if p.is_file()) == ["corecast-src.pth", "other.pth"]
    assert not list((site / "__pycache__").iterdir())
    assert (site / "corecast-src.pth").read_text() == f"{src}\n"
    assert d.venv(site, src) == []                          # a second run changes nothing


def test_dev_install_links_what_the_build_installs_into_native(tmp_path):
    """Each product the build installs into corecast/_native gets a link at the path a wheel
    has it (headers under include/); a link the build no longer names is removed; other
    installed files (man pages, commands, the Python sources) are not linked."""
    d = _dev_install()
    build, native = tmp_path / "build", tmp_path / "_native"
    (build / "meson-info").mkdir(parents=True)
    pure = "/usr/local/lib/python3.11/site-packages/corecast"
    installed = {f"{build}/native/x/libcorecast_x.so": f"{pure}/_native/libcorecast_x.so",
                 f"{build}/w/corecast-prog": f"{pure}/_native/corecast-prog",
                 f"{tmp_path}/native/x/corecast_x.h": f"{pure}/_native/include/corecast_x.h",
                 f"{build}/w/commands/corecast-prog": "/usr/local/bin/corecast-prog",
                 f"{tmp_path}/man/corecast-x.1": "/usr/local/share/man/man1/corecast-x.1",
                 f"{tmp_path}/src/corecast/cli.py": f"{pure}/cli.py"}
    (build / "meson-info" / "intro-installed.json").write_text(__import__("json").dumps(installed))
    (native / "include").mkdir(parents=True)
    (native / "corecast-gone").symlink_to(build / "w" / "corecast-gone")
    (native / "corecast-prog").symlink_to(build / "elsewhere")         # stale target: replaced
    changed = d.links(build, native)
    assert "removed corecast-gone" in changed
    found = {str(p.relative_to(native)): os.readlink(p) for p in native.rglob("*") if p.is_symlink()}
    assert found == {"libcorecast_x.so": f"{build}/native/x/libcorecast_x.so",
                     "corecast-prog": f"{build}/w/corecast-prog",
                     "include/corecast_x.h": f"{tmp_path}/native/x/corecast_x.h"}
    assert d.links(build, native) == []                     # a second run changes nothing


@pytest.mark.skipif(not (ROOT / ".venv" / ".corecast-setup").exists() or Path(sys.prefix) != ROOT / ".venv",
                    reason="not the development environment that `make setup` makes")
def test_python_in_the_development_environment_starts_without_a_loader():
    """`python -c ...` in .venv imports nothing of corecast's (meson-python's loader imported
    importlib.resources, inspect and ast at every start: 48 ms of CPU against 9 ms), and corecast
    itself comes from src/ with its compiled parts where a wheel has them."""
    code = ("import sys\nprint(sorted(m for m in sys.modules if 'corecast' in m or m in ('importlib.resources', 'ast')))\n"
            "import corecast.native as n\nprint(n.__file__)\nprint(n.native_path('corecast-launch').parent)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mods, where, native = r.stdout.splitlines()
    assert mods == "[]"
    assert where == str(ROOT / "src" / "corecast" / "native.py")
    assert native == str(ROOT / "src" / "corecast" / "_native")
