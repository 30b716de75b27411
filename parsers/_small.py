"""What the plain-Python paths for small inputs share (infiniband, nccl-tests, perftest).

A file of a few hundred lines costs more in polars' per-call overhead (~0.05-0.3 ms an operation, dozens
of them) than in the work itself, so these parsers read such a file with Python's `re` and build each table
in one `pl.DataFrame`. A small path must give exactly the vectorised path's result: whenever it cannot
promise that (text polars' regex engine could read differently, numbers the two JSON encoders print
differently), it raises `FallbackError` and the vectorised path parses the file. Tests run both paths on
the same inputs (tests/parsers/test_small_paths.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import polars as pl

from parsers.base import EXAMPLE_CHARS, MAX_EXAMPLES, FileContext, ParseResult

MAX_BYTES = 1 << 18
"""Larger inputs take the vectorised path (where polars' per-call cost no longer dominates)."""
UNSAFE = re.compile(r"[^\t\n\x20-\x7e]")
"""Characters outside printable ASCII: where Python's `re` and polars' engine may disagree."""


def small_texts(lines: pl.Series, limit: int) -> list[str] | None:
    """`lines` as Python strings when there are at most `limit` and none is null (a small path may read
    them), else None."""
    if len(lines) > limit:
        return None
    texts = lines.cast(pl.String).to_list()
    return None if None in texts else texts


class FallbackError(Exception):
    """The small-file path cannot promise the vectorised path's result: take that path."""


def json_object(*pairs: tuple[str, object]) -> str | None:
    """What `parsers._common.json_detail` writes for these plain values (None when all are None).

    bool and int as JSON literals, floats as polars' encoder prints them, other values as strings.
    Raises FallbackError where the encoders could differ: float exponents, inf and nan; strings JSON
    escapes (quote, backslash, tab) or that json_detail's null-stripping regex would cut (`:null...`).
    """
    out = []
    for k, v in pairs:
        if v is None:
            continue
        if isinstance(v, bool):
            out.append(f'"{k}":{"true" if v else "false"}')
        elif isinstance(v, int):
            out.append(f'"{k}":{v}')
        elif isinstance(v, float):
            r = repr(v)
            if "e" in r or "n" in r:
                raise FallbackError
            out.append(f'"{k}":{r}')
        else:
            s = str(v)
            if '"' in s or "\\" in s or "\t" in s or s.startswith(":null"):
                raise FallbackError
            out.append(f'"{k}":"{s}"')
    return "{" + ",".join(out) + "}" if out else None


def attempt(
    texts: list[str], read: Callable[[str], ParseResult], *declines: Callable[[str], object]
) -> ParseResult | None:
    """`read(joined text)` for a small, printable-ASCII input none of `declines` objects to (each is given
    the joined text; a truthy answer declines), or None: the vectorised path is to parse it."""
    joined = "\n".join(texts)
    if len(joined) > MAX_BYTES or UNSAFE.search(joined) or any(d(joined) for d in declines):
        return None
    try:
        return read(joined)
    except FallbackError:
        return None


def account_texts(
    texts: list[str], oks: list[bool], first_line: int
) -> tuple[int, int, list[tuple[int, str]], int | None]:
    """`parsers.base.account` of a small input: (parsed, unrecognized, examples of unrecognized lines,
    index of the last non-blank line or None). A line is blank when `str.strip` leaves nothing (the input
    is printable ASCII, where that is polars' `\\S` test)."""
    parsed = unrecognized = 0
    examples: list[tuple[int, str]] = []
    last = None
    for i, text in enumerate(texts):
        if not text.strip():
            continue
        last = i
        if oks[i]:
            parsed += 1
            continue
        unrecognized += 1
        if len(examples) < MAX_EXAMPLES:
            examples.append((first_line + i, text[:EXAMPLE_CHARS]))
    return parsed, unrecognized, examples, last


def parse_many(
    items: Sequence[tuple[pl.Series, FileContext]],
    limit: int,
    read_small: Callable[[list[tuple[list[str], FileContext]]], list[ParseResult | None]],
    read_frames: Callable[[pl.Series, FileContext], ParseResult],
) -> list[ParseResult]:
    """A parser's `parse_many` when its plain-Python path reads small files: the files that path may take
    (`small_texts` with `limit`) read together by `read_small` (a result per file, None where it declines),
    the others, and those it declined, by the vectorised `read_frames` one by one."""
    texts = [small_texts(lines, limit) for lines, _ in items]
    small = iter(read_small([(t, ctx) for t, (_, ctx) in zip(texts, items, strict=True) if t is not None]))
    out: list[ParseResult] = []
    for t, (lines, ctx) in zip(texts, items, strict=True):
        got = next(small) if t is not None else None
        out.append(got if got is not None else read_frames(lines, ctx))
    return out
