"""Typed access to one table of a machine description (schema.py): each value checked, and
every mistake one `UserError` line naming the file and the key (`FILE: cache[0].ways: ...`)."""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..errors import UserError
from ..parsing import frequency_hz, size_bytes


def pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


class Table:
    """Typed access to one table of a description, every mistake one line naming file and key."""

    _MISSING = object()

    def __init__(self, data: Any, where: str, prefix: str, what: str = "a table"):
        if not isinstance(data, Mapping):
            raise UserError(f"{where}: {prefix.rstrip('.') or 'top level'}: must be {what}")
        self.data, self.where, self.prefix = data, where, prefix

    def _err(self, key: str, msg: str) -> UserError:
        return UserError(f"{self.where}: {self.prefix}{key}: {msg}")

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is self._MISSING:
            raise self._err(key, "missing")
        return default

    def check_keys(self, allowed: set[str]) -> None:
        for k in self.data:
            if k not in allowed:
                raise self._err(k, f"unknown key (known: {', '.join(sorted(allowed))})")

    def text(self, key: str) -> str:
        v = self.data.get(key, "")
        if not isinstance(v, str):
            raise self._err(key, f"{v!r} must be a string")
        return v

    def number(self, key: str, default: Any = _MISSING, positive: bool = False, nonnegative: bool = False) -> Any:
        v = self._get(key, default)
        if v is None and default is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self._err(key, f"{v!r} is not a number")
        if positive and v <= 0:
            raise self._err(key, f"{v} must be positive")
        if nonnegative and v < 0:
            raise self._err(key, f"{v} must not be negative")
        return v

    def integer(self, key: str, default: Any = _MISSING, minimum: int | None = None,
                maximum: int | None = None) -> Any:
        v = self._get(key, default)
        if v is None and default is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)                              # JSON's 2.0
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._err(key, f"{v!r} is not a whole number")
        if minimum is not None and v < minimum:
            raise self._err(key, f"{v} is below the minimum {minimum}")
        if maximum is not None and v > maximum:
            raise self._err(key, f"{v:,} is above {maximum:,}, the most corecast takes")
        return v

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        v = self._get(key, default)
        if not isinstance(v, bool):
            raise self._err(key, f"{v!r} must be true or false")
        return v

    def size(self, key: str, default: Any = _MISSING) -> int:
        """Bytes: a whole number, or a string in corecast.parsing's size units ("32KiB")."""
        v = self._get(key, default)
        if not isinstance(v, (int, str)) or isinstance(v, bool):
            raise self._err(key, f"{v!r} is not a size")
        return size_bytes(v, f"{self.where}: {self.prefix}{key}")

    def frequency(self, key: str) -> float:
        """Hertz: a number (in hertz) or a string in corecast.parsing's frequency units
        ("2.4GHz", "800MHz"), kept to the whole hertz (so 2.4GHz is 2.4e9 exactly)."""
        v = self._get(key, self._MISSING)
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise self._err(key, f"{v!r} is not a frequency (e.g. \"2.4GHz\", \"800MHz\", 1.66e9)")
        hz = frequency_hz(v, f"{self.where}: {self.prefix}{key}", low=1.0)
        return float(round(hz))

    def choice(self, key: str, options: tuple[str, ...], default: Any = _MISSING) -> str:
        v = self._get(key, default)
        if not isinstance(v, str) or v.lower() not in options:
            raise self._err(key, f"{v!r}: choose one of {', '.join(options)}")
        return v.lower()

    def alias(self, key: str, aliases: Mapping[str, str], default: Any = _MISSING) -> str:
        v = self._get(key, default)
        if not isinstance(v, str) or v.lower() not in aliases:
            raise self._err(key, f"{v!r}: choose one of {', '.join(sorted(set(aliases.values())))}")
        return aliases[v.lower()]

    def table(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is not None and not isinstance(v, Mapping):
            raise self._err(key, "must be a table")
        return v

    def array(self, key: str, default: Any = _MISSING, most: int | None = None) -> list:
        v = self._get(key, default)
        if not isinstance(v, list):
            raise self._err(key, "must be an array of tables ([[...]])")
        if most is not None and len(v) > most:
            raise self._err(key, f"{len(v)} entries; at most {most}")
        return v
