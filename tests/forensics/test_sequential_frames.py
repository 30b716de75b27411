"""The workers' sequential frames (`ingest.sequential_frames`): `DataFrame.select` / `with_columns` as their
`_seq` forms give the same tables and manifest, and the workers set them up (`_worker_init`)."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from forensics import ingest
from forensics.outputs import read_tables

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _ingested(bundle: Path, out: Path) -> tuple[dict[str, pl.DataFrame], dict]:
    manifest = ingest.ingest(bundle, out, jobs=1)
    return read_tables(out), manifest


def _stable(manifest: dict) -> str:
    """The manifest without what differs run to run (timings, paths of the run)."""
    keep = {k: v for k, v in manifest.items() if k not in ("ingested_at", "timings_s")}
    text = json.dumps(keep, sort_keys=True, default=str)
    return text


def test_same_tables_with_sequential_frames(tmp_path: Path) -> None:
    """Every fixture and a sample bundle, ingested with the parsers' selects sequential and parallel."""
    bundle = tmp_path / "bundle"
    shutil.copytree(FIXTURES, bundle / "fixtures")
    shutil.copytree(ROOT / "samples" / "incident-xid79", bundle / "sample")
    plain = _ingested(bundle, tmp_path / "plain")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pl.DataFrame, "select", pl.DataFrame.select)
        mp.setattr(pl.DataFrame, "with_columns", pl.DataFrame.with_columns)
        mp.setattr(pl.DataFrame, "filter", pl.DataFrame.filter)
        ingest.sequential_frames()
        assert pl.DataFrame.select is pl.DataFrame.select_seq
        assert pl.DataFrame.filter is ingest._filter_by_columns
        seq = _ingested(bundle, tmp_path / "seq")
    assert pl.DataFrame.select is not pl.DataFrame.select_seq  # (restored)
    assert pl.DataFrame.filter is ingest._POLARS_FILTER
    assert plain[0].keys() == seq[0].keys()
    assert sum(t.height for t in plain[0].values()) > 1000
    for name in plain[0]:
        assert_frame_equal(plain[0][name], seq[0][name], check_row_order=True)
    assert _stable(plain[1]) == _stable(seq[1])


def _select_is_sequential() -> bool:
    return (
        pl.DataFrame.select is pl.DataFrame.select_seq
        and pl.DataFrame.with_columns is pl.DataFrame.with_columns_seq
        and pl.DataFrame.filter is ingest._filter_by_columns
    )


def test_workers_use_sequential_frames() -> None:
    with ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=ingest._worker_init) as pool:
        assert pool.submit(_select_is_sequential).result(timeout=120)
    assert not _select_is_sequential()  # (this process: as it was)


def test_filter_by_columns_is_polars_filter() -> None:
    df = pl.DataFrame(
        {"a": [1, 2, 3, 4], "b": ["x", None, "z", "é"], "c": pl.Series([[1], [], None, [2, 3]]), "d": [0.5, None, 2.0, -0.0]},
        schema_overrides={"b": pl.Categorical},
    )
    cases: list[tuple[tuple, dict]] = [
        ((pl.col("b").is_not_null(),), {}),
        ((pl.Series([True, None, False, True]),), {}),
        ((pl.col("d") > 0,), {}),  # (nulls in the mask)
        ((pl.lit(True),), {}),  # (a scalar: polars' own)
        ((pl.col("a") > 1, pl.col("a") < 4), {}),  # (several predicates: polars' own)
        ((), {"a": 1}),  # (constraints: polars' own)
        ((pl.col("a", "d").is_not_null(),), {}),  # (several columns: polars' own)
        ((pl.col("a") > 9,), {}),
    ]
    for preds, cons in cases:
        try:
            want = ingest._POLARS_FILTER(df, *preds, **cons)
        except pl.exceptions.PolarsError as e:  # (several columns: ambiguous, polars says)
            with pytest.raises(type(e)):
                ingest._filter_by_columns(df, *preds, **cons)
            continue
        assert_frame_equal(ingest._filter_by_columns(df, *preds, **cons), want)
    assert ingest._filter_by_columns(pl.DataFrame(), pl.lit(True)).shape == (0, 0)
    with pytest.raises(pl.exceptions.PolarsError):
        ingest._filter_by_columns(df, pl.col("a"))  # (not a boolean: polars' own error)
