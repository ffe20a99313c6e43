"""What machine a benchmark ran on: every benchmark prints this first."""
from __future__ import annotations

import os
import platform
import sys


def describe() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import numpy
        np_v = numpy.__version__
    except ImportError:
        np_v = "-"
    try:
        load = "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "load unknown"
    return (f"machine: {model}; {os.cpu_count()} logical CPUs; {platform.system()} {platform.release()}; "
            f"Python {sys.version.split()[0]}; numpy {np_v}; {load} (at start)")


def header(title: str) -> None:
    print(f"# {title}")
    print(f"# {describe()}")
