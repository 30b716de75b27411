"""Heads shared by the sniffer equivalence tests (test_kn_sniff_equiv, test_sniff_equiv_s7ib): the fixture and
real-log files, a pool of their first lines, their heads with cut, CRLF and vertical-tab variants, and the
comparison of a sniffer with its reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = Path("/work/shared/real-logs")

Sniff = Callable[[bytes, str], float]


def _files() -> list[Path]:
    roots = [FIXTURES] + ([REAL] if REAL.is_dir() else [])
    return sorted(p for r in roots for p in r.rglob("*") if p.is_file())


FILES = _files()


def _pool() -> list[str]:
    pool: list[str] = []
    for p in FILES:
        pool += p.read_bytes()[:6000].decode("utf-8", "replace").splitlines()[:40]
    return pool


POOL = _pool()
"""The first 40 lines of the first 6,000 bytes of every file."""


def fixture_heads() -> list[bytes]:
    """Every file's head (16 KiB), cut to 4,096 and 700 bytes, with CRLF and with vertical tabs."""
    out = []
    for p in FILES:
        data = p.read_bytes()[:16384]
        out += [data, data[:4096], data[:700], data.replace(b"\n", b"\r\n"), data.replace(b"\n", b"\x0b")]
    return out


def check(sniff_new: Sniff, sniff_old: Sniff, heads: list[bytes]) -> None:
    """Both sniffers score every head alike."""
    bad = [(h[:200], o, n) for h in heads if (o := sniff_old(h, "x.log")) != (n := sniff_new(h, "x.log"))]
    assert not bad, bad[:3]
