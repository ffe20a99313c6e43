#!/usr/bin/env python3
"""Generate corecast's man pages and shell completions from its argument parser.

    python scripts/gen_cli_docs.py [OUTDIR]      # default: the tree's man/ and completions/

Both read the very parser the command line uses, so nothing is written by hand:

- a man page per command and per action of one (`corecast-usl.1`, `corecast-sim-capture.1`,
  `corecast-sched-sfmodel-fit.1`), by argparse-manpage, with a `.TH` line of the usual shape
  (`.TH CORECAST-USL 1 "date" "corecast VERSION" "corecast manual"`), a NAME line that
  `lexgrog` (and so `whatis`, `apropos`) reads, and SEE ALSO naming the command's actions or the
  action's command;
- the bash and zsh completions, written here from the same tree: every command, every action
  (`corecast sim <TAB>`: capture, convert, gen ...), every option of each
  (`corecast sched sim --<TAB>`), the choices of an option, files elsewhere, and a command
  name after `--`.

An action is a real argparse sub-parser (`meters show`) or one routed by
`corecast.cli._args.route_actions` (`sim capture`, `sched run`), which keeps its parser and its
one line on `parser.corecast_actions`. The outputs are kept in the tree (installed by
meson.build, and by scripts/setup.sh into the environment's man path); tests/test_cli_docs.py
fails when they no longer match the parser.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Node:
    """A command or an action: the words that name it, its parser and its one line."""
    words: tuple[str, ...]
    parser: argparse.ArgumentParser
    help: str
    children: list["Node"] = field(default_factory=list)

    @property
    def page(self) -> str:
        return "-".join(("corecast",) + self.words)

    def walk(self):  # type: ignore[no-untyped-def]
        yield self
        for c in self.children:
            yield from c.walk()


def parser() -> argparse.ArgumentParser:
    from corecast.cli import build_parser
    return build_parser(None)


def _children(p: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    out: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            out += [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    for name, (sub, text) in getattr(p, "corecast_actions", {}).items():
        out.append((name, sub, text))
    return out


def tree(top: argparse.ArgumentParser | None = None) -> Node:
    top = top or parser()
    root = Node((), top, "measure a multithreaded program on a few cores, predict how it scales on many")

    def grow(node: Node) -> None:
        for name, sub, text in _children(node.parser):
            child = Node(node.words + (name,), sub, text or (sub.description or "").split(". ")[0])
            node.children.append(child)
            grow(child)
    grow(root)
    return root


def subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands of the top parser (or the actions of a command), by name."""
    return {name: sub for name, sub, _ in _children(p)}


def actions() -> list[tuple[str, ...]]:
    """The words of every command and every action, e.g. ('sim', 'capture')."""
    return [n.words for n in tree().walk() if n.words]


# ------------------------------------------------------------------------------ man pages
def _version() -> str:
    from corecast import __version__
    return __version__


def _roff(text: str) -> str:
    return text.replace("\\", "\\e").replace("-", "\\-")


def man_page(node: Node, everything: Node) -> str:
    from argparse_manpage.manpage import Manpage
    p = node.parser
    p.prog = " ".join(("corecast",) + node.words)
    m = Manpage(p, _data={"prog": p.prog, "project_name": "corecast", "url": "",
                          "authors": ["the corecast developers"], "version": _version(),
                          "manual_section": 1, "manual_title": "corecast manual"}, format="pretty")
    lines = str(m).splitlines()
    # .TH title section date source manual (man-pages(7)); argparse-manpage wrote the prog with a
    # space as the title ("CORECAST USL", read as title CORECAST, section USL) and the section quoted
    assert lines[0].startswith(".TH ") and lines[1] == ".SH NAME", lines[:2]
    lines[0] = (f'.TH {node.page.upper()} 1 "{m.date}" "corecast {_version()}" "corecast manual"')
    # NAME: "name \- one line", what lexgrog reads for whatis and apropos
    lines[2] = f"{_roff(node.page)} \\- {_roff(node.help.rstrip('.'))}"
    parent = [n for n in everything.walk() if node.words and n.words == node.words[:-1]]
    related = parent + node.children
    if related:
        lines += ["", ".SH SEE ALSO"]
        refs = [f".BR {_roff(n.page)} (1)" for n in related]
        lines += [r + ("," if i < len(refs) - 1 else "") for i, r in enumerate(refs)]
    return "\n".join(lines) + "\n"


