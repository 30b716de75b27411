"""The parser contract: what a parser gets (`FileContext`, a column of lines) and returns (`ParseResult`).

A parser module defines `NAME`, `DESCRIPTION`, `TABLES`, `FILENAME_HINTS`, `DETECTS`, `PRIORITY`,
`sniff(head: bytes, name: str) -> float` (0..1, content decides, the name only adds a bonus) and
`parse(lines: pl.Series, ctx: FileContext) -> ParseResult`. Parsers are pure: no I/O, no printing.

Optional: `parse_bytes(data, ctx)` for binary forms (a Flight Recorder pickle), and `carry(lines) -> list[str]`
for formats whose lines are read by a header above them (`--query-gpu` CSV, dmon): the header line(s) in
force at the end of `lines`. The ingest parses a file in 16 MB chunks; it parses each later chunk after the
carried header and the previous chunk's last lines (numbered before the chunk, their rows dropped and their
lines not counted again), and does not cut such a file into parallel byte ranges.

Optional: `parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]`, the same as
`[parse(lines, ctx) for lines, ctx in items]` — the same tables (rows, order, dtypes), counts, examples,
notes, `partial` and `node` for every file — in fewer polars calls. The ingest hands it whole small files of
one format (each one chunk, at most a few MB in all) that a worker read together: a small file's cost is
mostly the fixed cost of a parse (dozens of small polars calls), which one call over all of them pays once.

Line accounting: `lines` is the number of lines of the file; blank lines are neither parsed nor
unrecognized. A line is *parsed* when it matches the format's grammar (whether or not it produced a
row: an ordinary dmesg line is understood, it just is no event); it is *unrecognized* when it does
not. So `parsed + unrecognized + blank == lines` (see `check_accounting`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import polars as pl

_fastscan: Any = ...
"""The compiled module (`parsers/_fastscan.c`), imported at the first `compiled` call (the parent of an
ingest imports this module, not the parsers); None where the install did not build it (no C compiler)."""

MAX_EXAMPLES = 20
EXAMPLE_CHARS = 500
"""An example of a line not understood keeps this many characters of it."""
BLANK = ~pl.col("text").str.contains(r"\S")
"""A line is blank: nothing but whitespace (= `strip_chars()` is empty, both Unicode, without a copy)."""


@dataclass(frozen=True)
class FileContext:
    """What a parser knows about the file besides its lines."""

    path: str
    """Path inside the bundle (posix), quoted in evidence."""
    node: str
    """Node the file belongs to by its path; 'unknown' when the path does not say."""
    first_line: int = 1
    """Line number of the first line handed over (files may be parsed in chunks)."""
    year_hint: int | None = None
    """Year to give year-less timestamps (syslog) when the file itself does not tell."""
    collected_at: datetime | None = None
    """When the bundle was collected, if known (UTC); bounds year inference."""


FILE_SPAN = 1 << 40
"""Files read as one frame number the lines of the k-th from k * FILE_SPAN up (`BatchContext`); `line //
FILE_SPAN` is a line's file."""


@dataclass(frozen=True)
class BatchContext(FileContext):
    """The context of several files of one year read as one frame by a grammar built for one file
    (`parsers.nccl.parse_many`): the k-th file's lines are numbered from k * `FILE_SPAN` up, after a blank
    line. `path` and `node` are placeholders that no file has; the reader puts each file's own in its rows.
    A grammar step that would look across files, and that cannot keep them apart, raises `NotTogether`."""


class NotTogether(Exception):
    """The files of a `BatchContext` cannot be read as one frame: each is read alone."""


@dataclass(frozen=True)
class ParseResult:
    """Tables produced from one file plus the accounting of its lines."""

    tables: dict[str, pl.DataFrame]
    parsed: int
    unrecognized: int
    unrecognized_examples: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    partial: bool = False
    """The file ended early (truncated dump, cut record): parsed as far as it is valid."""
    node: str | None = None
    """Node the content names for the whole file (syslog host, NCCL prefix), if the path did not."""


