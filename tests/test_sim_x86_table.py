"""x86decode.decode is driven by a table (RULES, FIXED): its results equal, text for text,
those of the if-chain it replaced, kept in tests/data/sim/x86_decode.json.gz (generated once
from the old decode: every mnemonic its chain and sets named, each with some 40 operand forms,
prefixes, and up to six instructions of distinct shapes per mnemonic from the objdump of libc,
libm, libstdc++, bash and python3)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from corecast.sim import x86decode

CASES = Path(__file__).resolve().parent / "data" / "sim" / "x86_decode.json.gz"


@pytest.fixture(scope="module")
def cases():
    return json.loads(gzip.decompress(CASES.read_bytes()))["cases"]


def test_the_table_decodes_every_text_as_the_old_chain_did(cases):
    assert len(cases) > 10_000
    bad = []
    for text, length, branch, uops, mnemonic in cases:
        d = x86decode.decode(text, length)
        if (d.length, d.branch, d.uops, d.mnemonic) != (length, branch, uops, mnemonic):
            bad.append(f"{text!r}: {d.branch} {d.uops} {d.mnemonic!r}, was {branch} {uops} {mnemonic!r}")
    assert bad == [], f"{len(bad)} differ, e.g. " + "; ".join(bad[:5])


def test_every_mnemonic_of_the_table_is_among_the_cases(cases):
    first = {t.split(None, 1)[0].lower() for t, *_ in cases if t}
    named = set(x86decode.FIXED) | set(x86decode._MOVES) | set(x86decode._COMPARE) | set(x86decode._NO_FLAGS) | set(x86decode._FLAG_READERS)
    for match, _ in x86decode.RULES:
        if not callable(match):
            named |= match
    assert named - first == set()


def test_rules_are_tried_in_order():
    # `rep` strings go to the string rule before anything else could read their operands
    assert x86decode.decode("rep stos %rax,%es:(%rdi)", 3).uops == x86decode.decode("stos %rax,%es:(%rdi)", 3).uops
    # a jcc objdump spells unusually is a conditional branch, jmp is not
    assert x86decode.decode("jnae   1000 <f>", 2).branch == x86decode.N.BR_COND
    assert x86decode.decode("jmp    1000 <f>", 2).branch == 0
    # xchgl is an exchange (by its base), xorl %eax,%eax a zero idiom of the generic path
    assert len(x86decode.decode("xchgl  %eax,(%rdi)", 3).uops) == 3
    assert x86decode.decode("xorl   %eax,%eax", 2).uops == x86decode.decode("xor    %eax,%eax", 2).uops
