# ruff: noqa: E501, F401
"""The code nvsmi11 replaced in `parsers._nvsmi_fields` and `parsers.nvidia_smi_csv`, kept verbatim as the reference
`test_nvsmi11` compares the new code with: `transition_events` / `_transitions`, the fault events of a series of
samples (nvsmi11: one query that finds the few rows where a rule fires); `_distinct_values`, a long CSV group's
columns converted once per distinct cell (nvsmi11: each cell's place among the distinct cells by a cast to their
Enum, shared by a column's conversions, instead of a `replace_strict` per conversion)."""

from __future__ import annotations

from typing import Any

import polars as pl

from parsers._nvsmi_fields import ERROR_MARKERS, SOURCE, _MARKER_ALT, _gpu_keys, conform_table
from parsers.nvidia_smi_csv import _TAIL, _Plan, _stamps, _tail_of, _tail_places


def transition_events(samples: pl.DataFrame, ctx: Any) -> pl.DataFrame:
    """Fault events from a series of samples, one per onset (a fault that stays on is reported once).

    `samples` needs `line`, `text` (the verbatim row), `node`, `gpu_index`, `gpu_bus_id`, `ts`,
    `ts_quality` and whichever gpu_samples columns the source has; `ident` (bus id/UUID) keys GPUs.
    """
    events = _transitions(samples, pl.lit(ctx.path), None)
    if events is None:
        return conform_table(pl.DataFrame(), "events")
    return conform_table(events.sort("line"), "events")


