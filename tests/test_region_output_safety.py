"""Where the region API writes its totals is safe for a program run as root in /tmp: without
CORECAST_REGION_OUT the C library and corecast.region append to ./corecast-regions-<pid>.jsonl,
a name anyone can predict, and fs.protected_symlinks may be 0. A symbolic link planted there, a
hard link to another file, or another user's file at that name is refused (nothing written, one
line on stderr); the victim is unchanged. A descriptor handed down as /proc/PID/fd/N (`corecast
stat`'s memfd, in its C front end) is still written."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corecast import region as reg
from conftest import region_program

C_PROG = r"""
#include <corecast_region.h>
int main(void) {
    corecast_region_begin("solve");
    corecast_region_end("solve");
    return 0;
}
"""
VICTIM_TEXT = "root:x:0:0:precious\n"


@pytest.fixture(scope="module")
def cprog(tmp_path_factory):
    return region_program(tmp_path_factory.mktemp("region-safety"), C_PROG)


def run_in(folder: Path, plant: str, argv: list[str]) -> subprocess.CompletedProcess:
    """Run `argv` in `folder` with no CORECAST_REGION_OUT, after the shell command `plant` made
    something at the default name ($N: corecast-regions-<the program's pid>.jsonl: exec keeps
    the shell's pid)."""
    env = {k: v for k, v in os.environ.items() if k != "CORECAST_REGION_OUT"}
    script = f'N=corecast-regions-$$.jsonl; {plant}; exec "$@"'
    return subprocess.run(["sh", "-c", script, "sh", *argv], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)


PY_PROG = ["-c", "from corecast.region import region\nwith region('solve'): pass"]


@pytest.fixture(params=["c", "python"])
def program(request, cprog):
    return [cprog] if request.param == "c" else [sys.executable, *PY_PROG]


def one_refusal(r: subprocess.CompletedProcess, why: str) -> None:
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("corecast region: ") and why in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_a_symbolic_link_planted_at_the_default_name_is_never_followed(program, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    work = tmp_path / "tmp"                    # /tmp, as another user left it
    work.mkdir()
    work.chmod(0o1777)
    r = run_in(work, f'ln -s {victim} "$N"', program)
    one_refusal(r, "a symbolic link: region totals not written")
    assert victim.read_text() == VICTIM_TEXT
    # a dangling link is not followed either (O_CREAT would have made its target)
    target = tmp_path / "made-through-link"
    r = run_in(work, f'rm -f corecast-regions-*.jsonl; ln -s {target} "$N"', program)
    one_refusal(r, "a symbolic link")
    assert not target.exists()


def test_a_hard_link_at_the_default_name_is_refused(program, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    r = run_in(tmp_path, f'ln {victim} "$N"', program)
    one_refusal(r, "not a regular file of this user with one name")
    assert victim.read_text() == VICTIM_TEXT


def test_a_fifo_at_the_default_name_is_refused_and_never_blocks(program, tmp_path):
    r = run_in(tmp_path, 'mkfifo "$N"', program)                       # no reader: the open fails at once
    one_refusal(r, "region totals not written")
    r = run_in(tmp_path, 'rm -f corecast-regions-*; mkfifo "$N"; exec 3<>"$N"', program)   # with a reader
    one_refusal(r, "not a regular file of this user with one name")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_another_users_file_at_the_default_name_is_refused(program, tmp_path):
    tmp_path.chmod(0o755)
    r = run_in(tmp_path, 'printf "theirs\\n" > "$N"; chmod 666 "$N"; chown 65534:65534 "$N"', program)
    one_refusal(r, "not a regular file of this user with one name")
    left = list(tmp_path.glob("corecast-regions-*.jsonl"))
    assert len(left) == 1 and left[0].read_text() == "theirs\n"


def test_the_default_name_is_made_private_and_written(program, tmp_path):
    r = run_in(tmp_path, ":", program)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    made = list(tmp_path.glob("corecast-regions-*.jsonl"))
    assert len(made) == 1
    assert made[0].stat().st_mode & 0o777 == 0o600
    assert reg.load(made[0])["solve"]["calls"] == 1


def test_a_descriptor_handed_down_as_proc_fd_is_written(program):
    """/proc/PID/fd/N is a link the kernel makes (O_NOFOLLOW cannot open it): how `corecast
    stat`'s C front end hands the program its memfd."""
    fd = os.memfd_create("corecast-regions-test", os.MFD_CLOEXEC)
    try:
        env = dict(os.environ, CORECAST_REGION_OUT=f"/proc/{os.getpid()}/fd/{fd}")
        r = subprocess.run(program, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        text = os.pread(fd, 1 << 16, 0).decode()
        assert '"region": "solve"' in text and '"calls": 1' in text
    finally:
        os.close(fd)


def test_corecast_stat_still_reads_the_regions(cli, cprog):
    r = cli("stat", "-c", "task_clock", "--", cprog)
    assert r.code == 0, r.err
    assert "[Regions]" in r.err and "corecast region:" not in r.err


FRONT = Path(__file__).resolve().parent.parent / "src" / "corecast" / "_native" / "corecast-front"


@pytest.mark.skipif(not FRONT.exists(), reason="the C front end is not built (make setup)")
def test_the_c_front_end_still_reads_the_regions(cprog, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "corecast").symlink_to(FRONT)
    py = bin_dir / "python3"                                 # the Python it hands the regions to
    py.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    env = dict(os.environ, PATH=f"{FRONT.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    env.pop("CORECAST_FRONT", None)
    r = subprocess.run([str(bin_dir / "corecast"), "stat", "-c", "task_clock", "--", cprog], capture_output=True,
                       text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "[Regions]" in r.stderr and "solve" in r.stderr and "corecast region:" not in r.stderr
