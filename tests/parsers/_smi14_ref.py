# ruff: noqa: E501, F401
"""The code smi14 replaced in `parsers.nvidia_smi_dmon` (and `parsers.nvidia_smi_csv`, `parsers._nvsmi_fields`), kept
verbatim as the reference `test_smi14` compares the new code with: dmon's `parse` (smi14: the field lists' rows merged
in line order by slicing their runs, `_merged`, instead of a sort that gathers every column)."""

from __future__ import annotations

import polars as pl

from parsers import _nvsmi_fields as F  # noqa: N812
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult
from parsers.nvidia_smi_dmon import _MANY, _PROBE, _fixed_width, _group_frame, _headers, _layout, _row_regex


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every header group; see the module docstring.

    Rows are tokens separated by spaces (of the line stripped of whitespace). Header and units lines
    start with `#`, so the regexes run on those few lines only; every row then takes the field list of
    the last header above it, and the rows of one field list (however often dmon repeated its header)
    are split into cells by one anchored regex that also checks the token count.
    """
    text = lines.cast(pl.String).fill_null("")
    n = len(text)
    head_pos, marks, sigs, sig_of_header = _headers(text)
    # the field list of the governing header (the last one above; null: none yet); header and units lines
    # themselves are never data
    sig = pl.repeat(None, n, dtype=pl.Int64, eager=True)
    if len(head_pos):
        sig = sig.scatter(head_pos, pl.Series(sig_of_header, dtype=pl.Int64)).forward_fill()
    mark = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if len(marks):
        mark = mark.scatter(marks, True)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(ctx.first_line, ctx.first_line + n, dtype=pl.Int64, eager=True),
            "text": text,
            "sig": sig,
            "mark": mark,
        }
    )
    parts = []
    data_lines: list[pl.Series] = []
    for fields_t, s in sigs.items():
        fields = list(fields_t)
        rx = _row_regex(fields)
        rows = frame.lazy().filter((pl.col("sig") == s) & ~pl.col("mark"))
        fast = None
        if n >= _MANY:
            # (a long group: its rows of dmon's fixed-width layout read as columns of bytes, the rest below)
            sel = (frame.get_column("sig") == s) & ~mark
            got = _fixed_width(frame.select("line", "text").filter(sel), fields)
            if got is not None:
                fast, slow = got
                rows = frame.lazy().filter(pl.col("line").is_in(slow.implode())) if len(slow) else None
        # A long group whose `extra` fields repeat their values (idle encoders: `0 0 0 0`) captures each run
        # of `extra` fields as one cell (fewer captures) and encodes `extra` once per distinct run text.
        layout = _layout(fields_t) if n >= _MANY and fast is None else None
        runs = None
        if layout is not None:
            probe = (
                frame.lazy()
                .filter((pl.col("sig") == s) & ~pl.col("mark"))
                .head(_PROBE)
                .select(cells=pl.col("text").str.strip_chars().str.extract_groups(layout[0]))
                .select(pl.concat_str([pl.col("cells").struct.field(g) for g, _ in layout[1]], separator=" "))
                .collect(engine="in-memory")
                .to_series()
            )
            if probe.len() and probe.n_unique() * 4 <= probe.len():
                rx, runs = layout
        if rows is not None:
            # (the rows of the field list, their cells and typed columns in one query)
            data = rows.with_columns(cells=pl.col("text").str.strip_chars().str.extract_groups(rx)).filter(
                pl.col("cells").struct.field(rx[rx.index("<") + 1 : rx.index(">")]).is_not_null()
            )
            part = _group_frame(data, fields, runs).collect(engine="in-memory")
            if fast is not None:
                part = pl.concat([fast, part], how="vertical").sort("line") if part.height else fast
        else:
            part = fast
        if part.height == 0:
            continue
        data_lines.append(part.get_column("line"))
        parts.append(part)
    ok = mark
    if data_lines:
        first = ctx.first_line
        ok = ok.scatter(pl.concat(data_lines) - first, True)
    # (blank lines are neither header, units nor data lines: looked for among the other lines only)
    rest = (~ok).arg_true()
    blank = text.gather(rest).str.strip_chars().str.len_bytes() == 0
    unrecognized = len(rest) - int(blank.sum())
    parsed = n - len(rest)
    bad_idx = rest.filter(~blank).head(MAX_EXAMPLES)
    examples = [
        (ctx.first_line + int(i), str(t)[:500])
        for i, t in zip(bad_idx.to_list(), text.gather(bad_idx).to_list(), strict=True)
    ]

    if parts:
        # (one field list's rows are in line order already)
        samples = pl.concat(parts, how="diagonal_relaxed").sort("line") if len(parts) > 1 else parts[0]
        samples = samples.with_columns(
            node=pl.lit(ctx.node),
            file=pl.lit(ctx.path),
            source=pl.lit("nvidia-smi-dmon"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
            gpu_bus_id=pl.lit(None, dtype=pl.String),
        )
        events = F.transition_events(samples, ctx)
        gpu_samples = F.conform_known(samples, "gpu_samples")
    else:
        events = F.conform_table(pl.DataFrame(), "events")
        gpu_samples = F.conform_table(pl.DataFrame(), "gpu_samples")
    return ParseResult(
        tables={"gpu_samples": gpu_samples, "events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
    )