def _transitions(samples: pl.DataFrame, file: pl.Expr, by: str | None) -> pl.DataFrame | None:
    """The events of `transition_events`, not yet sorted by line nor conformed (None: no event). `by`: the
    column numbering the files of a batch (it keys the GPUs too, and is kept in the events)."""
    cols = set(samples.columns)
    missing: dict[str, pl.DataType] = {}

    def c(name: str, dtype: pl.DataType = pl.Float64) -> pl.Expr:
        # a column the source lacks is added as nulls of its type (same values as a null literal)
        if name not in cols:
            missing.setdefault(name, dtype)
        return pl.col(name)

    key = pl.coalesce(
        c("ident", pl.String), c("gpu_bus_id", pl.String), c("gpu_index", pl.Int32).cast(pl.String), pl.lit("?")
    )

    # The previous sample of the same GPU: its row number, computed once (one window). A rule is a trigger
    # (the fault shows in this sample) and a test against the previous sample of the GPU (it did not show
    # there / the count changed); the test runs on the few triggered rows only.
    def onset(cond: pl.Expr) -> tuple[str, pl.Expr, pl.Expr | None]:
        return ("onset", cond.fill_null(False), None)

    def rising(v: pl.Expr, also: pl.Expr | None = None) -> tuple[str, pl.Expr, pl.Expr | None]:
        trig = (v > 0).fill_null(False)
        return ("rising", trig if also is None else trig & also, v)

    uv, ua = c("ecc_uncorrected_volatile", pl.Int64), c("ecc_uncorrected_aggregate", pl.Int64)
    w, wm, g, gm, util = c("pcie_width", pl.Int32), c("pcie_width_max", pl.Int32), c("pcie_gen", pl.Int32), c("pcie_gen_max", pl.Int32), c("utilization_pct")
    thermal, brake, hw = c("throttle_hw_thermal_slowdown", pl.Boolean), c("throttle_hw_power_brake_slowdown", pl.Boolean), c("throttle_hw_slowdown", pl.Boolean)
    ps = c("_pstate", pl.String).str.strip_chars()
    busy = ps.is_null() | ps.is_in(["P0", "", "N/A", "[N/A]"])
    # Error markers are rare: the extraction runs only when some row holds one (else no row does: null).
    # (`contains_any`: the markers are literals; twice as fast as their regex alternation)
    texts = samples.get_column("text")
    has_marker = bool(samples.height and texts.str.contains_any(list(ERROR_MARKERS)).any())
    if has_marker:
        marker = pl.col("text").str.extract("(" + _MARKER_ALT + ")", 1)
    else:
        marker = pl.repeat(None, pl.len(), dtype=pl.String)
    rules: list[tuple[str, tuple[str, pl.Expr, pl.Expr | None], pl.Expr, str, pl.Expr]] = [
        ("ecc_uncorrectable", rising(uv), pl.lit("volatile"), "high", pl.struct(volatile=uv, aggregate=ua)),
        ("ecc_uncorrectable", rising(ua, uv.fill_null(0) == 0), pl.lit("aggregate"), "medium",
         pl.struct(aggregate=ua)),
        ("row_remap_failure", onset(c("remap_failure", pl.Boolean)), pl.lit(None, dtype=pl.String), "high", pl.struct(uncorrectable_rows=c("remapped_rows_uncorrectable", pl.Int64))),
        ("row_remap_pending", onset(c("remap_pending", pl.Boolean)), pl.lit(None, dtype=pl.String), "medium", pl.struct(uncorrectable_rows=c("remapped_rows_uncorrectable", pl.Int64))),
        ("retired_pages_pending", onset(c("retired_pages_pending", pl.Boolean)), pl.lit(None, dtype=pl.String), "medium", pl.struct(dbe=c("retired_pages_dbe", pl.Int64))),
        ("pcie_link_degraded", onset(w < wm), pl.lit("width"), "medium", pl.struct(width=w, width_max=wm, gen=g, gen_max=gm)),
        ("pcie_link_degraded", onset((g < gm) & (util > 0) & busy & ~(w < wm).fill_null(False)), pl.lit("gen"), "medium", pl.struct(gen=g, gen_max=gm, utilization_pct=util)),
        ("thermal", onset(thermal), pl.lit("hw_thermal_slowdown"), "high", pl.struct(temperature_c=c("temperature_c"), power_w=c("power_w"))),
        ("thermal", onset(brake), pl.lit("hw_power_brake_slowdown"), "medium", pl.struct(temperature_c=c("temperature_c"), power_w=c("power_w"))),
        ("thermal", onset(hw & ~thermal.fill_null(False) & ~brake.fill_null(False)), pl.lit("hw_slowdown"), "medium", pl.struct(temperature_c=c("temperature_c"), power_w=c("power_w"))),
        ("gpu_error", onset(marker.is_not_null()), marker, "high", pl.struct(text=pl.lit(None, dtype=pl.String))),
    ]
    # A rule whose trigger column is absent, all null, never positive or never true cannot fire: it is left
    # out (no onset computed); none left, no window either.
    n = samples.height

    def present(name: str) -> bool:
        return name in cols and samples.get_column(name).null_count() < n

    def positive(name: str) -> bool:
        if not present(name):
            return False
        s = samples.get_column(name)
        return not s.dtype.is_integer() or (s.max() or 0) > 0  # type: ignore[operator]

    def some(name: str) -> bool:
        if not present(name):
            return False
        s = samples.get_column(name)
        return s.dtype != pl.Boolean or bool(s.any())

    possible = [
        positive("ecc_uncorrected_volatile"),
        positive("ecc_uncorrected_aggregate"),
        some("remap_failure"),
        some("remap_pending"),
        some("retired_pages_pending"),
        present("pcie_width") and present("pcie_width_max"),
        present("pcie_gen") and present("pcie_gen_max") and present("utilization_pct"),
        some("throttle_hw_thermal_slowdown"),
        some("throttle_hw_power_brake_slowdown"),
        some("throttle_hw_slowdown"),
        has_marker,
    ]
    rules = [r for r, p in zip(rules, possible, strict=True) if p]
    if not rules:
        return None
    line = samples.get_column("line")
    # (already in line order: no sort, which would copy every column; only strictly increasing lines are
    # taken as sorted, so that ties keep whatever order the sort gives them)
    if by is None:
        in_order = line.is_sorted() and (n < 2 or bool((line.diff().drop_nulls() > 0).all()))
        df = samples if in_order else samples.sort("line")
    else:  # (the caller's rows are in (file, line) order)
        df = samples
    if missing:
        df = df.with_columns(**{n: pl.lit(None, dtype=t) for n, t in missing.items()})
    df = df.with_columns(_i=pl.int_range(pl.len(), dtype=pl.Int64))
    keys = _gpu_keys(df, key)
    df = df.with_columns(_prev=pl.col("_i").shift(1).over([*keys, pl.col(by)] if by else keys))
    # All triggers in one pass over the samples; the triggered rows are tested against their GPU's previous
    # sample (gathered for them only), then the few hit rows are turned into events rule by rule (same rows,
    # same order as one filter per rule).
    rising_v = {i: r[1][2] for i, r in enumerate(rules) if r[1][0] == "rising"}
    df = df.with_columns(
        **{f"_t{i}": r[1][1] for i, r in enumerate(rules)}, **{f"_v{i}": v for i, v in rising_v.items()}
    )
    cand = df.filter(pl.any_horizontal(*(pl.col(f"_t{i}") for i in range(len(rules)))))
    if cand.height == 0:
        return None
    prev_of = [f"_t{i}" if i not in rising_v else f"_v{i}" for i in range(len(rules))]
    at_prev = pl.lit(cand.get_column("_prev"))
    prev = df.select(pl.col(c).gather(at_prev).alias(f"_p{i}") for i, c in enumerate(prev_of))
    tests = {}
    for i in range(len(rules)):
        t, p = pl.col(f"_t{i}"), pl.col(f"_p{i}")
        if i in rising_v:
            v = pl.col(f"_v{i}")
            tests[f"_hit{i}"] = t & (p.is_null() | (v != p)).fill_null(True)
        else:
            tests[f"_hit{i}"] = t & ~p.fill_null(False)
    flags = cand.hstack(prev.get_columns()).with_columns(**tests)
    hits = flags.filter(pl.any_horizontal(*(pl.col(f"_hit{i}") for i in range(len(rules)))))
    out = []
    for i, (kind, _cond, code, sev, detail) in enumerate(rules):
        hit = hits.filter(pl.col(f"_hit{i}"))
        if hit.height:
            hit = hit.with_columns(_code=code.cast(pl.String), _detail=detail.struct.json_encode())
            out.append(
                hit.select(
                    "ts",
                    "ts_quality",
                    "node",
                    c("gpu_index", pl.Int32).cast(pl.Int32).alias("gpu_index"),
                    c("gpu_bus_id", pl.String).alias("gpu_bus_id"),
                    source=pl.lit(SOURCE),
                    kind=pl.lit(kind),
                    code=pl.col("_code"),
                    severity=pl.lit(sev),
                    message=pl.col("text").str.strip_chars(),
                    detail=pl.col("_detail"),
                    file=file,
                    line=pl.col("line"),
                    **({by: pl.col(by)} if by else {}),
                )
            )
    if not out:
        return None
    return pl.concat(out, how="diagonal_relaxed")