_DATE = re.compile(r'^(\.TH \S+ 1) "[0-9\\-]+"', re.M)


def _write_page(path: Path, text: str) -> None:
    """Write a man page, keeping the date of the page already there when nothing else changed
    (a regeneration on another day is then no change at all)."""
    if path.exists():
        old = path.read_text()
        m = _DATE.search(old)
        if m and _DATE.sub(r'\1 "DATE"', old) == _DATE.sub(r'\1 "DATE"', text):
            text = old
    path.write_text(text)


# ------------------------------------------------------------------------------ completion
@dataclass
class _Spec:
    """What completion needs to know of one node."""
    key: str                                  # "" for corecast, "sim", "sim capture", ...
    actions: list[str]
    options: list[tuple[str, str]]            # (option string, help)
    valued: list[str]                         # options that take a value
    choices: dict[str, list[str]]             # option -> its choices
    action_help: dict[str, str]


def _specs(root: Node) -> list[_Spec]:
    out = []
    for n in root.walk():
        opts, valued, choices = [], [], {}
        for a in n.parser._actions:
            if isinstance(a, argparse._SubParsersAction) or not a.option_strings:
                continue
            text = (a.help or "").replace("%(default)s", str(a.default))
            if text == argparse.SUPPRESS:
                continue
            for s in a.option_strings:
                opts.append((s, " ".join(text.split())))
                if a.nargs != 0:
                    valued.append(s)
                    if a.choices:
                        choices[s] = [str(c) for c in a.choices]
        out.append(_Spec(" ".join(n.words), [c.words[-1] for c in n.children], opts, valued, choices,
                         {c.words[-1]: c.help for c in n.children}))
    return out


def _sh(text: str) -> str:
    """A single-quoted shell word."""
    return "'" + text.replace("'", "'\\''") + "'"


_HEADER = ("corecast completion for {shell}, generated by scripts/gen_cli_docs.py from corecast's "
           "argument parser: do not edit")


def bash_completion(root: Node) -> str:
    specs = _specs(root)
    cases = []
    for s in specs:
        cases.append(f"        {_sh(s.key + '|actions')}) REPLY={_sh(' '.join(s.actions))} ;;")
        cases.append(f"        {_sh(s.key + '|options')}) REPLY={_sh(' '.join(o for o, _ in s.options))} ;;")
        cases.append(f"        {_sh(s.key + '|valued')}) REPLY={_sh(' '.join(s.valued))} ;;")
        for opt, ch in s.choices.items():
            cases.append(f"        {_sh(s.key + '|choices ' + opt)}) REPLY={_sh(' '.join(ch))} ;;")
    body = "\n".join(cases)
    return f"""# {_HEADER.format(shell='bash')}.
# Installed as share/bash-completion/completions/corecast; or `source` this file.

# _corecast_words NODE WHAT: the words of NODE ("" for corecast, "sim", "sched sim", ...) in
# REPLY: WHAT is actions, options, valued (the options that take a value) or "choices OPTION".
_corecast_words() {{
    case "$1|$2" in
{body}
        *) REPLY='' ;;
    esac
}}

_corecast() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" node="" w i REPLY expect="" opt="" positional=0
    [[ $cur == "=" ]] && cur=""
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        [[ $w == "=" ]] && continue                     # --opt=value, split by COMP_WORDBREAKS
        if [[ -n $expect ]]; then
            expect=""
            continue
        fi
        if [[ $w == "--" ]]; then                       # the program: a command, then its words
            if ((i == COMP_CWORD - 1)); then
                COMPREPLY=($(compgen -c -- "$cur"))
            fi
            return 0
        fi
        if [[ $w == -* ]]; then
            if [[ $w != *=* ]]; then
                _corecast_words "$node" valued
                [[ " $REPLY " == *" $w "* ]] && expect=1 && opt="$w"
            fi
            continue
        fi
        if ((positional == 0)); then
            _corecast_words "$node" actions
            if [[ " $REPLY " == *" $w "* ]]; then
                node="${{node:+$node }}$w"
                continue
            fi
        fi
        positional=1
    done
    if [[ -n $expect ]]; then                           # an option's value
        _corecast_words "$node" "choices $opt"
        [[ -n $REPLY ]] && COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
        return 0
    fi
    if [[ $cur == -* ]]; then
        _corecast_words "$node" options
        COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
        return 0
    fi
    if ((positional == 0)); then
        _corecast_words "$node" actions
        [[ -n $REPLY ]] && COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    fi
    return 0                                            # nothing offered: files (-o default)
}}

complete -o default -F _corecast corecast
"""


