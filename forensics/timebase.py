"""Clock work across a bundle: anchoring monotonic kernel times (raw dmesg, /dev/kmsg, pstore) to boot time.

Called by `forensics.ingest` once all files are parsed, with every table; returns the tables with
times filled where the bundle allows it, and notes on what was inferred.

Method (FORMATS.md §1.3 rule 4). A kernel row with `uptime_s` and no `ts` gets
`ts = boot_time + uptime_s` and `ts_quality = 'boot_anchored'` when its node's boot time is known:

1. **Line pairs.** The same kernel message appears in a raw (monotonic) file and in a wall-clock copy
   of the same node (journal, syslog, `dmesg -T`/iso): each pair gives `boot = ts - uptime_s`. Pairs are
   matched on node, kind, code, bus id and message text; repeated identical messages make wrong pairs
   too, so the estimate is the densest 2-second bin of all pair estimates (the true offset repeats, wrong
   pairings scatter), refined by the median inside it. Estimated per (node, file, boot segment).
2. **A recorded boot time**: an `inventory` row `component='node', attribute='boot_time'` (ISO 8601,
   e.g. written by the kernel-log parser from syslog lines carrying both clocks, or by a collector from
   `/proc/stat btime` / `uptime -s`). It describes the node's current boot, so it is applied only to
   the last boot segment of a file and never to crash records (pstore), which hold an earlier boot.

Local wall clocks (`dmesg -T`, syslog) are taken as UTC by the parsers. Where the same node's
messages also appear with an offset (journal short-iso, `dmesg --time-format iso`, RFC 5424), the
offset between the two copies (voted in 15-minute bins, so `dmesg -T` drift of a few minutes does not
matter) is applied to the whole local-clock file: `local_assumed_utc` rows become `zone_inferred`;
`year_inferred` rows keep their quality (the year is still inferred) but get the zone shift too.

Boot segments: within a file (per node) a new boot starts where the monotonic clock falls back by
more than 5 s, or where the parser saw `Linux version` (its `detail.boot_seg`); 0 is the last boot.
Nothing is invented: rows with no estimate keep `ts` null and `unanchored`, and a note says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

ANCHORABLE_FROM = ("exact", "zone_inferred", "local_assumed_utc", "year_inferred", "inherited")
"""Qualities of wall-clock rows usable as the other half of a line pair."""

BIN_US = 2_000_000
"""Width of the bins in which pair estimates vote (printk and journal times differ by milliseconds)."""

_DECODE = r"(?:[a-z]+\s*:\s*[a-z]+\s*: )?"
_PREFIX = (
    r"^.*? kernel: "  # syslog, journal short/iso/full, rsyslog RFC 3339
    rf"|^(?:[\w.-]+: )?{_DECODE}(?:<\d+>)?\[\s*\d+\.\d+(?: <[^>]*>)?\](?:\s?\[\s*[TC]\d+\])?\s?"  # raw dmesg
    r"|^\d+,\d+,\d+,[^;]*;"  # /dev/kmsg
    rf"|^{_DECODE}\d{{4}}-\d\d-\d\dT\S+\s(?:\[\s*[TC]\d+\]\s?)?"  # dmesg --time-format iso
    rf"|^{_DECODE}\[[^\]]+\](?:\s?\[\s*[TC]\d+\])?\s?"  # dmesg -T
    r"|^<\d+>1 \S+ \S+ \S+ \S+ \S+ (?:-|(?:\[[^\]]*\])+) ?"  # RFC 5424
)
"""Everything before the kernel message in the line shapes of `parsers.kernel_log`."""


def _body(message: pl.Expr) -> pl.Expr:
    """The kernel message of a verbatim line: prefix (and an embedded printk time) removed."""
    plain = message.str.replace(_PREFIX, "").str.replace(r"^\[\s*\d+\.\d+\]\s?", "")
    return pl.when(message.str.starts_with("{")).then(message.str.json_path_match("$.MESSAGE")).otherwise(plain)


Frame = pl.DataFrame | pl.LazyFrame
"""The events: a DataFrame, or a LazyFrame over the ingest's parts where the table is too large to hold (a
fleet-wide Xid flood: `forensics.ingest.PARENT_LAZY`). What the stages need of it is collected (the rows of
local or monotonic clocks, the rows that may pair with them); the fix is applied as joins on small frames and
expressions, so a LazyFrame stays lazy, and a DataFrame keeps its rows in their order."""

_RAW_COLUMNS = ("node", "file", "line", "kind", "code", "gpu_bus_id", "uptime_s", "message", "detail")
"""What the boot anchoring reads of the monotonic rows."""


_SAME = ["node", "kind", "code", "gpu_bus_id"]
"""What two copies of one kernel line share besides their message: a pair is looked for among rows alike so."""


def _pairable(ev: Frame, where: pl.Expr, other: pl.DataFrame) -> pl.LazyFrame:
    """The rows of `ev` that `where` selects and whose node, kind, code and GPU (`_SAME`) `other` has too: only
    those can pair with `other`'s rows, so the others are left out before any message body is made (an Xid
    flood logged with times: millions of rows)."""
    return ev.lazy().filter(where).join(other.select(_SAME).unique().lazy(), on=_SAME, how="semi", nulls_equal=True)


def _like(df: pl.DataFrame, ev: Frame) -> Frame:
    """`df` as the same kind of frame as `ev` (to join with it)."""
    return df.lazy() if isinstance(ev, pl.LazyFrame) else df


def anchor(tables: dict[str, Frame]) -> tuple[dict[str, Frame], list[str]]:
    """Fill `ts` from `uptime_s` + each node's boot time where the bundle gives one; return notes.

    The events may be a LazyFrame (`Frame`): returned lazy, with the fills joined."""
    events = tables.get("events")
    if events is None or "uptime_s" not in events.collect_schema().names():
        return tables, []
    if isinstance(events, pl.DataFrame) and events.height == 0:
        return tables, []
    notes: list[str] = []
    events, znotes = _zone_fix(events, tables.get("inventory"))
    notes.extend(znotes)
    if znotes:
        tables = {**tables, "events": events}
    mono = pl.col("ts").is_null() & pl.col("uptime_s").is_not_null()
    # (in table order: a file's rows in its lines' order, as `_segments` needs them)
    raw = events.lazy().filter(mono).select(_RAW_COLUMNS).collect()
    if raw.height == 0:
        return tables, notes
    raw = _segments(raw)
    estimates = _pair_estimates(raw, events)
    estimates = _recorded_boot(raw, tables.get("inventory"), estimates)
    ev = events
    keys = ["node", "file", "_seg"]
    # (a row without a line number cannot be told apart from the others of its file: left unanchored)
    keyed = raw.filter(pl.col("line").is_not_null()).join(estimates, on=keys, how="inner")
    if estimates.height:
        # the fill of a monotonic row is a function of its node, file and line (a line's events share its time)
        filled = keyed.select(
            "node", "file", "line",
            _ts=pl.col("_boot") + pl.duration(microseconds=(pl.col("uptime_s") * 1e6).round(0).cast(pl.Int64)),
        ).unique(subset=["node", "file", "line"], keep="first", maintain_order=True)
        ev = (
            ev.join(_like(filled, ev), on=["node", "file", "line"], how="left", maintain_order="left")
            .with_columns(
                ts_quality=pl.when(pl.col("ts").is_null() & pl.col("_ts").is_not_null())
                .then(pl.lit("boot_anchored"))
                .otherwise(pl.col("ts_quality")),
                ts=pl.coalesce(pl.col("ts"), pl.col("_ts")),
            )
            .drop("_ts")
        )
        counts = dict(((n, f, g), c) for n, f, g, c in keyed.group_by(keys).len().iter_rows())
        for node, file, seg, boot, how, n in estimates.sort(keys).iter_rows():
            notes.append(
                f"{file}: {counts.get((node, file, seg), 0)} kernel row(s) of node {node} anchored to boot time "
                f"{boot.isoformat()} ({how}, {n} evidence)"
                + (f", boot segment {seg} counted from the end" if seg else "")
            )
    left = pl.concat([
        raw.join(estimates.select(keys), on=keys, how="anti"),
        raw.filter(pl.col("line").is_null()).join(estimates.select(keys), on=keys, how="semi"),
    ])
    if left.height:
        for node, file, n in left.group_by("node", "file").len().sort("node", "file").iter_rows():
            notes.append(f"{file}: {n} kernel row(s) of node {node} left unanchored (monotonic time only; no boot time in the bundle)")
    tables = dict(tables)
    tables["events"] = ev
    return tables, notes


def _segments(raw: pl.DataFrame) -> pl.DataFrame:
    """Number the boots of each (node, file) among its monotonic rows: 0 = the last boot."""
    seg_hint = pl.col("detail").str.json_path_match("$.boot_seg").cast(pl.Int64, strict=False)
    crash = pl.col("detail").str.json_path_match("$.crash_record").fill_null("false") == "true"
    raw = raw.with_columns(_hint=seg_hint, _crash=crash)
    prev_up = pl.col("uptime_s").shift(1).over("node", "file")
    prev_hint = pl.col("_hint").shift(1).over("node", "file")
    new = ((pl.col("uptime_s") < prev_up - 5.0) | (pl.col("_hint") != prev_hint)).fill_null(False)
    raw = raw.with_columns(_k=new.cast(pl.Int64).cum_sum().over("node", "file"))
    return raw.with_columns(_seg=(pl.col("_k").max().over("node", "file") - pl.col("_k")), _body=_body(pl.col("message")))


PAIR_CAP = 20
"""At most this many rows of one repeated message per file take part in pairing (Xid storms repeat a
line thousands of times; all-pairs would be quadratic, and the first occurrences carry the evidence)."""


def _capped(df: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    """Keep the first PAIR_CAP rows of each group (in table order)."""
    return df.filter(pl.int_range(pl.len()).over(group) < PAIR_CAP)


def _empty_estimates() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "node": pl.String,
            "file": pl.String,
            "_seg": pl.Int64,
            "_boot": pl.Datetime("us", "UTC"),
            "_how": pl.String,
            "_n": pl.UInt32,
        }
    )


def _pair_estimates(raw: pl.DataFrame, ev: Frame) -> pl.DataFrame:
    """Boot time per (node, file, segment) from messages seen both with a monotonic and a wall clock."""
    walls = (
        _pairable(ev, pl.col("ts").is_not_null() & pl.col("ts_quality").is_in(ANCHORABLE_FROM), raw)
        .select(
            *_SAME,
            w_ts="ts",
            w_file="file",
            _body=_body(pl.col("message")),
            # NOTE: a year-inferred wall clock may still be moved by `forensics.years`: use it only when nothing better
            _prio=(pl.col("ts_quality") == "year_inferred").cast(pl.Int8),
        )
        .collect()
    )
    if walls.height == 0:
        return _empty_estimates()
    keys = [*_SAME, "_body"]
    pairs = (
        _capped(raw.select(*keys, "file", "_seg", "uptime_s"), [*keys, "file"])
        .join(_capped(walls, [*keys, "w_file"]), on=keys, how="inner", nulls_equal=True)
        .filter((pl.col("w_file") != pl.col("file")) & (pl.col("_body") != ""))
    )
    if pairs.height == 0:
        return _empty_estimates()
    pairs = pairs.with_columns(
        _b=pl.col("w_ts") - pl.duration(microseconds=(pl.col("uptime_s") * 1e6).round(0).cast(pl.Int64))
    ).with_columns(_bin=pl.col("_b").dt.epoch("us") // BIN_US)
    votes = pairs.group_by("node", "file", "_seg", "_prio", "_bin").agg(
        _n=pl.len(), _boot=pl.col("_b").sort().get(pl.len() // 2)
    )
    best = (
        votes.sort("_prio", "_n", "_bin", descending=[False, True, False])
        .group_by("node", "file", "_seg", maintain_order=True)
        .first()
    )
    return best.select("node", "file", "_seg", "_boot", _how=pl.lit("matching lines in a wall-clock log"), _n="_n")


def _recorded_boot(raw: pl.DataFrame, inventory: pl.DataFrame | None, estimates: pl.DataFrame) -> pl.DataFrame:
    """Add estimates from `inventory` boot_time rows for the last boot of non-crash-record files."""
    if inventory is None or inventory.height == 0 or "attribute" not in inventory.columns:
        return estimates
    boots = (
        inventory.filter((pl.col("component") == "node") & (pl.col("attribute") == "boot_time"))
        .with_columns(_boot=_parse_iso(pl.col("value")))
        .filter(pl.col("_boot").is_not_null())
        .group_by("node")
        .agg(pl.col("_boot").max(), _n=pl.len().cast(pl.UInt32))
    )
    if boots.height == 0:
        return estimates
    last = (
        raw.filter((pl.col("_seg") == 0) & ~pl.col("_crash"))
        .select("node", "file", "_seg")
        .unique()
        .join(estimates.select("node", "file", "_seg"), on=["node", "file", "_seg"], how="anti")
        .join(boots, on="node", how="inner")
        .select("node", "file", "_seg", "_boot", _how=pl.lit("boot_time recorded in the bundle"), _n="_n")
    )
    return pl.concat([estimates, last], how="vertical_relaxed") if last.height else estimates


ZONE_BIN_US = 900 * 1_000_000
"""Zone offsets are whole quarter hours; rounding to them absorbs `dmesg -T` drift of a few minutes."""
LOCAL = ("local_assumed_utc", "year_inferred")


def _zone_fix(ev: Frame, inventory: pl.DataFrame | None = None) -> tuple[Frame, list[str]]:
    """Shift local-clock files by the zone offset seen on offset-bearing copies of the same lines, else by
    the node's recorded zone (inventory `timezone`, e.g. from `timedatectl`)."""
    local = (
        ev.lazy()
        .filter(pl.col("ts_quality").is_in(LOCAL) & pl.col("ts").is_not_null())
        .select(*_SAME, "file", "ts", "message")
        .collect()
    )
    if local.height == 0:
        return ev, []
    ev, notes = _pair_zone_fix(ev, local)
    ev, more = _recorded_zone_fix(ev, inventory, notes)
    return ev, notes + more


