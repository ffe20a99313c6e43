"""Machine descriptions: bundled files, schema checks, the mispredict-penalty formula."""
from __future__ import annotations

import pytest

from corecast.errors import UserError
from corecast.sim.machine import bundled, load_machine, mispredict_penalty, parse_machine


def test_bundled_machines_load():
    names = bundled()
    assert {"atom-n540", "penryn-l5420", "zen4-genoa"} <= set(names)
    for n in names:
        m = load_machine(n)
        assert m.name == n
        assert m.frequency_hz > 1e8
        assert m.data_path()[0].level == 1 and m.instruction_path()[0].level == 1
        assert "branch_mispredict" in m.penalties
        for c in m.caches:
            assert c.sets & (c.sets - 1) == 0


def test_paper_machines_shape():
    atom = load_machine("atom-n540")
    assert atom.frequency_hz == pytest.approx(1.66e9)
    l1d = [c for c in atom.caches if c.name == "L1D"][0]
    assert (l1d.size, l1d.ways, l1d.sets) == (24 * 1024, 6, 64)
    # The formula fills in the mispredict penalty: 2 x 6 + 2 / 2.
    assert atom.penalties["branch_mispredict"] == pytest.approx(13.0)
    assert atom.penalty_sources["branch_mispredict"].startswith("formula")
    pen = load_machine("penryn-l5420")
    l2 = [c for c in pen.caches if c.level == 2][0]
    assert (l2.size, l2.ways, l2.shared, l2.instances(4)) == (6 << 20, 24, 2, 2)
    assert pen.penalties["branch_mispredict"] == pytest.approx(2 * 4 + 32 / 4)
    zen = load_machine("zen4-genoa")
    assert zen.penalty_sources["branch_mispredict"] == "given"
    l3 = [c for c in zen.caches if c.level == 3][0]
    assert l3.policy == "victim" and l3.instances(16) == 2


def test_formula():
    assert mispredict_penalty(10, 36, 3) == pytest.approx(32.0)


def _base(**over):
    d = {"name": "t", "frequency_hz": 2e9,
         "pipeline": {"fetch_depth": 5, "scheduler_size": 20, "drain_ipc": 4},
         "cache": [{"level": 1, "kind": "unified", "size": "32KiB", "ways": 8}]}
    d.update(over)
    return d


def test_sizes_and_defaults():
    m = parse_machine(_base())
    assert m.caches[0].size == 32768 and m.caches[0].line_size == 64
    assert m.penalties == {"branch_mispredict": 15.0}
    m2 = parse_machine(_base(cache=[{"level": 1, "kind": "unified", "size": 32768, "ways": 8,
                                     "line_size": "64B"}]))
    assert m2.caches[0].sets == 64


@pytest.mark.parametrize("cache, needle", [
    ({"level": 1, "kind": "unified", "size": "24KiB", "ways": 8}, "not a power of two"),
    ({"level": 1, "kind": "unified", "size": "48KiB", "ways": 6, "replacement": "plru"},
     "power-of-two number of ways"),
    ({"level": 1, "kind": "unified", "size": "32KiB", "ways": 8, "replacement": "mru"},
     "choose one of"),
    ({"level": 1, "kind": "unified", "size": "32KiB", "ways": 8, "line_size": 48},
     "line_size"),
    ({"level": 1, "kind": "unified", "size": "32KiB", "ways": 8, "colour": 1}, "unknown key"),
    ({"level": 1, "kind": "unified", "size": "lots", "ways": 8}, "not a size"),
])
def test_bad_cache_names_file_and_key(tmp_path, cache, needle):
    p = tmp_path / "m.toml"
    import json
    body = ('name = "t"\nfrequency_hz = 1e9\n[[cache]]\n' +
            "\n".join(f"{k} = {json.dumps(v)}" for k, v in cache.items()) + "\n")
    p.write_text(body)
    with pytest.raises(UserError) as ei:
        load_machine(p)
    msg = str(ei.value)
    assert str(p) in msg and "cache[0]" in msg and needle in msg


def test_sets_power_of_two_message():
    with pytest.raises(UserError, match=r"cache\[0\]\.ways: sets = .* = 48, which is not a power"):
        parse_machine(_base(cache=[{"level": 1, "kind": "unified", "size": "24KiB", "ways": 8}]),
                      "x.toml")


def test_hierarchy_checks():
    with pytest.raises(UserError, match="without gaps"):
        parse_machine(_base(cache=[{"level": 1, "kind": "unified", "size": 4096, "ways": 4},
                                   {"level": 3, "kind": "unified", "size": 65536, "ways": 4}]))
    with pytest.raises(UserError, match="no cache serves instruction"):
        parse_machine(_base(cache=[{"level": 1, "kind": "data", "size": 4096, "ways": 4}]))
    with pytest.raises(UserError, match="one line_size"):
        parse_machine(_base(cache=[
            {"level": 1, "kind": "unified", "size": 4096, "ways": 4},
            {"level": 2, "kind": "unified", "size": 65536, "ways": 4, "line_size": 128}]))


def test_tlb_and_branch_checks():
    ok = parse_machine(_base(tlb=[{"level": 1, "kind": "data", "entries": 72}],
                             branch={"kind": "bimodal", "table_size": 1024}))
    assert ok.tlbs[0].ways == 72 and ok.tlbs[0].sets == 1
    assert ok.branch.kind == "bimodal"
    with pytest.raises(UserError, match=r"tlb\[0\]\.ways"):
        parse_machine(_base(tlb=[{"level": 1, "kind": "data", "entries": 48, "ways": 4}]))
    with pytest.raises(UserError, match="history_bits"):
        parse_machine(_base(branch={"kind": "gshare", "table_size": 1024, "history_bits": 12}))
    with pytest.raises(UserError, match="table_size"):
        parse_machine(_base(branch={"kind": "gshare", "table_size": 1000}))


def test_penalty_keys_checked():
    with pytest.raises(UserError, match=r"penalties\.l4_hit: unknown key"):
        parse_machine(_base(penalties={"l4_hit": 3}))
    m = parse_machine(_base(penalties={"branch_mispredict": 20}))
    assert m.penalties["branch_mispredict"] == 20.0
    assert m.penalty_sources["branch_mispredict"] == "given"


def test_unknown_machine():
    with pytest.raises(UserError, match="unknown machine 'pentium9'.*atom-n540"):
        load_machine("pentium9")
    with pytest.raises(UserError, match="no such machine"):
        load_machine("/nonexistent/m.toml")


def test_bad_toml(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = \n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_machine(p)
