"""`merge_chunks`: one file's NCCL-grammar tables read in pieces (16 MB chunks in order, or byte ranges parsed
apart) made what the whole-file parse gives.

The NCCL grammar (`parsers.nccl._nccl_rows`) keeps three kinds of state across a file; a piece sees only its
own lines, so the concatenated tables of the pieces differ from the whole parse in:

1. COLL aggregates (`comms` rows with `record == 'coll'`): one row per (node, pid, comm, op) and piece.
   Combined here as `nccl._coll_merge` combines partial aggregates: calls add, the first opCount and
   first line of the earliest, seq/count/dtype/redop/nranks/cuda_dev and `line` of the latest, p2p peers
   united; rank and comm_id joined again from the merged rank rows (as `_nccl_rows` joins its rank map).
2. `record == 'rank'` rows (one per (node, pid, comm, rank) and piece): merged again, COMPLETE > START >
   topology, as the whole-file merge does from its Init/topology lines (see `_merge_ranks` for the limits).
3. NCCL WARN events: the rank (and gpu_bus_id) of (node, pid, cudaDev) in its largest communicator, looked
   up again in the merged rank rows as `nccl.warn_events` does; where the whole file resolves no rank, the
   launcher's rank that `warn_events` falls back to is read again from the event's verbatim line
   (`nccl.prepare`: the envelope prefix).

4. Inventory: the family parse keeps one row per fact (node, component, device, attribute, value), the
   first; the pieces' rows are made unique the same way, the earliest piece's row kept (the whole parse keeps
   the first of its kind of line before others: a node IP stated by a `NET/IB` line in one piece and by a
   `Bootstrap` line in a later one keeps the earlier line here, the Bootstrap one whole; only `line` differs).

Every other row (torch events, network rows, nccl-tests rows, ...) passes through unchanged.

Not made whole here (the tables do not hold what would be needed): the parse notes ("N COLL lines
aggregated into M rows", ring/tree counts: the ingest keeps each piece's); the node of a bare `NCCL version`
line that opens a piece (whole: the host of the NCCL record before it, in the previous piece); an ncclras
report cut by a piece boundary.
"""

from __future__ import annotations

import polars as pl

from parsers._common import format_str
from parsers.base import FileContext

# (`parsers.nccl` is imported where used: nccl.py and step_log.py may import `merge_chunks` at their top)

_RANK_DETAIL = pl.Struct(
    {
        "comm": pl.String,
        "phase": pl.String,
        "phases": pl.List(pl.String),
        "nvml_dev": pl.Int32,
        "nnodes": pl.Int32,
        "local_rank": pl.Int32,
    }
)
_COLL_DETAIL = pl.Struct(
    {
        "comm": pl.String,
        "calls": pl.Int64,
        "first_opcount": pl.Int64,
        "first_line": pl.Int64,
        "peers": pl.List(pl.Int64),
    }
)
_INVENTORY_UNIQUE = ("node", "component", "device", "attribute", "value")
"""The columns the family parse keeps an inventory fact unique on (its first row: `family_rows_frame`)."""
_EVENT_DETAIL = pl.Struct({"pid": pl.Int64, "cuda_dev": pl.Int32})


