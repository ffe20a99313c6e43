"""Issue 25 ("Safe to run as root on a shared machine"), the whole list as one table.

AUDIT below has one row per defect the issue lists, in the issue's order and with its words,
plus the follow-ups found when the list was re-checked (the F rows). A row is

- **run here**: the issue's command line, in a child process with a 30 s limit. It must end in
  exit status 2 with one `error:` line holding the row's text (a mistake), or in exit 0 with a
  result its `check` finds right (where the defect was a wrong result); never exit status 1,
  never "internal error" or a traceback; and no device node on the machine (nor the private ones
  the rows write to) is replaced;
- **and/or proved by a named test** elsewhere, where the proof needs more than a command line:
  a second user, a server, a daemon, 100 kills. `test_every_reference_names_a_test` checks
  that each named test is there, so the table cannot point at nothing.

Reading the table against the issue is the audit: every defect has a row, every row a proof.
The figures (rows, internal errors, exit 0 with a wrong result, runs past 30 s, devices
replaced, writes through a planted link, leftovers) are in the report of the branch that made
this module.
"""
from __future__ import annotations

import ast
import json
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from conftest import marked_pids

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")
LIMIT_S = 30                     # the issue's "0 runs past 30 s"
OTHER_UID = 4242                 # the owner of a planted link (not root, not us)
DEVICES = ("/dev/null", "/dev/full", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty")
SHM = Path("/dev/shm")


@dataclass
class Row:
    key: str                     # S: safety and security, I: internal errors, W: exit 0 wrong, F: follow-ups
    issue: str                   # the issue's words
    argv: list[str] | None = None        # run here ({d}: the module's folder, {pid}: a unique token)
    text: str = ""               # the one line must hold this (exit 2); "" with `check`: exit 0
    check: Callable[["Result", Path, str], None] | None = None     # (result, folder, token) of an exit 0 or 2
    refs: list[str] = field(default_factory=list)    # tests elsewhere that prove it (FILE::TEST)


@dataclass
class Result:
    code: int
    out: str
    err: str


# ------------------------------------------------------------------------ checks of an exit 0
def _null_untouched(r: Result, d: Path, tok: str) -> None:
    assert "wrote" not in r.err, r.err              # nothing was made: a device is not announced


def _efficiency_half(r: Result, d: Path, tok: str) -> None:
    doc = json.loads(r.out)
    eff = {p["cores"]: p["efficiency"] for p in doc["points"]}
    assert eff[32] == pytest.approx(0.5, rel=1e-6), eff          # was printed 0


def _gamma_interval(r: Result, d: Path, tok: str) -> None:
    doc = json.loads(r.out)
    lo, hi = doc["gamma_ci"]
    assert 0 < lo <= doc["gamma"] <= hi, (lo, doc["gamma"], hi)   # was inverted
    assert doc["amdahl"]["beta_needed"] is True                   # was "β not needed"


def _no_leftover_board(r: Result, d: Path, tok: str) -> None:
    name = f"a25d{tok}"
    left = sorted(p.name for p in SHM.iterdir() if p.name.startswith((f"corecast-{name}", f".corecast-{name}.")))
    assert left == [f"corecast-{name}"], left                    # no .tmp, no .app beside the folder


def _no_folder_made(r: Result, d: Path, tok: str) -> None:
    assert not (d / "nonexistent").exists()                      # folders are never created


def _victim_intact(r: Result, d: Path, tok: str) -> None:
    assert (d / "victim").read_text() == "root's file\n" and (d / "shared" / "out.cctrace").is_symlink()


# --------------------------------------------------------------------------------- the table
A = "tests/test_audit_issue25.py::"
OUT = "tests/test_output_files.py::"
SEC = "tests/test_security_meters_serve.py::"
LEFT = "tests/test_leftovers.py::"
INB = "tests/test_input_bounds.py::"
TOOL = "tests/test_tool_bounds.py::"
DEEP = "[" * 100_000 + "]" * 100_000

AUDIT: list[Row] = [
    # ============================================================ Safety and security
    # 1. Outputs replace device files
    Row("S1.1", "sim gen stream -n 1000 -o /dev/full exits 0, says 'wrote', leaves a regular file",
        ["sim", "gen", "stream", "-n", "1000", "-o", "{d}/full"], "No space left on device",
        refs=[OUT + "test_a_full_device_is_one_line_and_stays_a_device"]),
    Row("S1.2", "export -o /dev/full", ["export", SPEC, "-o", "{d}/full"], "No space left on device",
        refs=[OUT + "test_a_full_device_is_one_line_and_stays_a_device"]),
    Row("S1.3", "sim convert -o /dev/full", ["sim", "convert", "{d}/t.din", "-o", "{d}/full"],
        "No space left on device", refs=[OUT + "test_a_full_device_is_one_line_and_stays_a_device"]),
    Row("S1.4", "sim mrc -o /dev/full", ["sim", "mrc", "{d}/pp.cctrace", "--json", "-o", "{d}/full"],
        "No space left on device", refs=[OUT + "test_a_full_device_is_one_line_and_stays_a_device"]),
    Row("S1.5", "chase -o /dev/full", ["chase", "--threads", "1", "--chains", "1", "--size", "1MiB", "--duration",
                                       "0.05", "--json", "-o", "{d}/full"],
        "No space left on device", refs=[OUT + "test_a_full_device_is_one_line_and_stays_a_device"]),
    Row("S1.6", "sim capture -o /dev/full (valgrind)", None,
        refs=[OUT + "test_a_full_device_is_one_line_and_stays_a_device"]),
    Row("S1.7", "as root, -o /dev/null destroys /dev/null for the whole machine",
        ["sim", "gen", "stream", "-n", "1000", "-o", "{d}/null"], check=_null_untouched,
        refs=[OUT + "test_the_real_dev_null_stays_a_device", OUT + "test_a_null_device_is_written_in_place_and_not_announced"]),
    Row("S1.8", "(careful: a planted link in a shared folder) -o through another user's link",
        ["sim", "gen", "stream", "-n", "1000", "-o", "{d}/shared/out.cctrace"], "owned by another user",
        check=_victim_intact, refs=[OUT + "test_a_folder_a_missing_folder_and_a_planted_link_are_refused"]),
    # 2. The meters blackboard can be hijacked
    Row("S2.1", "another user's symlinks at /dev/shm/.corecast-NAME.<pid>.tmp: the daemon writes through them",
        None, refs=[SEC + "test_symlinks_planted_at_the_temporary_names_are_never_written_through"]),
    Row("S2.2", "a planted regular file leaves the live board owned by the other user", None,
        refs=[SEC + "test_a_file_another_user_planted_at_the_names_is_refused"]),
    Row("S2.3", "a FIFO at /dev/shm/corecast-NAME blocks meters show forever",
        ["meters", "show", "--blackboard", "a25f{pid}"], "is a FIFO, not a blackboard",
        refs=[SEC + "test_a_fifo_at_the_board_name_never_blocks"]),
    Row("S2.4", "... blocks the daemon and serve; serve then ignores SIGTERM", None,
        refs=[SEC + "test_a_fifo_at_the_board_name_never_blocks",
              SEC + "test_a_fifo_at_a_board_name_never_blocks_serve_and_sigterm_stops_it"]),
    # 3. The dashboard obeys any local user
    Row("S3.1", "serve --allow-commands: any local user gets the token from / and POSTs /api/stat", None,
        refs=[SEC + "test_another_user_cannot_start_a_command_through_serve"]),
    Row("S3.2", "--listen 0.0.0.0:P answers a foreign Host: header with 200", None,
        refs=[SEC + "test_serve_on_every_address_refuses_a_foreign_host"]),
    Row("S3.3", "the meters endpoint checks no Host and spends a thread per idle connection", None,
        refs=[SEC + "test_meters_endpoint_checks_host_and_holds_idle_connections_in_one_thread",
              SEC + "test_httpd_closes_idle_connections_and_keeps_a_bounded_number", SEC + "test_host_rule"]),
    # 4. measure --resume shows one command and runs another
    Row("S4", "measure --resume on a tampered campaign printed one command and ran another", None,
        refs=[LEFT + "test_resume_refuses_a_campaign_whose_metadata_and_settings_disagree"]),
    # 5. Unbounded inputs
    Row("S5.1", "predict --target-machine sockets=1000000000,cores=1000000000,smt=1000000 grew to 22.7 GB",
        ["predict", SPEC, "--cores", "16,64", "--target-machine", "sockets=1000000000,cores=1000000000,smt=1000000"],
        "sockets = 1,000,000,000 is above 64", refs=[INB + "test_absurd_machine_counts_are_refused_naming_the_bound"]),
    Row("S5.2", "an lscpu JSON or TOML with 1e9 counts does the same", ["predict", SPEC, "--cores", "64",
                                                                       "--target-machine", "{d}/huge-lscpu.json"],
        "is above 64", refs=[INB + "test_absurd_machine_counts_are_refused_naming_the_bound"]),
    Row("S5.3", "sched sim with work_s = 1e308 does not end", ["sched", "sim", "{d}/huge-work.toml", "--policy", "rr"],
        "'work_s' must be <= 1e+06", refs=[TOOL + "test_sched_sim_refuses_above_its_bounds"]),
    Row("S5.4", "sched sim --runs 1000000000 does not end", ["sched", "sim", "pmctrack-mix", "--runs", "1000000000"],
        "at most 1000", refs=[TOOL + "test_sched_sim_refuses_above_its_bounds"]),
    Row("S5.5", "usl accepts a core count of 1e18 silently", ["usl", SPEC, "--predict", "1e18"],
        "is above 1,048,576", refs=[INB + "test_typed_core_counts_above_the_bound_are_refused"]),
    Row("S5.6", "predict accepts core counts of 1e18 in a file", ["usl", "{d}/cores-1e18.csv"],
        "cores must be at most 1,048,576", refs=[INB + "test_core_counts_in_files_are_bounded"]),
    Row("S5.7", "a 50 MB CSV takes predict 264 s and 3.2 GB", None,
        refs=[INB + "test_a_dataset_past_the_row_bound_is_refused", INB + "test_a_dataset_past_the_size_bound_is_refused_unread"]),
    # 6. Leftovers
    Row("S6.1", "SIGKILL of stat -- prog leaves the program, its child and grandchild running", None,
        refs=[LEFT + "test_sigkill_at_random_moments_leaves_no_process_cgroup_or_file", "scripts/leftovers.py"]),
    Row("S6.2", "SIGTERM/SIGINT of stat leave the child and grandchild", None,
        refs=[LEFT + "test_sigterm_and_sigint_leave_nothing"]),
    Row("S6.3", "sched run leaves all three pinned and its cgroup corecast-sched-PID with its quota", None,
        refs=[LEFT + "test_sigkill_at_random_moments_leaves_no_process_cgroup_or_file", LEFT + "test_sigterm_and_sigint_leave_nothing"]),
    Row("S6.4", "... also after its own exit-2 errors", None,
        refs=[LEFT + "test_sched_run_removes_its_cgroup_after_its_own_error"]),
    Row("S6.5", "one SIGKILL of measure in 32 left a corecast-launch blocked on its start pipe", None,
        refs=[LEFT + "test_launcher_child_never_outlives_a_supervisor_that_dies_at_its_start"]),
    Row("S6.6", "every killed measure leaves a /tmp/corecast-run-* folder", None,
        refs=[LEFT + "test_sigkill_at_random_moments_leaves_no_process_cgroup_or_file",
              LEFT + "test_sentinel_removes_what_it_was_told_when_corecast_ends"]),

    # ============================================================ Errors that are still internal
    Row("I1.1", "100,000-deep nested JSON to usl (RecursionError)", ["usl", "{d}/deep.json"],
        "JSON nested deeper than 64 levels", refs=[INB + "test_deeply_nested_json_is_one_line"]),
    Row("I1.2", "... to predict", ["predict", "{d}/deep.json", "--cores", "64"], "JSON nested deeper than 64 levels"),
    Row("I1.3", "... to evaluate", ["evaluate", "{d}/deep.json", "--train-max-cores", "4"],
        "JSON nested deeper than 64 levels"),
    Row("I1.4", "... to export", ["export", "{d}/deep.json"], "JSON nested deeper than 64 levels"),
    Row("I1.5", "... to info", ["info", "{d}/deep.json"], "JSON nested deeper than 64 levels"),
    Row("I2", "negative core counts in a campaign's runs table (predict ValueError; info, export accept it)", None,
        refs=[INB + "test_bad_core_counts_in_a_campaign_are_refused_alike"]),
    Row("I3.1", "sim convert ... -o DIR", ["sim", "convert", "{d}/t.din", "-o", "{d}/adir"], "is a directory"),
    Row("I3.2", "sim convert ... -o /nonexistent/x", ["sim", "convert", "{d}/t.din", "-o", "{d}/nonexistent/x"],
        "no such folder", check=_no_folder_made),
    Row("I3.3", "sim convert ... -o /dev/full", ["sim", "convert", "{d}/t.din", "-o", "{d}/full"],
        "No space left on device"),
    Row("I4", "sim gen chains --width 100000", ["sim", "gen", "chains", "--width", "100000", "-n", "1000",
                                                 "-o", "{d}/c.cctrace"], "at most 255 chains",
        refs=[TOOL + "test_sim_gen_is_bounded"]),
    Row("I5", "sim gen stream -n 1e10 (MemoryError)", ["sim", "gen", "stream", "-n", "1e10", "-o", "{d}/s.cctrace"],
        "a generated trace has at most 1,073,741,824", refs=[TOOL + "test_sim_gen_is_bounded"]),
    Row("I6", "stat -T 1e308 (OverflowError)", ["stat", "-c", "task_clock", "-T", "1e308", "--", "true"],
        "at most 720h", refs=[TOOL + "test_stat_times_are_bounded"]),
    Row("I7", "stat -o /dev/full", ["stat", "-c", "task_clock", "-o", "{d}/full", "--", "true"],
        "No space left on device", refs=[A + "test_a_write_error_stops_stat_and_its_program_at_once"]),
    Row("I8", "evaluate --corpus D with a directory named source.toml", ["evaluate", "--corpus", "{d}/corp"],
        "source.toml: is a directory", refs=[INB + "test_evaluate_corpus_mistakes"]),
    Row("I9", "sched sim --seed -1", ["sched", "sim", "pmctrack-mix", "--seed", "-1"], "at least 0",
        refs=[TOOL + "test_sched_sim_refuses_above_its_bounds"]),
    Row("I10", "meters --blackboard X where /dev/shm/corecast-X is a directory (also leaves .tmp and .app)",
        ["meters", "--blackboard", "a25d{pid}", "--duration", "1"], "is a directory, not a blackboard",
        check=_no_leftover_board, refs=[SEC + "test_a_directory_at_the_board_name_is_one_line_and_leaves_nothing"]),
    Row("I11", "sched sim --sf-noise 1e308", ["sched", "sim", "pmctrack-mix", "--sf-noise", "1e308"], "at most 1",
        refs=[TOOL + "test_sched_sim_refuses_above_its_bounds"]),
    Row("I12", "serve's POST /api/stat with a non-number duration or \"events\": 5 (HTTP 500)", None,
        refs=[SEC + "test_stat_with_a_bad_duration_or_events_is_400_with_one_line"]),

    # ============================================================ Exit 0 with a wrong or silent result
    Row("W1", "usl efficiency printed 0 for 0.5 on huge values", ["usl", "{d}/huge.csv", "--json"],
        check=_efficiency_half, refs=[INB + "test_usl_efficiency_near_the_largest_float"]),
    Row("W2", "gamma's interval inverted and 'beta not needed' from underflowed residuals on tiny values",
        ["usl", "{d}/tiny.csv", "--json"], check=_gamma_interval,
        refs=[INB + "test_usl_statistics_do_not_depend_on_the_unit"]),
    Row("W3.1", "usl --predict 1e308", ["usl", SPEC, "--predict", "1e308"], "is above 1,048,576"),
    Row("W3.2", "predict --cores 1e308", ["predict", SPEC, "--cores", "1e308"], "is above 1,048,576"),
    Row("W4", "--checkpoints 0 'validated at 0.0%'", ["predict", SPEC, "--cores", "64", "--checkpoints", "0"],
        "--checkpoints 0: at least 1", refs=[INB + "test_zero_checkpoints_are_refused"]),
    Row("W5", "accesses wrapping past 2^64 counted as '0 straddle'",
        ["sim", "{d}/wrap.csv", "--machine", "penryn-l5420", "--cores", "1"], "passes the top of the address space",
        refs=[TOOL + "test_an_access_wrapping_past_2_64_is_refused_not_counted_as_within_a_line"]),
    Row("W6.1", "--target-machine sockets=2,cores=32,cores=4 (last wins)",
        ["predict", SPEC, "--cores", "64", "--target-machine", "sockets=2,cores=32,cores=4"], "cores= is given twice",
        refs=[INB + "test_a_key_given_twice_an_empty_spec_and_a_placement_without_a_target"]),
    Row("W6.2", "--target-machine '' (ignored)", ["predict", SPEC, "--cores", "64", "--target-machine", ""],
        "machine description: empty"),
    Row("W6.3", "--placement without a target (ignored)", ["predict", SPEC, "--cores", "64", "--placement", "spread"],
        "--placement is for --target-machine"),
    Row("W7", "evaluate --corpus where every method failed exits 0", ["evaluate", "--corpus", "{d}/two"],
        "no method could predict any series", refs=[INB + "test_evaluate_corpus_mistakes"]),
    Row("W8", "sched sim --quantum 1e308 (ASP -0.22)", ["sched", "sim", "pmctrack-mix", "--quantum", "1e308"],
        "at most 10 s", refs=[TOOL + "test_sched_sim_refuses_above_its_bounds"]),
    Row("W9", "sched policies bogus lists all", ["sched", "policies", "bogus"], "unknown policy 'bogus'",
        refs=[TOOL + "test_sched_policies_refuses_an_unknown_name_and_shows_a_known_one"]),
    Row("W10", "sched run --progress-file /nonexistent/p ignored",
        ["sched", "run", "--policy", "rr", "--emulate", "none", "--progress-file", "{d}/nonexistent/p", "--", "true"],
        "--progress-file", refs=[LEFT + "test_sched_run_refuses_a_progress_file_it_cannot_have"]),
    Row("W11", "chase --duration 0 becomes 400 ms", ["chase", "--duration", "0", "--threads", "1", "--chains", "1",
                                                     "--size", "64KiB", "--samples", "1"], "must be more than 0",
        refs=[TOOL + "test_chase_refuses_what_it_used_to_ignore_or_replace"]),
    Row("W12", "chase --sizes without --sweep-size ignored",
        ["chase", "--sizes", "16KiB,1MiB", "--duration", "0.01", "--threads", "1", "--chains", "1", "--size", "64KiB",
         "--samples", "1"], "--sizes is for --sweep-size or --profile"),
    Row("W13", "meters list --pid 999999 lists meters as measured", ["meters", "list", "--pid", "{nopid}"],
        "no such process", refs=[SEC + "test_meters_list_of_a_process_that_does_not_exist"]),
    Row("W14", "meters replay --scope bogus prints an empty table", None,
        refs=[SEC + "test_replay_of_an_unknown_scope_names_the_known_ones"]),
    Row("W15", "--blackboard '' becomes 'default'", ["meters", "show", "--blackboard", ""],
        "'' is not a blackboard name", refs=[SEC + "test_board_names_are_checked"]),
    Row("W16", "a board with out-of-range scope indexes prints garbage names", None,
        refs=[SEC + "test_a_board_with_indexes_out_of_range_is_refused"]),
    Row("W17", "--report /nonexistent/dir/r.html creates folders (as root it created /nonexistent)",
        ["usl", SPEC, "-q", "--report", "{d}/nonexistent/dir/r.html"], "no such folder", check=_no_folder_made,
        refs=[OUT + "test_a_folder_a_missing_folder_and_a_planted_link_are_refused"]),
    Row("W18", "serve starts on an empty, invalid or FIFO file (docs: exit 2)", None,
        refs=[SEC + "test_serve_refuses_to_start_on_an_empty_invalid_or_fifo_file"]),

    # ============================================================ follow-ups found in this audit
    Row("F1", "sim mrc-online started its program with perf.launch: its tree outlived a SIGKILL", None,
        refs=["tests/test_sim_mrc_online.py::test_each_run_goes_through_the_launcher_and_the_sentinel"]),
    Row("F2", "measure -o in a shared folder opened another user's campaign.db-wal/-shm/-journal", None,
        refs=[A + "test_another_users_journal_files_are_never_used",
              A + "test_a_killed_measure_leaves_its_campaign_and_nothing_else"]),
    Row("F3.1", "a --sim result: JSON without a depth or size bound",
        ["throughput", "--machine", "penryn-l5420", "--sim", "{d}/deep.json", "--baseline-cpi", "1"],
        "JSON nested deeper than 64 levels"),
    Row("F3.2", "an --mpki JSON file", ["throughput", "--machine", "penryn-l5420", "--mpki", "{d}/deep.json"],
        "JSON nested deeper than 64 levels"),
    Row("F3.3", "an --mpki TOML file", ["throughput", "--machine", "penryn-l5420", "--mpki", "{d}/deep.toml"],
        "TOML nested deeper than 64 levels"),
    Row("F3.4", "an --mrc miss curve", ["throughput", "--machine", "penryn-l5420", "--mpki", "{d}/mpki.toml",
                                        "--instructions", "1000", "--mrc", "{d}/deep.json"],
        "JSON nested deeper than 64 levels"),
    Row("F3.5", "an --sf-model", ["sched", "sim", "pmctrack-mix", "--sf-source", "model", "--sf-model",
                                  "{d}/deep.json"], "JSON nested deeper than 64 levels"),
    Row("F3.6", "a trace header's metadata", ["sim", "{d}/deep.cctrace", "--machine", "penryn-l5420"],
        "trace metadata: JSON nested deeper than 64 levels"),
    Row("F3.7", "a memory profile", ["meters", "--blackboard", "a25m{pid}", "--duration", "1", "--memory-profile",
                                     "{d}/deep.json"], "JSON nested deeper than 64 levels"),
    Row("F3.8", "a trigger file", ["meters", "--blackboard", "a25t{pid}", "--duration", "1", "--triggers",
                                   "{d}/deep.toml"], "TOML nested deeper than 64 levels"),
    Row("F3.9", "a plugin file", ["measure", "--cores", "1", "--plugin", "{d}/deep.toml", "-o", "{d}/p.db", "--",
                                  "true"], "TOML nested deeper than 64 levels"),
    Row("F3.10", "a sim machine description", ["sim", "{d}/pp.cctrace", "--machine", "{d}/deep.toml"],
        "TOML nested deeper than 64 levels"),
    Row("F3.11", "a sched workload", ["sched", "sim", "{d}/deep.toml"], "TOML nested deeper than 64 levels"),
    Row("F3.12", "a corpus source.toml", ["evaluate", "--corpus", "{d}/deepcorp"], "TOML nested deeper than 64 levels"),
    Row("F3.13", "any of them 2 GiB large (read whole before)", ["sched", "sim", "pmctrack-mix", "--sf-source", "model",
                                                                "--sf-model", "{d}/sparse.json"],
        "more than the 67,108,864 corecast reads"),
    Row("F3.14", "a region results file, the serve page's traces and a POST body", None,
        refs=[A + "test_the_other_readers_are_bounded_too"]),
    Row("F4", "stat -T 0.2 -o /dev/full -- sleep 4 waited for the program after the write error", None,
        refs=[A + "test_a_write_error_stops_stat_and_its_program_at_once"]),
    Row("F5", "export -o F wrote F, then failed on another user's link at F.meta.json", None,
        refs=[A + "test_a_planted_sidecar_is_refused_before_anything_is_written"]),
    Row("F6", "a regular file another user owns in a shared folder was replaced and given back to that user",
        None, refs=[A + "test_another_users_file_in_a_shared_folder_is_not_replaced"]),
    Row("F7", "sched run --progress-file /tmp/p: a FIFO there blocked the loop, a link to /dev/zero ate memory",
        None, refs=[A + "test_a_progress_file_never_blocks_nor_floods_sched_run"]),
    Row("F8", "measure --plugin with a file source: the same (a FIFO stopped the campaign between runs)", None,
        refs=[A + "test_a_plugin_output_file_never_blocks_nor_floods_measure"]),
]

RUN = [r for r in AUDIT if r.argv is not None]


# --------------------------------------------------------------------------------- fixtures
def _mknod(path: Path, minor: int) -> None:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))


