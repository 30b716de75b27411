"""Hang culprits: per process group / communicator, which ranks were behind or missing when a collective hung.

Three independent readings of the parsed tables, each a function from a table to long-form rows (one row
per rank of each group, `role` 'culprit' or 'waiting'), so analysis can corroborate them:

- `culprit_from_watchdog(events)`: PyTorch ProcessGroupNCCL watchdog reports (events kind
  'watchdog_timeout' and 'watchdog_work_status', as `parsers.torch_distributed` writes them).
- `culprit_from_flight_recorder(comms)`: Flight Recorder dumps (comms record 'flight_recorder' /
  'flight_recorder_status').
- `culprit_from_coll(comms)`: NCCL_DEBUG_SUBSYS=COLL aggregates (comms record 'coll': last opCount per
  rank and communicator).

The principle (DESIGN.md, FORMATS.md §10): synchronous collectives make every healthy rank wait in the
same collective, so the rank that reports a timeout is usually a victim; the culprit is the rank that is
behind (lower sequence number), never issued / entered the collective the others are stuck in, or never
reported at all (a dead or hung process logs nothing).

Output columns (all three): pg (group or communicator id), rank (rank inside that group), global_rank,
node, role ('culprit' | 'waiting'), reason, seq (the collective the group is stuck in), progress (this
rank's last completed sequence number), lag (group's best progress − this rank's progress; null when the
rank has no report), op, file, line (evidence: the rank's first report; null for absent ranks).
"""

from __future__ import annotations

import polars as pl

OUT_SCHEMA = pl.Schema(
    {
        "pg": pl.String,
        "rank": pl.Int32,
        "global_rank": pl.Int32,
        "node": pl.String,
        "role": pl.String,
        "reason": pl.String,
        "seq": pl.Int64,
        "progress": pl.Int64,
        "lag": pl.Int64,
        "op": pl.String,
        "file": pl.String,
        "line": pl.Int64,
    }
)

_WATCHDOG_DETAIL = pl.Struct(
    {
        "pg": pl.Int64,
        "pg_name": pl.String,
        "pg_rank": pl.Int64,
        "global_rank": pl.Int64,
        "seq": pl.Int64,
        "op": pl.String,
        "numel_in": pl.Int64,
        "numel_out": pl.Int64,
        "last_enqueued": pl.Int64,
        "last_completed": pl.Int64,
    }
)

_FR_DETAIL = pl.Struct(
    {
        "seq": pl.Int64,
        "state": pl.String,
        "op": pl.String,
        "pg_ranks": pl.String,
        "is_p2p": pl.Boolean,
        "last_completed": pl.Int64,
        "last_enqueued": pl.Int64,
    }
)

# Ops whose NumelOut/NumelIn ratio is the group size (all-gather) or NumelIn/NumelOut (reduce-scatter).
_GATHER_OPS = ("ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_INTO_TENSOR_COALESCED")
_SCATTER_OPS = ("REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "REDUCE_SCATTER_TENSOR_COALESCED")


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema=OUT_SCHEMA)


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    """Cast to OUT_SCHEMA and order: culprits first (largest lag, absent last), then waiting ranks."""
    df = df.select([pl.col(c).cast(t, strict=False) if c in df.columns else pl.lit(None, dtype=t).alias(c)
                    for c, t in OUT_SCHEMA.items()])
    return df.sort(
        ["pg", pl.col("role") != "culprit", "lag", "rank"],
        descending=[False, False, True, False],
        nulls_last=True,
    )


def _expected(pg_sizes: pl.DataFrame, expected_ranks: int | dict[str, int] | None) -> pl.DataFrame:
    """Rows (pg, size) after applying the caller's `expected_ranks` (an int for every group or pg → size)."""
    if expected_ranks is None:
        return pg_sizes
    if isinstance(expected_ranks, int):
        return pg_sizes.with_columns(size=pl.lit(expected_ranks, dtype=pl.Int64))
    given = pl.DataFrame(
        {"pg": list(expected_ranks), "given": list(expected_ranks.values())}, schema={"pg": pl.String, "given": pl.Int64}
    )
    return pg_sizes.join(given, on="pg", how="left").with_columns(size=pl.coalesce("given", "size")).drop("given")


