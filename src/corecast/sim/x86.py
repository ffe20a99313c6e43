"""Decode x86-64 instructions (from `objdump -d` AT&T text) into what the simulator needs:
branch kind, and uops with register dependencies for the issue-rate model.

Lackey traces carry instruction addresses but no registers. `annotate_objects()` disassembles
each object the program ran (main executable, shared libraries) with objdump, maps its
addresses to the run's addresses (valgrind -v -v prints each object's stated and actual text
address), and turns every instruction into uops:

- a memory source becomes a load uop (address registers in, a temporary out), a memory
  destination a store uop (address registers and the value in); read-modify-write both;
- the operation reads its register operands (and the flags for adc, sbb, cmov, set, jcc) and
  writes its destination register (and the flags for arithmetic and logic);
- push/pop/call/ret update %rsp and move data through the stack; `xor %r,%r` and the like
  have no input (a zero idiom);
- vector and x87 instructions run on the fp unit, branches on the branch unit.

This is a dependency model, not a full decoder: implicit operands of rare instructions
(string ops, cpuid, ...) are approximated and documented in docs/sim.md.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from . import native as N
from .synth import pack_uop

FLAGS = 16
TMP_LOAD = 250
TMP_OP = 251
TMP_ADDR = 252

_GPR = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi"]
REGS: dict[str, int] = {}
for _i, _n in enumerate(_GPR):
    REGS[_n] = _i
    REGS["e" + _n[1:]] = _i
    REGS[_n[1:]] = _i
for _i, _n in enumerate(["al", "cl", "dl", "bl"]):
    REGS[_n] = _i
    REGS[_n[0] + "h"] = _i
for _n, _i in (("spl", 4), ("bpl", 5), ("sil", 6), ("dil", 7)):
    REGS[_n] = _i
for _i in range(8, 16):
    for _suf in ("", "d", "w", "b", "l"):
        REGS[f"r{_i}{_suf}"] = _i
for _i in range(32):
    for _p in ("xmm", "ymm", "zmm"):
        REGS[f"{_p}{_i}"] = 17 + _i
for _i in range(8):
    REGS[f"k{_i}"] = 49 + _i
    REGS[f"mm{_i}"] = 58 + _i
REGS["st"] = 57
for _i in range(8):
    REGS[f"st({_i})"] = 57
IGNORED_REGS = {"rip", "eip", "fs", "gs", "cs", "ds", "es", "ss", "riz", "eiz"}

_PREFIXES = {"lock", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd", "data16",
             "addr32", "cs", "ds", "es", "ss", "fs", "gs", "rex", "rex.w", "xacquire",
             "xrelease"}
_CC = ("a", "ae", "b", "be", "c", "e", "g", "ge", "l", "le", "na", "nae", "nb", "nbe", "nc",
       "ne", "ng", "nge", "nl", "nle", "no", "np", "ns", "nz", "o", "p", "pe", "po", "s", "z")
_JCC = {"j" + c for c in _CC} | {"jrcxz", "jecxz", "jcxz", "loop", "loope", "loopne",
                                 "loopz", "loopnz"}
_SETCC = {"set" + c for c in _CC}
_CMOV = {"cmov" + c for c in _CC}
_FLAG_READERS = {"adc", "sbb", "adcx", "adox", "rcl", "rcr", "pushf", "lahf"}
_NO_FLAGS = {"mov", "movabs", "movzb", "movzw", "movsb", "movsw", "movsl", "movslq", "movzx",
             "movsx", "movsxd", "lea", "not", "bswap", "xchg", "cmov", "nop", "push", "pop",
             "cwtl", "cltq", "cltd", "cqto", "cdqe", "cdq", "cqo", "cwd", "cbw", "endbr64",
             "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta", "prefetchw"}
_COMPARE = {"cmp", "test", "bt", "ucomiss", "ucomisd", "comiss", "comisd", "vucomiss",
            "vucomisd", "vcomiss", "vcomisd", "ptest", "vptest"}
_MOVES = {"mov", "movabs", "movzb", "movzw", "movsb", "movsw", "movsl", "movslq", "movzx",
          "movsx", "movsxd", "movq", "movd", "movaps", "movups", "movapd", "movupd", "movdqa",
          "movdqu", "movss", "movsd", "movhps", "movlps", "movhpd", "movlpd", "movnti",
          "movntdq", "movntps", "movbe", "lddqu", "kmovw", "kmovb", "kmovd", "kmovq"}
_SUFFIX = re.compile(r"^(.*?)(b|w|l|q)$")
_LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]{2}(?: [0-9a-f]{2})*)\s*\t(.*)$")
_MEM = re.compile(r"^(?:%?[a-z]+:)?(-?(?:0x)?[0-9a-f]*)?\((%[a-z0-9]+)?(?:,(%[a-z0-9]+))?(?:,\d)?\)$")


@dataclass
class Decoded:
    length: int
    branch: int          # CC_BR_* flags without TAKEN; 0 if not a branch
    uops: list[int]      # packed uop words
    mnemonic: str = ""


def _split_operands(text: str) -> list[str]:
    text = text.split("#", 1)[0].split("<", 1)[0].strip()
    if not text:
        return []
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return [o for o in out if o]


def _reg(name: str) -> int | None:
    name = name.lstrip("%").lower()
    if name in IGNORED_REGS:
        return None
    return REGS.get(name)


@dataclass
class _Op:
    kind: str                       # reg | imm | mem | target
    regs: list[int] = field(default_factory=list)   # reg: the register; mem: address registers
    fp: bool = False


def _operand(text: str) -> _Op:
    t = text.strip().lstrip("*")
    if t.startswith("$"):
        return _Op("imm")
    if t.startswith("%") and "(" not in t and ":" not in t:
        r = _reg(t)
        return _Op("reg", [r] if r is not None else [], fp=(r is not None and r >= 17))
    if "(" in t or ":" in t:
        m = _MEM.match(t)
        regs: list[int] = []
        if m:
            for g in (m.group(2), m.group(3)):
                if g:
                    r = _reg(g)
                    if r is not None:
                        regs.append(r)
        else:
            for g in re.findall(r"%([a-z0-9]+)", t):
                r = _reg(g)
                if r is not None:
                    regs.append(r)
        return _Op("mem", regs)
    if re.fullmatch(r"(0x)?[0-9a-f]+", t):
        return _Op("target")
    return _Op("imm")


def decode(mnemonic_and_operands: str, length: int) -> Decoded:
    """Decode one objdump instruction text (`mov 0x8(%rsp),%rdi`)."""
    words = mnemonic_and_operands.split(None, 1)
    while words and words[0] in _PREFIXES:
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return Decoded(length, 0, [pack_uop()], "")
    mn = words[0].lower()
    ops_text = words[1] if len(words) > 1 else ""
    indirect = "*" in ops_text.split("<")[0]
    ops = [_operand(o) for o in _split_operands(ops_text)]
    U = N
    uops: list[int] = []

    def addr_regs() -> list[int]:
        return [r for o in ops if o.kind == "mem" for r in o.regs]

    # ---- control flow
    if mn in _JCC or (mn.startswith("j") and mn not in ("jmp", "jmpq") and len(mn) <= 6):
        srcs = [FLAGS]
        if mn in ("jrcxz", "jecxz", "jcxz"):
            srcs = [1]
        elif mn.startswith("loop"):
            uops.append(pack_uop([1], [1], U.UNIT_ALU))
            srcs = [1] + ([FLAGS] if mn != "loop" else [])
        uops.append(pack_uop(srcs, [], U.UNIT_BRANCH))
        return Decoded(length, U.BR_COND, uops, mn)
    if mn in ("jmp", "jmpq", "ljmp"):
        if indirect and ops and ops[0].kind == "mem":
            uops.append(pack_uop(ops[0].regs, [TMP_LOAD], U.UNIT_LOAD))
            uops.append(pack_uop([TMP_LOAD], [], U.UNIT_BRANCH))
        elif indirect and ops and ops[0].kind == "reg":
            uops.append(pack_uop(ops[0].regs, [], U.UNIT_BRANCH))
        else:
            uops.append(pack_uop([], [], U.UNIT_BRANCH))
        return Decoded(length, U.BR_INDIRECT if indirect else 0, uops, mn)
    if mn in ("call", "callq", "lcall"):
        srcs: list[int] = []
        if indirect and ops and ops[0].kind == "mem":
            uops.append(pack_uop(ops[0].regs, [TMP_LOAD], U.UNIT_LOAD))
            srcs = [TMP_LOAD]
        elif indirect and ops and ops[0].kind == "reg":
            srcs = ops[0].regs
        uops.append(pack_uop([4], [4], U.UNIT_ALU))
        uops.append(pack_uop([4], [], U.UNIT_STORE))
        uops.append(pack_uop(srcs, [], U.UNIT_BRANCH))
        return Decoded(length, U.BR_CALL | (U.BR_INDIRECT if indirect else 0), uops, mn)
    if mn in ("ret", "retq", "retf", "lret", "iret", "iretq"):
        uops.append(pack_uop([4], [TMP_LOAD], U.UNIT_LOAD))
        uops.append(pack_uop([4], [4], U.UNIT_ALU))
        uops.append(pack_uop([TMP_LOAD], [], U.UNIT_BRANCH))
        return Decoded(length, U.BR_RET | U.BR_INDIRECT, uops, mn)

    # ---- stack
    if mn in ("push", "pushq", "pushw"):
        data = [r for o in ops for r in o.regs] if ops and ops[0].kind == "reg" else []
        if ops and ops[0].kind == "mem":
            uops.append(pack_uop(ops[0].regs, [TMP_LOAD], U.UNIT_LOAD))
            data = [TMP_LOAD]
        uops.append(pack_uop([4], [4], U.UNIT_ALU))
        uops.append(pack_uop([4] + data, [], U.UNIT_STORE))
        return Decoded(length, 0, uops, mn)
    if mn in ("pop", "popq", "popw"):
        if ops and ops[0].kind == "reg":
            uops.append(pack_uop([4], ops[0].regs, U.UNIT_LOAD))
        else:
            uops.append(pack_uop([4], [TMP_LOAD], U.UNIT_LOAD))
            if ops and ops[0].kind == "mem":
                uops.append(pack_uop(ops[0].regs + [TMP_LOAD], [], U.UNIT_STORE))
        uops.append(pack_uop([4], [4], U.UNIT_ALU))
        return Decoded(length, 0, uops, mn)
    if mn in ("pushf", "pushfq", "popf", "popfq"):
        uops.append(pack_uop([4], [4], U.UNIT_ALU))
        uops.append(pack_uop([4, FLAGS] if mn.startswith("push") else [4],
                             [] if mn.startswith("push") else [FLAGS],
                             U.UNIT_STORE if mn.startswith("push") else U.UNIT_LOAD))
        return Decoded(length, 0, uops, mn)
    if mn in ("leave", "leaveq"):
        uops.append(pack_uop([5], [4], U.UNIT_ALU))
        uops.append(pack_uop([4], [5], U.UNIT_LOAD))
        uops.append(pack_uop([4], [4], U.UNIT_ALU))
        return Decoded(length, 0, uops, mn)
    if mn == "lea" or (mn.startswith("lea") and len(mn) == 4):
        src = ops[0].regs if ops else []
        dst = ops[-1].regs if len(ops) > 1 else []
        return Decoded(length, 0, [pack_uop(src[:4], dst[:1], U.UNIT_ALU)], mn)

    # ---- generic: figure out reads and writes
    base = mn
    m = _SUFFIX.match(mn)
    stripped = m.group(1) if m and m.group(1) in (
        "add", "sub", "and", "or", "xor", "adc", "sbb", "cmp", "test", "mov", "inc", "dec",
        "neg", "not", "shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "imul", "mul",
        "div", "idiv", "xchg", "bt", "bts", "btr", "btc", "nop", "movs", "movz", "stos",
        "lods", "scas", "cmps", "cmpxchg", "xadd", "shld", "shrd", "bsf", "bsr", "tzcnt",
        "lzcnt", "popcnt", "movsl") else None
    if stripped:
        base = stripped
    if base.startswith("movs") and base not in _MOVES and not base.startswith("movsd") \
            and not base.startswith("movss") and not base.startswith("movsh"):
        base = "movs" if mn in ("movsb", "movsw", "movsl", "movsq") and not ops else "movsx"
    if base.startswith("movz"):
        base = "movzx"

    fp = any(o.fp for o in ops) or (mn.startswith(("v", "f", "p")) and mn not in (
        "pause", "push", "pushq", "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta",
        "prefetchw", "popcnt", "pop", "pext", "pdep"))
    unit = U.UNIT_FP if fp else U.UNIT_ALU

    # string instructions: implicit rsi/rdi/rcx
    if base in ("movs", "stos", "lods", "scas", "cmps") or mn.startswith(("rep", "movsb")) \
            or (base == "movs" and not ops):
        srcs = [6, 7, 1, 0]
        uops.append(pack_uop([6, 1], [TMP_LOAD], U.UNIT_LOAD))
        uops.append(pack_uop([7, TMP_LOAD, 0], [], U.UNIT_STORE))
        uops.append(pack_uop([6, 7], [6, 7], U.UNIT_ALU))
        return Decoded(length, 0, uops, mn)

    if mn in ("nop", "nopw", "nopl", "endbr64", "endbr32", "pause", "hlt", "lfence",
              "sfence", "mfence", "int3", "ud2", "prefetcht0", "prefetcht1", "prefetcht2",
              "prefetchnta", "prefetchw", "syscall", "sysenter", "cpuid", "rdtsc", "rdtscp",
              "xgetbv", "fwait", "wait", "clflush", "cld", "std", "clc", "stc", "cmc", "vzeroupper",
              "vzeroall", "emms"):
        if mn in ("cpuid",):
            return Decoded(length, 0, [pack_uop([0, 1], [0, 3], U.UNIT_ALU),
                                       pack_uop([], [1, 2], U.UNIT_ALU)], mn)
        if mn in ("rdtsc", "rdtscp"):
            return Decoded(length, 0, [pack_uop([], [0, 2], U.UNIT_ALU)], mn)
        if mn == "syscall":
            return Decoded(length, 0, [pack_uop([0, 7, 6, 2], [0, 1], U.UNIT_ALU)], mn)
        if mn in ("clc", "stc", "cmc", "cld", "std"):
            return Decoded(length, 0, [pack_uop([], [FLAGS], U.UNIT_ALU)], mn)
        return Decoded(length, 0, [pack_uop([], [], U.UNIT_ALU)], mn)

    if base in ("cltq", "cdqe", "cwtl", "cbw"):
        return Decoded(length, 0, [pack_uop([0], [0], U.UNIT_ALU)], mn)
    if base in ("cltd", "cqto", "cdq", "cqo", "cwd", "cwtd"):
        return Decoded(length, 0, [pack_uop([0], [2], U.UNIT_ALU)], mn)

    reads_dst = True
    writes_dst = True
    writes_flags = True
    reads_flags = base in _FLAG_READERS or mn in _SETCC or mn in _CMOV
    if mn in _CMOV or mn in _SETCC:
        writes_flags = False
    if base in _MOVES or base in ("movzx", "movsx", "movsxd") or mn.startswith(("vmov", "vbroadcast",
                                                                               "vpbroadcast", "cvt", "vcvt",
                                                                               "pmovzx", "pmovsx", "vpmovzx",
                                                                               "vpmovsx")) \
            or mn in _SETCC or base in _NO_FLAGS:
        reads_dst = False
        writes_flags = False
    if mn in _CMOV:
        reads_dst = True
    if base in _COMPARE or (mn.startswith(("cmp", "vcmp", "test")) and len(ops) == 2
                            and not mn.startswith("cmpxchg")):
        writes_dst = False
        writes_flags = base in _COMPARE or mn.startswith(("cmp", "test"))
        if mn.startswith(("vcmp", "cmpps", "cmppd", "cmpss", "cmpsd")):
            writes_dst = True
            writes_flags = False
    if base == "not":
        writes_flags = False
    if fp:
        writes_flags = mn in ("ucomiss", "ucomisd", "comiss", "comisd", "vucomiss",
                              "vucomisd", "vcomiss", "vcomisd", "ptest", "vptest")
    # three-operand forms (AVX, imul $imm,src,dst, shld, ...): the destination is not read
    if len(ops) >= 3 and (mn.startswith("v") or base in ("imul",)):
        reads_dst = False
    # implicit operands
    implicit_src: list[int] = []
    implicit_dst: list[int] = []
    if base in ("mul", "div", "idiv") or (base == "imul" and len(ops) == 1):
        implicit_src = [0, 2]
        implicit_dst = [0, 2]
    if base in ("shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "shld", "shrd") and \
            any(o.kind == "reg" and o.regs == [1] for o in ops[:-1]):
        implicit_src = [1]
    if base == "cmpxchg":
        implicit_src, implicit_dst = [0], [0]
    if base in ("xchg", "xadd"):
        # both operands are read and written
        regs = [r for o in ops if o.kind == "reg" for r in o.regs]
        mem = [o for o in ops if o.kind == "mem"]
        if mem:
            uops.append(pack_uop(mem[0].regs, [TMP_LOAD], U.UNIT_LOAD))
            uops.append(pack_uop(regs + [TMP_LOAD], regs[:1] + [TMP_OP], U.UNIT_ALU))
            uops.append(pack_uop(mem[0].regs + [TMP_OP], [], U.UNIT_STORE))
        else:
            uops.append(pack_uop(regs[:4], regs[:2], U.UNIT_ALU))
        return Decoded(length, 0, uops, mn)

    dst = ops[-1] if ops else None
    srcs_ops = ops[:-1] if len(ops) > 1 else ([] if writes_dst else ops)
    if len(ops) == 1 and writes_dst:
        srcs_ops = []
    if base in ("mul", "div", "idiv") or (base == "imul" and len(ops) == 1):
        srcs_ops = ops
        dst = None
    zero_idiom = (base in ("xor", "sub", "pxor", "vpxor", "xorps", "xorpd", "vxorps", "vxorpd",
                           "pcmpeqd", "pcmpeqb", "psubd")
                  and len(ops) >= 2 and all(o.kind == "reg" for o in ops)
                  and len({tuple(o.regs) for o in ops}) == 1)

    loads = [o for o in srcs_ops if o.kind == "mem"]
    store_to: _Op | None = dst if (dst is not None and dst.kind == "mem" and writes_dst) else None
    load_dst = dst is not None and dst.kind == "mem" and (reads_dst or not writes_dst)
    in_regs: list[int] = []
    if loads or load_dst:
        mem = loads[0] if loads else dst
        assert mem is not None
        uops.append(pack_uop(mem.regs[:4], [TMP_LOAD], U.UNIT_LOAD))
        in_regs.append(TMP_LOAD)
    for o in srcs_ops:
        if o.kind == "reg":
            in_regs.extend(o.regs)
    if dst is not None and dst.kind == "reg" and reads_dst:
        in_regs.extend(dst.regs)
    in_regs.extend(implicit_src)
    if reads_flags:
        in_regs.append(FLAGS)
    if zero_idiom:
        in_regs = []
    out_regs: list[int] = []
    if dst is not None and dst.kind == "reg" and writes_dst:
        out_regs.extend(dst.regs)
    out_regs.extend(implicit_dst)
    if store_to is not None:
        out_regs = [TMP_OP]
    if writes_flags:
        out_regs.append(FLAGS)
    in_regs = list(dict.fromkeys(in_regs))[:4]
    out_regs = list(dict.fromkeys(out_regs))[:2]
    pure_move = (base in _MOVES or base in ("movzx", "movsx", "movsxd")) and not fp
    if pure_move and store_to is not None and not loads:
        # mov %reg,mem / mov $imm,mem: one store uop
        data = [r for o in srcs_ops if o.kind == "reg" for r in o.regs]
        uops.append(pack_uop((store_to.regs + data)[:4], [], U.UNIT_STORE))
        return Decoded(length, 0, uops, mn)
    if pure_move and loads and dst is not None and dst.kind == "reg":
        # mov mem,%reg: the load writes the register directly
        uops[-1] = pack_uop(loads[0].regs[:4], dst.regs[:1], U.UNIT_LOAD)
        return Decoded(length, 0, uops, mn)
    uops.append(pack_uop(in_regs, out_regs, unit))
    if store_to is not None:
        uops.append(pack_uop((store_to.regs + [TMP_OP])[:4], [], U.UNIT_STORE))
    # first flag: pack_uop marks every uop FIRST by default; keep it only on the first
    return Decoded(length, 0, uops, mn)


def _clear_first(uops: list[int]) -> list[int]:
    mask = ~(N.UOP_FIRST << 56) & ((1 << 64) - 1)
    return [u & mask for u in uops]


# ----------------------------------------------------------------------------------------
# objdump

def objdump_available() -> bool:
    return shutil.which("objdump") is not None


def disassemble(path: str | Path, lo: int | None = None, hi: int | None = None,
                want: set[int] | None = None) -> dict[int, Decoded]:
    """Decode the instructions objdump finds in `path` (file addresses), optionally only in
    [lo, hi) and only those in `want`."""
    cmd = ["objdump", "-d", "-w", str(path)]
    if lo is not None and hi is not None:
        cmd[2:2] = [f"--start-address={lo:#x}", f"--stop-address={hi:#x}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError:
        return {}
    out: dict[int, Decoded] = {}
    for line in res.stdout.splitlines():
        if want is not None:
            head = line.split(":", 1)[0].strip()
            try:
                if int(head, 16) not in want:
                    continue
            except ValueError:
                continue
        m = _LINE.match(line)
        if not m:
            continue
        text = m.group(3).strip()
        if not text or text.startswith("(bad)"):
            continue
        addr = int(m.group(1), 16)
        length = (len(m.group(2)) + 1) // 3
        d = decode(text, length)
        d.uops = _clear_first(d.uops)
        out[addr] = d
    return out


@dataclass
class LoadedObject:
    path: str
    svma: int
    avma: int

    @property
    def bias(self) -> int:
        return self.avma - self.svma


_READING = re.compile(r"Reading syms from (\S+)")
_SVMA = re.compile(r"svma 0x([0-9a-f]+), avma 0x([0-9a-f]+)")


def objects_from_valgrind_log(lines: Iterable[str]) -> list[LoadedObject]:
    """Objects valgrind loaded and where (from `valgrind -v -v` messages)."""
    objs: list[LoadedObject] = []
    current: str | None = None
    for line in lines:
        m = _READING.search(line)
        if m:
            current = m.group(1)
            continue
        m = _SVMA.search(line)
        if m and current:
            if "/valgrind/" not in current:
                objs.append(LoadedObject(current, int(m.group(1), 16), int(m.group(2), 16)))
            current = None
    return objs


def _exec_ranges(path: str) -> list[tuple[int, int]]:
    try:
        res = subprocess.run(["objdump", "-h", "-w", path], capture_output=True, text=True,
                             errors="replace")
    except OSError:
        return []
    ranges = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 7 and "CODE" in line:
            try:
                size, vma = int(parts[2], 16), int(parts[3], 16)
            except ValueError:
                continue
            ranges.append((vma, vma + size))
    return ranges


@dataclass
class Annotation:
    """Decoded instructions at run-time addresses, ready for the native annotation pass."""

    pcs: np.ndarray
    lens: np.ndarray
    brflags: np.ndarray
    uop_start: np.ndarray
    uop_count: np.ndarray
    uops: np.ndarray
    objects: list[str]

    def __len__(self) -> int:
        return len(self.pcs)


def build_annotation(objects: list[LoadedObject], pcs_seen: np.ndarray) -> Annotation:
    """Disassemble the objects that contain any of `pcs_seen` and build the lookup table."""
    pcs_seen = np.unique(pcs_seen)
    table: dict[int, Decoded] = {}
    used: list[str] = []
    for obj in objects:
        ranges = _exec_ranges(obj.path)
        hit = False
        for lo, hi in ranges:
            a, b = lo + obj.bias, hi + obj.bias
            i = np.searchsorted(pcs_seen, a)
            if i < len(pcs_seen) and pcs_seen[i] < b:
                hit = True
                sel = pcs_seen[(pcs_seen >= a) & (pcs_seen < b)]
                want = {int(x) - obj.bias for x in sel.tolist()}
                for addr, d in disassemble(obj.path, lo, hi, want).items():
                    table[addr + obj.bias] = d
        if hit:
            used.append(obj.path)
    keys = np.array(sorted(table), dtype=np.uint64)
    n = len(keys)
    lens = np.zeros(n, np.uint8)
    br = np.zeros(n, np.uint8)
    start = np.zeros(n, np.uint32)
    count = np.zeros(n, np.uint8)
    flat: list[int] = []
    for i, k in enumerate(keys.tolist()):
        d = table[k]
        lens[i] = min(d.length, 255)
        br[i] = d.branch
        start[i] = len(flat)
        count[i] = len(d.uops)
        flat.extend(d.uops)
    return Annotation(keys, lens, br, start, count, np.array(flat, dtype=np.uint64), used)


class Annotator:
    """The native annotation pass over record batches."""

    def __init__(self, ann: Annotation):
        self._L = N.lib()
        self._ann = ann  # keep the arrays alive
        self._h = self._L.cc_annot_new(ann.pcs.ctypes.data, ann.lens.ctypes.data,
                                       ann.brflags.ctypes.data, ann.uop_start.ctypes.data,
                                       ann.uop_count.ctypes.data,
                                       ann.uops.ctypes.data if len(ann.uops) else None,
                                       len(ann.pcs))
        if not self._h:
            raise MemoryError("annotation table")

    def run(self, recs: np.ndarray, final: bool = False) -> np.ndarray:
        recs = N.as_records(recs)
        out = np.empty(len(recs) * 8 + 8, dtype=N.RECORD_DTYPE)
        n = self._L.cc_annotate(self._h, recs.ctypes.data, len(recs), out.ctypes.data,
                                1 if final else 0)
        return out[:n]

    def counts(self) -> tuple[int, int]:
        import ctypes as C
        f, m = C.c_uint64(), C.c_uint64()
        self._L.cc_annot_counts(self._h, C.byref(f), C.byref(m))
        return f.value, m.value

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._L.cc_annot_free(h)
            self._h = None
