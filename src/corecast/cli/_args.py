"""Argument types shared by commands (they live in corecast.parsing, which serve uses too)."""
from __future__ import annotations

from ..parsing import MAX_COUNTS, core_list, level

__all__ = ["MAX_COUNTS", "core_list", "level"]
