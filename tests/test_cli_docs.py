"""Man pages and shell completions are generated from the parser and kept up to date; man,
whatis and apropos find the pages; bash and zsh complete every command, action and option."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gen_cli_docs  # noqa: E402


def _normal(text: str) -> str:
    return re.sub(r'^(\.TH \S+ 1) "[0-9\\-]+"', r'\1 "DATE"', text, flags=re.M)


def test_generated_files_match_the_parser(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(ROOT) for d in ("man", "completions") for p in (ROOT / d).iterdir())
    assert made == kept, "run scripts/gen_cli_docs.py to regenerate man/ and completions/"
    for rel in made:
        assert _normal((tmp_path / rel).read_text()) == _normal((ROOT / rel).read_text()), \
            f"{rel} is out of date: run scripts/gen_cli_docs.py"


def test_completion_knows_the_commands_and_their_options():
    bash = (ROOT / "completions" / "corecast.bash").read_text()
    for word in ("measure", "predict", "usl", "--train-max-cores", "--cores"):
        assert word in bash
    man = (ROOT / "man" / "corecast-predict.1").read_text()
    assert "\\fB\\-\\-cores\\fR" in man


def _nodes():
    return [n for n in gen_cli_docs.tree().walk()]


def test_every_command_and_action_has_a_page():
    pages = {p.stem for p in (ROOT / "man").glob("*.1")}
    want = {n.page for n in _nodes()}
    assert {"corecast-sim-capture", "corecast-sched-sim", "corecast-meters-list", "corecast-sim-mrc-online"} <= want
    assert pages == want


_TH = re.compile(r'^\.TH (CORECAST(?:-[A-Z0-9-]+)?) 1 "\d{4}-\d\d-\d\d" "corecast [0-9][^"]*" "corecast manual"$')


@pytest.mark.skipif(shutil.which("lexgrog") is None, reason="needs man-db's lexgrog")
def test_every_page_has_a_th_line_of_the_usual_shape_and_a_name_lexgrog_reads():
    """`.TH CORECAST USL "1"` read as title CORECAST, section USL; NAME had no description, so
    lexgrog (and whatis, apropos) failed on every page (issue 26)."""
    pages = sorted((ROOT / "man").glob("*.1"))
    for page in pages:
        first = page.read_text().splitlines()[0]
        m = _TH.match(first)
        assert m and m.group(1) == page.stem.upper(), first
    r = subprocess.run(["lexgrog", *map(str, pages)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(pages)
    for page, line in zip(pages, lines):
        m = re.fullmatch(r'(\S+): "(\S+) - (.+)"', line)
        assert m and m.group(2) == page.stem and len(m.group(3)) > 10, line


def _man_env(bindir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "MANOPT")}
    env["PATH"] = f"{bindir}:/usr/bin:/bin"
    return env


@pytest.mark.skipif(shutil.which("mandb") is None, reason="needs man-db")
def test_install_man_puts_the_pages_where_man_whatis_and_apropos_find_them(tmp_path):
    """What scripts/setup.sh does for the environment, into a prefix of the test's own: man-db
    looks in PREFIX/share/man for whoever has PREFIX/bin on PATH."""
    (tmp_path / "bin").mkdir()
    r = subprocess.run([str(ROOT / "scripts" / "install_man.sh"), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0 and "note" not in r.stdout, r.stdout + r.stderr
    env = _man_env(tmp_path / "bin")
    for name in ("corecast-usl", "corecast-sim-capture", "corecast-sched-sim", "corecast"):
        r = subprocess.run(["man", "-w", name], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        assert Path(r.stdout.strip()).resolve() == (ROOT / "man" / f"{name}.1").resolve()
    r = subprocess.run(["whatis", "corecast-usl"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and re.match(r"corecast-usl \(1\)\s+- fit the Universal Scalability Law", r.stdout), r.stdout
    r = subprocess.run(["apropos", "corecast"], capture_output=True, text=True, env=env)
    found = {line.split()[0] for line in r.stdout.splitlines()}
    assert {n.page for n in _nodes()} <= found
    r = subprocess.run(["man", "-P", "cat", "corecast-sim-capture"], capture_output=True, text=True,
                       env={**env, "MANWIDTH": "100"})
    text = " ".join(r.stdout.replace("‐", "-").split())
    assert r.returncode == 0 and "NAME corecast-sim-capture - record a program's" in text, text[:300]
    assert text.startswith("CORECAST-SIM-CAPTURE(1) corecast manual CORECAST-SIM-CAPTURE(1)")


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man-db")
def test_after_setup_man_finds_the_pages_through_the_environment():
    """After `make setup` (scripts/setup.sh), `man corecast-usl` with the environment's bin on
    PATH finds this tree's page (run `make setup` if this fails after adding a page)."""
    env = _man_env(Path(sys.prefix) / "bin")
    for n in _nodes():
        r = subprocess.run(["man", "-w", n.page], capture_output=True, text=True, env=env)
        assert r.returncode == 0, f"{n.page}: {r.stderr.strip()} (run make setup)"