def _distinct_values(data: pl.DataFrame, plan: _Plan) -> pl.DataFrame:
    """`data` with the plan's columns converted per distinct cell: each cell column's distinct values found
    once and converted, then mapped back (the values of `_per_value` in the query, which, with common-
    subexpression elimination off, found the distinct values twice per conversion)."""
    if not plan.distinct and not plan.stamps:
        return data
    uniq: dict[str, pl.Series] = {}
    cols = {}
    j = _tail_of(data)
    firsts: pl.Series | None = None  # (the first row of each tail)
    at: pl.Series | None = None  # (each row's place among them)
    for name, cell, fn, dtype in plan.distinct:
        if j is not None and int(cell[2:]) >= j:
            # a cell of the tail: converted on the first row of each tail, spread by the rows' tail numbers
            if firsts is None or at is None:
                firsts, at = _tail_places(data.get_column(f"{_TAIL}{j}"))
            u = data.get_column(cell).gather(firsts)
            cols[name] = pl.select(fn(pl.lit(u)).cast(dtype)).to_series().gather(at)
            continue
        if cell not in uniq:
            uniq[cell] = data.get_column(cell).unique(maintain_order=True)
        u = uniq[cell]
        v = pl.select(fn(pl.lit(u))).to_series()
        cols[name] = pl.col(cell).replace_strict(u, v, default=None, return_dtype=dtype)
    for name, cell in plan.stamps:
        cols[name] = _stamps(data.get_column(cell))
    return data.with_columns(**cols)
