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
import importlib.util
import os
import sys
import time
import warnings
from typing import NamedTuple

from .. import __version__
from .. import messages
from ..errors import UserError

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line with exit status 2 (as argparse does),
    prefixed like every other corecast error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message}\n")


def add_verbosity(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    """-q and -v, which every command and every action of one takes (see corecast.messages):
    on `parser` and on the parsers of its sub-commands, where they do not set the default (an
    argparse sub-parser's default would undo a -q given before its action)."""
    g = parser.add_mutually_exclusive_group()
    extra = {} if defaults else {"default": argparse.SUPPRESS}
    g.add_argument("-q", "--quiet", action="store_const", dest="verbosity", const=messages.QUIET,
                   help="results, warnings and errors only: no progress, notes or names of files written", **extra)
    g.add_argument("-v", "--verbose", action="store_const", dest="verbosity", const=messages.VERBOSE,
                   help="more detail on standard error: what was read, how long it took", **extra)
    if defaults:
        parser.set_defaults(verbosity=messages.NORMAL)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_verbosity(sub, defaults=False)


#: What a command's --format may ask for: its terminal text, its --json document, or a tidy
#: table of its rows for data frames (docs/outputs.md gives each command's shapes).
FORMATS = ("table", "json", "csv", "records")


def add_format(parser: argparse.ArgumentParser, rows: str,
               json_help: str = "print a JSON object instead of tables") -> None:
    """--json and --format table|json|csv|records; `rows` says what a row of the tidy table is."""
    parser.add_argument("--json", action="store_true", help=f"{json_help} (as --format json)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help=f"table (default), json (one object), or a tidy table with one row per {rows} "
                             "for data frames: csv, or records (a JSON array of objects); see docs/outputs.md")


def program(words: list[str] | None, usage: str | None = None) -> list[str]:
    """The program and its arguments given after `--` (argparse keeps the `--` in a REMAINDER);
    with `usage`, none given is a UserError saying it."""
    cmd = list(words or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd and usage:
        raise UserError(usage)
    return cmd


def output_format(args: argparse.Namespace) -> str:
    """The format asked for: --format, else json for --json, else the terminal's tables."""
    return getattr(args, "format", None) or ("json" if getattr(args, "json", False) else "table")


class _Command(NamedTuple):      # (not a dataclass: dataclasses costs ~10 ms to import)
    name: str
    help: str
    module: str


def _commands() -> list[_Command]:
    """Every command module's COMMAND and HELP, read from its source without importing it, so
    that `corecast CMD` loads only what CMD needs (numpy/scipy/matplotlib cost a second).
    Only `corecast -h`, a mistyped command and the documentation list them all (ast and
    pkgutil are imported here for that: a named command needs neither, see `_named`)."""
    import ast
    import pkgutil
    from pathlib import Path

    out = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        # The module's own source file (in an editable install __path__ is not a real folder).
        spec = importlib.util.find_spec(f"{__name__}.{info.name}")
        try:
            tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8")) if spec and spec.origin else None
        except (OSError, SyntaxError):
            tree = None
        consts: dict[str, str] = {}
        for node in tree.body if tree else []:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in ("COMMAND", "HELP") and isinstance(node.value, ast.Constant):
                    consts[node.targets[0].id] = str(node.value.value)
        if "COMMAND" not in consts:
            # Not readable statically (a package, or a computed name): import it to find out.
            mod = importlib.import_module(f"{__name__}.{info.name}")
            if not (hasattr(mod, "COMMAND") and hasattr(mod, "run")):
                continue
            consts = {"COMMAND": mod.COMMAND, "HELP": getattr(mod, "HELP", "")}
        out.append(_Command(consts["COMMAND"], consts.get("HELP", ""), f"{__name__}.{info.name}"))
    return sorted(out, key=lambda c: c.name)


def _named(wanted: str | None) -> list[_Command] | None:
    """The command `wanted` alone, when a module of that name defines it: then no other
    command's source is read (listing them all costs more than a short command does)."""
    if not wanted or not wanted.isidentifier() or wanted.startswith("_"):
        return None
    if importlib.util.find_spec(f"{__name__}.{wanted}") is None:
        return None
    mod = importlib.import_module(f"{__name__}.{wanted}")
    if getattr(mod, "COMMAND", None) != wanted or not hasattr(mod, "run"):
        return None
    return [_Command(wanted, getattr(mod, "HELP", ""), mod.__name__)]


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The full parser. Only the command named in `argv` is imported and given its options;
    with argv None every command is (used by tests and documentation)."""
    parser = _Parser(
        prog="corecast",
        description="Measure a multithreaded program on a few cores, predict how it scales on "
                    "many, and explain what stops it.")
    parser.add_argument("--version", action="version", version=f"corecast {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = None
    if argv is not None:
        wanted = next((a for a in argv if not a.startswith("-")), None)
    if argv is not None and wanted is None and "--version" in argv:
        commands: list[_Command] = []          # nothing but the version is asked for
    else:
        commands = (_named(wanted) if argv is not None else None) or _commands()
    for cmd in commands:
        if argv is not None and cmd.name != wanted:
            sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
            continue
        mod = importlib.import_module(cmd.module)
        p = sub.add_parser(cmd.name, help=cmd.help, description=getattr(mod, "DESCRIPTION", cmd.help),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        add_verbosity(p)
        p.set_defaults(_run=mod.run)
    return parser


def _command_parser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    """The sub-parser of command `name`, else `parser` itself."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse leaves an unknown option to the top parser, which said "corecast: error:
        # unrecognized arguments: --cors" of `corecast measure --cors 1,2`: the command's own
        # parser says it, prefixed like every other error of that command.
        _command_parser(parser, getattr(args, "command", None)).error(
            f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USER_ERROR
    # Library warnings (numpy's overflow or invalid-value notices, scipy's fit warnings: every
    # category, with their source paths) are not for a user: what a result cannot say is in
    # corecast's own warnings and notes. CORECAST_DEBUG=1 shows them.
    if not os.environ.get("CORECAST_DEBUG"):
        warnings.simplefilter("ignore")
    messages.configure(getattr(args, "verbosity", messages.NORMAL), args.command)
    wall, cpu = time.monotonic(), time.process_time()
    try:
        code = int(args._run(args) or 0)
        messages.detail(f"done in {time.monotonic() - wall:.2f} s ({time.process_time() - cpu:.2f} s of CPU), "
                        f"exit status {code}")
        return code
    except UserError as err:
        sys.stdout.flush()
        print(messages.visible(f"corecast {args.command}: error: {err}"), file=sys.stderr)
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
            import traceback
            traceback.print_exc()
        else:
            print(f"corecast {args.command}: internal error: {type(err).__name__}: {err} "
                  "(this is a bug in corecast; set CORECAST_DEBUG=1 for the traceback)",
                  file=sys.stderr)
        return 1