def _device_ids() -> dict[str, tuple[int, int, int]]:
    out = {}
    for p in DEVICES:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        out[p] = (st.st_mode, st.st_ino, st.st_rdev)
    return out


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    if not hasattr(os, "mknod") or os.geteuid() != 0:
        pytest.skip("the audit makes private device nodes (mknod) and plants links as another user: needs root")
    d = tmp_path_factory.mktemp("audit25")
    _mknod(d / "full", 7)
    _mknod(d / "null", 3)
    (d / "adir").mkdir()
    (d / "t.din").write_text("0 1000\n1 2000\n2 3000\n")
    from corecast.sim import synth
    from corecast.sim.trace import MAGIC, Trace, write_trace
    write_trace(d / "pp.cctrace", Trace(synth.pingpong(50, 2)))
    (d / "deep.json").write_text(DEEP)
    (d / "deep.toml").write_text("a = " + DEEP + "\n")
    (d / "mpki.toml").write_text("baseline_cpi = 1.0\n[events]\nllc_misses = 1.0\n")
    (d / "huge-lscpu.json").write_text(json.dumps({"lscpu": [
        {"field": "Socket(s):", "data": "1000000000"}, {"field": "Core(s) per socket:", "data": "1000000000"},
        {"field": "Thread(s) per core:", "data": "1000000"}]}))
    (d / "huge-work.toml").write_text('name = "huge"\nmachine = "2b-2s"\n[[app]]\nname = "a"\nthreads = 2\n'
                                      'work_s = 1e308\n')
    (d / "cores-1e18.csv").write_text("cores,throughput\n1,10\n2,19\n1e18,20\n")
    (d / "corp" / "src" / "source.toml").mkdir(parents=True)
    (d / "corp" / "src" / "a.csv").write_text("cores,throughput\n1,10\n2,19\n4,36\n8,60\n")
    (d / "deepcorp" / "src").mkdir(parents=True)
    (d / "deepcorp" / "src" / "source.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    (d / "deepcorp" / "src" / "a.csv").write_text("cores,throughput\n1,10\n2,19\n4,36\n8,60\n")
    (d / "two" / "s").mkdir(parents=True)
    (d / "two" / "s" / "a.csv").write_text("cores,throughput\n1,10\n2,19\n")
    g, a = 1e307, 1.0 / 31.0
    (d / "huge.csv").write_text("cores,throughput\n" + "".join(
        f"{n},{g * (n / (1 + a * (n - 1)))!r}\n" for n in (1, 2, 4, 8, 16, 32)))
    spec = [(1, 64.9), (18, 995.9), (36, 1652.4), (72, 1853.2), (108, 1828.9), (144, 1775.0), (216, 1702.2)]
    (d / "tiny.csv").write_text("cores,throughput\n" + "".join(f"{n},{x * 1e-310!r}\n" for n, x in spec))
    (d / "wrap.csv").write_text("kind,addr,size\nload,0x1000,8\nload,0xfffffffffffffffc,8\n")
    meta = DEEP.encode()
    (d / "deep.cctrace").write_bytes(MAGIC + (16 + len(meta) + (-len(meta) % 16)).to_bytes(4, "little")
                                     + len(meta).to_bytes(4, "little") + meta + bytes(-len(meta) % 16))
    with open(d / "sparse.json", "wb") as fh:            # 2 GiB, no disk: the size is what is checked
        fh.write(b"{")
        fh.truncate(2 << 30)
    shared = d / "shared"                   # a world-writable sticky folder, as /tmp
    shared.mkdir()
    shared.chmod(0o1777)
    (d / "victim").write_text("root's file\n")
    (shared / "out.cctrace").symlink_to(d / "victim")
    os.lchown(shared / "out.cctrace", OTHER_UID, OTHER_UID)
    return d


@pytest.fixture(scope="module")
def shm_names():
    """The blackboard names the rows use: a FIFO (S2.3) and a folder (I10) where the board goes."""
    tok = f"{os.getpid()}"
    fifo, folder = SHM / f"corecast-a25f{tok}", SHM / f"corecast-a25d{tok}"
    os.mkfifo(fifo)
    folder.mkdir()
    yield tok
    fifo.unlink()
    folder.rmdir()
    for p in SHM.iterdir():                  # anything a row's daemon left (a failing row)
        if re.match(rf"\.?corecast-a25[a-z]{tok}", p.name) and p not in (fifo, folder):
            p.unlink()


def _unused_pid() -> int:
    return next(p for p in range(999_999, 10**7) if not os.path.exists(f"/proc/{p}"))


# ------------------------------------------------------------------------------- the run rows
def _run(row: Row, d: Path, tok: str) -> Result | None:
    argv = [a.replace("{d}", str(d)).replace("{pid}", tok).replace("{nopid}", str(_unused_pid())) for a in row.argv]
    try:
        p = subprocess.run([sys.executable, "-m", "corecast", *argv], capture_output=True, text=True,
                           timeout=LIMIT_S, stdin=subprocess.DEVNULL, cwd=d)
    except subprocess.TimeoutExpired:
        return None
    return Result(p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="module")
def results(d, shm_names):
    """Every run row, four at a time (each in a child of its own: the time limit is per row), and
    the device nodes before and after them all."""
    from concurrent.futures import ThreadPoolExecutor
    before = _device_ids()
    private = {p: os.lstat(d / p) for p in ("full", "null")}
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip([r.key for r in RUN], pool.map(lambda r: _run(r, d, shm_names), RUN)))
    return done, before, private


