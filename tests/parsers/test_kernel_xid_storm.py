"""Xid storms read by distinct message: `_kernel_events._distinct_xids` matches and cuts each distinct
message once, `_kernel_blocks._events` encodes each distinct detail once (`DEDUP_STRUCTS`: by the message and
the text its extras come from, with each row's clock fields); the events are the ones of the row-by-row
reading (`DISTINCT_XIDS`, `DEDUP_STRUCTS` off).

Storms are the real fixtures' Xid lines (the 2025 decoded-ISO flood, the driver variants with caller ids,
uptimes only, a recovery action continued on the next line, a 2014 fallen-off-the-bus log) repeated past the
thresholds, shuffled, with other kernel lines, non-ASCII messages and all-distinct messages among them.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from parsers import _kernel_blocks as kb
from parsers import _kernel_events as kev
from parsers import kernel_log
from parsers.base import FileContext
from tests.conftest import harness_blanked

FIX = Path(__file__).parent.parent / "fixtures" / "kernel-log"
XID_FIXTURES = [
    "dmesg_decode_iso_xid13_xid43_flood.log",
    "xid_driver_variants_caller_ids_dmesg_raw.log",
    "dmesg_iso_no_decode_xid48_63_94_peermem.log",
    "garbage_truncated_crlf_dmesg_raw.log",
]


def _lines(name: str) -> list[str]:
    return [t for t in harness_blanked((FIX / name).read_bytes()).to_list() if t]


def _parse(lines: list[str], fast: bool, mp: pytest.MonkeyPatch) -> object:
    mp.setattr(kev, "DISTINCT_XIDS", fast)
    mp.setattr(kb, "DEDUP_STRUCTS", fast)
    ctx = FileContext(path="n0/dmesg.log", node="n0", year_hint=2025)
    return kernel_log.parse(pl.Series("line", lines, dtype=pl.String), ctx)


def _same(lines: list[str]) -> int:
    """Both readings of `lines` give the same result; returns how often the distinct path read a storm."""
    taken = []
    real = kev._distinct_xids

    def spy(cand: pl.DataFrame) -> pl.DataFrame | None:
        got = real(cand)
        taken.append(got is not None)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kev, "_distinct_xids", spy)
        fast = _parse(lines, True, mp)
        slow = _parse(lines, False, mp)
    assert fast.tables.keys() == slow.tables.keys()  # type: ignore[attr-defined]
    for name in fast.tables:  # type: ignore[attr-defined]
        assert_frame_equal(fast.tables[name], slow.tables[name])  # type: ignore[attr-defined]
    for field in ("parsed", "unrecognized", "unrecognized_examples", "notes", "node"):
        assert getattr(fast, field) == getattr(slow, field), field
    return sum(taken)


@pytest.mark.parametrize("name", XID_FIXTURES)
def test_storm_of_each_fixture(name: str) -> None:
    lines = _lines(name)
    xids = [t for t in lines if "NVRM: Xid" in t]
    assert xids
    reps = (kb._DEDUP_ROWS + 500) // len(xids) + 1
    assert _same(lines * reps) == 1
    # (the fixture's order lost: shuffled repeats, the recovery action's continuation kept after its line)
    rng = random.Random(name)
    blocks = [lines[i : i + 3] for i in range(0, len(lines), 3)] * reps
    rng.shuffle(blocks)
    assert _same([t for b in blocks for t in b]) == 1


def test_mixed_storm_with_distinct_and_non_ascii_messages() -> None:
    """Several fixtures' lines together, every 7th Xid message made unique, some with non-ASCII text."""
    lines: list[str] = []
    for name in XID_FIXTURES[:3]:
        lines += _lines(name)
    out = []
    for k in range(40):
        for i, t in enumerate(lines):
            if "NVRM: Xid" in t and i % 7 == k % 7:
                t = t + f" extra {k}-{i}" + (" é" if k % 2 else "")
            out.append(t)
    assert _same(out) == 1


