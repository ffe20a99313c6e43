"""A file's metadata of the wrong kind, the sync shim's reports, and the helper programs corecast
runs as root.

- A Dataset's JSON (or a CSV's metadata line or sidecar) and a campaign file name the machine,
  each column's description, notes and side tables (the per-lock table); a value of the wrong
  kind there (a number where a string belongs, a string where a number belongs, an integer past
  the largest float) was taken as it was and failed later, wherever it was first used: `info`,
  `predict` and `locks` ended with an internal error (exit status 1) instead of one line naming
  the file and the value (status 2). So did `lscpu -J` output whose fields are not objects.
- The sync shim's reports were read back with read_text(): a FIFO the measured program left at
  a report's name made `measure` wait for ever, a link to /dev/zero was read without end, and a
  link to a report elsewhere was counted as one of the run's processes.
- Helper programs (addr2line for the lock table's call sites, mount for tracefs) were looked up
  in PATH as they were: as root, a folder of another user's in PATH (a PATH kept by `sudo -E`)
  or the current folder (an empty entry) ran that user's program as root. Loading libpfm4 went
  through ctypes.util.find_library, which runs gcc, cc, ld and objdump found through PATH when
  the loader's cache has no libpfm.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from corecast import native, store
from corecast.dataset import ColumnInfo


def _one_line(r) -> str:
    lines = [line for line in r.err.strip().splitlines() if line]
    assert r.code == 2, (r.code, r.out[-500:], r.err)
    assert "internal error" not in r.err and "Traceback" not in r.err, r.err
    return lines[-1]


def _dataset(**meta) -> dict:
    rows = [{"cores": c, "repetition": 0, "time_s": 8.0 / c, "lock_wait_cycles": 1e6 * c} for c in (1, 2, 4)]
    doc = {"format": "corecast-dataset", "version": 1, "rows": rows,
           "columns": {"time_s": {"kind": "time", "unit": "s", "source": "measured: wall clock"},
                       "lock_wait_cycles": {"kind": "stall", "unit": "cycles", "source": "measured: shim"}},
           "machine": {"cpu_model": "Test CPU", "sockets": 1, "cores": 4, "nominal_freq_hz": 2.5e9}}
    for key, value in meta.items():
        part, _, name = key.partition("__")
        if not name:
            doc[part] = value
        elif part == "machine":
            doc["machine"][name] = value
        else:
            doc["columns"]["lock_wait_cycles"][name] = value
    return doc


#: A value of the wrong kind, where it is (`columns` is lock_wait_cycles' description), and
#: what the one line names: each was an internal error of `info` (and most of `predict`).
WRONG = {
    "a column's source an object": ({"columns__source": {"a": 1}}, "'source'"),
    "a column's source past the largest float": ({"columns__source": 18446744073709551621}, "'source'"),
    "the CPU model a number": ({"machine__cpu_model": 5}, "'cpu_model'"),
    "the clock past the largest float": ({"machine__nominal_freq_hz": 10 ** 400}, "'nominal_freq_hz'"),
    "the clock a string": ({"machine__nominal_freq_hz": "fast"}, "'nominal_freq_hz'"),
    "the notes a list": ({"notes": [1, 2]}, "'notes'"),
}
#: Values of the wrong kind that were taken as they were, into reports and saved copies: refused
#: where the file is read, as those above are.
TAKEN = {
    "a column's unit a number": ({"columns__unit": 1000000000000}, "'unit'"),
    "the sockets a string": ({"machine__sockets": "two"}, "'sockets'"),
    "the cores past the bound": ({"machine__cores": 10 ** 12}, "'cores'"),
    "the command a number": ({"command": 5}, "'command'"),
}


@pytest.mark.parametrize("case", list(WRONG))
@pytest.mark.parametrize("command", ["info", "predict"])
def test_dataset_metadata_of_the_wrong_kind_is_one_line(cli, tmp_path, case, command):
    meta, named = WRONG[case]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_dataset(**meta)))
    args = ["--cores", "8"] if command == "predict" else []
    line = _one_line(cli(command, path, *args))
    assert str(path) in line and named in line, line


@pytest.mark.parametrize("case", list(TAKEN))
def test_dataset_metadata_of_the_wrong_kind_is_refused_where_it_is_read(cli, tmp_path, case):
    meta, named = TAKEN[case]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_dataset(**meta)))
    line = _one_line(cli("info", path))
    assert str(path) in line and named in line, line


def test_a_row_value_past_the_largest_float_is_one_line(cli, tmp_path):
    doc = _dataset()
    doc["rows"][1]["lock_wait_cycles"] = 2 ** 64 * 10 ** 300
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))
    line = _one_line(cli("info", path))
    assert "rows[1]" in line and "not a finite number" in line, line


def test_the_genuine_dataset_still_reads(cli, tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_dataset()))
    r = cli("info", path)
    assert r.code == 0, r.err
    assert "Test CPU" in r.out


LOCK_ROW = {"cores": 2, "repetition": 0, "lock": "&g_mutex", "lock_kind": "mutex", "site": "worker (prog)",
            "call": "pthread_mutex_lock(&g_mutex)", "instances": 1, "acquisitions": 2000000, "contended": 10,
            "wait_s": 0.01, "max_wait_s": 0.001, "hold_s": 7.6e-08, "threads": 2}


def _with_locks(row_change: dict, notes: dict | None = None) -> dict:
    doc = {"format": "corecast-dataset", "version": 1,
           "rows": [{"cores": 2, "repetition": 0, "time_s": 2.0, "lock_acquisitions": 2000000}],
           "tables": {"locks": [{**LOCK_ROW, **row_change}]},
           "notes": notes or {"campaign": {"threads_per_core": 1}}}
    return doc


@pytest.mark.parametrize("change,named", [({"hold_s": "-0"}, "'hold_s'"), ({"acquisitions": "many"}, "'acquisitions'"),
                                          ({"instances": "x"}, "'instances'"), ({"repetition": "first"}, "'repetition'"),
                                          ({"max_wait_s": 10 ** 400}, "'max_wait_s'")])
def test_a_lock_table_value_of_the_wrong_kind_is_one_line(cli, tmp_path, change, named):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_with_locks(change)))
    line = _one_line(cli("locks", path))
    assert str(path) in line and named in line, line


@pytest.mark.parametrize("notes", [{"campaign": {"threads_per_core": "x"}}, {"campaign": {"threads_per_core": [2]}},
                                   {"campaign": "socket"}])
def test_campaign_notes_of_the_wrong_kind_are_one_line(cli, tmp_path, notes):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_with_locks({}, notes)))
    line = _one_line(cli("locks", path))
    assert str(path) in line and "campaign" in line, line


def test_the_genuine_lock_table_still_reads(cli, tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_with_locks({})))
    r = cli("locks", path)
    assert r.code == 0, r.err
    assert "&g_mutex" in r.out


def _campaign(path: Path, machine: dict) -> Path:
    lock = {k: v for k, v in LOCK_ROW.items() if k not in ("cores", "repetition")}
    with store.Campaign.create(path, command=["prog"], config={"cores": [1, 2]}, machine=machine) as c:
        for s in range(2):
            c.record_run(store.RunRecord(slot=s, cores=1 + s, repetition=0, warmup=False, cpus=[0], argv=["prog"],
                                         status="ok", exit_status=0, values={"time_s": 4.0 / (1 + s)},
                                         tables={"locks": [lock]}),
                         [ColumnInfo("time_s", "time", "s", "measured: wall clock", "ok")] if s == 0 else [])
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return path


def test_a_campaign_threads_per_core_of_the_wrong_kind_is_one_line(cli, tmp_path):
    path = _campaign(tmp_path / "c.db", {})
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps({"cores": [1, 2], "threads_per_core": "x"}),))
    con.commit()
    con.close()
    line = _one_line(cli("locks", path))
    assert str(path) in line and "threads_per_core" in line, line


def test_the_genuine_campaign_still_reads(cli, tmp_path):
    path = _campaign(tmp_path / "c.db", {"cpu_model": "Test CPU", "cores": 2, "nominal_freq_hz": 2.5e9})
    r = cli("locks", path)
    assert r.code == 0, r.err
    assert "&g_mutex" in r.out
    assert cli("info", path).code == 0


@pytest.mark.parametrize("machine,named", [({"cpu_model": 5}, "'cpu_model'"), ({"cpu_model": ["A", "B"]}, "'cpu_model'"),
                                           ({"nominal_freq_hz": "fast"}, "'nominal_freq_hz'")])
def test_a_campaign_machine_of_the_wrong_kind_is_one_line(cli, tmp_path, machine, named):
    path = _campaign(tmp_path / "c.db", machine)
    line = _one_line(cli("info", path))
    assert str(path) in line and named in line, line


# ------------------------------------------------------------------------------ helper programs

def _planted(folder: Path, names, marker: Path, owner: int | None) -> None:
    """Programs at `names` in `folder` that write `marker` when they run (owned by `owner`)."""
    folder.mkdir(exist_ok=True)
    for name in names:
        p = folder / name
        p.write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n")
        p.chmod(0o755)
        if owner is not None:
            os.chown(p, owner, owner)
    if owner is not None:
        os.chown(folder, owner, owner)


@pytest.fixture
def users_folder(tmp_path):
    """A folder of another user's (nobody's), for root's PATH."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the planted programs belong to another user")
    return tmp_path / "bin", 65534