@pytest.mark.parametrize("row", RUN, ids=[r.key for r in RUN])
def test_the_issue_row(row, d, shm_names, results):
    done, before, private = results
    r = done[row.key]
    assert r is not None, f"{row.key}: ran past {LIMIT_S} s"
    # never an internal error, whatever the row expects
    assert r.code != 1 and "internal error" not in r.err and "Traceback" not in r.err, (r.code, r.err)
    # no device replaced: the machine's, and the private ones the rows write to
    assert _device_ids() == before
    for name, st in private.items():
        now = os.lstat(d / name)
        assert stat.S_ISCHR(now.st_mode) and (now.st_ino, now.st_rdev) == (st.st_ino, st.st_rdev), name
    if row.text:
        assert r.code == 2, (r.code, r.out, r.err)
        errors = [line for line in r.err.splitlines() if "error:" in line]
        assert len(errors) == 1 and r.err.strip().splitlines()[-1] == errors[0], r.err
        assert row.text in errors[0], errors[0]
    else:
        assert r.code == 0, (r.code, r.err)
    if row.check is not None:
        row.check(r, d, shm_names)


# ------------------------------------------------------------------------------- the table itself
def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_reference_names_a_test():
    """A row's proof elsewhere is a test that exists (or the proof's script)."""
    for row in AUDIT:
        assert row.argv is not None or row.refs, f"{row.key}: neither run here nor proved elsewhere"
        for ref in row.refs:
            file, _, name = ref.partition("::")
            assert (ROOT / file).is_file(), (row.key, ref)
            if name:
                assert name in _tests_in(ROOT / file), (row.key, ref)


