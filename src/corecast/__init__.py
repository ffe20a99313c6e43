"""corecast: measure a multithreaded program on a few cores, predict how it scales on many,
and explain what stops it."""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("corecast")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

from .errors import UserError  # noqa: E402

__all__ = ["UserError", "__version__"]
