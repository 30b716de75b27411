"""Format detection stays cheap and exact: every sniffer returns quickly on nasty heads, and the literal
shortcuts of `parsers._sniff` (and the linear rewrites of quadratic sniff regexes) never change a score."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nccl, nccl_tests, registry
from parsers._sniff import head_text, may_match, required_literals

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

NASTY = {
    "one 64 KiB line": b"a" * 65536,
    "one 64 KiB line of digits": b"1" * 65536,
    "one 64 KiB line of spaces": b" " * 65536,
    "one 64 KiB line of name:1:2 [0] ": b"node:1:2 [0] " * 5041,
    "10k blank lines": b"\n" * 10000,
    "10k CRLF blank lines": b"\r\n" * 10000,
    "10k lines of one space": b" \n" * 10000,
    "10k lines of one tab": b"\t\n" * 10000,
    "binary": bytes(range(256)) * 256,
    "NUL bytes": b"\0" * 65536,
}

BOUND_S = 0.5
"""CPU seconds one sniffer may take on one nasty head. Before the fix some took 3-30 s; now all take under
~0.15 s, so the bound is generous for a loaded 2-core machine (CPU time, not wall time, is measured)."""


@pytest.mark.parametrize("label", list(NASTY))
def test_every_sniffer_is_fast_on_nasty_heads(label: str) -> None:
    head = NASTY[label]
    slow = []
    for parser in registry.PARSERS:
        t0 = time.process_time()
        registry._safe_sniff(parser, head, "x.log")
        spent = time.process_time() - t0
        if spent > BOUND_S:
            slow.append(f"{parser.NAME}: {spent:.2f} s")
    assert not slow, f"{label}: {slow}"


def _sniff_regexes() -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for parser in registry.PARSERS:
        for name, value in vars(parser).items():
            if isinstance(value, re.Pattern) and "SNIFF" in name.upper():
                out.append((f"{parser.NAME}.{name}", value))
            elif isinstance(value, list | tuple):
                for i, v in enumerate(value):
                    for w in v if isinstance(v, tuple) else (v,):
                        if isinstance(w, re.Pattern) and "SNIFF" in name.upper():
                            out.append((f"{parser.NAME}.{name}[{i}]", w))
    return out


def _fixture_texts() -> list[str]:
    texts = []
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file() and not p.name.endswith(".expected.jsonl"):
            texts.append(head_text(p.read_bytes()[:65536]))
    return texts


def test_required_literals_are_sound_on_every_fixture_line() -> None:
    """A sniff regex that matches a fixture line (or whole head) always finds one of its literals there."""
    texts = _fixture_texts()
    regexes = _sniff_regexes()
    assert len(regexes) > 30
    for label, rx in regexes:
        lits = required_literals(rx)
        for text in texts:
            for piece in [text, *text.splitlines()[:300]]:
                if rx.search(piece):
                    assert may_match(lits, piece), (label, lits, piece[:200])


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"abc", ("abc",)),
        (r"(?i)abc", None),
        (r"a(?i:bcd)e", ("a",)),
        (r"x(?:abc|de)y", ("abc", "de")),
        (r"(?:abc|d*)", None),
        (r"-{20,}", ("-",)),
        (r"a?bc", ("bc",)),
        (r"\d+", None),
        (r"^\s*#bytes\s+#iterations", ("#iterations",)),
        (r"(?P<x>foo)bar\d(?P=x)", ("foo",)),
        # sets that mean something else in Rust's regex (polars) than in Python's: no shortcut
        (r"[[:digit:]]x", None),
        (r"abc[a-z&&[^x]]", None),
        (r"abc[a-z--x]", None),
        (r"abc[a~~b]", None),
        (r"--abc", ("--abc",)),
    ],
)
def test_required_literals(pattern: str, expected: tuple[str, ...] | None) -> None:
    assert required_literals(pattern) == expected


_ALPHABET = st.sampled_from(
    ["a", "b", "c", "d", "e", "x", "y", "-", " ", "\n", "bc", "abc", "de", "foo", "bar", "#bytes", "1", "A", "B"]
)


@settings(max_examples=50, deadline=None)
@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_required_literals_sound_on_random_text(text: str) -> None:
    for pattern in (r"a?bc", r"x?(?:abc|de)y?", r"(?:foo|ba+r)-{2,}", r"(?m)^\s*(?:abc|de)\s*$", r"(?:a|b)(?:c|d)e"):
        if re.search(pattern, text):
            assert may_match(required_literals(pattern), text), (pattern, text)


NCCL_EDGES = [
    "host:1:2 [0] NCCL INFO x\n" * 3,
    "NCCL INFOx:1:2 [0] NCCL INFO a\nh:1:2 [0] NCCL INFOh:1:2 [0] NCCL WARN\n",
    "h:1:2 [0] NCCL TRACEfoo:3:4 [1] NCCL WARN\n",
    "aaa:bbb:1:2 [0] x NCCL INFO\n[h:1:2 [0] NCCL INFO]\n",
    "a" * 3000 + ":1:2 [0] NCCL INFO\n",
    "",
]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["h", "x", ":", "1", ":1:2 [0] ", "NCCL INFO", " NCCL WARN", " ", "\n", "[", "]", "é"]), max_size=40).map("".join))
def test_nccl_sniff_hits_counts_like_the_original_regex(text: str) -> None:
    assert nccl._sniff_hits(text) == len(nccl._SNIFF_LINE.findall(text))


def test_nccl_sniff_hits_on_edges_and_fixtures() -> None:
    for text in NCCL_EDGES + _fixture_texts():
        assert nccl._sniff_hits(text) == len(nccl._SNIFF_LINE.findall(text))


def test_nccl_tests_fast_nccl_count_matches_the_original() -> None:
    for text in NCCL_EDGES + _fixture_texts():
        assert len(nccl_tests._SNIFF_NCCL_FAST.findall(text)) == len(nccl_tests._SNIFF_NCCL.findall(text))


def test_head_text_is_the_plain_decode() -> None:
    raw = b"abc\xff\xfe\n" + os.urandom(64)
    assert head_text(raw) == raw.decode("utf-8", "replace")
    assert head_text(raw) is head_text(raw)


_PIECES = st.sampled_from(
    ["ab", "b", "a", "\n", " ", "é", "€", "\x00", "NCCL", "GPU0", "x\u00e9y", "\ufffd"]
)
_RAW = st.sampled_from([b"\xff", b"\xe2\x82", b"\xc3", b"\xed\xa0\x80", b"\x80", b"\xf0\x9f\x98"])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(_PIECES.map(str.encode), _RAW), max_size=40),
    st.lists(st.one_of(_PIECES, st.text(max_size=4)), min_size=1, max_size=4).map("".join),
)
def test_has_answers_as_in_on_the_head_text(parts: list[bytes], lit: str) -> None:
    """`has` on a head's text scans the head's bytes (`memmem`) for an ASCII literal: the same answer as `in`
    on the text, whatever invalid UTF-8 (replaced in the text) lies next to the literal's bytes."""
    from parsers import _sniff

    head = b"".join(parts)
    text = head_text(head)
    compiled = _sniff._CONTAINS
    try:
        # (through the compiled module's `contains`, then through ctypes' `memmem`)
        for contains in (compiled, None):
            _sniff._CONTAINS = contains
            assert _sniff.has(text, lit) == (lit in text)
            other = (" " + text)[1:]  # (an equal text, another object: `in` itself)
            assert _sniff.has(other, lit) == (lit in other)
            found = _sniff._finder(lit)
            assert (found(text) is not None) == (lit in text)
            b = lit.encode()
            assert _sniff.has_bytes(head, b) == (b in head)
            assert _sniff.has_bytes(head, b[:1]) == (b[:1] in head)
    finally:
        _sniff._CONTAINS = compiled


