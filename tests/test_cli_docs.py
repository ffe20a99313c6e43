"""Man pages and shell completions are generated from the parser and kept up to date."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _normal(text: str) -> str:
    return re.sub(r'^\.TH (.*?) "\d{4}\\-\d\d\\-\d\d"', r'.TH \1 "DATE"', text, flags=re.M)


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
