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
- `flag_stragglers(...)`: the decision, with named thresholds.
What it cannot see: a node that is slow in a phase that ends in a collective looks like everyone else.
"""

from __future__ import annotations

import polars as pl

from forensics.robust import robust_z

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
    s = steps.filter(pl.col("step").is_not_null()).with_columns(compute=compute).drop_nulls("compute")
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
    rep = events.filter(pl.col("kind") == "straggler_report")
    if rep.height == 0:
        return pl.DataFrame()
    total = rep.select(pl.struct("file", "line").n_unique()).item()
    return (
        rep.group_by("node")
        .agg(votes=pl.len(), first_ts=pl.col("ts").min(), last_ts=pl.col("ts").max(), file=pl.col("file").first(), line=pl.col("line").first(), message=pl.col("message").first())
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


def flag_stragglers(lateness: pl.DataFrame, votes: pl.DataFrame) -> pl.DataFrame:
    """Nodes judged slow: from per-rank timings (z and slowest share) or from a detector's majority vote."""
    rows = []
    if lateness.height:
        for r in lateness.filter((pl.col("z") >= LATE_Z) & (pl.col("slowest_share") >= LATE_SHARE)).iter_rows(named=True):
            rows.append({**r, "method": "per-rank compute time"})
    if votes.height:
        for r in votes.filter(pl.col("share") >= LATE_SHARE).iter_rows(named=True):
            if not any(x["node"] == r["node"] for x in rows):
                rows.append({"node": r["node"], "z": None, "slowest_share": r["share"], "first_ts": r["first_ts"], "last_ts": r["last_ts"], "file": r["file"], "line": r["line"], "method": "straggler detector"})
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