def world_rank_nodes(comms: pl.DataFrame | None) -> pl.DataFrame:
    """Global rank → node (and GPU) from NCCL's rank map: the comms 'rank' rows of the largest communicator.

    Assumption: PyTorch's default process group is the NCCL communicator spanning all ranks, and its NCCL
    ranks equal the global ranks. Returns columns global_rank, map_node, map_bus_id (empty when unknown).
    """
    schema = {"global_rank": pl.Int32, "map_node": pl.String, "map_bus_id": pl.String}
    if comms is None or comms.height == 0 or "record" not in comms.columns:
        return pl.DataFrame(schema=schema)
    r = comms.filter((pl.col("record") == "rank") & pl.col("nranks").is_not_null())
    if r.height == 0:
        return pl.DataFrame(schema=schema)
    top = r.filter(pl.col("nranks") == pl.col("nranks").max())
    # several communicators of the world size (e.g. one per job attempt): keep a rank only when all agree
    return (
        top.group_by("rank")
        .agg(map_node=pl.col("node").unique(), map_bus_id=pl.col("gpu_bus_id").first())
        .filter(pl.col("map_node").list.len() == 1)
        .select(global_rank=pl.col("rank").cast(pl.Int32), map_node=pl.col("map_node").list.first(), map_bus_id="map_bus_id")
    )


def _fill_nodes(out: pl.DataFrame, comms: pl.DataFrame | None, default_pgs: tuple[str, ...]) -> pl.DataFrame:
    """Fill `node` (when null or not a real host) from NCCL's world rank map; group ranks of the default
    group count as global ranks."""
    m = world_rank_nodes(comms)
    if m.height == 0:
        return out
    key = pl.coalesce(
        pl.col("global_rank"), pl.when(pl.col("pg").is_in(list(default_pgs))).then(pl.col("rank"))
    ).cast(pl.Int32)
    return (
        out.with_columns(_k=key)
        .join(m, left_on="_k", right_on="global_rank", how="left", maintain_order="left")
        .with_columns(
            global_rank=pl.coalesce("global_rank", pl.when(pl.col("map_node").is_not_null()).then(pl.col("_k"))),
            node=pl.when(pl.col("map_node").is_not_null()).then(pl.col("map_node")).otherwise(pl.col("node")),
        )
        .drop("_k", "map_node", "map_bus_id")
    )


