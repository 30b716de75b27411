"""`parsers._nccl_merge.merge_chunks` since the eleventh round: a comm's rank rows from one piece only pass
as they are instead of through the group-by (a 5 GB log whose communicators are made again and again: 1.3 M
rank rows, nearly all alone in their comm; the merge's CPU and memory went with them). The tables must be
those of the merge before (`_nccl_merge10_ref.py`, 53b04f7 verbatim), row for row and in the same order, on
realistic logs (bench/big_nccl.py: communicators made again and again on odd seeds, COLL lines on even ones,
three launcher prefixes) cut into pieces at random line starts, with the merge in one group-by and in buckets.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from forensics.ingest import _concat_pieces
from parsers import _nccl_merge, nccl
from parsers._nccl_merge import _in_order, _member, merge_chunks
from parsers.base import lines_from_bytes
from tests.parsers import _nccl_merge10_ref as ref
from tests.parsers.test_merge9 import pieces

TABLES = ("events", "comms", "inventory")


def _log(tmp_path: Path, seed: int, mb: float = 0.8) -> pl.Series:
    from bench import big_nccl

    out = tmp_path / f"nccl-{seed}.log"
    big_nccl.write(out, mb, seed)
    return lines_from_bytes(out.read_bytes())


def _same(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame]) -> None:
    assert set(got) == set(want)
    for t in got:
        assert got[t].equals(want[t]), t


@pytest.mark.parametrize("seed", [1, 3, 5, 7, 0, 2, 4])
@pytest.mark.parametrize("rows", [None, 40])
def test_merge_same_as_before_on_generated_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, rows: int | None
) -> None:
    lines = _log(tmp_path, seed)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(lines)), 12))
    cat = pieces(nccl, lines, cuts)
    if rows is not None:  # (in buckets)
        monkeypatch.setattr(_nccl_merge, "MERGE_ROWS", rows)
        monkeypatch.setattr(ref, "MERGE_ROWS", rows)
    ranks = cat["comms"].filter(pl.col("record") == "rank")
    assert ranks.height > 100
    got = merge_chunks(dict(cat))
    _same(got, ref.merge_chunks(dict(cat)))
    # (both paths taken: rows alone in their comm, and comms in several pieces)
    merged = got["comms"].filter(pl.col("record") == "rank").height
    assert 0 < ranks.height - merged < ranks.height / 2


def test_merge_same_as_before_when_every_line_is_a_piece() -> None:
    """Cut at every line: every comm in many pieces, nothing alone but what one line makes."""
    from tests.parsers.test_merge9 import _series, generated_log

    lines = _series(generated_log(3, prefix=True))
    cat = pieces(nccl, lines, list(range(1, len(lines))))
    _same(merge_chunks(dict(cat)), ref.merge_chunks(dict(cat)))


def test_member_reads_json_string_members_as_json_path_match() -> None:
    detail = pl.Series(
        [
            '{"comm":"0x55d1afbf3361","phase":"COMPLETE","phases":["COMPLETE"]}',
            '{"phase":"START"}',
            '{"comm":"a\\"b","phase":"topology"}',  # an escape: read as JSON
            '{"comm":null}',
            None,
            "{}",
            '{"comm":"","phase":""}',
        ]
    )
    for key in ("comm", "phase"):
        assert _member(key, detail).to_list() == detail.str.json_path_match(f"$.{key}").to_list(), key
    plain = detail.gather([0, 1, 4, 5, 6])
    assert _member("comm", plain).to_list() == plain.str.json_path_match("$.comm").to_list()


def test_in_order_is_concat_then_sort_and_lets_go_of_the_frames() -> None:
    rng = random.Random(5)
    frames = [
        pl.DataFrame({"a": [rng.randrange(3) for _ in range(n)], "b": [rng.random() for _ in range(n)],
                      "s": [str(rng.random()) for _ in range(n)]}).with_row_index("i", offset=100 * k)
        for k, n in enumerate((40, 0, 7, 55))
    ]
    want = pl.concat(frames).sort("a", "i")
    given = list(frames)
    assert _in_order(given, ["a", "i"]).equals(want)
    assert given == []


def test_concat_pieces_gives_one_chunk_per_column() -> None:
    """The pieces' all-null columns concatenate into fewer chunks than the others; a frame of misaligned
    chunks is copied whole by every eager select (the merge of a 5 GB log: +465 MB at each)."""
    frames = [
        pl.DataFrame({"x": [k, k + 1], "ts": pl.Series([None, None], dtype=pl.Datetime("us", "UTC"))})
        for k in range(50)
    ]
    want = pl.concat(frames)
    given = list(frames)
    got = _concat_pieces(given)
    assert got.equals(want)
    assert set(got.n_chunks("all")) == {1}
    assert given == []
    one = [frames[0]]
    assert _concat_pieces(one) is frames[0] and one == []
