"""Plot plumbing: a headless matplotlib, imported only when a plot is asked for."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: str | Path) -> str:
    """The format for `path` from its extension; a UserError for any other extension.

    Called before the work is done, so a typo does not cost a long computation.
    """
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise UserError(f"{path}: cannot tell the plot format from the extension (use .png, .svg or .pdf)")
    parent = Path(path).parent
    if str(parent) and not parent.exists():
        raise UserError(f"{path}: directory {parent} does not exist")
    return FORMATS[ext]


def save(fig: Any, path: str | Path) -> None:
    fmt = check_plot_path(path)
    try:
        fig.savefig(path, format=fmt, dpi=130, bbox_inches="tight")
    except OSError as err:
        raise UserError(f"{path}: cannot write the plot: {err.strerror or err}") from None
