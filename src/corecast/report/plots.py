"""Plot plumbing: a headless matplotlib, imported only when a plot is asked for."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import outputs
from ..errors import UserError

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def available() -> bool:
    """Whether matplotlib is installed (a bare machine may have NumPy and SciPy only)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: str | Path) -> str:
    """The format for `path` from its extension; a UserError for any other extension, or for a
    name that cannot be written (see corecast.outputs: no such folder, a folder, a link).

    Called before the work is done, so a typo does not cost a long computation.
    """
    ext = Path(path).suffix.lower()
    kind = outputs.check(path)
    if ext not in FORMATS:
        if kind in ("in place", "descriptor"):
            return "png"                    # a device, a pipe, /dev/stdout: no extension to go by
        raise UserError(f"{path}: cannot tell the plot format from the extension (use .png, .svg or .pdf)")
    return FORMATS[ext]


def literal(text: str) -> str:
    """`text` for a title, a label or a legend, shown as written: matplotlib reads "$...$" as
    mathtext, so a column's, a policy's or a program's name from another user's file was typeset
    (or, unbalanced, ended the command with a ParseException). An escaped dollar is shown as one."""
    return str(text).replace("$", "\\$")


def save(fig: Any, path: str | Path, what: str = "plot") -> None:
    """Write the figure through corecast.outputs (which names the file on standard error)."""
    fmt = check_plot_path(path)
    outputs.save_figure(fig, path, fmt, what, dpi=130, bbox_inches="tight")
