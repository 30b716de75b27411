"""The step sniffers' shortcuts are exact: `step_log.sniff` and `step_table.sniff` give the very score of
their plain forms (every sniff regex run on every line; the step-table head read line by line) on the
fixtures' heads, on mutations of them (CRLF, upper case, ANSI colours, cuts, lines of one format mixed into
another's, launcher prefixes) and on random heads built from pieces of step, NCCL, kernel and tool lines."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _sniff, step_log, step_table
from parsers._sniff import head_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


# ----------------------------------------------------------------------------- the plain forms


def plain_step_log_sniff(head: bytes, name: str) -> float:
    """`step_log.sniff` without any shortcut: every strong, support, other and weak regex on every line."""
    s_ = step_log
    text = head.decode("utf-8", "replace")
    strong_re = s_.any_of(s_._SNIFF_STRONG)
    support_re = s_.any_of(s_._SNIFF_SUPPORT)
    strong = support = other = 0
    weak = False
    for raw in text.splitlines()[:2000]:
        for seg in raw.split("\r"):
            if not seg.strip() or seg.startswith("#SOURCE"):
                continue
            s = s_._ANSI_PY.sub("", seg)
            s = s_._SNIFF_COLLECTOR.sub("", s, count=1)
            s = s_._SNIFF_STRIP.sub("", s, count=1)
            s = s_._SNIFF_PYLOG.sub("", s, count=1)
            if strong_re.search(s):
                strong += 1
                continue
            if support_re.search(s):
                support += 1
            elif s_._SNIFF_OTHER.search(s):
                other += 1
            elif not weak and s_._SNIFF_WEAK.search(s):
                weak = True
    if strong == 0:
        return 0.6 if weak and other == 0 else (0.35 if weak else 0.0)
    evidence = strong + 0.5 * support
    share = evidence / (evidence + other)
    if share < 0.5:
        return 0.5 + 0.4 * share
    return 0.92 + 0.06 * share


def plain_step_table_sniff(head: bytes, name: str) -> float:
    """`step_table.sniff` as it was before its shortcuts (all lines of the head split and filtered)."""
    text = head.decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")][:20]
    if not lines:
        return 0.0
    if lines[0].lstrip().startswith("{"):
        keys: list[str] = []
        for ln in lines[:5]:
            try:
                obj = json.loads(ln)
            except ValueError:
                continue
            if isinstance(obj, dict):
                keys += [k for k in obj if k not in keys]
        return 0.95 if step_table._qualifies(step_table._fields(keys)) else 0.0
    got = step_table._header(lines[0])
    if got is None:
        return 0.0
    return 0.95 if step_table._qualifies(step_table._fields(got[1])) else 0.0


# ----------------------------------------------------------------------------- heads


def _fixture_heads() -> list[bytes]:
    return [
        p.read_bytes()[:16384]
        for p in sorted(FIXTURES.rglob("*"))
        if p.is_file() and not p.name.endswith(".expected.jsonl")
    ]


FIXTURE_HEADS = _fixture_heads()


def _mutations(heads: list[bytes], seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    texts = [head_text(h) for h in heads]
    all_lines = [ln for t in texts for ln in t.splitlines()[:400]]
    out: list[bytes] = []
    prefixes = [
        "[rank3]:",
        "[default0]:",
        "  3: ",
        "node-12: ",
        "10.1.2.3: ",
        "[1,0]<stdout>:",
        "INFO:mod.x:",
        "2024-06-01T10:00:05.123456Z ",
        "\x1b[32m",
        "[rank: 1] ",
        "12:00:00.123 ",
    ]
    for t in texts:
        lines = t.splitlines()
        out.append(t.replace("\n", "\r\n").encode())
        out.append(t.upper().encode())
        out.append(t.lower().encode())
        out.append(re.sub(r"(\w+)", "\x1b[1m\\1\x1b[0m", t, count=3).encode())
        if lines:
            cut = rnd.randrange(len(t) + 1)
            out.append(t[:cut].encode())
            mixed = list(lines[:200])
            for _ in range(rnd.randrange(1, 12)):
                mixed.insert(rnd.randrange(len(mixed) + 1), rnd.choice(all_lines))
            out.append("\n".join(mixed).encode())
            pre = rnd.choice(prefixes)
            out.append("\n".join(pre + ln for ln in lines[:300]).encode())
            out.append("\n".join(lines[rnd.randrange(len(lines)) :]).encode())
            out.append("\r".join(lines[:50]).encode())
            # header lines of CSV/JSON kinds of one fixture stuck on another
            out.append(("\n".join(rnd.sample(all_lines, min(5, len(all_lines)))) + "\n" + t).encode())
    return out


MUTATED_HEADS = _mutations(FIXTURE_HEADS)

EDGE_HEADS = [
    b"",
    b"\n\n",
    b"#x\n# y\n",
    b"step,step_time_s\n1,2.0\n",
    b'"st"ep,time\n1,2\n',
    b'"ST""EP",time\n1,2\n',
    b"Step;Duration\n1;2\n",
    b"ITER\tTS\n1\t2\n",
    b"\xc4\xb0ter,time\n",  # a capital dotted I lower-cases to an 'i' and a combining dot
    b"\xe2\x84\xaaiter,time\n",
    b'{"step": 1, "time": 2}\n',
    b'{"\\u0073tep": 1, "time": 2}\n',
    b'  {"iteration": 1, "runtime": 2}\n{"x": 1}\n',
    b"\xef\xbb\xbfstep,time\n1,2\n",
    b"a" * 5000 + b"\nstep,time\n",
    b"\n" * 5000 + b"step,time\n1,2\n",
    b"step,time\r\n1,2\r\n",
    b"step\x0btime,x\n",
    b"x\x1cstep,time\n",
    b"step: 5  loss: 1.0  memory: 3GiB\n",
    b"[rank0]:step: 5  loss: 1.0  memory: 3GiB\n",
    b"[rank0]: step: 5  loss: 1.0  memory: 3GiB\n[    1.000] x\n",
    b"step: 5  loss: 1.0  memory: 3GiB\n[    1.000] x\n",
    b"step: 5  loss: 1.0  memory: 3GiB\nx NCCL INFO y\n" * 3,
    b"step: 5  loss: 1.0  memory: 3GiB\nhost: kernel: y\n",
    b"step: 5  loss: 1.0  memory: 3GiB\nThu Mar 27 02:56:48 2025\n",
    b"\x1b[0mstep: 5  loss: 1.0  memory: 3GiB\n[    1.000] x\n",
    b"[    1.000] x\nstep: 5  loss: 1.0  memory: 3GiB\n",
    b" iteration 10/ 100 | elapsed time per iteration (ms): 1.0 |\n",
    b"---------- arguments ----------\n",
    b"[titan] 2025-01-01 00:00:00 x\n",
]


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", ["fixtures", "mutated", "edges"])
def test_sniffs_equal_their_plain_forms(kind: str) -> None:
    heads = {"fixtures": FIXTURE_HEADS, "mutated": MUTATED_HEADS, "edges": EDGE_HEADS}[kind]
    for head in heads:
        assert step_log.sniff(head, "x.log") == plain_step_log_sniff(head, "x.log"), head[:300]
        assert step_table.sniff(head, "x.csv") == plain_step_table_sniff(head, "x.csv"), head[:300]


_PIECES = [
    "step: 5  loss: 1.25  memory: 3GiB ",
    "[rank1]:",
    "[titan] 2025-03-27 03:00:22,590 - root - INFO - ",
    " iteration 10/ 100 | elapsed time per iteration (ms): 12.5 | lm loss: 2.0 |",
    "time (ms) | fwd: 1.0 | bwd: 2.0",
    "  forward-compute ...: (1.0, 2.0)",
    "(min, max) time across ranks (ms):",
    "node1:123:456 [0] NCCL INFO x",
    "NVRM: Xid 79",
    "kernel: ",
    "[    1.000000] ",
    "Thu Mar 27 02:56:48 2025",
    "ProcessGroupNCCL",
    "iter 10: loss 2.0, time 33.0ms",
    "{'loss': 2.0}",
    "50%|#####     | 5/10 [00:01<00:01, 2.00it/s]",
    "Step 5 | loss:1.0",
    "[batch=1/10]:",
    "GPU 0: x",
    ", ",
    ",",
    "\t",
    ";",
    " ",
    "\n",
    "\r",
    "\r\n",
    "\x1b[32m",
    "step",
    "iter",
    "Step",
    "time",
    "ts",
    "#",
    "{",
    "}",
    '"',
    "STRAGGLER DETECTION WARNING: x. Affected ranks: [1]",
    "Rank=1 Node=n Score=0.5",
    "> building GPT model",
    "  Train loss: 1.0",
    "validation loss at iteration 5",
    "INFO:megatron:",
    "2024-06-01T10:00:05Z ",
    "0/40, SamplesPerSec=1.0",
    "MnRtt/Rnk: 1.0ms/3",
    ':::MLLOG {"a": 1}',
    "Training epoch 0, iteration 9/99 | x",
    "\u00e9",
    "\u2028",
    "\x85",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_sniffs_equal_their_plain_forms_on_random_heads(parts: list[str]) -> None:
    head = "".join(parts).encode()
    assert step_log.sniff(head, "x.log") == plain_step_log_sniff(head, "x.log")
    assert step_table.sniff(head, "x.csv") == plain_step_table_sniff(head, "x.csv")


# ----------------------------------------------------------------------------- the gate and its helpers


def test_gate_keeps_every_pattern_that_matches() -> None:
    """`gate` leaves out no sniff pattern that matches somewhere in a head (fixtures and their mutations)."""
    pats = [*step_log._SNIFF_STRONG, *step_log._WEAK_BRANCHES]
    others = step_log._OTHER_ANYWHERE
    for head in FIXTURE_HEADS + MUTATED_HEADS + EDGE_HEADS:
        text = head_text(head)
        kept = set(_sniff.gate(step_log._SNIFF_GATE, text, {}))
        assert {i for i, p in enumerate(pats) if p.search(text)} <= kept
        kept = set(_sniff.gate(step_log._OTHER_GATE[0], text, {}))
        assert {i for i, p in enumerate(others) if p.search(text)} <= kept


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_gate_keeps_every_pattern_that_matches_random(parts: list[str]) -> None:
    text = "".join(parts)
    pats = [*step_log._SNIFF_STRONG, *step_log._WEAK_BRANCHES]
    seen: dict[str, bool] = {}
    kept = set(_sniff.gate(step_log._SNIFF_GATE, text, seen))
    assert {i for i, p in enumerate(pats) if p.search(text)} <= kept
    assert all(v == (k in text) for k, v in seen.items())


@pytest.mark.parametrize(
    ("pattern", "branches"),
    [
        (r"ab|cd", ["ab", "cd"]),
        (r"a|b", None),  # one character class to CPython
        (r"(?:a|b)c|d", ["(?:a|b)c", "d"]),
        (r"[|]x|y", ["[|]x", "y"]),
        (r"[]|]x|y", ["[]|]x", "y"]),
        (r"[^]|]x|y", ["[^]|]x", "y"]),
        (r"\|x|y", [r"\|x", "y"]),
        (r"abc", ["abc"]),
        (r"ab|ac", None),  # CPython merges the shared prefix: no cut is checked
        (r"(?i)a|b", None),
    ],
)
def test_top_branches(pattern: str, branches: list[str] | None) -> None:
    got = _sniff.top_branches(re.compile(pattern))
    assert (None if got is None else [p.pattern for p in got]) == branches


def test_top_branches_of_the_sniff_regexes_match_as_the_whole() -> None:
    for rx in (step_log._SNIFF_WEAK, step_log._SNIFF_OTHER):
        parts = _sniff.top_branches(rx)
        assert parts is not None
        for head in FIXTURE_HEADS + MUTATED_HEADS:
            for line in head_text(head).splitlines()[:300]:
                assert bool(rx.search(line)) == any(p.search(line) for p in parts)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^\[\s*\d+\] ", r"\[\s*\d+\] "),
        (r"\bkernel: ", "kernel: "),
        (r" NCCL (?:INFO|WARN)\b", " NCCL (?:INFO|WARN)"),
        (r"a\\b", None),  # (an escaped backslash before a b: no cut, to be safe)
        (r"a$", None),
        (r"^a\bb", None),
        (r"(?=a)b", None),
        (r"[^a]b", None),
    ],
)
def test_anywhere(pattern: str, expected: str | None) -> None:
    got = _sniff.anywhere(re.compile(pattern))
    assert (None if got is None else got.pattern) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30), st.integers(0, 400), st.integers(0, 400))
def test_other_anywhere_finds_what_the_other_regex_finds_in_any_piece(
    parts: list[str], i: int, j: int
) -> None:
    text = "".join(parts)
    piece = text[min(i, j) : max(i, j)]
    if step_log._SNIFF_OTHER.search(piece):
        assert any(p.search(text) for p in step_log._OTHER_ANYWHERE)


_CSV_PIECES = [
    "step",
    "Step",
    "ITER",
    "time",
    "ts",
    "_runtime",
    ",",
    "\t",
    ";",
    '"',
    "'",
    " ",
    "-",
    ".",
    "#",
    "\n",
    "\r",
    "\r\n",
    "\x0b",
    "\x85",
    "\u2028",
    "İ",
    "x" * 300,
    "{",
    '{"step": 1, "time": 2}',
    "}",
    ":",
    "1",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_CSV_PIECES), max_size=60), st.sampled_from([0, 500, 509, 4090, 5000]))
def test_step_table_sniff_equals_its_plain_form_on_random_heads(parts: list[str], pad: int) -> None:
    text = "".join(parts)
    for head in ((" " * pad + "\n" + text).encode(), ("#" * pad + "\n" + text).encode(), text.encode()):
        assert step_table.sniff(head, "x.csv") == plain_step_table_sniff(head, "x.csv")


def test_gate_is_sound_for_every_sniff_regex() -> None:
    """A plan of many unrelated sniff regexes (every parser's) keeps each that matches in a head."""
    from tests.parsers.test_sniff_requirements import REGEXES  # (the sniff regexes of all parsers)

    plan = _sniff.gate_plan(REGEXES)
    for head in FIXTURE_HEADS + MUTATED_HEADS[::3]:
        text = head_text(head)
        kept = set(_sniff.gate(plan, text, {}))
        assert {i for i, p in enumerate(REGEXES) if p.search(text)} <= kept


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "bb", "\n", "\r", "\r\n", "\x0b", "\x85", "\u2028", "x" * 300]), max_size=200
    ),
    st.sampled_from([1, 3, 2000]),
)
def test_first_lines_are_the_split_lines(parts: list[str], n: int) -> None:
    text = "".join(parts)
    assert list(step_log._first_lines(text, n)) == text.splitlines()[:n]
