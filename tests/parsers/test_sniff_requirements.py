"""The exact shortcuts of the sniffers (round 10): requirements derived from the sniff regexes never rule
out a head one of them matches, the kernel-log bound on strong lines is a bound, the anchored NCCL line
count is the plain count, and the digit-first test of a regex only says yes when it is so."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import (
    _sniff,
    dcgm,
    infiniband,
    kernel_log,
    nccl,
    nccl_tests,
    perftest,
    step_log,
    torch_distributed,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _heads() -> list[str]:
    out = []
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file():
            text = p.read_bytes()[:16384].decode("utf-8", "replace")
            out += [text, text.replace("\n", "\r\n"), text.upper()]
    return out


HEADS = _heads()

REGEXES = [
    *step_log._SNIFF_STRONG,
    step_log._SNIFF_WEAK,
    *step_log._SNIFF_SUPPORT,
    step_log._SNIFF_OTHER,
    *(r for r, _ in nccl_tests._SNIFF_STRONG_REQS),
    nccl_tests._SNIFF_DEVICE,
    nccl_tests._SNIFF_JSON_FILE,
    *(r for a, b, _ in infiniband._SNIFF for r in (a, b) if r is not None),
    perftest._SNIFF_BANNER,
    perftest._SNIFF_PAIR,
    perftest._SNIFF_HDR,
    torch_distributed._SNIFF_FR,
    torch_distributed._SNIFF_STRONG,
    re.compile(dcgm.HOSTENGINE_RE, re.M),
]


@pytest.mark.parametrize("i", range(len(REGEXES)))
def test_requirements_never_rule_out_a_match(i: int) -> None:
    rx = REGEXES[i]
    reqs = _sniff.cheap_requirements(rx)
    shared = _sniff.share_anchors([reqs])[0]
    for text in HEADS:
        if rx.search(text):
            assert _sniff.holds(reqs, text), (rx.pattern, reqs)
            assert _sniff.holds_shared(shared, text, {}), (rx.pattern, shared)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "b", "c", "ab", "abc", "x{", "\n", "1", "22", "-", "--", "=", " "]), max_size=30
    )
)
def test_requirement_sets_are_required(parts: list[str]) -> None:
    text = "".join(parts)
    for pattern in (r"ab(?:c|x\{)", r"a{2,}b|-{2,}=", r"(?:1|22)+ ?abc", r"b(?=c)[a-c]+x?"):
        if re.search(pattern, text):
            for req in _sniff.requirement_sets(pattern):
                assert any(s in text for s in req), (pattern, req, text)


TOKENS = [
    "h",
    "node-1",
    "x",
    ":",
    "1",
    "23",
    ":1:2",
    " [0] ",
    "[",
    "]",
    " ",
    "NCCL ",
    "INFO",
    "WARN",
    "TRACE",
    "NCCL INFO",
    "\n",
    "\r",
    "\t",
    "a:b",
    "::",
    "]:",
    "h:1:2 [0] NCCL INFO",
    ":3:4 [1] NCCL WARN",
    "x:9:9 [2] foo NCCL TRACE",
    "\u2028",
    "é",
]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=25))
def test_nccl_line_count_from_anchors(parts: list[str]) -> None:
    text = "".join(parts)
    expected = len(nccl._SNIFF_LINE.findall(text)) if "NCCL " in text else 0
    assert nccl._sniff_hits(text) == expected


def _strong_lines(text: str) -> int:
    n = 0
    for ln in text.splitlines():
        m = kernel_log._SNIFF_PDSH.match(ln)
        if kernel_log._SNIFF_STRONG_ANY.match(ln) or (
            m and kernel_log._SNIFF_STRONG_ANY.match(m.group("rest"))
        ):
            n += 1
    return n


KERNEL_LINES = [
    "kern  :warn  : [  12.3] x",
    "<6>[  1.0] x",
    "kern  :info  : <6>[ 5.0] y",
    "kern :err : [Mon Mar  3 12:00:00 2024] z",
    "n1: kern  :warn  : [  12.3] x",
    "n2: <6>[  1.0] x",
    "[\t3.5] tab",
    "[\u3000 4.5] ideo",
    "[   42.000001] NVRM: Xid",
    "Mar 3 12:00:00.123 h k[9]: m",
    "2024-01-01 12:00:00 +05:30 h t: m",
    "<13>1 2024-01-01T00:00:00Z h t p m - x",
    "6,123,456,-;msg",
    '{"__REALTIME_TIMESTAMP":"1"}',
    "n1: kern: warn: [2024-01-01T00:00:00Z]: x",
    "2024-01-01T12:00:00,123+00:00 x",
    "Mar  3 12:00:00 host kernel: x",
    "3月  3 12:00:00 h k: x",
    "2024-01-01T12:00:00Z h k: m",
    "Thu 2024-01-01 12:00:00 UTC h k[1]: m",
    " 20250327   02:56:13      0     72",
    "r01n01:1:2 [0] NCCL INFO x",
    "[rank0]:[titan] 2025-03-27 03:00:22,590 - root - INFO - step: 5",
    "plain text",
]
BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def test_kernel_strong_bound_is_a_bound() -> None:
    rng = random.Random(10)
    for _ in range(3000):
        text = ""
        for _ in range(rng.randint(1, 30)):
            line = rng.choice(KERNEL_LINES)
            if rng.random() < 0.2:
                line = f"h{rng.randint(0, 9)}: {line}"
            text += line + (rng.choice(BREAKS) if rng.random() < 0.3 else "\n")
        assert kernel_log._strong_bound(text, 10**9) >= _strong_lines(text), text


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^\d", True),
        (r"^\d+x|^(?:\d\d|\d):", True),
        (r"^(?P<a>\d{4})-", True),
        (r"\d", False),
        (r"^\d?x", False),
        (r"^(?:\d|x)", False),
        (r"^a|^\d", False),
        (r"^[0-9]", False),
        (r"(?m)^\d", False),
        (r"(?m:^\d)", False),
        (r"^(\d{0,2})", False),
    ],
)
def test_opens_with_digit(pattern: str, expected: bool) -> None:
    assert _sniff.opens_with_digit(pattern) is expected
    if expected:
        for s in ("x1", " 1", "", "\u00b2", "a"):
            assert not re.match(pattern, s)