def test_the_keys_are_unique_and_in_the_issues_order():
    keys = [r.key for r in AUDIT]
    assert len(keys) == len(set(keys))
    sections = [k[0] for k in keys]
    assert sections == sorted(sections, key="SIWF".index)


# ------------------------------------------------------------------------------- the follow-ups
def _marked(token: str) -> list[int]:
    """Processes whose environment carries CORECAST_AUDIT_MARK=token."""
    return marked_pids("CORECAST_AUDIT_MARK", token)


def test_a_write_error_stops_stat_and_its_program_at_once(cli, d, tmp_path, monkeypatch):
    """`stat -T 0.2 -o /dev/full -- PROG` hit the write error at its first flush, then gave the
    program its grace to end on its own (then SIGTERM, then another grace): the program ran on.
    The error now kills the program's tree at once. The grace is made a minute here, so that a
    program left to end on its own would make its mark (after 5 s) before corecast returned."""
    from corecast.collect.stat import monitor, target
    monkeypatch.setattr(target, "STOP_GRACE_S", 60.0)
    monkeypatch.setattr(monitor, "STOP_GRACE_S", 60.0)
    token = f"{os.getpid()}-stat-full"
    monkeypatch.setenv("CORECAST_AUDIT_MARK", token)
    mark = tmp_path / "mark"
    r = cli("stat", "-c", "task_clock", "-T", "0.2", "-o", d / "full", "--",
            "sh", "-c", f"sleep 60 & sleep 5; touch {mark}")
    assert r.code == 2 and "No space left on device" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    from corecast.collect import procs
    procs.close_sentinel()                      # this process's own (it carries the mark too)
    assert _marked(token) == []                 # the program and its child are gone (the child's 60 s too)
    assert not mark.exists()
    assert stat.S_ISCHR(os.lstat(d / "full").st_mode)