def _want(node) -> tuple[list[str], list[str]]:
    opts = [s for a in node.parser._actions if a.option_strings and a.help != argparse.SUPPRESS
            for s in a.option_strings]
    return [c.words[-1] for c in node.children], opts


def test_bash_completion_offers_every_action_and_every_option_of_each():
    """`corecast sim <TAB>` offered no capture, mrc, gen; `corecast sched sim --<TAB>` nothing."""
    nodes = _nodes()
    script = [f"source {ROOT / 'completions' / 'corecast.bash'}",
              'c() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _corecast; '
              'echo "${COMPREPLY[*]}"; }']
    for n in nodes:
        words = " ".join(["corecast", *n.words])
        script += [f"c {words} ''", f"c {words} -"]
    r = subprocess.run(["bash", "--norc", "-c", "\n".join(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 2 * len(nodes)
    for i, n in enumerate(nodes):
        actions, opts = _want(n)
        assert out[2 * i].split() == actions, (n.words, out[2 * i])
        assert sorted(out[2 * i + 1].split()) == sorted(opts), (n.words, out[2 * i + 1])
        assert "--help" in opts and ("--verbose" in opts or not n.words)
    by = {n.words: (out[2 * i], out[2 * i + 1]) for i, n in enumerate(nodes)}
    assert by[("sim",)][0].split() == ["capture", "convert", "gen", "machines", "mrc", "mrc-online", "online"]
    assert "--sf-source" in by[("sched", "sim")][1].split()


def _bash_complete(*words: str) -> list[str]:
    script = (f"source {ROOT / 'completions' / 'corecast.bash'}\n"
              'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _corecast; printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["bash", "--norc", "-c", script, "bash", *words], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_bash_completion_knows_values_actions_after_options_and_the_program():
    assert _bash_complete("corecast", "sched", "sim", "--sf-source", "") == ["true", "ipc-sampling", "model"]
    assert _bash_complete("corecast", "usl", "--format", "=", "c") == ["csv"]     # --format=c
    assert _bash_complete("corecast", "meters", "--interval", "1", "") == ["show", "list", "replay"]
    assert _bash_complete("corecast", "sim", "capture", "--b") == ["--backend"]
    assert _bash_complete("corecast", "sim", "t.cctrace", "") == []             # files: not an action
    assert _bash_complete("corecast", "sim", "-m", "x", "--c") == ["--cores", "--chunk"]
    assert "true" in _bash_complete("corecast", "stat", "--", "tru")              # a command after --


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_completion_offers_every_action_and_every_option_of_each():
    """The zsh function, with the completion system's functions replaced by ones that print
    what they were given (so that it runs outside an interactive shell)."""
    nodes = _nodes()
    script = ['compadd() { local a; for a in "${list[@]}"; do print -rn -- "${a%%:*} "; done }',
              '_describe() { local a; for a in "${(@P)4}"; do print -rn -- "${a%%:*} "; done }',
              '_files() { print -rn -- "FILES " }', "compset() { :; }", "compdef() { :; }",
              f"source {ROOT / 'completions' / 'corecast.zsh'}",
              't() { words=("$@"); CURRENT=${#words}; _corecast; print }']
    for n in nodes:
        words = " ".join(["corecast", *n.words])
        script += [f"t {words} ''", f"t {words} -"]
    r = subprocess.run(["zsh", "-f", "-c", "\n".join(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 2 * len(nodes)
    for i, n in enumerate(nodes):
        actions, opts = _want(n)
        offered = [w for w in out[2 * i].split() if w != "FILES"]
        assert offered == actions, (n.words, out[2 * i])
        assert sorted(out[2 * i + 1].split()) == sorted(opts), (n.words, out[2 * i + 1])


@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed")
def test_measure_help_throughput_example_matches_what_its_program_prints():
    """`corecast measure -h`'s example gave `--throughput 'events per second:...'` to `sysbench
    threads`, which never prints that line (only `sysbench cpu` does): every run of the example
    noted 'the throughput regex matched nothing'. Run the example's program and apply its regex."""
    import shlex

    from corecast.cli import measure

    m = re.search(r"--throughput '([^']+)' \\\s*\n\s*-o \S+ -- (sysbench [^\n]+)", measure.DESCRIPTION)
    assert m, "the sysbench example is gone from measure's help"
    regex = m.group(1)
    argv = [a.replace("{threads}", "1").replace("--time=2", "--time=1") for a in shlex.split(m.group(2))]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    assert re.search(regex, out), (argv, regex, out[-500:])