class Parser(Protocol):
    """What `parsers.registry` expects of a parser module.

    A file over 16 MB is parsed in pieces (chunks read in order, or byte ranges parsed apart by several
    workers: `forensics.ingest`), each piece's lines numbered as in the file. A parser whose grammar reaches
    across lines or keeps state across the file may also have, so that the pieces give what the whole file
    does:

    - `RECORD_START` (bytes): the literal a line opening a record starts with (an `nvidia-smi -q` dump's
      banner), or `record_start(window: bytes) -> int`, where in a window of bytes the last line opening a
      record starts (-1: none): a piece then ends before such a line in its last MB, not inside a record;
    - `carry(lines) -> list[str]`: the lines the next piece is parsed after (a CSV header in force, a bug
      report section's header), with `CARRY_TAIL` data lines after them (default 64; 0: none); their rows are
      dropped and their lines not counted again;
    - `INVENTORY_KEY`: the columns it keeps a file's inventory rows unique on; the parent drops the repeats
      across a file's pieces;
    - `merge_chunks(tables) -> tables`: the file's tables other than steps and gpu_samples, from all its
      pieces in order, made what the whole parse gives (NCCL aggregates, rank rows);
      `shift_lines(table, df, shift)` moves the line numbers it keeps inside a row besides `line`, for a byte
      range numbered from 1.
    """

    NAME: str
    DESCRIPTION: str
    TABLES: tuple[str, ...]
    FILENAME_HINTS: tuple[str, ...]
    DETECTS: str
    PRIORITY: int

    def sniff(self, head: bytes, name: str) -> float: ...

    def parse(self, lines: pl.Series, ctx: FileContext) -> ParseResult: ...


@dataclass
class Tally:
    """Line accounting for parsers that walk a block-structured file line by line (nvidia-smi -q, DCGM)."""

    parsed: int = 0
    unrecognized: int = 0
    examples: list[tuple[int, str]] = field(default_factory=list)

    def count(self, ok: bool, line: int, text: str) -> None:
        """Count one non-blank line as parsed or, with an example kept, as unrecognized."""
        if ok:
            self.parsed += 1
            return
        self.unrecognized += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append((line, text[:EXAMPLE_CHARS]))


def numbered(lines: pl.Series, ctx: FileContext) -> pl.DataFrame:
    """Return a frame of `line` (number in the file) and `text` for a column of lines."""
    return pl.DataFrame(
        {
            "line": pl.int_range(ctx.first_line, ctx.first_line + len(lines), dtype=pl.Int64, eager=True),
            "text": lines.cast(pl.String),
        }
    )


def account(frame: pl.DataFrame, understood: pl.Expr) -> tuple[int, int, list[tuple[int, str]]]:
    """Count parsed and unrecognized non-blank lines of `frame` (columns line, text) and sample the latter.

    Args:
        frame: from `numbered`.
        understood: boolean expression over `frame`, true for lines the grammar matches.

    Returns:
        (parsed, unrecognized, examples of unrecognized lines as (line number, text)).
    """
    flagged = frame.select(
        pl.col("line"),
        pl.col("text"),
        blank=BLANK,
        ok=understood.fill_null(False),
    )
    counts = flagged.select(
        parsed=(pl.col("ok") & ~pl.col("blank")).sum(),
        unrecognized=(~pl.col("ok") & ~pl.col("blank")).sum(),
    ).row(0)
    bad = flagged.filter(~pl.col("ok") & ~pl.col("blank")).head(MAX_EXAMPLES)
    examples = [(int(n), str(t)[:EXAMPLE_CHARS]) for n, t in bad.select("line", "text").iter_rows()]
    return int(counts[0]), int(counts[1]), examples


def check_accounting(result: ParseResult, lines: pl.Series) -> bool:
    """True when parsed + unrecognized + blank lines == lines (the invariant tests assert)."""
    blank = int((lines.cast(pl.String).str.strip_chars().str.len_bytes() == 0).sum())
    return result.parsed + result.unrecognized + blank == len(lines)


HARNESS_LINE = r"^(?:#SOURCE:|#CMD:|#GAP|#FROM-COMMENT:|<!-- #SOURCE:)"
"""Fixture annotations (FORMATS.md §0) that test harnesses blank out, keeping line numbers."""


READER_SPLIT_MIN = 1 << 20
"""From this many bytes on, `lines_from_bytes` cuts lines with polars' CSV reader (one column, no quoting):
half the CPU of decoding in Python and splitting (5 vs 10 ms per 16 MB chunk), ~0.2 ms more per call."""
_BOM = b"\xef\xbb\xbf"
_UNIT_SEPARATOR = b"\x1f"


def lines_from_bytes(data: bytes) -> pl.Series:
    """Decode a file's bytes (invalid UTF-8 replaced) into a column of lines, line ends stripped.

    `\\n` and `\\r\\n` end lines; a file with `\\r` but no `\\n` at all (old Mac, captured terminals)
    is split on `\\r`. A final line ending does not make an extra empty line.

    Bytes of fewer than `COMPILED_SPLIT_MAX` that are valid UTF-8 are cut by the compiled module, where the
    install built it (`_compiled_lines`: the same lines).
    """
    if len(data) < COMPILED_SPLIT_MAX:
        got = _compiled_lines(data)
        if got is not None:
            return got
    big = len(data) >= READER_SPLIT_MIN
    if big and b"\n" in data and not data.startswith(_BOM) and _UNIT_SEPARATOR not in data:
        # The reader's rules are the same (lossy UTF-8 as Python's 'replace', `\\r\\n` or `\\n` ending a
        # line, a lone `\\r` kept), except that it drops a leading BOM and cuts fields at its separator:
        # neither is here. Empty lines come back null.
        frame = pl.read_csv(
            io.BytesIO(data),
            has_header=False,
            separator=_UNIT_SEPARATOR.decode(),
            quote_char=None,
            new_columns=["line"],
            encoding="utf8-lossy",
            infer_schema=False,
            truncate_ragged_lines=True,
        )
        return frame.to_series().fill_null("").alias("line")
    text = _text(data)
    if not text or text == "\n":
        return pl.Series("line", [], dtype=pl.String)
    # (a 16 MB chunk in ~8 ms: no copy of the text to drop its last newline, no pass for `\r` when there is none)
    s = pl.Series("line", [text]).str.split("\n").explode()
    if text.endswith("\n"):
        s = s.head(len(s) - 1)
    return s.str.strip_suffix("\r").alias("line") if "\r" in text else s.alias("line")