def merge_chunks(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The tables the whole-file parse gives, from one file's `events`, `comms`, `inventory` of all its
    pieces concatenated in piece order (row order does not matter; tables not named pass through)."""
    out = dict(tables)
    inventory = tables.get("inventory")
    if inventory is not None and inventory.height and set(_INVENTORY_UNIQUE) <= set(inventory.columns):
        out["inventory"] = inventory.unique(subset=list(_INVENTORY_UNIQUE), keep="first", maintain_order=True)
    comms = tables.get("comms")
    if comms is None or comms.height == 0 or "record" not in comms.columns:
        return out
    is_rank = pl.col("record") == "rank"
    is_coll = pl.col("record") == "coll"
    n_ranks = comms.select(is_rank.sum()).item()
    colls = comms.filter(is_coll)
    if n_ranks == 0 and colls.height == 0:
        return out
    merged = _merge_ranks(comms, n_ranks, tables.get("inventory")) if n_ranks else None
    parts = [comms.filter(~(is_rank | is_coll).fill_null(False))]
    if merged is not None:
        parts.append(_like(merged.drop("_prio", "_comm"), comms))
    if colls.height:
        parts.append(_like(_merge_colls(colls, merged), comms))
    out["comms"] = pl.concat(parts, how="vertical")
    events = tables.get("events")
    if merged is not None and events is not None and events.height:
        out["events"] = _resolve_events(events, merged)
    return out


def shift_detail_lines(comms: pl.DataFrame, shift: int) -> pl.DataFrame:
    """`comms` rows of a piece parsed with line numbers `shift` too low (a byte range numbered from 1): the
    COLL aggregates' `first_line` in their detail JSON moved by `shift`, as the ingest moves `line` (call it
    where the ingest shifts `line`, before `merge_chunks`; other rows and columns unchanged)."""
    if not shift or comms.height == 0 or not {"record", "detail"} <= set(comms.columns):
        return comms
    first = pl.col("detail").str.extract(r'"first_line":(\d+)', 1).cast(pl.Int64)
    coll = (pl.col("record") == "coll") & first.is_not_null()
    return comms.with_columns(
        detail=pl.when(coll)
        .then(pl.col("detail").str.replace(r'"first_line":\d+', format_str('"first_line":{}', first + shift)))
        .otherwise(pl.col("detail"))
    )


def shift_lines(table: str, df: pl.DataFrame, shift: int) -> pl.DataFrame:
    """The ingest's hook for line numbers a parser keeps inside a row besides `line` (`shift_detail_lines`):
    `df`, rows of `table` of a byte range numbered `shift` lines too low, with them moved."""
    return shift_detail_lines(df, shift) if table == "comms" else df


def _like(df: pl.DataFrame, template: pl.DataFrame) -> pl.DataFrame:
    """`df` with `template`'s columns and dtypes (those it lacks null)."""
    return df.select(
        (pl.col(c) if c in df.columns else pl.lit(None)).cast(dt).alias(c)
        for c, dt in template.schema.items()
    )


def _prio(phase: pl.Expr) -> pl.Expr:
    """`_nccl_rows`' order of a rank row's source line: COMPLETE 0, other Init lines 1, topology 2."""
    return pl.when(phase == "COMPLETE").then(0).when(phase == "topology").then(2).otherwise(1)


