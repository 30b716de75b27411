# ruff: noqa: E501 - (verbatim)
"""Functions before round 10, verbatim: the references `test_kern10` compares the new ones with.

`parsers._kernel_blocks._aer_blocks` (it built its expressions on each call; `_aer_exprs` now builds them
once), `parsers.kernel_log._boot_segments_by_host` (`Linux version ` by a slice, now `starts_with`),
`parsers._kernel_events._k8b_boot` (filtered every column, now the few it reads)."""

from __future__ import annotations

import polars as pl

from parsers._kernel_blocks import (
    _REPORTING_PORT,
    AER_CLASSES,
    AER_LINE_RE,
    AER_LITERALS,
    AER_SEVERITY,
    PY_AER_EVENTS,
    _block_head,
    _dev_hex,
    _events,
    _no_aer,
    _node,
    _py_aer_events,
)
from parsers.base import FileContext


def ref_aer_blocks(
    m: pl.DataFrame, ctx: FileContext, apei: pl.DataFrame, py_events: bool = PY_AER_EVENTS
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """Group each PCIe AER report into one `pcie_aer` event; return (events, lines used, APEI lines merged).

    Firmware-first reports print an APEI `{N}[Hardware Error]:` PCIe block, then the kernel's
    `aer_status`/bit/`aer_layer` lines for the same error: those follow-ups are merged into the APEI
    block (one event, at the APEI block's first line).
    """
    cand = m.filter(pl.col("msg").str.contains_any(list(AER_LITERALS)) & pl.col("msg").str.contains(AER_LINE_RE))
    none = pl.Series("line", [], dtype=pl.Int64)
    if cand.height == 0:
        return _no_aer(m, ctx), cand.select("line"), none
    cand = cand.with_columns(a=pl.col("msg").str.extract_groups(AER_LINE_RE)).unnest("a")
    cls = pl.lit(None, dtype=pl.String)
    for name, rx in reversed(AER_CLASSES):
        cls = pl.when(pl.col("rest").str.contains(rx)).then(pl.lit(name)).otherwise(cls)
    cand = cand.with_columns(cls=cls).filter(pl.col("cls").is_not_null()).sort("line")
    if cand.height == 0:
        return _no_aer(m, ctx), cand.select("line"), none
    # each class's groups on its own lines (the classes' group names are distinct): one pass for all
    cand = cand.with_columns(
        pl.when(pl.col("cls") == name).then(pl.col("rest").str.extract_groups(rx)).alias(f"_{name}")
        for name, rx in AER_CLASSES
    ).unnest(*(f"_{name}" for name, _rx in AER_CLASSES))
    prev_cls = pl.col("cls").shift(1)
    gap = pl.col("line") - pl.col("line").shift(1)
    start = (
        (pl.col("cls") == "header")
        | ((pl.col("cls") == "buserr") & (prev_cls != "header"))
        | (gap > 12)
        | prev_cls.is_null()
    )
    cand = cand.with_columns(block=start.fill_null(True).cum_sum())

    def first_of(col: str, cls_name: str | tuple[str, ...]) -> pl.Expr:
        names = [cls_name] if isinstance(cls_name, str) else list(cls_name)
        return pl.col(col).filter(pl.col("cls").is_in(names)).first()

    agg = cand.group_by("block").agg(
        *_block_head(),
        port=pl.coalesce(first_of("bdf", "header"), pl.col("bdf").filter(pl.col("driver") == "pcieport").first()),
        header_src=first_of("hsrc", "header"),
        hid=pl.coalesce(first_of("hid", "header"), first_of("bid", "buserr")),
        err_dev=pl.coalesce(first_of("bdf", "buserr"), first_of("bdf", ("device", "bit", "status", "tlp"))),
        sev_text=pl.coalesce(
            first_of("bsev", "buserr"),
            pl.when(first_of("hsev", "header").is_not_null()).then(
                pl.concat_str([first_of("hsev", "header"), first_of("hsev2", "header")], separator=" ", ignore_nulls=True)
            ),
        ),
        err_type=first_of("btype", "buserr"),
        agent=pl.coalesce(first_of("agent", "buserr"), first_of("lagent", "layer")),
        layer=first_of("layer", "layer"),
        vendor_device=pl.concat_str([first_of("vid", "device"), first_of("did", "device")], separator=":"),
        status=pl.coalesce(first_of("status", "device"), first_of("sstatus", "status")),
        mask=pl.coalesce(first_of("mask", "device"), first_of("smask", "status")),
        bits=pl.col("bit").filter(pl.col("cls") == "bit").str.strip_chars().str.join(","),
        first_bit=pl.col("bit").filter((pl.col("cls") == "bit") & pl.col("first").is_not_null()).first(),
        tlp=first_of("tlp", "tlp"),
        recovery=first_of("recovery", "recovery"),
        multiple=(pl.col("multi").filter(pl.col("cls") == "header").is_not_null()).any(),
        n_lines=pl.len(),
        primary=pl.col("cls").is_in(["header", "buserr"]).any(),
    ).sort("line")
    agg = agg.with_columns(firmware_first=pl.lit(None, dtype=pl.Boolean))
    merged = none
    pcie_apei = apei.filter(pl.col("section").str.to_lowercase().str.contains("pcie")) if apei.height else apei
    if pcie_apei.height and agg.filter(~pl.col("primary")).height:
        a = pcie_apei.select(
            pl.col("line").alias("a_line"),
            pl.col("line"),
            a_text="text",
            a_ts="ts",
            a_q="ts_quality",
            a_up="uptime_s",
            a_host="host",
            a_seg="boot_seg",
            a_crash="crash_record",
            a_sev="event_severity",
            a_dev="device",
        ).sort("line")
        follow = agg.filter(~pl.col("primary")).sort("line").join_asof(a, on="line", strategy="backward", tolerance=40)
        hit = pl.col("a_line").is_not_null()
        follow = follow.with_columns(
            line=pl.when(hit).then("a_line").otherwise("line"),
            text=pl.when(hit).then("a_text").otherwise("text"),
            ts=pl.when(hit).then("a_ts").otherwise("ts"),
            ts_quality=pl.when(hit).then("a_q").otherwise("ts_quality"),
            uptime_s=pl.when(hit).then("a_up").otherwise("uptime_s"),
            host=pl.when(hit).then("a_host").otherwise("host"),
            boot_seg=pl.when(hit).then("a_seg").otherwise("boot_seg"),
            crash_record=pl.when(hit).then("a_crash").otherwise("crash_record"),
            sev_text=pl.when(hit).then("a_sev").otherwise("sev_text"),
            err_dev=pl.coalesce("err_dev", "a_dev"),
            firmware_first=pl.when(hit).then(pl.lit(True)),
        )
        merged = follow.get_column("a_line").drop_nulls()
        agg = pl.concat([agg.filter(pl.col("primary")), follow.select(agg.columns)]).sort("line")
    # ≲4.18 'id=00e0' = bus << 8 | devfn, in the reporting port's domain
    devfn = pl.col("hid").str.slice(2, 2).str.to_integer(base=16, strict=False)
    # (concat_str, not pl.format, which panics in polars 2.1 on some inputs: see `_kernel_events._inventory`)
    decoded = pl.concat_str(
        [
            pl.coalesce(pl.col("port"), pl.col("err_dev")).str.extract(r"^([0-9a-fA-F]{4,8}):", 1),
            pl.lit(":"),
            pl.col("hid").str.slice(0, 2),
            pl.lit(":"),
            _dev_hex().get(devfn // 8),
            pl.lit("."),
            (devfn % 8).cast(pl.String),
        ]
    )
    device = pl.coalesce(pl.col("err_dev"), pl.col("header_src"), pl.when(pl.col("hid").is_not_null()).then(decoded), pl.col("port"))
    sev = pl.col("sev_text").str.to_lowercase()
    code = (
        pl.when(sev.str.contains("non-fatal|nonfatal"))
        .then(pl.lit("nonfatal"))
        .when(sev.str.contains("fatal"))
        .then(pl.lit("fatal"))
        .when(sev.str.contains("uncorrect|recoverable"))
        .then(pl.lit("nonfatal"))
        .when(sev.str.contains("correct"))
        .then(pl.lit("corrected"))
        .otherwise(pl.lit("unknown"))
    )
    agg = agg.with_columns(_code=code, _dev=device)
    detail = {
        "reporting_port": _REPORTING_PORT,
        "severity_text": pl.col("sev_text"),
        "type": pl.col("err_type"),
        "agent": pl.col("agent"),
        "layer": pl.col("layer"),
        "vendor_device": pl.col("vendor_device"),
        "status": pl.col("status"),
        "mask": pl.col("mask"),
        "bits": pl.when(pl.col("bits") != "").then(pl.col("bits")),
        "first_bit": pl.col("first_bit"),
        "tlp_header": pl.col("tlp"),
        "recovery": pl.col("recovery"),
        "multiple": pl.when(pl.col("multiple")).then(pl.lit(True)),
        "firmware_first": pl.col("firmware_first"),
        "lines": pl.col("n_lines"),
    }
    severity = pl.col("_code").replace_strict(AER_SEVERITY, default="medium", return_dtype=pl.String)
    events = _py_aer_events(agg, m, ctx, severity, detail) if py_events else None
    if events is None:
        events = _events(agg, ctx, "pcie_aer", pl.col("_code"), severity, pl.col("_dev"), detail)
    return events, cand.select("line"), merged


def ref_boot_segments_by_host(out: pl.DataFrame) -> pl.Series:
    """`_boot_segments().over("host")` on the lines that carry a monotonic time, null on the others.

    Only those lines' segment is ever read (events and boot-time rows of monotonic lines), and the others
    cannot start a boot except at 'Linux version', so the window runs on the monotonic and 'Linux
    version' lines only (in a day of multi-host syslog, a fraction of the lines). A 'Linux version'
    line starts a boot unless it is its host's first line in the file, as in `_boot_segments`.
    """
    linux = out.select(pl.col("msg").str.slice(0, 14) == "Linux version ").to_series()  # (= starts_with, cheaper)
    # (no such line: the host's first occurrence is not needed, and a false `_lv` acts as its nulls did)
    lv = pl.lit(linux) & ~pl.col("host").is_first_distinct() if linux.any() else pl.lit(False)
    sub = (
        out.select("uptime_s", "host", _i=pl.int_range(pl.len(), dtype=pl.UInt32), _lv=lv)
        .filter(pl.col("uptime_s").is_not_null() | pl.col("_lv"))
    )
    up = pl.col("uptime_s")
    prev = up.forward_fill().shift(1)
    reset = (up.is_not_null() & prev.is_not_null() & (up < prev - 5.0)) | pl.col("_lv")
    k = reset.fill_null(False).cast(pl.Int32).cum_sum()
    seg = sub.select(((k.max() - k).cast(pl.Int32)).over("host")).to_series()
    return pl.repeat(None, out.height, dtype=pl.Int32, eager=True).alias("boot_seg").scatter(sub.get_column("_i"), seg)


def ref_k8b_boot(m: pl.DataFrame | pl.LazyFrame, ctx: FileContext) -> pl.DataFrame | pl.LazyFrame:
    """Inventory rows of each node's boot time from lines carrying both a wall clock and the printk
    monotonic time (K8b): the median of wall clock - uptime over the last boot's lines."""
    both = m.filter(pl.col("ts").is_not_null() & pl.col("uptime_s").is_not_null() & (pl.col("boot_seg") == 0))
    boot = both.with_columns(
        node=_node(ctx),
        boot=pl.col("ts") - pl.duration(microseconds=(pl.col("uptime_s") * 1e6).cast(pl.Int64, strict=False)),
    ).group_by("node").agg(pl.col("line").first(), pl.col("boot").median(), q=pl.col("ts_quality").first())
    return boot.select(
        "node",
        component=pl.lit("node"),
        gpu_bus_id=pl.lit(None, dtype=pl.String),
        device=pl.lit(None, dtype=pl.String),
        attribute=pl.lit("boot_time"),
        value=pl.col("boot").dt.to_string("%Y-%m-%dT%H:%M:%S%.6f+00:00"),
        source=pl.lit("kernel"),
        file=pl.lit(ctx.path),
        line="line",
    )