def compiled(name: str) -> Any:
    """`parsers._fastscan.<name>`, a function of the compiled module (`parsers/_fastscan.c`), the module
    imported at the first call; None where the install did not build it (no C compiler: the parsers take
    their polars paths, with the same results) or built it without this function (an older build)."""
    global _fastscan
    if _fastscan is ...:
        try:
            from parsers import _fastscan as module
        except ImportError:
            module = None
        _fastscan = module
    return getattr(_fastscan, name, None)


COMPILED_SPLIT_MAX = 64 << 20
"""Bytes below which `lines_from_bytes` lets the compiled module cut the lines (`_compiled_lines`): a 1-2 MB
log several times faster than polars' reader (~0.1 ms), a few-KB file ~10x faster than a decode and split,
a 16 MB range of a large log ~2x (3.3 against 5.8-8.8 ms of a worker's CPU; the 4 GB mix's ingest -4.9 %), a
32 MB range of a Megatron log too. No chunk or range is larger; larger bytes (never measured) go to the
reader."""


def _compiled_lines(data: bytes) -> pl.Series | None:
    """`lines_from_bytes(data)` cut by the compiled module (`parsers._fastscan.lines`: the same lines, in
    a string-view column over the module's own copy of the bytes, which polars takes as it is); None where
    it is not built, or the bytes are not valid UTF-8 or hold `\\r` but no `\\n` (decoded in Python then)."""
    cut = compiled("lines")
    got = None if cut is None else cut(data)
    return None if got is None else pl.Series(ArrowCapsules(got)).alias("line")


def _text(data: bytes) -> str:
    """`data` decoded (invalid UTF-8 replaced), `\r` made a line end where no `\n` is (old Mac, terminals)."""
    text = data.decode("utf-8", errors="replace")
    return text.replace("\r", "\n") if "\n" not in text and "\r" in text else text


def lines_of_many(datas: Sequence[bytes]) -> list[pl.Series]:
    """`[lines_from_bytes(d) for d in datas]`: the small ones cut by the compiled module (`_compiled_lines`,
    ~6 us a few-KB file), or where it does not cut them, in one polars call: a call's fixed cost (~40 us) was
    most of a few-KB file's (32 perfquery dumps: 48 -> 7 us a file).

    The files cut in one polars call have their lines as slices of one column (no copy); inputs of
    `READER_SPLIT_MIN` bytes or more, and those that make no line, go through `lines_from_bytes` alone."""
    out: list[pl.Series | None] = [None] * len(datas)
    texts: list[str] = []
    at: list[int] = []
    carriage = False
    for i, data in enumerate(datas):
        if len(data) >= READER_SPLIT_MIN:
            continue
        out[i] = _compiled_lines(data)
        if out[i] is not None:
            continue
        text = _text(data)
        if text.endswith("\n"):  # (a final line end makes no line)
            text = text[:-1]
        if not text:
            continue  # (no line: `lines_from_bytes` makes the empty column)
        carriage = carriage or "\r" in text
        texts.append(text)
        at.append(i)
    if len(texts) > 1:
        split = pl.Series("line", texts).str.split("\n")
        counts = split.list.len().to_list()
        lines = split.explode()
        if carriage:  # (no line of a text without `\r` ends with one)
            lines = lines.str.strip_suffix("\r")
        offset = 0
        for i, n in zip(at, counts, strict=True):
            out[i] = lines.slice(offset, n).alias("line")
            offset += n
    return [lines_from_bytes(d) if s is None else s for d, s in zip(datas, out, strict=True)]


class ArrowCapsules:
    """An Arrow array as the (schema, array) PyCapsules of the C data interface, for `pl.Series` to import
    (`__arrow_c_array__`): what the compiled module (`parsers/_fastscan.c`) makes of buffers it allocated."""

    __slots__ = ("_pair",)

    def __init__(self, pair: tuple[object, object]) -> None:
        self._pair = pair

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self._pair
