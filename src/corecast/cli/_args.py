"""Argument types shared by commands (they live in corecast.parsing, which serve uses too), and
the routing of a command's sub-actions to their own parsers."""
from __future__ import annotations

import argparse
import sys

from ..parsing import MAX_COUNTS, core_list, level

__all__ = ["MAX_COUNTS", "core_list", "level", "route_actions"]


def route_actions(parser: argparse.ArgumentParser, subs: dict[str, argparse.ArgumentParser],
                  helps: dict[str, str] | None = None) -> None:
    """Make `parser` hand the arguments after a sub-action named in `subs` (`corecast sim
    capture ...`, `corecast sched run ...`) to that action's own parser, with `action` set and
    the command's defaults (e.g. its run function) kept; anything else it parses itself.

    `helps` gives each action's one line (its man page's NAME, its completion's description;
    default: the first sentence of its description):
    the parsers and their lines are kept on `parser.corecast_actions` for scripts/gen_cli_docs.py,
    which documents and completes an action as it does a command."""
    if helps is None:        # each action's description, to its first full stop
        helps = {name: (sub.description or name).split(". ")[0].rstrip(".") for name, sub in subs.items()}
    missing = set(subs) ^ set(helps)
    if missing:
        raise ValueError(f"actions without a one-line help or parser: {sorted(missing)}")
    parser.corecast_actions = {name: (sub, helps[name]) for name, sub in subs.items()}  # type: ignore[attr-defined]
    orig = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):  # type: ignore[no-untyped-def]
        args = list(sys.argv[1:] if args is None else args)
        if args and args[0] in subs:
            ns, extra = subs[args[0]].parse_known_args(args[1:], namespace)
            ns.action = args[0]
            for key, value in parser._defaults.items():
                if not hasattr(ns, key):
                    setattr(ns, key, value)
            return ns, extra
        return orig(args, namespace)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]
