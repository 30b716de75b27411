"""Placeholder (being built): claims no file yet."""

from __future__ import annotations

import polars as pl

from parsers.base import FileContext, ParseResult

NAME = "bug-report"
DESCRIPTION = "not yet implemented"
TABLES: tuple[str, ...] = ()
FILENAME_HINTS: tuple[str, ...] = ()
DETECTS = "nothing yet"
PRIORITY = 0


def sniff(head: bytes, name: str) -> float:
    """Claim nothing yet."""
    return 0.0


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Return no tables."""
    return ParseResult(tables={}, parsed=0, unrecognized=0)