def _measure(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "corecast", "measure", "-q", *map(str, args)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_another_users_journal_files_are_never_used(other_user, tmp_path):
    """SQLite keeps `c.db-journal`, `c.db-wal` and `c.db-shm` beside a campaign under fixed names,
    opened without O_EXCL: in a shared folder another user's planted regular file became root's
    WAL (its pages read back into the campaign -- the command `--resume` runs) and a planted link
    failed with "unable to open database file" after the campaign was made. Each is now refused
    before anything is made, naming the file; nothing is written through a link; a campaign in
    the shared folder is measured, resumed and read as before and leaves only itself."""
    import shutil
    import tempfile
    from conftest import as_user
    shared = Path(tempfile.mkdtemp(prefix="corecast-audit25-", dir="/tmp"))    # one the other user reaches
    shared.chmod(0o1777)
    try:
        _journal_files(other_user, tmp_path, shared, as_user)
    finally:
        shutil.rmtree(shared)


def _journal_files(other_user, tmp_path: Path, shared: Path, as_user) -> None:
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    victim.chmod(0o600)
    db = shared / "c.db"
    run = ["--cores", "1", "--reps", "2", "--warmup", "0", "--no-shim", "-o", db, "--", "true"]
    for suffix, how in (("-wal", "file"), ("-shm", "link"), ("-journal", "file")):
        side = shared / f"c.db{suffix}"
        cmd = f"ln -s {victim} {side}" if how == "link" else f"umask 0; printf x > {side}"
        assert as_user(other_user, "sh", "-c", cmd).returncode == 0
        r = _measure(*run)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"{side} " in r.stderr and "another user may have put it there" in r.stderr
        assert sorted(p.name for p in shared.iterdir()) == [side.name]        # no campaign made
        side.unlink()
    assert victim.read_text() == "root's file\n"
    r = _measure(*run)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["c.db"]
    # the other user reads root's campaign: they leave nothing of theirs beside it for root to refuse
    read = ("import sys; sys.path.insert(0, sys.argv[1]); from corecast.store import Campaign; "
            "c = Campaign.open(sys.argv[2], write=False); print(c.run_count()); c.close()")
    from conftest import SYSTEM_PYTHON
    r = as_user(other_user, SYSTEM_PYTHON, "-c", read, str(ROOT / "src"), str(db))
    assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["c.db"]
    # a hot journal planted before a resume (SQLite plays a hot journal back into the file)
    assert as_user(other_user, "sh", "-c", f"umask 0; printf 'x' > {shared}/c.db-journal").returncode == 0
    r = _measure("--resume", "-o", db)
    assert r.returncode == 2 and "c.db-journal is owned by uid" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "corecast", "info", db], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "c.db-journal is owned by uid" in r.stderr, r.stderr     # readers alike
    (shared / "c.db-journal").unlink()
    r = _measure("--resume", "-o", db)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "corecast", "info", db], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "2 runs at 1 core counts" in r.stdout, r.stdout
    assert sorted(p.name for p in shared.iterdir()) == ["c.db"]


