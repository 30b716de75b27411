"""Clock skew between nodes, estimated from events every node logs at about the same true moment.

Anchors: the watchdog timeouts of one collective (every rank of a process group times out on the same
SeqNum within seconds: enqueue times differ by at most a step) and NCCL communicator init lines of one
commId. Per anchor, each node's offset is its time minus the median over the nodes that logged it;
per node, the median over anchors. Offsets under MIN_SKEW_S are noise (the anchors themselves spread by
a few seconds). Correcting event times by these offsets keeps a cause from being ordered after its
consequence only because one node's clock runs ahead.
"""

from __future__ import annotations

import polars as pl

MIN_SKEW_S = 5.0
"""Offsets smaller than this are within the anchors' own spread and are not applied."""


def _anchor_keys(events: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    parts = []
    wd = events.filter((pl.col("kind") == "watchdog_timeout") & pl.col("ts").is_not_null())
    if wd.height:
        seq = pl.col("detail").str.json_path_match("$.seq").fill_null(
            pl.col("message").str.extract(r"SeqNum=(\d+)", 1)
        )
        parts.append(wd.select("node", "ts", key=pl.lit("wd:") + seq.fill_null("?")))
    init = comms.filter((pl.col("record") == "rank") & pl.col("ts").is_not_null() & pl.col("comm_id").is_not_null())
    if init.height:
        parts.append(init.select("node", "ts", key=pl.lit("comm:") + pl.col("comm_id")))
    return pl.concat(parts) if parts else pl.DataFrame(schema={"node": pl.String, "ts": pl.Datetime("us", "UTC"), "key": pl.String})


def estimate_offsets(events: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    """Per node: offset_s (its clock minus the fleet's), anchors used. Empty when the bundle has no anchors."""
    a = _anchor_keys(events, comms)
    if a.height == 0:
        return pl.DataFrame(schema={"node": pl.String, "offset_s": pl.Float64, "anchors": pl.UInt32})
    per = a.group_by("key", "node").agg(ts=pl.col("ts").min())
    per = per.filter(pl.col("node").n_unique().over("key") >= 3)
    if per.height == 0:
        return pl.DataFrame(schema={"node": pl.String, "offset_s": pl.Float64, "anchors": pl.UInt32})
    per = per.with_columns(
        off=(pl.col("ts").cast(pl.Int64) - pl.col("ts").cast(pl.Int64).median().over("key")) / 1e6
    )
    return per.group_by("node").agg(offset_s=pl.col("off").median(), anchors=pl.len()).sort("node")


def correct(events: pl.DataFrame, offsets: pl.DataFrame) -> pl.DataFrame:
    """Subtract each node's offset (where ≥ MIN_SKEW_S) from its events' times."""
    big = offsets.filter(pl.col("offset_s").abs() >= MIN_SKEW_S)
    if big.height == 0 or events.height == 0:
        return events
    return (
        events.join(big.select("node", "offset_s"), on="node", how="left")
        .with_columns(
            ts=pl.when(pl.col("offset_s").is_not_null())
            .then(pl.col("ts") - pl.duration(microseconds=(pl.col("offset_s") * 1e6).cast(pl.Int64)))
            .otherwise(pl.col("ts"))
        )
        .drop("offset_s")
    )
