"""The step-log lanes of the fourth performance round give what the paths they replace give: the gate scan
that reads canonical torchtitan lines and Megatron `(min, max)` entries up to their first `step:` / `(`, the
packed fragment sort, and `_times` on rows that all have their own time or one framework."""

from __future__ import annotations

import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import step_log

_HEADS = [
    *("", "x ", "completed ", "iteration 5 ", "Step ", "[batch=1] "),
    *("{ ", "time (ms) ", "iter ", "\t", "a%|b "),
]
_TITAN_TAILS = [
    "step: 5  loss:  2.5  memory: 63.5GiB(79.98%)  tps: 16,466  tflops: 793.33  mfu: 80.22%",
    "step: 7  loss: nan  grad_norm:  0.8  memory: 1GiB(1%)  wps: 1,234.5  tflops: 1  mfu: 2%",
    "step: 7  loss: 1  memory: 1GiB(1%)  tps: 1  tflops: 1  mfu: 2% step: 3",
]
_TIMER_NAMES = [
    *("forward-compute", "iteration", "Step ", "time (ms)"),
    *("iter time", "dt", "{x}", "Epoch ", "%|"),
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(_HEADS), st.sampled_from(_TITAN_TAILS)).map("".join),
            st.tuples(
                st.sampled_from(["    ", " ", "\t"]),
                st.sampled_from(_TIMER_NAMES),
                st.sampled_from([" ....: ", ": ", " .: "]),
                st.sampled_from(["(1.5, 2.5)", "( 3, nan )", "(1e3,2)  ", "(1, 2) x"]),
            ).map("".join),
            st.sampled_from(
                ["(min, max) time across ranks (ms):", "iteration 3/ 10 | loss: 1 |", "", "plain"]
            ),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_gate_scan_with_lanes_equals_the_full_scan(lines: list[str]) -> None:
    seg = pl.DataFrame({"text": lines}, schema={"text": pl.String})
    old = step_log._LANE_MIN
    try:
        step_log._LANE_MIN = 0
        titan, minmax = step_log._titan_pre(seg), step_log._minmax_pre(seg)
    finally:
        step_log._LANE_MIN = old
    assert step_log._present(seg, titan, minmax) == step_log._present(seg), lines


@pytest.mark.parametrize("seed", range(6))
def test_packed_fragment_sort_equals_the_sort(seed: int) -> None:
    rnd = random.Random(seed)
    n = 5000
    keys = ["|0", "|1", "h|", "|", "a|10", "|2"]
    lines = [rnd.randrange(1, 10**6 if seed % 2 else 2000) for _ in range(n)]
    segs = [rnd.randrange(0, 3 if seed % 3 else 1) for _ in range(n)]
    fr = pl.DataFrame(
        {"key": [rnd.choice(keys) for _ in range(n)], "line": lines, "seg": segs, "v": list(range(n))},
        schema={"key": pl.String, "line": pl.Int64, "seg": pl.Int64, "v": pl.Int64},
    )
    if seed == 5:  # all triples distinct
        fr = fr.unique(["key", "line", "seg"], keep="first", maintain_order=True)
    want = fr.sort("key", "line", "seg")
    old = step_log._LANE_MIN
    try:
        step_log._LANE_MIN = 0
        got = step_log._sort_frags(fr)
    finally:
        step_log._LANE_MIN = old
    assert got.select("key", "line", "seg").equals(want.select("key", "line", "seg"))
    if not fr.select(pl.struct("key", "line", "seg").is_duplicated().any()).item():
        assert got.equals(want)


@pytest.mark.parametrize("case", ["all_ts", "one_framework", "both", "neither"])
def test_times_shortcuts_equal_the_general_form(case: str) -> None:
    rnd = random.Random(case)
    n = 3000
    base = pl.datetime(2025, 3, 1, time_zone="UTC")
    rows = (
        pl.DataFrame(
            {
                "key": [f"|{i % 4}" for i in range(n)],
                "line": [3 * i + 1 for i in range(n)],
                "step": [i // 4 for i in range(n)],
                "framework": [
                    "torchtitan" if case in ("one_framework", "both") or i % 5 else "megatron"
                    for i in range(n)
                ],
                "kind": ["torchtitan"] * n,
                "_ms": [i * 900 + rnd.randrange(0, 50) for i in range(n)],
                "_has": [case in ("all_ts", "both") or rnd.random() < 0.7 for _ in range(n)],
                "cum_time_s": [None] * n,
                "step_time_s": [None] * n,
                "step_time_source": [None] * n,
                "ts_quality": ["local_assumed_utc"] * n,
            },
            schema_overrides={
                "cum_time_s": pl.Float64,
                "step_time_s": pl.Float64,
                "step_time_source": pl.String,
            },
        )
        .with_columns(ts=pl.when(pl.col("_has")).then(base + pl.duration(milliseconds=pl.col("_ms"))))
        .drop("_ms", "_has")
        .sort("key", "line")
    )
    seg = rows.select("key", "line", "ts").sort("line")
    old = step_log._LANE_MIN
    try:
        step_log._LANE_MIN = 0
        got = step_log._times(rows, seg)
    finally:
        step_log._LANE_MIN = old
    want = step_log._times_general(rows, seg)
    cols = ["key", "line", "ts", "ts_quality", "step_time_s", "step_time_source"]
    assert got.sort("line").select(cols).equals(want.sort("line").select(cols), null_equal=True)
