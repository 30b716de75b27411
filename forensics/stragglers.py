"""Which node is slow: per-rank timings, straggler-detector reports and nccl-tests, against the fleet.

Metric first, decision second (STYLE P14):
- `rank_lateness(steps)`: per step, each rank's compute time (forward + backward [+ optimizer], or the
  step time minus the time it waited in communication) as a robust z-score over the ranks of that step;
  per node, the median z and the share of steps where one of its ranks was the slowest. Assumption:
  synchronous collectives end together, so the rank that computes longest (and waits least) holds
  everyone; the step time itself is equal on all ranks and says nothing about who.
- `detector_votes(events)`: how often a straggler detector (Megatron, NVRx) named each node slowest.
- `nccl_test_lateness(comms)`: per node, the median bus bandwidth of the nccl-tests runs it took part in,
  against the fleet's runs of the same test.
- `telemetry_lateness(samples, start, end)`: per node, how far its GPUs' power, utilisation and clocks sit
  from the fleet's within [start, end], each reading against the fleet's of its time bucket;
  `telemetry_onsets` finds the stretches where one node stood apart for a while (it turned slow part-way).
- `flag_stragglers(...)`: the decision, with named thresholds.
What it cannot see: a node that is slow in a phase that ends in a collective looks like everyone else.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import polars as pl

from forensics.robust import robust_z
from forensics.schema import WEIGHT, with_weight
from forensics.telemetry import gpu_readings

LATE_Z = 4.0
"""A node whose ranks sit ≥ 4 robust z above the per-step median in most steps is a straggler."""
LATE_SHARE = 0.5
"""...and is the slowest rank in at least half of the steps (a rotating slowest rank is jitter)."""
MIN_RANKS = 4
BUSBW_DROP = 0.85
"""A node whose nccl-tests runs reach < 85% of the fleet's median bus bandwidth is slow on the network."""


def rank_lateness(steps: pl.DataFrame) -> pl.DataFrame:
    """Per node: median robust z of its ranks' compute time per step, and the share of steps it was slowest."""
    if steps.height == 0:
        return pl.DataFrame()
    compute = pl.coalesce(
        pl.col("forward_s") + pl.col("backward_s") + pl.col("optimizer_s").fill_null(0),
        pl.col("step_time_s") - pl.col("comm_wait_s"),
    )
    # rows whose node is unknown (a job-level log that names no host) cannot localise anything
    s = steps.filter(pl.col("step").is_not_null() & (pl.col("node") != "unknown")).with_columns(compute=compute).drop_nulls("compute")
    if s.select(pl.struct("node", "rank").n_unique()).item() < MIN_RANKS:
        return pl.DataFrame()
    s = s.with_columns(
        z=robust_z("compute", over="step"),
        slowest=(pl.col("compute") == pl.col("compute").max().over("step")),
        fleet=pl.col("compute").median().over("step"),
    )
    return (
        s.group_by("node")
        .agg(
            z=pl.col("z").median(),
            slowest_share=pl.col("slowest").mean(),
            value=pl.col("compute").median(),
            baseline=pl.col("fleet").median(),
            steps=pl.col("step").n_unique(),
            first_ts=pl.col("ts").filter(pl.col("z") >= LATE_Z).min(),
            last_ts=pl.col("ts").filter(pl.col("z") >= LATE_Z).max(),
            first_step=pl.col("step").filter(pl.col("z") >= LATE_Z).min(),
            file=pl.col("file").first(),
            line=pl.col("line").filter(pl.col("z") >= LATE_Z).first(),
        )
        .sort("z", descending=True)
    )


def detector_votes(events: pl.DataFrame) -> pl.DataFrame:
    """Per node: how many straggler-detector reports named it slowest (kind 'straggler_report')."""
    rep = with_weight(events.filter((pl.col("kind") == "straggler_report") & (pl.col("node") != "unknown")))
    if rep.height == 0:
        return pl.DataFrame()
    # (reports, a report counted once whatever nodes it names; `WEIGHT`: those a thinned flood's row stands for)
    total = rep.unique(subset=["file", "line"], keep="first").get_column(WEIGHT).sum()
    return (
        rep.group_by("node")
        .agg(votes=pl.col(WEIGHT).sum(), first_ts=pl.col("ts").min(), last_ts=pl.col("ts").max(), file=pl.col("file").first(), line=pl.col("line").first(), message=pl.col("message").first())
        .with_columns(share=pl.col("votes") / total)
        .sort("votes", descending=True)
    )


