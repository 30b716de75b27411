# ruff: noqa: E501  (verbatim)
"""nccl11's references: the `parsers.nccl` functions it changed, verbatim from the commit before (53b04f7;
patched into `parsers.nccl` by tests/parsers/test_nccl11.py): the fast lane with a per-line head for every
record and `_strict_coll` over all of them, and the steps that read its rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from parsers import _common
from parsers.base import FileContext
from parsers.nccl import (  # noqa: F401
    ALIGNED,
    BARE_VERSION_RE,
    BOOTSTRAP_RE,
    CONN_RE,
    CUDA_DRIVER_RE,
    ENUM_KEYS,
    ENV_RE,
    FAST_LANE,
    FamilyRows,
    NCCL_HEAD_RE,
    NCCL_START,
    NET_IB_ITEM_RE,
    NET_IB_RE,
    NET_SOCKET_ITEM_RE,
    NET_SOCKET_RE,
    OFI_LEGACY_RE,
    OFI_RE,
    TOPO_RE,
    USING_NET_RE,
    VERSION_RE,
    _COLLECTOR_TS,
    _CONN_PREFIXES,
    _CollJoinedError,
    _DTYPES,
    _FAST_HEAD,
    _FAST_KEY_CHARS,
    _FAST_LITERALS,
    _FAST_NOT_HEADS,
    _FRAME_COLS,
    _HEAD_COLS,
    _LANE_LITERALS,
    _LANE_LITERALS_RE,
    _LEVEL_AFTER,
    _MAPPED_V4,
    _MSG_LITERALS,
    _MSG_LITERALS_RE,
    _MSG_PREFIXES,
    _MSG_STARTS,
    _NS_SCHEMA,
    _N_SCHEMA,
    _OWN_START,
    _REDOPS,
    _SMALL,
    _UNDERSTOOD,
    _UNDERSTOOD_RAS,
    _WRAPPABLE,
    _coll_lines,
    _coll_merge,
    _coll_partials,
    _empty_coll,
    _headless,
    _init_bus_ids,
    _init_fields,
    _may,
    _none,
    _prepare_frame,
    _ras_events,
    _strict_coll,
    _torch_may_hold,
    arx,
    coll_fields,
    has_ras,
    head_columns,
    headless_warns,
    join_wrapped,
    json_detail,
    nccl_understood,
    split_nccl_lines,
    td,
    warn_events,
)


def _nccl_rows(
    slow: pl.DataFrame, fast: FastLane, ctx: FileContext, ras: bool = True
) -> tuple[dict[str, list[pl.DataFrame]], list[str], list[str], pl.Series]:
    """Build NCCL events/comms/inventory parts; also return notes, the hosts seen and the numbers of the
    slow lines read as NCCL records.

    `slow` is the prepared (and wrap-joined) frame of the lines the fast lane did not take; `fast` holds the
    NCCL records the fast lane read (rows `line, text, hc, level, msg`, heads by code `hc`). Every NCCL
    record is one row of `n` (line, text, hc, level, msg) whose head fields are `heads[hc]`; strictly-formed
    COLL lines of the fast lane are aggregated on their own (`_coll_partials`) and never enter `n`."""
    out: dict[str, list[pl.DataFrame]] = {"events": [], "comms": [], "inventory": []}
    notes: list[str] = []
    body = pl.col("body")
    # (every regex step below is skipped when a literal check says it has nothing to read: polars compiles a
    # pattern on each use once more than ~32 are in use, ~0.3 ms each, the bulk of a small file's cost)
    ns = slow.filter(~pl.col("cont") & body.str.contains(" NCCL ", literal=True))
    if ns.height and not ns.select(body.str.contains_any(_LEVEL_AFTER).any()).item():
        ns = ns.clear()  # (no ` NCCL ` before a level word: no record, `split_nccl_lines` would keep no row)
    ns = split_nccl_lines(ns) if ns.height else ns
    # (no row is an NCCL record: no head to read; `" NCCL "` also opens `NCCL work`, `NCCL communicator`)
    ns = head_columns(ns, ctx) if ns.height else _none(_NS_SCHEMA)
    base = fast.heads.height
    heads = fast.heads.select(_HEAD_COLS)
    heads = pl.concat([heads, ns.select(_HEAD_COLS)], how="vertical") if ns.height else heads
    ns = ns.select("line", "text", hc=pl.int_range(base, base + pl.len(), dtype=pl.UInt32), level="level", msg="msg")
    if not (fast.rows.height or ns.height or ras) and not _headless(slow):
        # no NCCL record, no ncclras report, no bare version or aws-ofi-nccl line: nothing below reads a row
        return out, notes, [], ns.get_column("line")
    # `n` is the fast lane's rows and the slow NCCL rows in line order; each filter below runs on both pieces
    # and merges what it keeps (merging all of `n` first would copy every row)
    pieces = [d for d in (fast.rest, ns) if d.height] or [fast.rest]

    def attach(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
        """Rows of `n` (or a subset) with the named head fields added."""
        return df.hstack(heads.select(cols)[df.get_column("hc")])

    msg = pl.col("msg")
    # each message filter below is a prefix or a literal: one pass sorts out the rows any of them can take
    pieces = [d.with_columns(_p=msg.str.head(4)) for d in pieces]

    def keep(cond: pl.Expr) -> pl.DataFrame:
        """The rows of `n` where `cond` holds, in line order."""
        got = [d.filter(cond) for d in pieces]
        return got[0] if len(got) == 1 else got[0].merge_sorted(got[1], key="line")

    pre = keep(pl.col("_p").is_in(_MSG_PREFIXES))
    n_height = sum(d.height for d in pieces)
    if n_height > _SMALL:
        lit = keep(msg.str.contains(arx(_MSG_LITERALS_RE)))
    else:
        lit = keep(msg.str.contains_any(list(_MSG_LITERALS))) if n_height else pieces[0]
    has = dict.fromkeys(_MSG_STARTS + _MSG_LITERALS, False)
    if pre.height:
        has.update(pre.select(**{k: msg.str.starts_with(k).any() for k in _MSG_STARTS}).row(0, named=True))
    if lit.height:
        has.update(lit.select(**{k: msg.str.contains(k, literal=True).any() for k in _MSG_LITERALS}).row(0, named=True))

    def pick(df: pl.DataFrame, key: str, rx: str) -> pl.DataFrame:
        """Rows of `df` whose message starts with / holds `key` and matches `rx`."""
        if not has[key]:
            return df.clear()
        sel = msg.str.starts_with(key) if key in _MSG_STARTS else msg.str.contains(key, literal=True)
        df = df.filter(sel)
        return df.filter(msg.str.contains(arx(rx))) if df.height else df

    # ---- versions (prefixed ≥ 2.23, bare ≤ 2.21, RAS "compiled with")
    pv = pick(pre, "NCCL version", VERSION_RE)
    if pv.height:
        pv = attach(pv, "node", "pid").with_columns(v=msg.str.extract_groups(arx(VERSION_RE))).select(
            "node", "pid", "line", ver=pl.col("v").struct.field("ver"), cuda=pl.col("v").struct.field("cuda")
        )
    else:
        pv = _none({"node": pl.String, "pid": pl.Int64, "line": pl.Int64, "ver": pl.String, "cuda": pl.String})
    bare = slow.filter(~pl.col("cont") & body.str.starts_with("NCCL version"))
    if bare.height:
        bare = bare.filter(body.str.contains(arx(BARE_VERSION_RE)))
    if bare.height:
        # host of the last NCCL record before each bare version line (only worked out when there is one)
        every = pl.concat([fast.rows.select("line", "hc"), ns.select("line", "hc")]).sort("line")
        at = every.get_column("line").search_sorted(bare.get_column("line"), side="left").cast(pl.Int64) - 1
        if every.height:
            h = heads.get_column("node").gather(every.get_column("hc").gather(at.clip(0, None)))
            bare = bare.with_columns(h=pl.when(at >= 0).then(h))
        else:
            bare = bare.with_columns(h=pl.lit(None, dtype=pl.String))
        bare = (
            bare.with_columns(v=body.str.extract_groups(arx(BARE_VERSION_RE)))
            .select(
                node=pl.coalesce(pl.col("env_host"), pl.col("h"), pl.lit(ctx.node)),
                pid=pl.lit(None, dtype=pl.Int64),
                line=pl.col("line"),
                ver=pl.col("v").struct.field("ver"),
                cuda=pl.coalesce(pl.col("v").struct.field("cuda"), pl.col("v").struct.field("cuda2")),
            )
        )
        versions = pl.concat([pv, bare], how="vertical_relaxed")
    else:
        versions = pv
    inv = out["inventory"]

    def inventory(df: pl.DataFrame, component: str, attribute: str | pl.Expr, value: pl.Expr, device: pl.Expr | None = None) -> None:
        if df.height == 0:
            return
        inv.append(
            df.select(
                node=pl.col("node"),
                component=pl.lit(component),
                device=device if device is not None else pl.lit(None, dtype=pl.String),
                attribute=attribute if isinstance(attribute, pl.Expr) else pl.lit(attribute),
                value=value,
                source=pl.lit("nccl"),
                file=pl.lit(ctx.path),
                line=pl.col("line"),
            )
        )

    inventory(versions, "software", "nccl_version", pl.col("ver"))
    inventory(versions.filter(pl.col("cuda").is_not_null()), "software", "nccl_cuda_version", pl.col("cuda"))
    cd = pick(pre, "cudaDriverVersion", CUDA_DRIVER_RE)
    if cd.height:
        cd = attach(cd, "node").with_columns(
            v=msg.str.extract(arx(CUDA_DRIVER_RE), 1).cast(pl.Int64, strict=False)
        )
        cd = cd.filter(pl.col("v").is_not_null())  # (a version no Int64 holds, a corrupt line: no fact)
        inventory(cd, "software", "cuda_driver_version", pl.format("{}.{}", pl.col("v") // 1000, (pl.col("v") % 1000) // 10))
    env = pick(pre, "NCCL_", ENV_RE)
    if env.height:
        env = attach(env, "node").with_columns(e=msg.str.extract_groups(arx(ENV_RE)))
        inventory(env, "software", pl.lit("env.") + pl.col("e").struct.field("var"), pl.col("e").struct.field("val"))

    # ---- node IPs and networks
    bs = pick(pre, "Bootstrap", BOOTSTRAP_RE)
    if bs.height:
        bs = attach(bs, "node", "pid").with_columns(b=msg.str.extract_groups(arx(BOOTSTRAP_RE)))
    ib = pick(pre, "NET/IB", NET_IB_RE)
    if ib.height:
        ib = attach(ib, "node", "pid").with_columns(b=msg.str.extract_groups(arx(NET_IB_RE)))
    ips = (
        pl.concat([x.select("node", "line", "b") for x in (bs, ib) if x.height], how="diagonal_relaxed")
        if (bs.height or ib.height)
        else None
    )
    if ips is not None:
        inventory(
            ips,
            "node",
            "ip",
            pl.col("b").struct.field("ip"),
            device=pl.col("b").struct.field("ifname"),
        )
    sock = pick(pre, "NET/Socket", NET_SOCKET_RE)
    sock = attach(sock, "node", "pid") if sock.height else sock
    using = pick(pre, "Using network", USING_NET_RE)
    using = attach(using, "node", "pid") if using.height else using
    ofi = pick(lit, "NET/OFI Selected", OFI_RE)
    if ofi.height:
        ofi = attach(ofi, "node", "pid").with_columns(o=msg.str.extract_groups(arx(OFI_RE)))
    net_parts = []
    if ib.height:
        items = pl.col("msg").str.extract_all(arx(NET_IB_ITEM_RE))
        ibx = ib.with_columns(items=items)
        net_parts.append(
            ibx.select(
                "node", "pid", "line",
                device=pl.col("items")
                .list.eval(pl.element().str.extract(arx(r"\]([\w.-]+):"), 1))
                .list.join(","),
                detail=json_detail(
                    transport=pl.when(pl.col("items").list.eval(pl.element().str.ends_with("/RoCE")).list.all())
                    .then(pl.lit("RoCE")).otherwise(pl.lit("IB")),
                    devices=pl.col("items").list.eval(pl.element().str.replace(arx(r"^\[\d+\]"), "")),
                    oob_if=pl.col("b").struct.field("ifname"),
                    oob_ip=pl.col("b").struct.field("ip"),
                    relaxed_ordering=pl.col("msg").str.contains("[RO]", literal=True),
                ),
            )
        )
        nics = ibx.select("node", "line", it=pl.col("items")).explode("it").filter(pl.col("it").is_not_null())
        nics = nics.with_columns(x=pl.col("it").str.extract_groups(arx(NET_IB_ITEM_RE)))
        inventory(nics, "nic", "nccl_transport", pl.col("x").struct.field("3"), device=pl.col("x").struct.field("1"))
    if sock.height:
        sx = sock.with_columns(items=pl.col("msg").str.extract_all(arx(NET_SOCKET_ITEM_RE)))
        net_parts.append(
            sx.select(
                "node", "pid", "line",
                device=pl.col("items")
                .list.eval(pl.element().str.extract(arx(r"\]([^:\s]+):"), 1))
                .list.join(","),
                detail=json_detail(transport=pl.lit("Socket"), devices=pl.col("items")),
            )
        )
        sip = sx.select("node", "line", it=pl.col("items")).explode("it").filter(pl.col("it").is_not_null())
        sip = sip.with_columns(x=pl.col("it").str.extract_groups(arx(NET_SOCKET_ITEM_RE)))
        inventory(sip, "node", "ip", pl.col("x").struct.field("2"), device=pl.col("x").struct.field("1"))
    if using.height:
        net_parts.append(
            using.select(
                "node", "pid", "line",
                device=pl.lit(None, dtype=pl.String),
                detail=json_detail(transport=msg.str.extract(arx(USING_NET_RE), 1), selected=pl.lit(True)),
            )
        )
    if ofi.height:
        net_parts.append(
            ofi.select(
                "node", "pid", "line",
                device=pl.lit(None, dtype=pl.String),
                detail=json_detail(
                    transport=pl.lit("OFI"),
                    provider=pl.col("o").struct.field("prov"),
                    nics=pl.col("o").struct.field("nics").cast(pl.Int64, strict=False),
                ),
            )
        )
    for p in net_parts:
        out["comms"].append(p.with_columns(record=pl.lit("network"), file=pl.lit(ctx.path)))

    # ---- rank map
    init = lit.filter(msg.str.contains(" - Init ", literal=True)) if has[" - Init "] else lit.clear()
    if init.height:
        init = _init_fields(attach(init, "node", "pid", "dev"))
    topo = pick(lit, " nNodes ", TOPO_RE)
    if topo.height:
        topo = attach(topo, "node", "pid", "dev").with_columns(i=msg.str.extract_groups(arx(TOPO_RE)))
    f = pl.col("i").struct.field
    rank_parts = []
    if init.height:
        rank_parts.append(
            init.select(
                "node", "pid", "line",
                comm=f("comm"),
                comm_id=pl.coalesce(f("commid"), f("comm")),
                rank=f("rank").cast(pl.Int32, strict=False),
                nranks=f("nranks").cast(pl.Int32, strict=False),
                cuda_dev=f("dev").cast(pl.Int32, strict=False),
                gpu_bus_id=_init_bus_ids(init.get_column("i").struct.field("bus")),
                phase=f("phase"),
                nvml_dev=f("nvml").cast(pl.Int32, strict=False),
                prio=pl.when(f("phase") == "COMPLETE").then(0).otherwise(1),
            )
        )
    if topo.height:
        rank_parts.append(
            topo.select(
                "node", "pid", "line",
                comm=f("comm"),
                comm_id=f("comm"),
                rank=f("rank").cast(pl.Int32, strict=False),
                nranks=f("nranks").cast(pl.Int32, strict=False),
                cuda_dev=pl.col("dev"),
                nnodes=f("nnodes").cast(pl.Int32, strict=False),
                local_rank=f("lrank").cast(pl.Int32, strict=False),
                phase=pl.lit("topology"),
                prio=pl.lit(2),
            )
        )
    rank_map = None
    if rank_parts:
        allr = pl.concat(rank_parts, how="diagonal_relaxed")
        # commId (when some line printed it) wins for every row of the same process-local comm pointer
        cid = allr.filter(pl.col("comm_id") != pl.col("comm")).group_by("node", "pid", "comm").agg(cid=pl.col("comm_id").first())
        allr = allr.join(cid, on=["node", "pid", "comm"], how="left").with_columns(comm_id=pl.coalesce("cid", "comm_id"))
        # COMPLETE > START > topology, merged per (node, pid, comm, rank)
        merged = (
            allr.sort("prio", "line")
            .group_by("node", "pid", "comm", "rank", maintain_order=True)
            .agg(
                pl.col("line").first(),
                pl.col("comm_id").first(),
                pl.col("nranks").drop_nulls().first(),
                pl.col("cuda_dev").drop_nulls().first(),
                pl.col("gpu_bus_id").drop_nulls().first() if "gpu_bus_id" in allr.columns else pl.lit(None, dtype=pl.String).alias("gpu_bus_id"),
                pl.col("phase").first(),
                pl.col("nvml_dev").drop_nulls().first() if "nvml_dev" in allr.columns else pl.lit(None, dtype=pl.Int32).alias("nvml_dev"),
                pl.col("nnodes").drop_nulls().first() if "nnodes" in allr.columns else pl.lit(None, dtype=pl.Int32).alias("nnodes"),
                pl.col("local_rank").drop_nulls().first() if "local_rank" in allr.columns else pl.lit(None, dtype=pl.Int32).alias("local_rank"),
                phases=pl.col("phase").unique().sort(),
            )
        )
        # version per process where it printed one, else the file's single version
        file_ver = versions.get_column("ver").unique()
        one_ver = file_ver[0] if len(file_ver) == 1 else None
        pver = pv.group_by("node", "pid").agg(nccl_version=pl.col("ver").first())
        merged = merged.join(pver, on=["node", "pid"], how="left").with_columns(
            nccl_version=pl.coalesce(pl.col("nccl_version"), pl.lit(one_ver, dtype=pl.String))
        )
        out["comms"].append(
            merged.select(
                record=pl.lit("rank"),
                node="node",
                comm_id="comm_id",
                rank="rank",
                nranks="nranks",
                cuda_dev="cuda_dev",
                gpu_bus_id="gpu_bus_id",
                pid="pid",
                nccl_version="nccl_version",
                detail=json_detail(
                    comm=pl.col("comm"),
                    phase=pl.col("phase"),
                    phases=pl.col("phases"),
                    nvml_dev=pl.col("nvml_dev"),
                    nnodes=pl.col("nnodes"),
                    local_rank=pl.col("local_rank"),
                ),
                file=pl.lit(ctx.path),
                line="line",
            )
        )
        rank_map = merged.select("node", "pid", "comm", "comm_id", "rank", "nranks", "cuda_dev", "gpu_bus_id")

    # ---- COLL aggregates: strict lines of the fast lane as partial aggregates, the others line by line
    coll = lit.filter(msg.str.contains(" opCount ", literal=True)) if has[" opCount "] else lit.clear()
    if coll.height:
        coll = coll_fields(attach(coll, "node", "pid", "dev")).filter(pl.col("c").struct.field("op").is_not_null())
    n_coll = coll.height + _coll_lines(fast)
    if n_coll:
        cf = pl.col("c").struct.field
        c2 = None if coll.height == 0 else coll.select(
            "node", "pid", "line", "dev",
            comm=cf("comm"),
            op=cf("op"),
            opc=cf("opc").str.to_integer(base=16, strict=False),
            cnt=cf("count").cast(pl.Int64, strict=False),
            dt=cf("dt").cast(pl.Int64, strict=False),
            ro=cf("redop").cast(pl.Int64, strict=False),
            root=cf("root").cast(pl.Int64, strict=False),
            nranks=cf("nranks").cast(pl.Int32, strict=False),
        )
        if fast.coll.height:
            agg = _coll_merge(c2 if coll.height else None, _coll_partials(fast.coll, heads))
        else:
            agg = c2.group_by("node", "pid", "comm", "op", maintain_order=True).agg(
                calls=pl.len(),
                first_opcount=pl.col("opc").first(),
                seq=pl.col("opc").last(),
                count=pl.col("cnt").last(),
                dt=pl.col("dt").last(),
                ro=pl.col("ro").last(),
                nranks=pl.col("nranks").last(),
                cuda_dev=pl.col("dev").last(),
                first_line=pl.col("line").first(),
                line=pl.col("line").last(),
                peers=pl.col("root").unique().sort(),
            )
        if rank_map is not None:
            agg = agg.join(
                rank_map.select("node", "pid", "comm", "comm_id", "rank"), on=["node", "pid", "comm"], how="left"
            )
        else:
            agg = agg.with_columns(comm_id=pl.lit(None, dtype=pl.String), rank=pl.lit(None, dtype=pl.Int32))
        is_p2p = pl.col("op").is_in(["Send", "Recv"])
        out["comms"].append(
            agg.select(
                record=pl.lit("coll"),
                node="node",
                comm_id=pl.coalesce("comm_id", "comm"),
                rank="rank",
                nranks="nranks",
                cuda_dev="cuda_dev",
                pid="pid",
                op="op",
                seq="seq",
                count="count",
                dtype=pl.col("dt").replace_strict(_DTYPES, default=None, return_dtype=pl.String),
                redop=pl.when(~is_p2p).then(pl.col("ro").replace_strict(_REDOPS, default=None, return_dtype=pl.String)),
                value=pl.col("calls").cast(pl.Float64),
                detail=json_detail(
                    comm=pl.col("comm"),
                    calls=pl.col("calls"),
                    first_opcount=pl.col("first_opcount"),
                    first_line=pl.col("first_line"),
                    peers=pl.when(is_p2p).then(pl.col("peers")),
                ),
                file=pl.lit(ctx.path),
                line="line",
            )
        )
        notes.append(f"{n_coll} COLL lines aggregated into {agg.height} rows")

    # a CONN_RE match starting with Channel/Ring/Tree/Connected starts with one of _CONN_PREFIXES
    conn_p = pl.col("_p").is_in(_CONN_PREFIXES)
    warn_p = pl.col("level").is_in(["WARN", "ERROR", "ABORT"])
    got = [d.select(conn=conn_p.any(), warn=warn_p.any()).row(0, named=True) for d in pieces]
    flags = {k: any(g[k] for g in got) for k in ("conn", "warn")}
    conn_rx = arx(CONN_RE)
    conn = sum(int(d.select((conn_p & msg.str.contains(conn_rx)).sum()).item()) for d in pieces) if flags["conn"] else 0
    if conn:
        notes.append(f"{conn} ring/tree/channel lines")

    # ---- WARN events
    legacy = slow.filter(~pl.col("cont") & body.str.contains(": Function: ", literal=True))
    legacy = (
        legacy
        if legacy.height == 0
        else (
            legacy.filter(body.str.contains(arx(OFI_LEGACY_RE)))
            .with_columns(o=body.str.extract_groups(arx(OFI_LEGACY_RE)))
            .filter(pl.col("o").struct.field("level") == "WARN")
            .pipe(
                headless_warns,
                ctx,
                src=pl.lit("aws-ofi-nccl"),
                srcline=pl.col("o").struct.field("srcline"),
                func=pl.col("o").struct.field("func"),
                msg=pl.col("o").struct.field("msg"),
            )
        )
    )
    nw = keep(warn_p) if flags["warn"] else pieces[0].clear()
    wparts = [] if not (nw.height or legacy.height) else [
        attach(nw, *_HEAD_COLS).select(
            "line",
            "text",
            "env_rank",
            "env_global_rank",
            "pre_ts",
            "pre_ts_quality",
            "node",
            "pid",
            "tid",
            "dev",
            "src",
            "srcline",
            "func",
            "msg",
            "ts",
            "ts_quality",
        )
    ]
    if legacy.height:
        wparts.append(legacy)
    warns = pl.concat(wparts, how="vertical_relaxed") if (nw.height or legacy.height) else nw
    if warns.height:
        ev = warn_events(warns, ctx, rank_map)
        out["events"].append(ev)
        # RoCE: the reporter's own GID is an IPv4-mapped address of its HCA; record it so peers named by
        # GID (remote_gid_ip) resolve to nodes like OOB/bootstrap IPs do
        gid = ev.filter(pl.col("kind") == "nccl_ib_error").select(
            "node",
            "line",
            d=pl.col("detail").str.json_decode(pl.Struct({"local_gid": pl.String, "hca": pl.String})),
        )
        gid = gid.with_columns(
            ip=pl.col("d").struct.field("local_gid").str.extract(arx(_MAPPED_V4), 1)
        )
        inventory(
            gid.filter(pl.col("ip").is_not_null()),
            "node",
            "ip",
            pl.col("ip"),
            device=pl.coalesce(pl.col("d").struct.field("hca"), pl.lit("gid")),
        )

    # ---- RAS report
    ras_ev = _ras_events(slow, ctx) if ras else None
    if ras_ev is not None:
        out["events"].append(ras_ev)
    if fast.rows.height or ns.height:
        used = pl.concat([fast.rows.get_column("hc"), ns.get_column("hc")]).unique()
        hosts = heads[used].filter(pl.col("host").is_not_null()).get_column("node").unique().sort().to_list()
    else:
        hosts = []
    return out, notes, hosts, ns.get_column("line")


@dataclass(frozen=True)
class FastLane:
    """NCCL records read by the fast lane (see `_FAST_HEAD`)."""

    mask: pl.Series
    """Boolean per line: taken by the fast lane."""
    first: int
    """Number of the first line (the mask's position 0)."""
    heads: pl.DataFrame
    """`_HEAD_COLS` (plus env_len, the launcher prefix length) per distinct head; rows refer to it by `hc`."""
    rows: pl.DataFrame
    """Every fast-lane record: line, hc."""
    rest: pl.DataFrame
    """The records that are not strict COLL lines: line, text, hc, level, msg (`_N_SCHEMA`)."""
    coll: pl.DataFrame
    """Strict COLL lines (`_COLL_FAST`) aggregated per head, op and tail (`_COLL_GROUPS`, `_strict_coll`)."""
    texts: pl.DataFrame
    """line, text of every fast-lane record (for whole-file literal checks)."""
    hits: pl.DataFrame
    """line, text of the fast-lane records holding one of `_FAST_LITERALS` (for the whole-file checks)."""


def _empty_lane(height: int, first: int) -> FastLane:
    # a head's columns: those of an NCCL record after its line, text, level and message, then the envelope's
    head_cols = {k: v for k, v in _NS_SCHEMA.items() if k not in ("line", "text", "level", "msg")}
    heads = pl.DataFrame(
        schema={**head_cols, "env_len": pl.Int64, "env_rank_source": pl.String, "env_host": pl.String, "env_pid": pl.Int64}
    )
    return FastLane(
        mask=pl.repeat(False, height, dtype=pl.Boolean, eager=True).alias("fast"),
        first=first,
        heads=heads,
        rows=pl.DataFrame(schema={"line": pl.Int64, "hc": pl.UInt32}),
        rest=pl.DataFrame(schema=_N_SCHEMA),
        coll=_empty_coll(),
        texts=pl.DataFrame(schema={"line": pl.Int64, "text": pl.String}),
        hits=pl.DataFrame(schema={"line": pl.Int64, "text": pl.String}),
    )


def _fast_lane(base: pl.DataFrame, ctx: FileContext) -> FastLane:
    """Take the lines `_FAST_HEAD` reads from `base` (line, text): their heads are worked out once per distinct
    line start; the rest of `family_rows` sees them only as rows of `n` or as COLL groups (`_strict_coll`)."""
    text = pl.col("text")
    keyed = base.select(
        "line", "text", _k=text.str.head(text.str.find(" NCCL ", literal=True) + _FAST_KEY_CHARS)
    )
    keys = keyed.get_column("_k").drop_nulls().unique()
    if len(keys) == 0:
        return _empty_lane(base.height, ctx.first_line)
    g = pl.col("g").struct.field
    u = (
        keys.to_frame("_k")
        .with_columns(g=pl.col("_k").str.extract_groups(arx(_FAST_HEAD)))
        .filter(
            g("head").is_not_null()
            & ~g("head").str.starts_with(_FAST_NOT_HEADS[0])
            & ~g("head").str.starts_with(_FAST_NOT_HEADS[1])
        )
    )
    if u.select((pl.col("_k").str.slice(4, 1) == "-").any()).item():
        # a collector timestamp (4 digits and '-' first) would be stripped by `prepare`: full path
        u = u.filter(~pl.col("_k").str.contains(arx(_COLLECTOR_TS)))
    if u.height == 0:
        return _empty_lane(base.height, ctx.first_line)
    env_len = g("env").str.len_chars().fill_null(0)
    rank = pl.coalesce(g("srank"), g("orank")).cast(pl.Int32, strict=False)
    u = u.select(
        "_k",
        env_len=env_len,
        msg_off=env_len
        + g("head").str.len_chars()
        + 6
        + g("level").str.len_chars()
        + g("sp").str.len_chars(),
        level=g("level"),
        env_rank=rank,
        env_rank_source=pl.when(g("srank").is_not_null())
        .then(pl.lit("srun"))
        .when(g("orank").is_not_null())
        .then(pl.lit("openmpi")),
        env_pid=pl.lit(None, dtype=pl.Int64),
        env_global_rank=pl.when(g("orank").is_not_null()).then(rank),  # Open MPI ranks are global
        env_host=pl.lit(None, dtype=pl.String),
        pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
        pre_ts_quality=pl.lit(None, dtype=pl.String),
        h=g("head").str.extract_groups(arx(NCCL_HEAD_RE)),
    ).unnest("h")
    u = head_columns(u.filter(pl.col("host").is_not_null()), ctx).with_row_index("hc")
    if ENUM_KEYS:
        # each line's head code: its key's position among the heads' keys (an Enum cast, cheaper than a join)
        hc = keyed.get_column("_k").cast(pl.Enum(u.get_column("_k")), strict=False).to_physical()
        hc = hc.cast(pl.UInt32).alias("hc")
        rows = keyed.with_columns(
            hc, msg_off=u.get_column("msg_off").gather(hc), level=u.get_column("level").gather(hc)
        )
    else:
        heads_by_key = u.select("_k", "hc", "msg_off", "level")
        rows = keyed.join(heads_by_key, on="_k", how="left", maintain_order="left")
    mask = rows.get_column("hc").is_not_null()
    # one literal pass: markdown auto-links and the whole-file checks' literals (`_FAST_LITERALS`)
    texts = base.get_column("text")
    if base.height > _SMALL:
        hit = texts.str.contains(arx(_LANE_LITERALS_RE))
    else:
        hit = texts.str.contains_any(list(_LANE_LITERALS))
    at = hit.fill_null(False).arg_true()
    hits = base[at]
    if len(at) and hits.select(text.str.contains("](http", literal=True).any()).item():
        # a markdown auto-link anywhere in the line is rewritten by `prepare`: full path
        link = hits.get_column("text").str.contains("](http", literal=True)
        mask = mask.scatter(at.filter(link), False)
    if not mask.any():
        return _empty_lane(base.height, ctx.first_line)
    hits = hits.filter(mask.gather(at)) if len(at) else hits
    if hits.height:
        hits = hits.filter(text.str.contains_any(list(_FAST_LITERALS)))
    rows = rows.filter(mask).select("line", "text", "hc", "level", "msg_off")
    coll, strict = _strict_coll(rows)
    rest = rows.filter(~strict) if coll.height else rows
    heads = u.select(*_HEAD_COLS, "env_len", "env_rank_source", "env_host", "env_pid")
    return FastLane(
        mask=mask.alias("fast"),
        first=ctx.first_line,
        heads=heads,
        rows=rows.select("line", "hc"),
        rest=rest.select("line", "text", "hc", "level", msg=text.str.slice(pl.col("msg_off"))),
        coll=coll,
        texts=rows.select("line", "text"),
        hits=hits,
    )


def family_rows_frame(
    base: pl.DataFrame, ctx: FileContext, wrap_width: Callable[[], int | None] | None = None
) -> FamilyRows:
    """`family_rows` over a frame of `line`, `text` in line order whose numbers need not follow one another:
    some of a file's lines, those in between left out (the caller makes sure that what the grammar reads
    across lines sees the same neighbours; `wrap_width` gives the whole file's wrap width).

    Lines without a non-ASCII character are read with ASCII-class regexes (`_common.arx`: the same matches,
    compiled 5-15x faster)."""
    with _common.ascii_scope(_common._ascii or _common.is_ascii(base.get_column("text"))):
        try:
            return _family_rows_frame(base, ctx, wrap_width, FAST_LANE)
        except _CollJoinedError:
            return _family_rows_frame(base, ctx, wrap_width, False)


def _family_rows_frame(
    base: pl.DataFrame, ctx: FileContext, wrap_width: Callable[[], int | None] | None, lane: bool
) -> FamilyRows:
    fast = _fast_lane(base, ctx) if lane else _empty_lane(base.height, ctx.first_line)
    nfast = fast.rows.height
    slow = _prepare_frame(base.filter(~fast.mask) if nfast else base)
    # a line that is nothing but a paste artefact (`> ` quote) is understood as such
    artefact = (pl.col("body").str.strip_chars() == "") & (pl.col("text").str.strip_chars() != "")
    ras = has_ras(slow)
    # NCCL lines (the bulk of a debug log) are known by their prefix; the other grammars only run on the rest
    bodies = slow.get_column("body")
    slow = slow.with_columns(
        _nccl=pl.col("body").str.contains(arx(NCCL_START)).fill_null(False)
        if _may(bodies, NCCL_START)
        else pl.lit(False)
    )
    rest = slow.filter(~pl.col("_nccl"))
    if rest.height:
        understood = _UNDERSTOOD_RAS if ras else _UNDERSTOOD
        k = td.torch_understood(pl.col("body")) | artefact
        if _may(rest.get_column("body"), understood):
            k = nccl_understood(pl.col("body"), ras) | k
        if ALIGNED and rest.height == slow.height:
            # (no NCCL-prefixed line: the rest is every line, in order; nothing to join back)
            slow = slow.with_columns(known=pl.col("_nccl") | k.fill_null(False))
        else:
            rest = rest.select("line", _k=k.fill_null(False))
            slow = (
                slow.join(rest, on="line", how="left", maintain_order="left")
                .with_columns(known=pl.col("_nccl") | pl.col("_k").fill_null(False))
                .drop("_k")
            )
    else:
        slow = slow.with_columns(known=pl.col("_nccl"))
    full: pl.DataFrame | None = None
    continued = None
    if _may_wrap(slow, fast):
        full = join_wrapped(_full_frame(slow, fast), wrap_width)
        if nfast:
            # a fast-lane record a wrapped tail was joined onto is read by the full path
            joined = full.filter(fast.mask & (pl.col("body") != pl.col("_fbody"))).get_column("line")
            if len(joined):
                fast = _drop_fast(fast, joined, base.get_column("line"))
        full = full.drop("_fbody")
        slow = full.filter(~fast.mask) if nfast else full
        continued = slow.filter(pl.col("cont")).get_column("line")
    else:
        slow = slow.with_columns(cont=pl.lit(False))
    fast_hits = fast.hits
    body = pl.col("body")
    root_cause = (
        body.str.contains(arx(td.ROOT_CAUSE_RE))
        if _may(slow.get_column("body"), td.ROOT_CAUSE_RE)
        else pl.lit(False)
    )
    blocks = bool(
        slow.select(
            (
                body.str.contains(td.RESULT_HEAD_TEXT, literal=True)
                | body.str.contains("launch configs:", literal=True)
                | root_cause
            ).any()
        ).item()
    ) or bool(
        fast_hits.select(
            (
                pl.col("text").str.contains(td.RESULT_HEAD_TEXT, literal=True)
                | pl.col("text").str.contains("launch configs:", literal=True)
            ).any()
        ).item()
    )
    last_err = bool(slow.select(body.str.contains(td.LAST_ERROR_TEXT, literal=True).any()).item()) or bool(
        fast_hits.select(pl.col("text").str.contains(td.LAST_ERROR_TEXT, literal=True).any()).item()
    )
    td_frame = slow
    last_rows = None
    if blocks or last_err:
        if full is None:
            full = _full_frame(slow, fast).drop("_fbody").with_columns(cont=pl.lit(False))
        if blocks:
            # torchrun/ChildFailedError blocks: runs over every line (an NCCL line ends a run)
            full = td.mark_blocks(full)
        if last_err:
            full = full.with_columns(_last_err=td.after_last_error(full))
            last_rows = full.filter(pl.col("_last_err"))
        keep = ~fast.mask
        if blocks:
            keep = keep | full.get_column("_block").is_not_null()
        td_frame = full.filter(keep) if nfast else full
        slow = full.filter(~fast.mask) if nfast else full
    if not last_err:
        slow = slow.with_columns(_last_err=pl.lit(False))
    parts, notes, hosts, nccl_lines = _nccl_rows(slow, fast, ctx, ras)
    if _torch_may_hold(td_frame, blocks):
        torch_ev, torch_ok = td.torch_events(td_frame, ctx)
        if torch_ev.height:
            parts["events"].append(torch_ev)
    else:
        torch_ok = pl.repeat(False, td_frame.height, dtype=pl.Boolean, eager=True).alias("_ok")
    if last_rows is not None:
        last = td.last_error_events(last_rows, ctx)
        if last is not None:
            parts["events"].append(last)
    if ALIGNED and (nfast == 0 or not (blocks or last_err)):
        # (the PyTorch grammar read the lines of `slow`, in order: its result is per line of `slow`)
        with_ok = slow.with_columns(_ok=torch_ok)
    else:
        ok = td_frame.select("line", _ok=torch_ok)
        with_ok = slow.join(ok, on="line", how="left", maintain_order="left")
    slow_ok = (
        with_ok.select(
            pl.col("known")
            | pl.col("cont")
            | pl.col("_ok").fill_null(False)
            | pl.col("_last_err")
            | pl.col("line").is_in(nccl_lines.implode())
        )
        .to_series()
    )
    if nfast:
        understood = pl.repeat(True, base.height, dtype=pl.Boolean, eager=True).alias("known")
        understood = understood.scatter((~fast.mask).arg_true(), slow_ok) if len(slow_ok) else understood
    else:
        understood = slow_ok
    tables: dict[str, pl.DataFrame] = {}
    for name, dfs in parts.items():
        dfs = [d for d in dfs if d.height]
        if not dfs:
            continue
        df = pl.concat(dfs, how="diagonal_relaxed")
        if name == "inventory":
            df = df.unique(
                subset=["node", "component", "device", "attribute", "value"],
                keep="first",
                maintain_order=True,
            )
        tables[name] = df
    return FamilyRows(
        tables=tables,
        understood=understood.fill_null(False).alias("known"),
        notes=notes,
        hosts=hosts,
        fast=fast.mask if fast.rows.height else None,
        whole=ras,
        continued=continued,
    )


def _full_frame(slow: pl.DataFrame, fast: FastLane) -> pl.DataFrame:
    """Every line prepared (fast-lane lines rebuilt from their heads: body = the line less its launcher
    prefix), in line order, plus `_fbody` (the body before any wrap joining)."""
    slow = slow.select(*_FRAME_COLS)
    if fast.rows.height == 0:
        return slow.with_columns(_fbody=pl.col("body"))
    env = fast.heads.select(
        "env_len",
        "env_rank",
        "env_rank_source",
        "env_host",
        "env_pid",
        "env_global_rank",
        "pre_ts",
        "pre_ts_quality",
    )[fast.rows.get_column("hc")]
    fr = fast.texts.hstack(env).select(
        "line",
        "text",
        body=pl.col("text").str.slice(pl.col("env_len")),
        env_rank="env_rank",
        env_rank_source="env_rank_source",
        env_host="env_host",
        env_pid="env_pid",
        env_global_rank="env_global_rank",
        pre_ts="pre_ts",
        pre_ts_quality="pre_ts_quality",
        _nccl=pl.lit(True),
        known=pl.lit(True),
    )
    return pl.concat([slow, fr], how="vertical").sort("line").with_columns(_fbody=pl.col("body"))


def _drop_fast(fast: FastLane, lines: pl.Series, numbers: pl.Series) -> FastLane:
    """The fast lane without the records of `lines` (they go back to the full path); `numbers` are the line
    numbers of the mask's positions."""
    drop = pl.col("line").is_in(lines.implode())
    rest = fast.rest.filter(~drop)
    if fast.rest.height - rest.height != lines.n_unique():
        # a strict COLL line among them (a wrap is only joined onto a WARN/error record, which none is)
        raise _CollJoinedError
    pos = numbers.search_sorted(lines, side="left").cast(pl.UInt32)
    mask = fast.mask.scatter(pos, False)
    return FastLane(
        mask=mask,
        first=fast.first,
        heads=fast.heads,
        rows=fast.rows.filter(~drop),
        rest=rest,
        coll=fast.coll,
        texts=fast.texts.filter(~drop),
        hits=fast.hits.filter(~drop),
    )


def _may_wrap(slow: pl.DataFrame, fast: FastLane) -> bool:
    """False when `join_wrapped` would join nothing: no candidate continuation (an unknown, non-blank line not
    opening like a record of its own, right after a line of at least 80 characters) whose run starts at a
    known warning/error record (`_WRAPPABLE`)."""
    b = pl.col("body").fill_null("")
    c = slow.filter(~pl.col("known") & (b.str.strip_chars().str.len_bytes() != 0))
    if c.height:
        c = c.filter(~b.str.contains(arx(_OWN_START)))
    if c.height == 0:
        return False
    # bodies of the lines before the candidates, and of the run heads found below, from either lane
    slow_b = slow.select("line", "known", _b=b)

    def bodies(want: pl.Series) -> pl.DataFrame:
        got = want.to_frame("line").join(slow_b, on="line", how="inner")
        if fast.rows.height:
            fl = fast.texts.get_column("line")
            at = fl.search_sorted(want, side="left")
            at = at.filter(at < len(fl))
            at = at.filter(fl.gather(at).is_in(want.implode()))
            if len(at):
                env = fast.heads.get_column("env_len").gather(fast.rows.get_column("hc").gather(at))
                f = fast.texts[at].select("line", known=pl.lit(True), _b=pl.col("text").str.slice(env))
                got = pl.concat([got, f], how="vertical")
        return got

    prev = bodies(c.get_column("line") - 1).filter(pl.col("_b").str.len_chars() >= 80)
    if prev.height == 0:
        return False
    cand = set((prev.get_column("line") + 1).to_list())
    # a run is a non-candidate line and the candidates after it; the first line of the frame has no run head
    first = fast.first
    heads = set()
    for line in sorted(cand):
        h = line - 1
        while h in cand:
            h -= 1
        if h >= first:
            heads.add(h)
    if not heads:
        return False
    hb = bodies(pl.Series("line", sorted(heads), dtype=pl.Int64))
    wrappable = pl.col("known") & pl.col("_b").str.contains(arx(_WRAPPABLE))
    return bool(hb.select(wrappable.fill_null(False).any()).item())