def test_all_distinct_messages_take_the_row_reading() -> None:
    """A storm of messages each seen once is read row by row (the distinct path declines it)."""
    base = _lines("xid_driver_variants_caller_ids_dmesg_raw.log")
    xid = next(t for t in base if "): 79," in t or "): 13," in t)
    lines = [xid.replace("Xid", "Xid", 1) + f" n{i}" for i in range(kb._DEDUP_ROWS + 10)]
    assert _same(lines) == 0


def test_exact_keys() -> None:
    s = pl.Struct
    assert kb._exact_keys(s({"a": pl.String, "b": pl.Int64, "c": pl.Boolean, "d": pl.UInt32}))
    assert not kb._exact_keys(s({"a": pl.String, "f": pl.Float64}))
    assert not kb._exact_keys(s({"a": pl.String, "l": pl.List(pl.String)}))
    assert not kb._exact_keys(s({"a": s({"b": pl.String})}))
    assert not kb._exact_keys(pl.String())


def test_float_details_are_encoded_by_row() -> None:
    """A detail with a float field (0.0 and -0.0 encode apart) keeps its own encoding per row."""
    n = kb._DEDUP_ROWS + 2
    df = pl.DataFrame(
        {
            "ts": pl.Series([None] * n, dtype=pl.Datetime("us", "UTC")),
            "ts_quality": ["none"] * n,
            "uptime_s": [float(i) for i in range(n)],
            "boot_seg": [0] * n,
            "crash_record": [False] * n,
            "host": ["h"] * n,
            "text": ["t"] * n,
            "line": list(range(n)),
            "v": [0.0 if i % 2 else -0.0 for i in range(n)],
        }
    )
    ctx = FileContext(path="x", node="h")
    got = kb._events(df, ctx, "xid", pl.lit("79"), pl.lit("high"), pl.lit(None), {"v": pl.col("v")})
    assert got.get_column("detail").str.contains('"v":-0.0', literal=True).sum() == (n + 1) // 2


def test_events_by_key_by_struct_and_by_row_agree() -> None:
    """`_events` of a big frame: by distinct key (the clock fields of each row added to it), by distinct
    detail struct, by each row's encoding: one result (uptime-only rows, boot segments and crash records
    varying under one key)."""
    n = kb._DEDUP_ROWS + 300
    rng = random.Random(7)
    msgs = [f"m{rng.randrange(5)}" for _ in range(n)]
    df = pl.DataFrame(
        {
            "ts": pl.Series([None if i % 3 else 1_700_000_000_000_000 + i for i in range(n)], dtype=pl.Int64).cast(
                pl.Datetime("us", "UTC")
            ),
            "ts_quality": ["none" if i % 3 else "exact" for i in range(n)],
            "uptime_s": [float(i) if i % 5 else None for i in range(n)],
            "boot_seg": [i % 4 for i in range(n)],
            "crash_record": [i % 7 == 0 for i in range(n)],
            "host": [None if i % 2 else "h1" for i in range(n)],
            "text": [f"line {i}" for i in range(n)],
            "line": list(range(n)),
            "msg": msgs,
            "k": [len(m) for m in msgs],
        }
    )
    ctx = FileContext(path="x", node="n0")
    detail = {"m": pl.col("msg"), "len": pl.col("k"), "tail": pl.col("msg").str.slice(1)}
    args = (df, ctx, "xid", pl.lit("79"), pl.lit("high"), pl.lit(None))
    by_key = kb._events(*args, detail, key=("msg",))
    by_struct = kb._events(*args, detail)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kb, "DEDUP_STRUCTS", False)
        by_row = kb._events(*args, detail, key=("msg",))
    assert_frame_equal(by_key, by_struct)
    assert_frame_equal(by_key, by_row)
    assert by_key.get_column("detail").n_unique() > 10