def _shared_folder(tmp_path: Path) -> Path:
    shared = tmp_path / "shared-out"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def test_a_planted_sidecar_is_refused_before_anything_is_written(cli, tmp_path):
    """`export -o F` wrote F, then refused another user's link at F.meta.json: exit 2 with half
    the output made. The sidecar is now looked at first; `meters --record` alike."""
    shared = _shared_folder(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    side = shared / "x.csv.meta.json"
    side.symlink_to(victim)
    os.lchown(side, OTHER_UID, OTHER_UID)
    r = cli("export", SPEC, "-o", shared / "x.csv")
    assert r.code == 2 and "x.csv.meta.json: is a symbolic link owned by another user" in r.err, r.err
    assert sorted(p.name for p in shared.iterdir()) == [side.name] and victim.read_text() == "root's file\n"
    rec_side = shared / "m.csv.meta.json"
    rec_side.symlink_to(victim)
    os.lchown(rec_side, OTHER_UID, OTHER_UID)
    r = subprocess.run([sys.executable, "-m", "corecast", "meters", "--blackboard", f"a25r{os.getpid()}", "--meters",
                        "cpu_busy", "--interval", "50ms", "--duration", "0.3", "--record", shared / "m.csv"],
                       capture_output=True, text=True, timeout=LIMIT_S)
    assert r.returncode == 2 and "m.csv.meta.json: is a symbolic link owned by another user" in r.stderr, r.stderr
    assert sorted(p.name for p in shared.iterdir()) == sorted([side.name, rec_side.name])
    assert victim.read_text() == "root's file\n"


def test_another_users_file_in_a_shared_folder_is_not_replaced(cli, tmp_path):
    """A regular file another user put in /tmp under the output's name was replaced, and the new
    file given back to that user (an existing file keeps its owner): root's results became theirs
    to change before root read them back. It is refused now (the kernel's fs.protected_regular
    rule); a file of root's own there is still replaced, and one of another user in a folder of
    root's own too."""
    shared = _shared_folder(tmp_path)
    theirs = shared / "r.csv"
    theirs.write_text("theirs\n")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    r = cli("export", SPEC, "-o", theirs, "--metadata", "none")
    assert r.code == 2 and f"a file of another user (uid {OTHER_UID})" in r.err and len(r.err.splitlines()) == 1
    assert theirs.read_text() == "theirs\n" and os.stat(theirs).st_uid == OTHER_UID
    assert sorted(p.name for p in shared.iterdir()) == ["r.csv"]
    mine = shared / "mine.csv"
    mine.write_text("old\n")
    assert cli("export", SPEC, "-o", mine, "--metadata", "none").code == 0
    assert mine.read_text().startswith("cores,") and os.stat(mine).st_uid == os.geteuid()
    private = tmp_path / "theirs.csv"           # a folder only root writes: their file is root's to replace
    private.write_text("theirs\n")
    os.chown(private, OTHER_UID, OTHER_UID)
    assert cli("export", SPEC, "-o", private, "--metadata", "none").code == 0
    assert private.read_text().startswith("cores,") and os.stat(private).st_uid == OTHER_UID


def test_the_other_readers_are_bounded_too(tmp_path):
    """The JSON a measured program writes (region results) and what `serve` reads (the files it
    shows, a trace's lines, a POST body) raised RecursionError on deep nesting -- an internal
    error, or HTTP 500 -- and region results of the wrong kind a ValueError."""
    import asyncio
    from corecast import parsing, region
    from corecast.errors import UserError
    from corecast.serve import app, files
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"region": "a", "calls": 1}\n' + DEEP + "\n")
    with pytest.raises(UserError, match=r"deep.jsonl:2: JSON nested deeper than 64 levels"):
        region.load(deep)
    (tmp_path / "kind.jsonl").write_text('{"region": "a", "calls": "many"}\n')
    with pytest.raises(UserError, match=r"kind.jsonl:1: not a region record"):
        region.load(tmp_path / "kind.jsonl")
    (tmp_path / "name.jsonl").write_text('{"region": ["a"], "calls": 1}\n')
    with pytest.raises(UserError, match=r"name.jsonl:1: not a region record"):
        region.load(tmp_path / "name.jsonl")
    with open(tmp_path / "big.jsonl", "wb") as fh:
        fh.truncate(region.MAX_RESULTS_BYTES + 1)
    with pytest.raises(UserError, match="more than the 67,108,864 corecast reads"):
        region.load(tmp_path / "big.jsonl")
    (tmp_path / "ok.jsonl").write_text('{"region": "a", "calls": 2, "wall_ns": 5}\n{"region": "a", "calls": 1}\n')
    assert region.load(tmp_path / "ok.jsonl")["a"]["calls"] == 3

    (tmp_path / "t.jsonl").write_text('{"type": "header", "format": "corecast-stat-trace"}\n' + DEEP + "\n")
    with pytest.raises(UserError, match=r"t.jsonl: line 2: JSON nested deeper than 64 levels"):
        files.read_trace(tmp_path / "t.jsonl", "corecast-stat-trace")
    (tmp_path / "d.json").write_text(DEEP)
    assert files._meters_notes(tmp_path / "d.json", DEEP[:100].encode()) is False
    (tmp_path / "s.csv").write_text("cores,throughput\n1,1\n")
    (tmp_path / "s.csv.meta.json").write_text(DEEP)
    assert files._meters_notes(tmp_path / "s.csv", b"cores,throughput\n") is False

    class Request:                        # what _body reads of an aiohttp request
        can_read_body = True

        def __init__(self, text: str):
            self._text = text

        async def text(self) -> str:
            return self._text

    with pytest.raises(UserError, match=f"the request: JSON nested deeper than {parsing.MAX_JSON_DEPTH} levels"):
        asyncio.run(app._body(Request(DEEP)))
    assert asyncio.run(app._body(Request('{"a": [1]}'))) == {"a": [1]}