def _zq(text: str) -> str:
    """A zsh single-quoted word."""
    return "'" + text.replace("'", "''") + "'"


def zsh_completion(root: Node) -> str:
    specs = _specs(root)
    acts, opts, valued, choices = [], [], [], []
    for s in specs:
        acts.append(f"    {_zq(s.key)} {_zq(chr(10).join(f'{a}:{s.action_help[a]}' for a in s.actions))}")
        described = [f"{o.replace(':', chr(92) + ':')}:{h}" for o, h in s.options]
        opts.append(f"    {_zq(s.key)} {_zq(chr(10).join(described))}")
        valued.append(f"    {_zq(s.key)} {_zq(' '.join(s.valued))}")
        for opt, ch in s.choices.items():
            choices.append(f"    {_zq(s.key + ' ' + opt)} {_zq(' '.join(ch))}")
    nl = "\n"
    return f"""#compdef corecast
# {_HEADER.format(shell='zsh')}.
# Installed as share/zsh/site-functions/_corecast.

typeset -gA _corecast_actions _corecast_options _corecast_valued _corecast_choices
# Per node ("" for corecast, "sim", "sched sim", ...): its actions and options ("name:help" lines),
# the options that take a value, and the choices of an option ("node option").
_corecast_actions=(
{nl.join(acts)}
)
_corecast_options=(
{nl.join(opts)}
)
_corecast_valued=(
{nl.join(valued)}
)
_corecast_choices=(
{nl.join(choices)}
)

_corecast() {{
    local node="" w i expect="" opt="" positional=0 cur="${{words[CURRENT]}}"
    local -a list
    for (( i = 2; i < CURRENT; i++ )); do
        w="${{words[i]}}"
        if [[ -n $expect ]]; then
            expect=""
            continue
        fi
        if [[ $w == "--" ]]; then                       # the program: a command, then its words
            words=("${{(@)words[i+1,-1]}}")
            (( CURRENT -= i ))
            _normal
            return
        fi
        if [[ $w == -* ]]; then
            if [[ $w != *=* && " ${{_corecast_valued[$node]}} " == *" $w "* ]]; then
                expect=1
                opt="$w"
            fi
            continue
        fi
        if (( positional == 0 )) && [[ -n ${{_corecast_actions[$node]}} ]]; then
            list=("${{(@f)_corecast_actions[$node]}}")
            if (( ${{list[(I)$w:*]}} )); then
                node="${{node:+$node }}$w"
                continue
            fi
        fi
        positional=1
    done
    if [[ -z $expect && $cur == -*=* ]]; then            # --opt=value
        opt="${{cur%%=*}}"
        compset -P '*='
        expect=1
    fi
    if [[ -n $expect ]]; then
        if [[ -n ${{_corecast_choices[$node $opt]}} ]]; then
            list=(${{=_corecast_choices[$node $opt]}})
            compadd -a list
        else
            _files
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        list=("${{(@f)_corecast_options[$node]}}")
        _describe -t options option list
        return
    fi
    if (( positional == 0 )) && [[ -n ${{_corecast_actions[$node]}} ]]; then
        list=("${{(@f)_corecast_actions[$node]}}")
        _describe -t actions action list
    fi
    [[ -n $node ]] && _files
}}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _corecast "$@"
else
    compdef _corecast corecast
fi
"""


# ------------------------------------------------------------------------------ all of it
def generate(out: Path) -> list[Path]:
    written = []
    man = out / "man"
    comp = out / "completions"
    man.mkdir(parents=True, exist_ok=True)
    comp.mkdir(parents=True, exist_ok=True)
    root = tree()
    for node in root.walk():
        path = man / f"{node.page}.1"
        _write_page(path, man_page(node, root))
        written.append(path)
    for shell, text in (("bash", bash_completion(root)), ("zsh", zsh_completion(root))):
        path = comp / f"corecast.{shell}"
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    for p in generate(dest):
        print(p.relative_to(dest))