def nccl_test_lateness(comms: pl.DataFrame) -> pl.DataFrame:
    """Per node: median avg-busbw of the nccl-tests runs it was in, relative to the fleet's runs."""
    runs = comms.filter((pl.col("record") == "nccl_test_summary") & pl.col("nodes").is_not_null() & pl.col("value").is_not_null())
    if runs.height < 3:
        return pl.DataFrame()
    runs = runs.with_columns(rel=pl.col("value") / pl.col("value").median().over(pl.col("test").fill_null("?")))
    per_node = (
        runs.with_columns(node=pl.col("nodes").str.split(","))
        .explode("node")
        .group_by("node")
        .agg(rel=pl.col("rel").max(), runs=pl.len(), value=pl.col("value").median(), file=pl.col("file").first(), line=pl.col("line").first())
    )
    # a node is slow when even its best run is slow (its partners in other runs are fine)
    return per_node.filter(pl.col("rel") < BUSBW_DROP).sort("rel")


TELEMETRY_Z = 4.0
TELEMETRY_REL = 0.05
TELEMETRY_UTIL_POINTS = 3.0
TELEMETRY_METRICS = ("power_w", "utilization_pct", "sm_clock_mhz")
BUCKET_SAMPLES = 3
"""`telemetry_lateness` compares a node's readings with the fleet's within buckets of about this many of a
GPU's sampling periods (`_bucket`), from 1 to 5 minutes: a few readings of each GPU, and short enough that a
change of the fleet's level falls in few of them."""


def _bucket(s: pl.DataFrame) -> str:
    """The bucket width for the readings `s` (a duration string): BUCKET_SAMPLES times the median time between
    two readings of a GPU, within [60 s, 300 s]."""
    gaps = s.group_by("node", "gpu_index").agg(g=pl.col("ts").sort().diff().median()).get_column("g").drop_nulls()
    period = gaps.median() if len(gaps) else None
    secs = period.total_seconds() if period is not None else 300.0  # type: ignore[union-attr]
    return f"{int(min(300, max(60, math.ceil(BUCKET_SAMPLES * secs))))}s"


