"""The 16-byte trace record is defined once, in native/include/cctrace.h: the simulator, the
miss-rate curves and the QEMU plugin include it, and Python's RECORD_DTYPE (sim/native.py, which
sim/trace.py reads and writes trace files with) and record constants agree with it -- checked by
compiling the header with offsetof and sizeof."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from corecast.sim import native as N
from corecast.sim import trace

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "native" / "include" / "cctrace.h"
FIELDS = ("addr", "aux", "tid", "kind", "size")
CONSTANTS = {"CC_K_FETCH": N.KIND_FETCH, "CC_K_LOAD": N.KIND_LOAD, "CC_K_STORE": N.KIND_STORE,
             "CC_K_MODIFY": N.KIND_MODIFY, "CC_K_BRANCH": N.KIND_BRANCH, "CC_K_MARKER": N.KIND_MARKER,
             "CC_K_UOP": N.KIND_UOP, "CC_NKINDS": len(trace.KIND_NAMES),
             "CC_BR_TAKEN": N.BR_TAKEN, "CC_BR_COND": N.BR_COND, "CC_BR_INDIRECT": N.BR_INDIRECT,
             "CC_BR_CALL": N.BR_CALL, "CC_BR_RET": N.BR_RET,
             "CC_UNIT_ALU": N.UNIT_ALU, "CC_UNIT_LOAD": N.UNIT_LOAD, "CC_UNIT_STORE": N.UNIT_STORE,
             "CC_UNIT_BRANCH": N.UNIT_BRANCH, "CC_UNIT_FP": N.UNIT_FP, "CC_NUNITS": N.NUNITS,
             "CC_UOP_FIRST": N.UOP_FIRST, "CC_UOP_PLACEHOLDER": N.UOP_PLACEHOLDER, "CC_REG_NONE": N.REG_NONE}


def layout(header: Path, tmp: Path) -> dict:
    """The record's size, and each field's offset and size, and the constants, as the C compiler
    sees them in `header`."""
    prog = ['#include <stddef.h>', '#include <stdio.h>', f'#include "{header.name}"', 'int main(void) {',
            '    printf("{\\"size\\": %zu, \\"fields\\": [", sizeof(cc_rec));']
    for i, f in enumerate(FIELDS):
        prog.append(f'    printf("%s[\\"{f}\\", %zu, %zu]", "{", " if i else ""}", '
                    f'offsetof(cc_rec, {f}), sizeof(((cc_rec *)0)->{f}));')
    prog.append('    printf("], \\"constants\\": {");')
    for i, c in enumerate(CONSTANTS):
        prog.append(f'    printf("%s\\"{c}\\": %lld", "{", " if i else ""}", (long long)({c}));')
    prog += ['    printf("}}\\n");', '    return 0;', '}']
    (tmp / "layout.c").write_text("\n".join(prog) + "\n")
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-I", str(header.parent), "-o", str(tmp / "layout"),
                    str(tmp / "layout.c")], check=True, capture_output=True, text=True)
    return json.loads(subprocess.run([str(tmp / "layout")], check=True, capture_output=True, text=True).stdout)


def mismatches(c: dict) -> list[str]:
    """Where Python's record differs from the compiled header's `c` (see layout)."""
    out = []
    dt = N.RECORD_DTYPE
    if c["size"] != dt.itemsize:
        out.append(f"size {c['size']} != {dt.itemsize}")
    for name, offset, size in c["fields"]:
        fdt, foff = dt.fields[name][:2]
        if (foff, fdt.itemsize) != (offset, size):
            out.append(f"{name}: offset {offset} size {size} in C, {foff} {fdt.itemsize} in Python")
        if fdt.byteorder not in ("<", "|", "=") or fdt.kind != "u":
            out.append(f"{name}: not a little-endian unsigned integer in Python")
    out += [f"{k} = {v} in C, {CONSTANTS.get(k)} in Python" for k, v in c["constants"].items() if CONSTANTS.get(k) != v]
    return out


needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@needs_gcc
def test_python_dtype_and_constants_equal_the_header(tmp_path):
    c = layout(HEADER, tmp_path)
    assert c["size"] == 16 and len(c["constants"]) == len(CONSTANTS)
    assert mismatches(c) == []
    assert trace.RECORD_DTYPE is N.RECORD_DTYPE          # trace files are read and written with this one


@needs_gcc
def test_the_check_sees_a_moved_field_and_a_changed_kind(tmp_path):
    text = HEADER.read_text()
    moved = text.replace("    uint16_t tid;  /* thread */\n    uint8_t kind;", "    uint8_t kind;\n    uint16_t tid;")
    moved = moved.replace('_Static_assert(sizeof(cc_rec) == 16, "a trace record is 16 bytes");', "")
    moved = moved.replace("CC_K_UOP = 6,", "CC_K_UOP = 9,")
    assert moved.count("CC_K_UOP = 9") == 1 and "uint8_t kind;\n    uint16_t tid;" in moved
    (tmp_path / "cctrace.h").write_text(moved)
    bad = mismatches(layout(tmp_path / "cctrace.h", tmp_path))
    assert "size 24 != 16" in bad and "CC_K_UOP = 9 in C, 6 in Python" in bad
    assert any(b.startswith("tid: offset 14") for b in bad)


def test_the_record_is_defined_once():
    """No C source defines a record of its own: the three that read or write records include
    cctrace.h, and no other struct with the record's leading fields exists under native/."""
    record = re.compile(r"struct\s*\w*\s*\{\s*uint64_t\s+addr;[^}]*uint32_t\s+aux;")
    own = [p.relative_to(ROOT) for p in sorted((ROOT / "native").rglob("*.[ch]"))
           if p != HEADER and record.search(p.read_text(errors="replace"))]
    assert own == []
    for rel in ("native/sim/ccsim.h", "native/mrc/mrc.c", "native/qemu/capture_plugin.c"):
        assert '#include "cctrace.h"' in (ROOT / rel).read_text(), rel
