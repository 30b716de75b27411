"""Training stdout holds two grammars: step lines and NCCL/PyTorch-distributed lines, in one file.

A job launched with `NCCL_DEBUG=INFO` prints NCCL's init and channel lines into the same stdout as the
framework's step lines, and a watchdog timeout or a traceback lands there too. Detection gives the file to
one parser (the step-log parser, or the NCCL parser when NCCL lines fill the head), and the other
grammar's lines would be counted as not understood: the step times of a log whose head is NCCL init
lines, or the NCCL WARNs and watchdog timeouts of a step log, would be lost.

`parse` reads such a chunk with both: `parsers.nccl.family_rows` takes the NCCL and PyTorch-distributed
lines (and says which lines it understood), then the step-log parser reads the other lines, the family's
lines blanked so that line numbers and the accounting stay exact (blank lines are neither parsed nor
unrecognized): parsed = family lines + lines the step grammar knows; unrecognized = lines neither knows.
Chunks that hold one grammar only (checked with cheap literal scans first) are parsed as before.
"""

from __future__ import annotations

from types import ModuleType

import polars as pl

from parsers import nccl, step_log
from parsers import torch_distributed as td
from parsers.base import FileContext, ParseResult

FAMILY_MARKS = [
    "NCCL ",
    "ProcessGroupNCCL",
    "torch.distributed",
    "Traceback (most recent call last)",
    "c10d",
    "what():",
    "ChildFailedError",
]
"""A step log needs the NCCL/PyTorch grammar only when one of these occurs (an NCCL record has `NCCL `; a
watchdog timeout, c10d error, elastic failure or traceback has one of the others)."""

SAMPLE_LINES = 2000


def has_family_lines(lines: pl.Series) -> bool:
    """True when some line may be an NCCL or PyTorch-distributed record."""
    return bool(lines.str.contains_any(FAMILY_MARKS).any())


def has_step_lines(lines: pl.Series) -> bool:
    """True when some line has a step-line shape (the step-log sniffer, run on the candidate lines only)."""
    if not step_log.STEP_LINE_LITERALS:
        return False
    cand = lines.filter(lines.str.contains_any(step_log.STEP_LINE_LITERALS).fill_null(False))
    if cand.len() == 0:
        return False
    sample = "\n".join(cand.head(SAMPLE_LINES).to_list()).encode("utf-8", "replace")
    # the candidates hold no competing lines, so any step line gives a score above 0.9 (a preamble only, 0.6)
    return step_log.sniff(sample, "") > 0.9


def parse(parser: ModuleType, lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parser.parse(lines, ctx)`, or both grammars when a training-stdout chunk mixes them."""
    if parser is step_log:
        if has_family_lines(lines):
            return _both(lines, ctx)
    elif parser is nccl or (parser is td and td._dump_span(lines) is None):
        if has_step_lines(lines):
            return _both(lines, ctx)
    return parser.parse(lines, ctx)


def _both(lines: pl.Series, ctx: FileContext) -> ParseResult:
    family = nccl.family_rows(lines, ctx)
    understood = family.understood.fill_null(False)
    n_family = int((understood & (lines.str.strip_chars().str.len_bytes() > 0)).sum())
    if n_family == 0:
        return step_log.parse(lines, ctx)
    rest = step_log.parse(pl.select(pl.when(understood).then(pl.lit("")).otherwise(lines)).to_series(), ctx)
    tables = dict(family.tables)
    for name, df in rest.tables.items():
        if df.height:
            tables[name] = pl.concat([tables[name], df], how="diagonal_relaxed") if name in tables else df
    node = family.hosts[0] if len(family.hosts) == 1 else rest.node
    return ParseResult(
        tables=tables,
        parsed=n_family + rest.parsed,
        unrecognized=rest.unrecognized,
        unrecognized_examples=rest.unrecognized_examples,
        notes=[
            *family.notes,
            *rest.notes,
            f"mixed log: {n_family} NCCL/PyTorch line(s) and {rest.parsed} other "
            "line(s) read by the step-log grammar",
        ],
        partial=rest.partial,
        node=node,
    )
