"""Ingest: read every file of a bundle with its parser, in parallel, into the tables and manifest.json.

Per file (a pure function, `ingest_file`, that can run in any process): read and decompress, reject
binary content, detect the format, parse, conform the tables. Then, over the whole bundle: node
attribution from content, clock anchoring (`forensics.timebase`), bus id → GPU index mapping
(`forensics.identity`), and atomic writes. `manifest.json` is written last: its presence means the
ingest completed.
"""

from __future__ import annotations

import gc
import importlib
import itertools
import os
import re
import shutil
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import polars as pl

from forensics import __version__, identity, timebase, years
from forensics.bundle import (
    CHUNK_BYTES,
    HEAD_BYTES,
    Bundle,
    BundleFile,
    ChunkReader,
    Limits,
    Record,
    cleanup,
    hash_file,
    line_spans,
    logical_name,
    open_bundle,
    size_limit_reason,
    span_first_lines,
)
from forensics.errors import CONTAINED, BundleError, OutputError, UsageError
from forensics.outputs import atomic_path, parquet_rows, write_json, write_table, write_table_file
from forensics.schema import (
    SCHEMA_VERSION,
    TABLES,
    conform,
    conform_all,
    conforming,
    conforms_later,
    empty,
    frame_dtypes,
    get_schema,
    matches,
)
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult, lines_from_bytes, lines_of_many