def _recorded_zone_fix(ev: Frame, inventory: pl.DataFrame | None, done: list[str]) -> tuple[Frame, list[str]]:
    """Local-clock rows of nodes whose zone the bundle records, not already fixed by line pairs."""
    if inventory is None or inventory.height == 0 or "attribute" not in inventory.columns:
        return ev, []
    zones = dict(
        inventory.filter((pl.col("component") == "node") & (pl.col("attribute") == "timezone") & pl.col("value").is_not_null())
        .group_by("node")
        .agg(pl.col("value").first())
        .iter_rows()
    )
    if not zones:
        return ev, []
    node, ts, quality = pl.col("node"), pl.col("ts"), pl.col("ts_quality")
    rows = (
        node.is_in(list(zones)) & quality.is_in(LOCAL) & ts.is_not_null()
        & ~pl.col("file").is_in([d.split(": ", 1)[0] for d in done])
    )
    files = ev.lazy().filter(rows).select("node", "file").unique().collect().sort("node", "file")
    notes: list[str] = []
    by_zone: dict[str, list[str]] = {}
    for n in files.get_column("node").unique(maintain_order=True):
        zone = zones[n]
        try:  # (an unknown zone name leaves the rows as they are)
            pl.Series([datetime(2020, 1, 1)]).dt.replace_time_zone(zone)
        except Exception:  # noqa: BLE001
            notes.append(f"node {n}: zone '{zone}' not understood; local times left as UTC")
            continue
        by_zone.setdefault(zone, []).append(n)
        for file in files.filter(node == n).get_column("file"):
            notes.append(f"{file}: local times of node {n} converted from zone {zone} (recorded in the bundle)")
    if not by_zone:
        return ev, notes
    chain: Any = pl
    for zone, nodes in by_zone.items():
        local = ts.dt.replace_time_zone(None).dt.replace_time_zone(zone, ambiguous="earliest", non_existent="null")
        chain = chain.when(node.is_in(nodes)).then(pl.coalesce(local.dt.convert_time_zone("UTC"), ts))
    fixed = rows & node.is_in([n for nodes in by_zone.values() for n in nodes])
    out = ev.with_columns(
        ts=pl.when(fixed).then(chain.otherwise(ts)).otherwise(ts),
        ts_quality=pl.when(fixed & (quality == "local_assumed_utc")).then(pl.lit("zone_inferred")).otherwise(quality),
    )
    return out, notes


