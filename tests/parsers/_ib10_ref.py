"""ib10's reference: `parsers.infiniband._parse_frames` verbatim as it was before the counter-line lane
(commit 246ca7f), for tests/parsers/test_ib10.py."""
# ruff: noqa
# fmt: off
from __future__ import annotations

import polars as pl

from parsers._common import split_envelopes
from parsers.base import FileContext, ParseResult, account, numbered
from parsers.infiniband import *  # noqa: F403
from parsers.infiniband import _COLLECTOR_TIME_NEED, _TIME_NEED, _Gate, _map, _normalise, _plain_json_detail, _section, _timestamps
from parsers.nccl_tests import collector_time


def _parse_frames(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse` with polars expressions over the column of lines (any input)."""
    frame = numbered(lines, ctx)
    gate = _Gate(lines)
    if gate.search(_COLLECTOR_TIME_NEED):
        no_time, line_ts = collector_time(pl.col("text"))
        frame = frame.with_columns(_ts_prefix=line_ts, _rest=no_time)
    else:  # no collector time prefix anywhere: what collector_time gives
        frame = frame.with_columns(
            _ts_prefix=pl.lit(None, dtype=pl.Datetime("us", "UTC")), _rest=pl.col("text")
        )
    env = split_envelopes(pl.col("_rest"))
    f = frame.with_columns(body=env["rest"].str.strip_chars_end(), env_host=env["host"])
    pd = pl.col("body").str.extract_groups(PDSH_RE)
    f = f.with_columns(
        host=pl.coalesce(pd.struct.field("host"), pl.col("env_host")),
        b=pl.coalesce(pd.struct.field("rest"), pl.col("body")),
    )
    # `head /sys/class/infiniband/*/ports/*/counters/*` prints `==> path <==` then the value on the next line:
    # fold the value into the header line (which then reads like `path value`) and mark the value line parsed.
    # (also `$ cat /sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error` followed by its value)
    if gate.may_scan(HEAD_RE, CAT_RE):
        hdr = pl.coalesce(pl.col("b").str.extract(HEAD_RE, 1), pl.col("b").str.extract(CAT_RE, 1))
        nxt = pl.col("b").shift(-1)
        folded = (
            hdr.is_not_null()
            & nxt.is_not_null()
            & ~nxt.str.contains(HEAD_RE)
            & nxt.str.contains(r"^\s*[^\s/$#][^$#]*$")
        )
        f = f.with_columns(
            k_headval=folded.shift(1).fill_null(False),
            evmsg=pl.when(folded)
            .then(
                pl.format(
                    "{} {}", pl.col("text").str.strip_chars(), pl.col("text").shift(-1).str.strip_chars()
                )
            )
            .otherwise(pl.col("text").str.strip_chars()),
            b=pl.when(folded).then(pl.format("{} {}", hdr, nxt.str.strip_chars())).otherwise(pl.col("b")),
        )
        gate.text_of(f.get_column("b"))  # folded lines join a path and a value: gate on the new text
    else:  # no `==> path <==` / `cat path` line: nothing folds
        f = f.with_columns(k_headval=pl.lit(False), evmsg=pl.col("text").str.strip_chars())
    b = pl.col("b")
    f = f.with_columns(host=pl.coalesce(pl.col("host").str.split(".").list.first(), pl.lit(ctx.node)))
    # timestamps: the costly parse runs only on the few short lines that look like a time
    cand = (b.str.len_bytes() < 80) & b.str.contains(r"\d\d:\d\d:\d\d|^\D{0,20}\d{10}(?:\.\d+)?\D{0,5}$")
    cand_rows = f.filter(cand) if gate.search(_TIME_NEED) else f.clear()
    if cand_rows.height:
        is_ts, ts_v, ts_q = _timestamps(b)
        times = cand_rows.select("line", k_ts=is_ts, ts_line=ts_v, ts_quality_line=ts_q)
        f = f.join(times, on="line", how="left").with_columns(pl.col("k_ts").fill_null(False))
    else:  # no line looks like a time: what the join would give
        f = f.with_columns(
            k_ts=pl.lit(False),
            ts_line=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
            ts_quality_line=pl.lit(None, dtype=pl.String),
        )
    c = gate.contains
    f = f.with_columns(
        k_ca=c(CA_RE),
        k_ibstatus=c(IBSTATUS_RE),
        k_hca=c(HCA_ID_RE),
        k_port=c(PORT_RE),
        k_dvport=c(DEVINFO_PORT_RE),
        k_kv=c(KV_RE),
        k_sysfs=c(SYSFS_RE) & (b.str.starts_with("/sys/class/infiniband/") | c(r"^[\w.-]+/ports/\d+/")),
        k_pqhdr=c(PQ_HDR_RE),
        k_i2n=c(IBDEV2NETDEV_RE),
        k_pqctr=c(PQ_CTR_RE),
        k_panic=c(IBPANIC_RE),
        k_mlxsec=c(MLX_SECTION_RE),
        k_mlxkv=c(MLX_KV_RE),
        k_rule=c(RULE_RE),
        k_marker=c(MARKER_RE),
        k_cmd=c(CMD_RE),
    )
    # block context: the tool (fmt), device and port in force on each line, per host
    fmt_here = (
        pl.when(pl.col("k_ca"))
        .then(pl.lit("ibstat"))
        .when(pl.col("k_ibstatus"))
        .then(pl.lit("ibstatus"))
        .when(pl.col("k_hca"))
        .then(pl.lit("ibv_devinfo"))
        .when(pl.col("k_pqhdr"))
        .then(pl.lit("perfquery"))
        .when(pl.col("k_mlxsec") | (pl.col("k_cmd") & c(r"\bmlxlink\b")))
        .then(pl.lit("mlxlink"))
        .when(pl.col("k_sysfs"))
        .then(pl.lit("sysfs"))
        .when(pl.col("k_cmd") & c(r"\bperfquery\b"))
        .then(pl.lit("perfquery"))
    )
    dev_here = (
        pl.when(pl.col("k_ca"))
        .then(gate.extract(CA_RE, 1))
        .when(pl.col("k_ibstatus"))
        .then(gate.extract(IBSTATUS_RE, 1))
        .when(pl.col("k_hca"))
        .then(gate.extract(HCA_ID_RE, 1))
        .when(pl.col("k_marker"))
        .then(gate.extract(MARKER_RE, 1))
        .when(pl.col("k_cmd") & c(r"\bperfquery\b"))
        .then(pl.coalesce(gate.extract(PQ_CA_RE, 1), pl.lit("")))
        .when(pl.col("k_cmd") & c(r"\bmlxlink\b"))
        .then(pl.coalesce(gate.extract(MLX_DEV_RE, 1), pl.lit("")))
    )
    port_here = (
        pl.when(pl.col("k_ibstatus"))
        .then(gate.extract(IBSTATUS_RE, 2))
        .when(pl.col("k_port"))
        .then(gate.extract(PORT_RE, 1))
        .when(pl.col("k_dvport"))
        .then(gate.extract(DEVINFO_PORT_RE, 1))
        .when(pl.col("k_marker"))
        .then(pl.coalesce(gate.extract(MARKER_RE, 2), pl.lit("")))
        .when(pl.col("k_ca") | pl.col("k_hca") | pl.col("k_cmd"))
        .then(pl.lit(""))
    )
    block_start = pl.col("k_ca") | pl.col("k_ibstatus") | pl.col("k_hca") | pl.col("k_pqhdr")
    # Every branch above needs one of these flags: the extractions run on those lines only (null elsewhere).
    context_line = (
        pl.col("k_ca") | pl.col("k_ibstatus") | pl.col("k_hca") | pl.col("k_pqhdr") | pl.col("k_mlxsec")
        | pl.col("k_cmd") | pl.col("k_sysfs") | pl.col("k_marker") | pl.col("k_port") | pl.col("k_dvport")
    )  # fmt: skip
    if f.height > 20_000:  # (on a small file the extra steps cost more than they save)
        here = (
            f.with_row_index("_r")
            .filter(context_line)
            .select("_r", _fmt=fmt_here, _dev=dev_here, _port=port_here)
        )
        idx = here.get_column("_r")
        f = f.with_columns(
            **{
                c: pl.repeat(None, f.height, dtype=pl.String, eager=True).scatter(idx, here.get_column(c))
                for c in ("_fmt", "_dev", "_port")
            }
        )
    else:
        f = f.with_columns(_fmt=fmt_here, _dev=dev_here, _port=port_here)
    f = (
        f.with_columns(
            fmt=pl.col("_fmt").forward_fill().over("host"),
            dev=pl.col("_dev").forward_fill().over("host"),
            port=pl.col("_port").forward_fill().over("host"),
            block=block_start.cum_sum(),
            ts=pl.coalesce(pl.col("_ts_prefix"), pl.col("ts_line").forward_fill().over("host")),
            ts_quality=pl.when(pl.col("_ts_prefix").is_not_null())
            .then(pl.lit("exact"))
            .otherwise(pl.col("ts_quality_line").forward_fill().over("host")),
        )
        .with_columns(
            dev=pl.when(pl.col("dev") != "").then(pl.col("dev")),
            port=pl.when(pl.col("port") != "").then(pl.col("port")).cast(pl.Int32, strict=False),
        )
        .drop("_fmt", "_dev", "_port")
    )
    fmt = pl.col("fmt")
    in_block = fmt.is_in(["ibstat", "ibstatus", "ibv_devinfo"]) & pl.col("dev").is_not_null()

    # Sections whose lines do not occur are not computed: their (empty) results are taken from a run on an
    # empty frame of the same schema, made once per process (same columns and types as computing them).
    pq_hdr = f.filter(pl.col("k_pqhdr"))
    if pq_hdr.height:
        pq = pq_hdr.with_columns(g=b.str.extract_groups(PQ_HDR_RE)).select(
            "line",
            # (a lid or port its column cannot hold: -1 here, null once forward-filled, so that the counters
            # under that header are read with it null, not with the previous header's)
            pq_lid=pl.col("g").struct.field("lid").cast(pl.Int64, strict=False).fill_null(-1),
            pq_port=pl.col("g").struct.field("port").cast(pl.Int32, strict=False).fill_null(-1),
            pq_what=pl.col("g").struct.field("what"),
        )
        lid, port = pl.col("pq_lid").forward_fill().over("host"), pl.col("pq_port").forward_fill().over("host")
        f = f.join(pq, on="line", how="left").with_columns(
            pq_lid=pl.when(lid >= 0).then(lid),
            pq_port=pl.when(port >= 0).then(port),
            pq_what=pl.col("pq_what").forward_fill().over("host"),
        )
    else:  # no perfquery header: the join would add only nulls
        f = f.with_columns(
            pq_lid=pl.lit(None, dtype=pl.Int64),
            pq_port=pl.lit(None, dtype=pl.Int32),
            pq_what=pl.lit(None, dtype=pl.String),
        )
    kv_line = pl.col("k_kv") & in_block & ~pl.col("k_port") & ~pl.col("k_dvport")
    mlx_line = (fmt == "mlxlink") & pl.col("k_mlxkv")
    # (after a perfquery header: its `what` is never null there, its port is where too large)
    pq_line = pl.col("k_pqctr") & (pl.col("fmt") == "perfquery") & pl.col("pq_what").is_not_null()
    present = f.select(
        kv=kv_line.any(),
        sy=pl.col("k_sysfs").any(),
        mlx=mlx_line.any(),
        i2n=pl.col("k_i2n").any(),
        pan=pl.col("k_panic").any(),
        pqc=pq_line.any(),
    ).row(0, named=True)

    def kv_part(f: pl.DataFrame) -> pl.DataFrame:
        """key/value lines of ibstat / ibstatus / ibv_devinfo blocks"""
        kv = f.filter(kv_line).with_columns(g=b.str.extract_groups(KV_RE)).unnest("g")
        key = pl.col("key").str.strip_chars().str.to_lowercase()
        return kv.with_columns(
            attribute=pl.when(fmt == "ibstat")
            .then(_map(key, IBSTAT_KEYS))
            .when(fmt == "ibstatus")
            .then(_map(key, IBSTATUS_KEYS))
            .otherwise(_map(key, DEVINFO_KEYS)),
            source=fmt,
        )

    def sy_part(f: pl.DataFrame) -> pl.DataFrame:
        """sysfs lines (device and port attributes; counters go to comms)"""
        # NOTE: split `path<sep>value` first and match the short path only (the full-line regex is 10x slower)
        path = b.str.extract(r"^([^\s:]+)", 1)
        return (
            f.filter(pl.col("k_sysfs"))
            .with_columns(
                g=path.str.extract_groups(SYSFS_PATH_RE).struct.with_fields(
                    val=b.str.slice(path.str.len_chars()).str.strip_prefix(":").str.strip_chars()
                )
            )
            .drop("port", "dev")
            .unnest("g")
            .with_columns(port=pl.col("port").cast(pl.Int32, strict=False))
        )

    def mlx_part(f: pl.DataFrame) -> pl.DataFrame:
        """mlxlink key/value lines (attributes and counters)"""
        return (
            f.filter(mlx_line)
            .with_columns(g=b.str.extract_groups(MLX_KV_RE))
            .unnest("g")
            .with_columns(lkey=pl.col("key").str.strip_chars().str.to_lowercase())
        )

    def i2n_part(f: pl.DataFrame) -> pl.DataFrame:
        """ibdev2netdev: `mlx5_0 port 1 ==> ib0 (Up)` -> netdev name and its link state"""
        i2n = (
            f.filter(pl.col("k_i2n"))
            .with_columns(g=b.str.extract_groups(IBDEV2NETDEV_RE))
            .drop("dev", "port")
            .unnest("g")
            .with_columns(port=pl.col("port").cast(pl.Int32, strict=False))
        )
        return pl.concat(
            [
                i2n.with_columns(attribute=pl.lit("netdev"), val=pl.col("netdev")),
                i2n.with_columns(attribute=pl.lit("netdev_state"), val=pl.col("state")),
            ]
        ).with_columns(source=pl.lit("ibdev2netdev"))

    def pan_part(f: pl.DataFrame) -> pl.DataFrame:
        return f.filter(pl.col("k_panic")).with_columns(g=b.str.extract_groups(IBPANIC_RE)).unnest("g")

    def pqc_part(f: pl.DataFrame) -> pl.DataFrame:
        # These lines match PQ_CTR_RE (`name:....value`), so its groups are found by cutting: the name (no
        # `:` in it) ends at the first `:`; the value is what follows the dots, trimmed, or the last dot when
        # only dots follow (the regex then gives one dot back to `\S+`). Same values, no regex pass.
        name_rest = b.str.splitn(":", 2)
        val = name_rest.struct.field("field_1").str.strip_chars_start(".").str.strip_chars()
        return f.filter(pq_line).with_columns(
            g=pl.struct(name=name_rest.struct.field("field_0"), val=pl.when(val == "").then(pl.lit(".")).otherwise(val))
        ).unnest("g")

    kv = _section("kv", present["kv"], kv_part, f)
    sy = _section("sy", present["sy"], sy_part, f)
    mlx = _section("mlx", present["mlx"], mlx_part, f)
    i2n_attr = _section("i2n", present["i2n"], i2n_part, f)
    pan = _section("pan", present["pan"], pan_part, f)
    pqc = _section("pqc", present["pqc"], pqc_part, f)

    def attr_tables(
        kv: pl.DataFrame, sy: pl.DataFrame, mlx: pl.DataFrame, i2n_attr: pl.DataFrame
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """inventory and port-state events from the attribute lines"""
        sy_attr = sy.filter(pl.col("grp").is_null()).with_columns(
            attribute=_map(pl.col("key"), SYSFS_KEYS), source=pl.lit("sysfs")
        )
        mlx_attr = mlx.with_columns(attribute=_map(pl.col("lkey"), MLXLINK_KEYS), source=pl.lit("mlxlink"))
        cols = [
            "line",
            "text",
            "evmsg",
            "host",
            "dev",
            "port",
            "block",
            "attribute",
            "val",
            "source",
            "ts",
            "ts_quality",
        ]
        attrs = pl.concat(
            [
                kv.select(cols),
                sy_attr.select(cols),
                mlx_attr.with_columns(port=pl.col("port").fill_null(1)).select(cols),
                i2n_attr.select(cols),
            ]
        ).filter(pl.col("attribute").is_not_null() & pl.col("dev").is_not_null())
        attrs = attrs.with_columns(value=_normalise(pl.col("attribute"), pl.col("val").str.strip_chars()))
        rate_detail = attrs.filter(
            (pl.col("attribute") == "rate") & pl.col("val").str.contains(r"\(.+\)")
        ).with_columns(attribute=pl.lit("link_width_speed"), value=pl.col("val").str.extract(r"\((.+)\)", 1))
        # ibv_devinfo -v prints no rate: derive it (Gb/s) from active_width x active_speed, like ibstat's `Rate`
        width = attrs.filter(pl.col("attribute") == "active_width").select(
            "host", "dev", "port", "block", lanes=pl.col("val").str.extract(r"^(\d+)X", 1).cast(pl.Float64)
        )
        speed = (
            attrs.filter(pl.col("attribute") == "active_speed")
            .with_columns(
                gbps=pl.col("val").str.extract(r"^([\d.]+)\s*Gbps", 1).cast(pl.Float64, strict=False)
            )
            .join(width, on=["host", "dev", "port", "block"], how="inner", nulls_equal=True)
            .filter(pl.col("lanes").is_not_null() & pl.col("gbps").is_not_null())
        )
        total = pl.col("lanes") * pl.col("gbps")
        derived_rate = speed.with_columns(
            attribute=pl.lit("rate"),
            value=pl.when(total == total.round(0))
            .then(total.round(0).cast(pl.Int64, strict=False).cast(pl.String))
            .otherwise(total.round(3).cast(pl.String)),
        ).select(attrs.columns)
        attrs = pl.concat([attrs, rate_detail, derived_rate]).sort("line", maintain_order=True)
        inventory = attrs.filter(pl.col("value").str.len_chars() > 0).select(
            node="host",
            component=pl.lit("nic"),
            device="dev",
            port="port",
            attribute="attribute",
            value="value",
            source="source",
            file=pl.lit(ctx.path),
            line="line",
        )

        # ---- events: ports not Active
        ports = attrs.filter(pl.col("port").is_not_null())
        pkey = ["host", "dev", "port", "block", "source"]
        extra = ports.filter(pl.col("attribute").is_in(["phys_state", "rate", "link_layer"])).pivot(
            on="attribute", index=pkey, values="value", aggregate_function="first"
        )
        for name in ("phys_state", "rate", "link_layer"):
            if name not in extra.columns:
                extra = extra.with_columns(pl.lit(None, dtype=pl.String).alias(name))
        i2n_down = ports.filter(
            (pl.col("attribute") == "netdev_state") & (pl.col("value").str.to_lowercase() == "down")
        )
        states = pl.concat(
            [
                ports.filter((pl.col("attribute") == "state") & (pl.col("value") != "Active")),
                i2n_down.with_columns(value=pl.lit("Down")),
            ]
        ).join(extra, on=pkey, how="left", nulls_equal=True)
        ev_state = states.select(
            ts="ts",
            ts_quality=pl.col("ts_quality").fill_null("none"),
            node="host",
            source=pl.lit("ib"),
            kind=pl.when(pl.col("value") == "Down")
            .then(pl.lit("ib_port_down"))
            .otherwise(pl.lit("ib_port_not_active")),
            code=pl.col("value"),
            severity=pl.lit("medium"),
            message=pl.col("evmsg"),
            detail=json_detail(
                device=pl.col("dev"),
                port=pl.col("port"),
                state=pl.col("value"),
                phys_state=pl.col("phys_state"),
                rate=pl.col("rate"),
                link_layer=pl.col("link_layer"),
                tool=pl.col("source"),
            ),
            file=pl.lit(ctx.path),
            line="line",
        )
        return inventory, ev_state

    def event_table(ev_state: pl.DataFrame, pan: pl.DataFrame) -> pl.DataFrame:
        """port-state events and tool aborts"""
        ev_panic = pan.select(
            ts="ts",
            ts_quality=pl.col("ts_quality").fill_null("none"),
            node="host",
            source=pl.lit("ib"),
            kind=pl.when(pl.col("tool") == "ibwarn")
            .then(pl.lit("ib_tool_warning"))
            .otherwise(pl.lit("ib_tool_error")),
            severity=pl.when(pl.col("tool") == "ibwarn").then(pl.lit("low")).otherwise(pl.lit("medium")),
            message=pl.col("evmsg"),
            detail=json_detail(
                tool=pl.col("tool"),
                pid=pl.col("pid").cast(pl.Int64, strict=False),
                device=pl.col("msg").str.extract(r"IB device '([^']+)'", 1),
                reason=pl.col("msg"),
            ),
            file=pl.lit(ctx.path),
            line="line",
        )
        return pl.concat([ev_state, ev_panic], how="diagonal_relaxed").sort("line")

    def comms_table(sy: pl.DataFrame, pqc: pl.DataFrame, mlx: pl.DataFrame) -> pl.DataFrame:
        """counters: sysfs counters/hw_counters, perfquery, mlxlink"""
        sy_ctr = sy.filter(pl.col("grp").is_in(["counters", "hw_counters"])).select(
            "line",
            "host",
            "ts",
            dev="dev",
            port="port",
            counter="key",
            name=pl.lit(None, dtype=pl.String),
            group="grp",
            raw="val",
            lid=pl.lit(None, dtype=pl.Int64),
            tool=pl.lit("sysfs"),
        )
        pq_ctr = pqc.filter(~pl.col("name").is_in(PQ_NOT_COUNTERS)).select(
            "line",
            "host",
            "ts",
            dev=pl.coalesce(pl.col("dev"), pl.format("lid:{}", pl.col("pq_lid"))),
            port=pl.col("pq_port"),
            counter=pl.coalesce(_map(pl.col("name"), PERFQUERY_COUNTERS), pl.col("name"))
            + pl.when(~pl.col("pq_what").str.contains("extended", literal=True) & pl.col("name").is_in(PQ_32BIT))
            .then(pl.lit("_32"))
            .otherwise(pl.lit("")),
            name=pl.col("name"),
            group=pl.col("pq_what"),
            raw=pl.col("val"),
            lid=pl.col("pq_lid"),
            tool=pl.lit("perfquery"),
        )
        mlx_ctr = mlx.filter(pl.col("lkey").is_in(list(MLXLINK_COUNTERS))).select(
            "line",
            "host",
            "ts",
            dev="dev",
            port=pl.col("port").fill_null(1),
            counter=_map(pl.col("lkey"), MLXLINK_COUNTERS),
            name=pl.col("key").str.strip_chars(),
            group=pl.lit(None, dtype=pl.String),
            raw="val",
            lid=pl.lit(None, dtype=pl.Int64),
            tool=pl.lit("mlxlink"),
        )
        ctr = pl.concat([sy_ctr, pq_ctr, mlx_ctr]).with_columns(
            value=pl.col("raw").str.replace(r"(?i)^0x", "").str.strip_chars().cast(pl.Float64, strict=False)
        )
        hexval = pl.col("raw").str.contains(r"(?i)^0x[0-9a-f]+$")
        ctr = ctr.with_columns(
            value=pl.when(hexval)
            .then(pl.col("raw").str.slice(2).str.to_integer(base=16, strict=False).cast(pl.Float64))
            .otherwise(pl.col("raw").cast(pl.Float64, strict=False))
        ).filter(pl.col("value").is_not_null() & pl.col("dev").is_not_null())
        ctr = ctr.sort("line").with_columns(
            reading=pl.int_range(pl.len()).over("host", "dev", "port", "counter")
        )
        detail = {
            "reading": pl.col("reading"),
            "name": pl.col("name"),
            "group": pl.col("group"),
            "lid": pl.col("lid"),
            "tool": pl.col("tool"),
            "raw": pl.col("_raw"),
        }
        ctr = ctr.with_columns(_raw=pl.when(pl.col("raw").str.contains(r"[Ee]|0x")).then(pl.col("raw")))
        out = ctr.select(
            record=pl.lit("ib_counter"),
            ts="ts",
            node="host",
            device="dev",
            port="port",
            counter="counter",
            value="value",
            detail=_plain_json_detail(detail, ("name", "group", "tool", "raw")),
            file=pl.lit(ctx.path),
            line="line",
        )
        # strings JSON would escape (quotes, backslashes, control characters): the general encoding
        needs_escape = pl.any_horizontal(
            pl.col(c).str.contains(r'[\x00-\x1f"\\]') for c in ("name", "group", "tool", "_raw")
        ).fill_null(False)
        idx = ctr.select(pl.arg_where(needs_escape)).to_series()
        if len(idx):
            slow = ctr[idx].select(detail=json_detail(**detail)).to_series()
            out = out.with_columns(out.get_column("detail").scatter(idx, slow))
        return out

    any_attr = present["kv"] or present["sy"] or present["mlx"] or present["i2n"]
    inventory, ev_state = _section("attrs", any_attr, attr_tables, kv, sy, mlx, i2n_attr)
    events = _section("events", ev_state.height > 0 or pan.height > 0, event_table, ev_state, pan)
    comms = _section("comms", sy.height > 0 or pqc.height > 0 or mlx.height > 0, comms_table, sy, pqc, mlx)

    # ---- accounting
    understood = (
        pl.col("k_ca")
        | pl.col("k_ibstatus")
        | pl.col("k_hca")
        | ((pl.col("k_port") | pl.col("k_dvport")) & pl.col("dev").is_not_null())
        | (pl.col("k_kv") & in_block)
        | pl.col("k_sysfs")
        | pl.col("k_pqhdr")
        | pl.col("k_i2n")
        | pl.col("k_headval")
        | pq_line
        | pl.col("k_panic")
        | pl.col("k_mlxsec")
        | ((fmt == "mlxlink") & pl.col("k_mlxkv"))
        | pl.col("k_rule")
        | pl.col("k_marker")
        | pl.col("k_cmd")
        | pl.col("k_ts")
        | (pl.col("body").str.strip_chars().str.len_bytes() == 0)
    )
    parsed, unrecognized, examples = account(f.select("line", "text", understood.alias("ok")), pl.col("ok"))
    hosts = f.filter(pl.col("host") != ctx.node).get_column("host").unique()
    # the tool aborted (ibpanic), or the capture ends on a line the grammar does not understand (cut line)
    flagged = f.select("text", ok=understood).filter(pl.col("text").str.strip_chars().str.len_bytes() > 0)
    cut_last = flagged.height > 0 and not bool(flagged.get_column("ok").fill_null(False)[-1])
    partial = cut_last or (
        pan.height > 0 and bool(pan.get_column("tool").is_in(["ibpanic", "iberror"]).any())
    )
    return ParseResult(
        tables={"inventory": inventory, "events": events, "comms": comms},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        partial=partial,
        node=hosts[0] if len(hosts) == 1 and f.get_column("host").n_unique() == 1 else None,
    )


