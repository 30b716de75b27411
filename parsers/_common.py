"""Helpers shared by parsers: identities (PCI bus ids), launcher envelopes, time parsing. All vectorised."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

# ----------------------------------------------------------------------------- PCI bus ids

_BDF_RE = r"(?i)^(?:PCI:)?(?:([0-9a-f]{4,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$"


def normalize_bus_id(expr: pl.Expr) -> pl.Expr:
    """Normalise any GPU/PCI address form to `dddd:bb:dd.f` lower case (FORMATS.md §1.4).

    Accepts `PCI:0000:9b:00` (Xid, no function), `0000:84:00.0`, `00000000:4C:00.0` (nvidia-smi),
    `3b:00.0`. Anything else becomes null. The function defaults to 0.
    """
    s = expr.cast(pl.String).str.strip_chars()
    parts = s.str.extract_groups(_BDF_RE)
    domain = parts.struct.field("1").fill_null("0").str.to_integer(base=16, strict=False)
    bus = parts.struct.field("2").str.to_integer(base=16, strict=False)
    dev = parts.struct.field("3").str.to_integer(base=16, strict=False)
    fn = parts.struct.field("4").fill_null("0")
    return pl.format(
        "{}:{}:{}.{}",
        _hex(domain & 0xFFFF, 4),
        _hex(bus, 2),
        _hex(dev, 2),
        fn,
    )


def nccl_bus_id(expr: pl.Expr) -> pl.Expr:
    """Normalise NCCL's `busId 6b000` (hex of dddd:bb:dd.f with leading zeros dropped)."""
    v = expr.cast(pl.String).str.strip_chars().str.to_integer(base=16, strict=False)
    return pl.format(
        "{}:{}:{}.{}",
        _hex((v // 0x100000) & 0xFFFF, 4),
        _hex((v // 0x1000) & 0xFF, 2),
        _hex((v // 0x10) & 0xFF, 2),
        (v & 0x7).cast(pl.String),
    )


def _hex(v: pl.Expr, width: int) -> pl.Expr:
    """Lower-case zero-padded hex of an integer expression."""
    digits = "0123456789abcdef"
    out = pl.lit("")
    for i in range(width - 1, -1, -1):
        nib = (v // (16**i)) % 16
        out = out + pl.lit(pl.Series(list(digits))).get(nib)
    return out


# ----------------------------------------------------------------------------- launcher envelopes

# Outermost first; each pattern's named groups are kept as metadata (FORMATS.md §1.1).
ENVELOPES: tuple[tuple[str, str], ...] = (
    ("openmpi", r"^\[\d+,(?<rank>\d+)\]<(?:stdout|stderr)>:\s?"),
    ("srun", r"^\s*(?<rank>\d+): "),
    ("torchrun", r"^\[(?:default|rank)(?<rank>\d+)\]:\s?"),
    ("lightning", r"^\[rank: (?<rank>\d+)\] "),
)


def strip_envelopes(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Strip launcher prefixes from a column of lines; return (rest, rank from the prefix or null).

    Applied up to two times (prefixes stack, e.g. `3: [default1]:`); the innermost rank wins since it is
    the one the writing process knows itself by.
    """
    rank = pl.lit(None, dtype=pl.Int32)
    rest = text
    for _ in range(2):
        for _name, pattern in ENVELOPES:
            py = pattern.replace("(?<", "(?P<")
            got = rest.str.extract(py, 1).cast(pl.Int32, strict=False)
            rank = pl.when(got.is_not_null()).then(got).otherwise(rank)
            rest = pl.when(got.is_not_null()).then(rest.str.replace(py, "")).otherwise(rest)
    return rest, rank


# ----------------------------------------------------------------------------- misc


def to_json(obj: dict[str, Any]) -> str:
    """Serialise a detail dict compactly and deterministically."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def json_detail(**fields: pl.Expr) -> pl.Expr:
    """Build a JSON object string column from named expressions (nulls dropped by json_encode)."""
    return pl.struct(**fields).struct.json_encode()
