"""`corecast serve`: a local web dashboard over stat, meters, campaigns, predictions and USL.

`run(files, listen)` starts it; `Dashboard` (app.py) is the aiohttp application; live sources
and their sessions are in live.py; the files shown in files.py.
"""
from __future__ import annotations

from .server import parse_listen, run

__all__ = ["parse_listen", "run"]
