"""`corecast info`: what a file holds, as text a person reads (issue 15: raw Python dicts)."""
from __future__ import annotations

import json


def test_info_text_has_no_raw_python_and_keeps_bracketed_sources(cli, tmp_path):
    doc = {"format": "corecast-dataset", "version": 1,
           "columns": {"time_s": {"kind": "time", "unit": "s", "source": "measured: wall clock"},
                       "page_faults": {"kind": "counter", "source": "measured: perf software event page_faults, inherited"},
                       "cpu_migrations": {"kind": "counter", "source": "measured: perf software event cpu_migrations, inherited"},
                       "stall_x": {"kind": "stall", "source": "measured: perf event stall_x [event=0xae,umask=0x1]"}},
           "notes": {"campaign": {"runs": 2, "complete": True}, "notices": ["no hardware PMU", "second"]},
           "rows": [{"cores": 1, "time_s": 2.0, "page_faults": 10, "cpu_migrations": 0, "stall_x": 5},
                    {"cores": 2, "time_s": 1.1, "page_faults": 12, "cpu_migrations": 1, "stall_x": 9}]}
    p = tmp_path / "d.json"
    p.write_text(json.dumps(doc))
    r = cli("info", p)
    assert r.code == 0, r.err
    assert "{'" not in r.out and "['" not in r.out and "True" not in r.out
    assert "[event=0xae,umask=0x1]" in r.out                      # rich used to eat it as markup
    assert "page_faults, cpu_migrations: measured: perf software event (the column), inherited" in r.out
    assert "campaign: runs 2, complete yes" in r.out
    assert "  - no hardware PMU" in r.out and "  - second" in r.out
