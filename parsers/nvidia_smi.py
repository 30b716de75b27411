"""Placeholder for the nvidia_smi parser (its issue builds it); claims no file until then."""

from __future__ import annotations

import polars as pl

from parsers.base import FileContext, ParseResult

NAME = "nvidia_smi".replace("_", "-")
DESCRIPTION = "not yet implemented"
TABLES: tuple[str, ...] = ()
FILENAME_HINTS: tuple[str, ...] = ()
DETECTS = "nothing yet"
PRIORITY = 0


def sniff(head: bytes, name: str) -> float:
    """Claim nothing until the parser exists."""
    return 0.0


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Return no tables."""
    return ParseResult(tables={}, parsed=0, unrecognized=0)
