"""The x86-64 decoder of the issue-rate model: one instruction of `objdump -d` AT&T text
(`mov 0x8(%rsp),%rdi`) into its branch kind and its uops with register dependencies.

- a memory source becomes a load uop (address registers in, a temporary out), a memory
  destination a store uop (address registers and the value in); read-modify-write both;
- the operation reads its register operands (and the flags for adc, sbb, cmov, set, jcc) and
  writes its destination register (and the flags for arithmetic and logic);
- push/pop/call/ret update %rsp and move data through the stack; `xor %r,%r` and the like
  have no input (a zero idiom);
- vector and x87 instructions run on the fp unit, branches on the branch unit.

It is driven by a table: `RULES` (which handler decodes which mnemonics, first match wins) and
`FIXED` (the instructions whose uops do not depend on their operands); everything else is
decoded from its operands and the traits of its mnemonic (`_traits`). This is a dependency
model, not a full decoder: implicit operands of rare instructions (string ops, cpuid, ...) are
approximated and documented in docs/sim.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

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


# ----------------------------------------------------------------------------------------
# the decoding table
#
# An instruction is decoded by the first rule of RULES that matches it: a rule names its
# mnemonics (a set, or a test on the mnemonic and its base for the families that are not worth
# listing) and the handler that turns the instruction into (branch flags, uops). Instructions
# whose uops do not depend on their operands are in FIXED, as their uops; everything else falls
# to `_generic`, which reads the operands (memory, registers) and the mnemonic's traits (moves,
# compares, flag readers: the sets above).

@dataclass
class _Insn:
    """One instruction being decoded: its mnemonic, the mnemonic with a size suffix taken off
    (`addl` -> `add`; `base`), its operands, whether it jumps or calls through an operand, and
    whether it runs on the fp unit."""

    mn: str
    base: str
    ops: list[_Op]
    indirect: bool
    fp: bool


Handler = Callable[[_Insn], tuple[int, list[int]]]
#: (srcs, dsts) of one ALU uop
_Uop = tuple[tuple[int, ...], tuple[int, ...]]

#: Instructions whose uops are fixed (all on the ALU): serialising and timing instructions,
#: fences, hints and no-ops, the flag setters, and the sign extensions of %rax.
FIXED: dict[str, tuple[_Uop, ...]] = {
    **{mn: (((), ()),) for mn in (
        "nop", "nopw", "nopl", "endbr64", "endbr32", "pause", "hlt", "lfence", "sfence", "mfence", "int3",
        "ud2", "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta", "prefetchw", "sysenter", "xgetbv",
        "fwait", "wait", "clflush", "vzeroupper", "vzeroall", "emms")},
    "cpuid": (((0, 1), (0, 3)), ((), (1, 2))),
    "rdtsc": (((), (0, 2)),),
    "rdtscp": (((), (0, 2)),),
    "syscall": (((0, 7, 6, 2), (0, 1)),),
    **{mn: (((), (FLAGS,)),) for mn in ("clc", "stc", "cmc", "cld", "std")},
    **{mn: (((0,), (0,)),) for mn in ("cltq", "cdqe", "cwtl", "cbw")},
    **{mn: (((0,), (2,)),) for mn in ("cltd", "cqto", "cdq", "cqo", "cwd", "cwtd")},
}

#: The size-suffixed forms objdump prints (`addl`, `movq`, `shrb`): the base these take.
_SUFFIXED_BASES = frozenset((
    "add", "sub", "and", "or", "xor", "adc", "sbb", "cmp", "test", "mov", "inc", "dec",
    "neg", "not", "shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "imul", "mul",
    "div", "idiv", "xchg", "bt", "bts", "btr", "btc", "nop", "movs", "movz", "stos",
    "lods", "scas", "cmps", "cmpxchg", "xadd", "shld", "shrd", "bsf", "bsr", "tzcnt",
    "lzcnt", "popcnt", "movsl"))
_STRING = frozenset(("movs", "stos", "lods", "scas", "cmps"))
#: not fp although they start with v, f or p
_NOT_FP = frozenset(("pause", "push", "pushq", "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta",
                     "prefetchw", "popcnt", "pop", "pext", "pdep"))
#: the fp instructions that write the flags (the compares)
_FP_FLAG_WRITERS = frozenset(("ucomiss", "ucomisd", "comiss", "comisd", "vucomiss", "vucomisd", "vcomiss",
                              "vcomisd", "ptest", "vptest"))
#: moves by their prefix: the destination is only written, the flags untouched
_MOVE_PREFIXES = ("vmov", "vbroadcast", "vpbroadcast", "cvt", "vcvt", "pmovzx", "pmovsx", "vpmovzx", "vpmovsx")
#: `op %r,%r` with the same register twice: no input (a zero idiom)
_ZERO_IDIOMS = frozenset(("xor", "sub", "pxor", "vpxor", "xorps", "xorpd", "vxorps", "vxorpd", "pcmpeqd",
                          "pcmpeqb", "psubd"))
_SHIFTS = frozenset(("shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "shld", "shrd"))
_WIDE = frozenset(("mul", "div", "idiv"))        # and one-operand imul: %rdx:%rax in and out


def _base(mn: str, ops: list[_Op]) -> str:
    m = _SUFFIX.match(mn)
    base = m.group(1) if m and m.group(1) in _SUFFIXED_BASES else mn
    if base.startswith("movs") and base not in _MOVES and not base.startswith(("movsd", "movss", "movsh")):
        base = "movs" if mn in ("movsb", "movsw", "movsl", "movsq") and not ops else "movsx"
    if base.startswith("movz"):
        base = "movzx"
    return base


def _fixed(i: _Insn) -> tuple[int, list[int]]:
    return 0, [pack_uop(list(srcs), list(dsts), N.UNIT_ALU) for srcs, dsts in FIXED[i.mn]]


def _jcc(i: _Insn) -> tuple[int, list[int]]:
    uops = []
    srcs = [FLAGS]
    if i.mn in ("jrcxz", "jecxz", "jcxz"):
        srcs = [1]
    elif i.mn.startswith("loop"):
        uops.append(pack_uop([1], [1], N.UNIT_ALU))
        srcs = [1] + ([FLAGS] if i.mn != "loop" else [])
    uops.append(pack_uop(srcs, [], N.UNIT_BRANCH))
    return N.BR_COND, uops


def _target_load(i: _Insn, uops: list[int]) -> list[int]:
    """An indirect branch's target: loaded (the load's uop appended), or in a register."""
    op = i.ops[0] if i.indirect and i.ops else None
    if op is not None and op.kind == "mem":
        uops.append(pack_uop(op.regs, [TMP_LOAD], N.UNIT_LOAD))
        return [TMP_LOAD]
    if op is not None and op.kind == "reg":
        return op.regs
    return []


def _jmp(i: _Insn) -> tuple[int, list[int]]:
    uops: list[int] = []
    target = _target_load(i, uops)
    uops.append(pack_uop(target, [], N.UNIT_BRANCH))
    return (N.BR_INDIRECT if i.indirect else 0), uops


def _call(i: _Insn) -> tuple[int, list[int]]:
    uops: list[int] = []
    target = _target_load(i, uops)
    uops.append(pack_uop([4], [4], N.UNIT_ALU))
    uops.append(pack_uop([4], [], N.UNIT_STORE))
    uops.append(pack_uop(target, [], N.UNIT_BRANCH))
    return N.BR_CALL | (N.BR_INDIRECT if i.indirect else 0), uops


def _ret(i: _Insn) -> tuple[int, list[int]]:
    return N.BR_RET | N.BR_INDIRECT, [pack_uop([4], [TMP_LOAD], N.UNIT_LOAD), pack_uop([4], [4], N.UNIT_ALU),
                                      pack_uop([TMP_LOAD], [], N.UNIT_BRANCH)]


def _push(i: _Insn) -> tuple[int, list[int]]:
    ops, uops = i.ops, []
    data = [r for o in ops for r in o.regs] if ops and ops[0].kind == "reg" else []
    if ops and ops[0].kind == "mem":
        uops.append(pack_uop(ops[0].regs, [TMP_LOAD], N.UNIT_LOAD))
        data = [TMP_LOAD]
    uops.append(pack_uop([4], [4], N.UNIT_ALU))
    uops.append(pack_uop([4] + data, [], N.UNIT_STORE))
    return 0, uops


def _pop(i: _Insn) -> tuple[int, list[int]]:
    ops, uops = i.ops, []
    if ops and ops[0].kind == "reg":
        uops.append(pack_uop([4], ops[0].regs, N.UNIT_LOAD))
    else:
        uops.append(pack_uop([4], [TMP_LOAD], N.UNIT_LOAD))
        if ops and ops[0].kind == "mem":
            uops.append(pack_uop(ops[0].regs + [TMP_LOAD], [], N.UNIT_STORE))
    uops.append(pack_uop([4], [4], N.UNIT_ALU))
    return 0, uops


def _push_flags(i: _Insn) -> tuple[int, list[int]]:
    return 0, [pack_uop([4], [4], N.UNIT_ALU), pack_uop([4, FLAGS], [], N.UNIT_STORE)]


def _pop_flags(i: _Insn) -> tuple[int, list[int]]:
    return 0, [pack_uop([4], [4], N.UNIT_ALU), pack_uop([4], [FLAGS], N.UNIT_LOAD)]


def _leave(i: _Insn) -> tuple[int, list[int]]:
    return 0, [pack_uop([5], [4], N.UNIT_ALU), pack_uop([4], [5], N.UNIT_LOAD), pack_uop([4], [4], N.UNIT_ALU)]


def _lea(i: _Insn) -> tuple[int, list[int]]:
    src = i.ops[0].regs if i.ops else []
    dst = i.ops[-1].regs if len(i.ops) > 1 else []
    return 0, [pack_uop(src[:4], dst[:1], N.UNIT_ALU)]


def _string(i: _Insn) -> tuple[int, list[int]]:
    """String instructions: implicit %rsi, %rdi, %rcx (and %rax)."""
    return 0, [pack_uop([6, 1], [TMP_LOAD], N.UNIT_LOAD), pack_uop([7, TMP_LOAD, 0], [], N.UNIT_STORE),
               pack_uop([6, 7], [6, 7], N.UNIT_ALU)]


def _exchange(i: _Insn) -> tuple[int, list[int]]:
    """xchg, xadd: both operands are read and written."""
    regs = [r for o in i.ops if o.kind == "reg" for r in o.regs]
    mem = [o for o in i.ops if o.kind == "mem"]
    if not mem:
        return 0, [pack_uop(regs[:4], regs[:2], N.UNIT_ALU)]
    return 0, [pack_uop(mem[0].regs, [TMP_LOAD], N.UNIT_LOAD),
               pack_uop(regs + [TMP_LOAD], regs[:1] + [TMP_OP], N.UNIT_ALU),
               pack_uop(mem[0].regs + [TMP_OP], [], N.UNIT_STORE)]


@dataclass
class _Traits:
    """What the operation does with its operands and the flags (the generic path)."""

    reads_dst: bool = True
    writes_dst: bool = True
    reads_flags: bool = False
    writes_flags: bool = True
    implicit_src: tuple[int, ...] = ()
    implicit_dst: tuple[int, ...] = ()


def _traits(i: _Insn) -> _Traits:
    mn, base, ops = i.mn, i.base, i.ops
    t = _Traits(reads_flags=base in _FLAG_READERS or mn in _SETCC or mn in _CMOV)
    if mn in _CMOV or mn in _SETCC:
        t.writes_flags = False
    if base in _MOVES or base in ("movzx", "movsx", "movsxd") or mn.startswith(_MOVE_PREFIXES) \
            or mn in _SETCC or base in _NO_FLAGS:
        t.reads_dst = t.writes_flags = False
    if mn in _CMOV:
        t.reads_dst = True
    if base in _COMPARE or (mn.startswith(("cmp", "vcmp", "test")) and len(ops) == 2
                            and not mn.startswith("cmpxchg")):
        t.writes_dst = False
        t.writes_flags = base in _COMPARE or mn.startswith(("cmp", "test"))
        if mn.startswith(("vcmp", "cmpps", "cmppd", "cmpss", "cmpsd")):
            t.writes_dst, t.writes_flags = True, False
    if base == "not":
        t.writes_flags = False
    if i.fp:
        t.writes_flags = mn in _FP_FLAG_WRITERS
    # three-operand forms (AVX, imul $imm,src,dst, shld, ...): the destination is not read
    if len(ops) >= 3 and (mn.startswith("v") or base == "imul"):
        t.reads_dst = False
    if base in _WIDE or (base == "imul" and len(ops) == 1):
        t.implicit_src = t.implicit_dst = (0, 2)
    if base in _SHIFTS and any(o.kind == "reg" and o.regs == [1] for o in ops[:-1]):
        t.implicit_src = (1,)
    if base == "cmpxchg":
        t.implicit_src, t.implicit_dst = (0,), (0,)
    return t


def _generic(i: _Insn) -> tuple[int, list[int]]:
    """Reads and writes from the operands and the traits: a load for a memory source, the
    operation on the ALU or fp unit, a store for a memory destination."""
    ops, base = i.ops, i.base
    t = _traits(i)
    uops: list[int] = []
    dst = ops[-1] if ops else None
    srcs_ops = ops[:-1] if len(ops) > 1 else ([] if t.writes_dst else ops)
    if len(ops) == 1 and t.writes_dst:
        srcs_ops = []
    if base in _WIDE or (base == "imul" and len(ops) == 1):
        srcs_ops = ops
        dst = None
    zero_idiom = (base in _ZERO_IDIOMS and len(ops) >= 2 and all(o.kind == "reg" for o in ops)
                  and len({tuple(o.regs) for o in ops}) == 1)

    loads = [o for o in srcs_ops if o.kind == "mem"]
    store_to: _Op | None = dst if (dst is not None and dst.kind == "mem" and t.writes_dst) else None
    load_dst = dst is not None and dst.kind == "mem" and (t.reads_dst or not t.writes_dst)
    in_regs: list[int] = []
    if loads or load_dst:
        mem = loads[0] if loads else dst
        assert mem is not None
        uops.append(pack_uop(mem.regs[:4], [TMP_LOAD], N.UNIT_LOAD))
        in_regs.append(TMP_LOAD)
    for o in srcs_ops:
        if o.kind == "reg":
            in_regs.extend(o.regs)
    if dst is not None and dst.kind == "reg" and t.reads_dst:
        in_regs.extend(dst.regs)
    in_regs.extend(t.implicit_src)
    if t.reads_flags:
        in_regs.append(FLAGS)
    if zero_idiom:
        in_regs = []
    out_regs: list[int] = []
    if dst is not None and dst.kind == "reg" and t.writes_dst:
        out_regs.extend(dst.regs)
    out_regs.extend(t.implicit_dst)
    if store_to is not None:
        out_regs = [TMP_OP]
    if t.writes_flags:
        out_regs.append(FLAGS)
    in_regs = list(dict.fromkeys(in_regs))[:4]
    out_regs = list(dict.fromkeys(out_regs))[:2]
    pure_move = (base in _MOVES or base in ("movzx", "movsx", "movsxd")) and not i.fp
    if pure_move and store_to is not None and not loads:
        # mov %reg,mem / mov $imm,mem: one store uop
        data = [r for o in srcs_ops if o.kind == "reg" for r in o.regs]
        uops.append(pack_uop((store_to.regs + data)[:4], [], N.UNIT_STORE))
        return 0, uops
    if pure_move and loads and dst is not None and dst.kind == "reg":
        # mov mem,%reg: the load writes the register directly
        uops[-1] = pack_uop(loads[0].regs[:4], dst.regs[:1], N.UNIT_LOAD)
        return 0, uops
    uops.append(pack_uop(in_regs, out_regs, N.UNIT_FP if i.fp else N.UNIT_ALU))
    if store_to is not None:
        uops.append(pack_uop((store_to.regs + [TMP_OP])[:4], [], N.UNIT_STORE))
    return 0, uops


def _is_jcc(i: _Insn) -> bool:
    """The conditional branches objdump may spell otherwise (jx, jnae, ...)."""
    return i.mn.startswith("j") and i.mn not in ("jmp", "jmpq") and len(i.mn) <= 6


#: The first rule whose mnemonics match decides (in this order: a family below may also match
#: a later test, e.g. `rep` strings and the generic path).
RULES: tuple[tuple[frozenset[str] | Callable[[_Insn], bool], Handler], ...] = (
    (frozenset(_JCC), _jcc),
    (_is_jcc, _jcc),
    (frozenset(("jmp", "jmpq", "ljmp")), _jmp),
    (frozenset(("call", "callq", "lcall")), _call),
    (frozenset(("ret", "retq", "retf", "lret", "iret", "iretq")), _ret),
    (frozenset(("push", "pushq", "pushw")), _push),
    (frozenset(("pop", "popq", "popw")), _pop),
    (frozenset(("pushf", "pushfq")), _push_flags),
    (frozenset(("popf", "popfq")), _pop_flags),
    (frozenset(("leave", "leaveq")), _leave),
    (lambda i: i.mn == "lea" or (i.mn.startswith("lea") and len(i.mn) == 4), _lea),
    (lambda i: i.base in _STRING or i.mn.startswith(("rep", "movsb")), _string),
    (frozenset(FIXED), _fixed),
    (lambda i: i.base in ("xchg", "xadd"), _exchange),      # xchgl, xaddq too
)


def _rule(i: _Insn) -> Handler:
    for match, handler in RULES:
        if match(i) if callable(match) else i.mn in match:
            return handler
    return _generic


def decode(mnemonic_and_operands: str, length: int) -> Decoded:
    """Decode one objdump instruction text (`mov 0x8(%rsp),%rdi`)."""
    words = mnemonic_and_operands.split(None, 1)
    while words and words[0] in _PREFIXES:
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return Decoded(length, 0, [pack_uop()], "")
    mn = words[0].lower()
    ops_text = words[1] if len(words) > 1 else ""
    ops = [_operand(o) for o in _split_operands(ops_text)]
    fp = any(o.fp for o in ops) or (mn.startswith(("v", "f", "p")) and mn not in _NOT_FP)
    insn = _Insn(mn, _base(mn, ops), ops, "*" in ops_text.split("<")[0], fp)
    branch, uops = _rule(insn)(insn)
    return Decoded(length, branch, uops, mn)
