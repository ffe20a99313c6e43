"""Packaging glue: compile the C parts (native/, workloads/) into corecast/_native.

Metadata lives in pyproject.toml. The C build itself is native/build.py, so it can also be
run by hand (`make native`).
"""
import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent


def _native_builder():
    spec = importlib.util.spec_from_file_location("corecast_native_build", HERE / "native" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildPyWithNative(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            out = HERE / "src" / "corecast" / "_native"
        else:
            out = Path(self.build_lib) / "corecast" / "_native"
        _native_builder().build_all(out, verbose=True)


class BinaryDistribution(Distribution):
    """The wheel carries compiled code, so it is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=BinaryDistribution)
