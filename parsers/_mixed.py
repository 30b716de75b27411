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

The family grammar costs what its lines cost (`_family`): one literal pass picks the candidate lines, and
the grammar reads those and the few lines it reads with them (wrapped tails, traceback source lines,
torchrun blocks, `Last error:` quotes), each gap left as one blank line, not the whole chunk.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

import polars as pl

from forensics.errors import CONTAINED
from parsers import _step_grammars as g
from parsers import nccl, step_log
from parsers import torch_distributed as td
from parsers._common import _ANY_ENVELOPE, repeated
from parsers.base import FileContext, ParseResult

FAMILY_MARKS = [
    "NCCL ",
    "ProcessGroupNCCL",
    "torch.distributed",
    "Traceback (most recent call last)",
    "c10d",
    "what():",
    td.TERMINATE_TEXT,
    "ChildFailedError",
]
"""A step log needs the NCCL/PyTorch grammar only when one of these occurs (an NCCL record has `NCCL `; a
watchdog timeout, c10d error, elastic failure or traceback has one of the others)."""

STAGED = True
"""`parse_many` reads the files that hold both grammars in two rounds: the NCCL/PyTorch lines of each (`_family`),
then the other lines of each (`_both_rest`), not file by file (off: `_both` file by file; the tests compare
both). polars keeps 32 compiled regexes (per thread, the least recently used out first): file by file, the
~50 of the two grammars on a Megatron log with NCCL warnings and validation reports (~27 in the first round,
~22 in the second) were each compiled again for every file, ~8 ms of a 1 MB log's ~70 ms; round by round,
once for the files of a batch. The second round is one `step_log.parse_each` call: the files no step-log lane
takes share one general reading (~45 ms of such a log alone, ~20 in a batch of 8)."""
SAMPLE_LINES = 2000
SMALL_LINES = 4000
"""Chunks of up to this many lines are checked for `FAMILY_MARKS` in Python first."""


def has_family_lines(lines: pl.Series) -> bool:
    """True when some line may be an NCCL or PyTorch-distributed record."""
    return bool(lines.str.contains_any(FAMILY_MARKS).any())


def _any_of(literals: tuple[str, ...] | list[str]) -> str:
    """A regex matching where any of `literals` occurs: on many lines one regex pass (a SIMD literal search)
    is 2-10x faster than `str.contains_any` (an automaton per line); on few, its compile costs more."""
    return "|".join(re.escape(x) for x in literals)


def _holds_any(lines: pl.Series, literals: tuple[str, ...] | list[str], pattern: str) -> pl.Series:
    """Per line: holds one of `literals` (`pattern` = `_any_of(literals)`); null for a null line."""
    if len(lines) > SMALL_LINES:
        return lines.str.contains(pattern)
    return lines.str.contains_any(list(literals))


def has_step_lines(lines: pl.Series) -> bool:
    """True when some line has a step-line shape (the step-log sniffer, run on the candidate lines only)."""
    if not step_log.STEP_LINE_LITERALS:
        return False
    cand = lines.filter(_holds_any(lines, step_log.STEP_LINE_LITERALS, _STEP_ANY).fill_null(False))
    if cand.len() == 0:
        return False
    sample = "\n".join(cand.head(SAMPLE_LINES).to_list()).encode("utf-8", "replace")
    # the candidates hold no competing lines, so any step line gives a score above 0.9 (a preamble only, 0.6)
    return step_log.sniff(sample, "") > 0.9


def record_start(parser: ModuleType) -> Callable[[bytes], int] | None:
    """How a chunk of a file of `parser`'s format finds where to end (`parsers.base`'s `record_start`) where
    `parse` may read its lines with the step-log grammar too: a training stdout detected as an NCCL or
    PyTorch-distributed log (a Megatron job's head of arguments and c10d warnings) holds the step log's
    records, an iteration line and the timer block printed after it, and is cut before an iteration line as
    a step log is, not inside a block (whose entries would be read apart from it and not understood). None
    for the other parsers: their own `record_start`, if any, governs."""
    return step_log.record_start if parser is nccl or parser is td else None