def test_system_program_skips_another_users_folder_as_root(tmp_path, users_folder, monkeypatch):
    folder, uid = users_folder
    marker = tmp_path / "ran"
    _planted(folder, ["addr2line", "mount"], marker, uid)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    for name in ("addr2line", "mount"):
        found = native.system_program(name)
        assert found is None or not found.startswith(str(folder)), found


def test_system_program_never_looks_in_the_current_folder(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    _planted(tmp_path / "here", ["corecast-test-helper"], marker, None)
    monkeypatch.chdir(tmp_path / "here")
    for path in ("", ".", "/nonexistent:", ":/nonexistent"):
        monkeypatch.setenv("PATH", path)
        assert native.system_program("corecast-test-helper") is None, path


def test_addr2line_of_another_user_is_not_run_as_root(tmp_path, users_folder, monkeypatch):
    from corecast.collect import symbols
    folder, uid = users_folder
    marker = tmp_path / "ran"
    _planted(folder, ["addr2line"], marker, uid)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    symbols.addr2line(sys.executable, [0x1000, 0x2000])
    assert not marker.exists(), marker.read_text()


def test_mounting_tracefs_runs_no_mount_of_another_user(tmp_path, users_folder, monkeypatch):
    """Where tracefs is not mounted, root mounts it: with the `mount` of root's system only (PATH
    names only another user's folder here, so nothing is mounted at all)."""
    from corecast.collect.events import kernel
    folder, uid = users_folder
    marker = tmp_path / "ran"
    _planted(folder, ["mount"], marker, uid)
    unmounted = tmp_path / "tracing"
    unmounted.mkdir()
    monkeypatch.setattr(kernel, "TRACEFS_DIRS", (unmounted,))
    monkeypatch.setenv("PATH", str(folder))
    assert kernel.tracefs_dir() is None
    assert not marker.exists(), marker.read_text()


def test_sim_runs_no_objdump_qemu_or_valgrind_of_another_user(tmp_path, users_folder, monkeypatch):
    # `sim capture` and `sim --online` ran the first objdump, qemu-x86_64 and valgrind in PATH
    from corecast.errors import UserError
    from corecast.sim import capture, x86
    folder, uid = users_folder
    marker = tmp_path / "ran"
    _planted(folder, ["objdump", "qemu-x86_64", "valgrind"], marker, uid)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    for found in (x86.objdump(), capture.qemu_path()):
        assert found is None or not found.startswith(str(folder)), found
    try:
        assert not capture.valgrind_path().startswith(str(folder))
    except UserError:
        pass
    x86.objdump_lines(sys.executable, 0x1000, 0x1010)
    assert not marker.exists(), marker.read_text()


def test_loading_libpfm_runs_no_program(monkeypatch):
    """ctypes.util.find_library runs /sbin/ldconfig, and gcc, cc, ld and objdump from PATH where
    the loader's cache has no libpfm: loading it must run nothing."""
    from corecast.collect.events import pfm
    ran: list = []
    real = subprocess.Popen.__init__

    def recording(self, args, *a, **kw):
        ran.append(args)
        return real(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", recording)
    monkeypatch.setattr(pfm, "_LIB", None)
    monkeypatch.setattr(pfm, "_LOAD_ERROR", None)
    monkeypatch.delenv("CORECAST_LIBPFM", raising=False)
    pfm.load()
    assert ran == []


@pytest.mark.parametrize("lscpu,said", [
    ([{"field": "CPU(s):", "data": "2"}, []], "each field of 'lscpu' must be an object"),
    ([{"field": "CPU(s):", "data": "2", "children": "x"}], "must be a list of fields"),
    ({"field": "CPU(s):"}, "must be a list of fields"),
])
def test_lscpu_json_of_the_wrong_shape_is_one_line(cli, tmp_path, lscpu, said):
    """`--target-machine` with `lscpu -J` output whose fields are not objects in lists."""
    data = tmp_path / "d.json"
    data.write_text(json.dumps(_dataset()))
    spec = tmp_path / "lscpu.json"
    spec.write_text(json.dumps({"lscpu": lscpu}))
    line = _one_line(cli("predict", data, "--cores", "8", "--target-machine", spec))
    assert str(spec) in line and said in line, line


# ------------------------------------------------------------------------- the sync shim's reports

REPORT = "corecast-shim 1\npid {pid}\nppid 1\nclock tsc\nticks 2000000\nns 2000000\ncpus 1\nend exit\n" \
         "thread {pid} exited 0 run_ns 5 delay_ns 7 slices 1\ndone\n"


def test_shim_reports_are_read_only_as_regular_files_at_their_names(tmp_path):
    """The measured program can leave anything at a report's name in its report folder: a link
    is not followed (it was read as one of the run's processes), and only a regular file is read."""
    from corecast.collect import shim
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(REPORT.format(pid=99))
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "shim.5").write_text(REPORT.format(pid=5))
    (folder / "shim.99").symlink_to(elsewhere)
    got = shim.read_reports(folder)
    assert [p.pid for p in got.processes] == [5]
    assert any("shim.99" in b and "link" in b for b in got.incomplete), got.incomplete


@pytest.mark.slow
def test_a_fifo_or_an_endless_file_at_a_report_name_does_not_stall_measure(tmp_path):
    """A FIFO with no writer and a link to /dev/zero at report names: read_reports returns (in a
    child with a memory bound; the generous time limit only guards the suite against a hang)."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "shim.5").write_text(REPORT.format(pid=5))
    os.mkfifo(folder / "shim.6")
    (folder / "shim.7").symlink_to("/dev/zero")
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
            "from corecast.collect import shim; s = shim.read_reports(sys.argv[1]); "
            "print(len(s.processes), len(s.incomplete))")
    try:
        p = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("read_reports waited on the FIFO (or read /dev/zero) for five minutes")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["1", "2"], p.stdout
