# ruff: noqa: E501  (verbatim)
"""meg12's references: the `parsers.step_log` code it changed, verbatim from the commit before (3cdd8b4):
`_events`, whose straggler-detector reports read their fourteen items with one regex each (a compile each per
chunk). The helpers it calls are the module's own (unchanged)."""

from __future__ import annotations

import polars as pl

from parsers import _step_grammars as g
from parsers.step_log import _NVRX_OTHER_GATES, _f, _json_col, _match, _num, _rx


def _events(
    seg: pl.DataFrame, nv: pl.DataFrame, node: pl.Expr, path: pl.Expr, present: frozenset[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Straggler-detector reports → events; returns (events, lines understood). `node`, `path`: the `node`
    and `file` of an event (the line's host or the file's node, the file's path)."""
    txt = pl.col("text")
    frames: list[pl.DataFrame] = []
    seen: list[pl.DataFrame] = []

    def ev(df: pl.DataFrame, **cols: pl.Expr) -> pl.DataFrame:
        base = {
            "ts": pl.col("ts"),
            "ts_quality": pl.col("ts_quality").fill_null("none"),
            "node": node,
            "source": pl.lit("straggler-detector"),
            "kind": pl.lit("straggler_report"),
            "severity": pl.lit("info"),
            "message": pl.col("raw"),
            "file": path,
            "line": pl.col("line"),
        }
        return df.select(**(base | cols))

    # (the regex on the lines with its literal `/Rnk: ` alone: one literal scan of the rest)
    assert g.STRAGGLER_LINE_RE.endswith("/Rnk: ")
    m = seg.filter(txt.str.contains("/Rnk: ", literal=True)) if "/Rnk: " in present else seg.clear()
    m = m.filter(txt.str.contains(_rx(g.STRAGGLER_LINE_RE)))
    if m.height:
        seen.append(m.select("line"))
        items = {}
        for stat in ("Mn", "Mx"):
            for metric in g.STRAGGLER_METRICS:
                pat = g.STRAGGLER_ITEM_RE.format(metric=stat + metric, num=g.NUM)
                x = txt.str.extract_groups(_rx(pat))
                items[stat + metric] = pl.struct(
                    value=_num(x.struct.field("v")),
                    unit=x.struct.field("unit"),
                    rank=x.struct.field("rank").cast(pl.Int32, strict=False),
                )
        # (each item's regex run once: eager selects evaluate a repeated subexpression each time it appears)
        m = m.with_columns(**{f"_item_{name}": e for name, e in items.items()})
        items = {name: pl.col(f"_item_{name}") for name in items}
        slow = pl.coalesce(items["MnEtpt"].struct.field("rank"), items["MxRtt"].struct.field("rank"))
        fast = pl.coalesce(items["MxEtpt"].struct.field("rank"), items["MnRtt"].struct.field("rank"))
        frames.append(
            ev(
                m,
                rank=slow,
                code=pl.lit("megatron"),
                detail=_json_col(m, slowest_rank=slow, fastest_rank=fast, **items),
            )
        )
    m = _match(seg, g.STRAGGLER_TOPK_RE, txt.str.contains("^^^^", literal=True), gate=("^^^^",), present=present)
    if m.height:
        seen.append(m.select("line"))
        pairs = _f("list").str.extract_all(_rx(rf"(?:{g.NUM})/\d+"))
        ranks = pairs.list.eval(pl.element().str.extract(_rx(r"/(\d+)$"), 1).cast(pl.Int32, strict=False))
        vals = pairs.list.eval(_num(pl.element().str.extract(_rx(r"^(.*)/\d+$"), 1)))
        bottom = _f("which") == "Bottom"
        frames.append(
            ev(
                m,
                rank=pl.when(bottom).then(ranks.list.first()).otherwise(ranks.list.last()),
                code=pl.lit("megatron"),
                detail=_json_col(
                    m,
                    role=pl.when(bottom).then(pl.lit("slowest")).otherwise(pl.lit("fastest")),
                    ranks=ranks,
                    etpt_tf=vals,
                ),
            )
        )
    m = _match(seg, g.COMPOSER_STRAGGLER_RE, txt.str.contains("/Rank: ", literal=True), gate=("/Rank: ",), present=present)
    if m.height:
        seen.append(m.select("line"))
        metric, stat = _f("metric"), _f("stat")
        slow_when_min = metric.is_in(["Throughput", "Clock", "Utilization", "Power"])
        role = (
            pl.when((stat == "Min") == slow_when_min)
            .then(pl.lit("slowest"))
            .otherwise(pl.lit("fastest"))
        )
        frames.append(
            ev(
                m,
                rank=_f("rank").cast(pl.Int32, strict=False),
                code=pl.lit("composer"),
                detail=_json_col(
                    m,
                    metric=metric, stat=stat, value=_num(_f("v")), unit=_f("unit"),
                    rank=_f("rank").cast(pl.Int32, strict=False), role=role,
                ),
            )
        )
    if nv.height:
        frames.append(
            ev(
                nv,
                node=pl.col("r").struct.field("node"),
                rank=pl.col("r").struct.field("rank").cast(pl.Int32, strict=False),
                kind=pl.lit("straggler_score"),
                code=pl.concat_str(pl.lit("nvrx-"), pl.col("n_kind")),
                detail=_json_col(
                    nv,
                    score=_num(pl.col("r").struct.field("score")),
                    score_kind=pl.col("n_kind"),
                    role=pl.col("role").str.to_lowercase(),
                    rank=pl.col("r").struct.field("rank").cast(pl.Int32, strict=False),
                    node=pl.col("r").struct.field("node"),
                ),
            )
        )
    m = _match(seg, g.NVRX_WARN_RE, txt.str.contains("STRAGGLER DETECTION WARNING", literal=True), gate=("STRAGGLER DETECTION WARNING",), present=present)
    if m.height:
        seen.append(m.select("line"))
        ranks = _f("ranks").str.extract_all(_rx(r"\d+")).list.eval(pl.element().cast(pl.Int32, strict=False))
        frames.append(
            ev(
                m,
                rank=ranks.list.first(),
                severity=pl.lit("medium"),
                code=pl.lit("nvrx"),
                detail=_json_col(m, what=_f("what"), ranks=ranks),
            )
        )
    m = seg.filter(txt.str.contains(_rx(g.NVRX_OTHER_RE))) if present & _NVRX_OTHER_GATES else seg.clear()
    seen.append(m.select("line"))
    events = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return events, pl.concat(seen) if seen else pl.DataFrame({"line": []}, schema={"line": pl.Int64})