def test_a_progress_file_never_blocks_nor_floods_sched_run(tmp_path):
    """`sched run --progress-file /tmp/p` read the whole file every quantum: a FIFO there (any
    user can make one in /tmp) blocked the enforcing loop for good, with the programs pinned,
    and a link to /dev/zero read until memory ran out. Now: no wait, the last 4 KiB only, a
    regular file only, a finite number only."""
    import threading
    from corecast.sched.enforce.runner import _progress_value
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list = []
    t = threading.Thread(target=lambda: got.append(_progress_value(str(fifo))), daemon=True)
    t.start()
    t.join(timeout=10)
    blocked = t.is_alive()
    if blocked:                                  # release the blocked reader before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(timeout=10)
    assert not blocked and got == [None]         # (and /dev/zero is not tried on a reader that blocks)
    (tmp_path / "zero").symlink_to("/dev/zero")
    assert _progress_value(str(tmp_path / "zero")) is None
    (tmp_path / "p").write_text("1\n2\n" + "x" * 100_000 + "\n42.5\n")
    assert _progress_value(str(tmp_path / "p")) == 42.5
    (tmp_path / "nan").write_text("nan\n")
    assert _progress_value(str(tmp_path / "nan")) is None
    assert _progress_value(str(tmp_path / "absent")) is None


