import os
import sys

# `python -m corecast` puts the current folder first on sys.path (unless -P, which the
# `corecast` front end passes): take it off before anything else is imported, so that a
# numpy.py planted in a folder where root runs corecast (/tmp, a shared project) is not imported.
# (A planted corecast/ package there is already running: only -P, or the front end, avoids that.)
if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from .cli import main  # noqa: E402

sys.exit(main())