def culprit_from_watchdog(
    events: pl.DataFrame,
    *,
    expected_ranks: int | dict[str, int] | None = None,
    comms: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Find, per process group, the ranks behind or missing from a set of ProcessGroupNCCL watchdog reports.

    Method:
    1. Take events kind 'watchdog_timeout' (SeqNum S of the timed-out work, op, numel) and
       'watchdog_work_status' (work S, last enqueued E, last completed C); key each by (process group,
       group rank). A watchdog line without a `[PG n …]` tag takes the group of the same rank's status line
       for the same S (PyTorch 2.4+ prints the group only on the status line), else the one group whose
       tagged reports name the same S (ranks of one hang time out on the same SeqNum); else 'unknown'.
    2. Per rank: seq = lowest S it timed out on; progress = C when reported, else S − 1 (the watchdog checks
       works in order, so the timed-out work is the oldest pending one); enqueued = E when reported.
    3. Per group: best = highest progress; stuck = best + 1 (the collective the leaders wait in).
       A rank is a culprit when progress < best ('behind'; 'not_enqueued' when also E < stuck: it never
       issued the collective) or when it is an expected rank that never reported ('absent').
       With nobody behind and nobody absent, every rank is inside the same collective: no rank is singled
       out (reason 'all_in_collective' — suspect the network/NCCL, not a desync).
    4. Expected ranks: `expected_ranks` (int, or group → size) when given; else the group size implied by
       an all-gather (NumelOut/NumelIn) or reduce-scatter (NumelIn/NumelOut) report; else highest reported
       rank + 1 (so a missing highest rank cannot be seen without `expected_ranks`).

    Assumptions: all reports of one group come from one incident (one job attempt); group ranks are those
    of `[Rank N]`/`[PG … Rank N]` (`detail.pg_rank`), falling back to the event's rank.

    With `comms` (the comms table), a rank's node comes from NCCL's world rank map (`world_rank_nodes`)
    when its global rank is known (`[rankN]:` prefix, or a rank of group 0 / default_pg) — this names the
    node of a silent rank, which no watchdog line can.

    Returns:
        Long-form rows (see the module docstring); empty when there are no watchdog events.
    """
    if events.height == 0 or "kind" not in events.columns:
        return _empty()
    w = events.filter(pl.col("kind").is_in(["watchdog_timeout", "watchdog_work_status"]))
    if w.height == 0:
        return _empty()
    w = w.with_columns(d=pl.col("detail").str.json_decode(_WATCHDOG_DETAIL)).with_columns(
        pg=pl.col("d").struct.field("pg"),
        pg_name=pl.col("d").struct.field("pg_name"),
        grank=pl.coalesce(pl.col("d").struct.field("pg_rank"), pl.col("rank").cast(pl.Int64)),
        global_rank=pl.col("d").struct.field("global_rank"),
        seq=pl.col("d").struct.field("seq"),
        op=pl.col("d").struct.field("op"),
        numel_in=pl.col("d").struct.field("numel_in"),
        numel_out=pl.col("d").struct.field("numel_out"),
        enq=pl.col("d").struct.field("last_enqueued"),
        comp=pl.col("d").struct.field("last_completed"),
    ).filter(pl.col("grank").is_not_null() & pl.col("seq").is_not_null())
    if w.height == 0:
        return _empty()
    # group of untagged lines from the same rank's tagged line about the same work
    w = w.with_columns(
        pg=pl.coalesce(pl.col("pg"), pl.col("pg").drop_nulls().first().over("grank", "seq")),
        pg_name=pl.coalesce(pl.col("pg_name"), pl.col("pg_name").drop_nulls().first().over("grank", "seq")),
    )
    # still untagged: the group whose tagged reports name the same SeqNum, when exactly one group does
    by_seq = (
        w.filter(pl.col("pg").is_not_null())
        .group_by("seq")
        .agg(seq_pg=pl.col("pg").unique())
        .filter(pl.col("seq_pg").list.len() == 1)
        .with_columns(seq_pg=pl.col("seq_pg").list.first())
    )
    w = (
        w.join(by_seq, on="seq", how="left", maintain_order="left")
        .with_columns(pg=pl.coalesce("pg", "seq_pg").cast(pl.String).fill_null("unknown"))
        .drop("seq_pg")
    )
    per_rank = (
        w.sort("line")
        .group_by("pg", "grank", maintain_order=True)
        .agg(
            seq=pl.col("seq").min(),
            comp=pl.col("comp").max(),
            enq=pl.col("enq").max(),
            op=pl.col("op").drop_nulls().first(),
            node=pl.col("node").first(),
            global_rank=pl.col("global_rank").drop_nulls().first(),
            numel_in=pl.col("numel_in").drop_nulls().first(),
            numel_out=pl.col("numel_out").drop_nulls().first(),
            file=pl.col("file").first(),
            line=pl.col("line").first(),
        )
        .with_columns(progress=pl.coalesce(pl.col("comp"), pl.col("seq") - 1))
    )
    ratio = (
        pl.when(pl.col("op").is_in(_GATHER_OPS) & (pl.col("numel_in") > 0))
        .then(pl.col("numel_out") // pl.col("numel_in"))
        .when(pl.col("op").is_in(_SCATTER_OPS) & (pl.col("numel_out") > 0))
        .then(pl.col("numel_in") // pl.col("numel_out"))
    )
    sizes = per_rank.group_by("pg").agg(
        size=pl.coalesce(ratio.max(), pl.col("grank").max() + 1).cast(pl.Int64),
        best=pl.col("progress").max(),
        op_mode=pl.col("op").drop_nulls().mode().first(),
    )
    sizes = _expected(sizes, expected_ranks)
    reported = per_rank.join(sizes, on="pg").with_columns(stuck=pl.col("best") + 1, lag=pl.col("best") - pl.col("progress"))
    reported = reported.with_columns(
        role=pl.when(pl.col("lag") > 0).then(pl.lit("culprit")).otherwise(pl.lit("waiting")),
        reason=pl.when((pl.col("lag") > 0) & (pl.col("enq") < pl.col("stuck")))
        .then(pl.lit("not_enqueued"))
        .when(pl.col("lag") > 0)
        .then(pl.lit("behind"))
        .otherwise(pl.lit("waiting")),
    )
    # expected ranks that never reported
    every = sizes.with_columns(grank=pl.int_ranges(0, pl.col("size"))).explode("grank").select("pg", "grank", "best", "op_mode")
    absent = every.join(per_rank.select("pg", "grank"), on=["pg", "grank"], how="anti").select(
        "pg",
        "grank",
        role=pl.lit("culprit"),
        reason=pl.lit("absent"),
        seq=pl.col("best") + 1,
        op=pl.col("op_mode"),
    )
    out = pl.concat(
        [
            reported.select(
                "pg", "grank", "global_rank", "node", "role", "reason", seq="stuck", progress="progress", lag="lag",
                op=pl.coalesce("op", "op_mode"), file="file", line="line",
            ),
            absent,
        ],
        how="diagonal_relaxed",
    )
    # nobody behind, nobody absent: all inside the same collective
    any_culprit = (pl.col("role") == "culprit").any().over("pg")
    out = out.with_columns(reason=pl.when(~any_culprit).then(pl.lit("all_in_collective")).otherwise(pl.col("reason")))
    out = _finish(out.rename({"grank": "rank"}))
    return _finish(_fill_nodes(out, comms, ("0",))) if comms is not None else out


def culprit_from_flight_recorder(
    comms: pl.DataFrame, *, expected_ranks: int | dict[str, int] | None = None, rank_map: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Find, per process group, the ranks that never entered (or never started) the collective others are stuck in.

    Input: comms rows record 'flight_recorder' (one per Flight Recorder entry; `rank` = the dump's rank,
    comm_id = 'pg<id>', detail.seq = collective_seq_id, detail.state scheduled|started|completed) and
    optionally 'flight_recorder_status'. P2P entries (detail.is_p2p) are left out: they have their own
    sequence.

    Method (torchfrtrace's idea, FORMATS.md §10):
    1. Per (group, rank): progress = highest completed seq (or pg_status last_completed), frontier =
       highest seq present in any state, first_pending = lowest seq not completed.
    2. The stuck collective S = the lowest first_pending over the group's ranks. When no rank has a
       pending entry, S = highest frontier + 1 and ranks whose frontier is lower are the culprits.
    3. A rank is a culprit when it has no entry S and frontier < S ('not_entered', lag = S − frontier),
       when its entry S is 'scheduled' while another rank's is 'started' or 'completed' ('not_started'),
       when its entry S is 'started' while another rank's is 'completed' ('stuck_inside'), or when an
       expected rank has no dump at all ('no_dump'). Everyone else is 'waiting'.
    4. Expected ranks: `expected_ranks`, else the length of pg_config's `ranks` list, else the dumps seen.
       Flight Recorder buffers wrap, so only sequence numbers present on the compared ranks are used.

    Assumption: `rank` identifies the dumping rank consistently (group rank equals global rank for the
    default group; for sub-groups pass ranks as they appear in pg_config). With `rank_map` (a comms
    table holding NCCL 'rank' rows), nodes of ranks without a dump come from NCCL's world rank map.

    Returns:
        Long-form rows (see the module docstring); empty when there are no Flight Recorder rows.
    """
    if comms.height == 0 or "record" not in comms.columns:
        return _empty()
    fr = comms.filter(pl.col("record").is_in(["flight_recorder", "flight_recorder_status"]))
    if fr.height == 0:
        return _empty()
    fr = fr.with_columns(d=pl.col("detail").str.json_decode(_FR_DETAIL)).with_columns(
        seq=pl.coalesce(pl.col("d").struct.field("seq"), pl.col("seq") if "seq" in fr.columns else pl.lit(None)),
        state=pl.col("d").struct.field("state"),
        op=pl.coalesce(pl.col("d").struct.field("op"), pl.col("op") if "op" in fr.columns else pl.lit(None)),
        pg=pl.col("comm_id").fill_null("unknown"),
        pg_size=pl.col("d").struct.field("pg_ranks").str.extract_all(r"-?\d+").list.len(),
    )
    entries = fr.filter((pl.col("record") == "flight_recorder") & ~pl.col("d").struct.field("is_p2p").fill_null(False))
    status = fr.filter(pl.col("record") == "flight_recorder_status").select(
        "pg", "rank", st_comp=pl.col("d").struct.field("last_completed")
    )
    if entries.height == 0:
        return _empty()
    per_rank = (
        entries.sort("seq")
        .group_by("pg", "rank")
        .agg(
            comp=pl.col("seq").filter(pl.col("state") == "completed").max(),
            frontier=pl.col("seq").max(),
            first_pending=pl.col("seq").filter(pl.col("state") != "completed").min(),
            node=pl.col("node").first(),
            file=pl.col("file").first(),
            line=pl.col("line").first(),
            seqs=pl.col("seq"),
            states=pl.col("state"),
            ops=pl.col("op"),
            pg_size=pl.col("pg_size").max(),
        )
        .join(status.group_by("pg", "rank").agg(pl.col("st_comp").max()), on=["pg", "rank"], how="left")
        .with_columns(progress=pl.max_horizontal("comp", "st_comp"))
    )
    group = per_rank.group_by("pg").agg(
        pending=pl.col("first_pending").min(),
        top=pl.col("frontier").max(),
        size=pl.coalesce(pl.col("pg_size").filter(pl.col("pg_size") > 0).max(), pl.col("rank").max() + 1).cast(pl.Int64),
    ).with_columns(stuck=pl.coalesce("pending", pl.col("top") + 1))
    group = _expected(group, expected_ranks)
    r = per_rank.join(group, on="pg")
    # state and op of each rank's entry at the stuck seq
    at = (
        entries.join(group.select("pg", "stuck"), on="pg")
        .filter(pl.col("seq") == pl.col("stuck"))
        .group_by("pg", "rank")
        .agg(state_at=pl.col("state").last(), op_at=pl.col("op").last())
    )
    r = r.join(at, on=["pg", "rank"], how="left")
    rank_order = {"scheduled": 0, "started": 1, "completed": 2}
    r = r.with_columns(lvl=pl.col("state_at").replace_strict(rank_order, default=None, return_dtype=pl.Int8))
    r = r.with_columns(best_lvl=pl.col("lvl").max().over("pg"))
    # with nothing pending anywhere, only ranks short of the best frontier are behind
    limit = pl.when(pl.col("pending").is_null()).then(pl.col("top")).otherwise(pl.col("stuck"))
    r = r.with_columns(
        reason=pl.when(pl.col("state_at").is_null() & (pl.col("frontier") < limit))
        .then(pl.lit("not_entered"))
        .when((pl.col("state_at") == "scheduled") & (pl.col("best_lvl") >= 1))
        .then(pl.lit("not_started"))
        .when((pl.col("state_at") == "started") & (pl.col("best_lvl") >= 2))
        .then(pl.lit("stuck_inside"))
        .otherwise(pl.lit("waiting")),
        lag=pl.when(pl.col("state_at").is_null() & (pl.col("frontier") < limit))
        .then(pl.col("stuck") - pl.col("frontier"))
        .otherwise(pl.lit(0, dtype=pl.Int64)),
        op=pl.coalesce("op_at", pl.col("ops").list.last()),
    ).with_columns(role=pl.when(pl.col("reason") == "waiting").then(pl.lit("waiting")).otherwise(pl.lit("culprit")))
    every = group.with_columns(rank=pl.int_ranges(0, pl.col("size"))).explode("rank").select(
        "pg", pl.col("rank").cast(pl.Int32), "stuck"
    )
    missing = every.join(per_rank.select("pg", pl.col("rank").cast(pl.Int32)), on=["pg", "rank"], how="anti").select(
        "pg", "rank", role=pl.lit("culprit"), reason=pl.lit("no_dump"), seq="stuck"
    )
    out = pl.concat(
        [
            r.select(
                "pg", "rank", "node", "role", "reason", seq="stuck", progress="progress", lag="lag", op="op",
                file="file", line="line", global_rank=pl.col("rank"),
            ),
            missing,
        ],
        how="diagonal_relaxed",
    )
    out = _finish(out)
    return _finish(_fill_nodes(out, rank_map if rank_map is not None else comms, ("pg0",))) if rank_map is not None or (
        comms.filter(pl.col("record") == "rank").height > 0
    ) else out


def culprit_from_coll(comms: pl.DataFrame) -> pl.DataFrame:
    """Find, per NCCL communicator, the ranks whose last logged collective (opCount) is behind the others'.

    Input: comms record 'coll' rows (NCCL_DEBUG_SUBSYS=COLL aggregates: comm_id = commId when the init map
    knew it, rank, seq = last opCount of one collective type). Per (communicator, rank) the progress is the
    highest opCount over its collective types; a rank below the communicator's best is 'behind' (lag =
    best − progress). opCount counts per communicator and is shared by Send/Recv, so it is comparable
    across the ranks of one communicator only. Rows without a rank (no init line in the bundle) are left
    out. Caveat: a log cut at different points on different nodes shows false lag; compare with the
    watchdog and Flight Recorder readings.
    """
    if comms.height == 0 or "record" not in comms.columns:
        return _empty()
    c = comms.filter((pl.col("record") == "coll") & pl.col("rank").is_not_null() & pl.col("seq").is_not_null())
    if c.height == 0:
        return _empty()
    per_rank = (
        c.sort("seq")
        .group_by("comm_id", "rank")
        .agg(
            progress=pl.col("seq").max(),
            op=pl.col("op").last(),
            node=pl.col("node").first(),
            file=pl.col("file").last(),
            line=pl.col("line").last(),
        )
        .with_columns(best=pl.col("progress").max().over("comm_id"))
        .with_columns(lag=pl.col("best") - pl.col("progress"))
    )
    out = per_rank.select(
        pg="comm_id",
        rank="rank",
        node="node",
        role=pl.when(pl.col("lag") > 0).then(pl.lit("culprit")).otherwise(pl.lit("waiting")),
        reason=pl.when(pl.col("lag") > 0).then(pl.lit("behind")).otherwise(pl.lit("waiting")),
        seq=pl.col("best") + 1,
        progress="progress",
        lag="lag",
        op="op",
        file="file",
        line="line",
    )
    return _finish(out)
