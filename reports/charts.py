"""Chart geometry for the report: numbers in, plain dicts of coordinates out.

The SVG itself is written by the jinja macros in `templates/charts.html` (autoescaped, like the rest of
the report); this module only aggregates the tables with polars and maps values to pixels. Why not
matplotlib: a hand-drawn SVG of a few hundred elements is 10–60 kB, renders in milliseconds, stays
crisp at any zoom, carries hover titles, and needs no new dependency (matplotlib costs ~1 s of import
and ~40 MB installed).

Every chart is bounded in size whatever the fleet: series are downsampled to at most `MAX_POINTS`
points, the heatmap shows the `TOP_N` most deviating nodes plus the fleet's band, the timeline at most
`MAX_ROWS` nodes with one marker per pixel column.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from forensics.schema import WEIGHT, with_weight

MAX_POINTS = 400
TOP_N = 20
MAX_ROWS = 14
BUCKETS = 48
MISSING_FILL = "#4b5563"  # heatmap cell of a node with a silent GPU
FULL_SCALE = 0.15  # heatmap: a node 15 % off the fleet median gets the full colour
W = 1100  # chart width in px (the page is 1180 wide)
M_LEFT, M_RIGHT, M_TOP, M_BOTTOM = 64, 16, 14, 30

TELEMETRY = (
    ("sm_clock_mhz", "SM clock", "MHz"),
    ("power_w", "power", "W"),
    ("temperature_c", "temperature", "°C"),
    ("utilization_pct", "utilisation", "%"),
)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out = []
    v = start
    while v <= hi + 1e-9 * step and len(out) < 20:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    if abs(v) >= 100 or v == int(v):
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


class _Scale:
    """Linear map from a data range to a pixel range."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float) -> None:
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        self.lo, self.hi, self.p0, self.p1 = lo, hi, p0, p1

    def __call__(self, v: float) -> float:
        return round(self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0), 1)


def _tfmt(ts: datetime, span: timedelta) -> str:
    if span <= timedelta(minutes=20):
        return ts.strftime("%H:%M:%S")
    if span <= timedelta(days=2):
        return ts.strftime("%H:%M")
    return ts.strftime("%m-%d %H:%M")


def _time_ticks(t0: datetime, t1: datetime, sx: _Scale) -> list[dict[str, Any]]:
    e0, e1 = t0.timestamp(), t1.timestamp()
    span = t1 - t0
    return [
        {"x": sx(v), "label": _tfmt(datetime.fromtimestamp(v, tz=t0.tzinfo), span)}
        for v in _nice_ticks(e0, e1, 6)
        if e0 <= v <= e1
    ]


def _points(xs: list[float], ys: list[float]) -> str:
    """SVG polyline `points` attribute (numbers only)."""
    return " ".join(f"{x},{y}" for x, y in zip(xs, ys, strict=True))


