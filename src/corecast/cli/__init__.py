"""The `corecast` command line.

Each command is one module in this package that defines:

    COMMAND = "usl"                      # the sub-command's name
    HELP = "one line for `corecast -h`"
    def add_arguments(parser): ...        # argparse options
    def run(args) -> int: ...            # parse, call the API, render; no logic of its own

Modules are discovered, so adding a command touches no other file. A `UserError` anywhere
ends in one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
from types import ModuleType

from .. import __version__
from ..errors import UserError

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line with exit status 2 (as argparse does),
    prefixed like every other corecast error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message}\n")


def _command_modules() -> list[ModuleType]:
    mods = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "COMMAND") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: m.COMMAND)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="corecast",
        description="Measure a multithreaded program on a few cores, predict how it scales on "
                    "many, and explain what stops it.")
    parser.add_argument("--version", action="version", version=f"corecast {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.COMMAND, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        return int(args._run(args) or 0)
    except UserError as err:
        sys.stdout.flush()
        print(f"corecast {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(f"corecast {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as err:  # a bug in corecast, not the user's fault
        if os.environ.get("CORECAST_DEBUG"):
            traceback.print_exc()
        else:
            print(f"corecast {args.command}: internal error: {type(err).__name__}: {err} "
                  "(this is a bug in corecast; set CORECAST_DEBUG=1 for the traceback)",
                  file=sys.stderr)
        return 1
