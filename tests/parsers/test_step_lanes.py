"""The step-log lanes of the third performance round give what the paths they replace give: the own-time lane
(date-time parsed per distinct second, fraction added), the torchtitan tail capture, the per-distinct tqdm
description/postfix values, Megatron timer entries combined per block and the date-first triage."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import step_log
from parsers.base import FileContext


def _both_lanes(monkeypatch: pytest.MonkeyPatch, lines: list[str], name: str = "x.log") -> None:
    """`parse` with every lane forced on equals `parse` with every lane off."""
    s = pl.Series("text", lines, dtype=pl.String)
    got = {}
    for lane_min in (0, 10**12):
        monkeypatch.setattr(step_log, "_LANE_MIN", lane_min)
        monkeypatch.setattr(step_log, "_ROWS_MIN", lane_min)
        monkeypatch.setattr(step_log, "_MEG_VALUES_MIN", lane_min)
        got[lane_min] = step_log.parse(s, FileContext(path=name, node="n1", year_hint=2025))
    a, b = got[0], got[10**12]
    assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.partial, a.node) == (
        b.parsed,
        b.unrecognized,
        b.unrecognized_examples,
        b.partial,
        b.node,
    )
    assert sorted(a.tables) == sorted(b.tables)
    for t in a.tables:
        assert a.tables[t].equals(b.tables[t], null_equal=True), (t, a.tables[t], b.tables[t])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "[titan] ", " [", "x1 "]),
            st.sampled_from(
                [
                    "2025-03-03 08:00:01",
                    "2024-02-29 23:59:59",
                    "2025-02-29 10:00:00",
                    "2016-12-31 23:59:60",
                    "2025-03-03 24:00:00",
                    "2025-03-03T08:00:59",
                ]
            ),
            st.sampled_from(
                ["", ",1", ".123456", ",1234567", ".12345678", ".123456789", ".000001", ",999999"]
            ),
            st.sampled_from(["", " - root", "] x", " "]),
        ).map(lambda t: "".join(t)),
        min_size=1,
        max_size=8,
    )
)
def test_own_time_lane_edge_times(lines: list[str]) -> None:
    seg = pl.DataFrame(
        {"text": lines, "coll_ts": [None] * len(lines)}, schema_overrides={"coll_ts": pl.String}
    )
    old = step_log._LANE_MIN
    try:
        step_log._LANE_MIN = 0
        got = step_log._own_time(seg, 2025, False, False)
    finally:
        step_log._LANE_MIN = old
    want = step_log._own_time_re(seg, 2025, False, False)
    assert got.equals(want, null_equal=True), (lines, got.to_dicts(), want.to_dicts())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["", "x", "a ", "\t", "\u00a0", "[titan] 2025-03-03 08:00:01,107 - root - INFO - "]
            ),
            st.sampled_from(["step: 5", "step:  12"]),
            st.sampled_from(["  loss:  2.5", "  loss: nan", " loss: 1e3"]),
            st.sampled_from(["  grad_norm:  0.8", ""]),
            st.sampled_from(["  memory: 63.5GiB(79.98%)", "  memory: 1GiB(1%)"]),
            st.sampled_from(["  tps: 16,466", "  wps: 1,234.5", "  tps: 7"]),
            st.sampled_from(
                ["  tflops: 793.33  mfu: 80.22%", "  tflops: 1  mfu: 2%", "  tflops: 1  mfu: 2% step: 3"]
            ),
        ).map(lambda t: "".join(t)),
        min_size=1,
        max_size=6,
    )
)
def test_titan_tail_lane_equals_the_regexes(lines: list[str]) -> None:
    text = pl.Series("text", lines)
    old = step_log._LANE_MIN
    try:
        step_log._LANE_MIN = 0
        got = step_log._titan_values(text)
        step_log._LANE_MIN = 10**12
        want = step_log._titan_values(text)
    finally:
        step_log._LANE_MIN = old
    assert got.equals(want, null_equal=True), (lines, got.to_dicts(), want.to_dicts())


def test_tqdm_values_per_distinct_text(monkeypatch: pytest.MonkeyPatch) -> None:
    bars = []
    descs = ["", "1|5|Loss: 2.3", "Epoch 3", "Epoch 2: ", "Training: ", "eval", "x"]
    posts = [
        "",
        ", loss=1.5",
        ", reduced_train_loss=2.1, global_step=7",
        ", train_step_timing in s=1.2",
        ", consumed_samples=64, loss=1e3",
    ]
    for i in range(1, 60):
        d, p = descs[i % len(descs)], posts[i % len(posts)]
        bars.append(f"{d}{i % 100:3d}%|####      | {i}/100 [00:{i % 60:02d}<01:00,  1.{i % 10}s/it{p}]")
    _both_lanes(monkeypatch, bars + ["\r".join(bars[:20])])


def test_timer_blocks_per_block(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = []
    for it in range(1, 6):
        for rank in ("0", "3"):
            head = f" {rank}:  [2025-03-01 06:0{it}:00] iteration {it}/ 10"
            lines.append(f"{head} | elapsed time per iteration (ms): 3958.8 |")
            lines.append(f" {rank}: (min, max) time across ranks (ms):")
            for name, a, b in (
                ("forward-backward", 3681.7, 3698.5),
                ("optimizer", 1, 2),
                ("batch-generator", 0.1, 9),
            ):
                lines.append(f" {rank}:     {name} ....................: ({a + it}, {b + it})")
    lines.append("    orphan-entry ........: (1.0, 2.0)")
    lines.append("2025-03-01T06:09:00.123Z    forward-backward ....: (1.0, 2.0)")
    _both_lanes(monkeypatch, lines)


def test_triage_of_dated_and_undated_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    dated = [
        f"[2025-03-02 07:06:{i:02d},504] [INFO] [Rank 0] step={i}, skipped=0, lr=[1e-05]" for i in range(40)
    ]
    undated = ["random chatter", "Epoch 1:", "   ", "loss: 3", "iteration 4/9 | lm loss: 2.0 |", "x:  "]
    _both_lanes(monkeypatch, dated + undated)
    _both_lanes(monkeypatch, undated * 10 + dated[:3])
    _both_lanes(monkeypatch, dated)