def _pair_zone_fix(ev: Frame, local: pl.DataFrame) -> tuple[Frame, list[str]]:
    """Zone offset of a local-clock file from lines also logged with an offset (voted in 15-minute bins)."""
    keys = [*_SAME, "_body"]
    exact = (
        _pairable(ev, (pl.col("ts_quality") == "exact") & pl.col("ts").is_not_null(), local)
        .select(*_SAME, "ts", "file", "message")
        .collect()
    )
    if exact.height == 0:
        return ev, []
    local = local.join(exact.select(_SAME).unique(), on=_SAME, how="semi", nulls_equal=True)
    exact = exact.select(
        *_SAME, e_ts="ts", e_file="file", _body=_body(pl.col("message"))
    )
    pairs = (
        _capped(local.select(*_SAME, "file", "ts", _body=_body(pl.col("message"))), [*keys, "file"])
        .join(_capped(exact, [*keys, "e_file"]), on=keys, how="inner", nulls_equal=True)
        .filter((pl.col("e_file") != pl.col("file")) & (pl.col("_body") != ""))
        .with_columns(_off=(pl.col("e_ts").dt.epoch("us") - pl.col("ts").dt.epoch("us")))
        .filter(pl.col("_off").abs() <= 14 * 3600 * 1_000_000)
        .with_columns(_bin=(pl.col("_off") / ZONE_BIN_US).round(0).cast(pl.Int64))
    )
    if pairs.height == 0:
        return ev, []
    best = (
        pairs.group_by("node", "file", "_bin")
        .agg(_n=pl.len())
        .sort("_n", "_bin", descending=[True, False])
        .group_by("node", "file", maintain_order=True)
        .first()
        .filter(pl.col("_bin") != 0)
    )
    if best.height == 0:
        return ev, []
    shift = pl.duration(microseconds=pl.col("_bin") * ZONE_BIN_US)
    is_local = pl.col("ts_quality").is_in(LOCAL) & pl.col("_bin").is_not_null()
    out = (
        ev.join(_like(best.select("node", "file", "_bin"), ev), on=["node", "file"], how="left", maintain_order="left")
        .with_columns(
            ts=pl.when(is_local).then(pl.col("ts") + shift).otherwise(pl.col("ts")),
            ts_quality=pl.when(is_local & (pl.col("ts_quality") == "local_assumed_utc"))
            .then(pl.lit("zone_inferred"))
            .otherwise(pl.col("ts_quality")),
        )
        .drop("_bin")
    )
    notes = [
        f"{file}: local times of node {node} shifted by {b * 15:+d} min (UTC offset measured on {n} line(s) also logged with an offset)"
        for node, file, b, n in best.sort("node", "file").iter_rows()
    ]
    return out, notes


def _parse_iso(v: pl.Expr) -> pl.Expr:
    """ISO 8601 with offset (or none: taken as UTC) -> UTC microseconds; null when unparseable."""
    norm = (
        v.str.strip_chars()
        .str.replace(" ", "T", literal=True)
        .str.replace(",", ".", literal=True)
        .str.replace(r"Z$", "+00:00")
        .str.replace(r"([+-]\d\d)(\d\d)$", "$1:$2")
    )
    with_off = norm.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone("UTC")
    naive = norm.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us").dt.replace_time_zone("UTC")
    return pl.coalesce(with_off, naive)