class _Deferred:
    """A module imported where it is first used. The parsers (~0.23 s of CPU to import: hundreds of regexes
    compiled, sniff plans worked out) are the workers' to use: the parent needs them only to plan the split
    of a large file, so for a bundle of small files it never imports them and starts the workers that much
    sooner. Workers import them as they start (`_worker_init`)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


registry = _Deferred("parsers.registry")
_mixed = _Deferred("parsers._mixed")

PARALLEL_MIN_BYTES = 32 * 1024**2
PARALLEL_MIN_FILES = 24
"""Below this much input (bytes and files), parse in this process: starting spawn workers (about a
second each: polars and the parsers are imported) costs more than it saves. Each file costs tens of
milliseconds of detection and parser set-up, so many small files are worth workers too."""


def _small(files: int, size: int) -> bool:
    """Whether a bundle of `files` files and `size` bytes is ingested in this process, without workers."""
    return size < PARALLEL_MIN_BYTES and files < PARALLEL_MIN_FILES

ProgressCallback = Callable[[str, int, int], None]
"""Called after each file with (path, files done, files total)."""

OUTPUT_FILES = ("manifest.json", "findings.json", "report.html")
IGNORED_NAMES = {"truth.json": "simulator ground truth, not a log"}


SPLIT_MIN_BYTES = 2 * CHUNK_BYTES
"""An uncompressed file at least this large is cut into byte ranges of `CHUNK_BYTES` at line starts that
workers parse side by side (one large log then uses every core); smaller files are one task each."""


class PartStats(NamedTuple):
    """What the parent needs to know of a part of a large table, counted by whoever wrote the part (~2 ms of a
    worker's CPU for 50k rows), so that it reads none of its parts for it: each (node, file) pair's rows and
    line range (`_write_in_parts`' plan of the parts to write) and the hours of its times (`years.reconcile`).
    The 1,000-node bundle's 400 parts were read for them three times once the workers had finished: ~0.8 s."""

    ranges: tuple[tuple[str | None, str | None, int, int | None, int | None, int], ...]
    """(node, file, rows, first line, last line, rows without a line) of each (node, file) pair"""
    inferred: bool
    """whether some row has a year-inferred time"""
    dated: tuple[tuple[int, int], ...]
    """(hour, rows) of the rows with a time of its own year: `years.Known.dated`"""


_RANGE_AGGS = (
    pl.len().alias("n"),
    pl.col("line").min().alias("lo"),
    pl.col("line").max().alias("hi"),
    pl.col("line").null_count().alias("nulls"),
)
"""A (node, file) pair's rows, first and last line, and rows without a line."""


def part_stats(df: pl.DataFrame) -> PartStats:
    """`PartStats` of the rows of `df` (a large table's rows, conformed or not: a column of nulls may be
    typeless)."""
    one = dict(_constant_strings(df.select(c for c in ("node", "file") if df.schema[c] == pl.String)))
    if len(one) == 2:
        return _one_file_stats(df, one["node"], one["file"])
    return _stats_by_query(df)


def _stats_by_query(df: pl.DataFrame) -> PartStats:
    """`part_stats` of any rows, by one query each of the ranges, the hours and the inferred years."""
    cols = df.lazy().select(
        pl.col("node").cast(pl.String),
        pl.col("file").cast(pl.String),
        pl.col("line").cast(pl.Int64),
        pl.col("ts").cast(pl.Datetime("us", "UTC")),
        pl.col("ts_quality").cast(pl.String),
    )
    ranges, dated, inferred = pl.collect_all(
        [
            cols.group_by("node", "file").agg(_RANGE_AGGS),
            years.dated_counts(cols),
            cols.select(((pl.col("ts_quality") == "year_inferred") & pl.col("ts").is_not_null()).any()),
        ]
    )
    return PartStats(
        tuple(ranges.iter_rows()), bool(inferred.item()), tuple(dated.iter_rows())  # type: ignore[arg-type]
    )


def _one_file_stats(df: pl.DataFrame, node: str, file: str) -> PartStats:
    """`part_stats` of rows of one node and file (a file's part), column by column: no query, no group-by of
    the names, and the hours counted by run (a file's samples come GPU by GPU in time order). A dmon file's
    15k samples in a worker: ~1.3 -> ~0.7 ms."""
    line = df.get_column("line").cast(pl.Int64)
    ts = df.get_column("ts").cast(pl.Datetime("us", "UTC"))
    quality = df.get_column("ts_quality").cast(pl.String)
    inferred = bool(((quality == "year_inferred") & ts.is_not_null()).any())
    dated_ts = ts.filter(quality.is_in(years.DATED) & ts.is_not_null())
    hours = (dated_ts.cast(pl.Int64) // years.BUCKET).rechunk()
    runs = hours.rle().struct.unnest()
    dated = runs.group_by(b="value", maintain_order=True).agg(n=pl.col("len").sum().cast(pl.Int64))
    ranges = ((node, file, df.height, line.min(), line.max(), line.null_count()),)
    return PartStats(ranges, inferred, tuple(dated.iter_rows()))  # type: ignore[arg-type]


class Part(NamedTuple):
    """A table spilled to Parquet by a worker, and what the parent must still do to its rows."""

    path: str
    line_offset: int = 0
    """Added to `line`: the part came from a byte range of a file, numbered from the range's first line."""
    node: str | None = None
    """Given to rows whose node is 'unknown' (the node the file's content names)."""
    consts: tuple[tuple[str, str], ...] = ()
    """String columns left out of the part because every row holds the same value: (column, value)."""
    final: bool = False
    """The part is written as a part of its table is (`outputs.write_table_file`: every column, sorted,
    zstd), so that, with no offset, node or constant to apply and no bundle stage changing its rows, the
    parent takes the file as it is (`_write_in_parts`)."""
    rows: int | None = None
    """Its rows, when the writer knew them (else read from the footer: `Outcomes.part_rows`)."""
    stats: PartStats | None = None
    """What the parent needs to know of its rows, counted by its writer (None: the parent reads the part)."""
    whole: bool = False
    """The part holds the rows a written part would (`final`), sorted, but is written as a spilled part (its
    columns of values, its constant strings in `consts`): rows the identity stage will likely fill
    (`_fill_likely`), which the parent reads, fills and writes once (`_write_in_parts`), where a written part
    would be written twice (dmon samples: a worker's sort and zstd write ~45 ms a 77k-row part, this ~17)."""
    filled: tuple[tuple[Any, ...], ...] | None = None
    """The GPU map rows (node, index, bus id) its writer filled every row's bus id from (`_prefilled`: rows
    named by index only, the map of the inventory the parent had seen): the parent keeps the part where the
    whole inventory's map holds the same rows on its nodes (`_misfilled`), and else takes the fill back."""

    @property
    def as_is(self) -> bool:
        """Whether the file holds the part's rows exactly as the table will (nothing left to apply)."""
        return self.final and not self.line_offset and not self.node and not self.consts

    @property
    def kept_whole(self) -> bool:
        """Whether the part holds the rows of a part of the table, read and written once by the parent
        (`whole`), with no line offset or node to apply."""
        return self.whole and not self.line_offset and not self.node


@dataclass
class FileOutcome:
    """What ingesting one file (or one byte range of it, before `_merge_spans`) produced."""

    row: dict[str, Any]
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    examples: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parts: dict[str, list[Part]] = field(default_factory=dict)
    """Tables spilled to Parquet by a worker: table → part files (in the work folder)."""
    content_node: str | None = None
    """The node the content names (set for byte ranges, whose rows the parent fills after merging)."""


def _binary_reason(head: bytes) -> str | None:
    """Why the head of a file looks binary, or None when it looks like text.

    A few NUL bytes do not make a log binary (syslog files are NUL-padded after a power loss), nor
    do a few invalid UTF-8 bytes (Latin-1 host names): only a substantial share does.
    """
    if not head:
        return None
    sample = head[:8192]
    n = len(sample)
    if sample.count(0) > max(8, n // 50):
        return "binary content (NUL bytes)"
    text_bytes = len(sample.translate(None, _CONTROL_BYTES))  # (one pass, not one count per control byte)
    if text_bytes / n < 0.85:
        return "binary content (mostly non-text bytes)"
    if sample.isascii():  # (no replacement character can come of it)
        return None
    if sample.decode("utf-8", errors="replace").count("\ufffd") > max(8, n // 20):
        return "binary content (not UTF-8 text)"
    return None


_CONTROL_BYTES = bytes(c for c in range(32) if c not in (9, 10, 13, 27, 12, 8))
"""The control bytes a text hardly holds (tab, line ends, form feed, backspace and escape are text)."""


SNIFF_LONG_LINE = 4096


def _sniff_head(first: bytes) -> bytes:
    """The head sniffers see: up to HEAD_BYTES, cut after the last line end so they see whole lines.

    A head with no line end at all (one giant line, a bomb of one byte) is clipped to a few KiB:
    sniffers are regex-heavy, and some go quadratic on a single 64 KiB line.
    """
    head = first[:HEAD_BYTES]
    if len(head) < HEAD_BYTES:
        return head
    cut = max(head.rfind(b"\n"), head.rfind(b"\r"))
    if cut < 0:
        return head[:SNIFF_LONG_LINE]
    return head[: cut + 1]


def _new_row(f: BundleFile) -> dict[str, Any]:
    return {
        "path": f.path,
        "node": f.node,
        "node_source": f.node_source,
        "format": None,
        "parser": None,
        "score": None,
        "runner_up": None,
        "bytes": f.size,
        "lines": 0,
        "parsed": 0,
        "unrecognized": 0,
        "status": "ok",
        "sha256": None,
    }


def ingest_file(
    f: BundleFile,
    limits: Limits,
    year_hint: int | None,
    collected_at: datetime | None,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    spill: Path | None = None,
    span: tuple[int, int] | None = None,
    parser_name: str | None = None,
    first_line: int = 1,
    carried: Sequence[str] | None = (),
) -> FileOutcome:
    """Read, detect and parse one bundle file; never raises for bad input or a parser bug.

    Files are read in chunks of about `chunk_bytes` cut at a line end, and the parser is called once
    per chunk with `FileContext.first_line` set, so memory stays bounded whatever the file size; the
    chunks' tables are concatenated and their counts summed. A record spanning lines that is cut at
    a chunk edge may be seen as two pieces (or as unrecognized lines) by the parser: with 16 MB
    chunks this touches at most a few lines per chunk, and is accepted for bounded memory.

    With `spill` (a folder), a file whose tables are large or that needed several chunks writes its
    tables there as Parquet parts (`FileOutcome.parts`) instead of returning them in memory.

    With `span` (start, end) and `parser_name`, only those bytes of an uncompressed file are parsed,
    with that parser (the parent detected it once for the file), their lines numbered from `first_line`
    (the range's place in the file when the parent counted it, else 1), their tables always spilled, and
    rows left with node 'unknown' for the parent: `_merge_spans` makes one outcome of a file's ranges.
    `carried`: the lines a parser with `carry` reads the range after (those the chunk before it would hand
    on, `_Split.carried`); None when the parent could not work them out (the range fails).
    """
    row = _new_row(f)
    try:
        return _ingest_file(
            f, row, limits, year_hint, collected_at, chunk_bytes, spill, span, parser_name, first_line,
            carried,
        )
    except CONTAINED as exc:  # noqa: BLE001 - a bug in the ingest itself still loses one file only
        return _failed(f, row, exc)


SPILL_BYTES = 16 * 1024**2
"""A file's tables larger than this (estimated, in memory) are spilled to Parquet parts by workers."""
RANGE_HELD_BYTES = 256 * 1024
"""A byte range's table other than `LARGE_TABLES` up to this size (estimated) goes back to the parent in
memory, not spilled: a range's events, inventory and comms are a few hundred rows. The parent read ~470 such
parts back after every worker had finished (4 GB Megatron mix: ~0.37 s of wall time, one core idle); a
worker wrote each for ~1 ms. The parent holds a file's ranges until the last arrives: 300 ranges of a 5 GB
log hold at most ~75 MB of them per table."""


@dataclass
class _Opened:
    """A file read up to its parser: what `_parse_chunks` goes on from."""

    reader: ChunkReader
    parser: Any
    by_bytes: bool
    first: bytes
    chunks: Iterator[bytes]


def _ingest_file(
    f: BundleFile,
    row: dict[str, Any],
    limits: Limits,
    year_hint: int | None,
    collected_at: datetime | None,
    chunk_bytes: int,
    spill: Path | None,
    span: tuple[int, int] | None = None,
    parser_name: str | None = None,
    first_line: int = 1,
    carried: Sequence[str] | None = (),
) -> FileOutcome:
    if span is not None and parser_name is not None:
        parser = registry.get_parser(parser_name)
        # (a range of `line_spans` is one chunk: planned no longer than its format's chunks, `chunk_factor`)
        reader = ChunkReader(f, limits, max(chunk_bytes, span[1] - span[0]), span)
        if carried is None:
            # reading the file through would have failed it: `carry` raised, or the file could not be read
            row.update(format=parser.NAME, parser=parser.__name__)
            row["status"] = (
                f"error: parser {parser.NAME} failed: the header lines in force at bytes {span[0]}-{span[1]} "
                "could not be worked out from the lines before them"
            )
            return FileOutcome(row)
        return _parse_chunks(
            f, row, reader, parser, year_hint, collected_at, spill,
            by_bytes=False, span=True, first_line=first_line, carried=carried,
        )
    opened = _open_file(f, row, limits, chunk_bytes)
    if isinstance(opened, FileOutcome):
        return opened
    return _parse_opened(f, row, opened, year_hint, collected_at, spill)


def _parse_opened(
    f: BundleFile,
    row: dict[str, Any],
    o: _Opened,
    year_hint: int | None,
    collected_at: datetime | None,
    spill: Path | None,
    parsed: tuple[ParseResult, int] | None = None,
    *,
    defer: bool = False,
) -> FileOutcome:
    """`_parse_chunks` of a file `_open_file` opened (`parsed`: its one chunk's result; `defer`: see
    there)."""
    return _parse_chunks(
        f, row, o.reader, o.parser, year_hint, collected_at, spill, o.by_bytes,
        first=o.first, chunks=o.chunks, parsed=parsed, defer=defer,
    )


def _open_file(f: BundleFile, row: dict[str, Any], limits: Limits, chunk_bytes: int) -> FileOutcome | _Opened:
    """Read a file's first chunk and detect its format: the file's outcome when it ends there (skipped,
    unreadable, empty, binary, not recognised), else what parsing it goes on from."""
    if f.skip_reason or f.source is None:
        row["status"] = f"skipped: {f.skip_reason or 'not readable'}"
        return FileOutcome(row)
    base = f.path.rsplit("/", 1)[-1]
    if base in IGNORED_NAMES and "/" not in f.path:
        row["status"] = f"skipped: {IGNORED_NAMES[base]}"
        return FileOutcome(row)
    if f.compression is None and f.size > limits.max_file_bytes:
        row["status"] = f"skipped: {size_limit_reason(limits.max_file_bytes)}"
        return FileOutcome(row)
    known: dict[str, Any] = {}

    def parser_of(head: bytes) -> Any:  # (the head's parser, detected once for both questions)
        if "parser" not in known:
            known["parser"] = registry.detect(_sniff_head(head), logical_name(f.path)).parser
        return known["parser"]

    reader = ChunkReader(
        f, limits, chunk_bytes,
        record_of=lambda head: _record_of(parser_of(head)),
        chunk_of=lambda head: chunk_bytes * chunk_factor(parser_of(head), _sniff_head(head)),
    )
    opened = _open_chunks(reader, row)
    if opened is None:
        return FileOutcome(row)
    chunks, first = opened

    def finish_reading() -> None:
        _drain(reader, chunks, row)

    if first is None:
        finish_reading()
        row["status"] = f"error: {reader.reason}" if reader.truncated else "skipped: empty file"
        return FileOutcome(row)
    head = _sniff_head(first)
    name = logical_name(f.path)
    det = registry.detect(head, name)
    row["runner_up"] = det.runner_up
    if det.parser is None:
        reason = _binary_reason(head)
        if reason:
            finish_reading()
            row["status"] = f"skipped: {reason}"
            return FileOutcome(row)
        # Not recognised: still count its lines, and show the first few.
        examples: list[tuple[int, str]] = []
        for chunk in itertools.chain([first], chunks):
            lines = lines_from_bytes(chunk)
            if not examples:
                examples = [(i + 1, t[:500]) for i, t in enumerate(lines.head(5).to_list())]
            row["lines"] += len(lines)
            row["unrecognized"] += int((lines.str.strip_chars().str.len_bytes() > 0).sum())
            del lines
        finish_reading()
        row["status"] = "skipped: " + (reader.reason if reader.too_large else "format not recognised")
        if reader.too_large:
            row.update(lines=0, unrecognized=0)
            examples = []
        return FileOutcome(row, examples=examples)
    parser = det.parser
    row["format"] = parser.NAME
    row["parser"] = parser.__name__
    row["score"] = round(det.score, 3)
    binary = _binary_reason(head) is not None
    if binary and not hasattr(parser, "parse_bytes"):
        finish_reading()
        row["status"] = "skipped: binary content"
        return FileOutcome(row)
    # `parse_bytes` is for binary forms (e.g. a Flight Recorder pickle); text goes through `parse`
    # line by line even for a parser that has both, so lines are counted and numbered the same way
    by_bytes = binary and hasattr(parser, "parse_bytes")
    return _Opened(reader, parser, by_bytes, first, chunks)


def ingest_files(
    files: Sequence[BundleFile],
    limits: Limits,
    year_hint: int | None,
    collected_at: datetime | None,
    spills: Sequence[Path | None],
) -> list[FileOutcome]:
    """`[ingest_file(f, ..., spill=s) for f, s in zip(files, spills)]`, with the whole small text files of a
    format that has `parse_many` read in one call of it (`parsers._mixed.parse_many`): a small file's cost
    is mostly the fixed cost of a parse, which the files then share.

    A file that needs more than one chunk, or binary parsing, goes the single-file way. When the shared
    call fails, each of its files is parsed alone, so a parser bug still costs only the file that has it.
    The files' tables come back pooled: all of them held by the first outcome (`_pooled`).
    """
    out: list[FileOutcome | None] = [None] * len(files)
    waiting: dict[str, list[tuple[int, dict[str, Any], _Opened]]] = {}
    for i, (f, spill) in enumerate(zip(files, spills, strict=True)):
        row = _new_row(f)
        try:
            opened = _open_file(f, row, limits, CHUNK_BYTES)
            if isinstance(opened, _Opened) and not opened.by_bytes and hasattr(opened.parser, "parse_many"):
                more = next(opened.chunks, None)  # a whole small file is one chunk
                if more is None and not opened.reader.too_large:
                    waiting.setdefault(opened.parser.NAME, []).append((i, row, opened))
                    continue
                opened.chunks = itertools.chain([] if more is None else [more], opened.chunks)
            out[i] = opened if isinstance(opened, FileOutcome) else _parse_opened(
                f, row, opened, year_hint, collected_at, spill, defer=True
            )
        except CONTAINED as exc:  # noqa: BLE001 - as in `ingest_file`
            out[i] = _failed(f, row, exc)
    for group in waiting.values():
        results: list[tuple[ParseResult, int]] | None = None
        if len(group) > 1:
            items = [
                (lines, FileContext(
                    path=files[i].path, node=files[i].node, year_hint=year_hint, collected_at=collected_at
                ))
                for (i, _, _), lines in zip(group, lines_of_many([o.first for _, _, o in group]), strict=True)
            ]
            try:
                got = _mixed.parse_many(group[0][2].parser, items)
                results = [(r, len(lines)) for r, (lines, _) in zip(got, items, strict=True)]
            except CONTAINED:  # noqa: BLE001 - each file is parsed alone below
                results = None
            del items
        for j, (i, row, o) in enumerate(group):
            f = files[i]
            try:
                done = results[j] if results else None
                out[i] = _parse_opened(f, row, o, year_hint, collected_at, spills[i], done, defer=True)
            except CONTAINED as exc:  # noqa: BLE001 - as in `ingest_file`
                out[i] = _failed(f, row, exc)
    return _pooled(out)  # type: ignore[arg-type]


def _failed(f: BundleFile, row: dict[str, Any], exc: Exception) -> FileOutcome:
    """The outcome of a file whose ingest itself failed (a parser's failure is contained in `_parse_chunks`)."""
    row.update(format=row.get("format"), lines=0, parsed=0, unrecognized=0)
    row["status"] = f"error: ingest failed: {type(exc).__name__}: {str(exc)[:300]}"
    return FileOutcome(row, notes=[f"{f.path}: {traceback.format_exc(limit=-3)}"])


def chunk_factor(parser: Any, head: bytes) -> int:
    """How many `CHUNK_BYTES` a chunk or byte range of a large file of `parser`'s format whose head (as the
    sniffers see it: `_sniff_head`) is `head` holds: its parser's `chunk_factor(head)` (1 for a parser without
    one), for content whose cost per chunk is mostly fixed."""
    of = getattr(parser, "chunk_factor", None)
    return 1 if of is None else max(1, int(of(head)))


def _record_of(parser: Any) -> Record | None:
    """A parser's `record_start` finder, or its `RECORD_START` literal, or that of the step-log grammar where
    `_mixed.parse` reads the parser's chunks with it too (`_mixed.record_start`), or None."""
    return (
        getattr(parser, "record_start", None)
        or getattr(parser, "RECORD_START", None)
        or _mixed.record_start(parser)
    )


def _open_chunks(reader: ChunkReader, row: dict[str, Any]) -> tuple[Iterator[bytes], bytes | None] | None:
    """The reader's chunk iterator and its first chunk (None at an empty file); None, with the row's
    status set, when the file cannot be opened."""
    chunks = iter(reader)
    try:
        return chunks, next(chunks, None)
    except OSError as exc:
        row["status"] = f"error: cannot read ({exc.strerror or exc})"
        return None


def _drain(reader: ChunkReader, chunks: Iterator[bytes], row: dict[str, Any]) -> None:
    """Read the rest of the file (for the checksum and the byte count) and record both in the row."""
    for _ in chunks:
        pass
    row["bytes"] = reader.bytes_read
    row["sha256"] = reader.sha256


def _parse_chunks(
    f: BundleFile,
    row: dict[str, Any],
    reader: ChunkReader,
    parser: Any,
    year_hint: int | None,
    collected_at: datetime | None,
    spill: Path | None,
    by_bytes: bool,
    *,
    span: bool = False,
    first: bytes | None = None,
    chunks: Iterator[bytes] | None = None,
    parsed: tuple[ParseResult, int] | None = None,
    first_line: int = 1,
    defer: bool = False,
    carried: Sequence[str] = (),
) -> FileOutcome:
    """Parse the chunks `reader` yields (the first already read, for detection) with `parser`, lines numbered
    from `first_line`, the first after the `carried` lines; `parsed` is the first chunk's result and line
    count when it was parsed already (`ingest_files`). With `defer`, the tables come back as the parser made
    them where `conform` is sure to succeed on them (`conforms_later`): `_pooled` conforms them, with those of
    the other files."""
    if chunks is None:
        opened = _open_chunks(reader, row)
        if opened is None:
            return FileOutcome(row)
        chunks, first = opened
    row["format"] = parser.NAME
    row["parser"] = parser.__name__

    def finish_reading() -> None:
        _drain(reader, chunks, row)

    acc = _Accumulator(f, spill, always_spill=span, defer=defer)
    n_chunks = 0
    held = [first] if first is not None else []  # so the first chunk is freed once parsed, like the others
    del first

    def every_chunk() -> Iterator[bytes]:
        if held:
            yield held.pop()
        yield from chunks

    carried = list(carried)
    before: pl.Series | None = None  # the previous chunk's lines, for `carry` (not worked out after the last)
    try:
        for chunk in every_chunk():
            n_chunks += 1
            ctx = FileContext(
                path=f.path, node=f.node, first_line=first_line, year_hint=year_hint, collected_at=collected_at
            )
            if parsed is not None:
                (result, nlines), parsed = parsed, None
            elif by_bytes:
                result: ParseResult = parser.parse_bytes(chunk, ctx)
                nlines = result.parsed + result.unrecognized
            else:
                lines = lines_from_bytes(chunk)
                nlines = len(lines)
                if before is not None:
                    carried, before = _carry(parser, before), None
                if carried:  # the header lines in force at the end of the previous chunk govern this one's first rows
                    lines = _after_carried(carried, lines)
                    result = _without_carried(
                        parser.parse(lines, replace(ctx, first_line=first_line - len(carried))), first_line, carried
                    )
                else:
                    result = _mixed.parse(parser, lines, ctx)  # parser.parse, or both grammars of training stdout
                if hasattr(parser, "carry"):
                    before = lines
                del lines
            del chunk
            acc.add(result, nlines, n_chunks)
            first_line += nlines
            if reader.too_large:
                break
    except CONTAINED as exc:  # noqa: BLE001 - a parser bug is contained to its file
        tb = traceback.format_exc(limit=-3)
        acc.discard()
        finish_reading()
        row["status"] = f"error: parser {parser.NAME} failed: {type(exc).__name__}: {str(exc)[:300]}"
        return FileOutcome(row, notes=[f"{f.path}: {tb}"])
    finish_reading()
    if reader.too_large:
        acc.discard()
        row["status"] = f"skipped: {reader.reason}"
        return FileOutcome(row)
    row["lines"] = acc.lines
    row["parsed"] = acc.parsed
    row["unrecognized"] = acc.unrecognized
    node = acc.node
    if node and f.node == "unknown":
        row["node"] = node
        row["node_source"] = "content"
    tables, parts = acc.finish(node if f.node == "unknown" and not span else None)
    if n_chunks > 1:  # (the tables its parser makes whole read back from their parts, in chunk order)
        gathered = {t: ps for t, ps in parts.items() if _gathered(parser, t)}
        for t, ps in gathered.items():
            held = [tables[t]] if t in tables else []
            read = [_read_part(p, t) for p in ps]
            # (one chunk per column, as `_concat_pieces`: the merge's eager selects would copy it whole each)
            tables[t] = conform(pl.concat([*read, *held], how="diagonal_relaxed", rechunk=True), t)
            del parts[t]
        _remove_parts(gathered)
        tables = _made_whole(parser, tables, acc.notes, "", ("chunks", "chunk"))
    if reader.truncated or acc.partial:
        row["status"] = "partial" + (f": {reader.reason}" if reader.reason else "")
    notes = [f"{f.path}: {n}" for n in acc.notes]
    return FileOutcome(row, tables, acc.examples, notes, parts, content_node=node if span else None)


CARRY_TAIL = 64
"""Data lines a chunk hands to the next with its header: each GPU's last sample, so that the next chunk's
first samples are compared with a previous one (a counter already non-zero is no new fault)."""


def _carry(parser: Any, lines: pl.Series) -> list[str]:
    """What the next chunk is parsed after: the header line(s) in force (`parser.carry`), then the last
    `CARRY_TAIL` lines.

    When a header is among those lines (a dmon loop repeats its header), they go after the headers in force
    where they start, so the samples before that header are read as in this chunk and each GPU's last
    sample still reaches the next chunk (without it, a counter already up there, such as a double-bit ECC
    count, is reported again as a new fault). Without a header in force there, the lines from the last header
    on."""
    headers = parser.carry(lines)
    if not headers:
        return []
    keep = getattr(parser, "CARRY_TAIL", CARRY_TAIL)  # (a parser of sections carries its header only: 0)
    if not keep:
        return headers
    tail = lines.tail(keep).to_list()
    last = headers[-1]
    if last not in tail:
        return [*headers, *tail]
    before = parser.carry(lines.head(len(lines) - len(tail))) if len(lines) > len(tail) else []
    if before:
        return [*before, *tail]
    return [*headers[:-1], *tail[len(tail) - 1 - tail[::-1].index(last):]]


def _after_carried(carried: list[str], lines: pl.Series) -> pl.Series:
    """A chunk's lines after the lines carried to it from the chunk before."""
    return pl.concat([pl.Series("line", carried, dtype=pl.String), lines]) if carried else lines


def _without_carried(result: ParseResult, first_line: int, carried: list[str]) -> ParseResult:
    """A chunk's result without the header lines carried over from the previous chunk (numbered before
    `first_line`): their rows and examples dropped, their lines (parsed as header lines) not counted again."""
    tables = {t: df.filter(pl.col("line") >= first_line) if "line" in df.columns else df for t, df in result.tables.items()}
    n = sum(1 for c in carried if c.strip())
    parsed = result.parsed - n
    unrecognized = result.unrecognized
    if parsed < 0:  # the parser did not take them for header lines after all
        parsed, unrecognized = 0, unrecognized + parsed
    return replace(
        result,
        tables=tables,
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=[e for e in result.unrecognized_examples if e[0] >= first_line],
    )


class _Accumulator:
    """Sums the counts of a file's chunks and gathers (or spills) their tables."""

    def __init__(
        self, f: BundleFile, spill: Path | None, always_spill: bool = False, defer: bool = False
    ) -> None:
        self.f = f
        self.defer = defer
        """whether frames `conform` is sure to take are kept as they are (see `_parse_chunks`)"""
        self.spill = spill
        self.always_spill = always_spill
        self.lines = self.parsed = self.unrecognized = 0
        self.examples: list[tuple[int, str]] = []
        self.notes: list[str] = []
        self.partial = False
        self.node: str | None = None
        self.frames: dict[str, list[pl.DataFrame]] = {}
        self.size = 0
        self.parts: dict[str, list[Part]] = {}

    def add(self, result: ParseResult, nlines: int, n_chunk: int) -> None:
        self.lines += nlines
        self.parsed += result.parsed
        self.unrecognized += result.unrecognized
        room = MAX_EXAMPLES - len(self.examples)
        if room > 0:
            self.examples.extend(result.unrecognized_examples[:room])
        self.notes.extend(result.notes)
        self.partial = self.partial or result.partial
        self.node = self.node or result.node
        for t, df in result.tables.items():
            if df.height:
                # parsers usually conform already; conforming again costs ~0.1 ms a file
                have = frame_dtypes(df)
                ready = matches(t, have)
                cdf = df if ready or (self.defer and conforms_later(df, t, have)) else conform(df, t)
                self.frames.setdefault(t, []).append(cdf)
                self.size += cdf.estimated_size()
        if self.spill is not None and (self.always_spill or n_chunk > 1 or self.size > SPILL_BYTES):
            self._flush(hold_small=self.always_spill and n_chunk == 1)

    def _flush(self, hold_small: bool = False) -> None:
        """Spill the tables gathered so far; with `hold_small` (a byte range's one chunk), keep those other
        than `LARGE_TABLES` of up to `RANGE_HELD_BYTES` in memory."""
        assert self.spill is not None
        held: dict[str, list[pl.DataFrame]] = {}
        for t, frames in self.frames.items():
            small = t not in LARGE_TABLES and sum(df.estimated_size() for df in frames) <= RANGE_HELD_BYTES
            if hold_small and small:
                held[t] = frames
                continue
            df = self._joined(t, frames)
            target = self.spill / f"{t}-{len(self.parts.get(t, []))}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            if t in LARGE_TABLES:
                # Written as a part of the table, sorted, here on one core of the pool while the rows are
                # few: the parent takes the file as it is when nothing is left to do to its rows (a range of
                # a large file numbered where it starts, `_Split.first_lines`), else reads it
                # (`_write_in_parts`).
                # ~15 ms more than the spill below for a 16 MB range; the parent's read, sort check and
                # write of the same rows cost ~60 ms.
                self.parts.setdefault(t, []).append(_table_part(df, t, target))  # (never `Part.whole`)
                continue
            self.parts.setdefault(t, []).append(_spill_part(df, target))
        self.frames = held
        self.size = sum(df.estimated_size() for frames in held.values() for df in frames)

    def _joined(self, t: str, frames: list[pl.DataFrame], conformed: bool = True) -> pl.DataFrame:
        """A table's frames as one, conformed (deferred frames too, unless `conformed` is False and there is
        only one)."""
        if self.defer and (conformed or len(frames) > 1):
            return conform_all(frames, t)
        return pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]

    def discard(self) -> None:
        self.frames.clear()
        _remove_parts(self.parts)
        self.parts.clear()

    def finish(self, content_node: str | None) -> tuple[dict[str, pl.DataFrame], dict[str, list[Part]]]:
        """The file's in-memory tables and spilled parts; rows without a node get `content_node`."""
        if self.parts and self.frames and not self.always_spill:  # (a range's frames left are those held)
            self._flush()
        tables = {t: self._joined(t, fr, content_node is not None) for t, fr in self.frames.items()}
        if content_node:
            tables = {t: _fill_node(df, content_node) for t, df in tables.items()}
            if self.parts:
                self.parts = {t: [p._replace(node=content_node) for p in ps] for t, ps in self.parts.items()}
        return tables, self.parts


def _spill_part(df: pl.DataFrame, target: Path, large: bool = False, sort_as: str | None = None) -> Part:
    """`df` written to `target` as a spilled part (not as the table's own parts are: see `Part`); `large`: a
    part of one of `LARGE_TABLES`, with its `PartStats`; `sort_as`: its rows in the order of that table's
    parts, sorted once the columns it leaves out are gone (they are nulls or one value: they order nothing,
    and a sort gathers every column it keeps; a batch of dmon files' 77k samples ~3.0 -> ~2.0 ms a file)."""
    stats = part_stats(df) if large else None
    # No statistics: a scan picks parts by their `__part` folder.
    df, consts = _compacted(df)
    if sort_as is not None:
        df = _sorted(df, sort_as)
    df.write_parquet(target, compression="lz4", statistics=False)
    return Part(str(target), consts=consts, rows=df.height, stats=stats)


def _compacted(
    df: pl.DataFrame, keep: tuple[str, ...] = ()
) -> tuple[pl.DataFrame, tuple[tuple[str, str], ...]]:
    """`df` without its columns null in every row, nor its string columns of one value in every row (those
    returned, as `Part.consts`), but those in `keep`: a spilled part's columns (a dmon range fills 15 of
    gpu_samples' 44; the readers put the others back, `_completed`). A 16 MB dmon range's spill: 40 -> ~28 ms
    without the nulls, ~24 -> ~16 ms without the strings of one value (node, file, source of a range)."""
    nulls = {c.name for c in df.get_columns() if c.null_count() == df.height and c.name not in keep}
    consts = tuple((c, v) for c, v in _constant_strings(df.drop(nulls)) if c not in keep)
    if nulls or consts:
        df = df.drop(nulls, *(c for c, _v in consts))
    return df, consts


def _table_part(
    df: pl.DataFrame, table: str, target: Path, alone: frozenset[str] | None = None, gpus: Path | None = None
) -> Part:
    """`df` (rows of one of `LARGE_TABLES`, conformed) sorted and written to `target` as a part of the table:
    as the table's parts are (`Part.final`: the parent takes the file as it is), or, given the nodes that have
    no other file (`alone`: a whole file's or batch's task, `_handing`) and where the identity stage will
    likely fill its rows (`_fill_likely`), as a spilled part that the parent reads, fills and writes once
    (`Part.whole`). Without a fill the parent reads and writes it anyway: as much CPU as the worker's write,
    but after the workers (a byte range of a large file is never handed so: a bundle's large dmon loop, alone
    on its node, had its ~1 s of writes moved there).

    Rows the fill would give their bus ids are filled here instead, from the GPU map the parent published
    (`gpus`, `_GpuBoard`), where it maps every row (`_prefilled`): written as a part of the table, which the
    parent keeps as it is where the whole inventory's map agrees (`Part.filled`)."""
    if alone is not None and _fill_likely(df, alone):
        got = _prefilled(df, gpus, table) if gpus is not None else None
        if got is None:
            return _spill_part(df, target, large=True, sort_as=table)._replace(whole=True)
        df, used = got
        write_table_file(df, table, target)
        return Part(str(target), final=True, rows=df.height, stats=part_stats(df), filled=used)
    df = _sorted(df, table)
    write_table_file(df, table, target)
    return Part(str(target), final=True, rows=df.height, stats=part_stats(df))


def _prefilled(
    df: pl.DataFrame, gpus: Path, table: str
) -> tuple[pl.DataFrame, tuple[tuple[Any, ...], ...]] | None:
    """`df` sorted as `table`'s parts are and filled by `identity.filled_by_index` from the GPU map published
    at `gpus`, with the map rows it took (None where there is no map yet, or it cannot fill every row). What
    the parent made of the part `_spill_part` writes: sorted without its columns of nulls or of one string
    (they order nothing, and are not gathered), filled (a fill by index moves no row), then whole again."""
    try:
        m = pl.read_parquet(gpus)
    except (OSError, pl.exceptions.PolarsError):
        return None
    # (the columns the fill reads and writes kept)
    compact, consts = _compacted(df, keep=("node", "gpu_index", "gpu_bus_id"))
    got = identity.filled_by_index(_sorted(compact, table), m)
    if got is None:
        return None
    return _completed(got[0], Part("", consts=consts), table), got[1]


def _fill_likely(df: pl.DataFrame, alone: frozenset[str] = frozenset()) -> bool:
    """Whether a row of `df` names its GPU by index only or by bus id only, on a known node with other files
    than those of the task (not in `alone`): the identity stage fills the other where the node's inventory
    maps its GPUs (`identity.resolve_rowwise`), which most bundles hold (dmon samples, by index only, beside
    the node's `nvidia-smi -q`)."""
    if "gpu_index" not in df.columns or "gpu_bus_id" not in df.columns or df.height == 0:
        return False
    one = (pl.col("gpu_index").is_null() != pl.col("gpu_bus_id").is_null()) & (pl.col("node") != "unknown")
    if alone:
        one = one & ~pl.col("node").is_in(pl.Series(sorted(alone), dtype=pl.String).implode())
    return bool(df.select(one.any()).item())


def _gathered(parser: Any, table: str) -> bool:
    """Whether a file's rows of `table` from all its chunks or byte ranges are brought together in memory, in
    their order, for `_made_whole`: every table but `LARGE_TABLES` for a parser with `merge_chunks` or
    `shift_lines`, the inventory for one with `INVENTORY_KEY`."""
    if table in LARGE_TABLES:
        return False
    if hasattr(parser, "merge_chunks") or hasattr(parser, "shift_lines"):
        return True
    return table == "inventory" and hasattr(parser, "INVENTORY_KEY")


def _made_whole(
    parser: Any, tables: dict[str, pl.DataFrame], notes: list[str], prefix: str, pieces: tuple[str, str]
) -> dict[str, pl.DataFrame]:
    """A file's tables, read in several chunks or byte ranges (`pieces`: their name, plural and singular)
    and concatenated in their order, made what reading the file whole gives: the tables but `LARGE_TABLES`
    by its parser's `merge_chunks` (state the grammar keeps across a file: partial aggregates of one record
    in two chunks, a rank learnt from a line in an earlier chunk; a bug in it keeps the pieces' rows, with a
    note), then its inventory unique on its `INVENTORY_KEY` (a fact repeated dumps restate, kept once)."""
    merge = getattr(parser, "merge_chunks", None)
    if merge is not None:
        small = {t: df for t, df in tables.items() if t not in LARGE_TABLES}
        try:
            got = merge(small) if small else {}
        except CONTAINED as exc:  # noqa: BLE001 - a bug in a parser's merge: the pieces' rows, with a note
            why = f"{type(exc).__name__}: {str(exc)[:300]}"
            notes.append(f"{prefix}merging its {pieces[0]} failed ({why}): the rows are each {pieces[1]}'s")
        else:
            tables = {**tables, **{t: conform(df, t) for t, df in got.items()}}
    key = getattr(parser, "INVENTORY_KEY", None)
    if key and "inventory" in tables:
        tables = {**tables, "inventory": _unique_inventory(tables["inventory"], key)}
    return tables


def _unique_inventory(inv: pl.DataFrame, key: tuple[str, ...]) -> pl.DataFrame:
    """One file's inventory less the rows that repeat an earlier row on `key`: what its parser, reading the
    file whole, keeps (the first by line)."""
    ordered = inv.sort("line", nulls_last=True, maintain_order=True)
    return ordered.unique(subset=list(key), keep="first", maintain_order=True)


def _fill_node(df: pl.DataFrame, node: str) -> pl.DataFrame:
    return df.with_columns(pl.col("node").replace("unknown", node)) if "node" in df.columns else df


def _remove_parts(parts: dict[str, list[Part]]) -> None:
    for ps in parts.values():
        for p in ps:
            Path(p.path).unlink(missing_ok=True)


def _constant_strings(df: pl.DataFrame) -> tuple[tuple[str, str], ...]:
    """(column, value) of the string columns of `df` that hold one value, and no null, in every row."""
    names = [c for c, dtype in df.schema.items() if dtype == pl.String]
    if not names or df.height == 0:
        return ()
    ends = df.select(
        *(pl.col(c).min().alias(f"lo{i}") for i, c in enumerate(names)),
        *(pl.col(c).max().alias(f"hi{i}") for i, c in enumerate(names)),
        *(pl.col(c).null_count().alias(f"nulls{i}") for i, c in enumerate(names)),
    ).row(0)
    n = len(names)
    lo, hi, nulls = ends[:n], ends[n : 2 * n], ends[2 * n :]
    return tuple((c, lo[i]) for i, c in enumerate(names) if nulls[i] == 0 and lo[i] is not None and lo[i] == hi[i])


def _read_part(p: Part, table: str) -> pl.DataFrame:
    """A spilled part's rows as `table` (the columns it left out null, or the value they held in every row)
    with its line offset and content node."""
    df = pl.read_parquet(p.path, glob=False)
    return _completed(df, p, table)


def _completed(df: pl.DataFrame, p: Part, table: str) -> pl.DataFrame:
    """Rows read from part `p` as `table`: see `_read_part`."""
    if df.columns != list(get_schema(table)) or pl.Null in df.dtypes:  # columns left out or typeless
        df = df.select(conforming(table, tuple(df.schema.items())))
    if p.consts:
        df = df.with_columns(pl.lit(v, dtype=pl.String).alias(c) for c, v in p.consts)
    if p.line_offset and "line" in df.columns:
        df = df.with_columns(pl.col("line") + p.line_offset)
    return _fill_node(df, p.node) if p.node else df


def _worker_init(cpus: Sequence[Sequence[int]] = (), slots: Any = None) -> None:
    if cpus and slots is not None:
        with slots.get_lock():
            k = slots.value
            slots.value += 1
        _pin_process(cpus[k % len(cpus)])
    os.environ.update(_worker_env())  # (for what the worker starts; its polars was sized before this ran)
    # every parser, before the first task and before the freeze below (`_mixed` imports three of them: the
    # registry, the others, was imported by the first task's detection, its objects left to the collector)
    importlib.import_module("parsers._mixed")
    importlib.import_module("parsers.registry")
    # The modules are loaded: the collector need not walk them again, and parsers that build many small
    # Python objects (small files, -q walks) pay fewer collections (~3-6 % of a small file's CPU).
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    if SEQUENTIAL_FRAMES:
        sequential_frames()
    # Ctrl-C is the parent's to handle: workers stop quietly when it shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


SEQUENTIAL_FRAMES = True
"""Workers evaluate the expressions of a `DataFrame.select` / `with_columns` one after the other
(`sequential_frames`)."""


def sequential_frames() -> None:
    """Make `polars.DataFrame.select` and `with_columns` their sequential forms (`select_seq`,
    `with_columns_seq`: the same results, the expressions evaluated one after the other) in this process, and
    `filter` of one predicate a filter of each column (`_filter_by_columns`).

    For a worker: its polars runs one thread (`_worker_env`), yet a select of two or more expressions hands
    them to that thread's pool and waits, ~120 us a call on this kind of machine whatever the rows (10 rows:
    159 us for two expressions, 23 us for one, 39 us for two by `select_seq`); the parsers make a few hundred
    such calls a file, on columns small enough that polars' own advice holds ("use this when the work per
    expression is cheap"). Pinned to one CPU, as workers are (`worker_cpus`), a hand-off is a switch on that
    CPU: the parsers of 40 nodes of `bench/real_bundle.py` in one process so pinned, alternated, ~-4 % CPU;
    unpinned (workers that are not pinned, the parsers run in this process) ~-13 %, the hand-offs crossing
    CPUs; the whole 2-worker ingest of its 1,000 nodes within the noise of a loaded host (-7.7 % and +6.3 %
    in two ABBA runs). Tables identical. `bench/per_format.py` calls it too, to run the parsers as workers
    run them."""
    pl.DataFrame.select = pl.DataFrame.select_seq  # type: ignore[method-assign]
    pl.DataFrame.with_columns = pl.DataFrame.with_columns_seq  # type: ignore[method-assign]
    pl.DataFrame.filter = _filter_by_columns  # type: ignore[method-assign]


_POLARS_FILTER = pl.DataFrame.filter
"""polars' own `DataFrame.filter` (what `_filter_by_columns` hands what it does not read itself)."""


def _filter_by_columns(self: pl.DataFrame, *predicates: Any, **constraints: Any) -> pl.DataFrame:
    """`DataFrame.filter` of one boolean predicate (an expression or a Series of the frame's height): the mask
    worked out by `select_seq`, then each column filtered as a Series (polars filters a frame's columns on its
    thread pool: ~150 us more a call, 10 rows or 15,000); anything else by polars' own `filter`."""
    if len(predicates) == 1 and not constraints and self.width:
        p = predicates[0]
        mask = self.select_seq(p) if isinstance(p, pl.Expr) else p
        if isinstance(mask, pl.DataFrame):
            mask = mask.to_series() if mask.width == 1 else None  # (an expression of several columns: polars')
        if isinstance(mask, pl.Series) and mask.dtype == pl.Boolean and len(mask) == self.height:
            return pl.DataFrame([s.filter(mask) for s in self.iter_columns()])
    return _POLARS_FILTER(self, *predicates, **constraints)


def prepare_out(out: Path, force: bool) -> None:
    """Make sure OUT can receive an ingest: a folder, and not a previous ingest unless `force`.

    A folder holding only the work folder of an interrupted ingest counts as empty.
    """
    if out.exists() and not out.is_dir():
        raise OutputError(f"output '{out}' is a file, not a folder; give -o/--out a folder path")
    if out.is_dir():
        entries = [p for p in out.iterdir() if p.name != WORK_DIR]
        if entries:
            ours = (out / "manifest.json").exists() or (out / "tables").is_dir()
            if not force:
                what = "a previous ingest" if ours else "other files"
                raise OutputError(f"output folder '{out}' already holds {what}; use --force to replace it")
            if not ours:
                raise OutputError(
                    f"output folder '{out}' holds files that are not gpu-forensics output; "
                    "refusing to overwrite them (choose another -o/--out folder)"
                )
    out.mkdir(parents=True, exist_ok=True)


WORK_DIR = ".forensics-work"


def _invalidate(out: Path) -> None:
    """Remove a previous ingest's outputs, manifest first: from now on OUT does not look complete."""
    (out / "manifest.json").unlink(missing_ok=True)
    for stale in ("findings.json", "report.html"):
        (out / stale).unlink(missing_ok=True)
    for p in out.glob("ticket-*.txt"):
        p.unlink()
    if (out / "tables").is_dir():  # moved into the work folder (deleted with it): no half-old tables
        (out / "tables").rename(out / WORK_DIR / "old-tables")


def ingest(
    bundle_path: Path,
    out: Path,
    *,
    limits: Limits | None = None,
    jobs: int | None = None,
    force: bool = False,
    year: int | None = None,
    progress: ProgressCallback | None = None,
    dask: str | None = None,
) -> dict[str, Any]:
    """Ingest the bundle at `bundle_path` into `out`; return the manifest.

    `dask`: address of a Dask distributed scheduler (e.g. `tcp://10.0.0.5:8786`) that runs the
    per-file work instead of local worker processes (optional extra `gpu-forensics[dask]`); the
    workers must see OUT and the bundle at the same paths (a shared file system). Same tables.

    Outputs are replaced safely: the previous manifest is removed before anything else changes,
    tables are written into a work folder and swapped in by rename, and `manifest.json` is written
    last, so an interrupted run never leaves a folder that looks completely ingested.

    Raises:
        BundleError: the bundle cannot be opened at all.
        OutputError: OUT cannot be used.
    """
    limits = limits or Limits()
    if not bundle_path.exists() and not bundle_path.is_symlink():
        raise BundleError(
            f"cannot open bundle '{bundle_path}': no such file or directory "
            "(give a folder or a .tar/.tar.gz/.tgz/.tar.zst/.zip archive)"
        )
    prepare_out(out, force)
    client = _dask_client(dask) if dask else None
    work = out / WORK_DIR
    shutil.rmtree(work, ignore_errors=True)
    staging = work / "staging"
    staging.mkdir(parents=True)
    jobs = jobs or min(os.cpu_count() or 1, 8)
    early = _EarlyPool(jobs) if client is None and jobs > 1 else None
    try:
        with _fewer_collections():
            bundle = open_bundle(bundle_path, staging, limits, early.walked if early else None)
            _invalidate(out)
            manifest = _ingest_bundle(bundle, out, work, limits, jobs, year, progress, client, early)
    finally:
        if early is not None:
            early.close()
        cleanup(work)
        if client is not None:
            client.close()
    return manifest


GC_THRESHOLD = (50_000, 20, 20)
"""The collector's thresholds while this process ingests, and in the workers (`_worker_init`)."""


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic garbage collector run less often (`GC_THRESHOLD`), then as before: the ingest makes many
    small objects that live on (a file's row, its outcome, the walk's entries), each young collection walks
    them again, and little of it is cyclic garbage. The 6-hour bundle's parent: ~9 % of its main thread's CPU
    in the collector, ~0.12 s less while the workers run (one of the two cores they share)."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)


class _EarlyPool:
    """The worker pool, started while the bundle is walked as soon as the walk shows the bundle is not small
    (`_small`): workers take ~1 s to start (a process, polars, the
    parsers), which the walk of a bundle of thousands of files (~0.5-0.9 s) now covers. The first pool pass
    takes it (`take`); unless taken, `close` shuts it down."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None
        self.started = False
        self.seen = 0
        self.bytes = 0

    def walked(self, bundle: Bundle) -> None:
        if self.started:
            return
        for f in bundle.files[self.seen :]:
            self.bytes += f.size
        self.seen = len(bundle.files)
        if not _small(self.seen, self.bytes):
            self.started = True
            try:
                self.pool = _new_pool(self.jobs)
            except Exception:  # noqa: BLE001 - the pool pass starts its own, and reports why it cannot
                self.pool = None

    def take(self) -> ProcessPoolExecutor | None:
        pool, self.pool = self.pool, None
        return pool

    def close(self) -> None:
        pool = self.take()
        if pool is not None:  # (idle; a pool that never had a task has no manager thread to stop its workers)
            _kill_pool(pool)


@dataclass(frozen=True)
class _Split:
    """How a large file is parsed in byte ranges: its format, detected once here, and the ranges."""

    parser: str
    score: float
    runner_up: str | None
    spans: list[tuple[int, int]]
    first_lines: _LineCount | None = None
    """The line number each range starts at, counted by the parent (in a thread, while the workers start and
    parse) when the format fills a table of `LARGE_TABLES` or has `carry`: a worker then writes a range's rows
    of it numbered as in the file, in a part the parent keeps as it is. None (or a range the count did not
    reach): the range is numbered from 1 and shifted by the parent."""

    def first_line(self, k: int) -> int:
        """Where range `k` starts (waits for the count to get there)."""
        return 1 if self.first_lines is None else self.first_lines.at(k)

    def carried(self, k: int) -> list[str] | None:
        """The lines range `k` is parsed after, for a parser with `carry` (waits for the count to get there;
        None when it could not: `ingest_file` then fails the range, and so the file)."""
        return [] if self.first_lines is None else self.first_lines.carried_at(k)


class _LineCount:
    """`span_first_lines(f, spans)` worked out by `counter` (one thread: the files one after the other, in the
    order they were planned, which is the order their ranges go to the workers), range by range: `at(k)`
    waits for range `k` only (a 5 GB log's count takes ~1.5 s; its first ranges go to the workers as soon as
    they are counted).

    With `carry` (a parser with `carry`, for a CSV or dmon loop whose header governs the rows after it), each
    range is cut into lines as the reading of the file through would cut it, and the lines it hands to the
    next range are worked out as that reading does (`_carry` of its lines after those carried to it):
    `carried_at(k)` (~20 ms a 16 MB range, here, against ~190 ms to parse it on a worker)."""

    def __init__(
        self, f: BundleFile, spans: list[tuple[int, int]], counter: ThreadPoolExecutor, carry: Any = None
    ) -> None:
        self.firsts: list[int] = []
        self.carries: list[list[str]] = []
        self.carrying = carry is not None
        self.done = False
        self.ready = threading.Condition()
        counter.submit(self._count, f, spans, carry)

    def _count(self, f: BundleFile, spans: list[tuple[int, int]], carry: Any) -> None:
        try:
            for first, carried in _carried_lines(f, spans, carry) if carry else _uncarried(f, spans):
                with self.ready:
                    self.firsts.append(first)
                    self.carries.append(carried)
                    self.ready.notify_all()
        except Exception:  # noqa: BLE001 - a file that cannot be read: the ranges not reached start at 1
            pass
        finally:
            with self.ready:
                self.done = True
                self.ready.notify_all()

    def at(self, k: int) -> int:
        """The first line of range `k`; 1 when the count could not get there (the merge shifts it)."""
        with self.ready:
            self.ready.wait_for(lambda: len(self.firsts) > k or self.done)
            return self.firsts[k] if k < len(self.firsts) else 1

    def carried_at(self, k: int) -> list[str] | None:
        """The lines range `k` is parsed after; when the count could not get there, None for a parser with
        `carry` (the range cannot be read as reading the file through would), else []."""
        with self.ready:
            self.ready.wait_for(lambda: len(self.carries) > k or self.done)
            if k < len(self.carries):
                return self.carries[k]
            return None if self.carrying else []


def _uncarried(f: BundleFile, spans: list[tuple[int, int]]) -> Iterator[tuple[int, list[str]]]:
    return ((first, []) for first in span_first_lines(f, spans))


def _carried_lines(
    f: BundleFile, spans: list[tuple[int, int]], parser: Any
) -> Iterator[tuple[int, list[str]]]:
    """The first line of each range and the lines it is parsed after, as `_parse_chunks` reading the file
    through in chunks of the ranges (`line_spans`) would number and carry them."""
    assert f.source is not None
    line, carried = 1, []
    with open(f.source, "rb") as fh:
        for k, (start, end) in enumerate(spans):
            yield line, carried
            fh.seek(start)
            lines = lines_from_bytes(fh.read(end - start))
            line += len(lines)
            if k + 1 < len(spans):
                carried = _carry(parser, _after_carried(carried, lines))


def _plan_split(f: BundleFile, limits: Limits, counter: ThreadPoolExecutor | None = None) -> _Split | None:
    """Detect a large uncompressed text file's format from its head and cut it into line-aligned ranges
    (with `counter`, the lines before each range are counted there when the rows are worth it or the parser
    carries lines from a chunk to the next: `_Split.first_lines`).

    None (the file is one task, `ingest_file` decides everything) for small, compressed, skipped,
    ignored, binary, unrecognised or unreadable files, and without `counter` for a parser with `carry`: only a
    plain log the registry recognises is split.
    """
    if f.skip_reason or f.source is None or f.compression is not None:
        return None
    if not SPLIT_MIN_BYTES <= f.size <= limits.max_file_bytes:
        return None
    if f.path.rsplit("/", 1)[-1] in IGNORED_NAMES and "/" not in f.path:
        return None
    try:
        with open(f.source, "rb") as fh:
            head = _sniff_head(fh.read(HEAD_BYTES))
        if _binary_reason(head) is not None:
            return None
        det = registry.detect(head, logical_name(f.path))
        carry = hasattr(det.parser, "carry")
        if det.parser is None or (carry and counter is None):
            # a parser with `carry` reads a chunk by lines of an earlier one (a CSV header): without the
            # parent's count to work them out (`_LineCount`), chunks in order
            return None
        spans = line_spans(f, CHUNK_BYTES * chunk_factor(det.parser, head), record=_record_of(det.parser))
    except OSError:
        return None
    if len(spans) < 2:
        return None
    # ~0.3 s a GB, while the workers parse, saves the parent reading and writing again every row of the large
    # tables
    firsts = None
    if counter is not None and (carry or set(det.parser.TABLES) & set(LARGE_TABLES)):
        firsts = _LineCount(f, spans, counter, det.parser if carry else None)
    return _Split(det.parser.NAME, round(det.score, 3), det.runner_up, spans, firsts)


def _merge_spans(f: BundleFile, split: _Split, ranges: list[FileOutcome], sha256: str | None) -> FileOutcome:
    """One file's outcome from the outcomes of its byte ranges (in file order).

    Line numbers of each range's rows and examples are shifted by the lines of the ranges before it (less
    the line it was numbered from: nothing when the parent counted the lines before it right, `_Split`);
    rows without a node get the node the content names first (as a file parsed in chunks would).
    A parser failure in any range fails the file (its rows are dropped, as for a file parsed whole).
    """
    row = _new_row(f)
    parser = registry.get_parser(split.parser)
    row.update(format=parser.NAME, parser=parser.__name__, score=split.score, runner_up=split.runner_up)
    failed = next((r for r in ranges if r.row["status"].startswith(("error", "skipped"))), None)
    row["bytes"] = sum(r.row["bytes"] or 0 for r in ranges)
    if failed is not None:
        for r in ranges:
            _remove_parts(r.parts)
        row["status"] = failed.row["status"]
        return FileOutcome(row, notes=failed.notes)
    node = next((r.content_node for r in ranges if r.content_node), None)
    fill = node if f.node == "unknown" else None
    if fill:
        row["node"] = node
        row["node_source"] = "content"
    tables: dict[str, list[pl.DataFrame]] = {}
    parts: dict[str, list[Part]] = {}
    examples: list[tuple[int, str]] = []
    notes: list[str] = []
    offset = 0  # lines before the range
    # (line numbers a parser keeps in other columns of a row move with `line`: an NCCL aggregate's first line)
    shift_lines = getattr(parser, "shift_lines", None)
    for k, r in enumerate(ranges):
        shift = offset - (split.first_line(k) - 1)
        for t, df in r.tables.items():
            if "line" in df.columns and shift:
                df = df.with_columns(pl.col("line") + shift)
                df = shift_lines(t, df, shift) if shift_lines is not None else df
            tables.setdefault(t, []).append(_fill_node(df, fill) if fill else df)
        for t, ps in r.parts.items():
            shifted = [p._replace(line_offset=shift, node=fill) for p in ps]
            if _gathered(parser, t):  # (read here, in range order, for the shift and `_made_whole`)
                read = [_read_part(p, t) for p in shifted]
                if shift_lines is not None and shift:
                    read = [shift_lines(t, df, shift) for df in read]
                tables.setdefault(t, []).extend(read)
                _remove_parts({t: ps})
                continue
            parts.setdefault(t, []).extend(shifted)
        examples.extend((n + shift, text) for n, text in r.examples[: MAX_EXAMPLES - len(examples)])
        notes.extend(n for n in r.notes if n not in notes)
        offset += r.row["lines"]
        for key in ("lines", "parsed", "unrecognized"):
            row[key] += r.row[key]
    partial = next((r.row["status"] for r in ranges if r.row["status"].startswith("partial")), None)
    if partial:
        row["status"] = partial
    row["sha256"] = sha256
    # (one chunk per column: the pieces' all-null columns concatenate into fewer chunks than the others, and
    # every eager select on such a frame copies it whole first; the pieces are let go as each table is made)
    merged = {t: _concat_pieces(tables.pop(t)) for t in list(tables)}
    merged = _made_whole(parser, merged, notes, f"{f.path}: ", ("byte ranges", "range"))
    return FileOutcome(row, merged, examples, notes, parts)


def _concat_pieces(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The pieces' rows of a table as one frame of one chunk per column (emptying `frames`)."""
    if len(frames) == 1:
        return frames.pop()
    df = pl.concat(frames, how="vertical", rechunk=True)
    frames.clear()
    return df


def _arrived(
    f: BundleFile,
    k: int,
    got: Any,
    results: dict[str, dict[int, Any]],
    splits: dict[str, _Split],
    outcomes: list[FileOutcome],
    tick: Callable[[BundleFile], None],
) -> None:
    """Take a task's result: a whole file's outcome (k = -1) or a batch's outcomes (k = BATCH, `f` its files)
    at once; a byte range's (k >= 0) or the checksum (k = -2) kept until the file's last one arrives, then
    the ranges merged (`_merge_spans`)."""
    if k == BATCH:
        for g, o in zip(f, got, strict=True):  # type: ignore[call-overload]
            outcomes.append(o)
            tick(g)
        return
    if k == -1:
        outcomes.append(got)
        tick(f)
        return
    mine = results[f.path]
    mine[k] = got
    split = splits[f.path]
    if len(mine) == len(split.spans) + 1:
        del results[f.path]
        sha = mine.pop(-2)
        outcomes.append(_merge_spans(f, split, [mine[j] for j in range(len(split.spans))], sha))
        tick(f)


def _drop(results: dict[int, Any]) -> None:
    """Remove the spilled parts of range outcomes that will not be merged."""
    for r in results.values():
        if isinstance(r, FileOutcome):
            _remove_parts(r.parts)


def _crashed(f: BundleFile, why: str) -> FileOutcome:
    row = _new_row(f)
    row["status"] = f"error: {why}"
    return FileOutcome(row)


def _run_parallel(
    files: list[BundleFile],
    jobs: int,
    work: Path,
    limits: Limits,
    year_hint: int | None,
    collected: datetime | None,
    tick: Callable[[BundleFile], None],
    task: Callable[..., FileOutcome] = ingest_file,
    splits: dict[str, _Split] | None = None,
    pool: ProcessPoolExecutor | None = None,
) -> list[FileOutcome]:
    """Ingest `files` in a spawn pool of `jobs` workers (`pool`, started already, for the first pass); a
    worker that dies loses only its own file.

    A file in `splits` (by path) is parsed as byte ranges in parallel plus a checksum task, then
    merged; if its pool breaks, it is retried whole. Small files go to the workers in batches
    (`BATCH_FILES`): a task per file cost ~0.3 ms of CPU in the pool's machinery.

    When a worker dies (killed, out of memory, a crash in native code), the pool breaks and every task
    not finished fails with it. The tasks that had started (the first `jobs + 1` unfinished ones: workers
    take tasks in order) hold the culprit; the others are run again in a fresh pool. The suspects are run
    again one file a task, then, if a pool breaks again, one at a time in a one-worker pool, where the file
    that breaks it is recorded as an error. When workers cannot start at all (a `__main__` that spawn
    cannot re-import), files are parsed in this process. `task` is `ingest_file` (tests pass a
    module-level stand-in).
    """
    index = {id(f): i for i, f in enumerate(files)}
    outcomes = Outcomes(work / "parts" / "parent")
    if PREFILL and sum(f.size for f in files) >= PREFILL_MIN_BYTES:
        outcomes.board = _GpuBoard(work / GPU_BOARD)
    args = (index, work, limits, year_hint, collected, tick, outcomes, task)
    rounds: list[tuple[list[BundleFile], int]] = [(files, BATCH_FILES)]
    alone: list[BundleFile] = []
    while rounds:
        pending, batch = rounds.pop(0)
        try:
            suspects, unsent = _pool_pass(pending, jobs, *args, splits=splits or {}, batch=batch, pool=pool)
            pool = None
        except _PoolUnusable:
            for f in [*pending, *(f for fs, _ in rounds for f in fs), *alone]:
                outcomes.append(task(f, limits, year_hint, collected, spill=work / "parts" / str(index[id(f)])))
                tick(f)
            return outcomes
        if not suspects and len(unsent) == len(pending):  # no task even started: narrow them down alone
            alone += unsent
            continue
        if unsent:
            rounds.append((unsent, batch))
        if suspects and batch > 1:
            rounds.append((suspects, 1))
        else:
            alone += suspects
    for f in alone:  # retry each suspect alone, to find the one that breaks a pool
        try:
            lost, unsent = _pool_pass([f], 1, *args)
        except _PoolUnusable:
            lost, unsent = [f], []
        if lost or unsent:
            outcomes.append(_crashed(f, "worker process died while reading this file"))
            tick(f)
    return outcomes


BATCH_FILES = 128
"""Whole small files handed to a worker in one task, at most this many ... (the parsers' fixed costs a batch,
their polars calls, are paid once for all: the healthy 1,000-node bundle of `bench/run.py --simulate 1000`
-9.1 % wall at 64 files against 32 and -3.7 % more at 128, none at 256; its hang -9.9 % at 128; outputs the
same, the peak too: the bytes below bound a batch)"""
BATCH_BYTES = CHUNK_BYTES
"""... and of at most this many bytes together; a file of `BATCH_BYTES` or more is a task of its own.

Files of a format with `parse_many` share its fixed costs (polars calls, whose count a file's size hardly
changes) up to several MB, not only the small ones: a 6-hour `--query-gpu` loop of 1.2 MB (5,800 lines) took
59 ms of a worker's CPU alone, 35 in fours, 30 in eights, 29 in sixteens; a torchtitan rank log of 2-3.5 MB
54 ms alone, 44 in fours. At 2 MB neither was ever batched (simulated 1,000 nodes of 6 hours, 3.45 GB: ~38 s of
~170 s ingest CPU). At 8 MB a worker's peak grew by ~70 MB. At 16 MB (a batch no larger than a large file's
byte range, `CHUNK_BYTES`): 1 MB Megatron logs 26.4 -> 23.8 ms a file (16 a batch against 8), 1 MB NCCL INFO
logs 8.3 -> 7.9; the 1,000-node real-log bundle -6.3 % wall, its ingest's peak 0.90 -> 1.05 GB; the README's
24-hour bundle -6.4 % (its 1.65 MB dmon loops ten a batch), peak 1.17 -> 1.14 GB."""
BATCH = -3
"""The task kind of a batch of whole files (besides -1 a whole file, -2 a checksum, k >= 0 a byte range)."""


def _ingest_batch(
    task: Callable[..., FileOutcome],
    files: tuple[BundleFile, ...],
    spills: tuple[Path, ...],
    limits: Limits,
    year_hint: int | None,
    collected: datetime | None,
    handing: Handing | None = None,
) -> list[FileOutcome]:
    """`task` for each of `files` in turn, in one worker call (`ingest_files` for the ingest itself: the files
    of a format with `parse_many` are parsed together); `handing`: the parent's `_handing()`."""
    if task is ingest_file:
        return _handed(ingest_files(files, limits, year_hint, collected, spills), spills, handing)
    got = [task(f, limits, year_hint, collected, spill=spill) for f, spill in zip(files, spills, strict=True)]
    return _handed(got, spills, handing)


def _ingest_whole(
    task: Callable[..., FileOutcome],
    f: BundleFile,
    limits: Limits,
    year_hint: int | None,
    collected: datetime | None,
    spill: Path,
    handing: Handing | None = None,
) -> FileOutcome:
    """`task` for one whole file in a worker, its large tables handed over as parts (`_handed`)."""
    return _handed([task(f, limits, year_hint, collected, spill=spill)], (spill,), handing)[0]


HANDED_BYTES = 512 * 1024
"""A worker writes a table of `LARGE_TABLES` that a whole file or a batch of files gave, of at least this many
bytes (estimated, in memory), to a spilled part, and hands the parent its path instead of its rows: polars'
pickling of a frame and the copy through the pool's pipe cost far more than a Parquet part written and read
back (400k step rows: 247 ms to pickle, 142 to read back, 91 MB through the pipe; as a part 230 ms and 43 ms,
14 MB on disk; 200k gpu_samples rows from `--query-gpu` loops: 513 + 210 ms, 132 MB, against 159 + 22 ms), and
the parent, which reads the pipe and unpickles, competes with the workers for the cores."""


Handing = tuple[int, int, frozenset[str], Path | None]
"""How a worker hands a task's large tables over (`_handing`)."""


def _handing(alone: frozenset[str] = frozenset(), gpus: Path | None = None) -> Handing:
    """How workers hand large tables over (`_handed`), as this process's settings say (a worker's own are the
    defaults): from how many bytes as a part, from how many rows as a part of the table's own, the nodes of
    the task's files that have no other file in the bundle (`_alone`), whose rows the identity stage has
    nothing to fill from, and where the parent publishes the GPU map of the inventory it has (`_GpuBoard`)."""
    return HANDED_BYTES, PART_ROWS // SOLO_SHARE, alone, gpus


def _alone(group: Sequence[BundleFile], per_node: Counter[str]) -> frozenset[str]:
    """The nodes of `group` (a task's files) all of whose files (`per_node`: files per node) are in it."""
    inside = Counter(g.node for g in group)
    return frozenset(n for n, c in inside.items() if per_node[n] == c)


def _handed(
    outcomes: list[FileOutcome], spills: Sequence[Path | None], handing: Handing | None = None
) -> list[FileOutcome]:
    """`outcomes` (of a worker's task: one per file, with `spills` their spill folders) with their tables of
    `LARGE_TABLES` of `HANDED_BYTES` or more written as parts in the outcome's folder (`handing`: the parent's
    `_handing()`). A part that cannot be written leaves its rows in memory, as before.

    A table of `PART_ROWS // SOLO_SHARE` rows or more is written as a part of the table is (sorted, every
    column, zstd: `Part.final`), which the parent takes as it is (`_write_in_parts`: it holds every row of
    its files); another as a spilled part (`_spill_part`), which the parent reads. (1,000 nodes of a
    torchtitan job, 12.4 M step rows from batches of 3-4 rank logs, in order already: the worker's write
    ~+0.3 s of CPU a million rows, the parent's read, sort and write again ~1.9 s. Their `--query-gpu` CSV
    loops' 5.8 M samples, sorted here: ~+0.9 s a million rows in the workers, against the parent's ~1.9.)"""
    handed_bytes, final_rows, alone, gpus = handing or _handing()
    for o, spill in zip(outcomes, spills, strict=True):
        if spill is None or not isinstance(o, FileOutcome):
            continue
        for t in LARGE_TABLES:
            df = o.tables.get(t)
            if df is None or df.height == 0 or df.estimated_size() < handed_bytes:
                continue
            target = spill / f"{t}-handed.parquet"
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if df.height >= final_rows:
                    # (a pooled frame's columns of nulls are typeless: `_nulls_typeless`)
                    part = _table_part(conform(df, t), t, target, alone, gpus)
                else:
                    part = _spill_part(df, target, large=True)
            except Exception:  # noqa: BLE001 - a full disk or a bad path: the rows go through the pipe
                with suppress(OSError):
                    target.unlink(missing_ok=True)
                continue
            o.parts.setdefault(t, []).append(part)
            del o.tables[t]
    return outcomes


def _pooled(outcomes: list[FileOutcome]) -> list[FileOutcome]:
    """`outcomes` with each table's frames conformed and joined into one, held by the first outcome: the
    parent merges every file's tables anyway, and one frame crosses the process boundary in a fraction of the
    time of dozens (on 1,100 small files: 1,500 frames pickled and read back in 220 ms, pooled in 100). The
    frames `_parse_chunks` left to conform (`defer`) are conformed here, those of one schema in one select."""
    by_table: dict[str, list[pl.DataFrame]] = {}
    for o in outcomes:
        for t, df in o.tables.items():
            by_table.setdefault(t, []).append(df)
        o.tables = {}
    if by_table:
        outcomes[0].tables = {t: _nulls_typeless(conform_all(frames, t)) for t, frames in by_table.items()}
    return outcomes


def _nulls_typeless(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with its columns of nulls only as columns of dtype Null, which hold no buffer: a pooled frame
    crosses the process boundary a third smaller (100 nodes of the 1,000-node bundle: 61 -> 40 MB pickled,
    its pickling 3x faster, its reading back 1.7x). `Outcomes` gives them their dtype back."""
    if not df.height:
        return df
    empty_ = [c.name for c in df.get_columns() if c.null_count() == df.height and c.dtype != pl.Null]
    return df.with_columns(pl.lit(None).alias(c) for c in empty_) if empty_ else df


def _batched(tasks: list[tuple[BundleFile, int]], batch: int) -> list[tuple[Any, int]]:
    """`tasks` with small whole files joined into batches: (tuple of files, BATCH).

    A batch holds files of one name shape (`_shape`: per-node copies of the same file), which are most
    likely of one format, so that their parser reads them in one call (`ingest_files`), and files next to
    each other in (node, path) order, the order of a table's parts: the rows of a large table a batch gives
    are then every row of its files, and of a few nodes, which the parent takes as a part of the table as
    the worker wrote it (`_handed`, `_write_in_parts`). A batch takes the place of its first file in `tasks`
    (longest first)."""
    if batch <= 1:
        return list(tasks)
    out: dict[int, tuple[Any, int]] = {}
    small: dict[str, list[tuple[int, BundleFile]]] = {}
    """name shape -> its small whole files (with their places in `tasks`)"""
    for i, (f, k) in enumerate(tasks):
        if k != -1 or _cost(f) >= BATCH_BYTES:
            out[i] = (f, k)
        else:
            small.setdefault(_shape(f), []).append((i, f))

    def close(run: list[tuple[int, BundleFile]]) -> None:
        files = tuple(f for _, f in run)
        out[min(i for i, _ in run)] = (files[0], -1) if len(files) == 1 else (files, BATCH)

    for members in small.values():
        members.sort(key=lambda m: (m[1].node, m[1].path))
        run: list[tuple[int, BundleFile]] = []
        size = 0.0
        for i, f in members:
            cost = _cost(f)
            if run and (len(run) >= batch or size + cost > BATCH_BYTES):
                close(run)
                run, size = [], 0.0
            run.append((i, f))
            size += cost
        if run:
            close(run)
    return [out[i] for i in sorted(out)]


_DIGITS = re.compile(r"\d+")


def _shape(f: BundleFile) -> str:
    """A file's base name with its digits masked: `r01n07/train_rank3.log` -> `train_rank#.log`."""
    return _DIGITS.sub("#", f.path.rsplit("/", 1)[-1])


HASH_COST = 0.1
"""A checksum task's cost relative to parsing the same bytes (sha256 ~2 GB/s, a grammar ~100-250 MB/s)."""


def _tasks(files: list[BundleFile], splits: dict[str, _Split]) -> list[tuple[BundleFile, int]]:
    """The tasks of `files` — (file, -1) a whole file, (file, k) a byte range of a split file, (file, -2)
    its checksum — longest first, so that no long task starts last while the other workers idle.

    A file that cannot be split (compressed, a monitoring loop read in order) may take longer than all
    the ranges of a split one: handed out after them, it alone would run on at the end. Costs are bytes
    to parse (`_cost`); ties keep the files' order.
    """
    costed: list[tuple[float, int, int, BundleFile, int]] = []
    # every range costs the longest of all (they differ by a line), so they go in file order, range by range:
    # the order in which the parent counts the lines before them (`_LineCount`)
    span = max((end - start for split in splits.values() for start, end in split.spans), default=0)
    for i, f in enumerate(files):
        split = splits.get(f.path)
        if split is None:
            costed.append((_cost(f), i, 0, f, -1))
            continue
        costed.extend((span, i, k, f, k) for k in range(len(split.spans)))
        costed.append((f.size * HASH_COST, i, 0, f, -2))
    costed.sort(key=lambda t: (-t[0], t[1], t[2]))
    return [(f, k) for *_, f, k in costed]


COMPRESSED_RATIO = 5
"""About how many bytes of text a byte of a compressed log holds (gzip/zstd of logs: 4-10×)."""


def _cost(f: BundleFile) -> float:
    """Bytes of text to parse in a whole file (a compressed file's stored bytes times `COMPRESSED_RATIO`)."""
    return f.size * (COMPRESSED_RATIO if f.compression else 1)


class _PoolUnusable(Exception):
    """Workers cannot start here at all."""


def _worker_alive() -> bool:
    return True


class _Workers(dict):  # type: ignore[type-arg]
    """The pool's table of worker processes, whose `values()` is a snapshot.

    CPython's pool manager thread iterates `_processes.values()` (`get_n_children_alive`,
    `join_executor_internals`) while `submit` in the main thread may add a worker to it: a worker that died
    made that a `RuntimeError: dictionary changed size during iteration` in the manager thread now and then
    (cpython gh-87664 fixed only one of those loops). A list copy is made under the GIL in one step.
    """

    def values(self) -> list[Any]:  # type: ignore[override]
        return list(super().values())


def _new_pool(jobs: int) -> ProcessPoolExecutor:
    """A spawn pool of `jobs` workers, all started now.

    CPython (3.11-3.13) starts a spawn pool's workers one per `submit` as they are needed. When a worker dies,
    its manager thread marks the pool broken without the lock `submit` holds, so a `submit` already past its
    check can still start a worker after the manager has terminated the others; the manager then joins
    that worker forever (it waits on the call queue), and so does `shutdown`. Seen once in ~40 runs of the
    test of a worker dying amid many small files. With every worker started before the first task, no
    `submit` starts one. The workers are born ignoring SIGINT (`_children_ignore_sigint`): the early pool
    (`_EarlyPool`) starts them during the walk, and a Ctrl-C while one still imports printed its traceback.
    """
    ctx = get_context("spawn")
    cpus = worker_cpus(jobs)
    with _workers_environment(), _children_ignore_sigint(), _main_not_imported():
        pool = ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=ctx,
            initializer=_worker_init,
            initargs=(cpus, ctx.Value("i", 0)) if cpus else (),
        )
        if type(getattr(pool, "_processes", None)) is dict:  # before the manager thread takes it (1st submit)
            pool._processes = _Workers(pool._processes)  # type: ignore[attr-defined]
        launch = getattr(pool, "_launch_processes", None)
        if launch is not None and not getattr(pool, "_executor_manager_thread", True):
            launch()
    return pool


PIN_ENV = "FORENSICS_PIN_WORKERS"
"""Set to 0 to leave the workers unpinned (`worker_cpus`)."""


def worker_cpus(jobs: int) -> list[list[int]]:
    """The CPUs each worker of a pool of `jobs` is pinned to, a group of its own each (empty: not pinned).

    A worker is one process on one core: its main thread hands each polars operation to polars' one pool
    thread and waits for it, thousands of times a file. Left to the scheduler, those two threads land on
    different CPUs, each hand-off a cross-CPU wake-up (an interrupt between virtual CPUs on a VM) and, while
    the other CPU runs the other worker, a wait for it to be scheduled there. Pinned, a worker's threads
    share its CPU and the workers do not meet: on this 2-core VM the 6-hour 1,000-node bundle 27.3-29.0 ->
    25.7-26.3 s, the 4 GB Megatron mix 20.2-21.9 -> 19.7-20.8 s (alternated runs), a 16 MB Megatron range
    parsed alone 217-225 -> 183-205 ms of CPU.

    The CPUs this process may run on are shared out whole among the workers (`group_cpus`: one each when
    they are as many, a physical core's hardware threads together where there are more): the workers of
    another ingest on the same machine, pinned the same way, share every CPU with these as they would
    unpinned, not the first few. Not pinned when the workers outnumber the CPUs, on systems without
    `os.sched_setaffinity`, or with `FORENSICS_PIN_WORKERS=0`."""
    if jobs < 2 or not hasattr(os, "sched_setaffinity") or os.environ.get(PIN_ENV, "").strip() == "0":
        return []
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except OSError:
        return []
    if jobs > len(allowed):
        return []
    return group_cpus(allowed, _sibling_lists(allowed), jobs)


def group_cpus(cpus: Sequence[int], siblings: dict[int, list[int]], groups: int) -> list[list[int]]:
    """`cpus` cut into `groups` groups of `len(cpus) // groups` (the CPUs left over are in none), a physical
    core's hardware threads side by side (`siblings[c]`: those of `c`'s core; `c` alone where unknown)."""
    def core(c: int) -> tuple[int, int]:
        sib = siblings.get(c) or [c]
        return (min(sib), c)

    order = sorted(cpus, key=core)
    size = len(order) // groups
    return [order[i * size : (i + 1) * size] for i in range(groups)]


def _sibling_lists(cpus: Sequence[int]) -> dict[int, list[int]]:
    """Each CPU's core's hardware threads from sysfs (`thread_siblings_list`: `0,8` or `0-1`), where
    readable."""
    out: dict[int, list[int]] = {}
    for c in cpus:
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text()
            out[c] = parse_cpu_list(text)
        except (OSError, ValueError):
            pass
    return out


def parse_cpu_list(text: str) -> list[int]:
    """A Linux CPU list (`0-3,8,10-11`) as its CPUs."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def _pin_process(cpus: Sequence[int]) -> None:
    """Pin every thread of this process (and the threads it starts later, which inherit it) to `cpus`."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        with suppress(OSError):  # (a thread that has ended since)
            os.sched_setaffinity(tid, cpus)


WORKER_ENV = {
    "POLARS_MAX_THREADS": "1",
    "_RJEM_MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1,background_thread:false",
    "MALLOC_MMAP_THRESHOLD_": str(32 * 1024**2),
    "MALLOC_TRIM_THRESHOLD_": str(1024**3),
}
"""The environment a worker starts with.

- Each worker is one process on one core: polars' thread pool of one thread (it is sized when polars is first
  imported, which in a spawn worker is before any initializer runs, as the main module and the initializer's
  module import it; a pool of the machine's cores in every worker cost ~15 % more CPU on the 4 GB mix,
  threads contending with the other worker's).
- A worker keeps the memory it freed for its next chunk instead of handing it back to the system and taking
  it again, page by page: polars' allocator (jemalloc, `_RJEM_MALLOC_CONF`) does not purge freed pages, and
  Python's (glibc) keeps blocks up to 32 MB (a chunk's bytes) in its heap and does not trim it below 1 GB.
  Each 16 MB chunk allocates and frees a few hundred MB: on the 4 GB mix, the workers' page faults went from
  1.1 M to 0.19 M and their system CPU from 3.8 to 2.0 s (ingest 19.3 -> 17.5 s). A worker's memory then
  stays at its own high-water mark, so the ingest's peak is the sum of the workers' peaks rather than the
  peak of what they hold at once: 4 GB mix 0.97 -> 1.07 GB, the 1,000-node bundle (where the parent holds
  most) 1.35 -> 1.44 GB. A user's own setting of glibc's variables is kept (`USER_MAY_SET`); jemalloc's is
  not: polars puts its own defaults (500 ms decays) into `_RJEM_MALLOC_CONF` as it is imported, before
  whatever the variable held, so the value a worker inherits would never tell the user's settings apart.
"""
USER_MAY_SET = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def _worker_env() -> dict[str, str]:
    """`WORKER_ENV` without the variables of `USER_MAY_SET` this process's environment already sets."""
    return {k: v for k, v in WORKER_ENV.items() if k not in USER_MAY_SET or k not in os.environ}


@contextmanager
def _workers_environment() -> Iterator[None]:
    """`WORKER_ENV` set in this process's environment while workers start (a spawned process inherits it)."""
    env = _worker_env()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


PREFILL = True
"""Whether a pool run's workers fill dmon samples' bus ids from the GPU map the parent publishes
(`_GpuBoard`)."""
PREFILL_MIN_BYTES = 1024**3
"""... in a bundle of this many bytes or more. A smaller one's samples are likely few enough to hold (the
healthy 1,000-node hour: 688k): the parent writes them once, sorted as one table, and its fill costs little;
filled parts would make the table one of parts (`Outcomes.lazy`), for no gain measured (+2 %, in the
noise)."""
GPU_BOARD = "gpu-map.parquet"
"""Where in the work folder the parent publishes the GPU map of the inventory it has (`_GpuBoard`)."""
MAP_NAMES = ("smi", "bug-report", ".xml", ".csv", "query")
"""Words in the names of files that map a node's GPU indexes to bus ids (`nvidia-smi -q`, its XML, the default
table, `--query-gpu` CSV, a bug report): their batches go to the workers first (`_maps_first`)."""
NOT_MAP_NAMES = ("dmon", "pmon", "topo", "nvlink")
"""... unless their names hold one of these (nvidia-smi's other outputs)."""


class _GpuBoard:
    """The GPU map (`identity.gpu_map`) of the inventory rows the parent has taken so far, published at
    `path` for the workers each time it changes (`publish`, atomically): a worker fills the bus ids of the
    dmon samples it hands over from it (`_prefilled`), written as parts of the table the parent keeps as they
    are, instead of handing them to the parent to read, fill and write after the workers (the README's
    24-hour bundle: 15.4 M samples, ~10.6 s of the parent's CPU, ~5.7 s of wall time after the parse). The
    parent checks each such part against the whole inventory's map (`_misfilled`), so what the workers saw
    never changes the tables."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[pl.DataFrame] = []
        self.changed = False
        self.shown: pl.DataFrame | None = None

    def take(self, inventory: pl.DataFrame) -> None:
        """Note the GPU map of a task's `inventory` (`identity.gpu_map`)."""
        if not inventory.height:
            return
        gpus = identity.gpu_map(inventory)
        if gpus.height:
            self.rows.append(gpus)
            self.changed = True

    def publish(self) -> None:
        """Write the map anew where rows came since it was last written and changed it (the map of all the
        inventories taken, in their order, as `identity.gpu_map` of them all would give it)."""
        if not self.changed:
            return
        self.changed = False
        m = identity.latest_per_bus(pl.concat(self.rows, how="vertical_relaxed"))
        m = m.sort("node", "gpu_bus_id", "gpu_index")
        if self.shown is not None and m.equals(self.shown):
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            m.write_parquet(tmp)
            os.replace(tmp, self.path)
        except OSError:  # (a worker then finds no map, or the last one: the parent fills, as before)
            return
        self.shown = m


def _maps_first(tasks: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """`tasks` with the batches of files that map GPU indexes to bus ids (`_gives_map` of the batch's first
    file; a batch holds files of one name shape) first, each part in its order: the workers then read the
    nodes' inventories before their dmon loops, the largest files, which come first otherwise
    (`_GpuBoard`)."""
    first: list[tuple[Any, int]] = []
    rest: list[tuple[Any, int]] = []
    for t in tasks:
        (first if t[1] == BATCH and _gives_map(t[0][0]) else rest).append(t)
    return first + rest


def _gives_map(f: BundleFile) -> bool:
    """Whether `f`'s name says it likely maps GPU indexes to bus ids (`MAP_NAMES`, `NOT_MAP_NAMES`): a guess
    that orders the tasks only (the parent of a pool run does not import the parsers to detect formats)."""
    name = logical_name(f.path).rsplit("/", 1)[-1].lower()
    return any(w in name for w in MAP_NAMES) and not any(w in name for w in NOT_MAP_NAMES)


def _pool_pass(
    files: list[BundleFile],
    jobs: int,
    index: dict[int, int],
    work: Path,
    limits: Limits,
    year_hint: int | None,
    collected: datetime | None,
    tick: Callable[[BundleFile], None],
    outcomes: list[FileOutcome],
    task: Callable[..., FileOutcome] = ingest_file,
    splits: dict[str, _Split] | None = None,
    batch: int = 1,
    pool: ProcessPoolExecutor | None = None,
) -> tuple[list[BundleFile], list[BundleFile]]:
    """One pool over `files`; append outcomes; when the pool breaks, return the files of the tasks that had
    started (suspects: the first `jobs + 1` unfinished tasks, as workers take tasks in order) and the
    files whose tasks had not started or were not handed out (to run in a fresh pool).

    Raises:
        _PoolUnusable: not even a trivial task could run in a worker.
    """
    splits = splits or {}
    owner: dict[Any, tuple[Any, int]] = {}
    """future → (file, range index; -1 a whole file, -2 a split file's checksum; or (files...), BATCH)"""
    order: dict[Any, int] = {}
    """future → its place in the order tasks were handed out"""
    lost: list[Any] = []
    """futures failed by a broken pool"""
    results: dict[str, dict[int, Any]] = {}
    pool = pool or _new_pool(jobs)
    try:
        with _children_ignore_sigint():
            probe = pool.submit(_worker_alive)
        try:
            probe.result()
        except BrokenProcessPool:
            raise _PoolUnusable from None
        settled: set[str] = set()
        """split files already failed or lost: their remaining ranges are dropped as they come"""
        unsent: list[BundleFile] = []
        for f in files:
            if f.path in splits:
                results[f.path] = {}
        tasks = _batched(_tasks(files, splits), batch)
        board: _GpuBoard | None = getattr(outcomes, "board", None)
        gpus = None
        if board is not None:
            tasks = _maps_first(tasks)
            gpus = board.path
        per_node = Counter(f.node for f in files)
        with _children_ignore_sigint():
            for j, (f, k) in enumerate(tasks):
                try:
                    if k == BATCH:
                        spills = tuple(work / "parts" / str(index[id(g)]) for g in f)
                        fut = pool.submit(
                            _ingest_batch, task, f, spills, limits, year_hint, collected,
                            _handing(_alone(f, per_node), gpus),
                        )
                    elif k == -1:
                        spill = work / "parts" / str(index[id(f)])
                        fut = pool.submit(
                            _ingest_whole, task, f, limits, year_hint, collected, spill,
                            _handing(_alone((f,), per_node), gpus),
                        )
                    elif k == -2:
                        fut = pool.submit(hash_file, f)
                    else:
                        split = splits[f.path]
                        fut = pool.submit(
                            task, f, limits, year_hint, collected,
                            spill=work / "parts" / str(index[id(f)]) / str(k), span=split.spans[k],
                            parser_name=split.parser, first_line=split.first_line(k),
                            carried=split.carried(k),
                        )
                    owner[fut] = (f, k)
                    order[fut] = j
                except BrokenProcessPool:  # a worker died while work was handed out
                    unsent = _files_of(tasks[j:])
                    break
        left = len(owner)
        for fut in as_completed(owner):
            f, k = owner[fut]
            left -= 1
            try:
                got = fut.result()
            except BrokenProcessPool:
                lost.append(fut)
                continue
            except CONTAINED as exc:  # noqa: BLE001 - a failed task loses its files, not the run
                why = f"worker failed: {type(exc).__name__}: {exc}"
                if k == BATCH:
                    got = [_crashed(g, why) for g in f]
                else:
                    got = _crashed(f, why)
                    if k != -1 and f.path not in settled:
                        settled.add(f.path)
                        _drop(results.pop(f.path, {}))
                        k = -1
            if k != BATCH and f.path in settled and k != -1:
                _drop({k: got})
                continue
            if not left and not unsent:
                # the last result: the workers go (each keeps the memory it peaked at) before the parent
                # merges the last file's ranges, where its own peak usually is (a 5 GB NCCL log: ~0.4 GB)
                pool.shutdown(wait=True)
            _arrived(f, k, got, results, splits, outcomes, tick)
            if board is not None:
                board.publish()
    except BaseException:
        _kill_pool(pool)
        raise
    pool.shutdown(wait=True)
    lost.sort(key=order.__getitem__)
    suspects = _files_of([owner[fut] for fut in lost[: jobs + 1]])
    again = _files_of([owner[fut] for fut in lost[jobs + 1 :]]) + unsent
    for f in suspects + again:  # a split file that lost a range is run again: drop the ranges it has
        _drop(results.pop(f.path, {}))
    seen = {f.path for f in suspects}
    return suspects, [f for f in _unique(again) if f.path not in seen]


def _files_of(tasks: list[tuple[Any, int]]) -> list[BundleFile]:
    """The files of `tasks` (a batch's files in order), each once."""
    out: list[BundleFile] = []
    for f, k in tasks:
        out.extend(f if k == BATCH else (f,))
    return _unique(out)


def _unique(files: list[BundleFile]) -> list[BundleFile]:
    seen: set[str] = set()
    return [f for f in files if not (f.path in seen or seen.add(f.path))]  # type: ignore[func-returns-value]


DASK_CONNECT_TIMEOUT = "20s"
"""How long `--dask` waits for the scheduler to answer before it says it cannot reach it."""


def _dask_client(address: str) -> Any:
    """Connect to the Dask scheduler at `address`.

    Raises:
        UsageError: dask is not installed, or the scheduler cannot be reached.
    """
    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--dask needs Dask distributed: pip install 'gpu-forensics[dask]'") from None
    try:
        return Client(address, timeout=DASK_CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"cannot reach the Dask scheduler at '{address}': {exc}") from None


def _run_dask(
    files: list[BundleFile],
    client: Any,
    limits: Limits,
    year_hint: int | None,
    collected: datetime | None,
    tick: Callable[[BundleFile], None],
    work: Path | None = None,
) -> list[FileOutcome]:
    """Ingest `files` on a Dask cluster through `client`; tables come back in memory (no spill).

    A large plain log is parsed as byte ranges on several workers, as in the local pool (`_plan_split`).
    """
    from distributed import as_completed as dask_completed

    outcomes = Outcomes(work / "parts" / "parent" if work else None)
    splits = {f.path: sp for f in files if (sp := _plan_split(f, limits))}
    futures: list[Any] = []
    owner: dict[str, tuple[Any, int]] = {}
    results: dict[str, dict[int, Any]] = {}
    try:
        index = {id(f): i for i, f in enumerate(files)}
        results.update({f.path: {} for f in files if f.path in splits})
        # longest first (Dask runs tasks in about the order submitted); small files in batches
        for f, k in _batched(_tasks(files, splits), BATCH_FILES):
            if k == BATCH:
                key, spills = f"batch-{index[id(f[0])]}-{f[0].path}", (None,) * len(f)  # tables in memory
                fut = client.submit(
                    _ingest_batch, ingest_file, f, spills, limits, year_hint, collected, key=key, pure=False
                )
            elif k == -1:
                key = f"ingest-{index[id(f)]}-{f.path}"
                fut = client.submit(ingest_file, f, limits, year_hint, collected, key=key, pure=False)
            elif k == -2:
                fut = client.submit(hash_file, f, key=f"hash-{index[id(f)]}-{f.path}", pure=False)
            else:
                fut = client.submit(
                    ingest_file, f, limits, year_hint, collected,
                    span=splits[f.path].spans[k], parser_name=splits[f.path].parser,
                    first_line=splits[f.path].first_line(k),
                    key=f"ingest-{index[id(f)]}-{k}-{f.path}", pure=False,
                )
            futures.append(fut)
            owner[fut.key] = (f, k)
        for fut in dask_completed(futures):
            f, k = owner[fut.key]
            if k == BATCH:
                try:
                    got = fut.result()
                except CONTAINED as exc:  # noqa: BLE001 - a lost task loses its files, not the run
                    got = [_crashed(g, f"dask task failed: {type(exc).__name__}: {exc}") for g in f]
                _arrived(f, k, got, results, splits, outcomes, tick)
                continue
            if k != -1 and f.path not in results:
                continue  # a range of a file already failed
            try:
                got = fut.result()
            except CONTAINED as exc:  # noqa: BLE001 - a lost task loses one file, not the run
                results.pop(f.path, None)
                outcomes.append(_crashed(f, f"dask task failed: {type(exc).__name__}: {exc}"))
                tick(f)
                continue
            _arrived(f, k, got, results, splits, outcomes, tick)
    except BaseException:
        client.cancel(futures)
        raise
    return outcomes


@contextmanager
def _main_not_imported() -> Iterator[None]:
    """Workers spawned inside do not import this process's `__main__`.

    A spawned process runs the parent's main script again (as `__mp_main__`) before its first task, for the
    functions defined there; a worker's tasks are functions of modules it imports by name. The `forensics`
    console script imports the CLI (typer, rich: ~0.16 s of each worker's CPU), and a script without an
    `if __name__ == "__main__"` guard ran its ingest again in each worker, which then failed to start (the
    files were parsed in this process, one core idle). While workers start, `__main__` is a module with
    neither `__spec__` nor `__file__`, which `multiprocessing.spawn` leaves alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = ModuleType("__main__")
    try:
        yield
    finally:
        if main is None:
            del sys.modules["__main__"]
        else:
            sys.modules["__main__"] = main


@contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Ignore SIGINT while workers are spawned, so they are born ignoring it.

    A terminal's Ctrl-C goes to the whole process group; a worker still importing (before its
    initializer runs) would print a KeyboardInterrupt traceback. An ignored signal stays ignored
    across exec and Python then installs no handler, so only the parent sees Ctrl-C.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now (Ctrl-C, error): cancel queued work and terminate running workers."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    queue = getattr(pool, "_result_queue", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
    # A worker killed while writing its result leaves half a message in the result pipe, and the pool's
    # manager thread would wait for the rest forever (and the interpreter for that thread at exit):
    # closing this process's copy of the pipe's write end lets the reader see end-of-file instead.
    writer = getattr(queue, "_writer", None)
    if writer is not None:
        try:
            writer.close()
        except OSError:
            pass


def _ingest_bundle(
    bundle: Bundle,
    out: Path,
    work: Path,
    limits: Limits,
    jobs: int | None,
    year: int | None,
    progress: ProgressCallback | None,
    dask_client: Any = None,
    early: _EarlyPool | None = None,
) -> dict[str, Any]:
    started = time.monotonic()
    collected = datetime.fromtimestamp(bundle.collected_at, UTC) if bundle.collected_at else None
    year_hint = year or (collected.year if collected else None)
    files = sorted(bundle.files, key=lambda f: f.size, reverse=True)
    total_bytes = sum(f.size for f in files)
    jobs = jobs or min(os.cpu_count() or 1, 8)
    done = 0

    def tick(f: BundleFile) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(f.path, done, len(files))

    outcomes = Outcomes(work / "parts" / "parent")
    small = _small(len(files), total_bytes)
    if dask_client is not None:
        outcomes = _run_dask(files, dask_client, limits, year_hint, collected, tick, work)
    else:
        counter = ThreadPoolExecutor(1, thread_name_prefix="line-count")
        try:
            splits = {}
            if jobs > 1 and not small:
                splits = {f.path: s for f in files if (s := _plan_split(f, limits, counter))}
            if jobs <= 1 or small or (len(files) < 2 and not splits):
                place = {id(f): i for i, f in enumerate(files)}
                for f, k in _batched(_tasks(files, {}), BATCH_FILES):
                    group = f if k == BATCH else (f,)
                    spills = [work / "parts" / str(place[id(g)]) for g in group]
                    got = ingest_files(group, limits, year_hint, collected, spills)
                    for g, o in zip(group, got, strict=True):
                        outcomes.append(o)
                        tick(g)
            else:
                outcomes = _run_parallel(
                    files, jobs, work, limits, year_hint, collected, tick, splits=splits,
                    pool=early.take() if early else None,
                )
        finally:
            counter.shutdown(wait=False, cancel_futures=True)  # (nothing is left to count once parsed)
    parsed = time.monotonic()
    outcomes.sort(key=lambda o: o.row["path"])

    tables: dict[str, Any] = {}
    for t in TABLES:
        if t in ("files", "anomalies"):
            continue
        # a table too large to hold stays in its Parquet parts, a LazyFrame through the stages and the write
        # (and one with parts its workers filled from a map, which the identity stage may take back by part)
        big = t in PARENT_LAZY and (
            outcomes.rows(t) > HOLD_ROWS
            or outcomes.size_estimate(t) > HOLD_TABLE_BYTES
            or any(p.filled is not None for p in outcomes.parts.get(t, ()))
        )
        tables[t] = outcomes.lazy(t, work / "hive" / t) if big else outcomes.table(t)
    lazy = {t: lf for t, lf in tables.items() if isinstance(lf, pl.LazyFrame)}
    notes = list(bundle.notes)
    for o in outcomes:
        notes.extend(o.notes)
    merged = time.monotonic()
    tables = _bundle_stage("clock anchoring", timebase.anchor, tables, notes)

    def reconcile_years(tb: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        # (what the parts' writers counted holds for a large table no stage before has changed)
        return years.reconcile(tb, {t: k.years for t, k in outcomes.known.items() if tb.get(t) is lazy[t]})

    tables = _bundle_stage("year reconciliation", reconcile_years, tables, notes)
    rowwise: dict[str, identity.Fill] = {}

    def resolve_identity(tb: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        tb = _misfilled(tb, outcomes)
        new, stage_notes, fill = identity.resolve_rowwise(tb)
        # a large table no stage before has changed, which this one changes row for row: the parts of it
        # that are written parts of their own are filled as they are, not read, sorted and written again with
        # every other row (`_write_in_parts`; 1,000 nodes' dmon loops, 7.7 M samples given their bus ids: the
        # parent's ~5.6 s after the workers)
        for t, lf in lazy.items():
            if fill is not None and tb.get(t) is lf and new.get(t) is not lf:
                rowwise[t] = fill
        return new, stage_notes

    tables = _bundle_stage("GPU identity resolution", resolve_identity, tables, notes)
    files_df = (
        conform(pl.DataFrame([o.row for o in outcomes], infer_schema_length=None), "files")
        if outcomes
        else empty("files")
    )
    tables["files"] = files_df

    tmp_tables = work / "tables"
    staged = time.monotonic()
    order = list(tables)
    held = {t: tables.pop(t) for t in order if isinstance(tables[t], pl.DataFrame)}
    rows = {t: df.height for t, df in held.items()}

    def write_held(t: str) -> None:
        write_table(_sorted(held.pop(t), t), t, tmp_tables)

    # the tables held in memory two at a time (a sort or a write has stretches on one thread); a large
    # table's parts are written two at a time by `_write_in_parts`, one table after the other
    with ThreadPoolExecutor(WRITE_THREADS) as threads:
        list(threads.map(write_held, list(held)))
    for t in list(tables):
        # a stage that changed a large table's rows gave a new LazyFrame: then no part is kept as it is
        # (or changed by the identity stage alone, row for row: `rowwise`)
        unchanged = tables[t] is lazy.get(t) or t in rowwise
        as_is = outcomes.as_is.get(t, {}) if unchanged else {}
        known = outcomes.known.get(t) if unchanged else None
        rows[t] = _write_in_parts(
            tables.pop(t), t, tmp_tables, as_is, known.by_part if known else None, rowwise.get(t),
            outcomes.whole.get(t),
        )
    rows = {t: rows[t] for t in order}
    final = out / "tables"
    old = work / "replaced-tables"
    if final.exists():
        final.rename(old)
    tmp_tables.rename(final)

    manifest = {
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "bundle": bundle.root,
        "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "collected_at": collected.isoformat() if collected else None,
        "year_hint": year_hint,
        "limits": {"max_file_bytes": limits.max_file_bytes, "max_expand_bytes": limits.max_expand_bytes},
        "totals": {
            "files": len(outcomes),
            "bytes": int(files_df["bytes"].fill_null(0).sum()),
            "lines": int(files_df["lines"].fill_null(0).sum()),
            "parsed_lines": int(files_df["parsed"].fill_null(0).sum()),
            "unrecognized_lines": int(files_df["unrecognized"].fill_null(0).sum()),
            "rows": rows,
        },
        "notes": notes,
        "timings_s": {  # where the ingest's time went (wall clock)
            "parse": round(parsed - started, 3),
            "merge": round(merged - parsed, 3),
            "bundle_stages": round(staged - merged, 3),
            "write": round(time.monotonic() - staged, 3),
        },
        "files": [{**o.row, "unrecognized_examples": o.examples} for o in outcomes],
    }
    write_json(out / "manifest.json", manifest)
    return manifest


def _misfilled(tables: dict[str, Any], outcomes: Outcomes) -> dict[str, Any]:
    """`tables` (as the identity stage gets them) with the bus ids that workers filled from a GPU map other
    than the whole inventory's on the part's nodes (`Part.filled`: the map they saw was not yet whole) taken
    back, so that the stage fills those rows as any (the parts are then no longer kept as they are). Parts
    filled from the same map rows keep their fill, the stage's own."""
    if not outcomes.filled:
        return tables
    inv = tables.get("inventory")
    gm = identity.map_of(inv) if isinstance(inv, pl.DataFrame) else None
    out = dict(tables)
    for t, filled in outcomes.filled.items():
        bad = sorted(
            k for k, used in filled.items() if gm is None or gm.index_rows(r[0] for r in used) != used
        )
        lf = out.get(t)
        if not bad or not isinstance(lf, pl.LazyFrame):
            continue
        taken = pl.col(PART_COLUMN).is_in(pl.Series(bad, dtype=pl.Int32).implode())
        out[t] = lf.with_columns(gpu_bus_id=pl.when(taken).then(None).otherwise(pl.col("gpu_bus_id")))
        for k in bad:
            outcomes.as_is.get(t, {}).pop(k, None)
    return out


def _bundle_stage(
    what: str,
    stage: Callable[[dict[str, pl.DataFrame]], tuple[dict[str, pl.DataFrame], list[str]]],
    tables: dict[str, pl.DataFrame],
    notes: list[str],
) -> dict[str, pl.DataFrame]:
    """Run a whole-bundle stage; a bug in it keeps the tables as they were and is noted, not fatal."""
    try:
        new, stage_notes = stage(tables)
    except CONTAINED as exc:  # noqa: BLE001 - the parsed tables are still worth writing
        notes.append(f"{what} failed and was skipped: {type(exc).__name__}: {str(exc)[:300]}")
        notes.append(traceback.format_exc(limit=-3))
        return tables
    notes.extend(stage_notes)
    return new


MERGE_EVERY = 256
"""Small per-file frames are merged into one after this many: thousands of tiny frames cost far more
memory than their rows (per-column buffers), so the parent keeps few large frames instead."""


HOLD_BYTES = 256 * 1024**2
"""The parent keeps the in-memory tables workers return up to about this much, then writes them to
Parquet parts of its own: a bundle of many medium files (a day of nvidia-smi loops on every node) never
piles up in memory."""
HOLD_ROWS = 1_000_000
"""A table of `LARGE_TABLES` with more rows than this goes through the whole-bundle stages as a LazyFrame
over its parts and is written in sorted parts of at most `PART_ROWS` rows (`_write_in_parts`)."""
HOLD_TABLE_BYTES = 512 * 1024**2
"""... or, whatever its rows, that would take more memory than this."""
LARGE_TABLES = ("steps", "gpu_samples")
"""The tables whose size follows the logs' volume (a step line per rank, a sample per GPU per second): workers
write them as sorted parts with their `PartStats`."""
PARENT_LAZY = (*LARGE_TABLES, "events")
"""The tables the parent takes through the whole-bundle stages as a LazyFrame over their parts when larger than
`HOLD_ROWS` or `HOLD_TABLE_BYTES`, and writes in sorted parts (`_write_in_parts`): `LARGE_TABLES`, and the
events, whose size follows the logs' volume where a flood repeats a line on every node (every GPU of 1,000 nodes
logging Xid 13 and every rank an NCCL IB error: 7.4 M events, ~3 GB held, their messages and details most of
it). The stages read of the events only the rows of local and monotonic clocks and those that may pair with
them (`forensics.timebase`); inventory and comms stay in memory."""
PART_ROWS = 1_000_000
WRITE_THREADS = 2
"""Pieces of a large table collected, sorted and written at once (`_write_in_parts`)."""
PART_BYTES = 192 * 1024**2
"""A part holds at most PART_ROWS rows and about this much memory (collected, sorted, written at once)."""
SIZE_SAMPLE_ROWS = 10_000
PART_COLUMN = "__part"
"""The column `Outcomes.lazy` adds to a large table: which spilled part a row comes from (-1: held in memory)."""


class _Known(NamedTuple):
    """What `Outcomes.lazy` knows of a large table's rows from its parts' `PartStats`, not reading them."""

    by_part: pl.DataFrame
    """Rows, first and last line, rows without a line of each (node, file, part): `_write_in_parts`' plan."""
    years: years.Known
    """For `years.reconcile`."""


_BY_PART_SCHEMA = {
    "node": pl.String,
    "file": pl.String,
    PART_COLUMN: pl.Int32,
    "n": pl.UInt32,
    "lo": pl.Int64,
    "hi": pl.Int64,
    "nulls": pl.UInt32,
}
"""`_Known.by_part`: as `_write_in_parts` scans it."""


def _known(parts: list[Part], held: pl.DataFrame | None) -> _Known:
    """`_Known` of a large table from its parts (K: their place in `parts`), each with its `PartStats`, read
    back as `Outcomes.lazy` reads them (a part's line offset added, its node given to rows of node 'unknown'),
    and from its rows held in memory (`held`, part -1)."""
    rows: list[tuple[Any, ...]] = []
    inferred: list[int] = []
    dated: list[tuple[int, int]] = []
    stats = [(k, p.stats, p.line_offset, p.node) for k, p in enumerate(parts)]
    if held is not None:
        stats.append((-1, part_stats(held), 0, None))
    for k, st, offset, fill in stats:
        assert st is not None
        for node, file, n, lo, hi, nulls in st.ranges:
            if fill and node == "unknown":
                node = fill
            if offset:
                lo = None if lo is None else lo + offset
                hi = None if hi is None else hi + offset
            rows.append((node, file, k, n, lo, hi, nulls))
        if st.inferred:
            inferred.append(k)
        dated.extend(st.dated)
    return _Known(
        pl.DataFrame(rows, schema=_BY_PART_SCHEMA, orient="row"),
        years.Known(
            pl.col(PART_COLUMN).is_in(pl.Series(inferred, dtype=pl.Int32).implode()) if inferred else None,
            pl.DataFrame(dated, schema={"b": pl.Int64, "n": pl.Int64}, orient="row"),
        ),
    )


class Outcomes(list):  # type: ignore[type-arg]
    """The files' outcomes as they arrive; their tables are taken out and merged (or spilled) as they come."""

    def __init__(self, spill: Path | None = None) -> None:
        super().__init__()
        self.frames: dict[str, list[pl.DataFrame]] = {}
        self.merged: dict[str, int] = {}
        """how many of a table's frames (at the head of its list) are merged blocks"""
        self.parts: dict[str, list[Part]] = {}
        self.spill = spill
        self.held = 0
        self.n_spills = 0
        self.as_is: dict[str, dict[int, Path]] = {}
        """table -> {K: file} of the parts `lazy` moved to `__part=K` that hold their rows as the table will
        (`Part.as_is`): `_write_in_parts` may take such a file as it is; and those of the parts that hold them
        as a spilled part (`Part.kept_whole`), which it reads and writes once"""
        self.whole: dict[str, dict[int, Part]] = {}
        """table -> {K: part} of the latter (the part at its place in `__part=K`)"""
        self.known: dict[str, _Known] = {}
        """table -> what `lazy` knows of its rows from the parts' `PartStats` (when every part has them)"""
        self.filled: dict[str, dict[int, tuple[tuple[Any, ...], ...]]] = {}
        """table -> {K: the GPU map rows its worker filled it from} of the parts `lazy` moved to `__part=K`
        that were filled so (`Part.filled`)"""
        self.board: _GpuBoard | None = None
        """Where the GPU map of the inventory taken so far is published, in a pool run (`_GpuBoard`)."""

    def append(self, o: FileOutcome) -> None:  # type: ignore[override]
        if self.board is not None and "inventory" in o.tables:
            self.board.take(o.tables["inventory"])
        for t, df in o.tables.items():
            frames = self.frames.setdefault(t, [])
            frames.append(df)
            self.held += df.estimated_size()
            # the small frames that arrived since the last merge become one block (the blocks merged so far
            # are not copied again: merging everything each time was quadratic in the bundle's files)
            merged = self.merged.get(t, 0)
            if len(frames) - merged > MERGE_EVERY:
                frames[merged:] = [_joined(frames[merged:], rechunk=True)]
                self.merged[t] = merged + 1
        o.tables = {}
        for t, paths in o.parts.items():
            self.parts.setdefault(t, []).extend(paths)
        super().append(o)
        if self.spill is not None and self.held > HOLD_BYTES:
            self._spill()

    def _spill(self) -> None:
        assert self.spill is not None
        self.spill.mkdir(parents=True, exist_ok=True)
        for t, frames in self.frames.items():
            if frames:
                target = self.spill / f"{t}-{self.n_spills}.parquet"
                # (no statistics, as a worker's spill: a scan picks parts by their `__part` folder; writing
                # and reading back ~400 MB of frames 0.64 -> 0.48 s of CPU)
                df = _joined(frames)
                df.write_parquet(target, compression="lz4", statistics=False)
                stats = part_stats(df) if t in LARGE_TABLES else None
                self.parts.setdefault(t, []).append(Part(str(target), rows=df.height, stats=stats))
        self.n_spills += 1
        self.frames = {}
        self.merged = {}
        self.held = 0

    def part_rows(self, table: str) -> int:
        """Rows of `table` in its spilled parts (as their writers counted them, else read from the footers:
        each footer read is a polars scan of ~0.8 ms, and a 1,000-node bundle hands the parent ~2,000 parts,
        whose rows it asks for twice: 3.2 s of the parent's CPU before the stages)."""
        return sum(parquet_rows(p.path) if p.rows is None else p.rows for p in self.parts.get(table, ()))

    def rows(self, table: str) -> int:
        """Rows of `table` so far (in memory and in parts)."""
        return sum(df.height for df in self.frames.get(table, ())) + self.part_rows(table)

    def size_estimate(self, table: str) -> float:
        """Memory `table` would take if held (its rows times the size of a row of its first part)."""
        parts = self.parts.get(table, ())
        held = sum(df.estimated_size() for df in self.frames.get(table, ()))
        if not parts:
            return held
        sample = pl.scan_parquet(parts[0].path, glob=False).head(SIZE_SAMPLE_ROWS).collect()
        sample = _completed(sample, parts[0], table)
        return held + sample.estimated_size() / max(1, sample.height) * self.part_rows(table)

    def lazy(self, table: str, folder: Path) -> pl.LazyFrame:
        """`table` as a LazyFrame over its parts and in-memory frames (nothing read yet), with a column
        `PART_COLUMN`: K for the rows of part K, -1 for rows held in memory.

        The parts are moved to `folder/__part=K/` and scanned as one hive-partitioned dataset, so a filter on
        `PART_COLUMN` opens only those parts (`_write_in_parts`: a bundle of 300 parts written in 30 pieces
        would otherwise read every part 30 times). Line offsets and content nodes are applied by part.
        """
        parts = self.parts.pop(table, [])
        frames = self.frames.pop(table, [])
        self.merged.pop(table, None)
        columns = [*get_schema(table), PART_COLUMN]
        scans = []
        if parts:
            offsets: dict[int, int] = {}
            nodes: dict[int, str] = {}
            consts: dict[str, dict[int, str]] = {}
            paths = []
            for k, p in enumerate(parts):
                home = folder / f"{PART_COLUMN}={k}"
                home.mkdir(parents=True, exist_ok=True)
                paths.append(home / "part.parquet")
                os.replace(p.path, paths[-1])
                if p.as_is or p.kept_whole:
                    self.as_is.setdefault(table, {})[k] = paths[-1]
                if p.kept_whole:
                    self.whole.setdefault(table, {})[k] = p._replace(path=str(paths[-1]))
                if p.filled is not None:
                    self.filled.setdefault(table, {})[k] = p.filled
                if p.line_offset:
                    offsets[k] = p.line_offset
                if p.node:
                    nodes[k] = p.node
                for c, v in p.consts:
                    consts.setdefault(c, {})[k] = v
            schema = {PART_COLUMN: pl.Int32}
            # the paths listed, not globbed: OUT may hold glob characters ('[')
            # (a part holds only the columns with values: the others come back null)
            lf = pl.scan_parquet(
                paths,
                hive_partitioning=True,
                hive_schema=schema,
                glob=False,
                schema=get_schema(table),
                missing_columns="insert",
            )
            part = pl.col(PART_COLUMN)
            if consts:  # (a part that left a column out reads it null: its one value back)
                lf = lf.with_columns(pl.coalesce(c, _const_values(at)).alias(c) for c, at in consts.items())
            if offsets:
                lf = lf.with_columns(pl.col("line") + part.replace_strict(offsets, default=0, return_dtype=pl.Int64))
            if nodes:
                fill = _const_values(nodes)  # (a node or two over hundreds of parts: no lookup a row)
                unknown = (pl.col("node") == "unknown") & fill.is_not_null()
                lf = lf.with_columns(node=pl.when(unknown).then(fill).otherwise(pl.col("node")))
            scans.append(lf.select(columns))
        held = None
        if frames or not scans:
            held = conform(_joined(frames), table) if frames else empty(table)
            scans.append(held.lazy().with_columns(pl.lit(-1, pl.Int32).alias(PART_COLUMN)).select(columns))
        if table in LARGE_TABLES and all(p.stats is not None for p in parts):
            self.known[table] = _known(parts, held)
        return pl.concat(scans, how="vertical") if len(scans) > 1 else scans[0]

    def table(self, table: str) -> pl.DataFrame:
        """One table from the merged frames and the spilled Parquet parts (row order: the sort decides)."""
        frames = list(self.frames.pop(table, []))
        self.merged.pop(table, None)
        parts = self.parts.get(table, [])
        # (hundreds of small parts of a large file's ranges: read two at a time, as a read waits on the disk
        # and its decoding leaves the GIL; they keep their order)
        with ThreadPoolExecutor(WRITE_THREADS) as threads:
            frames.extend(threads.map(lambda p: _read_part(p, table), parts))
        if not frames:
            return empty(table)
        return conform(_joined(frames, rechunk=True) if len(frames) > 1 else frames[0], table)


FEW_CONSTS = 64
"""`_const_values`: a column with at most this many distinct values left out of parts is restored by a chain of
`when`s, one a value; with more, by a lookup of the part number."""


def _const_values(at: dict[int, str]) -> pl.Expr:
    """The String value a column left out of parts (`Part.consts`) had in every row of part K (`at`: K -> value;
    null for the other parts), from `PART_COLUMN`.

    A column of few values (the quality of the times, the source: one or two values over hundreds of parts) is
    a `when` a value over the parts that hold it: a lookup of each row's part (`replace_strict`, a join) made a
    string a row, and a scan of a large table for its dated times (the year reconciliation: 12.4 M steps rows)
    held ~650 MB more at its peak. On 250 parts of 50k rows: that scan 1.0 s and 656 MB -> 0.43 s and 173 MB, the
    final write's collect of its pieces 1.3 -> 0.85 s. Past `FEW_CONSTS` values (a node or file per part) the
    chain costs more than the lookup (250 values: the pieces 1.1 -> 2.0 s of CPU)."""
    part = pl.col(PART_COLUMN)
    by_value: dict[str, list[int]] = {}
    for k, v in at.items():
        by_value.setdefault(v, []).append(k)
    if len(by_value) > FEW_CONSTS:
        return part.replace_strict(at, default=None, return_dtype=pl.String)
    chain: Any = pl
    for v, ks in by_value.items():
        chain = chain.when(part.is_in(pl.Series(ks, dtype=pl.Int32))).then(pl.lit(v, dtype=pl.String))
    return chain.otherwise(pl.lit(None, dtype=pl.String))


def _joined(frames: list[pl.DataFrame], rechunk: bool = False) -> pl.DataFrame:
    """A table's frames as they arrived, one after the other: each conformed, but for the columns of nulls
    pooled frames send typeless (`_nulls_typeless`), which take the others' dtype here."""
    return pl.concat(frames, how="vertical_relaxed", rechunk=rechunk) if len(frames) > 1 else frames[0]


_SORT_KEYS = {
    "events": ("node", "gpu_index", "ts", "file", "line"),
    "steps": ("node", "rank", "step", "file", "line"),
    "gpu_samples": ("node", "gpu_index", "ts", "file", "line"),
    "inventory": ("node", "component", "gpu_index", "attribute", "file", "line"),
    "comms": ("record", "node", "rank", "file", "line"),
    "files": ("path",),
}


def _write_in_parts(
    lf: pl.LazyFrame,
    table: str,
    folder: Path,
    as_is: dict[int, Path] | None = None,
    by_part: pl.DataFrame | None = None,
    rowwise: identity.Fill | None = None,
    whole: dict[int, Part] | None = None,
) -> int:
    """Write a table too large to hold as sorted parts of at most `PART_ROWS` rows; return its rows.

    A spilled part in `as_is` (K -> its file, which holds its rows as the table will, `Outcomes.as_is`) that
    holds every row of each of its (node, file) pairs, and enough rows to stand alone (`_part_blocks`), is a
    part of the table as it is: its file, hard-linked (copied where links are refused) and not read. A worker
    wrote it so (4 GB mix: the parent's ~7 s of CPU reading, checking and writing 11.5 M rows again; 1,000
    nodes' `--query-gpu` loops, 5.8 M samples: ~11 s, of which the workers' sort and write take ~5 back).
    With `rowwise` (a stage's fill of the rows, `identity.resolve_rowwise`, which `lf` holds applied), such a
    part is read, filled, sorted where the fill moved a row, and written: its rows as `lf` has them. A part of
    `as_is` in `whole` (K -> its `Part`, `Part.kept_whole`: the rows of a written part, as a spilled part) is
    read with its columns restored (`_completed`), filled with `rowwise` where given, and written so too.
    The other rows are cut by (node, file) in sorted order, a (node, file) with more rows than a part by line
    ranges; each part is collected, sorted by the table's keys and written (`write_table`), so memory holds
    `WRITE_THREADS` parts at a time.

    Each part is sorted, and each (node, file) pair's rows are in one part (or, for a pair larger than a
    part, in parts of consecutive line ranges); the node ranges of parts may overlap (a batch of four
    nodes' CSV loops kept as it is, the same nodes' `-q` snapshots in a part written here). A reader that
    needs one order across parts sorts (`read_table` concatenates them in part order).
    """
    as_is = as_is or {}
    if by_part is None:  # (else what the parts' writers counted: `_Known.by_part`)
        by_part = _scan_by_part(lf)
    counts = (
        by_part.group_by("node", "file")
        .agg(pl.col("n").sum(), pl.col("lo").min(), pl.col("hi").max())
        .sort("node", "file", nulls_last=True)
    )
    # rows per part from the memory a row takes (a step with a Megatron timer breakdown holds ~1 KB of JSON)
    sample = lf.head(SIZE_SAMPLE_ROWS).collect().drop(PART_COLUMN)
    per_row = sample.estimated_size() / max(1, sample.height)
    part_rows = min(PART_ROWS, max(1_000, int(PART_BYTES // max(1.0, per_row))))
    del sample
    # A part is a spilled part kept as it is, a run of consecutive (node, file) pairs in sorted order (less
    # those of the kept parts), or one line range of a pair larger than a part: either way a condition of
    # constant size (a bundle has thousands of pairs), which the scan of the spilled parts applies as it
    # reads.
    # Each piece also names the parts that hold its rows (from `by_part`), so its scan opens those only.
    # A piece: its rows (a condition on the table), the parts that hold some (from `by_part`), and which
    # rows of `by_part` it holds whole (a part all of whose rows it holds, and only those, is kept as is).
    pieces: list[tuple[pl.Expr, list[int], pl.Expr]] = []
    run: list[tuple[str, str]] = []
    size = 0
    firsts, taken = _part_blocks(by_part, counts, as_is, part_rows)
    # (the kept parts hold every row of their pairs: a run between or around their pairs leaves them out)
    unkept = ~pl.col(PART_COLUMN).is_in(sorted(firsts.values())) if firsts else pl.lit(True)

    def holding(where: pl.Expr) -> list[int]:
        return sorted(by_part.filter(where).get_column(PART_COLUMN).unique().to_list())

    def close_run() -> None:
        nonlocal run, size
        if run:
            where = _pair_range(run[0], run[-1]) & unkept
            pieces.append((where, holding(where), where))
        run, size = [], 0

    pairs = counts.rows()
    at = 0
    while at < len(pairs):
        if at in firsts:  # (a part kept as it is: a piece of its own, where its first pair comes)
            where = pl.col(PART_COLUMN) == firsts[at]
            pieces.append((where, [firsts[at]], where))
        if at in taken:
            at += 1
            continue
        node, file, n, lo, hi = pairs[at]
        at += 1
        if lo is not None and n > part_rows:
            close_run()
            pair = (pl.col("node") == node) & (pl.col("file") == file)
            spans = by_part.filter(pair & pl.col("lo").is_not_null()).sort("lo").select("lo", "hi", "n")
            for i, (a, b) in enumerate(_line_cuts(spans.rows(), lo, hi, n, part_rows)):
                # line ranges; rows without a line number go with the first
                in_range = pl.col("line").is_between(a, b, closed="left")
                overlaps = (pl.col("lo") < b) & (pl.col("hi") >= a)
                within = pair & (pl.col("lo") >= a) & (pl.col("hi") < b)
                if i == 0:  # (the rows without a line, of whichever part, go with the first piece)
                    in_range, overlaps = in_range | pl.col("line").is_null(), overlaps | (pl.col("nulls") > 0)
                else:
                    within = within & (pl.col("nulls") == 0)
                pieces.append((pair & in_range, holding(pair & overlaps), within))
            continue
        if size and size + n > part_rows:
            close_run()
        run.append((node, file))
        size += n
    close_run()

    # (`by_part`'s rows of each part kept as it is, taken apart once: a filter of the whole of it a piece was
    # ~0.3 ms, 0.13 s of the parent's time after the workers for the 6-hour bundle's 400 parts)
    of_part = (
        by_part.filter(pl.col(PART_COLUMN).is_in(list(as_is))).partition_by(PART_COLUMN, as_dict=True)
        if as_is
        else {}
    )

    def kept(k: int) -> tuple[int, int] | None:
        """The part (K in `as_is`) that piece `k` is, whole, and its rows."""
        _, held, within = pieces[k]
        if len(held) != 1 or held[0] not in as_is:
            return None
        rows = of_part.get((held[0],))
        if rows is None:
            return (held[0], 0)  # (no row of it in the plan: whole, of no row)
        all_rows = rows.filter(within.fill_null(False)).height == rows.height
        return (held[0], int(rows.get_column("n").sum())) if all_rows else None

    keep = {k: part for k in range(len(pieces)) if (part := kept(k)) is not None}
    whole = whole or {}

    def write(k: int) -> int:
        name = f"part-{k:05d}.parquet"
        if k in keep:
            at, n = keep[k]
            path = as_is[at]
            if rowwise is None and at not in whole:
                _keep_part(path, folder / table / name)
                return n
            # (filled row for row: its rows in their order, sorted again where an index was filled, a sort
            # key; a dmon part of 77k samples ~40 ms of CPU, against ~140 through a piece's scan and sort)
            df = pl.read_parquet(path, hive_partitioning=False)
            if at in whole:
                df = _completed(df, whole[at], table)
            moved = False
            if rowwise is not None:
                missing = df.get_column("gpu_index").null_count() if "gpu_index" in df.columns else 0
                filled = rowwise(df)
                if filled is df and at not in whole:  # (nothing in it to fill: the file as it is)
                    _keep_part(path, folder / table / name)
                    return n
                df = filled
                moved = "gpu_index" in df.columns and df.get_column("gpu_index").null_count() != missing
            if not moved:
                # (its writer sorted it, and a fill that gave no index, the one sort key it fills, moved no
                # row: written without the sort's check, ~15 ms of a dmon part's ~55)
                write_table(df, table, folder, name=name)
                return df.height
        else:
            df = lf.filter(pl.col(PART_COLUMN).is_in(pieces[k][1]) & pieces[k][0]).collect().drop(PART_COLUMN)
        write_table(_sorted(df, table), table, folder, name=name)
        return df.height

    # Two pieces at a time: the stretches of a piece's collect, sort and write that run on one thread leave
    # a core idle otherwise (4 GB mix: 5.5 -> ~4 s for the two large tables; memory holds two pieces)
    with ThreadPoolExecutor(WRITE_THREADS) as threads:
        total = sum(threads.map(write, range(len(pieces))))
    if total == 0:
        write_table(empty(table), table, folder)
    return total


def _scan_by_part(lf: pl.LazyFrame) -> pl.DataFrame:
    """Rows, first and last line and rows without a line of each (node, file, part) of a large table (`lf`, as
    `Outcomes.lazy` gives it), read from its parts."""
    return lf.group_by("node", "file", PART_COLUMN).agg(_RANGE_AGGS).collect()


def _part_blocks(
    by_part: pl.DataFrame, counts: pl.DataFrame, as_is: dict[int, Path], part_rows: int
) -> tuple[dict[int, int], set[int]]:
    """The parts of `as_is` that are parts of the table as they are: each holds every row of each of its
    (node, file) pairs of `counts` (a batch of small files, `_batched`; a whole file), with `part_rows //
    SOLO_SHARE` to `part_rows` rows (as `_line_cuts` keeps a large file's parts). Returned: the first pair
    of each (its row in `counts`) -> K, and the rows in `counts` of all their pairs. `by_part`: rows per
    (node, file, part)."""
    if not as_is or not counts.height:
        return {}, set()
    at = counts.select("node", "file", total="n").with_row_index("i")
    held = by_part.filter(pl.col(PART_COLUMN).is_in(list(as_is))).join(
        at, on=["node", "file"], how="left", nulls_equal=True
    )
    whole = (
        held.group_by(PART_COLUMN)
        .agg(
            first=pl.col("i").min(),
            rows=pl.col("n").sum(),
            whole=(
                (pl.col("n") == pl.col("total")) & pl.col("node").is_not_null() & pl.col("file").is_not_null()
            ).all(),
        )
        .filter(pl.col("whole") & pl.col("rows").is_between(part_rows // SOLO_SHARE, part_rows))
    )
    firsts = {int(i): int(k) for k, i in whole.select(PART_COLUMN, "first").iter_rows()}
    taken = held.filter(pl.col(PART_COLUMN).is_in(whole.get_column(PART_COLUMN).implode())).get_column("i")
    return firsts, set(taken.to_list())


def _keep_part(part: Path, target: Path) -> None:
    """Put a spilled part that holds its rows as the table will (`Part.as_is`) at `target` as it is (a hard
    link; a copy where links are refused), synced as `write_table` syncs."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(part, target)
    except OSError:
        with atomic_path(target) as tmp:
            shutil.copyfile(part, tmp)
    else:
        with open(target, "rb+") as fh:
            os.fsync(fh.fileno())


def _line_cuts(
    spans: list[tuple[int, int, int]], lo: int, hi: int, n: int, part_rows: int
) -> list[tuple[int, int]]:
    """Half-open line ranges that cut a (node, file) of `n` rows, lines `lo`..`hi`, into pieces of at most
    about `part_rows` rows; `spans`: (first line, last line, rows) of its rows in each part that has some,
    in order.

    When the parts hold disjoint line ranges (a large file's byte ranges, each spilled, sorted, by a worker),
    a part of `part_rows // SOLO_SHARE` rows or more is a piece of its own (several if it holds more than
    `part_rows`): a piece that is one sorted part is written without a sort. Smaller parts in a row are one
    piece, up to `part_rows`. Otherwise the lines are cut into equal ranges.
    """

    def equal(lo: int, end: int, n: int) -> list[tuple[int, int]]:
        step = max(1, -(-(end - lo) // -(-n // part_rows)))
        return [(a, min(a + step, end)) for a in range(lo, end, step)]

    if len(spans) < 2 or any(prev[1] >= nxt[0] for prev, nxt in zip(spans, spans[1:], strict=False)):
        return equal(lo, hi + 1, n)
    ends = [s[0] for s in spans[1:]] + [hi + 1]
    cuts: list[tuple[int, int]] = []
    group: list[int] = []  # [first line, end, rows] of the small parts gathered so far
    for (a, _, m), end in zip(spans, ends, strict=True):
        if group and (m >= part_rows // SOLO_SHARE or group[2] + m > part_rows):
            cuts.append((group[0], group[1]))
            group = []
        if m >= part_rows // SOLO_SHARE:
            cuts.extend(equal(a, end, m))
        elif group:
            group[1:] = [end, group[2] + m]
        else:
            group = [a, end, m]
    if group:
        cuts.append((group[0], group[1]))
    return cuts


SOLO_SHARE = 64
"""`_line_cuts`: a part of a large file is written alone when it holds at least 1/SOLO_SHARE of a written
part's rows (the written parts of a large table stay that large). A 16 MB range of a Hugging Face Trainer
log gives ~51k step rows: at 1/16 of a million they were read back, sorted and written again in pieces of a
million after every worker had finished (4 GB mix: ~1.1 s of the parent's wall time, one core idle); at 1/64
(~16k rows) each range's part is kept as the worker wrote it."""


def _pair_range(first: tuple[str, str], last: tuple[str, str]) -> pl.Expr:
    """Rows whose (node, file) lies between `first` and `last` in lexicographic order, both included."""
    node, file = pl.col("node"), pl.col("file")
    after_first = (node > first[0]) | ((node == first[0]) & (file >= first[1]))
    before_last = (node < last[0]) | ((node == last[0]) & (file <= last[1]))
    return after_first & before_last


NATIVE_SORT_ROWS = 100_000
"""`_sorted` leaves a frame of fewer rows to polars' own multi-column sort (`NATIVE_SORT_ROWS_OF` for some
tables): `sort_order`'s packed keys cost a few ms of calls whatever the rows, and a frame in order or nearly
(a batch of rank logs' steps, an inventory) sorts faster in polars. Measured in the workers of the 6-hour
bundle's first 100 nodes, frames of 40-100k rows, polars against packed keys: steps (25 frames) 59 / 109 ms,
inventory 77 / 107; the parent's pieces of a million rows gain from packed keys."""
NATIVE_SORT_ROWS_OF = {"gpu_samples": 40_000}
"""Tables whose frames sort by packed keys from fewer rows: GPUs interleaved row by row, polars against packed
keys, one thread: a 16 MB `--query-gpu` range's 75k rows 18.8 / 11.7 ms (23k rows 4.5 / 5.7, 40k 13.4 / 11.1);
the 6-hour bundle's worker batches of 40-100k rows (14 frames) 204 / 179 ms."""
FEWER_KEYS_ROWS = 8192
"""Rows from which `_sorted` sorts a frame below the native threshold by fewer keys (`_stable_sorted`), whose
checks cost ~1 ms whatever the rows: dmon samples, one thread, polars' sort against it: 500 rows 0.16 / 1.1
ms, 5,000 0.8 / 1.3, 15,000 2.6 / 1.6."""


def _sorted(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """`df` in the order of its table's sort keys, nulls last, ties in their order (a stable sort)."""
    keys = [k for k in _SORT_KEYS.get(table, ()) if k in df.columns]
    if not keys or df.height < 2:
        return df
    order = sort_order(df, keys) if df.height >= NATIVE_SORT_ROWS_OF.get(table, NATIVE_SORT_ROWS) else None
    if order is None:
        # (rows in order already, as a batch of rank logs or a range of one log gives them, are not sorted
        # again: telling costs ~1 ms for 50k rows, ~0.5 ms where the first rows are out of order)
        if in_sort_order(df, table):
            return df
        if df.height >= FEWER_KEYS_ROWS:
            return _stable_sorted(df, keys)
        return df.sort(keys, nulls_last=True, maintain_order=True)
    # rows already in order (a worker's sorted range, the stages keeping it) are not gathered again: a gather
    # of a million rows of 44 columns is ~0.3 s of CPU
    return df if order.flags["SORTED_ASC"] else _gathered_rows(df, order)


def _stable_sorted(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """`df.sort(keys, nulls_last=True, maintain_order=True)` of rows not in that order, sorted by as few keys
    as give it. A key null or of one value in every row (a file's node and file name) orders nothing. Where the
    rows are in order by the last keys already (a dmon loop's samples by time and line, its GPUs interleaved
    row by row), a stable sort by the keys before those gives the order of all: its ties keep the order of the
    last keys. The columns null or of one value in every row are the same after any sort: kept, not gathered.
    A dmon file's 15k samples in a worker: ~3.3 -> ~2.2 ms (a sort by several keys compares row by row, by
    one integer key it sorts by radix)."""
    n = df.height
    fixed = {c.name for c in df.get_columns() if c.null_count() == n}
    fixed.update(c for c, _value in _constant_strings(df))
    by = [k for k in keys if k not in fixed]
    if not by:
        return df
    # (not in order by all of `by`: the caller saw that)
    cut = len(by)
    while cut > 1 and rows_in_order(df, by[cut - 1 :]):
        cut -= 1
    order = df.select(pl.arg_sort_by(by[:cut], nulls_last=True, maintain_order=True)).to_series()
    return pl.DataFrame([c if c.name in fixed else c.gather(order) for c in df.get_columns()])


def _gathered_rows(df: pl.DataFrame, order: pl.Series) -> pl.DataFrame:
    """`df[order]` (`order` a permutation of the rows), column by column: each column made contiguous first,
    and the columns null in every row made anew rather than gathered.

    polars gathers from a column of several chunks (a piece collected from many parts has dozens) looking up
    each index's chunk: a 1 M-row piece of steps took ~450 ms of CPU, ~150 ms contiguous with the copy that
    makes it so (gpu_samples ~650 -> ~230 ms); a column at a time, that copy holds one column more in memory,
    not the table. A gather costs as much for a column of nulls as for one of values (a 16 MB dmon range
    fills 17 of gpu_samples' 44 columns: its part's sort ~34 -> ~18 ms)."""
    n = df.height
    return pl.DataFrame(
        [
            pl.repeat(None, n, dtype=c.dtype, eager=True).alias(c.name)
            if c.null_count() == n
            else (c.rechunk() if c.n_chunks() > 1 else c).gather(order)
            for c in df.get_columns()
        ]
    )


def sort_order(df: pl.DataFrame, keys: list[str]) -> pl.Series | None:
    """The row order of `df.sort(keys, nulls_last=True, maintain_order=True)`, sorted by packed integer keys
    (flagged sorted when it is `0, 1, 2, ...`: the rows are in order already).

    Each key becomes a dense code that sorts as it does, null last: a string its place among the sorted
    distinct values, an integer or a time its distance from the column's minimum. The codes are packed into
    as few 64-bit integers as they fit in, and the rows sorted stably by the last of those first, the first
    last (a least-significant-first radix order). A 2.3 M-row gpu_samples sort: 3.1 s -> 0.25 s of CPU (a
    multi-column sort compares row by row; one integer column sorts by radix). None for a key of another
    type, or one whose values span 2^63 or more.
    """
    bounds = df.select(
        *(pl.col(k).to_physical().min().alias(f"lo{i}") for i, k in enumerate(keys) if _packable(df.schema[k])),
        *(pl.col(k).to_physical().max().alias(f"hi{i}") for i, k in enumerate(keys) if _packable(df.schema[k])),
    ).row(0, named=True) if any(_packable(df.schema[k]) for k in keys) else {}
    codes: list[tuple[pl.Expr, int]] = []
    for i, k in enumerate(keys):
        dtype = df.schema[k]
        if dtype == pl.String:
            col = df.get_column(k)
            if len(col) and not col.null_count() and (col == col[0]).all():
                continue  # one value in every row (a range's node and file): orders nothing, and costs a hash
            got = _string_codes(col)
            if got is None:  # all null
                continue
            code, n = got
            codes.append((pl.lit(code), n.bit_length()))
        elif _packable(dtype):
            lo, hi = bounds[f"lo{i}"], bounds[f"hi{i}"]
            if lo is None:  # all null
                continue
            if hi - lo >= 1 << 63:
                return None
            span = hi - lo + 1  # (the null code)
            code = (pl.col(k).to_physical().cast(pl.Int64) - lo).cast(pl.UInt64).fill_null(span)
            codes.append((code, span.bit_length()))
        else:
            return None
    order = pl.int_range(df.height, dtype=pl.UInt32, eager=True).alias("i")
    if not codes:  # (every key null throughout: the rows stay as they are)
        return order
    groups: list[list[tuple[pl.Expr, int]]] = [[]]
    for code, bits in codes:
        if sum(b for _, b in groups[-1]) + bits > 64:
            groups.append([])
        groups[-1].append((code, bits))
    packed = []
    for group in groups:
        expr, shift = pl.lit(0, dtype=pl.UInt64), 0
        for code, bits in reversed(group):
            expr = expr + (code * pl.lit(1 << shift, dtype=pl.UInt64) if shift else code)
            shift += bits
        packed.append(expr)
    frame = df.select(*(e.alias(f"_k{j}") for j, e in enumerate(packed)))
    if _in_order(frame):
        return order.set_sorted()
    for j in reversed(range(len(packed))):
        key = frame.get_column(f"_k{j}").gather(order)
        order = order.gather(pl.DataFrame({"k": key}).select(pl.arg_sort_by("k", maintain_order=True)).to_series())
    return order


def in_sort_order(df: pl.DataFrame, table: str) -> bool:
    """Whether `df`'s rows are in the order of its table's sort keys already (`_sorted` keeps them as they
    are)."""
    keys = [k for k in _SORT_KEYS.get(table, ()) if k in df.columns]
    if not keys or df.height < 2:
        return True
    if df.height > 4 * ORDER_PROBE and not rows_in_order(df.head(ORDER_PROBE), keys):
        return False
    return rows_in_order(df, keys)


def rows_in_order(df: pl.DataFrame, keys: list[str]) -> bool:
    """Whether each row of `df` sorts at or after the one before by `keys` (nulls last): each row compared
    with the next, key by key (no codes made: a worker's batch of 50k step rows ~1 ms, `sort_order`'s packed
    codes ~10 ms, most of them the hashes of the node and file names)."""
    n = df.height
    if n < 2:
        return True
    pairs = pl.DataFrame(
        [s for i, k in enumerate(keys) for s in (df.get_column(k).slice(0, n - 1).alias(f"a{i}"),
                                                 df.get_column(k).slice(1).alias(f"b{i}"))]
    )
    ok: pl.Expr | None = None
    for i in reversed(range(len(keys))):
        a, b = pl.col(f"a{i}"), pl.col(f"b{i}")
        before = (a < b).fill_null(False) | (a.is_not_null() & b.is_null())
        same = a.eq_missing(b)
        ok = before | same if ok is None else before | (same & ok)
    assert ok is not None
    return bool(pairs.select(ok.all()).item())


ORDER_PROBE = 1000
"""`in_sort_order` looks at this many first rows first: rows out of order there (samples of several GPUs a
time, as a `--query-gpu` loop writes them) settle it, ~0.5 ms rather than ~10 for 35k rows."""


RUN_SHARE = 4
"""`_string_codes` codes a column's runs of one value rather than its rows when there are at most a quarter as
many runs as rows (a table's node and file: its rows come a file at a time)."""


def _string_codes(col: pl.Series) -> tuple[pl.Series, int] | None:
    """Each value's place among the sorted distinct values of the String column `col` (UInt64; null: the
    number `n` of distinct values), and `n`; None when every value is null.

    Where the column is runs of one value (`RUN_SHARE`), a value of each run is looked up and the runs take
    its code: the same codes, and a table's node or file of ~700k rows costs ~20-40 ms instead of ~60-120 (a
    hash of every string)."""
    runs = col.rle_id()
    n_runs = int(runs[-1]) + 1 if len(runs) else 0
    by_run = RUN_SHARE * n_runs <= len(col)
    if by_run:
        starts = pl.int_range(len(col), dtype=pl.UInt32, eager=True).filter(runs.diff().fill_null(1) != 0)
        col = col.gather(starts)
    distinct = col.unique().drop_nulls().sort()
    n = distinct.len()
    if n == 0:
        return None
    # (a value's place among `distinct` is its code in an Enum of them: a lookup ~1.5x cheaper than
    # `replace_strict` to an int range)
    code = col.cast(pl.Enum(distinct)).to_physical().cast(pl.UInt64).fill_null(n)
    return (code.gather(runs) if by_run else code).alias(""), n


def _in_order(frame: pl.DataFrame) -> bool:
    """Whether the rows of `frame` (its columns the words of a packed key, most significant first) are in
    non-decreasing order already."""
    names = frame.columns
    ok = pl.col(names[-1]) <= pl.col(names[-1]).shift(-1)
    for name in reversed(names[:-1]):
        k, after = pl.col(name), pl.col(name).shift(-1)
        ok = (k < after) | ((k == after) & ok)
    return bool(frame.select(ok.fill_null(True).all()).item())


def _packable(dtype: pl.DataType) -> bool:
    return dtype.is_integer() or dtype.is_temporal()