def parse(parser: ModuleType, lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parser.parse(lines, ctx)`, or both grammars when a training-stdout chunk mixes them."""
    if parser is step_log and len(lines) >= step_log._MEG_MIN:
        return _step_chunk(lines, ctx)
    both, lit = _mixes(parser, lines)
    return _both(lines, ctx, lit) if both else parser.parse(lines, ctx)


def _step_chunk(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse(step_log, lines, ctx)` of a big chunk: where it may be a Megatron log the lane takes, its timer
    entries are found first (`step_log.meg_entry_lines`), handed to the lane and left out of the scans for
    the NCCL/PyTorch lines (`_entry_lines`: none of them is such a line)."""
    ascii = step_log.is_ascii(lines)
    with step_log.ascii_scope(ascii):
        entries = step_log.meg_entry_lines(lines)
    skip = _entry_lines(entries, g.ascii_classes if ascii else str)
    if skip is not None and skip.len():
        skip = _Skipped(lines, skip)  # (the other lines found once, for every scan of them below)
    both, lit = _mixes(step_log, lines, skip)
    if both:
        return _both(lines, ctx, lit, ascii, entries, skip)
    with step_log.ascii_scope(ascii):  # (`parse` works out `is_ascii` again where it is off)
        return step_log.parse(lines, ctx, entries)


def parse_many(parser: ModuleType, items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(parser, lines, ctx) for lines, ctx in items]` (whole small files of one format): the files that
    go to `parser.parse` alone are read in one `parser.parse_many` call when the parser has one."""
    many = getattr(parser, "parse_many", None)
    if many is None or len(items) < 2:
        return [parse(parser, lines, ctx) for lines, ctx in items]
    out: list[ParseResult | None] = [None] * len(items)
    alone: list[int] = []
    marked = _marked(parser, items)
    staged: list[tuple[int, pl.Series | None, bool]] = []
    for i, (lines, ctx) in enumerate(items):
        both, lit = _mixes(parser, lines) if marked[i] else (False, None)
        if both and STAGED:
            staged.append((i, lit, step_log.is_ascii(lines)))
        elif both:
            out[i] = _both(lines, ctx, lit)
        else:
            alone.append(i)
    # the two rounds (see `STAGED`): the family's lines of every file (`_family_many`), then the other lines
    # of every file, in one `parse_each`
    fams = _family_many([(*items[i], lit, ascii) for i, lit, ascii in staged])
    rests = [
        (_rest_lines(items[i][0], fam), items[i][1], None, ascii)
        for (i, _, ascii), fam in zip(staged, fams, strict=True)
    ]
    for (i, _, _), fam, rest in zip(staged, fams, step_log.parse_each(rests), strict=True):
        out[i] = _joined(fam, rest)
    if len(alone) == 1:
        out[alone[0]] = parser.parse(*items[alone[0]])
    elif alone:
        for i, result in zip(alone, many([items[i] for i in alone]), strict=True):
            out[i] = result
    return out  # type: ignore[return-value]


def _marked(parser: ModuleType, items: Sequence[tuple[pl.Series, FileContext]]) -> list[bool]:
    """Per file: whether it may hold both grammars (False: `_mixes` would find it does not), from one pass
    over all the files' lines: a training log needs a line with one of `FAMILY_MARKS`, an NCCL log one with
    a step-line literal."""
    if parser is step_log:
        literals, pattern = FAMILY_MARKS, _MARKS_ANY
    elif parser is nccl and step_log.STEP_LINE_LITERALS:
        literals, pattern = list(step_log.STEP_LINE_LITERALS), _STEP_ANY
    else:
        return [True] * len(items)
    at = _holds_any(pl.concat([lines for lines, _ in items]), literals, pattern).arg_true().to_list()
    ends = list(itertools.accumulate(len(lines) for lines, _ in items))
    starts = [end - len(lines) for end, (lines, _) in zip(ends, items, strict=True)]
    return [bisect.bisect_left(at, a) < bisect.bisect_left(at, b) for a, b in zip(starts, ends, strict=True)]


def _mixes(
    parser: ModuleType, lines: pl.Series, skip: pl.Series | _Skipped | None = None
) -> tuple[bool, pl.Series | None]:
    """Whether `lines` of `parser`'s format also hold the other grammar of training stdout (and, for a
    training log, which lines hold a family literal, for `_both`; `skip`: lines known to hold none)."""
    if parser is step_log:
        if len(lines) <= SMALL_LINES and not lines.null_count():
            # a small chunk: the marks looked for in its text (an automaton of all the literals costs more)
            text = "\n".join(lines.to_list())
            if not any(mark in text for mark in FAMILY_MARKS):
                return False, None
        # `has_family_lines`, over the lines holding a family literal only (each line with a mark is one)
        lit = _family_literals(lines, skip)
        at = lit.arg_true()
        return _marked_any(lines, at), lit
    if parser is nccl or (parser is td and td._dump_span(lines) is None):
        return has_step_lines(lines), None
    return False, None


class _Skipped:
    """Lines of a chunk known to hold no family literal (`skip`: ascending positions, not empty), with the
    other lines' positions and texts, each made once when first asked (`_mixes` and `_family` scan them)."""

    def __init__(self, lines: pl.Series, skip: pl.Series) -> None:
        self.lines = lines
        self.skip = skip
        self.lit: pl.Series | None = None
        """`_family_literals` of the lines, when asked (`lit_sub`: of the other lines, by `others`)."""
        self.lit_sub: pl.Series | None = None

    @cached_property
    def others(self) -> pl.Series:
        return step_log.other_lines(len(self.lines), self.skip)

    @cached_property
    def texts(self) -> pl.Series:
        return self.lines.gather(self.others)


def _family_literals(lines: pl.Series, skip: pl.Series | _Skipped | None) -> pl.Series:
    """Per line: holds one of `FAMILY_LITERALS` (False for a null line and the lines of `skip`); for a
    `_Skipped` of these `lines`, the answer and the other lines' are kept in it (`_family` reads them)."""
    test = lambda x: _holds_any(x, FAMILY_LITERALS, _FAMILY_ANY).fill_null(False)  # noqa: E731
    if isinstance(skip, _Skipped) and skip.lines is lines:
        sub = test(skip.texts)
        skip.lit, skip.lit_sub = _false(len(lines)).scatter(skip.others, sub), sub
        return skip.lit
    return _on_others(lines, skip, test)


def _on_others(
    lines: pl.Series, skip: pl.Series | _Skipped | None, test: Callable[[pl.Series], pl.Series]
) -> pl.Series:
    """`test(lines)` (a Boolean per line, no null), worked out on the lines not in `skip` (ascending line
    numbers, or None; or `_Skipped` of these very `lines`) only: False on those."""
    n = len(lines)
    if isinstance(skip, _Skipped):
        if skip.lines is lines:
            return _false(n).scatter(skip.others, test(skip.texts))
        skip = skip.skip
    if skip is None or not skip.len():
        return test(lines)
    others = step_log.other_lines(n, skip)
    return _false(n).scatter(others, test(lines.gather(others)))


def _entry_lines(entries: step_log.MegEntries | None, rx: Callable[[str], str]) -> pl.Series | None:
    """The Megatron timer entry lines (`entries.at`) when none of them is a line the family grammar reads on
    its own (`_family`'s candidates), else None; `rx`: the regex form of the lines' `ascii_scope`.

    Such a line is H `: (` T, T two numbers `_D, _D)` (`step_log._MEG_E`: digits, `.`, `,`, blanks, `)`):
    - a `FAMILY_LITERALS` literal in it lies in H `: (` (tested on each distinct H), or takes T's first
      character (a digit) after the `(`, or lies in T: no literal holds `(` and a digit or T's characters
      alone (`ENTRY_SAFE`);
    - a `FAMILY_SOURCES` match ends with `]` or `-`, which T does not hold: it lies in H `: (` (tested);
    - `_EDGES` matches at the line's end only, on a last character other than `)` (`FAMILY_ENDS`: `=`,
      `-`, `^`, `:`, a capital letter or a blank; `ONLY_PREFIXES`: a prefix's last character `>`, `:`,
      `]` or a blank): no line ending with T (tests/parsers/test_meg11.py checks the regexes' last
      characters).
    """
    if entries is None or not ENTRY_SAFE or not entries.at.len():
        return None
    probe = entries.heads + ": ("
    if probe.str.contains(_FAMILY_ANY).fill_null(True).any():
        return None
    if probe.str.contains(rx(FAMILY_SOURCES)).fill_null(True).any():
        return None
    return entries.at


MARK_SAMPLE = 64


def _marked_any(lines: pl.Series, at: pl.Series) -> bool:
    """Whether one of the lines at positions `at` holds one of `FAMILY_MARKS`: the first `MARK_SAMPLE` of them
    first (where they hold NCCL records, the first does), then all."""
    if len(at) == 0:
        return False
    if len(at) > MARK_SAMPLE:
        if _holds_any(lines.gather(at.head(MARK_SAMPLE)), FAMILY_MARKS, _MARKS_ANY).any():
            return True
    return bool(_holds_any(lines.gather(at), FAMILY_MARKS, _MARKS_ANY).any())


FAMILY_LITERALS = (
    # NCCL records (bare version lines, `NCCL error in:` too), aws-ofi-nccl legacy lines, markdown auto-links
    "NCCL ",
    ": Function: ",
    "](http",
    # line starts of the PyTorch grammar (`torch_distributed.TORCH_LINE_START`), branch by branch (c10/glog
    # and elastic lines: `FAMILY_SOURCES`)
    ":torch",
    ":__main__:",
    "Traceback (most recent call last):",
    'File "',
    "c10d",  # (with the other `FAMILY_MARKS`: a line holding a mark holds one of these literals)
    "Exception raised from ",
    "frame #",
    " FAILED",
    "<NO_OTHER_FAILURES>",
    "During handling of the above exception",
    "The above exception was the direct cause",
    "Error",
    "Exception",
    "Interrupt",
    "Exit",
    "Root Cause",  # `Root Cause (first observed failure):`; it also sets a ChildFailedError block's root flag
    "Failures:",
    "Not all ranks joining collective",
    "group info:",
    "collective:",
    "missing ranks:",
    "input sizes:",
    "output sizes:",
    "expected ranks:",
    "collective state:",
    "collective stack trace:",
    "torch.distributed",
    td.LAST_ERROR_TEXT,
    "To our best knowledge",
    "] joined",
    "] finished",
    "Snapshot of ranks",
    "what():",
    td.TERMINATE_TEXT,
    "CUDA kernel errors might be asynchronously reported",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA`",
    # what the PyTorch events and the whole-file checks look for
    *td.TORCH_LITERALS,
    "exitcode",
    "Sending process",
    td.RESULT_HEAD_TEXT,
    "launch configs:",
    "Communicators...",
    "Job summary",
)
"""Literals one of which every line the NCCL/PyTorch grammar (`nccl.family_rows`) reads on its own holds:
its line-start patterns, event rules and whole-file markers, each a required literal of its pattern."""
ENTRY_SAFE = not any(re.search(r"\([0-9]", x) or re.fullmatch(r"[0-9., )]+", x) for x in FAMILY_LITERALS)
"""No family literal holds `(` then a digit, or only characters of a timer entry's numbers (`_entry_lines`)."""
_FAMILY_ANY = _any_of(FAMILY_LITERALS)
_MARKS_ANY = _any_of(FAMILY_MARKS)
_STEP_ANY = _any_of(step_log.STEP_LINE_LITERALS)
FAMILY_SOURCES = r"\.(?:cpp|hpp|cc|h|py):\d+\]|\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] \d{4}-"
"""What a c10/glog line (`[E1206 12:00:00.123 X.cpp:607]`) and a torch.distributed.elastic line (`[INFO]
2024-01-01 …`) hold: the literals `.py:`, `[INFO] ` alone are in every line of some logs (DeepSpeed's)."""
SOURCE_LITERALS = (
    ".cpp:", ".hpp:", ".cc:", ".h:", ".py:", "[DEBUG] ", "[INFO] ", "[WARNING] ", "[ERROR] ", "[CRITICAL] "
)
"""A literal every `FAMILY_SOURCES` match holds (one of its alternatives' fixed starts)."""
_SOURCE_ANY = _any_of(SOURCE_LITERALS)
SOURCE_SAMPLE = 2048
SOURCE_SHARE = 0.25
SOURCE_LINES = 16384
"""When a chunk has more than `SOURCE_LINES` lines and at most `SOURCE_SHARE` of its first `SOURCE_SAMPLE`
lines hold a `SOURCE_LITERALS` literal, the `FAMILY_SOURCES` regex runs on the lines holding one only: on
many short lines a literal pass costs a third to a half of the regex's, which scans the whole line where
its literals are frequent (`.py:` in every line of DeepSpeed's log: there, and on a few long lines, the
regex runs alone)."""


def _sources(lines: pl.Series, rx: Callable[[str], str]) -> pl.Series:
    """`lines.str.contains(rx(FAMILY_SOURCES))`, but False (not null) for a null line."""
    n = len(lines)
    if n > SOURCE_LINES:
        sample = lines.head(SOURCE_SAMPLE).str.contains(_SOURCE_ANY).fill_null(False)
        if sample.sum() <= SOURCE_SHARE * len(sample):
            at = lines.str.contains(_SOURCE_ANY).fill_null(False).arg_true()
            hit = lines.gather(at).str.contains(rx(FAMILY_SOURCES)).fill_null(False)
            return _false(n).scatter(at.filter(hit), True)
    return lines.str.contains(rx(FAMILY_SOURCES)).fill_null(False)


FAMILY_ENDS = r"(?:=\s*|-|\^\s*|\]:\s*|\) [A-Z]+\s*)$"
"""Line ends of the grammar's lines that need no literal above: `====`/`----`/`^^^` traceback lines (`====`
also ends a ChildFailedError root-cause section), a ChildFailedError `[0]:` entry, an ncclras group head
`#1-2 (hash) STATUS` (a line ends as its body does)."""
ONLY_PREFIXES = (
    r"^(?:> ?|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?:? |"
    + _ANY_ENVELOPE.removeprefix("^(?:").removesuffix(")")
    + r")*\s*$"
)
"""Lines that are nothing but a quote mark, collector timestamp and launcher prefixes (the grammar counts them
as paste artefacts): every line whose prepared body is blank (`nccl.prepare` strips those, in that order)."""
_EDGES = f"(?:{FAMILY_ENDS})|(?:{ONLY_PREFIXES})"
"""`FAMILY_ENDS` or `ONLY_PREFIXES`, in one regex pass (the cost of the first alone). (`FAMILY_SOURCES` is
not joined to it, nor to `_FAMILY_ANY`: either costs more than the two passes on some logs: `.py:96:` in
every line of DeepSpeed's, torchtitan's.)"""
SUBSET_SHARE = 0.5
"""The family grammar reads the candidate lines only when they are at most this share of the chunk, or when
they and a blank line for each run of other lines are at most `SUBSET_ROWS` of it."""
SUBSET_ROWS = 0.8
"""See `SUBSET_SHARE`. Reading the candidates costs about what reading every line costs where the others lie
alone between them (a Megatron line after every 2nd to 50th NCCL line: as many rows either way); where they
lie in runs, 10-15 % less (a Megatron block of 30 lines after every 40 NCCL lines: 57 % of the lines read,
88 -> 80 ms for 1.5 MB of NCCL lines; the `--synthetic` bundle's NCCL log 66 -> 57 ms)."""
WRAP_HEAD = nccl._WRAPPABLE.replace("|^", "|")
"""`nccl._WRAPPABLE` unanchored: it matches every line whose body (a suffix of the line) a wrap may join."""


BLOCK_HEAD = re.escape(td.RESULT_HEAD_TEXT) + (
    r"|launch configs:|Root Cause \(first observed failure\):|Failures:|\]:\s*$"
)
"""What the head of a torchrun `Result:`/launch-config or ChildFailedError block holds (`td.mark_blocks`)."""
BLOCK_KV = r"\s\s[a-z_]+(?:=|\s*:)"
"""What an indented `key=value` / `key : value` block line holds (`td.KV_EQ_RE`, `td.KV_COLON_RE`)."""
BLOCK_REACH = 64
"""Lines after a block head read with it; when the last of them is understood the grammar reads every line."""
WRAP_REACH = 16
"""Lines after a wrap head read with it; when the last of them is understood (it may continue the record, and
the next could too) the grammar reads every line."""


def _windows(starts: pl.Series, n: int, limit: int) -> pl.Series:
    """The line numbers (Int64, ascending, each once) of the lines at most `limit` after a start (`starts`:
    ascending line numbers below `n`), up to the next start: where the closure of `_sparse_reach` with that
    limit may reach."""
    s = starts.cast(pl.Int64).rename("s").to_frame()
    return s.select(
        p=pl.int_ranges(
            "s", pl.min_horizontal(pl.col("s") + limit, pl.col("s").shift(-1, fill_value=n) - 1, n - 1) + 1
        )
    ).get_column("p").explode()


def _candidate_reach(at: pl.Series, start: pl.Series, carry: pl.Series) -> pl.Series:
    """`_sparse_reach(.., start, carry)`'s closure (no limit) over a whole chunk, when every start and every
    carrying line is one of the lines `at`
    (ascending; `start`, `carry`: their values, not null): the line numbers it reaches (the last may be the
    line after the chunk). A chain runs over consecutive lines of `at`, then reaches one line more when its
    last line carries."""
    got, _ = _sparse_reach(at, start, carry)
    on = at.filter(carry)
    return pl.concat([got, got.filter(got.is_in(on.implode())) + 1])


def _sparse_reach(
    pos: pl.Series, start: pl.Series, carry: pl.Series, limit: int | None = None
) -> tuple[pl.Series, pl.Series]:
    """The closure `x[j] = start[j] or (x[j-1] and carry[j-1])`, at most `limit` lines after its latest start,
    over the lines `pos` only (ascending line numbers; `start`, `carry`: their values; a null `carry`
    carries but cuts nothing): (the line numbers it reaches; those where the limit cuts it short). Exact
    when `pos` holds every start and, for every line it reaches, each line from its latest start to it
    (`_windows` of the starts): a gap in `pos` breaks the closure, as a line of the gap would (checked
    against the closure over every line in tests/parsers/test_mixed_fam_reach.py)."""
    i = pl.col("pos")
    step = (i - i.shift(1)) == 1
    # the latest start and the start of the carrying run, each worked out once (an eager select evaluates a
    # repeated subexpression each time it appears), then both answers in one select
    f = pl.DataFrame({"pos": pos.cast(pl.Int64), "start": start, "carry": carry}).with_columns(
        _last=pl.when("start").then(i).forward_fill(),
        _run=pl.when(~(pl.col("carry").shift(1).fill_null(True) & step).fill_null(False))
        .then(i)
        .forward_fill(),
    )
    last = pl.col("_last")
    inside = (last >= pl.col("_run")).fill_null(False)
    if limit is None:
        cut = pl.lit(False)
    else:
        cut = inside & (i - last == limit) & pl.col("carry").fill_null(False)
        inside = inside & (i - last <= limit)
    got = f.select(k=i.filter(inside).implode(), cut=i.filter(cut).implode())
    return got.get_column("k")[0].alias("pos"), got.get_column("cut")[0].alias("pos")


def _family(
    lines: pl.Series,
    ctx: FileContext,
    lit: pl.Series | None = None,
    ascii: bool = False,
    skip: pl.Series | _Skipped | None = None,
) -> tuple[nccl.FamilyRows, int]:
    """`nccl.family_rows(lines, ctx)` and the number of non-blank lines it understood, at a cost that follows
    the number of family lines.

    The grammar reads the candidate lines (`FAMILY_LITERALS`, `FAMILY_SOURCES`, `FAMILY_ENDS`,
    `ONLY_PREFIXES`: every line it reads on its own is one) and the lines it may read with them, transitively:
    after a line a wrap may be joined to (`WRAP_HEAD`), up to `WRAP_REACH` lines that follow one of at least
    80 characters (the shortest a wrap joins); after a `File "` traceback line, its source line, the NCCL
    records before it included (the PyTorch grammar looks back past those). Each run of left-out lines is
    replaced by one blank line (its last): a blank line starts no wrap and is no traceback line, as none of
    the left-out lines is to the grammar. The wrap width is the whole chunk's. When the candidates hold a
    record read across more lines (torchrun block, `Last error:` quote, ncclras or torchfrtrace report), or
    are most of the chunk, the grammar reads every line. What is read with the candidates is worked out on
    the lines around them only (`_sparse_reach`), not over the whole chunk. `skip`: lines that are no
    candidate (`_entry_lines`), left out of the scans.
    """
    got = _family_base(lines, ctx, lit, ascii, skip)
    if not isinstance(got, _Base):
        return got
    return _family_end(got, nccl.family_rows_frame(got.base, ctx, wrap_width=got.wrap_width))


@dataclass(frozen=True)
class _Base:
    """What `_family` hands the family grammar of a chunk (`base`: the lines it reads, a frame of `line`,
    `text`) and what it reads the grammar's answer with (`rows`: the positions in `lines` of `base`'s rows;
    `wrap_cut`, `block_cut`: see `_sparse_reach`)."""

    lines: pl.Series
    ctx: FileContext
    ascii: bool
    base: pl.DataFrame
    rows: pl.Series
    wrap_cut: pl.Series
    block_cut: pl.Series
    plain: bool
    """No candidate line is of a kind the grammar reads with the lines after it but a wrap head (a traceback
    line, a `Last error:` quote, a block head), nor an NCCL record (` NCCL `): what `_family_many` reads with
    other chunks' lines (where a wrap may be joined, it reads each chunk alone). NCCL records mostly give
    rows (inventory, comms, events) or notes, which send the run's chunks to be read alone again: an NCCL log
    with step lines read twice (+13 % on the synthetic bundle's NCCL logs before this test)."""

    def wrap_width(self) -> int | None:
        return nccl._wrap_width(self.lines, self.ascii)


def _family_base(
    lines: pl.Series,
    ctx: FileContext,
    lit: pl.Series | None,
    ascii: bool,
    skip: pl.Series | _Skipped | None,
) -> _Base | tuple[nccl.FamilyRows, int]:
    """`_family` up to the grammar: what it reads, or the answer when no line is read or all are."""
    text = pl.col("text")
    n = len(lines)
    rx = g.ascii_classes if ascii else str  # (`ascii`: the lines hold no non-ASCII character)
    if lit is None:  # (`lit`: the `FAMILY_LITERALS` test of each line, when the caller made it)
        lit = _family_literals(lines, skip)
    rest = lambda x: _sources(x, rx) | x.str.contains(rx(_EDGES)).fill_null(False)  # noqa: E731
    if isinstance(skip, _Skipped) and skip.lines is lines and skip.lit is lit and skip.lit_sub is not None:
        # the other tests on the other lines that hold no family literal only (a line that holds one is a
        # candidate whatever they say): `lit` with those they hold on set
        no_lit = ~skip.lit_sub
        pos = skip.others.filter(no_lit)
        c = lit.clone().scatter(pos.filter(rest(skip.texts.filter(no_lit))), True)
    else:
        c = lit | _on_others(lines, skip, rest)
    n_cand = int(c.sum())
    if n_cand == 0:  # no line the grammar reads
        return nccl.FamilyRows(tables={}, understood=c.alias("c"), notes=[], hosts=[]), 0
    if n_cand > SUBSET_SHARE * n:
        runs = int((~c & c.shift(1, fill_value=True)).sum())  # (the runs of other lines, each one blank line)
        if n_cand + runs > SUBSET_ROWS * n:
            return _whole(lines, ctx)
    at = c.arg_true().cast(pl.Int64)
    kinds = (
        lines.gather(at)
        .to_frame("text")
        .with_columns(
            at=at,
            wrap=text.str.contains(rx(WRAP_HEAD)).fill_null(False),
            tb=text.str.contains('File "', literal=True).fill_null(False),
            le=text.str.contains(td.LAST_ERROR_TEXT, literal=True).fill_null(False),
            bh=text.str.contains(rx(BLOCK_HEAD)).fill_null(False),
            # (an NCCL record: most give rows, which the run of `_family_many` cannot part; see `_Base.plain`)
            nccl=text.str.contains(" NCCL ", literal=True).fill_null(False),
        )
    )
    # (a kind no candidate line is reaches no line: its closure is empty, not worked out)
    has = kinds.select(pl.exclude("at", "text").any()).row(0, named=True)
    kept = [at]
    empty = at.clear()
    wrap_cut, block_cut = empty, empty
    if has["wrap"]:
        heads = kinds.filter("wrap").get_column("at")
        pos = _windows(heads, n, WRAP_REACH)
        carry = lines.gather(pos).str.len_chars() >= 80
        got, wrap_cut = _sparse_reach(pos, pos.is_in(heads.implode()), carry, WRAP_REACH)
        kept.append(got)
    if has["tb"]:
        # a carrying line (a `File "` or ` NCCL ` line) holds a family literal: it is a candidate
        carry = kinds.select(pl.col("tb") | text.str.contains(" NCCL ", literal=True).fill_null(False))
        kept.append(_candidate_reach(at, kinds.get_column("tb"), carry.to_series()))
    if has["le"]:
        le = kinds.filter("le").get_column("at")
        kept += [le, le + 1]
    if has["bh"]:
        heads = kinds.filter("bh").get_column("at")
        pos = _windows(heads, n, BLOCK_REACH)
        bh = pos.is_in(heads.implode())
        kv = lines.gather(pos).str.contains(rx(BLOCK_KV)).fill_null(False)
        got, block_cut = _sparse_reach(pos, bh, bh | kv, BLOCK_REACH)
        kept.append(got)
    # the kept lines (`at` is unique and ascending, below `n`, already) and each kept line with the line
    # before it (a blank line standing for a run of left-out lines), in one select
    k = pl.col("k")
    keep = k.filter(k < n).unique().sort()
    got = (
        (pl.concat(kept) if len(kept) > 1 else at)
        .to_frame("k")
        .select(keep=keep.implode(), rows=keep.append((keep - 1).filter(keep > 0)).unique().sort().implode())
    )
    keep, rows = got.get_column("keep")[0], got.get_column("rows")[0]
    base = pl.DataFrame({"line": rows, "text": lines.cast(pl.String).gather(rows)}).select(
        line=pl.col("line") + ctx.first_line,
        text=pl.when(pl.col("line").is_in(keep.implode())).then(text).otherwise(pl.lit("")),
    )
    if base.select(text.str.contains("Not all ranks joining collective", literal=True).any()).item():
        return _whole(lines, ctx)
    plain = not (has["tb"] or has["le"] or has["bh"] or has["nccl"])
    return _Base(lines, ctx, ascii, base, rows, wrap_cut, block_cut, plain)


FAMILY_TOGETHER = True
"""`parse_many`'s first round reads the plain chunks (`_Base.plain`) of a batch with one run of the family
grammar (`_family_many`; off: one run a chunk; the tests compare both)."""


def _family_many(
    chunks: Sequence[tuple[pl.Series, FileContext, pl.Series | None, bool]],
) -> list[tuple[nccl.FamilyRows, int]]:
    """`[_family(lines, ctx, lit, ascii) for lines, ctx, lit, ascii in chunks]`, the plain chunks of one year
    (`_Base.plain`, the same `year_hint` and `collected_at`) read by one run of the grammar when it finds
    nothing in them but lines it understands: no row, note or host, no ncclras report, no wrapped record.

    The grammar's cost is mostly per line (~5 us: ~18 ms for the ~3,700 lines it reads of a 1 MB Megatron
    log whose candidates are 216 c10 warnings and 1,296 rule lines), and about half of it goes when 8 such
    chunks are read at once. Each chunk's lines are numbered up by its index times `FILE_SPAN`, after one
    blank line (the grammar sees a blank line, which starts no wrap and is no traceback line, as it sees the
    start of a chunk: as the runs of lines `_family` leaves out). Plain chunks hold no traceback, quote or
    block the grammar reads across lines, and a wrap it may join (`nccl._may_wrap`: a line it does not know
    after one of 80 characters or more, in a run from a warning or error record) in one chunk it may join in
    the run over all of them: then each is read alone; a line it understands without a row, note or host is
    one it understands whatever the lines around it. Where the grammar finds more (its rows carry the chunk's
    node and path, which differ) or fails, each chunk is read alone."""
    out: list[tuple[nccl.FamilyRows, int] | None] = [None] * len(chunks)
    bases: dict[int, _Base] = {}
    for k, (lines, ctx, lit, ascii) in enumerate(chunks):
        got = _family_base(lines, ctx, lit, ascii, None)
        if isinstance(got, _Base):
            bases[k] = got
        else:
            out[k] = got
    groups: dict[tuple[object, ...], list[int]] = {}
    for k, b in bases.items():
        if b.plain and FAMILY_TOGETHER:
            groups.setdefault((b.ctx.year_hint, b.ctx.collected_at), []).append(k)
    for ks in groups.values():
        if len(ks) < 2:
            continue
        got = _read_together([bases[k] for k in ks])
        if got is not None:
            for k, fam in zip(ks, got, strict=True):
                out[k] = _family_end(bases[k], fam)
    for k, b in bases.items():
        if out[k] is None:
            out[k] = _family_end(b, nccl.family_rows_frame(b.base, b.ctx, wrap_width=b.wrap_width))
    return out  # type: ignore[return-value]


def _read_together(bases: list[_Base]) -> list[nccl.FamilyRows] | None:
    """The family grammar's answer for each of `bases` (see `_family_many`), from one run over all their
    lines, or None where that run finds more than lines understood (or fails)."""
    # (a base holds a row: `_family_base` hands over none without a candidate line)
    firsts = [int(b.base.get_column("line").min()) for b in bases]  # type: ignore[arg-type]
    frame, starts = nccl.batch_frame([b.base for b in bases], firsts)
    try:
        fam = nccl.family_rows_frame(frame, bases[0].ctx, wrap_width=nccl.no_wrap)
    except CONTAINED:  # noqa: BLE001 - (`NotTogether`, or a chunk that fails, and fails again alone)
        return None
    if fam.tables or fam.notes or fam.hosts or fam.whole or fam.continued is not None:
        return None
    understood = fam.understood
    return [
        nccl.FamilyRows(tables={}, understood=understood.slice(s, b.base.height), notes=[], hosts=[])
        for s, b in zip(starts, bases, strict=True)
    ]


def _family_end(b: _Base, fam: nccl.FamilyRows) -> tuple[nccl.FamilyRows, int]:
    """`_family` of the chunk of `b` once the grammar has read `b.base` (`fam`)."""
    lines, ctx, base, rows, wrap_cut, block_cut = b.lines, b.ctx, b.base, b.rows, b.wrap_cut, b.block_cut
    text = pl.col("text")
    n = len(lines)
    if fam.whole:
        return _whole(lines, ctx)
    if fam.continued is not None and len(fam.continued) and len(wrap_cut):
        if (wrap_cut + ctx.first_line).is_in(fam.continued.implode()).any():
            return _whole(lines, ctx)  # a wrapped record may go on past the lines read
    understood = _false(n).alias("known").scatter(rows, fam.understood.fill_null(False))
    if len(block_cut) and understood.gather(block_cut).any():
        return _whole(lines, ctx)  # a block may go on past the lines read
    n_family = int(
        base.select(
            (fam.understood.fill_null(False) & (text.str.strip_chars().str.len_bytes() > 0)).sum()
        ).item()
    )
    family = nccl.FamilyRows(tables=fam.tables, understood=understood, notes=fam.notes, hosts=fam.hosts)
    return family, n_family


def _false(n: int) -> pl.Series:
    """A new all-false column (`Series.scatter` writes in place)."""
    return repeated(False, n, pl.Boolean).alias("f")


def _whole(lines: pl.Series, ctx: FileContext) -> tuple[nccl.FamilyRows, int]:
    family = nccl.family_rows(lines, ctx)
    understood = family.understood.fill_null(False)
    return family, int((understood & (lines.str.strip_chars().str.len_bytes() > 0)).sum())


def _both(
    lines: pl.Series,
    ctx: FileContext,
    lit: pl.Series | None = None,
    ascii: bool | None = None,
    entries: step_log.MegEntries | None = None,
    skip: pl.Series | _Skipped | None = None,
) -> ParseResult:
    """Both grammars on `lines` (`ascii`: `step_log.is_ascii(lines)`, `entries`: `step_log.meg_entry_lines`,
    `skip`: `_entry_lines`, when the caller made them)."""
    # (ASCII lines: the regexes run with ASCII classes, here and in the step-log parser: `step_log._ascii`)
    if ascii is None:
        ascii = step_log.is_ascii(lines)
    return _both_rest(lines, ctx, _family(lines, ctx, lit, ascii, skip), ascii, entries)


def _both_rest(
    lines: pl.Series,
    ctx: FileContext,
    fam: tuple[nccl.FamilyRows, int],
    ascii: bool,
    entries: step_log.MegEntries | None,
) -> ParseResult:
    """`_both` once the family grammar has read its lines (`fam`: `_family`'s result): the step-log grammar on
    the others, and the two results joined."""
    family, n_family = fam
    if entries is not None and n_family:
        entries = entries.without(family.understood.fill_null(False))
    with step_log.ascii_scope(ascii):
        rest = step_log.parse(_rest_lines(lines, fam), ctx, entries)
    return _joined(fam, rest)


def _rest_lines(lines: pl.Series, fam: tuple[nccl.FamilyRows, int]) -> pl.Series:
    """The lines the step-log grammar reads once the family grammar has read its lines (`fam`): all of them
    when the family took none, else every line with the family's blanked (written in place in a copy: a
    select over every line costs ~8x more)."""
    family, n_family = fam
    if n_family == 0:
        return lines
    return lines.clone().scatter(family.understood.fill_null(False).arg_true(), "").alias("literal")


def _joined(fam: tuple[nccl.FamilyRows, int], rest: ParseResult) -> ParseResult:
    """A file's result of both grammars: the family's (`fam`) and the step-log grammar's of the other lines
    (`rest`, of `_rest_lines`); `rest` itself when the family took no line."""
    family, n_family = fam
    if n_family == 0:
        return rest
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