def _segments(bs: list[int], vs: list[float], sx: _Scale, sy: _Scale) -> list[str]:
    """Polyline point lists, broken where buckets are missing (a lost GPU stops reporting: no line drawn)."""
    out: list[str] = []
    xs: list[float] = []
    ys: list[float] = []
    gaps = sorted(b1 - b0 for b0, b1 in zip(bs, bs[1:], strict=False))
    limit = max(2, 3 * gaps[len(gaps) // 2]) if gaps else 2  # three usual sampling intervals
    prev = None
    for b, v in zip(bs, vs, strict=True):
        if v is None:
            continue
        if prev is not None and b - prev > limit and xs:
            out.append(_points(xs, ys))
            xs, ys = [], []
        xs.append(sx(b))
        ys.append(sy(v))
        prev = b
    if xs:
        out.append(_points(xs, ys) if len(xs) > 1 else _points([xs[0] - 1.5, xs[0] + 1.5], [ys[0], ys[0]]))
    return out


def _frame(h: int, w: int = W) -> dict[str, float]:
    return {"w": w, "h": h, "x0": M_LEFT, "x1": w - M_RIGHT, "y0": M_TOP, "y1": h - M_BOTTOM}


# --------------------------------------------------------------------------------------------- steps


def step_chart(
    steps: pl.DataFrame, anomalies: pl.DataFrame, incident: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Median step time across ranks/nodes per step, the suspect node's own curve, anomalies and incident.

    incident: {"node", "ts" (datetime | None), "label"} of the top finding.
    """
    s = steps.filter(pl.col("step").is_not_null() & pl.col("step_time_s").is_not_null())
    if s.height == 0 or s.get_column("step").n_unique() < 2:
        return None
    known = s.filter(pl.col("node") != "unknown")
    per_step = (
        s.group_by("step")
        .agg(t=pl.col("step_time_s").median(), ts=pl.col("ts").min())
        .sort("step")
    )
    suspect_node = incident.get("node") if incident else None
    node_curve = None
    if suspect_node is not None and s.get_column("node").n_unique() > 1:
        node_curve = (
            s.filter(pl.col("node") == suspect_node).group_by("step").agg(t=pl.col("step_time_s").median()).sort("step")
        )
        if node_curve.height < 2:
            node_curve = None
    per_step = _downsample(per_step)
    f = _frame(230)
    smin, smax = per_step.get_column("step").min(), per_step.get_column("step").max()
    series = [per_step.get_column("t")]
    if node_curve is not None:
        node_curve = _downsample(node_curve)
        series.append(node_curve.get_column("t"))
    allv = pl.concat(series)
    lo, hi = float(allv.quantile(0.005) or 0), float(allv.quantile(0.995) or 1)
    lo = min(lo, float(per_step.get_column("t").min() or lo))
    hi = hi + (hi - lo) * 0.08 or hi + 1
    lo = 0.0  # from zero: noise stays small, a real slowdown stays visible
    sx = _Scale(float(smin), float(smax), f["x0"], f["x1"])  # type: ignore[arg-type]
    sy = _Scale(lo, hi, f["y1"], f["y0"])

    def clip(v: float) -> float:
        return sy(min(max(v, lo), hi))

    chart: dict[str, Any] = {
        "frame": f,
        "fleet": _points([sx(v) for v in per_step.get_column("step")], [clip(v) for v in per_step.get_column("t")]),
        "suspect": None,
        "suspect_label": suspect_node or "",
        "xticks": [
            {"x": sx(v), "label": _fmt(v)} for v in _nice_ticks(float(smin), float(smax), 8) if v == int(v)  # type: ignore[arg-type]
        ],
        "yticks": [{"y": sy(v), "label": _fmt(v)} for v in _nice_ticks(lo, hi, 5)],
        "spans": [],
        "marks": [],
        "n_steps": s.get_column("step").n_unique(),
        "n_nodes": known.get_column("node").n_unique(),
        "n_ranks": s.get_column("rank").n_unique() if s.get_column("rank").null_count() < s.height else 0,
    }
    if node_curve is not None:
        chart["suspect"] = _points(
            [sx(v) for v in node_curve.get_column("step")], [clip(v) for v in node_curve.get_column("t")]
        )
    a = anomalies.filter(pl.col("step_start").is_not_null()).sort("score", descending=True, nulls_last=True).head(8)
    for r in a.iter_rows(named=True):
        s0 = max(r["step_start"], smin)
        s1 = min(r["step_end"] if r["step_end"] is not None else r["step_start"], smax)
        if s1 < smin or s0 > smax:
            continue
        x0, x1 = sx(s0), sx(s1)
        chart["spans"].append(
            {
                "x": x0,
                "lx": x0 + 3 if x0 < f["x1"] - 160 else f["x1"] - 3,
                "anchor": "start" if x0 < f["x1"] - 160 else "end",
                "w": max(2.0, x1 - x0),
                "label": f"{r['kind']}" + (f" · {r['node']}" if r["node"] else ""),
                "title": f"{r['kind']} {r['metric']} steps {r['step_start']}–{r['step_end']}"
                + (f" on {r['node']}" if r["node"] else "")
                + (f": {r['value']:.3g} vs {r['baseline']:.3g}" if r["value"] is not None and r["baseline"] is not None else ""),
            }
        )
    if incident and incident.get("ts") is not None and per_step.get_column("ts").null_count() < per_step.height:
        withts = per_step.filter(pl.col("ts").is_not_null())
        after = withts.filter(pl.col("ts") >= incident["ts"])
        if withts.height and withts.get_column("ts").min() < incident["ts"]:  # type: ignore[operator]
            if after.height:
                st = after.get_column("step")[0]
                chart["marks"].append(
                    {"x": sx(st), "label": incident["label"], "title": f"{incident['label']} at step {st}"}
                )
            else:
                chart["marks"].append(
                    {"x": sx(smax), "label": incident["label"] + " (no step after it)",  # type: ignore[arg-type]
                     "title": f"{incident['label']}: no step completed after it"}
                )
    return chart


def _downsample(df: pl.DataFrame) -> pl.DataFrame:
    """At most MAX_POINTS rows (median per equal step range), keeping the first ts of each range."""
    if df.height <= MAX_POINTS:
        return df
    smin, smax = df.get_column("step").min(), df.get_column("step").max()
    width = max(1, math.ceil((smax - smin + 1) / MAX_POINTS))  # type: ignore[operator]
    cols = [pl.col("t").median()]
    if "ts" in df.columns:
        cols.append(pl.col("ts").min())
    return (
        df.with_columns(b=(pl.col("step") - smin) // width)
        .group_by("b")
        .agg(pl.col("step").min(), *cols)
        .sort("step")
        .drop("b")
    )


# ------------------------------------------------------------------------------------------- heatmap


def _diverging(dev: float, bad_high: bool) -> str:
    """Colour of a relative deviation: white at 0, red on the bad side, blue on the good side, ±FULL_SCALE full."""
    v = max(-1.0, min(1.0, dev / FULL_SCALE))
    if not bad_high:
        v = -v
    if v >= 0:
        r, g, b = 255, round(255 - 190 * v), round(255 - 200 * v)
    else:
        r, g, b = round(255 + 200 * v), round(255 + 120 * v), 255
    return f"#{r:02x}{g:02x}{b:02x}"


def _step_buckets(steps: pl.DataFrame) -> tuple[pl.DataFrame, list[str]] | None:
    s = steps.filter(pl.col("step").is_not_null() & pl.col("step_time_s").is_not_null() & (pl.col("node") != "unknown"))
    if s.height == 0 or s.get_column("node").n_unique() < 2 or s.get_column("step").n_unique() < 4:
        return None
    smin, smax = s.get_column("step").min(), s.get_column("step").max()
    width = max(1, math.ceil((smax - smin + 1) / BUCKETS))  # type: ignore[operator]
    per = (
        s.with_columns(b=((pl.col("step") - smin) // width).cast(pl.Int64))
        .group_by("node", "b")
        .agg(v=pl.col("step_time_s").median())
    )
    nb = int((smax - smin) // width) + 1  # type: ignore[operator]
    return per, [f"steps {smin + i * width}–{smin + (i + 1) * width - 1}" for i in range(nb)]  # type: ignore[operator]


def _telemetry_buckets(samples: pl.DataFrame, cols: list[str]) -> dict[str, tuple[pl.DataFrame, list[str]]]:
    """Per metric, node and time bucket: the node's worst GPU (lowest median), in one pass over the samples."""
    t = samples.filter(pl.col("ts").is_not_null() & (pl.col("node") != "unknown"))
    cols = [c for c in cols if t.get_column(c).null_count() < t.height]
    if not cols or t.height == 0 or t.get_column("node").n_unique() < 2 or t.get_column("ts").n_unique() < 4:
        return {}
    t0, t1 = t.get_column("ts").min(), t.get_column("ts").max()
    span_us = max(1, int((t1 - t0).total_seconds() * 1e6))  # type: ignore[operator]
    bw = math.ceil((span_us + 1) / BUCKETS)
    per_gpu = (
        t.select("node", "gpu_index", "ts", *cols)
        .with_columns(b=((pl.col("ts") - t0).dt.total_microseconds() // bw).cast(pl.Int64))
        .group_by("node", "gpu_index", "b")
        .agg(pl.col(c).mean() for c in cols)  # a bucket holds one or a few samples of a GPU
    )
    span = t1 - t0  # type: ignore[operator]
    nb = int(per_gpu.get_column("b").max()) + 1  # type: ignore[arg-type]
    labels = [
        _tfmt(t0 + timedelta(microseconds=i * bw), span) + "–" + _tfmt(t0 + timedelta(microseconds=(i + 1) * bw), span)  # type: ignore[operator]
        for i in range(nb)
    ]
    out = {}
    for c in cols:
        per = per_gpu.filter(pl.col(c).is_not_null()).group_by("node", "b").agg(v=pl.col(c).min(), n=pl.len())
        # GPUs silent in a bucket where the node reported more before, while most of the fleet reports fully
        per = per.with_columns(missing=pl.col("n").max().over("node") - pl.col("n"))
        full = per.group_by("b").agg(ok=(pl.col("missing") == 0).mean())
        per = (
            per.join(full, on="b")
            .with_columns(missing=pl.when(pl.col("ok") >= 0.5).then(pl.col("missing")).otherwise(0))
            .drop("ok", "n")
        )
        out[c] = (per, labels)
    return out


HEAT_METRICS = (
    ("step time", True, "steps"),
    ("SM clock (slowest GPU of the node)", False, "sm_clock_mhz"),
    ("utilisation (least busy GPU of the node)", False, "utilization_pct"),
    ("power (lowest GPU of the node)", False, "power_w"),
)


def _deviation(per: pl.DataFrame, bad_high: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Relative deviation per node and bucket; a node's score is its 90th-percentile bad-side deviation,
    or 1.0 (the top) where some of its GPUs went silent while the fleet kept reporting."""
    if "missing" not in per.columns:
        per = per.with_columns(missing=pl.lit(0, dtype=pl.UInt32))
    fleet = per.group_by("b").agg(med=pl.col("v").median())
    dev = per.join(fleet, on="b").with_columns(d=pl.col("v") / pl.col("med") - 1.0).filter(pl.col("d").is_finite())
    signed = pl.col("d") if bad_high else -pl.col("d")
    score = (
        dev.group_by("node")
        .agg(score=pl.max_horizontal(signed.quantile(0.9), pl.when((pl.col("missing") > 0).any()).then(1.0).otherwise(0.0)))
        .sort("score", "node", descending=[True, False])
    )
    return dev, score


def heatmap(steps: pl.DataFrame, samples: pl.DataFrame, suspects: list[str]) -> dict[str, Any] | None:
    """Node × time deviation from the fleet median: the TOP_N most deviating nodes and the fleet's p10/p90.

    Of step time (per-node median per step bucket) and telemetry (per-node worst GPU per time bucket: SM
    clock, utilisation, power), the metric where the most deviating node stands out most is drawn: in
    synchronous training every rank waits for the slowest, so step times alone often cannot tell nodes apart.
    """
    best = None
    tele = _telemetry_buckets(samples, [c for _, _, c in HEAT_METRICS if c != "steps"])
    for metric, bad_high, col in HEAT_METRICS:
        got = _step_buckets(steps) if col == "steps" else tele.get(col)
        if got is None:
            continue
        dev, score = _deviation(got[0], bad_high)
        if dev.height == 0:
            continue
        top_score = float(score.get_column("score").max() or 0.0)  # type: ignore[arg-type]
        # telemetry replaces step time only where a node stands out clearly (5 % or a silent GPU)
        if best is None or (top_score >= 0.05 and top_score > best[0] * 1.5 + 0.01):
            best = (top_score, metric, bad_high, dev, score, got[1])
    if best is None:
        return None
    _, metric, bad_high, dev, score, xlabel = best
    nb = len(xlabel)
    n_nodes = score.height
    top = score.head(TOP_N).get_column("node").to_list()
    for sus in suspects:
        if sus not in top and sus in set(score.get_column("node").to_list()):
            top = [*top[: TOP_N - 1], sus]
    band = dev.group_by("b").agg(p10=pl.col("d").quantile(0.1), p90=pl.col("d").quantile(0.9))
    row_h = 16
    label_w = 150
    h = M_TOP + row_h * (len(top) + 2) + 6 + M_BOTTOM
    f = _frame(h)
    f["x0"] = label_w
    cw = (f["x1"] - f["x0"]) / nb
    rows = []
    lookup = {
        (n, b): (d, m)
        for n, b, d, m in dev.filter(pl.col("node").is_in(top)).select("node", "b", "d", "missing").iter_rows()
    }
    band_rows = {b: (p10, p90) for b, p10, p90 in band.iter_rows()}
    y = float(M_TOP)
    for label, kind, getter in (
        ("fleet p90", "band", lambda b: (band_rows.get(b, (None, None))[1], 0)),
        ("fleet p10", "band", lambda b: (band_rows.get(b, (None, None))[0], 0)),
    ):
        rows.append(_hrow(label, kind, y, row_h, nb, cw, f["x0"], getter, metric, xlabel, bad_high))
        y += row_h
    y += 6
    for n in top:
        kind = "suspect" if n in suspects else "node"
        rows.append(_hrow(n, kind, y, row_h, nb, cw, f["x0"], lambda b, n=n: lookup.get((n, b), (None, 0)), metric, xlabel, bad_high))
        y += row_h
    return {
        "frame": f,
        "rows": rows,
        "metric": metric,
        "n_nodes": n_nodes,
        "shown": len(top),
        "legend": [
            {"label": f"{p if bad_high else -p:+d} %", "fill": _diverging(p / 100, True)} for p in (-15, -5, 0, 5, 15)
        ],
        "bad_high": bad_high,
        "missing_fill": MISSING_FILL,
        "has_missing": bool((dev.get_column("missing") > 0).any()),
        "xticks": [{"x": round(f["x0"] + (i + 0.5) * cw, 1), "label": xlabel[i]} for i in range(0, nb, max(1, nb // 6))],
    }


def _hrow(label, kind, y, h, nb, cw, x0, getter, metric, xlabel, bad_high) -> dict[str, Any]:  # noqa: ANN001
    cells = []
    for b in range(nb):
        d, missing = getter(b)
        if d is None:
            continue
        where = f"{label} · {xlabel[b] if b < len(xlabel) else b}"
        cells.append(
            {
                "x": round(x0 + b * cw, 1),
                "w": round(cw + 0.3, 1),
                "fill": MISSING_FILL if missing else (_diverging(d, True) if bad_high else _diverging(-d, True)),
                "title": f"{where}: {missing} GPU(s) silent while the fleet reports"
                if missing
                else f"{where}: {d * 100:+.1f} %",
            }
        )
    return {"label": label, "kind": kind, "y": y, "h": h - 1, "cells": cells}


# ------------------------------------------------------------------------------------------ timeline

CAUSE_KINDS = {"xid", "sxid", "gpu_fallen_off_bus", "ecc_uncorrectable", "row_remap_failure", "pcie_aer", "nic_link",
               "ib_port_down", "thermal", "dcgm_diag", "nvlink"}
CONSEQUENCE_KINDS = {"nccl_warn", "nccl_ib_error", "nccl_timeout", "watchdog_timeout", "nccl_error", "torch_error",
                     "hung_task"}


def timeline(events: pl.DataFrame, findings: list[dict[str, Any]], window: timedelta = timedelta(hours=1)) -> dict[str, Any] | None:
    """Events per node around the top finding (±window), cause marked, lines to each node's first consequence."""
    ev = with_weight(events).filter(
        pl.col("ts").is_not_null() & ~pl.col("kind").is_in(["nccl_info"]) & (pl.col("node") != "unknown")
    )
    if ev.height == 0:
        return None
    top = next((f for f in findings if f.get("first_seen")), None)
    if top is not None:
        center = datetime.fromisoformat(top["first_seen"].replace("Z", "+00:00"))
        t0, t1 = center - window / 4, center + window
    else:
        center = None
        t0, t1 = ev.get_column("ts").quantile(0.01), ev.get_column("ts").max()  # type: ignore[assignment]
        t0 = ev.get_column("ts").min() if t0 is None else ev.filter(pl.col("ts") >= t0).get_column("ts").min()  # type: ignore[assignment]
    win = ev.filter((pl.col("ts") >= t0) & (pl.col("ts") <= t1))
    if win.height == 0:
        return None
    lo, hi = win.get_column("ts").min(), win.get_column("ts").max()
    if center is not None:
        lo, hi = min(lo, center), max(hi, center)  # type: ignore[type-var]
    pad = max((hi - lo) * 0.04, timedelta(seconds=5))  # type: ignore[operator]
    t0, t1 = lo - pad, hi + pad  # type: ignore[operator]
    finding_nodes = [f["node"] for f in findings if f.get("node") and f["severity"] in ("critical", "high", "medium")]
    evidence = {
        f"{e.get('file')}:{e.get('line')}"
        for f in findings
        if f["severity"] in ("critical", "high", "medium")
        for e in f.get("evidence") or []
    }
    order = list(dict.fromkeys(finding_nodes))
    busiest = (
        win.group_by("node").agg(n=pl.col(WEIGHT).sum(), first=pl.col("ts").min()).sort("first", "n", descending=[False, True])
    )
    for n in busiest.get_column("node"):
        if n not in order:
            order.append(n)
    rows = order[:MAX_ROWS]
    hidden = len(order) - len(rows)
    row_h = 22
    label_w = 150
    f = _frame(M_TOP + row_h * len(rows) + M_BOTTOM + 4)
    f["x0"] = label_w
    sx = _Scale(t0.timestamp(), t1.timestamp(), f["x0"], f["x1"])  # type: ignore[union-attr]
    ypos = {n: M_TOP + row_h * i + row_h / 2 for i, n in enumerate(rows)}
    marks = []
    w = (
        win.filter(pl.col("node").is_in(rows))
        .with_columns(
            x=((pl.col("ts").dt.epoch("us") / 1e6 - sx.lo) / (sx.hi - sx.lo) * (sx.p1 - sx.p0) + sx.p0).round(0),
            role=pl.when(
                pl.col("kind").is_in(list(CAUSE_KINDS))
                | pl.col("kind").str.starts_with("gpu_")
                | pl.concat_str("file", pl.col("line").cast(pl.String), separator=":").is_in(list(evidence))
            ).then(pl.lit("cause"))
            .when(pl.col("kind").is_in(list(CONSEQUENCE_KINDS))).then(pl.lit("consequence"))
            .otherwise(pl.lit("other")),
        )
        .sort("ts", "file", "line")
    )
    counts = w.group_by("node", "x", "role").agg(n=pl.col(WEIGHT).sum())
    firsts = w.unique(subset=["node", "x", "role"], keep="first", maintain_order=True).join(
        counts, on=["node", "x", "role"]
    )
    for r in firsts.iter_rows(named=True):
        marks.append(
            {
                "x": r["x"],
                "y": ypos[r["node"]],
                "role": r["role"],
                "title": f"{r['ts'].isoformat().replace('+00:00', 'Z')} {r['node']} {r['kind']}"
                + (f" {r['code']}" if r["code"] else "")
                + (f" (+{r['n'] - 1} more here)" if r["n"] > 1 else "")
                + f" — {r['message'][:200]}",
            }
        )
    links = []
    cause = None
    if top is not None and center is not None and top.get("node") in ypos:
        cause = {"x": sx(center.timestamp()), "y": ypos[top["node"]], "label": f"{top['id']} cause"}
        firstc = (
            w.filter((pl.col("role") == "consequence") & (pl.col("ts") >= center))
            .group_by("node")
            .agg(pl.col("x").min())
        )
        for n, x in firstc.iter_rows():
            links.append({"x": x, "y": ypos[n]})
    return {
        "frame": f,
        "rows": [{"label": n, "y": ypos[n], "suspect": n in finding_nodes} for n in rows],
        "marks": marks,
        "cause": cause,
        "links": links,
        "hidden": hidden,
        "outside": ev.get_column(WEIGHT).sum() - win.get_column(WEIGHT).sum(),
        "xticks": _time_ticks(t0, t1, sx),  # type: ignore[arg-type]
        "t0": t0.isoformat().replace("+00:00", "Z"),  # type: ignore[union-attr]
        "t1": t1.isoformat().replace("+00:00", "Z"),  # type: ignore[union-attr]
    }


# ----------------------------------------------------------------------------------------- telemetry


def telemetry(samples: pl.DataFrame, node: str, gpu_index: int | None) -> dict[str, Any] | None:
    """Per-metric small charts of one GPU (or the node's GPUs) against the fleet's p10–p90 band and median.

    With fewer than 3 time buckets (a single nvidia-smi snapshot) a table of values is returned instead.
    """
    if samples.height == 0:
        return None
    is_sus = pl.col("node") == node
    if gpu_index is not None:
        is_sus = is_sus & (pl.col("gpu_index") == gpu_index)
    sus = samples.filter(is_sus)
    if sus.height == 0:
        return None
    others = samples.filter(~is_sus)
    metrics = [(c, n, u) for c, n, u in TELEMETRY if sus.get_column(c).null_count() < sus.height]
    if not metrics:
        return None
    withts = samples.filter(pl.col("ts").is_not_null())
    t0, t1 = withts.get_column("ts").min(), withts.get_column("ts").max()
    label = f"{node}" + (f" GPU {gpu_index}" if gpu_index is not None else " (all GPUs)")
    if t0 is None or t1 is None or (t1 - t0) < timedelta(seconds=3) or withts.get_column("ts").n_unique() < 3:  # type: ignore[operator]
        table = []
        for c, n, u in metrics:
            o = others.get_column(c).drop_nulls()
            table.append(
                {
                    "metric": f"{n} ({u})",
                    "suspect": _fmt(float(sus.get_column(c).drop_nulls().median())),  # type: ignore[arg-type]
                    "median": _fmt(float(o.median())) if len(o) else "–",  # type: ignore[arg-type]
                    "band": f"{_fmt(float(o.quantile(0.1)))}–{_fmt(float(o.quantile(0.9)))}" if len(o) else "–",  # type: ignore[arg-type]
                }
            )
        return {"label": label, "charts": [], "table": table, "n_fleet": others.select("node", "gpu_index").n_unique()}
    span_us = max(1, int((t1 - t0).total_seconds() * 1e6))  # type: ignore[operator]
    nb = min(BUCKETS * 2, max(3, withts.get_column("ts").n_unique()))
    bw = math.ceil((span_us + 1) / nb)
    b = ((pl.col("ts") - t0).dt.total_microseconds() // bw).cast(pl.Int64)
    charts = []
    cw, chh = 540, 170
    for c, name, unit in metrics:
        fl = (
            others.filter(pl.col("ts").is_not_null() & pl.col(c).is_not_null())
            .with_columns(b=b)
            .group_by("b")
            .agg(p10=pl.col(c).quantile(0.1), p50=pl.col(c).median(), p90=pl.col(c).quantile(0.9))
            .sort("b")
        )
        su = (
            sus.filter(pl.col("ts").is_not_null() & pl.col(c).is_not_null())
            .with_columns(b=b)
            .group_by("b")
            .agg(v=pl.col(c).mean())
            .sort("b")
        )
        if su.height == 0:
            continue
        vals = pl.concat([su.get_column("v"), fl.get_column("p10"), fl.get_column("p90")]).drop_nulls()
        lo, hi = float(vals.min()), float(vals.max())  # type: ignore[arg-type]
        pad = (hi - lo) * 0.1 or max(1.0, abs(hi) * 0.05)
        lo, hi = max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad
        f = _frame(chh, cw)
        f["x0"] = 52
        sx = _Scale(0, nb - 1, f["x0"], f["x1"])
        sy = _Scale(lo, hi, f["y1"], f["y0"])
        bx = [sx(v) for v in fl.get_column("b")]
        band = ""
        if fl.height:
            band = _points(
                bx + bx[::-1],
                [sy(v) for v in fl.get_column("p90")] + [sy(v) for v in fl.get_column("p10")][::-1],
            )
        charts.append(
            {
                "frame": f,
                "title": f"{name} ({unit})",
                "band": band,
                "median": _segments(fl.get_column("b").to_list(), fl.get_column("p50").to_list(), sx, sy),
                "suspect": _segments(su.get_column("b").to_list(), su.get_column("v").to_list(), sx, sy),
                "yticks": [{"y": sy(v), "label": _fmt(v)} for v in _nice_ticks(lo, hi, 4)],
                "xticks": [
                    {"x": sx(i), "label": _tfmt(t0 + timedelta(microseconds=i * bw), t1 - t0)}  # type: ignore[operator]
                    for i in range(0, nb, max(1, nb // 4))
                ],
            }
        )
    return {"label": label, "charts": charts, "table": [], "n_fleet": others.select("node", "gpu_index").n_unique()}
