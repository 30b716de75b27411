"""The job's timeline from the `steps` table: baseline, lasting slowdowns (change points), spikes, hangs.

Step times are equal on all ranks of a synchronous job, so this module says *that* and *when* the job
slowed or stopped, not *which* rank: localisation is `forensics/stragglers.py`'s job.

Method:
1. Fleet timeline: per step, the median step time over the ranks that logged it (one rank or all).
2. Baseline: the median of the steady part (warm-up steps dropped: the first WARMUP_SHARE of steps).
3. Level shifts: binary segmentation on the log step time with a robust cost (median/MAD); a segment
   whose median is ≥ SHIFT_RATIO × baseline for ≥ MIN_SEGMENT steps is a `step_regression`.
4. Spikes: single steps ≥ SPIKE_RATIO × baseline; spikes recurring at a fixed step period on every node
   are checkpoint/evaluation stalls (reported as `periodic_stall`, not as faults).
5. Hang: the last step is followed by silence: the gap from the last step to the end of the bundle's
   evidence (the latest event, e.g. the watchdog timeouts) is ≥ HANG_FACTOR × baseline and ≥ HANG_MIN_S.
Assumption: steps are numbered consistently across ranks; times without timestamps still give levels
and slowdowns, but no wall-clock start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

WARMUP_SHARE = 0.05
MIN_SEGMENT = 8
"""Fewest steps a lasting slowdown must span (shorter ones are spikes)."""
SHIFT_RATIO = 1.08
"""A segment ≥ 8% slower than the baseline is a regression (jitter in healthy jobs is a few %)."""
SPIKE_RATIO = 2.0
HANG_FACTOR = 20.0
HANG_MIN_S = 120.0


@dataclass(frozen=True)
class Regime:
    """A stretch of steps at one level."""

    step_start: int
    step_end: int
    ts_start: datetime | None
    ts_end: datetime | None
    level_s: float
    steps: int


@dataclass(frozen=True)
class Timeline:
    """What the steps say about the whole job."""

    series: pl.DataFrame
    """step, ts, step_time_s (fleet median per step), ranks (how many ranks logged it)."""
    baseline_s: float | None
    regimes: list[Regime]
    slow: list[Regime]
    """Regimes ≥ SHIFT_RATIO × baseline."""
    spikes: pl.DataFrame
    periodic_stall_period: int | None
    hang: dict | None
    """{'last_step', 'last_ts', 'silence_s', 'until'} when the job stopped progressing before the end."""


def no_timeline() -> Timeline:
    """The timeline of a bundle without step times."""
    series = pl.DataFrame(schema={"step": pl.Int64, "ts": pl.Datetime("us", "UTC"), "step_time_s": pl.Float64, "ranks": pl.UInt32})
    return Timeline(series, None, [], [], series, None, None)


def fleet_series(steps: pl.DataFrame) -> pl.DataFrame:
    """Per step: median step time over the ranks that logged it, earliest timestamp, rank count."""
    if steps.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "ts": pl.Datetime("us", "UTC"), "step_time_s": pl.Float64, "ranks": pl.UInt32})
    # one job per timeline: where logs of several frameworks are mixed (other jobs in the bundle), the
    # framework with the most step rows is the job under investigation
    if steps["framework"].n_unique() > 1:
        main = steps.group_by("framework").len().sort("len", descending=True)["framework"][0]
        steps = steps.filter(pl.col("framework") == main)
    return (
        steps.filter(pl.col("step").is_not_null() & pl.col("step_time_s").is_not_null() & (pl.col("step_time_s") > 0))
        .group_by("step")
        .agg(
            ts=pl.col("ts").max(),
            step_time_s=pl.col("step_time_s").median(),
            ranks=pl.struct("node", "rank").n_unique(),
        )
        .sort("step")
    )


def _segments(y: np.ndarray, min_size: int, penalty: float) -> list[tuple[int, int]]:
    """Binary segmentation of `y` into (start, end) pieces by the largest drop in L1 cost around medians."""

    def cost(a: np.ndarray) -> float:
        return float(np.abs(a - np.median(a)).sum()) if len(a) else 0.0

    out: list[tuple[int, int]] = []
    stack = [(0, len(y))]
    while stack:
        s, e = stack.pop()
        seg = y[s:e]
        if e - s < 2 * min_size:
            out.append((s, e))
            continue
        base = cost(seg)
        best, best_k = 0.0, -1
        # candidate split points on a coarse grid keeps this O(n log n)-ish for long jobs
        stride = max(1, (e - s) // 200)
        for k in range(s + min_size, e - min_size + 1, stride):
            gain = base - cost(y[s:k]) - cost(y[k:e])
            if gain > best:
                best, best_k = gain, k
        if best_k < 0 or best < penalty:
            out.append((s, e))
        else:
            stack.append((best_k, e))
            stack.append((s, best_k))
    return sorted(out)


def timeline(steps: pl.DataFrame, end_of_evidence: datetime | None = None) -> Timeline:
    """Build the job timeline (see module docstring)."""
    series = fleet_series(steps)
    empty_spikes = series.head(0)
    if series.height < 3:
        return Timeline(series, float(series["step_time_s"].median()) if series.height else None, [], [], empty_spikes, None, None)  # type: ignore[arg-type]
    warm = int(series.height * WARMUP_SHARE)
    steady = series.slice(warm)
    y = np.log(steady["step_time_s"].to_numpy())
    mad = float(np.median(np.abs(y - np.median(y)))) or 0.01
    # penalty: a split must explain more than a few MADs per step of the shorter side
    penalty = max(3.0 * mad * MIN_SEGMENT, 0.05 * MIN_SEGMENT)
    segs = _segments(y, MIN_SEGMENT, penalty)
    regimes = []
    for s, e in segs:
        part = steady.slice(s, e - s)
        regimes.append(
            Regime(
                step_start=int(part["step"][0]),
                step_end=int(part["step"][-1]),
                ts_start=part["ts"][0],
                ts_end=part["ts"][-1],
                level_s=float(part["step_time_s"].median()),  # type: ignore[arg-type]
                steps=part.height,
            )
        )
    # baseline: the level of the longest early regime (the job's normal speed before anything happened)
    first = regimes[0]
    candidates = [r for r in regimes if r.steps >= MIN_SEGMENT] or regimes
    baseline = min(candidates, key=lambda r: r.level_s).level_s if len(candidates) > 1 else first.level_s
    if first.level_s <= baseline * SHIFT_RATIO:
        baseline = first.level_s
    slow = [r for r in regimes if r.level_s >= baseline * SHIFT_RATIO and r.steps >= MIN_SEGMENT]
    spikes = steady.filter(pl.col("step_time_s") >= SPIKE_RATIO * baseline)
    period = _periodic(spikes["step"].to_list())
    hang = None
    last_ts = series["ts"].drop_nulls().max()
    if end_of_evidence is not None and last_ts is not None:
        silence = (end_of_evidence - last_ts).total_seconds()  # type: ignore[operator]
        if silence >= max(HANG_MIN_S, HANG_FACTOR * baseline):
            hang = {
                "last_step": int(series["step"][-1]),
                "last_ts": last_ts,
                "silence_s": silence,
                "until": end_of_evidence,
            }
    return Timeline(series, baseline, regimes, slow, spikes, period, hang)


def _periodic(spike_steps: list[int]) -> int | None:
    """The common period of recurring spikes (checkpoints), if at least 3 spikes share one."""
    if len(spike_steps) < 3:
        return None
    gaps = np.diff(sorted(spike_steps))
    if len(gaps) == 0:
        return None
    vals, counts = np.unique(gaps, return_counts=True)
    i = int(np.argmax(counts))
    return int(vals[i]) if counts[i] >= max(2, len(gaps) // 2) else None


def lost_gpu_hours(tl: Timeline, gpus: int, regime: Regime | None = None) -> float | None:
    """GPU-hours lost: extra time of the slow steps over the baseline (or of one regime), times the GPUs."""
    if tl.baseline_s is None or gpus <= 0:
        return None
    s = tl.series
    if regime is not None:
        s = s.filter(pl.col("step").is_between(regime.step_start, regime.step_end))
    extra = float((s["step_time_s"] - tl.baseline_s).clip(lower_bound=0).sum())
    return extra * gpus / 3600.0


def hang_gpu_hours(tl: Timeline, gpus: int, teardown: datetime | None = None) -> float | None:
    """GPU-hours lost while the job made no progress: from its last step to its `teardown` (when the
    watchdogs' timeouts ended its processes) where known, else to the end of the evidence (telemetry often
    runs on for hours after the job is gone, until the bundle is collected)."""
    if tl.hang is None or gpus <= 0:
        return None
    secs = float(tl.hang["silence_s"])
    if teardown is not None and tl.hang.get("last_ts") is not None:
        secs = min(secs, max(0.0, (teardown - tl.hang["last_ts"]).total_seconds()))
    return secs * gpus / 3600.0


def to_anomalies(tl: Timeline) -> pl.DataFrame:
    """The timeline's findings as rows of the `anomalies` table."""
    rows = []
    b = tl.baseline_s
    for r in tl.slow:
        rows.append(
            {
                "kind": "step_regression",
                "metric": "step_time_s",
                "start": r.ts_start,
                "end": r.ts_end,
                "step_start": r.step_start,
                "step_end": r.step_end,
                "value": r.level_s,
                "baseline": b,
                "deviation": r.level_s / b if b else None,
                "score": (r.level_s / b - 1) if b else None,
                "detail": f'{{"steps": {r.steps}, "deviation": "ratio to baseline"}}',
            }
        )
    for row in tl.spikes.iter_rows(named=True):
        rows.append(
            {
                "kind": "periodic_stall" if tl.periodic_stall_period else "step_spike",
                "metric": "step_time_s",
                "start": row["ts"],
                "end": row["ts"],
                "step_start": row["step"],
                "step_end": row["step"],
                "value": row["step_time_s"],
                "baseline": b,
                "deviation": row["step_time_s"] / b if b else None,
                "score": None,
                "detail": (
                    f'{{"period_steps": {tl.periodic_stall_period}}}' if tl.periodic_stall_period else None
                ),
            }
        )
    if tl.hang:
        h = tl.hang
        rows.append(
            {
                "kind": "hang",
                "metric": "step",
                "start": h["last_ts"],
                "end": h["until"],
                "step_start": h["last_step"],
                "step_end": h["last_step"],
                "value": h["silence_s"],
                "baseline": b,
                "deviation": h["silence_s"] / b if b else None,
                "score": None,
                "detail": '{"deviation": "silence / baseline step time"}',
            }
        )
    if not rows:
        from forensics.schema import empty

        return empty("anomalies")
    from forensics.schema import conform

    return conform(pl.DataFrame(rows, infer_schema_length=None), "anomalies")


def progress_span(tl: Timeline) -> tuple[datetime | None, datetime | None]:
    """From the first to the last logged step: while the job was making progress (no padding, no hang).

    Telemetry compared across nodes to find the one the job waits for must come from these times only:
    before the job and after its teardown every GPU idles, and a node whose sampler started or stopped
    a minute apart from the others' would stand apart from the fleet for no other reason.
    """
    ts = tl.series["ts"].drop_nulls()
    return (None, None) if len(ts) == 0 else (ts.min(), ts.max())  # type: ignore[return-value]


def window(tl: Timeline, pad: timedelta = timedelta(minutes=10)) -> tuple[datetime | None, datetime | None]:
    """The job's time window from its steps (padded), or (None, None) without timestamps."""
    ts = tl.series["ts"].drop_nulls()
    if len(ts) == 0:
        return None, None
    return ts.min() - pad, (tl.hang["until"] if tl.hang else ts.max()) + pad  # type: ignore[operator]