@pytest.mark.parametrize("through", ["compiled", "ctypes"])
def test_has_scans_the_bytes_of_the_head_with_memmem(monkeypatch: pytest.MonkeyPatch, through: str) -> None:
    """The fast path is taken (where the compiled module is built, or the C library has `memmem`) for ASCII
    literals of two characters or more on the text of the head decoded last, and not for other texts or
    literals."""
    from parsers import _sniff

    calls: list[bytes] = []
    if through == "compiled":
        real_contains = _sniff._CONTAINS
        if real_contains is None:
            pytest.skip("parsers._fastscan not built")

        def contains(h: bytes, lit: bytes) -> bool:
            calls.append(lit)
            return real_contains(h, lit)

        monkeypatch.setattr(_sniff, "_CONTAINS", contains)
    else:
        if _sniff._MEMMEM is None:
            pytest.skip("no memmem in this C library")
        real = _sniff._MEMMEM

        def counting(h: bytes, n: int, lit: bytes, m: int) -> int | None:
            calls.append(lit)
            return real(h, n, lit, m)  # type: ignore[no-any-return]

        monkeypatch.setattr(_sniff, "_CONTAINS", None)
        monkeypatch.setattr(_sniff, "_MEMMEM", counting)
    head = b"NCCL INFO \xff ring 00 : 0 -> 1\n" * 100 + b"tail"
    text = head_text(head)
    assert _sniff.has(text, "ring 00") and not _sniff.has(text, "ring 01") and _sniff.has(text, "tail")
    assert calls == [b"ring 00", b"ring 01", b"tail"]
    assert _sniff.has(text, "é") is False and _sniff.has(text, "\ufffd") and _sniff.has(text, "N")
    assert _sniff.has("ring 00 elsewhere", "ring 00")
    assert len(calls) == 3  # (non-ASCII, single characters and other texts: `in`)


def test_kernel_log_joined_prefix_regexes_match_like_the_lists() -> None:
    from parsers import kernel_log
    from parsers._sniff import _AnyOf, alternation, any_of

    assert alternation(kernel_log._SNIFF_STRONG) is not None  # joined, not the slow fallback
    lines = [ln for text in _fixture_texts() for ln in text.splitlines()[:300]]
    for ln in lines:
        assert bool(kernel_log._SNIFF_STRONG_ANY.match(ln)) == any(r.match(ln) for r in kernel_log._SNIFF_STRONG), ln
        assert bool(kernel_log._SNIFF_WEAK_ANY.match(ln)) == any(r.match(ln) for r in kernel_log._SNIFF_WEAK), ln
    backref = [re.compile(r"(a)\1"), re.compile(r"b")]
    assert alternation(backref) is None and isinstance(any_of(backref), _AnyOf)
    assert any_of(backref).match("aa") and not any_of(backref).match("ab")