def _merge_ranks(comms: pl.DataFrame, n_ranks: int, inventory: pl.DataFrame | None) -> pl.DataFrame:
    """The pieces' rank rows (the `n_ranks` rows of `comms` with `record == 'rank'`) merged per (node, pid,
    comm, rank) as `_nccl_rows` merges Init/topology lines.

    Each piece's row is the best of its lines (lowest (prio, line)) with each field the first non-null in
    that order; so the whole row is the piece row of lowest (prio, line) with each field the first non-null
    over the piece rows in that order. Exact unless a field is null on a better line and set on a worse one
    of the same piece while another piece's row sits between them (not seen: an Init line's format prints
    the same fields at START and COMPLETE). `comm_id`: the commId of the earliest piece that printed one for
    the comm pointer (the whole parse's first). `nccl_version`: the file's single NCCL version when it has
    one (from the inventory rows); with several, a process's version from the first piece that gave one
    (a piece that saw one version only may have given that one to a process that printed another)."""
    is_rank = pl.col("record") == "rank"
    comm = _member("comm", comms.get_column("detail"))  # (each row's, for the hash and `_as_merged`)
    # a comm's rows in one piece only (most, where communicators are made again and again) are already what
    # the merge gives: they pass as they are, and the rest is merged (a comm hashed like another is merged
    # too, which changes nothing)
    gid = comms.select(pl.when(is_rank).then(pl.struct("file", "node", "pid", comm).hash(seed=0))).to_series()
    shared = (gid.is_duplicated() & gid.is_not_null()).rename("shared")
    alone = (gid.is_not_null() & ~shared).rename("alone")
    n_shared = shared.sum()
    parts = []
    if n_ranks > n_shared:
        rows = comms.filter(alone).with_columns(_i=alone.arg_true().cast(pl.Int64))
        parts.append(_as_merged(rows, comm.filter(alone)))
        del rows
    if n_shared > MERGE_ROWS:
        # the groups' rows (and each comm's, for its commId) in buckets of ~MERGE_ROWS rows, merged apart
        # (each bucket taken from `comms` by a mask, its rows' places as `_i`: a frame of the rank rows, or a
        # column added to all of them, would copy every row once more)
        k = -(-n_shared // MERGE_ROWS)
        bucket = gid % k
        for b in range(k):
            mask = (shared & (bucket == b)).fill_null(False)
            parts.append(_merged_groups(comms.filter(mask).with_columns(_i=mask.arg_true().cast(pl.Int64))))
    elif n_shared:
        parts.append(_merged_groups(comms.filter(shared).with_columns(_i=shared.arg_true().cast(pl.Int64))))
    del gid, shared, alone, comm
    # in the order one merge gives: its groups in the order of their first row, by (prio, line)
    m = _in_order(parts, ["_prio", "line", "_i"]).drop("_i")
    versions = None
    have = set(inventory.columns) if inventory is not None else set()
    if inventory is not None and inventory.height and {"source", "attribute", "value"} <= have:
        versions = (
            inventory.filter((pl.col("source") == "nccl") & (pl.col("attribute") == "nccl_version"))
            .get_column("value")
            .unique()
        )
    if versions is not None and len(versions) == 1:
        ver = pl.lit(versions[0], dtype=pl.String)
    elif versions is not None and len(versions) == 0:
        ver = pl.lit(None, dtype=pl.String)
    else:  # (several versions: each process's own, from the first piece that gave one)
        ver = pl.col("nccl_version").drop_nulls().first().over("file", "node", "pid")
    return m.with_columns(nccl_version=ver)


def _as_merged(alone: pl.DataFrame, comm: pl.Series) -> pl.DataFrame:
    """Rank rows, each the only row of its (file, node, pid, comm), as `_merged_groups` gives them: the same
    row (a piece's row is already merged as the merge merges it: fields the first non-null by (prio, line),
    phases unique and sorted, commId its own), its own `nccl_version`, and the merge's `_comm` and `_prio`."""
    prio = _prio(_member("phase", alone.get_column("detail")))
    return _rank_rows(
        alone, nccl_version=pl.col("nccl_version"), detail=pl.col("detail"), comm=comm, prio=prio
    )


def _rank_rows(
    df: pl.DataFrame, *, nccl_version: pl.Expr, detail: pl.Expr, comm: pl.Expr | pl.Series, prio: pl.Expr
) -> pl.DataFrame:
    """The columns of the merged rank rows, in their order (the parts `_merge_ranks` puts in order share it),
    with `_i` where `df` has it."""
    return df.select(
        record=pl.lit("rank"),
        node="node",
        comm_id="comm_id",
        rank="rank",
        nranks="nranks",
        cuda_dev="cuda_dev",
        gpu_bus_id="gpu_bus_id",
        pid="pid",
        nccl_version=nccl_version,
        detail=detail,
        file="file",
        line="line",
        _comm=comm,
        _prio=prio,
        *(["_i"] if "_i" in df.columns else []),
    )


def _member(key: str, detail: pl.Series) -> pl.Series:
    """The string member `key` of each flat JSON object in `detail` (`str.json_path_match("$.key")`), read by
    a regex where no value holds an escape (a pointer, a phase: ~20x faster)."""
    quick = detail.str.extract(f'"{key}":"([^"\\\\]*)"', 1)
    missing = detail.filter(quick.is_null())
    if not missing.str.contains(f'"{key}":', literal=True).any():
        return quick.rename(f"_{key}")
    return detail.str.json_path_match(f"$.{key}").rename(f"_{key}")


def _in_order(frames: list[pl.DataFrame], by: list[str]) -> pl.DataFrame:
    """`pl.concat(frames).sort(by)` (`by` unique per row), gathered a column at a time with each column of
    `frames` let go once gathered (emptying `frames`): a sort of the whole frame holds its copy beside the
    input, and ~twice that again while it sorts (1.3 M merged rank rows: +830 MB -> +420)."""
    order = pl.concat([f.select(by) for f in frames]).select(pl.arg_sort_by(by)).to_series()
    names = frames[0].columns
    cols = [pl.concat([f.drop_in_place(c) for f in frames]).gather(order) for c in names]
    frames.clear()
    return pl.DataFrame(cols)


MERGE_ROWS = 50_000
"""`_merge_ranks` merges more rank rows than this in buckets of about this many: its per-group lists take ~5x
the rows' memory at once (a 5 GB NCCL log's 1.3 M rank rows: ~1.8 GB in one merge)."""


def _merged_groups(ranks: pl.DataFrame) -> pl.DataFrame:
    """`_merge_ranks`' groups of `ranks` (every row of each (file, node, pid, comm) among them), each field
    merged, with the first `_i` of each group where `ranks` has that column; `nccl_version` the group's own
    (its first piece's that gave one), not yet the file's."""
    from parsers import nccl

    d = pl.col("detail").str.json_decode(_RANK_DETAIL)
    r = ranks.with_columns(
        _comm=d.struct.field("comm"),
        _phase=d.struct.field("phase"),
        _phases=d.struct.field("phases"),
        _nvml=d.struct.field("nvml_dev"),
        _nnodes=d.struct.field("nnodes"),
        _lrank=d.struct.field("local_rank"),
    ).with_columns(_prio=_prio(pl.col("_phase")))
    key = ["file", "node", "pid", "_comm"]
    cid = (
        r.filter(pl.col("comm_id") != pl.col("_comm"))
        .sort("line")
        .group_by(key, maintain_order=True)
        .agg(_cid=pl.col("comm_id").first())
    )
    r = r.join(cid, on=key, how="left", nulls_equal=True).with_columns(comm_id=pl.coalesce("_cid", "_comm"))
    first = [
        pl.col(c).drop_nulls().first()
        for c in ("nranks", "cuda_dev", "gpu_bus_id", "_nvml", "_nnodes", "_lrank")
    ]
    m = (
        r.sort("_prio", "line")
        .group_by([*key, "rank"], maintain_order=True)
        .agg(
            pl.col("line").first(),
            pl.col("comm_id").first(),
            pl.col("_phase").first(),
            pl.col("_prio").first(),
            *first,
            _phases=pl.col("_phases").list.explode(keep_nulls=False, empty_as_null=False).unique().sort(),
            _ver=pl.col("nccl_version").sort_by("line").drop_nulls().first(),
            *([pl.col("_i").first()] if "_i" in r.columns else []),
        )
    )
    # (the rows as `_merge_ranks` gives them, but for `nccl_version`: narrow before a merge in buckets
    # concatenates and sorts them)
    return _rank_rows(
        m,
        nccl_version=pl.col("_ver"),
        detail=nccl.json_detail(
            comm=pl.col("_comm"),
            phase=pl.col("_phase"),
            phases=pl.col("_phases"),
            nvml_dev=pl.col("_nvml"),
            nnodes=pl.col("_nnodes"),
            local_rank=pl.col("_lrank"),
        ),
        comm=pl.col("_comm"),
        prio=pl.col("_prio"),
    )


def _merge_colls(colls: pl.DataFrame, merged: pl.DataFrame | None) -> pl.DataFrame:
    """The pieces' COLL aggregates of one (node, pid, comm, op) combined (`nccl._coll_merge`), the rank and
    comm_id joined from the merged rank rows as `_nccl_rows` joins its rank map."""
    from parsers import nccl

    d = pl.col("detail").str.json_decode(_COLL_DETAIL)
    c = colls.with_columns(
        _comm=d.struct.field("comm"),
        _calls=d.struct.field("calls"),
        _fop=d.struct.field("first_opcount"),
        _fline=d.struct.field("first_line"),
        _peers=d.struct.field("peers"),
    )
    key = ["file", "node", "pid", "_comm", "op"]
    last = pl.col("line")
    agg = (
        c.group_by(key)
        .agg(
            _calls=pl.col("_calls").sum(),
            # (the earliest piece's partial: the lowest `line`, which the ingest numbers in the file even
            # where the detail's first_line is a byte range's own number)
            _fop=pl.col("_fop").sort_by(last).first(),
            seq=pl.col("seq").sort_by(last).last(),
            count=pl.col("count").sort_by(last).last(),
            dtype=pl.col("dtype").sort_by(last).last(),
            redop=pl.col("redop").sort_by(last).last(),
            nranks=pl.col("nranks").sort_by(last).last(),
            cuda_dev=pl.col("cuda_dev").sort_by(last).last(),
            _fline=pl.col("_fline").sort_by(last).first(),
            line=pl.col("line").max(),
            _peers=pl.col("_peers").list.explode(keep_nulls=False, empty_as_null=False).unique().sort(),
        )
        .sort("line")
    )
    if merged is not None:
        rm = merged.select("file", "node", "pid", "_comm", _cid="comm_id", rank="rank")
        agg = agg.join(rm, on=["file", "node", "pid", "_comm"], how="left", maintain_order="left")
    else:
        agg = agg.with_columns(_cid=pl.lit(None, dtype=pl.String), rank=pl.lit(None, dtype=pl.Int32))
    is_p2p = pl.col("op").is_in(["Send", "Recv"])
    return agg.select(
        record=pl.lit("coll"),
        node="node",
        comm_id=pl.coalesce("_cid", "_comm"),
        rank="rank",
        nranks="nranks",
        cuda_dev="cuda_dev",
        pid="pid",
        op="op",
        seq="seq",
        count="count",
        dtype="dtype",
        redop="redop",
        value=pl.col("_calls").cast(pl.Float64),
        detail=nccl.json_detail(
            comm=pl.col("_comm"),
            calls=pl.col("_calls"),
            first_opcount=pl.col("_fop"),
            first_line=pl.col("_fline"),
            peers=pl.when(is_p2p).then(pl.col("_peers")),
        ),
        file="file",
        line="line",
    )


def _resolve_events(events: pl.DataFrame, merged: pl.DataFrame) -> pl.DataFrame:
    """NCCL WARN events (source nccl, a pid and cudaDev in their detail) given the rank and bus id of their
    (node, pid, cudaDev) in its largest communicator of the merged rank rows, as `nccl.warn_events` does;
    where that gives none, the launcher's rank of the line (what `warn_events` falls back to) and no bus."""
    from parsers import nccl

    d = pl.col("detail").str.json_decode(_EVENT_DETAIL)
    ev = events.with_row_index("_i").with_columns(_pid=d.struct.field("pid"), _dev=d.struct.field("cuda_dev"))
    cand = (pl.col("source") == "nccl") & pl.col("_pid").is_not_null() & pl.col("_dev").is_not_null()
    todo = ev.filter(cand.fill_null(False))
    if todo.height == 0:
        return events
    # the merged rows in the whole parse's order (its group_by over rows sorted by (prio, line))
    rank_map = merged.sort("_prio", "line").select(
        "file", "node", "pid", "cuda_dev", "rank", "nranks", "gpu_bus_id"
    )
    rm = (
        rank_map.filter(pl.col("nranks") == pl.col("nranks").max().over("file", "node", "pid", "cuda_dev"))
        .group_by("file", "node", "pid", "cuda_dev", maintain_order=True)
        .agg(_rank=pl.col("rank").first(), _n=pl.col("rank").n_unique(), _bus=pl.col("gpu_bus_id").first())
        .filter(pl.col("_n") == 1)
        .select("file", "node", _pid="pid", _dev="cuda_dev", _rank="_rank", _bus="_bus")
    )
    todo = todo.join(rm, on=["file", "node", "_pid", "_dev"], how="left", maintain_order="left")
    miss = todo.filter(pl.col("_rank").is_null())
    if miss.height:
        env = nccl.prepare(miss.get_column("message"), FileContext(path="", node="unknown")).select(
            _env=pl.coalesce(pl.col("env_global_rank"), pl.col("env_rank")).cast(pl.Int32)
        )
        miss = miss.select("_i").hstack(env)
        todo = todo.join(miss, on="_i", how="left", maintain_order="left")
    else:
        todo = todo.with_columns(_env=pl.lit(None, dtype=pl.Int32))
    fixed = todo.with_columns(
        rank=pl.coalesce(pl.col("_rank").cast(pl.Int32), pl.col("_env")).cast(events.schema["rank"]),
        gpu_bus_id=pl.col("_bus").cast(events.schema["gpu_bus_id"]),
    )
    rest = ev.filter(~cand.fill_null(False))
    return pl.concat([rest.select(events.columns), fixed.select(events.columns)], how="vertical")