def _readings(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> pl.DataFrame | None:
    """The GPU readings within [start, end], or None where there are none or fewer than MIN_RANKS nodes'."""
    s = gpu_readings(samples, start, end)
    return s if s.height and s["node"].n_unique() >= MIN_RANKS else None


def _far(metric: str, diff: pl.Expr, fleet: pl.Expr) -> pl.Expr:
    """Whether a reading `diff` away from the fleet's `fleet` is far: utilisation, a percentage already near its
    ceiling, by TELEMETRY_UTIL_POINTS; the rest by TELEMETRY_REL of the fleet's."""
    if metric == "utilization_pct":
        return diff.abs() >= TELEMETRY_UTIL_POINTS
    return (diff / fleet.abs()).abs() >= TELEMETRY_REL


def telemetry_lateness(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> pl.DataFrame:
    """Per node, within [start, end]: how far its GPUs' power/utilisation/clocks sit from the fleet's.

    In a synchronous job the straggler's GPUs work while everyone else's wait in a collective, so its
    power and utilisation stand apart from the fleet's — in either direction: a GPU slowed by its clocks
    draws less, one doing more work draws more. A node is singled out only when *every* GPU of it
    deviates the same way (one odd GPU is a GPU finding, not a node's), by ≥ TELEMETRY_Z robust z and
    ≥ TELEMETRY_REL of the fleet median.

    Each reading is compared with the fleet's in its own bucket (`_bucket`; a GPU's level is the fleet's
    overall level plus its median distance from the fleet bucket by bucket), not a GPU's median over the
    window with the fleet's: where the whole fleet changed level within the window (the job slowed, or
    stopped), a GPU's median over the window sits at the edge between the two levels, and a node whose
    sampler ran a sample or two apart from the others' tipped to the other level and stood apart.
    """
    s = _readings(samples, start, end)
    if s is None:
        return pl.DataFrame()
    s = s.with_columns(_bucket=pl.col("ts").dt.truncate(_bucket(s)))
    rows = []
    for m in TELEMETRY_METRICS:
        if s[m].null_count() == s.height:
            continue
        x = s.drop_nulls(m).select("node", "gpu_index", "_bucket", m)
        level = x.group_by("_bucket").agg(pl.col(m).median()).get_column(m).median()
        per_gpu = (
            x.with_columns(_d=pl.col(m) - pl.col(m).median().over("_bucket"))
            .group_by("node", "gpu_index")
            .agg(v=level + pl.col("_d").median())
        )
        per_gpu = per_gpu.with_columns(fleet=pl.col("v").median(), z=robust_z("v"))
        per_node = per_gpu.group_by("node").agg(
            z_min=pl.col("z").min(), z_max=pl.col("z").max(), v=pl.col("v").median(), fleet=pl.col("fleet").first(),
            gpus=pl.len(),
        )
        far = _far(m, pl.col("v") - pl.col("fleet"), pl.col("fleet"))
        per_node = per_node.with_columns(
            z=pl.when(pl.col("z_min") >= TELEMETRY_Z).then("z_min").when(pl.col("z_max") <= -TELEMETRY_Z).then("z_max").otherwise(None),
            rel=(pl.col("v") - pl.col("fleet")) / pl.col("fleet").abs(),
        ).filter(pl.col("z").is_not_null() & far)
        for r in per_node.iter_rows(named=True):
            # a representative reading of that node, quoted as evidence (file and line)
            ex = s.filter(pl.col("node") == r["node"]).sort(pl.col(m), descending=r["z"] > 0, nulls_last=True).row(0, named=True)
            rows.append({"node": r["node"], "metric": m, "z": r["z"], "value": r["v"], "baseline": r["fleet"], "rel": r["rel"],
                         "file": ex["file"], "line": ex["line"], "ts": ex["ts"]})
    if not rows:
        return pl.DataFrame()
    df = pl.DataFrame(rows)
    # a node must stand out in at least two of the metrics (power and utilisation move together)
    return (
        df.group_by("node")
        .agg(metrics=pl.col("metric"), z=pl.col("z").abs().median(), rel=pl.col("rel").median(), value=pl.col("value").first(),
             baseline=pl.col("baseline").first(), file=pl.col("file").first(), line=pl.col("line").first())
        .filter(pl.col("metrics").list.len() >= 2)
        .with_columns(first_ts=pl.lit(start), last_ts=pl.lit(end))
    )


ONSET_Z = 2.0
"""The robust z a node's GPUs must reach (by their median) in a bucket for `telemetry_onsets`: a lenient test,
for where to look (each stretch is judged by `telemetry_lateness`'s strict one)."""
ONSET_MIN = timedelta(minutes=15)
"""The shortest run of consecutive buckets in which a node's GPUs stand apart from the fleet that
`telemetry_onsets` hands to `telemetry_lateness` (longer than a checkpoint's stall, a hang's teardown or a
sampler started late)."""


def telemetry_onsets(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> list[tuple[datetime, datetime]]:
    """Stretches of [start, end] in which some node's GPUs stood apart from the fleet's (by their median), the
    same way in two metrics or more, in each of consecutive buckets spanning ≥ ONSET_MIN (as
    `telemetry_lateness` judges a node, bucket by bucket): (first bucket's start, last bucket's end), one per
    such run.

    A node that turns slow part-way through a job whose step time hardly shows it (another node already
    held the job back, or the job's step time changed less than a regression) leaves no slow regime, and
    over the whole job its readings stand apart too seldom to move its median: these stretches are
    where to look at it.
    """
    s = _readings(samples, start, end)
    if s is None:
        return []
    metrics = [m for m in TELEMETRY_METRICS if s[m].null_count() < s.height]
    if not metrics:
        return []
    # each GPU's median of each metric per bucket, in one pass over the readings
    width = _bucket(s)
    per_bucket = s.group_by("node", "gpu_index", pl.col("ts").dt.truncate(width).alias("_bucket")).agg(
        pl.col(m).median() for m in metrics
    )
    marks = []
    for m in metrics:
        per = (
            per_bucket.select("node", "gpu_index", "_bucket", v=pl.col(m))
            .drop_nulls("v")
            .with_columns(fleet=pl.col("v").median().over("_bucket"), z=robust_z("v", over="_bucket"))
        )
        far = _far(m, pl.col("d"), pl.col("fleet"))
        # (a node's GPUs judged together, by their medians, and at ONSET_Z: a few readings of a GPU in a bucket,
        # of whole percents for the utilisation, put a GPU's z on either side of TELEMETRY_Z from bucket to
        # bucket; `telemetry_lateness` then holds the stretch to every GPU at TELEMETRY_Z)
        marks.append(
            per.group_by("node", "_bucket")
            .agg(z=pl.col("z").median(), d=(pl.col("v") - pl.col("fleet")).median(), fleet=pl.col("fleet").first())
            .with_columns(up=(pl.col("z") >= ONSET_Z) & far, down=(pl.col("z") <= -ONSET_Z) & far)
            .filter(pl.col("up") | pl.col("down"))
            .select("node", "_bucket", sign=pl.when("up").then(1).otherwise(-1))
        )
    if not marks:
        return []
    step = timedelta(seconds=int(width.rstrip("s")))
    flagged = (
        pl.concat(marks)
        .group_by("node", "_bucket", "sign")
        .len()
        .filter(pl.col("len") >= 2)  # (two metrics or more, as in `telemetry_lateness`)
        .sort("node", "_bucket")
        .with_columns(
            _new=(
                (pl.col("_bucket") - pl.col("_bucket").shift(1).over("node") != step)
                | (pl.col("sign") != pl.col("sign").shift(1).over("node"))
            ).fill_null(True)
        )
        .with_columns(_run=pl.col("_new").cum_sum())
    )
    runs = (
        flagged.group_by("_run")
        .agg(first=pl.col("_bucket").min(), last=pl.col("_bucket").max() + step)
        .filter(pl.col("last") - pl.col("first") >= ONSET_MIN)
        .sort("first", "last")
    )
    return sorted({(max(r["first"], start), min(r["last"], end)) for r in runs.iter_rows(named=True)})


def slow_gpus(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> pl.DataFrame:
    """GPUs whose SM clock sits far below the fleet's while the job was slow: the GPU holding everyone back.

    A single GPU clocked down (thermal or power throttling, even where the telemetry has no throttle
    reasons, e.g. `dmon`) makes its rank the straggler of every step. Decision as in
    `telemetry.outliers` (robust z and relative distance), on the low side only.
    """
    from forensics import telemetry

    if samples.height == 0 or start is None or end is None:
        return pl.DataFrame()
    window = samples.filter(pl.col("ts").is_between(start, end))
    prof = telemetry.gpu_profile(window)
    out = telemetry.outliers(prof)
    if out.height == 0:
        return pl.DataFrame()
    low = out.filter((pl.col("metric") == "sm_clock_mhz") & (pl.col("z") < 0))
    rows = []
    for r in low.iter_rows(named=True):
        ex = window.filter((pl.col("node") == r["node"]) & (pl.col("gpu_index") == r["gpu_index"])).sort("sm_clock_mhz", nulls_last=True).row(0, named=True)
        rows.append({
            "node": r["node"], "gpu_index": r["gpu_index"], "z": r["z"], "slowest_share": None, "first_ts": start, "last_ts": end,
            "file": ex["file"], "line": ex["line"], "value": None, "baseline": None,
            "method": f"GPU telemetry: GPU {r['gpu_index']} SM clock {r['value']:.0f} MHz vs fleet {r['baseline']:.0f} MHz while the job was slow",
        })
    return pl.DataFrame(rows, infer_schema_length=None)


def flag_stragglers(lateness: pl.DataFrame, votes: pl.DataFrame, telemetry: pl.DataFrame | None = None) -> pl.DataFrame:
    """Nodes judged slow: per-rank timings (z and slowest share), a detector's majority vote, or telemetry."""
    rows = []
    if lateness.height:
        for r in lateness.filter((pl.col("z") >= LATE_Z) & (pl.col("slowest_share") >= LATE_SHARE)).iter_rows(named=True):
            rows.append({**r, "method": "per-rank compute time"})
    if votes.height:
        for r in votes.filter(pl.col("share") >= LATE_SHARE).iter_rows(named=True):
            if not any(x["node"] == r["node"] for x in rows):
                rows.append({"node": r["node"], "z": None, "slowest_share": r["share"], "first_ts": r["first_ts"], "last_ts": r["last_ts"], "file": r["file"], "line": r["line"], "method": "straggler detector"})
    if telemetry is not None and telemetry.height:
        for r in telemetry.iter_rows(named=True):
            if not any(x["node"] == r["node"] for x in rows):
                rows.append({"node": r["node"], "z": r["z"], "slowest_share": None, "first_ts": r["first_ts"], "last_ts": r["last_ts"],
                             "file": r["file"], "line": r["line"],
                             "method": f"GPU telemetry: {', '.join(r['metrics'])} of every GPU {r['rel']:+.0%} vs the fleet"})
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
