"""Row shaping shared by the kernel-log event grammar, and its multi-line records.

`_events` turns rows of the stamped frame into `events` rows (bus ids normalised, detail JSON
without nulls, boot segment for monotonic rows). The block grammars group consecutive lines with polars
window expressions: a PCIe AER report (header, `PCIe Bus Error`, `device [..] error status/mask`, one
line per status bit, TLP header, recovery) is ONE `pcie_aer` event at its first line, and its other
lines count as parsed; firmware-first APEI `{N}[Hardware Error]:` blocks and their `aer_status`
follow-ups are merged the same way; `mce: [Hardware Error]:` dumps become one `mce` event.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import polars as pl

from parsers._common import normalize_bus_id
from parsers.base import FileContext


BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
"""A full PCI address with function (AER, mlx5, SXid, lspci)."""
XID_BUS = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
"""The Xid / `NVRM: GPU at PCI:` form: function usually absent."""


# PCIe AER (FORMATS.md §2): ≲4.18 'id=XXXX', ≈4.19-5.x 'received: <bdf>', ≈6.x 'message received from <bdf>'
AER_LITERALS = ("AER", "PCIe Bus Error", "error status/mask", "TLP Header", "  [")
AER_LINE_RE = rf"^(?P<driver>[\w.-]+) (?P<bdf>{BDF}):\s+(?:AER:\s*)?(?P<rest>.*)$"
AER_CLASSES: tuple[tuple[str, str], ...] = (
    (
        "header",
        r"^(?:(?P<multi>Multiple) )?(?P<hsev>Corrected|Correctable|Uncorrected|Uncorrectable|Fatal|Non-Fatal)"
        r"(?: \((?P<hsev2>Non-Fatal|Fatal)\))? error (?:message )?received(?::| from)\s*"
        rf"(?:id=(?P<hid>[0-9a-fA-F]{{4}})|(?P<hsrc>{BDF}))?",
    ),
    (
        "buserr",
        r"^PCIe Bus Error: severity=(?P<bsev>[^,]+), type=(?P<btype>[^,]+),\s*(?:id=(?P<bid>[0-9a-fA-F]{4}))?"
        r"(?:\((?P<agent>[^)]*)\))?",
    ),
    (
        "device",
        r"^device \[(?P<vid>[0-9a-fA-F]{4}):(?P<did>[0-9a-fA-F]{4})\] error status/mask=(?P<status>[0-9a-fA-F]+)/(?P<mask>[0-9a-fA-F]+)",
    ),
    ("bit", r"^\[\s*(?P<bitno>\d+)\]\s+(?P<bit>[A-Za-z_][\w/ -]*?)\s*(?P<first>\(First\))?\s*$"),
    ("tlp", r"^TLP Header: (?P<tlp>.*)$"),
    ("status", r"^aer_status: (?P<sstatus>0x[0-9a-fA-F]+), aer_mask: (?P<smask>0x[0-9a-fA-F]+)"),
    ("layer", r"^aer_layer=(?P<layer>[^,]+), aer_agent=(?P<lagent>.*)$"),
    ("recovery", r"^(?P<recovery>device recovery (?:successful|failed)|Root Port link has been reset.*|broadcast \w+ message)"),
    ("note", r"^(?P<note>Error of this Agent is reported first|can't find device of ID\w+)"),
)
APEI_RE = r"^\{(?P<apei>\d+)\}\[Hardware Error\]:\s*(?P<rest>.*)$"
MCE_RE = r"^(?:mce: )?(?:\[Hardware Error\]: ?)(?P<rest>.*)$|^(?P<rest2>mce: .*Machine [Cc]heck.*)$"

AER_SEVERITY = {"corrected": "low", "nonfatal": "high", "fatal": "critical"}


# ----------------------------------------------------------------------------- row shaping


BLOCK_HEAD_COLS = ("line", "text", "ts", "ts_quality", "uptime_s", "host", "boot_seg", "crash_record")
"""What a multi-line block (AER report, APEI record, MCE burst) takes from its first line."""


def _block_head() -> list[pl.Expr]:
    return [pl.col(c).first() for c in BLOCK_HEAD_COLS]


def _json(fields: dict[str, pl.Expr]) -> pl.Expr:
    """JSON object of the non-null fields (null members left out to keep `detail` readable)."""
    return _strip_nulls(pl.struct(**fields).struct.json_encode())


def _strip_nulls(enc: pl.Expr) -> pl.Expr:
    """Drop `"key":null` members from `struct.json_encode` text (see `_json`)."""
    return enc.str.replace_all(r'"[^"]+":null,?', "").str.replace(r",\}$", "}")


def _node(ctx: FileContext) -> pl.Expr:
    return pl.coalesce(pl.col("host"), pl.lit(ctx.node))


def _clock_detail() -> dict[str, pl.Expr]:
    """Boot segment and crash-record flag for monotonic rows, which `forensics.timebase` reads."""
    mono = pl.col("uptime_s").is_not_null() & pl.col("ts").is_null()
    return {
        "boot_seg": pl.when(mono).then(pl.col("boot_seg")),
        "crash_record": pl.when(mono & pl.col("crash_record")).then(pl.lit(True)),
    }


def _events(
    df: pl.DataFrame,
    ctx: FileContext,
    kind: str | pl.Expr,
    code: pl.Expr,
    severity: pl.Expr,
    bus: pl.Expr,
    detail: dict[str, pl.Expr],
    key: tuple[str, ...] = (),
) -> pl.DataFrame:
    """Shape rows of the stamped frame (plus extracted columns) as `events` rows. `key`: columns of `df` whose
    values (with the row's clock fields) decide its `detail` (the caller vouches): a big frame's details are
    then made once per distinct key."""
    clock_e = _clock_detail()
    detail_e = {**detail, **clock_e}
    if key and DEDUP_STRUCTS and df.height > _DEDUP_ROWS:
        # (each row's clock fields worked out once, as columns: part of the key, then the detail's own)
        clock = {k: f"_c_{k}" for k in clock_e}
        df = df.with_columns(**{c: clock_e[k] for k, c in clock.items()})
        cols = [*key, *clock.values()]
        first = df.unique(subset=cols, keep="first")
        enc = first.select(*cols, _detail=_json({**detail, **{k: pl.col(c) for k, c in clock.items()}}))
        df = df.join(enc, on=cols, how="left", nulls_equal=True, maintain_order="left")
        detail_col = pl.col("_detail")
    elif df.height > _DEDUP_ROWS:
        # each distinct detail encoded once (XID storms repeat a few): by the struct of its fields where
        # equal structs encode alike, else by its encoding, the null-stripping regex once per distinct one
        st = df.select(_st=pl.struct(**detail_e)).to_series()
        if DEDUP_STRUCTS and _exact_keys(st.dtype):
            enc = st.unique().to_frame().with_columns(_detail=_strip_nulls(pl.col("_st").struct.json_encode()))
            df = df.with_columns(st).join(enc, on="_st", how="left", nulls_equal=True, maintain_order="left")
        else:
            df = df.with_columns(_enc=st.struct.json_encode())
            enc = df.select("_enc").unique().with_columns(_detail=_strip_nulls(pl.col("_enc")))
            df = df.join(enc, on="_enc", how="left", nulls_equal=True, maintain_order="left")
        detail_col = pl.col("_detail")
    else:
        detail_col = _json(detail_e)
    res = df.select(
        "ts",
        ts_quality=pl.col("ts_quality").fill_null("none"),
        uptime_s="uptime_s",
        node=_node(ctx),
        gpu_bus_id=bus.cast(pl.String),
        source=pl.lit("kernel"),
        kind=kind if isinstance(kind, pl.Expr) else pl.lit(kind),
        code=code.cast(pl.String),
        severity=severity,
        message=pl.col("text"),
        detail=detail_col,
        file=pl.lit(ctx.path),
        line=pl.col("line"),
    )
    return res.replace_column(4, normalized_bus(res.get_column("gpu_bus_id")))


_DEDUP_ROWS = 4096
"""Above this many rows, `_events` encodes each distinct detail once (XID storms)."""
DEDUP_STRUCTS = True
"""`_events` finds the distinct details before encoding them: by the caller's `key` columns and the clock
fields where it gives them, else by the values of the detail's fields (off: by encoding every row's detail
first, ~0.7 us a row, most of a storm's event building). A 49 MB Xid storm's parse: ~390 ms by the fields'
values, ~300 by the key."""
_EXACT = (pl.String, pl.Boolean, pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64, pl.Null)


def _exact_keys(dtype: pl.DataType) -> bool:
    """Whether two structs of `dtype` that a join or `unique` takes as equal encode alike: fields of strings,
    integers, booleans (not floats: -0.0 and 0.0, NaNs, may be taken as equal and encode apart; nothing
    nested)."""
    return isinstance(dtype, pl.Struct) and all(f.dtype in _EXACT for f in dtype.fields)

_BUS_CACHE: dict[str, str | None] = {}


def normalized_bus(raw: pl.Series) -> pl.Series:
    """`normalize_bus_id` of a column of bus ids, each distinct value computed once per process.

    (The expression costs ~0.7 ms per call whatever the row count; a file names a handful of devices.)
    """
    small = len(raw) <= 512
    rows = raw.to_list() if small else None
    vals = list({v for v in rows if v is not None}) if small else raw.drop_nulls().unique().to_list()
    if len(_BUS_CACHE) > 100_000:
        _BUS_CACHE.clear()
    todo = [v for v in vals if v not in _BUS_CACHE]
    if todo:
        done = pl.select(normalize_bus_id(pl.lit(pl.Series(todo, dtype=pl.String)))).to_series().to_list()
        _BUS_CACHE.update(zip(todo, done))
    if small:
        return pl.Series(raw.name, [None if v is None else _BUS_CACHE[v] for v in rows], dtype=pl.String)
    mapping = {v: _BUS_CACHE[v] for v in vals if _BUS_CACHE[v] is not None}
    if not mapping:
        return pl.Series(raw.name, [None] * len(raw), dtype=pl.String)
    return raw.replace_strict(mapping, default=None, return_dtype=pl.String)


def _nonempty(v: pl.Expr) -> pl.Expr:
    v = v.str.strip_chars()
    return pl.when(v != "").then(v)



# ----------------------------------------------------------------------------- multi-line blocks


def _dev_hex() -> pl.Expr:
    return pl.lit(pl.Series([f"{i:02x}" for i in range(32)]))


def _no_aer(m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    """The `events` rows of no AER block (built only when needed: a few calls)."""
    return _events(m.head(0), ctx, "pcie_aer", pl.lit(None), pl.lit("low"), pl.lit(None), {})


def _aer_blocks(m: pl.DataFrame, ctx: FileContext, apei: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """Group each PCIe AER report into one `pcie_aer` event; return (events, lines used, APEI lines merged).

    Firmware-first reports print an APEI `{N}[Hardware Error]:` PCIe block, then the kernel's
    `aer_status`/bit/`aer_layer` lines for the same error: those follow-ups are merged into the APEI
    block (one event, at the APEI block's first line).
    """
    if PY_AER_BLOCKS and apei.height == 0:
        got = _py_aer_blocks(m, ctx)
        if got is not None:
            return got
    cand = m.filter(pl.col("msg").str.contains_any(list(AER_LITERALS)) & pl.col("msg").str.contains(AER_LINE_RE))
    none = pl.Series("line", [], dtype=pl.Int64)
    if cand.height == 0:
        return _no_aer(m, ctx), cand.select("line"), none
    x = _aer_exprs()
    cand = cand.with_columns(a=pl.col("msg").str.extract_groups(AER_LINE_RE)).unnest("a")
    cand = cand.with_columns(cls=x.cls).filter(pl.col("cls").is_not_null()).sort("line")
    if cand.height == 0:
        return _no_aer(m, ctx), cand.select("line"), none
    # each class's groups on its own lines (the classes' group names are distinct): one pass for all
    cand = cand.with_columns(x.groups).unnest(*(f"_{name}" for name, _rx in AER_CLASSES))
    cand = cand.with_columns(block=x.start)
    agg = cand.group_by("block").agg(x.agg).sort("line")
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
    agg = agg.with_columns(_code=x.code, _dev=x.device)
    detail = x.detail
    severity = x.severity
    events = _py_aer_events(agg, m, ctx, severity, detail) if PY_AER_EVENTS else None
    if events is None:
        events = _events(agg, ctx, "pcie_aer", pl.col("_code"), severity, pl.col("_dev"), detail)
    return events, cand.select("line"), merged


PY_AER_BLOCKS = True
"""Group a few AER lines into blocks in Python (`_py_aer_blocks`; tests compare both)."""
_HEX2 = [f"{i:02x}" for i in range(32)]
"""`_dev_hex`'s values."""


def _py_aer_blocks(m: pl.DataFrame, ctx: FileContext) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series] | None:
    """`_aer_blocks` without APEI blocks, by Python's `re` on candidates whose messages `_py_msgs` reads as
    polars does (a few, ASCII, no newline); None otherwise. Same classes, block starts, first values per
    block, device, code, severity and detail as the polars expressions (`_aer_exprs`), the events shaped by
    `_kernel_events._py_events` as `_py_aer_events` does."""
    from parsers import _kernel_events as kev

    msgs = kev._py_msgs(m)
    if msgs is None:
        return None
    line_rx = kev._py_rx(AER_LINE_RE)
    classes = [(name, kev._py_rx(rx)) for name, rx in AER_CLASSES]
    lines = m.get_column("line").to_list()
    rows: list[tuple[int, int, str, dict[str, str | None]]] = []  # (line, index in m, class, groups)
    for i, s in enumerate(msgs):
        if s is None or not any(lit in s for lit in AER_LITERALS):
            continue
        mt = line_rx.search(s)
        if mt is None:
            continue
        rest = mt["rest"]
        for name, rx in classes:
            got = rx.search(rest)
            if got is not None:
                groups = {"driver": mt["driver"], "bdf": mt["bdf"], **got.groupdict()}
                rows.append((lines[i], i, name, groups))
                break
    none = pl.Series("line", [], dtype=pl.Int64)
    used = pl.DataFrame([pl.Series("line", sorted(r[0] for r in rows), dtype=m.schema["line"])])
    if not rows:
        return _no_aer(m, ctx), used, none
    rows.sort(key=lambda r: r[0])
    blocks: list[list[tuple[int, int, str, dict[str, str | None]]]] = []
    prev: tuple[int, int, str, dict[str, str | None]] | None = None
    for r in rows:
        cls = r[2]
        starts = cls == "header" or (cls == "buserr" and prev[2] != "header") if prev is not None else True
        if starts or r[0] - prev[0] > 12:  # type: ignore[index]
            blocks.append([])
        blocks[-1].append(r)
        prev = r
    if len(blocks) > 64:  # (as `_py_aer_events`: many blocks take the polars path)
        return None

    def coalesce(*vals: str | None) -> str | None:
        return next((v for v in vals if v is not None), None)

    heads: list[int] = []
    codes: list[str] = []
    sevs: list[str] = []
    buses: list[str | None] = []
    details: list[dict[str, object]] = []
    ports: list[str | None] = []
    for block in blocks:

        def first_of(col: str, *names: str, block: list = block) -> str | None:
            return next((g.get(col) for _l, _i, c, g in block if c in names), None)

        by_port = next((g["bdf"] for *_x, g in block if g["driver"] == "pcieport"), None)
        port = coalesce(first_of("bdf", "header"), by_port)
        header_src = first_of("hsrc", "header")
        hid = coalesce(first_of("hid", "header"), first_of("bid", "buserr"))
        err_dev = coalesce(first_of("bdf", "buserr"), first_of("bdf", "device", "bit", "status", "tlp"))
        hsev = first_of("hsev", "header")
        hsev2 = first_of("hsev2", "header")
        by_header = None if hsev is None else hsev if hsev2 is None else f"{hsev} {hsev2}"
        sev_text = coalesce(first_of("bsev", "buserr"), by_header)
        vid, did = first_of("vid", "device"), first_of("did", "device")
        bits = ",".join(str(g["bit"]).strip(kev._WS) for _l, _i, c, g in block if c == "bit")
        decoded = None
        if hid is not None:
            dom = _PY_DOMAIN.search(coalesce(port, err_dev) or "")
            devfn = int(hid[2:4], 16)
            if dom is not None and (port is not None or err_dev is not None):
                decoded = f"{dom.group(1)}:{hid[0:2]}:{_HEX2[devfn // 8]}.{devfn % 8}"
        device = coalesce(err_dev, header_src, decoded, port)
        sev = None if sev_text is None else sev_text.lower()
        if sev is None:
            code = "unknown"
        elif "non-fatal" in sev or "nonfatal" in sev:
            code = "nonfatal"
        elif "fatal" in sev:
            code = "fatal"
        elif "uncorrect" in sev or "recoverable" in sev:
            code = "nonfatal"
        elif "correct" in sev:
            code = "corrected"
        else:
            code = "unknown"
        heads.append(block[0][1])
        codes.append(code)
        sevs.append(AER_SEVERITY.get(code, "medium"))
        buses.append(device)
        ports.append(port)
        details.append(
            {
                "reporting_port": None,
                "severity_text": sev_text,
                "type": first_of("btype", "buserr"),
                "agent": coalesce(first_of("agent", "buserr"), first_of("lagent", "layer")),
                "layer": first_of("layer", "layer"),
                "vendor_device": None if vid is None or did is None else f"{vid}:{did}",
                "status": coalesce(first_of("status", "device"), first_of("sstatus", "status")),
                "mask": coalesce(first_of("mask", "device"), first_of("smask", "status")),
                "bits": bits or None,
                "first_bit": next((g["bit"] for *_x, c, g in block if c == "bit" and g["first"]), None),
                "tlp_header": first_of("tlp", "tlp"),
                "recovery": first_of("recovery", "recovery"),
                "multiple": True if any(g["multi"] for *_x, c, g in block if c == "header") else None,
                "firmware_first": None,
                "lines": len(block),
            }
        )
    for detail, bus in zip(details, normalized_bus(pl.Series(ports, dtype=pl.String)).to_list(), strict=True):
        detail["reporting_port"] = bus
    sub = m.select(BLOCK_HEAD_COLS)[heads]
    return kev._py_events(sub, ctx, "pcie_aer", codes, sevs, buses, details), used, none


_PY_DOMAIN = re.compile(r"^([0-9a-fA-F]{4,8}):", re.ASCII)


class _AerExprs(NamedTuple):
    """The expressions `_aer_blocks` evaluates, built once: building them took ~1 ms a call."""

    cls: pl.Expr
    groups: list[pl.Expr]
    start: pl.Expr
    agg: list[pl.Expr]
    code: pl.Expr
    device: pl.Expr
    detail: dict[str, pl.Expr]
    severity: pl.Expr


@functools.cache
def _aer_exprs() -> _AerExprs:
    """`_AerExprs` (what `_aer_blocks` built on each call before round 10, unchanged)."""
    cls = pl.lit(None, dtype=pl.String)
    for name, rx in reversed(AER_CLASSES):
        cls = pl.when(pl.col("rest").str.contains(rx)).then(pl.lit(name)).otherwise(cls)
    groups = [
        pl.when(pl.col("cls") == name).then(pl.col("rest").str.extract_groups(rx)).alias(f"_{name}")
        for name, rx in AER_CLASSES
    ]
    prev_cls = pl.col("cls").shift(1)
    gap = pl.col("line") - pl.col("line").shift(1)
    start = (
        (pl.col("cls") == "header")
        | ((pl.col("cls") == "buserr") & (prev_cls != "header"))
        | (gap > 12)
        | prev_cls.is_null()
    )

    def first_of(col: str, cls_name: str | tuple[str, ...]) -> pl.Expr:
        names = [cls_name] if isinstance(cls_name, str) else list(cls_name)
        return pl.col(col).filter(pl.col("cls").is_in(names)).first()

    named = dict(  # noqa: C408 - (as the keywords of `agg` they were)
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
    )
    agg = [*_block_head(), *(e.alias(k) for k, e in named.items())]
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
    return _AerExprs(cls, groups, start.fill_null(True).cum_sum(), agg, code, device, detail, severity)


_REPORTING_PORT = normalize_bus_id(pl.col("port"))
"""The reporting port's PCI address (the expression built once: it is dozens of nodes)."""
PY_AER_EVENTS = True
"""Shape a few AER blocks' events in Python (`_py_aer_events`; tests compare both)."""


def _py_aer_events(
    agg: pl.DataFrame, m: pl.DataFrame, ctx: FileContext, severity: pl.Expr, detail: dict[str, pl.Expr]
) -> pl.DataFrame | None:
    """`_events` of the AER blocks `agg` by `_kernel_events._py_events`: their code, severity, device and
    detail values in one select, the JSON in Python. None unless the blocks are few and every message of
    `m` (where all their values come from) is ASCII without a newline, where `_py_json` writes what
    `struct.json_encode` writes."""
    from parsers import _kernel_events as kev

    if agg.height > 64 or kev._py_msgs(m) is None:
        return None
    # (the reporting port normalised by `normalized_bus`: the expression's fixed cost is most of the work)
    exprs = {k: pl.col("port") if e is _REPORTING_PORT else e for k, e in detail.items()}
    vals = agg.select(_code="_code", _sev=severity, _dev=pl.col("_dev").cast(pl.String), **exprs)
    if "reporting_port" in vals.columns:
        vals = vals.with_columns(normalized_bus(vals.get_column("reporting_port")))
    codes = vals.get_column("_code").to_list()
    sevs = vals.get_column("_sev").to_list()
    buses = vals.get_column("_dev").to_list()
    details = vals.drop("_code", "_sev", "_dev").to_dicts()
    return kev._py_events(agg, ctx, "pcie_aer", codes, sevs, buses, details)


def _apei_agg(m: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Group firmware-first `{N}[Hardware Error]:` reports into one row per block; return (blocks, lines used)."""
    cand = m.filter(pl.col("msg").str.contains("[Hardware Error]", literal=True) & pl.col("msg").str.contains(APEI_RE))
    if cand.height == 0:
        return cand.select(
            "line", "text", "ts", "ts_quality", "uptime_s", "host", "boot_seg", "crash_record",
            section=pl.lit(None, dtype=pl.String), event_severity=pl.lit(None, dtype=pl.String),
            device=pl.lit(None, dtype=pl.String), source=pl.lit(None, dtype=pl.String), n_lines=pl.lit(0, dtype=pl.UInt32),
        ), cand.select("line")
    cand = cand.with_columns(a=pl.col("msg").str.extract_groups(APEI_RE)).unnest("a").sort("line")
    start = (
        pl.col("rest").str.contains("Hardware error from APEI", literal=True)
        | (pl.col("apei") != pl.col("apei").shift(1))
        | ((pl.col("line") - pl.col("line").shift(1)) > 12)
    )
    cand = cand.with_columns(block=start.fill_null(True).cum_sum())
    agg = cand.group_by("block").agg(
        *_block_head(),
        section=pl.col("rest").str.extract(r"section_type: (.*)$", 1).drop_nulls().first(),
        event_severity=pl.col("rest").str.extract(r"event severity: (\w+)", 1).drop_nulls().first(),
        device=pl.col("rest").str.extract(rf"device_id: ({BDF})", 1).drop_nulls().first(),
        source=pl.col("rest").str.extract(r"Generic Hardware Error Source: (\d+)", 1).drop_nulls().first(),
        n_lines=pl.len(),
    ).sort("line").drop("block")
    return agg, cand.select("line")


def _apei_events(agg: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    """APEI blocks as events: PCIe sections -> pcie_aer, memory -> edac, else mce."""
    section = pl.col("section").str.to_lowercase()
    kind = pl.when(section.str.contains("pcie")).then(pl.lit("pcie_aer")).when(section.str.contains("memory")).then(pl.lit("edac")).otherwise(pl.lit("mce"))
    es = pl.col("event_severity").str.to_lowercase()
    code = (
        pl.when(section.str.contains("pcie"))
        .then(pl.when(es == "corrected").then(pl.lit("corrected")).when(es == "fatal").then(pl.lit("fatal")).otherwise(pl.lit("nonfatal")))
        .otherwise(es)
    )
    severity = pl.when(es == "corrected").then(pl.lit("low")).when(es == "fatal").then(pl.lit("critical")).when(es == "info").then(pl.lit("info")).otherwise(pl.lit("high"))
    detail = {
        "firmware_first": pl.lit(True),
        "section_type": pl.col("section"),
        "event_severity": pl.col("event_severity"),
        "error_source": pl.col("source"),
        "lines": pl.col("n_lines"),
    }
    return _events(agg, ctx, kind, code, severity, pl.col("device"), detail)


def _mce_blocks(m: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    """`mce: [Hardware Error]: ...` dumps (CPU/bank/status/address lines) -> one `mce` event each."""
    cand = m.filter(pl.col("msg").str.contains_any(["Hardware Error", "Machine check", "Machine Check"]) & pl.col("msg").str.contains(MCE_RE))
    if cand.height == 0:
        return _events(cand, ctx, "mce", pl.lit(None), pl.lit("high"), pl.lit(None), {})
    rest = pl.coalesce(pl.col("msg").str.extract(MCE_RE, 1), pl.col("msg").str.extract(MCE_RE, 2))
    cand = cand.with_columns(rest=rest).sort("line")
    start = pl.col("rest").str.contains(r"Machine check events logged|CPU \d+: Machine Check|Machine Check Exception") | (
        (pl.col("line") - pl.col("line").shift(1)) > 3
    )
    cand = cand.with_columns(block=start.fill_null(True).cum_sum())
    agg = cand.group_by("block").agg(
        *_block_head(),
        cpu=pl.col("rest").str.extract(r"CPU:? ?(\d+)", 1).drop_nulls().first(),
        bank=pl.col("rest").str.extract(r"Bank (\d+)", 1).drop_nulls().first(),
        status=pl.col("rest").str.extract(r"Bank \d+: ([0-9a-fA-F]+)", 1).drop_nulls().first(),
        address=pl.col("rest").str.extract(r"ADDR ([0-9a-fA-Fx]+)", 1).drop_nulls().first(),
        logged=pl.col("rest").str.contains("events logged", literal=True).any(),
        fatal=pl.col("rest").str.contains(r"(?i)uncorrected|fatal|panic|\bUC\b").any(),
        text_all=pl.col("rest").str.join(" | "),
        n_lines=pl.len(),
    ).sort("line")
    code = pl.when(pl.col("logged") & ~pl.col("fatal")).then(pl.lit("logged")).otherwise(pl.lit("machine_check"))
    severity = pl.when(pl.col("fatal")).then(pl.lit("critical")).when(pl.col("logged")).then(pl.lit("medium")).otherwise(pl.lit("high"))
    detail = {
        "cpu": pl.col("cpu"),
        "bank": pl.col("bank"),
        "status": pl.col("status"),
        "address": pl.col("address"),
        "text": pl.col("text_all"),
        "lines": pl.col("n_lines"),
    }
    return _events(agg, ctx, "mce", code, severity, pl.lit(None, dtype=pl.String), detail)
