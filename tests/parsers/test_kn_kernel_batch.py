"""The round-7 shortcuts of the kernel-log batch path read like the steps they replace: the per-file cut of a
group's tables in Python (`_py_cut`) like its polars form (`_pl_cut`), the ISO arithmetic from a few hundred
stamps on like Python's reading, the literals of a group's candidates found by one polars pass like Python's
substring search."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import _kernel_events as kev
from parsers import kernel_log
from parsers.base import FileContext, ParseResult
from tests.conftest import assert_same_result, harness_blanked

FIX = Path(__file__).parent.parent / "fixtures"
FIXTURES = sorted(
    p
    for p in (FIX / "kernel-log").glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)


def _files(n: int) -> list[tuple[FileContext, list[str]]]:
    return [(FileContext(path=f"n{k}/dmesg.log", node=f"n{k}" if k % 3 else "unknown"), []) for k in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_py_cut_is_the_polars_cut(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 5, 32])
    files = _files(n)
    rows = sorted(
        ((k << kev.FILE_SHIFT) + rnd.randrange(1, 500), k) for k in range(n) for _ in range(rnd.randrange(4))
    )
    node = [
        rnd.choice([f"\x01{k}", f"h{k}.x\x00{k}", f"gpu-{k}\x0012\x00{k}", "", None, "plain", "a\x00b"])
        for _line, k in rows
    ]
    cols = {
        "line": pl.Series([r[0] for r in rows], dtype=pl.Int64),
        "node": pl.Series(node, dtype=pl.String),
        "kind": pl.Series([str(i) for i in range(len(rows))], dtype=pl.String),
    }
    for with_file in (True, False):
        file = {"file": pl.Series([None] * len(rows), dtype=pl.String)} if with_file else {}
        df = pl.DataFrame({**cols, **file})
        a, b = kernel_log._py_cut(df, files), kernel_log._pl_cut(df, files)
        assert len(a) == len(b) == n
        for x, y in zip(a, b, strict=True):
            assert x.equals(y), (x, y)
            assert x.schema == y.schema
        assert df.equals(pl.DataFrame({**cols, **file}), null_equal=True)  # (not changed in place)


def test_iso_arithmetic_from_a_few_hundred_stamps() -> None:
    rnd = random.Random(4)
    good = []
    for _ in range(3000):
        day = f"2025-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}"
        tod = f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}"
        frac, off = rnd.choice(["", ",123456", ".000001"]), rnd.choice(["Z", "+00:00", "-0530"])
        good.append(f"{day}T{tod}{frac}{off}")
    odd = ["2025-02-30T00:00:00Z", "0000-01-01T00:00:00Z", "2025-01-01T00:00:00.123Z", "2025-01-01 00:00:00Z"]
    for n in (200, 256, 300, 1500, 2047, 2048, 2600):
        for extra in ([], odd[:2], odd, [None]):
            raw = pl.Series("ts", good[:n] + extra)
            assert kernel_log._iso_fast_then_full(raw).equals(kernel_log._iso_rowwise(raw), check_names=False)


def _fixture_items() -> list[tuple[pl.Series, FileContext]]:
    return [
        (harness_blanked(p.read_bytes()), FileContext(path=f"n{i}/k.log", node="n", year_hint=2025))
        for i, p in enumerate(FIXTURES)
    ]


def _in_batches_of_8(items: list[tuple[pl.Series, FileContext]]) -> list[list[ParseResult]]:
    return [kernel_log.parse_many(items[i : i + 8]) for i in range(0, len(items), 8)]


@pytest.mark.parametrize("chars", [0, 10**9])
def test_found_literals_either_way(monkeypatch: pytest.MonkeyPatch, chars: int) -> None:
    items = _fixture_items()
    want = _in_batches_of_8(items)
    monkeypatch.setattr(kev, "FOUND_CHARS", chars)
    got = _in_batches_of_8(items)
    for ws, gs in zip(want, got, strict=True):
        for w, g in zip(ws, gs, strict=True):
            assert_same_result(g, w)


def test_py_json_kept_readings_are_the_readings() -> None:
    rnd = random.Random(8)
    values = [None, "", "a", 'q"uote', "back\\slash", "é", True, False, 1, 0, 1.0, "1", "true", "null"]
    for _ in range(3000):
        fields = {k: rnd.choice(values) for k in rnd.sample(["port", "state", "device", "boot_seg", "x"], 3)}
        assert kev._py_json(dict(fields)) == kev._py_json_enc(dict(fields)), fields


def test_inventory_column_frames_are_the_row_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _fixture_items()
    got = _in_batches_of_8(items)
    monkeypatch.setattr(kev, "COLUMN_FRAMES", False)
    want = _in_batches_of_8(items)
    rows = 0
    for gs, ws in zip(got, want, strict=True):
        for g, w in zip(gs, ws, strict=True):
            assert_same_result(g, w)
            if "inventory" in g.tables:
                rows += g.tables["inventory"].height
                assert g.tables["inventory"].schema == w.tables["inventory"].schema
    assert rows > 20
