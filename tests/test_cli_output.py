"""cli/_output.py: the one output tail of the commands (issue 27) -- the terminal's table, the
--json document or a tidy table (csv, records), on standard output or to -o -- and that no
command writes one by itself any more."""
from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from corecast import messages
from corecast.cli._output import print_document
from corecast.errors import UserError

CLI = Path(__file__).resolve().parent.parent / "src" / "corecast" / "cli"
DOC = {"name": "demo", "points": [{"cores": 1, "t": 2.5, "flags": ["a", "b"], "note": None},
                                  {"cores": 2, "t": 1.25, "flags": [], "note": "x,y"}]}


def points(doc):
    return doc["points"]


class Calls:
    """A document maker and a renderer that count their calls."""

    def __init__(self, doc=DOC):
        self.doc, self.made, self.rendered = doc, 0, 0

    def make(self):
        self.made += 1
        return self.doc

    def render(self):
        self.rendered += 1
        print("THE TABLE")


@pytest.fixture(autouse=True)
def normal_messages():
    messages.configure(messages.NORMAL, "test")
    yield
    messages.configure(messages.NORMAL, "")


def test_json_is_the_document_with_its_indent_and_one_line_end(capsys):
    c = Calls()
    print_document("json", c.make, c.render, rows=points, indent=1)
    out = capsys.readouterr()
    assert out.out == json.dumps(DOC, indent=1) + "\n" and out.err == ""
    assert (c.made, c.rendered) == (1, 0)
    print_document("json", DOC, c.render)                     # indent 2 unless told, no rows needed
    assert capsys.readouterr().out == json.dumps(DOC, indent=2) + "\n"


def test_csv_is_a_header_and_a_line_a_row(capsys):
    print_document("csv", DOC, Calls().render, rows=points)
    assert capsys.readouterr().out == "cores,t,flags,note\n1,2.5,a;b,\n2,1.25,,\"x,y\"\n"


def test_records_is_a_json_array_of_the_rows(capsys):
    print_document("records", DOC, Calls().render, rows=points)
    assert json.loads(capsys.readouterr().out) == [{"cores": 1, "t": 2.5, "flags": "a;b", "note": None},
                                                   {"cores": 2, "t": 1.25, "flags": "", "note": "x,y"}]


def test_the_table_renders_and_never_makes_the_document(capsys):
    c = Calls()
    print_document("table", c.make, c.render, rows=points)
    assert capsys.readouterr().out == "THE TABLE\n"
    assert (c.made, c.rendered) == (0, 1)


def test_a_document_without_rows_shows_its_table_for_csv_and_records(capsys):
    c = Calls()
    for fmt in ("csv", "records"):
        print_document(fmt, c.make, c.render)
    assert capsys.readouterr().out == "THE TABLE\n" * 2 and c.made == 0


def test_default_makes_the_rows_from_the_document_json_reads_back(capsys):
    class Odd:
        def __str__(self):
            return "odd"

    seen = []

    def rows(doc):
        seen.append(doc)
        return doc["points"]

    doc = {"points": [{"cores": 1, "what": Odd(), "pair": (1, 2)}]}
    print_document("csv", doc, None, rows=rows, default=str)
    assert capsys.readouterr().out == "cores,what,pair\n1,odd,1;2\n"
    assert seen == [{"points": [{"cores": 1, "what": "odd", "pair": [1, 2]}]}]   # a copy, as JSON holds it
    print_document("json", doc, None, default=str, indent=None)
    assert capsys.readouterr().out == '{"points": [{"cores": 1, "what": "odd", "pair": [1, 2]}]}\n'


def test_allow_nan_false_refuses_before_a_byte_is_written(capsys):
    bad = {"points": [{"cores": 1, "t": math.nan}]}
    for fmt in ("json", "csv"):
        with pytest.raises(ValueError):
            print_document(fmt, bad, None, rows=points, allow_nan=False, default=str)
    assert capsys.readouterr().out == ""
    print_document("json", bad, None, indent=None)           # json.dumps's own default: NaN written
    assert capsys.readouterr().out == '{"points": [{"cores": 1, "t": NaN}]}\n'


def test_output_writes_the_file_and_names_it_on_stderr(tmp_path, capsys):
    for fmt, want in (("json", json.dumps(DOC, indent=1) + "\n"), ("csv", 'cores,t,flags,note\n1,2.5,a;b,\n2,1.25,,"x,y"\n')):
        f = tmp_path / f"out.{fmt}"
        print_document(fmt, DOC, None, rows=points, indent=1, output=f, what="the demo")
        out = capsys.readouterr()
        assert f.read_text() == want
        assert out.out == "" and out.err == f"wrote {f}: the demo\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "out.json"]     # no temporary left
    messages.configure(messages.QUIET, "test")
    print_document("json", DOC, None, output=tmp_path / "q.json")
    assert capsys.readouterr().err == "" and (tmp_path / "q.json").read_text() == json.dumps(DOC, indent=2) + "\n"


def test_output_that_cannot_be_written_is_a_user_error_and_leaves_nothing(tmp_path, capsys):
    with pytest.raises(UserError, match="nofolder"):
        print_document("json", DOC, None, output=tmp_path / "nofolder" / "x.json")
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert list(tmp_path.iterdir()) == []


def test_a_format_it_cannot_write_is_refused(capsys):
    with pytest.raises(ValueError, match="no yaml text"):
        print_document("yaml", DOC, Calls().render, rows=points)
    with pytest.raises(ValueError, match="no terminal table"):
        print_document("table", DOC, None)
    assert capsys.readouterr().out == ""


def test_the_commands_write_their_documents_only_through_it():
    """No command module (stat's streaming writers aside) encodes a JSON document or a tidy
    table by itself: each goes through print_document, so the formats stay one vocabulary."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        if path.name in ("_output.py", "stat.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                if name in ("dumps", "dump", "table_text"):
                    found.append(f"{path.name}:{node.lineno} {name}")
    assert found == []