def test_a_progress_file_that_is_not_a_regular_file_is_never_opened(tmp_path):
    """Opening a device can act by itself (a link to /dev/watchdog, opened by root every quantum,
    arms it): the name is looked at with O_PATH and opened only when it is a regular file. A
    writer waiting on a FIFO shows whether anyone opened it for reading."""
    import threading
    import time
    from corecast.sched.enforce.runner import _progress_value
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    opened: list = []
    w = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)), daemon=True)
    w.start()
    time.sleep(0.2)
    (tmp_path / "link").symlink_to(fifo)
    assert _progress_value(str(fifo)) is None and _progress_value(str(tmp_path / "link")) is None
    w.join(timeout=0.5)
    never = w.is_alive()
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # release the writer either way
    w.join(timeout=10)
    os.close(r)
    for fd in opened:
        os.close(fd)
    assert never, "the progress file's FIFO was opened for reading"


def test_a_plugin_output_file_never_blocks_nor_floods_measure(tmp_path):
    """A plugin's `file` source (read after every run) was read whole and waited for: a FIFO at
    its name stopped the campaign between runs, a link to /dev/zero read until memory ran out.
    Now each is a note and a missing value, and the campaign goes on."""
    import threading
    from corecast.collect import plugins
    cat = plugins.Category("x", str(tmp_path / "out"), plugins.compile_number_regex(r"x=(\d+)", "t"), "sum", "",
                           "other")
    os.mkfifo(tmp_path / "out")
    got: list = []
    t = threading.Thread(target=lambda: got.append(plugins.apply([cat], "", "", tmp_path, {})), daemon=True)
    t.start()
    t.join(timeout=10)
    blocked = t.is_alive()
    if blocked:
        os.close(os.open(tmp_path / "out", os.O_WRONLY | os.O_NONBLOCK))
        t.join(timeout=10)
    assert not blocked and got[0][0] == {"x": None}
    (tmp_path / "out").unlink()
    (tmp_path / "out").symlink_to("/dev/zero")
    values, notes = plugins.apply([cat], "", "", tmp_path, {})
    assert values == {"x": None} and "symbolic link" in notes[0]
    (tmp_path / "out").unlink()
    with open(tmp_path / "out", "wb") as fh:          # sparse: no disk, more than the bound
        fh.truncate(plugins.MAX_OUTPUT_BYTES + 1)
    values, notes = plugins.apply([cat], "", "", tmp_path, {})
    assert values == {"x": None} and "more than the 67,108,864" in notes[0]
    (tmp_path / "out").unlink()
    (tmp_path / "out").write_text("x=3\nx=4\n")
    assert plugins.apply([cat], "", "", tmp_path, {})[0] == {"x": 7.0}


def test_a_plugin_output_file_planted_by_another_user_is_not_read(tmp_path):
    """The program's folder may be /tmp: a link planted at the plugin's file name made root read
    its target (another user's secret, mode 600) and store the matched number in the campaign
    (mode 644); a file of another user there was read too. Neither is now."""
    from corecast.collect import plugins
    cat = plugins.Category("pin", "out0.txt", plugins.compile_number_regex(r"pin: (\d+)", "t"), "sum", "", "other")
    secret = tmp_path / "secret"
    secret.write_text("pin: 4242\n")
    secret.chmod(0o600)
    (tmp_path / "out0.txt").symlink_to(secret)
    values, notes = plugins.apply([cat], "", "", tmp_path, {})
    assert values == {"pin": None} and "symbolic link" in notes[0]
    (tmp_path / "out0.txt").unlink()
    (tmp_path / "out0.txt").write_text("pin: 7\n")
    os.chown(tmp_path / "out0.txt", 4242, 4242)
    values, notes = plugins.apply([cat], "", "", tmp_path, {})
    assert values == {"pin": None} and "another user (uid 4242)" in notes[0]
    os.chown(tmp_path / "out0.txt", os.geteuid(), os.getegid())
    assert plugins.apply([cat], "", "", tmp_path, {})[0] == {"pin": 7.0}


def test_a_killed_measure_leaves_its_campaign_and_nothing_else(tmp_path):
    """The empty journal corecast makes beside a campaign (so that no one can plant one there)
    is named to corecast-sentinel: a SIGKILL of measure leaves the campaign and SQLite's WAL
    (the runs not yet checkpointed: needed), never that journal; the resume then finishes and
    leaves the campaign alone. A WAL left without its campaign is refused by a new one."""
    import signal
    import time
    db = tmp_path / "c.db"
    p = subprocess.Popen([sys.executable, "-m", "corecast", "measure", "-q", "--cores", "1", "--reps", "100",
                          "--warmup", "0", "--no-shim", "-o", db, "--", "sleep", "0.05"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while not (tmp_path / "c.db-journal").exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert (tmp_path / "c.db-journal").exists()          # held while measure runs
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    end = time.monotonic() + 10
    while (tmp_path / "c.db-journal").exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.db", "c.db-shm", "c.db-wal"]
    r = _measure("--resume", "-o", db)
    assert r.returncode == 0, r.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.db"]
    db.unlink()
    (tmp_path / "c.db-wal").write_bytes(b"")                 # as if c.db had been removed after a crash
    r = _measure("--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-o", db, "--", "true")
    assert r.returncode == 2 and "c.db-wal is there without the campaign" in r.stderr, r.stderr
