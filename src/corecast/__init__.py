"""corecast: measure a multithreaded program on a few cores, predict how it scales on many,
and explain what stops it."""

__version__ = "0.1.0"

from .errors import UserError  # noqa: E402

__all__ = ["UserError", "__version__"]
