"""Training step-time logs of the common frameworks → `steps` (and straggler-detector reports → `events`).

Megatron-LM/Core/Bridge/NeMo and forks (GPT-NeoX, ALCF Megatron-DeepSpeed, savanna), DeepSpeed (pipeline
`steps:` lines, `step=` log_dist lines, ThroughputTimer, wall_clock_breakdown), Hugging Face Trainer /
accelerate (logged dicts, `train_runtime` summary, tqdm bars split on `\\r`), torchtitan, torchtune,
PyTorch Lightning (tqdm and rich bars), MosaicML Composer / llm-foundry (`[batch=N/M]:` blocks), nanoGPT,
nanochat, modded-nanogpt, litgpt, MaxText, NeMo 2 and NeMo Automodel. The grammars live in
`parsers._step_grammars`; `docs/step-logs.md` documents the output.

How a file becomes rows (all vectorised over the column of lines):
1. Physical lines are split on `\\r` (tqdm redraws) into segments that keep their line number; ANSI colours,
   launcher envelopes (`parsers._common.split_envelopes`), composer rank banners and `INFO:module:` prefixes
   are removed. The envelope (and banner) rank and the pdsh host form the *stream key*.
2. Each grammar turns the lines it matches into *fragments*. Fragments with a step number are anchors;
   phase breakdowns (timer lines and blocks, HF dicts without a step) attach to the latest anchor of the
   same stream a few lines above them. Anchors of one stream with the same step a few lines apart (DeepSpeed
   `step=40` + `0/40, SamplesPerSec=`, tqdm redraws, `[Rank 0] step=1` + `steps: 1 …`) merge into one row.
3. A row takes each value from its most explicit fragment (a printed step time beats a tqdm rate).
4. Times: a row's own timestamp (`exact` with a zone, else `local_assumed_utc`); else the timestamp of the
   line right above it in the same stream when no other step row lies between (`inherited`); else null/`none`.
5. Where no step time is printed, it is derived from cumulative training time or from timestamp deltas
   between consecutive rows of the stream (`step_time_source` says which).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import polars as pl

from forensics.errors import CONTAINED
from forensics.schema import UTC_US, conform
from parsers import _step_grammars as g
from parsers._common import ENVELOPES, is_ascii, repeated
from parsers._nccl_merge import merge_chunks, shift_lines  # noqa: F401 - the ingest's hooks (its NCCL lines' rows)
from parsers._sniff import (
    GatePlan,
    any_of,
    anywhere,
    cheap_requirements,
    gate,
    gate_plan,
    has,
    head_text,
    holds_shared,
    opens_with_digit,
    required_literals,
    share_anchors,
    top_branches,
)
from parsers.base import MAX_EXAMPLES, ArrowCapsules, FileContext, ParseResult, account, compiled, numbered


NAME = "step-log"
DESCRIPTION = (
    "Training step logs: Megatron-LM/Core/NeMo, DeepSpeed, HF Trainer/accelerate (dicts, tqdm), torchtitan, "
    "torchtune, Lightning, Composer/llm-foundry, nanoGPT, MaxText; straggler-detector reports"
)
TABLES = ("steps", "events")
FILENAME_HINTS = ("*train*.log", "*train*.txt", "*stdout*", "*.out", "*step*.log", "log_rank*", "rank*.log")
DETECTS = (
    "step lines (Megatron 'iteration N/M |', DeepSpeed 'steps: N loss:', torchtitan 'step: N loss:', nanoGPT "
    "'iter N: loss', HF Trainer dicts and tqdm bars, composer '[batch=N/M]:', MaxText 'completed step:') "
    "dominating the recognisable lines of the head"
)
PRIORITY = 5

_ITERATION = re.compile(rb" iteration +\d+/ *\d+ *\|")
_MEGATRON_BANNER = b"-------- arguments --------"
_MEGATRON_SIZES = re.compile(rb"using world size: \d+, data-parallel[ -]size")
"""What Megatron-LM prints first (`_print_args`' banner, `validate_args`' sizes): a Megatron log's head."""


def chunk_factor(head: bytes) -> int:
    """How many of the ingest's chunks (`CHUNK_BYTES`) a chunk or byte range of a large training log whose
    first bytes are `head` holds: 2 for a Megatron log (its iteration lines or its preamble in the head), else
    1.

    A Megatron chunk costs ~70 ms of CPU whatever its size (hundreds of polars calls of its lane and of the
    NCCL/PyTorch lines among its steps), ~9 ms a MB more: per MB, 16 -> 32 MB ranges take 13.5 % less CPU,
    for a worker's peak of ~390 MB instead of ~250 (a 16 MB dmon range's: ~360). The others gain less for
    more memory: DeepSpeed -9 %, torchtitan -2 %, Hugging Face 0 % (its worker's peak ~390 -> ~530 MB, its
    4 GB mix's 1.5 -> 2.1 GB)."""
    megatron = _MEGATRON_BANNER in head or _MEGATRON_SIZES.search(head) or _ITERATION.search(head)
    return 2 if megatron else 1


def record_start(window: bytes) -> int:
    """Where in `window` the last Megatron `iteration N/M |` line starts, or -1: a large training log is read
    in chunks that end before one (`forensics.bundle.ChunkReader`), so that the `(min, max) time across
    ranks` block printed after an iteration stays with it. Other training logs have no such line: their
    chunks end at a line end, as any log's."""
    end = len(window)
    for _ in range(64):
        i = window.rfind(b" iteration ", 0, end)
        if i < 0:
            return -1
        if _ITERATION.match(window, i):
            j = window.rfind(b"\n", 0, i)
            return j + 1 if j >= 0 else -1
        end = i
    return -1


_LANE_MIN = 4096
"""Below this many lines (rows) the split lanes and subset passes are skipped: their set-up costs more polars
calls than the regexes they spare on small files. Either way the result is the same."""

MERGE_GAP = 12
"""Anchors of one stream with the same step at most this many lines apart are one row."""
ATTACH_GAP = 12
"""A breakdown attaches to the latest anchor of its stream at most this many lines above it."""
INHERIT_GAP = 2
"""A row without a time inherits one only from a timestamped line at most this many lines above it."""

_TIMER = pl.Struct(
    {
        "name": pl.String,
        "ms": pl.Float64,
        "min_ms": pl.Float64,
        "max_ms": pl.Float64,
        "min_rank": pl.Int32,
        "max_rank": pl.Int32,
    }
)

_EXTRAS: dict[str, pl.DataType] = {
    "total_steps": pl.Int64,
    "epoch": pl.Float64,
    "lr": pl.Float64,
    "grad_norm": pl.Float64,
    "loss_scale": pl.Float64,
    "consumed_samples": pl.Float64,
    "global_batch_size": pl.Float64,
    "skipped_iterations": pl.Int64,
    "nan_iterations": pl.Int64,
    "mfu_pct": pl.Float64,
    "memory_gib": pl.Float64,
    "tokens_per_s": pl.Float64,
    "running_avg_samples_per_s": pl.Float64,
    "global_step": pl.Float64,
    "train_runtime_s": pl.Float64,
    "interval_avg_step_s": pl.Float64,
}

_FRAG: dict[str, pl.DataType] = {
    "line": pl.Int64,
    "seg": pl.Int64,
    "key": pl.String,
    "host": pl.String,
    "rank": pl.Int32,
    "ts": UTC_US,
    "ts_quality": pl.String,
    "kind": pl.String,
    "framework": pl.String,
    "prio": pl.Int32,
    "anchor": pl.Boolean,
    "standalone": pl.Boolean,
    "attach_line": pl.Int64,
    "step": pl.Int64,
    "step_time_s": pl.Float64,
    "step_time_source": pl.String,
    "forward_s": pl.Float64,
    "backward_s": pl.Float64,
    "optimizer_s": pl.Float64,
    "comm_wait_s": pl.Float64,
    "data_s": pl.Float64,
    "throughput": pl.Float64,
    "throughput_unit": pl.String,
    "tflops": pl.Float64,
    "loss": pl.Float64,
    "cum_time_s": pl.Float64,
    **_EXTRAS,
    "timers": pl.List(_TIMER),
}

_BASE = ("line", "seg", "key", "host", "rank", "ts", "ts_quality")

# ----------------------------------------------------------------------------- sniff

_SNIFF_STRONG = [
    re.compile(p)
    for p in (
        g.MEGATRON_ITER_RE,
        g.DS_PIPE_RE,
        g.DS_TPUT_OLD_RE,
        g.DS_TPUT_NEW_RE,
        g.TITAN_RE,
        g.NANOGPT_RE,
        g.NANOCHAT_RE,
        g.MODDED_RE,
        g.LITGPT_RE,
        g.MAXTEXT_RE,
        g.LLMC_RE,
        g.MLLOG_RE,
        g.NEMO2_RE,
        g.AUTOMODEL_RE,
        g.TORCHTUNE_RE,
        g.COMPOSER_HDR_RE,
        g.COMPOSER_STRAGGLER_RE,
        g.STRAGGLER_LINE_RE,
        g.STRAGGLER_TOPK_RE,
        g.NVRX_HDR_RE,
        g.NVRX_RANK_RE,
        g.NVRX_WARN_RE,
        g.TIMER_HDR_RE,
        g.TIMER_LINE_RE,
        r"\d%\|[^|]*\|\s*\d+/\d+ \[[\d:]+<[\d:?]*,\s*(?:[\d.]+|\?)\s*(?:s/it|it/s)",
        r"^\s*\{'(?:loss|train_runtime|eval_loss|train_step_runtime)'\s*:",
        g.DS_STEP_RE,
    )
]
_SNIFF_WEAK = re.compile(
    r"-{10,} arguments -{10,}|\[titan\] \d{4}-|\*{5} Running training \*{5}|DeepSpeed info: version=|"
    r"Total optimization steps = |\[before the start of training step\]|> building \w+ model|"
    r"Trainer is initialized with|\[NeMo [IW] "
)
_SNIFF_SUPPORT = [re.compile(p) for p in (*g.NOISE_RES, g.TIMER_MINMAX_RE, g.COMPOSER_ENTRY_RE, g.NVRX_SUB_RE)]
_SNIFF_OTHER = re.compile(
    r" NCCL (?:INFO|WARN|TRACE)\b|NVRM: |\bkernel: |^\[\s*\d+\.\d+\] |^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} "
    r"|ProcessGroupNCCL|torch\.distributed\.elastic|^\s*#\s+size\s+count"
)
_SNIFF_STRIP = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:\s?|\s*\d+: |\[(?:default|rank)\d+\]:\s?|\[rank: \d+\] |"
    r"(?:\d{1,3}\.){3}\d{1,3}: |[A-Za-z][\w-]*\d[\w.-]*: )+"
)
_ANSI_PY = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SNIFF_COLLECTOR = re.compile(g.COLLECTOR_RE)
_SNIFF_PYLOG = re.compile(g.PYLOG_PREFIX_RE)

# The sniff skips a substitution that cannot match its line: every branch of COLLECTOR_RE opens with `^\d`
# (a first character `str.isdecimal` accepts), PYLOG_PREFIX_RE with one of its level words (else no skip).
_COLLECTOR_DIGIT_FIRST = opens_with_digit(g.COLLECTOR_RE)
_PYLOG_LEVELS = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
_PYLOG_FIRST = (
    frozenset(w[0] for w in _PYLOG_LEVELS.split("|"))
    if g.PYLOG_PREFIX_RE.startswith(f"^(?:{_PYLOG_LEVELS}):")
    else None
)
# literals one of which each sniff regex needs (see parsers._sniff): a regex none of whose literals is in the
# head cannot match any of its lines, so it is not run line by line
_SNIFF_STRONG_LITS = [required_literals(r) for r in _SNIFF_STRONG]
STEP_LINE_LITERALS: tuple[str, ...] = (
    tuple(sorted({lit for lits in _SNIFF_STRONG_LITS for lit in lits}))  # type: ignore[union-attr]
    if all(_SNIFF_STRONG_LITS)
    else ()
)
"""Every step-line shape the sniffer knows contains one of these (empty if some shape has no literal):
`parsers._mixed` scans a chunk of NCCL output for them before looking for step lines."""
# several requirements of each regex (`parsers._sniff.cheap_requirements`), the likeliest missing first: most
# heads lack one char a regex needs (a memchr finds that), so few long searches run
# (and strings sharing a 4-character substring searched for only where it is: `share_anchors`)
_reqs = share_anchors(
    [*map(cheap_requirements, _SNIFF_STRONG), cheap_requirements(_SNIFF_WEAK)]
    + [*map(cheap_requirements, _SNIFF_SUPPORT), cheap_requirements(_SNIFF_OTHER)],
)
_SNIFF_STRONG_REQS = _reqs[: len(_SNIFF_STRONG)]
_SNIFF_WEAK_REQS = _reqs[len(_SNIFF_STRONG)]
_SNIFF_SUPPORT_REQS = _reqs[len(_SNIFF_STRONG) + 1 : -1]
_SNIFF_OTHER_REQS = _reqs[-1]
del _reqs
_SNIFF_ANY: dict[tuple[str, tuple[int, ...]], object] = {}
"""One regex (`any_of`) per set of strong / support regexes a head leaves to test line by line (few sets)."""


def _sniff_any(kind: str, keep: tuple[int, ...]) -> object:
    """`any_of` the `_SNIFF_STRONG` (kind "strong") or `_SNIFF_SUPPORT` regexes numbered `keep`, cached."""
    got = _SNIFF_ANY.get((kind, keep))
    if got is None:
        res = _SNIFF_STRONG if kind == "strong" else _SNIFF_SUPPORT
        got = any_of([res[i] for i in keep]) if keep else None
        if len(_SNIFF_ANY) < 512:
            _SNIFF_ANY[(kind, keep)] = got
    return got


_IN_LEAST = 4
"""The shortest anchor `_by_in` has `in` look for: on the 3-character ones (the most often scanned: 'tep',
'tim') `in` runs ~40 % fewer instructions than the regex but takes ~20-30 % more time (its skip test
mispredicts)."""


def _in_finder(lit: str) -> Callable[[str], object]:
    """A function giving None exactly when `lit` is not in its argument (True where it is), by `in` (`has`:
    `memmem` on a head's text, as `_finder` does there; the two ways differ only on other texts)."""

    def find(text: str) -> object:
        return True if has(text, lit) else None

    return find


def _by_in(plan: GatePlan) -> GatePlan:
    """`plan` with each anchor of `_IN_LEAST` characters or more looked for by `in` instead of its one-literal
    regex: the same answers (None exactly where the anchor is absent), so `gate` gives the same patterns.
    CPython 3.11's `in` skips over a head by up to the needle's length where the character after its window is
    none of the needle's; the regex steps one character at a time to the needle's first one. On the scans the
    sniff makes over the small-file bundle's heads, `in` runs 60 % fewer instructions than the regex for the
    anchors of 5+ characters, 44 % fewer for those of 4 (callgrind)."""
    guards, masks, probes = plan
    return (
        guards,
        masks,
        tuple(
            None
            if reqs is None
            else tuple(
                tuple(
                    (m, tuple((a, _in_finder(a) if len(a) >= _IN_LEAST else find) for a, find in anchors))
                    for m, anchors in req
                )
                for req in reqs
            )
            for reqs in probes
        ),
    )


# Patterns that may match some line of a head without ANSI codes (`parsers._sniff.gate`): the strong regexes
# then each branch of the weak one, so that a head none of them can match in is told apart with a few literal
# scans (None: the weak regex could not be cut into its branches, `holds_shared` serves instead).
_WEAK_BRANCHES = top_branches(_SNIFF_WEAK)
_SNIFF_GATE = _by_in(gate_plan([*_SNIFF_STRONG, *_WEAK_BRANCHES])) if _WEAK_BRANCHES else None
_N_STRONG = len(_SNIFF_STRONG)
_PAIRED = tuple(
    a
    for a in ("tep", "tim")
    if _SNIFF_GATE is not None
    and any(a == b for reqs in _SNIFF_GATE[2] if reqs for req in reqs for _m, got in req for b, _f in got)
)
"""Two anchors of `_SNIFF_GATE` that most heads of other formats lack and `gate` scans for one by one (3
characters each: by regex, see `_IN_LEAST`): one regex scan for either, opening with their common first
character, tells they are both absent in about the time of one (their entries in `gate`'s `seen` set to False
then, which is what its scans would give). Empty (no such scan) where the plan has not both."""
_PAIRED = _PAIRED if len(_PAIRED) == 2 else ()
_PAIRED_SEARCH = re.compile("|".join(map(re.escape, _PAIRED))).search
_PAIRED_ABSENT = dict.fromkeys(_PAIRED, False)
# The branches of the other regex freed of their anchors (`parsers._sniff.anywhere`): none matching anywhere
# in a head, no line of it can count as `other` (None: not so derived, no shortcut).
_OTHER_ANYWHERE = [anywhere(p) for p in top_branches(_SNIFF_OTHER) or [None]]
_OTHER_GATE = (
    (_by_in(gate_plan(_OTHER_ANYWHERE)), [p.search for p in _OTHER_ANYWHERE])  # type: ignore[arg-type, union-attr]
    if all(_OTHER_ANYWHERE)
    else None
)


def _no_other(text: str, seen: dict[str, bool]) -> bool:
    """Whether no line of `text` (a head without ANSI codes) can match `_SNIFF_OTHER`, whatever prefixes the
    sniff strips: no branch of it, freed of its anchors (`_OTHER_ANYWHERE`), matches anywhere in `text`."""
    if _OTHER_GATE is None:
        return False
    plan, searches = _OTHER_GATE
    return not any(searches[i](text) for i in gate(plan, text, seen))


def _first_lines(text: str, n: int) -> Iterator[str]:
    """`text.splitlines()[:n]`, the lines of the first 2,048 characters split first (but the last, maybe cut
    short, they are lines of `text`): a loop that stops at its first line splits no more."""
    got = text[:2048].splitlines()[:-1][:n] if len(text) > 2048 else []
    yield from got
    if len(got) < n:
        yield from text.splitlines()[len(got) : n]


def sniff(head: bytes, name: str) -> float:
    """Score by how much step-line shapes dominate the head's recognisable lines (NCCL/kernel lines compete)."""
    text = head_text(head)
    strong_keep = tuple(range(len(_SNIFF_STRONG)))
    support_keep = tuple(range(len(_SNIFF_SUPPORT)))
    other_re: re.Pattern[str] | None = _SNIFF_OTHER
    weak_re: re.Pattern[str] | None = _SNIFF_WEAK
    seen: dict[str, bool] = {}
    rest_pending = "\x1b" not in text
    # (whether `other` is known to stay 0: then the first strong line settles the score; None: not known yet)
    no_other: bool | None = False
    if rest_pending:
        # without ANSI codes to strip, every string tested below is a substring of `text`: drop the regexes
        # that cannot match in it (`gate`: a requirement of theirs is absent; exact), and stop when no step
        # line or preamble can be found (a regex kept that cannot match changes no count: only which regexes
        # run differs); the support and other regexes are sorted out at the first line no strong regex
        # matches (none needs them before)
        if _SNIFF_GATE is not None:
            if _PAIRED and "t" in text and _PAIRED_SEARCH(text) is None:
                seen.update(_PAIRED_ABSENT)  # (what `gate` would find by two scans: both absent)
            alive = gate(_SNIFF_GATE, text, seen)
            strong_keep = tuple(i for i in alive if i < _N_STRONG)
            weak_re = _SNIFF_WEAK if alive and alive[-1] >= _N_STRONG else None
        else:  # pragma: no cover - the weak regex not cut into its branches
            reqs_of = _SNIFF_STRONG_REQS
            strong_keep = tuple(i for i, reqs in enumerate(reqs_of) if holds_shared(reqs, text, seen))
            weak_re = _SNIFF_WEAK if holds_shared(_SNIFF_WEAK_REQS, text, seen) else None
        if not strong_keep and weak_re is None:
            return 0.0  # strong == 0 and weak is False below, whatever the other counts
        no_other = None if strong_keep else False
    strong_re = _sniff_any("strong", strong_keep)
    support_re = None if rest_pending else _sniff_any("support", support_keep)
    strong = support = other = 0
    weak = False
    ansi = "\x1b" in text
    for raw in _first_lines(text, 2000) if no_other is None else text.splitlines()[:2000]:
        for seg in raw.split("\r"):
            if not seg.strip() or seg.startswith("#SOURCE"):
                continue
            s = _ANSI_PY.sub("", seg) if ansi else seg
            if not _COLLECTOR_DIGIT_FIRST or s[:1].isdecimal():
                s = _SNIFF_COLLECTOR.sub("", s, count=1)
            s = _SNIFF_STRIP.sub("", s, count=1)
            if _PYLOG_FIRST is None or s[:1] in _PYLOG_FIRST:
                s = _SNIFF_PYLOG.sub("", s, count=1)
            if strong_re is not None and strong_re.search(s):  # type: ignore[attr-defined]
                strong += 1
                if no_other is None:
                    no_other = _no_other(text, seen)
                if no_other:
                    # `other` stays 0 whatever the other lines are: share = evidence / evidence = 1.0
                    return 0.92 + 0.06 * 1.0
                continue
            if rest_pending:
                rest_pending = False
                support_keep = tuple(
                    i for i, reqs in enumerate(_SNIFF_SUPPORT_REQS) if holds_shared(reqs, text, seen)
                )
                other_re = _SNIFF_OTHER if holds_shared(_SNIFF_OTHER_REQS, text, seen) else None
                support_re = _sniff_any("support", support_keep)
            if support_re is not None and support_re.search(s):  # type: ignore[attr-defined]
                support += 1
            elif other_re is not None and other_re.search(s):
                other += 1
            elif not weak and weak_re is not None and weak_re.search(s):
                weak = True
    if strong == 0:
        # a training log whose head holds only its preamble (Megatron arguments, HF header): ours unless NCCL/c10
        # lines are there to claim it
        return 0.6 if weak and other == 0 else (0.35 if weak else 0.0)
    evidence = strong + 0.5 * support  # framework lines that are no step (memory, validation, timer entries)
    share = evidence / (evidence + other)
    if share < 0.5:  # mostly NCCL/kernel/c10 lines with a few steps: leave the file to their parsers
        return 0.5 + 0.4 * share
    return 0.92 + 0.06 * share


# ----------------------------------------------------------------------------- helpers


_ascii = g.ThreadFlag()
"""Whether the lines this thread reads hold no non-ASCII character (set by `ascii_scope`): `_rx` then gives
each regex with ASCII classes (`g.ascii_classes`: the same matches on such text), which polars compiles ~10x
faster; it keeps the last 32 regexes compiled only, and a range's reading uses ~100 (with the NCCL grammar's),
so each is compiled again on every range."""


def _rx(pattern: str) -> str:
    """The regex to run for `pattern` on the lines being read (see `_ascii`)."""
    return g.ascii_classes(pattern) if _ascii and isinstance(pattern, str) else pattern


def ascii_scope(ascii: bool) -> contextlib.AbstractContextManager[None]:
    """Regexes of this module run with ASCII classes inside the block when `ascii` (the caller vouches that
    every line read there, and so every text made from them, is ASCII); nested scopes restore the outer."""
    return _ascii.scope(ascii)


def _ascii_of(*texts: pl.Series) -> contextlib.AbstractContextManager[None]:
    """`ascii_scope` for regexes run on `texts` alone (a few lines gathered from a chunk that may hold non-ASCII
    ones, as tqdm bars' blocks): ASCII classes where the scope has them or every text is ASCII (the same
    matches there; such a regex compiles 5-15x faster, and polars compiles each again on every range)."""
    return ascii_scope(bool(_ascii) or all(is_ascii(t) for t in texts))


def _num(expr: pl.Expr) -> pl.Expr:
    """String → Float64 (thousands separators dropped; unparsable → null)."""
    return expr.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)


def _false(n: int) -> pl.Series:
    """A new all-false column of `n` values (`Series.scatter` writes in place)."""
    return repeated(False, n, pl.Boolean)


def other_lines(n: int, at: pl.Series) -> pl.Series:
    """The line positions 0..n-1 that are not in `at` (positions, no null), ascending."""
    return _false(n).scatter(at, True).not_().arg_true()


def _nulls(name: str, n: int, dtype: pl.DataType) -> pl.Series:
    """`pl.Series(name, [None] * n, dtype=dtype)` without the Python list."""
    return repeated(None, n, dtype).alias(name)


def _key(text: pl.Expr, pattern: str) -> pl.Expr:
    """Float value of the single `(?P<v>…)` group of `pattern` in `text` (null when absent)."""
    return _num(text.str.extract(_rx(pattern), 1))


def _frag(df: pl.DataFrame, **cols: pl.Expr) -> pl.DataFrame:
    """Select the base columns of `df` plus `cols` and complete them to the fragment schema."""
    out = df.select(*_BASE, **cols)
    return out.select(
        [
            (pl.col(c).cast(t, strict=False) if c in out.columns else pl.lit(None, dtype=t)).alias(c)
            for c, t in _FRAG.items()
        ]
    )


def _match(
    base: pl.DataFrame,
    pattern: str,
    prefilter: pl.Expr | None = None,
    col: str = "text",
    gate: tuple[str, ...] = (),
    present: frozenset[str] | None = None,
    must: str | None = None,
) -> pl.DataFrame:
    """Rows of `base` whose text matches `pattern`, with its groups in struct column `m`.

    `gate`: literals every match contains; when one of them is not in `present` (the `_GATES` found in the
    file, see `_present`), no row can match and `base` is returned empty without scanning it. `must`: a group
    every match sets (outside any optional part): the groups are extracted once and the rows where it is null
    (no match) dropped, without a separate match test.
    """
    if present is not None and not all(lit in present for lit in gate):
        return base.clear()
    sub = base if prefilter is None else base.filter(prefilter)
    if must is not None:
        return sub.with_columns(m=pl.col(col).str.extract_groups(_rx(pattern))).filter(_f(must).is_not_null())
    rx = _rx(pattern)
    return sub.filter(pl.col(col).str.contains(rx)).with_columns(m=pl.col(col).str.extract_groups(rx))


def _one_per_block(fr: pl.DataFrame) -> pl.DataFrame:
    """The entry fragments of each timer block (same stream and block header) as one fragment, as `_rows` would
    combine them: line, seg and rank of the first entry, each other value the first non-null in line order, the
    timers concatenated in line order.

    A block's entries are consecutive lines of its stream and share their attach line and anchor, so they
    always fall into one row, next to each other; combining them first spares `_rows` sorting and grouping
    one fragment per timer entry (14 per iteration on Megatron logs).
    """
    if fr.height == 0:
        return fr
    rest = [c for c in _FRAG if c not in ("line", "seg", "rank", "key", "attach_line", "timers")]
    return (
        fr.group_by("key", "attach_line", maintain_order=True)
        .agg(
            pl.col("line", "seg", "rank").first(),
            *[pl.col(c).drop_nulls().first() for c in rest],
            timers=pl.col("timers").explode(),
        )
        .select(list(_FRAG))
    )


_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f"
_WS += "\u205f\u3000"
"""The characters `\\s` matches and `str.strip_chars()` strips (Unicode White_Space)."""


def _minmax_groups(
    text: pl.Series, cut: pl.DataFrame | None = None, heads: pl.Series | None = None
) -> pl.Series:
    r"""`text.str.extract_groups(TIMER_MINMAX_RE)` (fields name, min, max) for lines known to match it, by
    splitting.

    In a match, the first `(` of the line opens the `(min, max)` pair (the name and the dots before it hold no
    `(`), so the text before it is `\s+ name \s*\.*: \s*` and the text after it `\s*min,\s*max\s*)\s*` (NUM holds no
    `,` or space). The lazy name is the first character plus the rest with the longest `\s*\.*:\s*` suffix
    removed, computed once per distinct head (timer names repeat every iteration). Regex capture of 300k timer
    entries was the largest single cost on Megatron logs. (`cut`: the lines cut at their first `(` already, see
    `_minmax_pre`: columns `_hc`, the index of each line's head in `heads`, and `_t`.)
    """
    if cut is None:
        parts = text.str.splitn("(", 2).struct.unnest()
        head, tail = parts.get_column("field_0"), parts.get_column("field_1")
        heads = head.unique()
        name = head.replace_strict(heads, _timer_names(heads), return_dtype=pl.String)
    else:
        assert heads is not None
        tail = cut.get_column("_t")
        name = _timer_names(heads).gather(cut.get_column("_hc"))
    nums = tail.str.splitn(",", 2).struct.unnest()
    return pl.DataFrame(
        {
            "name": name,
            "min": nums.get_column("field_0").str.strip_chars(),
            # (`\s*NUM\s*)\s*`: its blanks and `)` stripped from both ends leave NUM, which neither starts nor
            # ends with one of them)
            "max": nums.get_column("field_1").str.strip_chars(_WS + ")"),
        }
    ).to_struct("m")


def _timer_names(heads: pl.Series) -> pl.Series:
    r"""The `name` group of `TIMER_MINMAX_RE` from the text before the `(` of a matching line (see
    `_minmax_groups`)."""
    h = heads.str.strip_chars_start()
    return h.str.slice(0, 1) + h.str.slice(1).str.strip_chars_end().str.strip_suffix(":").str.strip_chars_end(
        "."
    ).str.strip_chars_end()


def _f(name: str) -> pl.Expr:
    return pl.col("m").struct.field(name)


def _json_obj(**fields: pl.Expr) -> pl.Expr:
    """A JSON object string of the non-null fields (keys in the given order); null when all are null."""
    parts = [
        pl.when(expr.is_not_null()).then(pl.struct(expr.alias(name)).struct.json_encode().str.slice(1).str.strip_suffix("}"))
        for name, expr in fields.items()
    ]
    body = pl.concat_list(parts).list.drop_nulls().list.join(",")
    return pl.when(body != "").then(pl.concat_str(pl.lit("{"), body, pl.lit("}")))


def _json_col(df: pl.DataFrame, **fields: pl.Expr) -> pl.Expr:
    """`_json_obj(**fields)` on the rows of `df`, as a literal column: the fields encoded together, once per
    pattern of non-null fields (`_encode_by_null_pattern`; the same text: members in order, non-null ones
    only, null when none is set), instead of one encoding per field and a join of lists."""
    return pl.lit(_encode_by_null_pattern(df, fields).get_column("_enc"))


def _timers(**fields: pl.Expr) -> pl.Expr:
    """A one-element timer list built from the given fields."""
    return pl.concat_list(_timer(**fields))


def _timer(**fields: pl.Expr) -> pl.Expr:
    """A timer struct built from the given fields."""
    return pl.struct(**{k: fields.get(k, pl.lit(None)).cast(t) for k, t in _TIMER.to_schema().items()})


assert "(?P<step>\\d+)\\s*/" in g.MEGATRON_ITER_RE  # (`must="step"`: a mandatory group)
_TITAN_HEAD = g.TITAN_RE.split("(?P<rest>")[0]
assert g.TITAN_RE == _TITAN_HEAD + "(?P<rest>.*(?:memory|tps|wps|tflops|mfu):.*)$"
_TITAN_HEAD_NC = re.sub(r"\(\?P<\w+>", "(?:", _TITAN_HEAD)
_TIMER_LINE_PREFIX = g.TIMER_LINE_RE.split("(?P<pairs>")[0]
assert g.TIMER_LINE_RE == _TIMER_LINE_PREFIX + "(?P<pairs>.*)$"
_TIMER_LINE_BEFORE = r"(?:^|\]\s*|rank=\d+\s+)$"
_TIMER_LINE_AFTER = r"^\s*\|"
_TIMER_LINE_MID = r"time \(ms\)"
assert g.TIMER_LINE_RE == (
    _TIMER_LINE_BEFORE.removesuffix("$")
    + _TIMER_LINE_MID
    + _TIMER_LINE_AFTER.removeprefix("^")
    + "(?P<pairs>.*)$"
)


def _timer_line_hits(text: pl.Series) -> tuple[pl.Series, pl.Series]:
    """`text.str.contains(g.TIMER_LINE_RE)` for lines that hold `time (ms)`, and the text after the first
    `time (ms)` of each line.

    On many lines, those holding it once are cut there: a match of the regex is then the text before ending
    as `_TIMER_LINE_BEFORE` wants (a regex anchored at its end, read backwards from there) and the text after
    starting as `_TIMER_LINE_AFTER` wants (`.*$`, no line feed after the `|`, holds where the text after holds
    none); the regex reads the others (with a line feed there, or `time (ms)` twice)."""
    cut = pl.DataFrame({"_s": text.str.splitn("time (ms)", 2)}).unnest("_s")
    if text.len() < _LANE_MIN:
        return text.str.contains(_rx(g.TIMER_LINE_RE)), cut.get_column("field_1")
    before, after = pl.col("field_0"), pl.col("field_1")
    got = cut.select(
        once=~after.str.contains_any(["time (ms)", "\n"]),
        hit=before.str.contains(_rx(_TIMER_LINE_BEFORE)) & after.str.contains(_rx(_TIMER_LINE_AFTER)),
    )
    once = got.get_column("once").fill_null(False)
    hit = got.get_column("hit").fill_null(False)
    if bool(once.all()):
        return hit, cut.get_column("field_1")
    many = (~once).arg_true()
    return hit.scatter(many, text.gather(many).str.contains(_rx(g.TIMER_LINE_RE))), cut.get_column("field_1")


_TIMER_OTHER = "|".join(
    "(?:" + re.sub(r"\(\?P<\w+>", "(?:", p) + ")"
    for p in (g.TIMER_SINGLE_RE, g.TIMER_NAME_RE, g.TIMER_RANK_RE)
)
"""The timer-entry regexes but the (min, max) one, as one alternation without groups (same truth value)."""
_TIMER_PAIRS_FAST = rf"^(?: *[A-Za-z_][\w\- ]*: *{g.NUM} *\|)* *[A-Za-z_][\w\- ]*: *{g.NUM} *$"
"""Pairs text of one-line timers that `extract_all(TIMER_PAIR_RE)` splits at its `|` (`_block_fragments`)."""
_NVRX_OTHER_GATES = frozenset(("_perf scores: {", "Straggler report processing time:"))
_GATES = ('iteration', 'iter time (s)', 'step=', 'SamplesPerSec=', 'step:', 'loss:', 'iter ', 'dt: ', 'train_time:', 'iter time:', 'tok/s)', ':::MLLOG', 'completed step:', 'Training epoch', '| epoch ', 'Step ', '%|', 'Epoch ', 'time (ms)', '^^^^', '/Rank: ', 'STRAGGLER DETECTION WARNING', '{', '/Rnk: ', 'across ranks', '[batch=', 'performance:', '_perf scores: {', 'Straggler report processing time:')
"""Literals whose absence from every line lets a grammar be skipped: each match of the grammar (or of the header
of a block grammar: `across ranks`, `[batch=`, `performance:`) contains it."""


def _present(
    seg: pl.DataFrame,
    titan: tuple[pl.Series, pl.DataFrame] | None = None,
    minmax: tuple[pl.DataFrame, pl.Series] | None = None,
    bars: tuple[pl.Series, list[pl.Series]] | None = None,
) -> frozenset[str]:
    """The `_GATES` that occur in the cleaned text of `seg` (one Aho-Corasick pass over the column).

    `titan` (`_titan_pre`): a canonical torchtitan line is scanned up to its first `step:` alone; its tail
    (`_TITAN_TAIL`) holds `loss:` and no other gate, and no gate runs from the head into it (`_TAIL_GATES`).
    `minmax` (`_minmax_pre`): a Megatron `(min, max)` timer entry is scanned up to its first `(`, once per
    distinct text there (timer names repeat); what follows it holds no gate (`_MINMAX_TAIL_CHARS`). (The
    heads scanned are those `_minmax_pre` found: each one with its `(` is a prefix of a line, which is either
    scanned in full or a timer entry scanned that far.) `bars` (`_tqdm_lane`): tqdm bars of the canonical
    shape are not scanned, the few distinct texts given with them instead.
    """
    if seg.height == 0:
        return frozenset()
    text = seg.get_column("text")
    other: pl.Series | None = None
    heads: list[pl.Series] = []
    got: frozenset[str] = frozenset()
    if titan is not None:
        idx, cf = titan
        canon = cf.get_column("_canon")
        if canon.any():
            other = repeated(True, seg.height, pl.Boolean)
            other = other.scatter(idx.filter(canon), False)
            # (a gate in `_h0` + `step:` lies in `_h0` or ends in that `step:`, and then lies in the last
            # `_STEP_REACH` characters of `_h0` and the `step:`: those ends are few distinct texts)
            h0 = cf.filter(canon).get_column("_h0")
            heads += [h0, (h0.str.slice(-_STEP_REACH).unique() + "step:")]
            got = _TAIL_GATES
    if minmax is not None and minmax[0].get_column("_mm").any():
        mm = minmax[0].get_column("_mm")
        other = ~mm if other is None else other & ~mm
        heads.append(minmax[1] + "(")
    if bars is not None and bars[0].len():
        keep = repeated(True, seg.height, pl.Boolean).scatter(bars[0], False)
        other = keep if other is None else other & keep
        heads += bars[1]
    if other is not None:
        text = pl.concat([text.filter(other), *heads])
    found = text.str.extract_many(list(_GATES), overlapping=True).explode().drop_nulls().unique()
    return got | frozenset(found.to_list())


_STEP_REACH = max(len(gate) - 1 for gate in _GATES if any(gate.endswith("step:"[:k]) for k in range(1, 6)))
"""How far into the text before it a gate that ends inside a `step:` can start (`completed step:`)."""


_MINMAX_TAIL_CHARS = frozenset(" \t\n\r\f\v0123456789.,+-eEnaif)")
r"""The characters of what can follow the first `(` of a `TIMER_MINMAX_RE` line (`\s*NUM,\s*NUM\s*\)\s*`; its
ASCII ones: a gate with other characters, such as `%`, `|`, a capital, is not one of them)."""
assert all(set(gate) - _MINMAX_TAIL_CHARS for gate in _GATES)  # no gate inside such a tail
assert all(  # no gate runs on past such a `(`
    gate[k] not in _MINMAX_TAIL_CHARS for gate in _GATES for k in range(1, len(gate)) if gate[k - 1] == "("
)


_MM_HEAD = r"^\s+[^\s(][^(]*?\s*\.*:\s*$"
_MM_TAIL = rf"^\s*{g.NUM},\s*{g.NUM}\s*\)\s*$"
assert re.sub(r"\(\?P<\w+>", "(?:", g.TIMER_MINMAX_RE) == (
    _MM_HEAD.removesuffix("$").replace("[^\\s(][^(]*?", "(?:[^\\s(][^(]*?)")
    + "\\("
    + _MM_TAIL.removeprefix("^").replace(g.NUM, f"(?:{g.NUM})")
), "TIMER_MINMAX_RE is no longer `_MM_HEAD` `(` `_MM_TAIL`"


def _minmax_pre(seg: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series] | None:
    r"""On big chunks with `across ranks` somewhere (where `_block_fragments` computes it): column `_mm`,
    which lines match `TIMER_MINMAX_RE`, and the lines cut at their first `(`: `_t` the text after it (null
    when there is none), `_hc` the index of the text before it in the distinct heads of the lines with a `(`
    that match `_MM_HEAD` (null for other lines); and those heads (each one a prefix of some line's text).

    The regex is `_MM_HEAD` without its `$`, then `\(`, then `_MM_TAIL` without its `^`; the part before the
    `\(` matches no `(`, so in a match it is the line's first `(`: a line matches iff it holds a `(`, its
    head matches `_MM_HEAD` and its tail `_MM_TAIL`. The head test runs once per distinct head (timer names
    repeat every iteration), the tail one on the short tails.
    """
    if seg.height < _LANE_MIN:
        return None
    text = seg.get_column("text")
    if not text.str.contains("across ranks", literal=True).any():
        return None
    parts = text.str.splitn("(", 2).struct.unnest()
    head, tail = parts.get_column("field_0").alias("_h"), parts.get_column("field_1").alias("_t")
    heads = head.filter(tail.is_not_null()).unique()
    heads = heads.filter(heads.str.contains(_rx(_MM_HEAD)))
    code = head.replace_strict(heads, pl.int_range(heads.len(), dtype=pl.UInt32, eager=True), default=None)
    mm = tail.str.contains(_rx(_MM_TAIL)).fill_null(False) & code.is_not_null()
    return pl.DataFrame([mm.alias("_mm"), code.alias("_hc"), tail]), heads


def _titan_pre(seg: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame] | None:
    """On big chunks where `_step_fragments` reads torchtitan lines by `_titan_canon` (at least `_LANE_MIN`
    lines with `step:`, `loss:` somewhere), the positions of the lines with `step:` and their `_titan_canon`
    frame."""
    if seg.height < _LANE_MIN:
        return None
    text = seg.get_column("text")
    step = text.str.contains("step:", literal=True)
    if int(step.sum()) < _LANE_MIN:
        return None
    # (`loss:` looked for in the first lines, then, only when not there, in all)
    if not text.head(_LANE_MIN).str.contains("loss:", literal=True).any():
        if not text.str.contains("loss:", literal=True).any():
            return None
    idx = step.arg_true()
    return idx, _titan_canon(text.gather(idx))


# ----------------------------------------------------------------------------- preparation


def _combined_envelope() -> str:
    """All of `_common.ENVELOPES` as one alternation (leftmost alternative wins, so their order is kept);
    each pattern's `rank`/`host` groups are renamed `rank_<i>`/`host_<i>`."""
    alts = []
    for i, (_name, pattern) in enumerate(ENVELOPES):
        py = pattern.replace("(?<", "(?P<").removeprefix("^")
        py = re.sub(r"\(\?P<(\w+)>", lambda m, i=i: f"(?P<{m.group(1)}_{i}>", py)
        alts.append(f"(?:{py})")
    return "^(?:" + "|".join(alts) + ")"


_ENV_RE = _combined_envelope()
_ENV_GROUPS = re.compile(_ENV_RE).groupindex
_ENV_CAP = "^(?P<env_all>" + _ENV_RE.removeprefix("^") + ")"
"""`_ENV_RE` with the whole match captured as `env_all`; used for the match tests too (polars caches a few
dozen compiled patterns: one pattern instead of two saves a compilation, ~1 ms, per file)."""


_ENV_STACK = "^(?:" + re.sub(r"\(\?P<\w+>", "(?:", _ENV_RE.removeprefix("^")) + "){1,3}"
"""Up to three stacked envelopes, no groups: what the three passes of `_strip_passes` strip from a line."""


def _strip_envelopes(seg: pl.DataFrame) -> pl.DataFrame:
    """`_strip_passes(seg)`, with the rank and host worked out once per distinct prefix (and, on big inputs
    that have one, column `_key`: the stream key of that rank and host, see `_prepare`).

    One capture-free replace strips the stack of envelopes from each line that opens with one (the passes
    strip the leftmost-first match of the alternation up to three times, which is the greedy `{1,3}` of
    it: nothing after a match constrains it). The stripped prefixes are few (one per launcher rank or
    host); the passes run on them alone (envelopes hold no anchors but `^`, so a prefix alone is stripped
    as it was in its line) and their rank and host are mapped back to the lines.
    """
    if seg.height < _LANE_MIN:
        return _strip_passes(seg)
    rest = seg.get_column("rest")
    prefix = _env_stack(rest)  # (null where no envelope opens the line)
    if prefix.null_count() == seg.height:
        return seg.with_columns(env_rank=pl.lit(None, dtype=pl.Int32), host=pl.lit(None, dtype=pl.String))
    uniq = prefix.drop_nulls().unique(maintain_order=True)
    meta = _strip_passes(pl.DataFrame({"rest": uniq}))
    if not (meta.get_column("rest") == "").all():  # (cannot happen; the passes, line by line, decide then)
        return _strip_passes(seg)
    # (`_key`: the stream key `_prepare` builds from the host and envelope rank, per distinct prefix too)
    keys = meta.select(
        pl.concat_str(
            [pl.col("host").fill_null(""), pl.col("env_rank").cast(pl.String).fill_null("")], separator="|"
        )
    ).to_series()
    # the rank, host and key of each line's prefix by one join (the prefixes in `uniq` are distinct; a line
    # without one matches none and gets nulls, the key `|`)
    table = pl.DataFrame(
        {
            "_p": uniq,
            "env_rank": meta.get_column("env_rank").cast(pl.Int32, strict=False),
            "host": meta.get_column("host").cast(pl.String),
            "_key": keys,
        }
    )
    n_pre = seg.height - prefix.null_count()
    if n_pre * 4 < seg.height:
        # (few lines open with an envelope, as in Hugging Face logs whose bars have none: only those are cut
        # and joined, their values put back by position; the others keep their text, get nulls and key `|`)
        i = prefix.is_not_null().arg_true()
        p = prefix.gather(i)
        got = pl.DataFrame({"_p": p}).join(table, on="_p", how="left", maintain_order="left")
        rest_s = seg.get_column("rest")
        return seg.with_columns(
            rest=rest_s.scatter(i, rest_s.gather(i).str.slice(p.str.len_chars())),
            env_rank=_nulls("env_rank", seg.height, pl.Int32).scatter(i, got.get_column("env_rank")),
            host=_nulls("host", seg.height, pl.String).scatter(i, got.get_column("host")),
            _key=repeated("|", seg.height, pl.String).scatter(
                i, got.get_column("_key").fill_null("|")
            ),
        )
    got = pl.DataFrame({"_p": prefix}).join(table, on="_p", how="left", maintain_order="left")
    return seg.with_columns(
        rest=pl.col("rest").str.slice(prefix.str.len_chars().fill_null(0)),
        env_rank=got.get_column("env_rank"),
        host=got.get_column("host"),
        _key=got.get_column("_key").fill_null("|"),
    )


def _env_stack(rest: pl.Series) -> pl.Series:
    """`rest.str.extract(_rx(_ENV_STACK), 0)`: each line's stack of up to three envelopes (null where none
    opens it), found one envelope at a time with `_ENV_CAP`, the regex `_strip_passes` reads prefixes with.

    `_ENV_STACK` alone costs ~9 ms to compile on non-ASCII lines (~3 on ASCII ones), and again on every range:
    polars keeps 32 compiled regexes per thread and a range's reading uses ~80; `_ENV_CAP` is compiled for
    `_strip_passes` anyway. The stack is the envelopes matched one after the other, each at the end of the one
    before, up to three (the greedy `{1,3}` of the alternation: nothing after it constrains a match, the
    alternation holds no anchor but the `^` in front and matches no empty text), as `_strip_passes` strips
    them. Only the lines that open with an envelope are read again, and of those the ones with a second one.
    """
    cap = _rx(_ENV_CAP)
    prefix = rest.str.extract(cap, 1)  # (`env_all`: the whole match)
    at = prefix.is_not_null().arg_true()
    for _ in range(2):
        if not at.len():
            break
        p = prefix.gather(at)
        more = rest.gather(at).str.slice(p.str.len_chars()).str.extract(cap, 1)
        hit = more.is_not_null()
        at = at.filter(hit)
        prefix = prefix.scatter(at, p.filter(hit) + more.filter(hit))
    return prefix


def _strip_passes(seg: pl.DataFrame, passes: int = 3) -> pl.DataFrame:
    """Strip stacked launcher prefixes (`3: [default1]:`, `host: [rank0]:`) from column `rest`.

    Same envelopes and semantics as `_common.split_envelopes` (innermost rank and host win), but one
    combined regex per pass instead of one per envelope, which is what makes big logs affordable. Each pass
    captures only on the lines it strips (a stacked prefix is rare) and strips the captured whole match.
    """
    ranks = [n for n in _ENV_GROUPS if n.startswith("rank_")]
    hosts = [n for n in _ENV_GROUPS if n.startswith("host_")]
    seg = seg.with_columns(env_rank=pl.lit(None, dtype=pl.Int32), host=pl.lit(None, dtype=pl.String))
    for _ in range(passes):
        hit = seg.get_column("rest").str.contains(_rx(_ENV_CAP))
        n_hit = int(hit.sum())
        if n_hit == 0:
            break
        idx = None if n_hit == seg.height else hit.arg_true()
        sub = seg if idx is None else seg[idx]
        sub = sub.select("rest", "env_rank", "host", _m=pl.col("rest").str.extract_groups(_rx(_ENV_CAP)))
        m = pl.col("_m")
        upd = {"rest": pl.col("rest").str.strip_prefix(m.struct.field("env_all"))}
        if ranks:
            rank = pl.coalesce(*(m.struct.field(n) for n in ranks)).cast(pl.Int32, strict=False)
            upd["env_rank"] = pl.coalesce(rank, pl.col("env_rank"))
        if hosts:
            upd["host"] = pl.coalesce(*(m.struct.field(n) for n in hosts), pl.col("host"))
        sub = sub.select(**upd)
        if idx is None:
            seg = seg.with_columns(sub)
        else:
            seg = seg.with_columns(seg.get_column(c).scatter(idx, sub.get_column(c)) for c in upd)
    return seg


_FLAG_LITERALS = {
    "esc": "\x1b",
    "pasted": None,
    "banner": "global rank",
    "msg": "[Rank ",
    "mllog": ":::MLLOG",
}
"""What `_segments` looks for in the lines: each flag's literal (`pasted`: `g.ANSI_PASTED_RE`, a regex)."""


def _segments(
    lines: pl.Series, ctx: FileContext, batch: _Batch | None = None, numbers: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, bool], bool, pl.Expr]:
    """What both preparations start with: the numbered lines, their `\\r` segments (`seg`), which cleaning
    and prefix steps can change any line (`on`), whether ANSI codes are removed from inside lines (`dirty`),
    and the text with them removed (`clean`).

    Cheap checks skip the steps that cannot change any line (same result, fewer passes and collects). The
    literal checks run once over the raw lines: every later step works on a suffix of the raw line (prefixes
    stripped) unless ANSI codes are removed from its middle (`dirty`: then every step runs). The anchored
    prefixes are checked where they are stripped, on the text they are stripped from.
    """
    if numbers is not None:  # (lines of a file with others left out between them, see `_titan_lane`)
        frame = pl.DataFrame({"line": numbers.cast(pl.Int64, strict=False), "text": lines.cast(pl.String)})
    else:
        frame = numbered(lines, ctx) if batch is None else batch.frame
    seg = frame
    if frame.height and bool(frame.get_column("text").str.contains("\r", literal=True).any()):
        # segment numbers exploded with the segments (what a window `int_range().over("line")` gave, cheaper)
        # (the split once, as a column: an expression used twice in an eager `with_columns` runs twice)
        parts = frame.get_column("text").str.split("\r")
        seg = frame.with_columns(parts, seg=pl.int_ranges(0, parts.list.len(), dtype=pl.Int64))
        seg = seg.explode("text", "seg")
    else:
        seg = seg.with_columns(seg=pl.lit(0, dtype=pl.Int64))
    text = pl.col("text")
    # (the flags read off the lines, not their segments: same bytes in fewer rows; none of the literals holds
    # a `\r`, nor can a match of the unanchored `ANSI_PASTED_RE`, so a line holds one iff one of its segments
    # does)
    # (the literals found in one Aho-Corasick pass, every occurrence of each reported: a pass each cost ~4x)
    lits = [x for x in _FLAG_LITERALS.values() if x is not None]
    found = frame.get_column("text").str.extract_many(lits, overlapping=True).explode().drop_nulls().unique()
    found = set(found.to_list())
    pasted = bool(frame.select(text.str.contains(_rx(g.ANSI_PASTED_RE)).any()).item())
    flags = {k: (pasted if k == "pasted" else lit in found) for k, lit in _FLAG_LITERALS.items()}
    dirty = bool(flags["esc"] or flags["pasted"])
    on = {k: bool(v) or dirty for k, v in flags.items()}
    clean = text.str.replace_all(_rx(g.ANSI_RE), "") if flags["esc"] else text
    if dirty:
        pasted = clean.str.contains(_rx(g.ANSI_PASTED_RE))
        clean = pl.when(pasted).then(clean.str.replace_all(_rx(g.ANSI_PASTED_RE), "")).otherwise(clean)
    return frame, seg, on, dirty, clean


def _with_banner(lf: pl.LazyFrame, present: bool, batch: _Batch | None = None) -> pl.LazyFrame:
    """`lf` with `banner` (a Composer rank banner line) and `banner_rank` (the rank its `Begin` opened, until
    its `End`; null outside) read off `rest`; when `present` is false no line is one. (`batch`: the lines of
    several files, see `parse_many`: a banner's rank holds until the end of its file at most.)"""
    if not present:
        return lf.with_columns(banner=pl.lit(False), banner_rank=pl.lit(None, dtype=pl.Int32))
    # regex structs are materialised once as columns: eager with_columns does not share subexpressions
    lf = lf.with_columns(_bn=pl.col("rest").str.extract_groups(_rx(g.COMPOSER_BANNER_RE)))
    banner = pl.col("_bn")
    rank = (
        pl.when(banner.struct.field("what") == "Begin")
        .then(banner.struct.field("rank").cast(pl.Int32, strict=False))
        .when(banner.struct.field("what") == "End")
        .then(pl.lit(-1, dtype=pl.Int32))
        .otherwise(pl.lit(None, dtype=pl.Int32))
        .forward_fill()
    )
    if batch is not None:
        rank = rank.over(batch.file_of(pl.col("line")))
    lf = lf.with_columns(banner=banner.struct.field("what").is_not_null(), banner_rank=rank).drop("_bn")
    return lf.with_columns(banner_rank=pl.when(pl.col("banner_rank") >= 0).then(pl.col("banner_rank")))


def _prepare(
    lines: pl.Series, ctx: FileContext, batch: _Batch | None = None, numbers: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (physical lines frame, segment frame with cleaned text, stream key, rank, host, own time).

    `batch`: `lines` are the lines of several files (`parse_many`), numbered by `batch.frame`; the stream key
    does not yet hold the file (the caller adds it). `numbers`: the line numbers of `lines` (ascending), when
    they are not `ctx.first_line` onwards."""
    parts = _segments(lines, ctx, batch, numbers)
    if parts[1].height < _LANE_MIN:  # (few segments: few lines, and no long `\r` redraws, as in tqdm logs)
        return _prepare_small(lines, ctx, batch, numbers, parts)
    frame, seg, on, dirty, clean = parts
    text = pl.col("text")
    frame_seg = seg
    seg = seg.with_columns(raw=text, _date=text.str.contains(_rx(g.TRIAGE_DATE_RE)))
    # a dated line is triaged: the literal tests run on the others (all of them when most lines have no date)
    date = seg.get_column("_date")
    undated = (~date).arg_true()
    dots = None
    text_s = seg.get_column("text")
    # (tried when a quarter of the first lines hold it: either way gives the same triage)
    head = text_s.head(_LANE_MIN)
    if undated.len() > seg.height // 2 and int(head.str.contains("..", literal=True).sum()) * 4 >= head.len():
        # (`..`, a triage literal, is in most lines of Megatron logs, whose timer entries and arguments hold
        # it: where it is, the other literal tests are spared)
        dots = text_s.str.contains("..", literal=True) | date
        if int(dots.sum()) < seg.height // 2:
            dots = None
    if dots is not None:
        rest_i = (~dots).arg_true()
        rest = _triage(text_s.gather(rest_i))
        seg = seg.with_columns(triage=dots.scatter(rest_i, rest))
    elif undated.len() > seg.height // 2:
        seg = seg.with_columns(triage=_triage(text_s, date))
    elif undated.len() == 0:
        seg = seg.with_columns(triage=pl.col("_date"))
    else:
        rest = _triage(text_s.gather(undated))
        seg = seg.with_columns(triage=date.clone().scatter(undated, rest))
    n_all = seg.height
    tri = seg.get_column("triage").arg_true()
    # When the triage leaves out few lines (1-3 % on big training logs), all the lines are read and those few
    # blanked at the end, which costs less than filtering every column and scattering them back. A line left
    # out changes no other line's reading: it is no banner (their `-----` is a triage literal), and the steps
    # it may turn on (a collector time, a logging prefix, a month-day time) change only the lines they match.
    whole = 0 < n_all - tri.len() and (n_all - tri.len()) * 16 <= n_all
    seg = (seg if whole else seg.filter(pl.col("triage"))).with_columns(clean=clean)
    if seg.get_column("clean").str.contains(_rx(g.COLLECTOR_RE)).any():
        seg = seg.with_columns(
            coll_ts=pl.col("clean").str.extract(_rx(g.COLLECTOR_RE), 1),
            clean=pl.col("clean").str.replace(_rx(g.COLLECTOR_RE), ""),
        )
    else:
        seg = seg.with_columns(coll_ts=pl.lit(None, dtype=pl.String))
    seg = _strip_envelopes(seg.with_columns(rest=pl.col("clean")))
    # Steps that change or read only a few lines run on those alone (a literal or anchored test finds them;
    # the others keep their text and get null)
    rest_s = seg.get_column("rest")
    pylog = rest_s.str.contains(_rx(g.PYLOG_PREFIX_RE))
    on["pylog"] = bool(pylog.any())
    if on["pylog"]:
        i = pylog.arg_true()
        rest_s = rest_s.clone().scatter(i, rest_s.gather(i).str.replace(_rx(g.PYLOG_PREFIX_RE), ""))
    # (the c10 time is looked for after the logging prefix is stripped)
    mmdd_hit = rest_s.str.contains(_rx(g.MMDD_TS_RE))
    on["mmdd"] = bool(mmdd_hit.any())
    msg = _nulls("msg_rank", seg.height, pl.Int32)
    if on["msg"]:
        i = rest_s.str.contains("[Rank ", literal=True).arg_true()
        msg = msg.scatter(i, rest_s.gather(i).str.extract(_rx(g.MSG_RANK_RE), 1).cast(pl.Int32, strict=False))
    seg = seg.with_columns(rest=rest_s, msg_rank=msg)
    lf = seg.lazy()
    lf = _with_banner(lf, on["banner"], batch)
    stream_rank = pl.coalesce(pl.col("env_rank"), pl.col("banner_rank"))
    key = pl.concat_str([pl.col("host").fill_null(""), stream_rank.cast(pl.String).fill_null("")], separator="|")
    if "_key" in seg.columns and not on["banner"]:  # (the stream rank is the envelope's: the key per prefix)
        key = pl.col("_key")
    lf = lf.with_columns(key=key, rank=pl.coalesce(stream_rank, pl.col("msg_rank")), text=pl.col("rest"))
    seg = lf.collect()
    # own timestamp (a collector's clock, being exact, wins over the framework's local one), worked out on the
    # lines that can hold one: a collector time, a date (the raw line holds the text's unless ANSI codes were
    # cut from its middle), an absl/c10 month-day time, an MLPerf record
    year = ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)
    mmdd_on = on["mmdd"] and year is not None
    text_s = seg.get_column("text")
    need = seg.get_column("coll_ts").is_not_null() | (
        text_s.str.contains(_rx(g.TRIAGE_DATE_RE)) if dirty else seg.get_column("_date")
    )
    if mmdd_on:
        need = need | mmdd_hit
    if on["mllog"]:
        need = need | text_s.str.contains(":::MLLOG", literal=True)
    n_need = int(need.sum())
    if n_need == seg.height:
        seg = seg.with_columns(_own_time(seg.select("text", "coll_ts"), year, mmdd_on, on["mllog"]))
    elif n_need * 4 >= seg.height * 3:
        # (most lines: read all, which costs less than gathering them; a line without any of the above has no
        # own time, so the others are nulled; `_own_time` reads each line on its own)
        own = _own_time(seg.select("text", "coll_ts"), year, mmdd_on, on["mllog"])
        seg = seg.with_columns(
            ts=pl.when(need).then(own.get_column("ts")),
            ts_quality=pl.when(need).then(own.get_column("ts_quality")),
        )
    else:
        i = need.arg_true()
        sub = seg.select("text", "coll_ts")[i]
        with _ascii_of(*sub.get_columns()):  # (the dated lines of a log with tqdm bars are ASCII, most likely)
            own = _own_time(sub, year, mmdd_on, on["mllog"])
        seg = seg.with_columns(
            ts=_nulls("", seg.height, UTC_US).scatter(i, own.get_column("ts")),
            ts_quality=_nulls("", seg.height, pl.String).scatter(
                i, own.get_column("ts_quality")
            ),
        )
    cols = ["line", "seg", "raw", "text", "key", "host", "rank", "banner", "ts", "ts_quality"]
    if whole:  # the lines the triage left out get blank text and no stream
        t = pl.col("triage")
        seg = seg.select(
            "line",
            "seg",
            "raw",
            text=pl.when(t).then(pl.col("text")).otherwise(pl.lit("")),
            key=pl.when(t).then(pl.col("key")).otherwise(pl.lit("|")),
            **{c: pl.when(t).then(pl.col(c)) for c in ("host", "rank")},
            banner=pl.when(t).then(pl.col("banner")).otherwise(pl.lit(False)),
            **{c: pl.when(t).then(pl.col(c)) for c in ("ts", "ts_quality")},
        )
        return frame, seg.rechunk()
    seg = seg.select(cols)
    if seg.height == n_all:  # every line triaged: `seg` is in (line, seg) order (filters keep the order)
        return frame, seg.rechunk()
    # the lines the triage left out get blank text and no stream (in place: the frame is in (line, seg) order)
    full = frame_seg.select(
        "line",
        "seg",
        raw=pl.col("text"),
        text=pl.lit(""),
        key=pl.lit("|"),
        host=pl.lit(None, dtype=pl.String),
        rank=pl.lit(None, dtype=pl.Int32),
        banner=pl.lit(False),
        ts=pl.lit(None, dtype=UTC_US),
        ts_quality=pl.lit(None, dtype=pl.String),
    )
    if seg.height == 0:
        return frame, full
    # (a column whose triaged values are all the blank's (no stream, no time: most of them in logs without
    # envelopes) is left as it is; one with a few others gets those alone)
    # (the tests cost no string pass where every value differs from the blank's: no null, or a key other than
    # `|` in each of the first lines)
    put = {}
    for c in cols[3:]:
        col = seg.get_column(c)
        if c == "key":
            other = None if col.head(1024).ne_missing("|").all() else col.ne_missing("|")
        elif c == "banner":
            other = col.ne_missing(False)
        else:
            other = None if c == "text" or col.null_count() == 0 else col.is_not_null()
        n_other = col.len() if other is None else int(other.sum())
        if n_other == col.len():
            put[c] = full.get_column(c).scatter(tri, col)
        elif n_other:
            at = other.arg_true()  # type: ignore[union-attr]
            put[c] = full.get_column(c).scatter(tri.gather(at), col.gather(at))
    return frame, full.with_columns(**put)


def _triage(text: pl.Series, date: pl.Series | None = None) -> pl.Series:
    """`text.str.contains_any(TRIAGE_LITERALS) | text.str.strip_chars_end().str.ends_with(":")` (`| date` when
    given), the strip and test run only on the texts that neither the literals nor `date` triage (a line
    true there is true whatever the test gives; the others get the test's value, as `false | x` is `x`)."""
    hit = text.str.contains_any(list(g.TRIAGE_LITERALS))
    if date is not None:
        hit = hit | date
    rest = (~hit).arg_true()
    if rest.len():
        hit = hit.scatter(rest, text.gather(rest).str.strip_chars_end().str.ends_with(":"))
    return hit


_TS_CANON = (
    r"^[\x00-\x2f\x3a-\x7f]{0,40}[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(?:[.,][0-9]{1,9})?(?:[^\d.,Z+\-]|$)"
)
"""Lines whose `TS_RE` match `_own_time` reads by offsets: ASCII without digits before the date, no zone."""


def _own_time(seg: pl.DataFrame, year: int | None, mmdd_on: bool, mllog_on: bool) -> pl.DataFrame:
    """Columns `ts`, `ts_quality` of each line's own timestamp (see `_prepare`).

    Split lane for lines without a collector time whose text is `_TS_CANON`: there `TS_RE` matches at the
    first digit (none before it, at most 40 characters in), its fraction is every digit after the `.`/`,` and
    it has no zone; no month-day time (`MMDD_TS_RE` needs digits before any `-`) or MLPerf record is there.
    """
    if seg.height < _LANE_MIN:
        return _own_time_re(seg, year, mmdd_on, mllog_on)
    txt = pl.col("text")
    canon = seg.select(
        pl.col("coll_ts").is_null()
        & txt.str.contains(_rx(_TS_CANON))
        & (~txt.str.contains(":::MLLOG", literal=True) if mllog_on else pl.lit(True))
    ).to_series()
    n_canon = int(canon.sum())
    if n_canon == 0:
        return _own_time_re(seg, year, mmdd_on, mllog_on)
    fast = seg.filter(canon) if n_canon < seg.height else seg
    fast = fast.select("text", _o=txt.str.find(_rx("[0-9]")))
    lo, hi = fast.select(pl.col("_o").min(), pl.col("_o").max().alias("_hi")).row(0)
    o = pl.lit(lo) if lo == hi else pl.col("_o")  # (one offset, as on most logs: plain slices, cheaper)
    # `_dt`: date, ` ` or `T`, time (made `T` on the distinct values alone); `_fd`: the fraction's digits
    # (1 to 9 of them after the `.` or `,` when there is one: a `.` or `,` after the seconds opens a fraction)
    fast = fast.select(
        _dt=txt.str.slice(o, 19), _fd=txt.str.slice(o + 19, 10).str.extract(_rx(r"^[.,]([0-9]+)"), 1)
    )
    fd = pl.col("_fd")
    # the date and time parsed once per distinct second, the fraction (up to 6 digits) added as microseconds;
    # a longer fraction or a leap second (`:60`) takes the whole text's parse
    odd = fast.select(
        ~fd.str.len_bytes().is_between(1, 6).fill_null(True) | pl.col("_dt").str.ends_with(":60")
    ).to_series()
    us = fd.str.pad_end(6, "0").cast(pl.Int64, strict=False).fill_null(0)
    n_t = int(fast.select(pl.col("_dt").str.contains("T", literal=True).sum()).item())
    if n_t in (0, fast.height):  # one separator (` ` or `T`) in all: one parse with it in the format (cached)
        sep = "T" if n_t else " "
        # (`_dt` has no fraction: no `%.f`, which makes the parse twice as slow and reads those 19 characters
        # the same)
        naive = pl.col("_dt").str.to_datetime(f"%Y-%m-%d{sep}%H:%M:%S", strict=False, time_unit="us")
    else:
        uniq = fast.get_column("_dt").unique()
        base = (uniq.str.slice(0, 10) + "T" + uniq.str.slice(11)).str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us"
        )
        naive = pl.col("_dt").replace_strict(uniq, base, return_dtype=pl.Datetime("us"))
    naive = naive + pl.duration(microseconds=us)
    n_odd = int(odd.sum())
    if n_odd:
        i = odd.arg_true()
        dt, frac = pl.col("_dt"), pl.concat_str(pl.lit("."), fd).fill_null("")
        whole = fast[i].select(
            pl.concat_str(dt.str.slice(0, 10), pl.lit("T"), dt.str.slice(11), frac).str.to_datetime(
                "%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us"
            )
        ).to_series()
        fast = fast.select(_n=naive)
        fast = fast.with_columns(fast.get_column("_n").scatter(i, whole))
    else:
        fast = fast.select(_n=naive)
    fast = fast.select(
        ts=pl.col("_n").dt.replace_time_zone("UTC"),
        ts_quality=pl.when(pl.col("_n").is_not_null()).then(pl.lit("local_assumed_utc")),
    )
    if n_canon == seg.height:
        return fast
    slow = _own_time_re(seg.filter(~canon), year, mmdd_on, mllog_on)
    i_fast, i_slow = canon.arg_true(), (~canon).arg_true()
    return pl.DataFrame(
        {
            c: _nulls(c, seg.height, slow.schema[c])
            .scatter(i_fast, fast.get_column(c))
            .scatter(i_slow, slow.get_column(c))
            for c in ("ts", "ts_quality")
        }
    )


def _own_time_re(seg: pl.DataFrame, year: int | None, mmdd_on: bool, mllog_on: bool) -> pl.DataFrame:
    """`_own_time` by the regexes."""
    lf = _own_time_lazy(seg.lazy().select("text", "coll_ts"), year, mmdd_on, mllog_on)
    return lf.select("ts", "ts_quality").collect()


def _own_time_lazy(lf: pl.LazyFrame, year: int | None, mmdd_on: bool, mllog_on: bool) -> pl.LazyFrame:
    """`lf` (columns `text`, `coll_ts`) with `ts`, `ts_quality` by the regexes (and helper columns `_*`)."""
    lf = lf.with_columns(_t=pl.coalesce(pl.col("coll_ts"), pl.col("text")).str.extract_groups(_rx(g.TS_RE)))
    if mmdd_on:
        lf = lf.with_columns(_mm=pl.col("text").str.extract_groups(_rx(g.MMDD_TS_RE)))
    t = pl.col("_t")
    frac = t.struct.field("frac").str.replace(",", ".", literal=True).fill_null("")
    naive = pl.concat_str([t.struct.field("date"), pl.lit("T"), t.struct.field("time"), frac]).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us"
    )
    tz = t.struct.field("tz")
    tzp = tz.str.extract_groups(_rx(r"^(?P<sign>[+-])(?P<h>\d\d):?(?P<m>\d\d)$"))
    hours, minutes = (tzp.struct.field(k).cast(pl.Int64, strict=False) for k in ("h", "m"))
    offset_min = (hours * 60 + minutes) * pl.when(tzp.struct.field("sign") == "-").then(-1).otherwise(1)
    mmdd = pl.col("_mm")
    if not mmdd_on:
        md_ts = pl.lit(None, dtype=pl.Datetime("us"))
    else:
        md_ts = pl.concat_str(
            [
                pl.lit(f"{year}-"),
                mmdd.struct.field("mo"),
                pl.lit("-"),
                mmdd.struct.field("d"),
                pl.lit("T"),
                mmdd.struct.field("time"),
                mmdd.struct.field("frac").str.slice(0, 7).fill_null(""),
            ]
        ).str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    if mllog_on:
        mllog_ms = (
            pl.col("text")
            .str.extract(_rx(r":::MLLOG \{.*?\"time_ms\":\s*(\d+(?:\.\d+)?)"), 1)
            .cast(pl.Float64, strict=False)
        )
        mllog_ts = (mllog_ms * 1000).cast(pl.Int64, strict=False).cast(pl.Datetime("us"))
    else:
        mllog_ts = pl.lit(None, dtype=pl.Datetime("us"))
    lf = lf.with_columns(_naive=naive, _tz=tz).with_columns(
        _mllog=mllog_ts,
        _utc=pl.when(pl.col("_tz").is_null() | (pl.col("_tz") == "Z"))
        .then(pl.col("_naive"))
        .otherwise(pl.col("_naive") - pl.duration(minutes=offset_min.fill_null(0))),
        _md=md_ts,
    )
    return lf.with_columns(
        ts=pl.coalesce(pl.col("_mllog"), pl.col("_utc"), pl.col("_md")).dt.replace_time_zone("UTC"),
        ts_quality=pl.when(pl.col("_mllog").is_not_null() | (pl.col("_naive").is_not_null() & pl.col("_tz").is_not_null()))
        .then(pl.lit("exact"))
        .when(pl.col("_naive").is_not_null())
        .then(pl.lit("local_assumed_utc"))
        .when(pl.col("_md").is_not_null())
        .then(pl.lit("year_inferred"))
        .otherwise(pl.lit(None, dtype=pl.String)),
    )


def _prepare_small(
    lines: pl.Series,
    ctx: FileContext,
    batch: _Batch | None = None,
    numbers: pl.Series | None = None,
    parts: tuple[pl.DataFrame, pl.DataFrame, dict[str, bool], bool, pl.Expr] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_prepare` for a few segments: one lazy query for the streams and times (the subset passes of
    `_prepare` cost more calls than they spare there). `parts`: `_segments` of the lines, when the caller has
    it."""
    frame, seg, on, dirty, clean = parts if parts is not None else _segments(lines, ctx, batch, numbers)
    text = pl.col("text")
    triage = (
        text.str.contains_any(list(g.TRIAGE_LITERALS))
        | text.str.contains(_rx(g.TRIAGE_DATE_RE))
        | text.str.strip_chars_end().str.ends_with(":")
    )
    seg = seg.with_columns(raw=text, triage=triage)
    rest = seg.filter(~pl.col("triage")).select(
        "line",
        "seg",
        "raw",
        text=pl.lit(""),
        key=pl.lit("|"),
        host=pl.lit(None, dtype=pl.String),
        rank=pl.lit(None, dtype=pl.Int32),
        banner=pl.lit(False),
        ts=pl.lit(None, dtype=UTC_US),
        ts_quality=pl.lit(None, dtype=pl.String),
    )
    seg = seg.filter(pl.col("triage")).with_columns(clean=clean)
    if seg.get_column("clean").str.contains(_rx(g.COLLECTOR_RE)).any():
        seg = seg.with_columns(
            coll_ts=pl.col("clean").str.extract(_rx(g.COLLECTOR_RE), 1),
            clean=pl.col("clean").str.replace(_rx(g.COLLECTOR_RE), ""),
        )
    else:
        seg = seg.with_columns(coll_ts=pl.lit(None, dtype=pl.String))
    seg = _strip_passes(seg.with_columns(rest=pl.col("clean")))
    after = seg.select(
        pylog=pl.col("rest").str.contains(_rx(g.PYLOG_PREFIX_RE)).any(),
        mmdd=pl.col("rest").str.contains(_rx(g.MMDD_TS_RE)).any(),
    ).row(0, named=True)
    # (the c10 time is looked for after the logging prefix is stripped: assume it may be there when one is)
    on |= {"pylog": bool(after["pylog"]), "mmdd": bool(after["mmdd"] or after["pylog"])}
    # the rest is one lazy query (one collect); its result is re-sorted below, so the row order is unchanged
    lf = seg.lazy()
    if on["pylog"]:
        lf = lf.with_columns(rest=pl.col("rest").str.replace(_rx(g.PYLOG_PREFIX_RE), ""))
    lf = _with_banner(lf, on["banner"], batch)
    lf = lf.with_columns(
        msg_rank=pl.col("rest").str.extract(_rx(g.MSG_RANK_RE), 1).cast(pl.Int32, strict=False)
        if on["msg"]
        else pl.lit(None, dtype=pl.Int32),
    )
    stream_rank = pl.coalesce(pl.col("env_rank"), pl.col("banner_rank"))
    lf = lf.with_columns(
        key=pl.concat_str(
            [pl.col("host").fill_null(""), stream_rank.cast(pl.String).fill_null("")], separator="|"
        ),
        rank=pl.coalesce(stream_rank, pl.col("msg_rank")),
        text=pl.col("rest"),
    )
    # own timestamp (a collector's clock, being exact, wins over the framework's local one)
    year = ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)
    lf = _own_time_lazy(lf, year, on["mmdd"] and year is not None, on["mllog"])
    seg = lf.select(rest.columns).collect()
    if rest.height == 0:  # every line triaged: `seg` is in (line, seg) order already (filters keep the order)
        return frame, seg.rechunk()
    return frame, pl.concat([seg, rest]).sort("line", "seg")


# ----------------------------------------------------------------------------- grammars → fragments


_MEGATRON_HEAD = r"^\s*(?:\[[\d-]+ [\d:]+\]\s+)?iteration\s+\d+\s*/\s*\d+\s*$"
"""The part before the first `|` of the iteration lines the split lane takes (timestamp, `iteration N/M`)."""
_NUM_FULL = rf"^(?:{g.NUM})$"
_MEGATRON_NAME_KEYS: dict[str, tuple[str, ...]] = {}
"""Field name → the `g.MEGATRON_KEYS` whose regex takes a `| name: NUM |` field (cached per name)."""


def _megatron_name_keys(names: list[str]) -> dict[str, tuple[str, ...]]:
    """For each field name, the keys whose regex matches the field `| name: 1 |` (tested with polars' regex
    engine on one synthetic field per distinct name: the mapping is what the key regexes do, no hand-written
    table)."""
    new = [n for n in names if n not in _MEGATRON_NAME_KEYS]
    if new:
        probe = pl.DataFrame({"t": [f"| {n}: 1 |" for n in new]})
        hits = probe.select(**{k: pl.col("t").str.contains(_rx(p)) for k, p in g.MEGATRON_KEYS.items()})
        for i, n in enumerate(new):
            _MEGATRON_NAME_KEYS[n] = tuple(k for k in g.MEGATRON_KEYS if hits.get_column(k)[i])
    return {n: _MEGATRON_NAME_KEYS[n] for n in names}


_MEG_V = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
"""The ASCII `g.NUM`s without nan and inf (a value of `_megatron_fast`'s regex)."""
_MEG_HEAD_RE = re.compile(_MEGATRON_HEAD)


def _megatron_fast(text: pl.Series) -> tuple[pl.Series, dict[str, pl.Series]] | None:
    """`_megatron_values` of the lines laid out as the first one (same field names in the same order, each
    `| name: NUM |` with blanks around and a plain ASCII NUM, blanks after the last `|`): which lines are
    (the mask) and their `_k_<k>` columns (null elsewhere); None when the first line has no such layout.

    One regex built from the first line's names captures the values: a line it matches is one the split
    lane takes (`_MEGATRON_HEAD` before the first `|`, every field a name without `:`, `=` or `|` and a
    whole NUM), each field's name exactly the first line's, so each key takes the value of the first field
    whose name maps to it (`_megatron_name_keys`), as the split lane does."""
    first = text[0]
    if first is None:
        return None
    parts = first.split("|")
    if len(parts) < 3 or not _MEG_HEAD_RE.search(parts[0]) or parts[-1].strip(" "):
        return None
    names = []
    for p in parts[1:-1]:
        kv = p.split(":", 1)
        name = kv[0].strip()
        if len(kv) < 2 or not name or "=" in name or name != kv[0].strip(" "):
            return None
        names.append(name)
    mapping = _megatron_name_keys(sorted(set(names)))
    ats = {k: next((i for i, nm in enumerate(names) if k in mapping[nm]), None) for k in g.MEGATRON_KEYS}
    scanned = _meg_iterations_scanned(text, names)  # (the compiled scanner of the regex below, where built)
    if scanned is not None:
        ok, values = scanned
        vals = pl.DataFrame([values[at].alias(k) for k, at in ats.items() if at is not None])
    else:
        # (the head with ASCII blanks and digits, a part of `_MEGATRON_HEAD`'s lines: half the time of the
        # regex; a test without groups, the values then cut at the `|` and `:` of the lines it takes: a
        # capture of the groups costs three times more)
        head = r" *(?:\[[0-9-]+ [0-9:]+\] +)?iteration +[0-9]+ */ *[0-9]+ *"
        rx = "^" + head + r"\|" + "".join(rf" *{re.escape(nm)}: *{_MEG_V} *\|" for nm in names) + " *$"
        ok = text.str.contains(_rx(rx)).fill_null(False)
        fields = text.str.splitn("|", len(names) + 2).struct.unnest()
        at_names = {k: (at, names[at]) for k, at in ats.items() if at is not None}
        vals = _megatron_fast_values(fields, ok, at_names)
    every = bool(ok.all())
    cols = {}
    for k in g.MEGATRON_KEYS:
        at = ats[k]
        if at is None:
            cols[f"_k_{k}"] = _nulls(f"_k_{k}", text.len(), pl.Float64)
        else:
            val = vals.get_column(k)
            if every:  # (every line laid out as the first: no value to blank; one chunk, as the select gives)
                cols[f"_k_{k}"] = val.rechunk().alias(f"_k_{k}")
            else:
                kept = pl.select(pl.when(pl.lit(ok)).then(pl.lit(val))).to_series()
                cols[f"_k_{k}"] = kept.alias(f"_k_{k}")
    return ok, cols


def _meg_iterations_scanned(text: pl.Series, names: list[str]) -> tuple[pl.Series, list[pl.Series]] | None:
    """`_megatron_fast`'s reading of `text` with the field names `names` by the compiled scanner
    (`parsers._fastscan.meg_iterations`: the regex's language; each field's value as its Float64 cast):
    which lines are laid out so, and each field's values (NaN elsewhere); None where the scanner is not built
    or stops at a line (of the layout, with a value beyond its exact range or not of its plain form)."""
    if len(names) > 64:  # (the scanner's most fields)
        return None
    got = _scan("meg_iterations", text, 1, len(names), [nm.encode() for nm in names])
    if got is None:
        return None
    ok, floats = got
    n = text.len()
    values = [pl.Series(floats[j * n : (j + 1) * n]) for j in range(len(names))]
    return pl.Series("ok", ok).cast(pl.Boolean), values


def _scan(name: str, text: pl.Series, n_ints: int, n_floats: int, *args: object) -> tuple[Any, Any] | None:
    """The compiled scanner `parsers._fastscan.<name>` run over the lines `text` (`args`: its own arguments
    before the outputs): its integer and float outputs, numpy arrays holding output k of line i at k * n + i;
    None where it is not built (nor this scanner in an older build), there is no line or a null one, or it
    stopped at a line (the regex path then decides)."""
    scan = compiled(name)
    n = text.len()
    if scan is None or n == 0 or text.null_count():
        return None
    import numpy as np  # (here: a worker that reads no line of these shapes never imports it)

    ints, floats = np.empty(n_ints * n, dtype=np.int64), np.empty(n_floats * n, dtype=np.float64)
    if scan(text.__arrow_c_stream__(), n, *args, ints, floats) != n:
        return None
    return ints, floats


def _megatron_fast_values(
    fields: pl.DataFrame, ok: pl.Series, at: dict[str, tuple[int, str]]
) -> pl.DataFrame:
    """For each key k of `at` (the index and name of its field), the Float64 value of field `at[k]` of the
    lines `fields` (`field_1`... the fields of `_megatron_fast`): the text after its first `:`, blanks
    stripped, on the lines `ok` (others: anything), one column per key.

    A field of a line `ok` is ` *name: *NUM *`, its name without `:`: where it opens with one blank and its
    name, the text after its first `:` is the rest (a prefix stripped, no split); a field that does not
    keeps its name and `:`, which no number holds, so it casts to null, and then the column is read by the
    split (`_meg_field_value`), the general way.
    """
    if not at:
        return pl.DataFrame()
    got = fields.select(
        **{
            k: pl.col(f"field_{i + 1}").str.strip_prefix(f" {name}:").str.strip_chars(" ")
            .cast(pl.Float64, strict=False)
            for k, (i, name) in at.items()
        }
    )
    bad = got.select(pl.all().is_null() & pl.lit(ok)).select(pl.all().any()).row(0, named=True)
    redo = [k for k, b in bad.items() if b]
    if redo:
        split = fields.select(**{k: _meg_field_value(pl.col(f"field_{at[k][0] + 1}")) for k in redo})
        got = got.with_columns(split)
    return got


def _meg_field_value(field: pl.Expr) -> pl.Expr:
    """A `_megatron_fast` field's value: the text after its first `:`, blanks stripped, as Float64."""
    val = field.str.splitn(":", 2).struct.field("field_1")
    return val.str.strip_chars(" ").cast(pl.Float64, strict=False)


def _megatron_values(text: pl.Series) -> pl.DataFrame:
    """`_key(text, g.MEGATRON_KEYS[k])` for every key k (columns `_k_<k>`), for Megatron iteration lines:
    `_megatron_fast` for the lines laid out as the first one, `_megatron_split` for the others."""
    fast = _megatron_fast(text) if text.len() else None
    if fast is None:
        return _megatron_split(text)
    ok, cols = fast
    if bool(ok.all()):
        return pl.DataFrame(list(cols.values()))
    idx = (~ok).arg_true()
    sub = _megatron_split(text.gather(idx))
    return pl.DataFrame([c.scatter(idx, sub.get_column(name)) for name, c in cols.items()])


def _megatron_split(text: pl.Series) -> pl.DataFrame:
    """`_key(text, g.MEGATRON_KEYS[k])` for every key k (columns `_k_<k>`), for Megatron iteration lines.

    Split lane: a line `HEAD | name: NUM | … | name: NUM |` (HEAD the timestamp and `iteration N/M`, every
    field one name without `:`, `=` or `|` and one whole NUM, nothing but blanks after the last `|`) is
    split on `|` and `:`. In such a line a key regex can only match inside one field (its name part holds
    no `|`, its value is NUM then blanks then `|`), with the field's own `:` and the whole stripped value as
    its group, and it matches a field iff it matches `| name: 1 |`; its first match is in the first such
    field. Other lines take the regexes.
    """
    n = text.len()
    parts = text.str.split("|")
    shape = pl.DataFrame({"p": parts}).select(
        head=pl.col("p").list.first(),
        last=pl.col("p").list.last(),
        nf=pl.col("p").list.len(),
    ).select(
        ok=pl.col("head").str.contains(_rx(_MEGATRON_HEAD))
        & (pl.col("last").str.strip_chars() == "")
        & (pl.col("nf") >= 3),
    ).get_column("ok")
    ex = (
        pl.DataFrame({"_r": pl.int_range(n, dtype=pl.Int64, eager=True), "p": parts})
        .filter(shape)
        .select("_r", p=pl.col("p").list.slice(1, pl.col("p").list.len() - 2))
        .explode("p")
        .with_columns(kv=pl.col("p").str.splitn(":", 2))
        .select(
            "_r",
            name=pl.col("kv").struct.field("field_0").str.strip_chars(),
            val=pl.col("kv").struct.field("field_1").str.strip_chars(),
        )
    )
    bad = ex.filter(
        pl.col("val").is_null()
        | pl.col("name").str.contains("=", literal=True)
        | ~pl.col("val").str.contains(_rx(_NUM_FULL))
    ).get_column("_r")
    ex = ex.filter(~pl.col("_r").is_in(bad.implode()))
    mapping = _megatron_name_keys(ex.get_column("name").unique().to_list())
    pairs = [(nm, k) for nm, ks in mapping.items() for k in ks]
    cols = {f"_k_{k}": _nulls(f"_k_{k}", n, pl.Float64) for k in g.MEGATRON_KEYS}
    if pairs:
        table = pl.DataFrame({"name": [p[0] for p in pairs], "key": [p[1] for p in pairs]})
        got = (
            ex.with_columns(_pos=pl.int_range(pl.len(), dtype=pl.Int64))
            .join(table, on="name", how="inner")
            .sort("_r", "_pos")
            .group_by("_r", "key", maintain_order=True)
            .agg(pl.col("val").first())
        )
        for k in g.MEGATRON_KEYS:
            sub = got.filter(pl.col("key") == k)
            if sub.height:
                val = sub.get_column("val").cast(pl.Float64, strict=False)
                cols[f"_k_{k}"] = cols[f"_k_{k}"].scatter(sub.get_column("_r"), val)
    slow = (~shape | pl.int_range(n, dtype=pl.Int64, eager=True).is_in(bad.implode())).arg_true()
    if slow.len():
        sub = pl.DataFrame({"text": text.gather(slow)}).select(
            **{f"_k_{k}": _key(pl.col("text"), p) for k, p in g.MEGATRON_KEYS.items()}
        )
        for c in cols:
            cols[c] = cols[c].scatter(slow, sub.get_column(c))
    return pl.DataFrame(list(cols.values()))


_TITAN_CANON = (
    rf"(?:^|\s)step: +\d+ +loss: +{g.NUM} +(?:grad_norm: +{g.NUM} +)?memory: +{g.NUM}GiB\([0-9.]+%\) +"
    rf"(?:tps|wps): +{g.INT_SEP}(?:\.\d+)? +tflops: +{g.NUM} +mfu: +{g.NUM}%$"
)
"""torchtitan step lines whose `TITAN_RE` groups and key values `_titan_values` reads off their tokens."""


_TITAN_CAP = (
    rf"(?:^|\s)step: +(?P<s>\d+) +loss: +(?P<l>{g.NUM}) +(?:grad_norm: +(?P<g>{g.NUM}) +)?"
    rf"memory: +(?P<m>{g.NUM})GiB\([0-9.]+%\) +(?:tps|wps): +(?P<t>{g.INT_SEP}(?:\.\d+)?) +"
    rf"tflops: +(?P<f>{g.NUM}) +mfu: +(?P<u>{g.NUM})%$"
)
"""`_TITAN_CANON` with its values captured (the tokens: step, loss, grad_norm, memory, tps, tflops, mfu)."""


_TITAN_TAIL = "^" + _TITAN_CAP.removeprefix(r"(?:^|\s)step:")
"""`_TITAN_CAP` after its `step:`, anchored: what follows the one `step:` of a canonical line."""

_TAIL_GATES = frozenset(("loss:",))
"""The `_GATES` in the text from the first `step:` of a canonical torchtitan line (`step:` and its tail): the
tail's keys, numbers and blanks hold `loss:` alone, and no gate holds `step:` or an end of it followed by a
blank (the tail's first character)."""
assert all(
    not (("step:".endswith(gate[:k]) or gate[:k].endswith("step:")) and gate[k] == " ")
    for gate in _GATES
    for k in range(1, len(gate))
) and "step:" in _GATES and "loss:" in _GATES


def _titan_canon(text: pl.Series) -> pl.DataFrame:
    """Struct column `_c` of the `_TITAN_CAP` groups of each line, and bool column `_canon`: the line is one
    `_titan_values` reads off its tokens (`_TITAN_CANON` with one `step:`).

    The line is cut at its first `step:`: it is canonical iff the text after it matches `_TITAN_TAIL` (which
    holds no other `step:`) and the text before it is empty or ends in a blank.
    """
    c = pl.col("_c")
    return (
        pl.DataFrame({"text": text})
        .select(_s=pl.col("text").str.splitn("step:", 2))
        .select(
            _c=pl.col("_s").struct.field("field_1").str.extract_groups(_rx(_TITAN_TAIL)),
            _h0=pl.col("_s").struct.field("field_0"),
        )
        .select(
            "_c",
            "_h0",
            _canon=c.struct.field("s").is_not_null() & pl.col("_h0").str.contains(_rx(r"(?:^|\s)$")),
        )
    )


def _titan_values(text: pl.Series, canon_frame: pl.DataFrame | None = None) -> pl.DataFrame:
    """For torchtitan step lines: `_step`, `_loss` (the `TITAN_RE` groups) and `_k_<key>` (the `_key` of
    `TITAN_KEYS[key]` in `rest`).

    Split lane: a line with one `step:` whose end is `_TITAN_CANON` (`step: N  loss: X  [grad_norm: G  ]
    memory: MGiB(P%)  tps: T  tflops: F  mfu: U%`, blanks of spaces) has the regexes' matches there, each key
    once, each value a whole token: the tokens are the groups of `_TITAN_CAP` (`canon_frame`: its
    `_titan_canon`, when the caller has it). Other lines take the regexes (`rest` is the line without its
    shortest prefix ending in the head: capture-free).
    """
    df = pl.DataFrame({"text": text})
    if df.height < _LANE_MIN:
        no = _nulls("_c", df.height, pl.Struct(dict.fromkeys("slgmtfu", pl.String)))
        canon_frame = pl.DataFrame({"_c": no, "_canon": pl.Series([False] * df.height, dtype=pl.Boolean)})
    elif canon_frame is None:
        canon_frame = _titan_canon(text)
    canon = canon_frame.get_column("_canon")
    n_canon = int(canon.sum())
    cols = ["_step", "_loss", *(f"_k_{k}" for k in g.TITAN_KEYS)]
    fast = canon_frame.filter(canon) if n_canon < df.height else canon_frame
    c = pl.col("_c").struct.field
    # (`NUM` holds no `,`: those groups are cast as they are, `_num`'s separator removal being a no-op there)
    fast = fast.select(
        _step=c("s"),
        _loss=c("l"),
        _k_grad_norm=c("g").cast(pl.Float64, strict=False),
        _k_memory_gib=c("m").cast(pl.Float64, strict=False),
        _k_tps=_num(c("t")),
        _k_tflops=c("f").cast(pl.Float64, strict=False),
        _k_mfu_pct=c("u").cast(pl.Float64, strict=False),
    )
    if n_canon == df.height:
        return fast.select(cols)
    txt = pl.col("text")
    head = txt.str.extract_groups(_rx(_TITAN_HEAD))
    if n_canon == 0:
        slow = df.with_columns(_step=head.struct.field("step"), _loss=head.struct.field("loss"))
        slow = slow.with_columns(_rest=txt.str.replace(_rx("^.*?" + _TITAN_HEAD_NC), ""))
        keys = {f"_k_{k}": _key(pl.col("_rest"), p) for k, p in g.TITAN_KEYS.items()}
        return slow.select("_step", "_loss", **keys)
    slow = df.filter(~canon).with_columns(_step=head.struct.field("step"), _loss=head.struct.field("loss"))
    slow = slow.with_columns(_rest=txt.str.replace(_rx("^.*?" + _TITAN_HEAD_NC), ""))
    keys = {f"_k_{k}": _key(pl.col("_rest"), p) for k, p in g.TITAN_KEYS.items()}
    slow = slow.select("_step", "_loss", **keys)
    i_fast, i_slow = canon.arg_true(), (~canon).arg_true()
    out = {}
    for c in cols:
        full = _nulls(c, df.height, slow.schema[c])
        out[c] = full.scatter(i_fast, fast.get_column(c)).scatter(i_slow, slow.get_column(c))
    return pl.DataFrame(out)


_MEG_VALUES_MIN = 128
"""From this many iteration lines on, `_megatron_frag` reads their values by `_megatron_values` (a compiled
scan, or a split, of the lines laid out alike: ~1 ms for 1,700 lines) rather than by one regex per key (~12 ms
there); below it the regexes cost less than its set-up. Either way the values are the same."""


def _megatron_frag(m: pl.DataFrame) -> pl.DataFrame:
    """The `megatron_iteration` fragments of the `MEGATRON_ITER_RE` matches `m` (base columns, `text`, the
    groups in `m`; at least one row)."""
    txt = pl.col("text")
    if m.height >= _MEG_VALUES_MIN:
        m = m.with_columns(_megatron_values(m.get_column("text")))
        k = {name: pl.col(f"_k_{name}") for name in g.MEGATRON_KEYS}
    else:
        k = {name: _key(txt, pat) for name, pat in g.MEGATRON_KEYS.items()}
    sps = k["samples_per_s"]
    tok = k["tokens_per_gpu_s"]
    fw = (
        pl.when(txt.str.contains(_rx(r"iteration=\s*\d")))
        .then(pl.lit("megatron-deepspeed"))
        .when(
            txt.str.contains(_rx(r"^\s*samples/sec:"))
            | txt.str.contains("approx flops per GPU", literal=True)
        )
        .then(pl.lit("gpt-neox"))
        .otherwise(pl.lit("megatron"))
    )
    return _frag(
        m,
        kind=pl.lit("megatron_iteration"),
        framework=fw,
        prio=pl.lit(0),
        anchor=pl.lit(True),
        step=_f("step").cast(pl.Int64, strict=False),
        total_steps=_f("total").cast(pl.Int64, strict=False),
        step_time_s=k["elapsed_ms"] / 1000.0,
        step_time_source=pl.when(k["elapsed_ms"].is_not_null()).then(pl.lit("reported")),
        throughput=pl.coalesce(sps, tok, k["tflops"]),
        throughput_unit=pl.when(sps.is_not_null())
        .then(pl.lit("samples/s"))
        .when(tok.is_not_null())
        .then(pl.lit("tokens/s/GPU"))
        .when(k["tflops"].is_not_null())
        .then(pl.lit("TFLOP/s/GPU")),
        tflops=k["tflops"],
        loss=pl.coalesce(k["lm_loss"], k["loss"]),
        lr=k["lr"],
        grad_norm=k["grad_norm"],
        loss_scale=k["loss_scale"],
        consumed_samples=k["consumed_samples"],
        global_batch_size=k["global_batch_size"],
        skipped_iterations=k["skipped_iterations"].cast(pl.Int64, strict=False),
        nan_iterations=k["nan_iterations"].cast(pl.Int64, strict=False),
        tokens_per_s=tok,
    )


def _step_fragments(
    seg: pl.DataFrame, present: frozenset[str], pre: tuple[pl.Series, pl.DataFrame] | None = None
) -> list[pl.DataFrame]:
    """Fragments of the one-line step grammars (`pre`: `_titan_pre` of `seg`, when the caller has it)."""
    out: list[pl.DataFrame] = []
    txt = pl.col("text")

    # Megatron family
    m = _match(
        seg,
        g.MEGATRON_ITER_RE,
        txt.str.contains("iteration", literal=True),
        gate=("iteration",),
        present=present,
        must="step",
    )
    if m.height:
        out.append(_megatron_frag(m))

    m = _match(seg, g.DS_PIPE_RE, txt.str.contains("iter time (s)", literal=True), gate=("iter time (s)",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("deepspeed_pipe"),
                framework=pl.lit("deepspeed"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("t")),
                step_time_source=pl.lit("reported"),
                throughput=_num(_f("sps")),
                throughput_unit=pl.lit("samples/s"),
            )
        )

    m = _match(seg, g.DS_STEP_RE, txt.str.contains("step=", literal=True), gate=("step=",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("deepspeed_step"),
                framework=pl.lit("deepspeed"),
                prio=pl.lit(2),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                skipped_iterations=_f("skipped").cast(pl.Int64, strict=False),
                lr=_num(_f("lr")),
            )
        )

    for pattern, new in ((g.DS_TPUT_NEW_RE, True), (g.DS_TPUT_OLD_RE, False)):
        m = _match(seg, pattern, txt.str.contains("SamplesPerSec=", literal=True), gate=("SamplesPerSec=",), present=present)
        if m.height == 0:
            continue
        if not new:
            m = m.filter(~txt.str.contains("RunningAvgSamplesPerSec", literal=True))
        cols: dict[str, pl.Expr] = {
            "kind": pl.lit("deepspeed_throughput"),
            "framework": pl.lit("deepspeed"),
            "prio": pl.lit(1),
            "anchor": pl.lit(True),
            "step": _f("step").cast(pl.Int64, strict=False),
            "epoch": _num(_f("epoch")),
            "running_avg_samples_per_s": _num(_f("avg")),
        }
        if new:
            cols |= {"throughput": _num(_f("cur")), "throughput_unit": pl.lit("samples/s")}
        out.append(_frag(m, **cols))

    m = seg.clear()
    titan_vals = None
    if "step:" in present and "loss:" in present:
        titan = txt.str.contains("loss:", literal=True) & txt.str.contains(_rx(g.TITAN_RE))
        if seg.height < _LANE_MIN:
            m = seg.filter(txt.str.contains("step:", literal=True) & titan)
        else:  # (the regexes only on the lines with the literal; a `_TITAN_CANON` line matches `TITAN_RE`)
            m = seg.filter(txt.str.contains("step:", literal=True)) if pre is None else seg[pre[0]]
            if m.height >= _LANE_MIN:
                cf = _titan_canon(m.get_column("text")) if pre is None else pre[1]
                canon = cf.get_column("_canon")
                rest = (~canon).arg_true()
                if rest.len():
                    hit = m[rest].select(titan).to_series()
                    keep = canon.clone().scatter(rest, hit)
                    m, cf = m.filter(keep), cf.filter(keep)
                titan_vals = _titan_values(m.get_column("text"), cf)
            else:
                m = m.filter(titan)
    if m.height:
        if titan_vals is None:
            titan_vals = _titan_values(m.get_column("text"))
        m = m.with_columns(titan_vals)
        k = {name: pl.col(f"_k_{name}") for name in g.TITAN_KEYS}
        loss = pl.col("_loss").cast(pl.Float64, strict=False)  # (a `NUM` group: no separator to drop)
        out.append(
            _frag(
                m,
                kind=pl.lit("torchtitan"),
                framework=pl.lit("torchtitan"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.col("_step").cast(pl.Int64, strict=False),
                loss=pl.when(loss != -1.0).then(loss),  # -1.0: pipeline ranks without the loss
                grad_norm=k["grad_norm"],
                memory_gib=k["memory_gib"],
                throughput=k["tps"],
                throughput_unit=pl.when(k["tps"].is_not_null()).then(pl.lit("tokens/s/GPU")),
                tflops=k["tflops"],
                mfu_pct=k["mfu_pct"],
            )
        )

    m = _match(seg, g.NANOGPT_RE, txt.str.contains("iter ", literal=True), gate=("iter ",), present=present)
    if m.height:
        mfu = _num(_f("mfu"))
        out.append(
            _frag(
                m,
                kind=pl.lit("nanogpt"),
                framework=pl.lit("nanogpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                mfu_pct=pl.when(mfu > -100.0).then(mfu),  # -100.00%: EMA not initialised yet
            )
        )

    m = _match(seg, g.NANOCHAT_RE, txt.str.contains("dt: ", literal=True), gate=("dt: ",), present=present)
    if m.height:
        tps = _num(_f("tps"))
        out.append(
            _frag(
                m,
                kind=pl.lit("nanochat"),
                framework=pl.lit("nanochat"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                throughput=tps,
                throughput_unit=pl.when(tps.is_not_null()).then(pl.lit("tokens/s")),
                mfu_pct=_num(_f("mfu")),
            )
        )

    m = _match(seg, g.MODDED_RE, txt.str.contains("train_time:", literal=True), gate=("train_time:",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("modded_nanogpt"),
                framework=pl.lit("modded-nanogpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                cum_time_s=_num(_f("cum_ms")) / 1000.0,
                interval_avg_step_s=_num(_f("avg")) / 1000.0,
            )
        )

    m = _match(seg, g.LITGPT_RE, txt.str.contains("iter time:", literal=True), gate=("iter time:",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("litgpt"),
                framework=pl.lit("litgpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                global_step=_num(_f("ostep")),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
            )
        )

    m = _match(seg, g.LLMC_RE, txt.str.contains("tok/s)", literal=True), gate=("tok/s)",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("llmc"),
                framework=pl.lit("llm.c"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                throughput=_num(_f("tps")),
                throughput_unit=pl.lit("tokens/s"),
            )
        )

    m = _match(seg, g.MLLOG_RE, txt.str.contains(":::MLLOG", literal=True), gate=(":::MLLOG",), present=present)
    if m.height:
        js = _f("json")
        m = m.with_columns(
            _key=js.str.json_path_match("$.key"),
            _step=js.str.json_path_match("$.metadata.step")
            .cast(pl.Float64, strict=False)
            .cast(pl.Int64, strict=False),
        ).filter((pl.col("_key") == "tracked_stats") & pl.col("_step").is_not_null())
        tput = _num(js.str.json_path_match("$.value.throughput"))
        out.append(
            _frag(
                m,
                kind=pl.lit("mllog"),
                framework=pl.lit("mlperf"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.col("_step"),
                throughput=tput,
                throughput_unit=pl.when(tput.is_not_null()).then(pl.lit("samples/s")),
                loss=_num(js.str.json_path_match("$.value.train_loss")),
            )
        )

    m = _match(seg, g.MAXTEXT_RE, txt.str.contains("completed step:", literal=True), gate=("completed step:",), present=present)
    if m.height:
        tps = _num(_f("tps"))
        out.append(
            _frag(
                m,
                kind=pl.lit("maxtext"),
                framework=pl.lit("maxtext"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                step_time_s=_num(_f("s")),
                step_time_source=pl.lit("reported"),
                tflops=_num(_f("tflops")),
                throughput=pl.coalesce(tps, _num(_f("tflops"))),
                throughput_unit=pl.when(tps.is_not_null()).then(pl.lit("tokens/s/GPU")).otherwise(pl.lit("TFLOP/s/GPU")),
                loss=_num(_f("loss")),
            )
        )

    m = _match(seg, g.NEMO2_RE, txt.str.contains("Training epoch", literal=True), gate=("Training epoch",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.NEMO2_KEYS.items()}
        out.append(
            _frag(
                m,
                kind=pl.lit("nemo2"),
                framework=pl.lit("nemo"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.coalesce(
                    k["global_step"].cast(pl.Int64, strict=False), _f("step").cast(pl.Int64, strict=False)
                ),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                loss=k["loss"],
                step_time_s=k["step_s"],
                step_time_source=pl.when(k["step_s"].is_not_null()).then(pl.lit("reported")),
                consumed_samples=k["consumed_samples"],
                lr=k["lr"],
            )
        )

    m = _match(seg, g.AUTOMODEL_RE, txt.str.contains("| epoch ", literal=True), gate=("| epoch ",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.AUTOMODEL_KEYS.items()}
        out.append(
            _frag(
                m,
                kind=pl.lit("automodel"),
                framework=pl.lit("nemo-automodel"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                loss=_num(_f("loss")),
                grad_norm=k["grad_norm"],
                lr=k["lr"],
                memory_gib=k["memory_gib"],
                throughput=pl.coalesce(k["tps_gpu"], k["tps"]),
                throughput_unit=pl.when(k["tps_gpu"].is_not_null())
                .then(pl.lit("tokens/s/GPU"))
                .when(k["tps"].is_not_null())
                .then(pl.lit("tokens/s")),
                tokens_per_s=k["tps"],
            )
        )

    m = _match(seg, g.TORCHTUNE_RE, txt.str.starts_with("Step "), gate=("Step ",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.TORCHTUNE_KEYS.items()}
        m = m.filter(pl.any_horizontal(*(v.is_not_null() for v in k.values())))
        out.append(
            _frag(
                m,
                kind=pl.lit("torchtune"),
                framework=pl.lit("torchtune"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=k["loss"],
                lr=k["lr"],
                grad_norm=k["grad_norm"],
                throughput=k["tps_gpu"],
                throughput_unit=pl.when(k["tps_gpu"].is_not_null()).then(pl.lit("tokens/s/GPU")),
            )
        )

    # HF Trainer dicts
    m = seg.filter(txt.str.contains(_rx(g.HF_DICT_RE))) if "{" in present else seg.clear()
    if m.height:
        k = {name: _key(txt, pat) for name, pat in g.HF_KEYS.items()}
        if m.height >= _LANE_MIN:
            # each key's regex read once, as a column, not once per use; a key none of whose required literals
            # occurs in any of the lines matches none of them: nulls, what the regex gives
            # (ASCII lines, as dicts mostly are in a log whose bars are not: the regexes with ASCII classes)
            text = m.get_column("text")
            with ascii_scope(_ascii or is_ascii(text)):
                m = m.with_columns(**_hf_keys(text))
            k = {name: pl.col(f"_hk_{name}") for name in k}
        summary = k["train_runtime"].is_not_null()
        train = k["loss"].is_not_null() | k["step_runtime"].is_not_null() | k["grad_norm"].is_not_null()
        logged = m.filter(~summary & train & ~txt.str.contains("'eval_", literal=True))
        if logged.height:
            out.append(
                _frag(
                    logged,
                    kind=pl.lit("hf_dict"),
                    framework=pl.lit("hf-trainer"),
                    prio=pl.lit(0),
                    anchor=k["step"].is_not_null(),
                    step=k["step"].cast(pl.Int64, strict=False),
                    loss=k["loss"],
                    grad_norm=k["grad_norm"],
                    lr=k["lr"],
                    epoch=k["epoch"],
                    step_time_s=k["step_runtime"],
                    step_time_source=pl.when(k["step_runtime"].is_not_null()).then(pl.lit("reported")),
                    throughput=k["step_sps"],
                    throughput_unit=pl.when(k["step_sps"].is_not_null()).then(pl.lit("samples/s")),
                    attach_line=pl.col("line"),
                )
            )
        summ = m.filter(summary)
        if summ.height:
            out.append(
                _frag(
                    summ,
                    kind=pl.lit("hf_summary"),
                    framework=pl.lit("hf-trainer"),
                    prio=pl.lit(0),
                    anchor=pl.lit(True),
                    standalone=pl.lit(True),
                    step_time_s=1.0 / k["train_steps_ps"],
                    step_time_source=pl.when(k["train_steps_ps"] > 0).then(pl.lit("run_mean")),
                    throughput=k["train_sps"],
                    throughput_unit=pl.when(k["train_sps"].is_not_null()).then(pl.lit("samples/s")),
                    loss=k["train_loss"],
                    epoch=k["epoch"],
                    train_runtime_s=k["train_runtime"],
                )
            )
    return out


_HF_KEY_LITS = {name: required_literals(p) for name, p in g.HF_KEYS.items()}
"""Literals one of which every match of each `g.HF_KEYS` regex holds (None: not known)."""

_HF_CANON = (
    rf"^\{{'loss': (?P<loss>{g.NUM}), 'grad_norm': (?P<grad_norm>{g.NUM}), "
    rf"'learning_rate': (?P<lr>{g.NUM}), 'epoch': (?P<epoch>{g.NUM})\}}$"
)
"""The Trainer's logged dict as it prints it most (`{'loss': 3.95, 'grad_norm': 0.95, 'learning_rate': 2e-05,
'epoch': 0.01}`, nothing else on the line). In such a line the regex of each of these keys (`g.HF_KEYS`) finds
it where this one does (its first quoted name, each value a whole `NUM`, which the regex's greedy `NUM` takes
whole as the next character, `,` or `}`, cannot extend it) and those of the other keys find nothing (none of
their literals is in it: the values are `NUM`s, whose letters are `e`, `E`, `nan`, `inf`)."""
_HF_CANON_KEYS = ("loss", "grad_norm", "lr", "epoch")


def _hf_keys(text: pl.Series) -> dict[str, pl.Series]:
    """The `_hk_<name>` columns of the dict lines `text`: each key of `g.HF_KEYS` read by its regex (`_key`),
    nulls where none of its literals occurs in any of the lines (what the regex gives), in the regex's ASCII
    scope of the caller. The lines of `_HF_CANON` shape are read by that one regex instead (see there)."""
    n = text.len()
    # (one pass: a line of that shape has all its groups, the others none)
    vals = text.str.extract_groups(_rx(_HF_CANON)).struct.unnest()
    canon = vals.get_column("loss").is_not_null()
    n_c = int(canon.sum())
    rest = text if n_c == 0 else text.filter(~canon)
    t = pl.col("text")
    got = pl.DataFrame({"text": rest}).select(
        **{
            f"_hk_{name}": _key(t, pat)
            if _HF_KEY_LITS[name] is None or rest.str.contains_any(list(_HF_KEY_LITS[name])).any()
            else pl.lit(None, dtype=pl.Float64)
            for name, pat in g.HF_KEYS.items()
        }
    )
    if n_c == 0:
        return {c: got.get_column(c) for c in got.columns}
    vals = vals.select(**{f"_hk_{name}": _num(pl.col(name)) for name in _HF_CANON_KEYS})
    at_r = (~canon).arg_true() if n_c < n else None
    out = {}
    for c in got.columns:
        col = vals.get_column(c) if c in vals.columns else _nulls(c, n, pl.Float64)
        if at_r is not None and got.get_column(c).null_count() < got.height:
            col = col.scatter(at_r, got.get_column(c))
        out[c] = col
    return out


_TQDM_CANON_HEAD = r"^[^\d%|]*[0-9]{1,3}%$"
_TQDM_HEAD_DIGITS = r"^[^\d%|]*[0-9]+%$"
"""The head (text before the first `|`) of the bars the split lane takes: a description without digits, then
the percentage, of any number of digits (tqdm prints `1217%` far past the total): `TQDM_RE`'s lazy `desc`
ends where at most three digits are left before the `%` (its `pct` takes one to three): the description and
the digits but the last three. (`_TQDM_CANON_HEAD`: the percentages of at most three digits the lane took
before.)"""
_TQDM_CANON_TAIL = r"^ *[0-9]+/[0-9]+ *\[[0-9:]+<(?:[0-9:?]*, *(?:[0-9.]+|\?) *(?:s/it|it/s)[\],]|-).*$"
_TQDM_CANON = _TQDM_HEAD_DIGITS.removesuffix("$") + r"\|[^|]*\|" + _TQDM_CANON_TAIL.removeprefix("^")
"""tqdm bars whose `TQDM_RE` groups the split lane of `_tqdm_match` finds (ASCII digits and blanks): with a
rate, or with a negative remaining time (`<-`, as tqdm prints past the total): no remaining time nor rate
(`TQDM_RE`'s optional group wants a `,` after the remaining time's digits), `post` all after the `<`."""
_TQDM_TAIL_START = _TQDM_CANON_TAIL.removesuffix(".*$")
"""`_TQDM_CANON_TAIL` without its `.*$`: a text matches that iff it matches this and holds no newline (the
regex engine stops at the end of the fields instead of running to the end of the text)."""
assert _TQDM_TAIL_START + ".*$" == _TQDM_CANON_TAIL
_TQDM_FIELDS = pl.Struct(dict.fromkeys(("desc", "n", "total", "rate", "unit", "post"), pl.String))


def _tqdm_match(seg: pl.DataFrame) -> pl.DataFrame:
    """`_match(seg, g.TQDM_RE, …)` with the groups the bar fragments read (desc, n, total, rate, unit,
    post): `_tqdm_lane(seg)`'s matches."""
    return _tqdm_lane(seg)[0]


def _tqdm_lane(seg: pl.DataFrame) -> tuple[pl.DataFrame, tuple[pl.Series, list[pl.Series]] | None]:
    """`_tqdm_match(seg)` and, on big inputs, the positions in `seg` of the bars of `_TQDM_CANON` shape with
    the texts that hold every `_GATES` literal in them (what `_present` scans instead of those bars):
    `%|`, the distinct descriptions, bars (between their two `|`, with them) and postfixes.

    (No gate starts in the rest of such a bar, nor spans from one of those parts into the next: the rest is
    the percentage's digits and `%`, then after the second `|` blanks, digits, `/`, `[`, `:`, `<`, `?`, `,`,
    `.` and the unit `s/it` or `it/s` up to the postfix, which starts with `]` or `,`, or with the `-` of a
    negative remaining time after the first `<`; gates hold no digit, the two that hold a `|` are `%|` and
    `| epoch `, and none starts with any of those characters but `%|`, `[batch=`, `/Rank: `, `/Rnk: `,
    `:::MLLOG`, `step…`, `iter…`, `time (ms)`, `tok/s)`, `train_time:`, which the characters after them
    there rule out.)

    Split lane for `_TQDM_CANON` bars: there the lazy `desc` of `TQDM_RE` ends at the first digit (it holds
    none) or, past 999 %, where three digits are left before the `%` (`_TQDM_HEAD_DIGITS`), the percentage
    and bar end at the first two `|`, `n`/`total` lie around the next `/` and end at the `[`, the rate follows
    the first `,` (the times hold none) and ends at the unit, its first `s` or `i`; `post` is the rest. Other
    bars take the regex.
    """
    txt = pl.col("text")
    if seg.height < _LANE_MIN:  # (every group of the regex, as before)
        return _match(seg, g.TQDM_RE, txt.str.contains("%|", literal=True)), None
    hit = seg.get_column("text").str.contains("%|", literal=True).fill_null(False)
    bars = seg.filter(hit)
    # one split at the first two `|` (`_TQDM_CANON` is the part before them, any text without `|` between
    # them, and the part after: the regexes of the parts skip the bar's many block characters); in the rest
    # (ASCII up to the unit, so byte offsets are character offsets) the fields are cut at the offsets of
    # `/`, `[`, `,` and the unit
    cut = bars.select(_s=txt.str.splitn("|", 3)).unnest("_s")
    canon = cut.select(
        (
            pl.col("field_0").str.contains(_rx(_TQDM_HEAD_DIGITS))
            & pl.col("field_2").str.contains(_rx(_TQDM_TAIL_START))
            & ~pl.col("field_2").str.contains("\n", literal=True)
        )
        .fill_null(False)
    ).to_series()
    n_canon = int(canon.sum())
    fast = bars.filter(canon) if n_canon < bars.height else bars
    cut = cut.filter(canon) if n_canon < bars.height else cut
    # (the description: the head less its `%` and its digits, but the first of more than three: `TQDM_RE`'s
    # `pct` takes the last three; the digits stripped are ASCII, one byte each)
    # (one strip of the `%` and the digits: the description holds neither, so it stops there)
    h = pl.col("field_0")
    parts = cut.select(_h=h, _d=h.str.strip_chars_end("%0123456789"), _r=pl.col("field_2"))
    long = (pl.col("_h").str.len_bytes() - pl.col("_d").str.len_bytes()) > 4
    if parts.select(long.any()).item():
        parts = parts.with_columns(_d=pl.when(long).then(pl.col("_h").str.head(-4)).otherwise(pl.col("_d")))
    parts = parts.drop("_h")
    r = pl.col("_r")
    parts = parts.with_columns(
        _sl=r.str.find("/", literal=True),
        _lb=r.str.find("[", literal=True),
        _c=r.str.find(",", literal=True),
        _at=r.str.find(_rx("[si]")),
    )
    sl, lb, c, at, lt = pl.col("_sl"), pl.col("_lb"), pl.col("_c"), pl.col("_at"), pl.col("_lt")
    # (a negative remaining time: the character after the first `<`, which the rate's bars hold a digit,
    # `:`, `?` or `,` at; worked out once, as a column, for the three fields that read it)
    parts = parts.with_columns(_lt=r.str.find("<", literal=True))
    # (the character after the first `<` is a `-` iff the first `<-` is there: one search, no slice)
    parts = parts.with_columns(_neg=r.str.find("<-", literal=True).eq_missing(lt))
    neg = pl.col("_neg")
    fast = pl.concat([fast, parts], how="horizontal").with_columns(
        m=pl.struct(
            desc="_d",
            n=r.str.slice(0, sl).str.strip_chars(),
            total=r.str.slice(sl + 1, lb - sl - 1).str.strip_chars(),
            rate=pl.when(~neg).then(r.str.slice(c + 1, at - c - 1).str.strip_chars()),
            unit=pl.when(~neg).then(r.str.slice(at, 4)),
            post=r.str.slice(pl.when(neg).then(lt + 1).otherwise(at + 4)),  # (one slice, from either)
        )
    ).drop("_d", "_r", "_sl", "_lb", "_c", "_at", "_lt")
    at = hit.arg_true()
    gates = None
    if n_canon:
        # (the postfixes of bars with a negative remaining time, all after the `<`, hold that time and the
        # rate: mostly distinct, scanned as they are rather than made distinct first (a hash of each costs
        # more than the scan); `_present` asks which gates occur in any of the texts, which repeats do not
        # change)
        post = pl.col("m").struct.field("post")
        parts = fast.select(
            _d=pl.col("m").struct.field("desc").unique().implode(),
            _p=pl.concat([post.filter(~neg).unique(), post.filter(neg)]).implode(),
        )
        bar = cut.select(pl.concat_str(pl.lit("|"), pl.col("field_1").unique(), pl.lit("|"))).to_series()
        texts = [pl.Series(["%|"]), parts.get_column("_d")[0], bar, parts.get_column("_p")[0]]
        gates = (at if n_canon == bars.height else at.filter(canon), texts)
    fast = fast.drop("_neg")
    if n_canon == bars.height:
        return fast, gates
    slow = _match(bars.filter(~canon), g.TQDM_RE)
    slow = slow.with_columns(m=pl.struct(*(pl.col("m").struct.field(f) for f in _TQDM_FIELDS.to_schema())))
    return pl.concat([fast, slow]).sort("line", "seg"), gates


_POST_LITS = [required_literals(p) for p in g.TQDM_POST_KEYS.values()]
_POST_GATE = (
    None if any(not lits for lits in _POST_LITS) else sorted({x for lits in _POST_LITS for x in lits or ()})
)
"""Literals one of which every match of a `g.TQDM_POST_KEYS` regex holds (None: not known)."""


def _unlabelled_bars(m: pl.DataFrame, keep: pl.Expr) -> pl.DataFrame:
    """`m.filter(keep)` less the blank-description bars whose total is not their stream's main loop (the total
    with the most distinct positions among the kept blank ones), as `_bar_fragments` does for bars of one file
    without a `Total optimization steps` line: the totals worked out on a narrow frame of the kept bars, `m`
    filtered once (one stream: its total broadcast, no join)."""
    desc = _f("desc")
    narrow = m.select(
        "key",
        _keep=keep,
        _total=pl.col("_ti") if "_ti" in m.columns else _f("total").cast(pl.Int64, strict=False),
        _n=pl.col("_ni") if "_ni" in m.columns else _f("n").cast(pl.Int64, strict=False),
        _blank=desc.str.strip_chars() == "",
    )
    kept = narrow.filter(pl.col("_keep"))
    if kept.height == 0:
        return m.filter(keep)
    best = (
        kept.filter(pl.col("_blank"))
        .group_by("key", "_total")
        .agg(_k=pl.col("_n").n_unique())
        .sort("_k", "_total", descending=True)
        .group_by("key", maintain_order=True)
        .agg(_best=pl.col("_total").first())
    )
    key = pl.col("key")
    one_key = bool(narrow.select(key.is_not_null().all() & (key == key.first()).all()).item())
    if best.height == 0:  # (no blank bar kept: the join's nulls keep every kept bar)
        return m.filter(keep)
    if one_key and best.height == 1 and best.get_column("key")[0] == narrow.get_column("key")[0]:
        joined = narrow.with_columns(_best=pl.lit(best.get_column("_best")[0], dtype=best.schema["_best"]))
    else:
        joined = narrow.join(best, on="key", how="left", maintain_order="left")
    stay = joined.select(
        pl.col("_keep")
        & (~pl.col("_blank") | pl.col("_best").is_null() | (pl.col("_total") == pl.col("_best")))
    ).to_series()
    return m.filter(stay)


def _bar_fragments(
    seg: pl.DataFrame, present: frozenset[str], batch: _Batch | None = None, tqdm: pl.DataFrame | None = None
) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """tqdm and rich progress bars; returns (fragments, lines understood). (`batch`: the lines of several
    files, see `parse_many`: a file's `Total optimization steps` select its own bars; `tqdm`: the
    `_tqdm_match` of the bars' columns, when the caller has it.)"""
    out: list[pl.DataFrame] = []
    txt = pl.col("text")
    # (the bars' base columns and text alone: the matches keep those only, below)
    if tqdm is not None:
        m = tqdm if "%|" in present else seg.clear()
    else:
        m = _tqdm_match(seg.select(*_BASE, "text")) if "%|" in present else seg.clear()
    seen = [m.select("line")]
    if m.height:
        # (the bars' fragments read their base columns and groups only: the texts are not carried through the
        # filters and joins below)
        m = m.select(*_BASE, "m")
        # (the numbers read once each, as columns: an eager frame's expressions share no subexpression)
        rate = _num(_f("rate"))
        m = m.with_columns(
            _ni=_f("n").cast(pl.Int64, strict=False),
            _ti=_f("total").cast(pl.Int64, strict=False),
            _its=pl.when(_f("unit").str.starts_with("s")).then(1.0 / rate).otherwise(rate),
        )
        n_i, t_i = pl.col("_ni"), pl.col("_ti")
        totals = seg.filter(txt.str.contains("Total optimization steps = ", literal=True)).select(
            "line",
            n=txt.str.extract(_rx(g.HF_TOTAL_STEPS_RE), 1)
            .str.replace_all(",", "")
            .cast(pl.Int64, strict=False),
        )
        hf_total = totals.get_column("n").drop_nulls()
        by_file = batch is not None and hf_total.len() > 0
        if by_file:  # (`parse_many`: each file's bars are checked against its own totals, if it has any)
            assert batch is not None
            fi = batch.file_of(pl.col("line"))
            pairs = totals.filter(pl.col("n").is_not_null()).select(
                fi=fi, p=pl.concat_str(fi.cast(pl.String), pl.lit(":"), pl.col("n").cast(pl.String))
            )
            with_total = pairs.get_column("fi").unique().implode()
            in_file_total = ~fi.is_in(with_total) | pl.concat_str(
                fi.cast(pl.String), pl.lit(":"), t_i.cast(pl.String)
            ).is_in(pairs.get_column("p").implode())
        desc = _f("desc")
        post = _f("post")
        k = {name: _key(post, pat) for name, pat in g.TQDM_POST_KEYS.items()}
        tt = desc.str.extract_groups(_rx(g.TORCHTUNE_DESC_RE))
        it_s = pl.col("_its")
        # a rate in other units (`examples/s`, `B/s`) marks a data bar, not a training loop
        units_ok = _f("unit").is_not_null() | _f("rate").is_null()
        keep = (n_i > 0) & ~desc.str.contains(_rx(g.EVAL_DESC_RE)) & units_ok
        if by_file:
            keep = keep & in_file_total
        elif hf_total.len() > 0:
            keep = keep & t_i.is_in(hf_total.implode())
        # (unlabelled bars of one file, many: `_unlabelled_bars`, one filter for the two below)
        one_file = hf_total.len() == 0 and not by_file and m.height >= _LANE_MIN
        if m.height >= _LANE_MIN:
            # (the test as a column; the groups read below are the description and the postfix alone (the
            # numbers are columns): the others are not carried through the filters and joins)
            m = m.with_columns(_keep=keep).with_columns(m=pl.struct(desc=desc, post=post))
            keep = pl.col("_keep")
        bars = _unlabelled_bars(m, keep) if one_file else m.filter(keep)
        if (hf_total.len() == 0 or by_file) and bars.height and not one_file:
            # unlabelled bars of several lengths (HF evaluation inside training): keep the stream's main loop,
            # the total with the most distinct positions
            bars = bars.with_columns(
                _total=t_i,
                _n=n_i,
                _blank=desc.str.strip_chars() == "",
            )
            best = (
                bars.filter(pl.col("_blank") & ~fi.is_in(with_total) if by_file else pl.col("_blank"))
                .group_by("key", "_total")
                .agg(_k=pl.col("_n").n_unique())
                .sort("_k", "_total", descending=True)
                .group_by("key", maintain_order=True)
                .agg(_best=pl.col("_total").first())
            )
            bars = (
                bars.join(best, on="key", how="left")
                .filter(~pl.col("_blank") | pl.col("_best").is_null() | (pl.col("_total") == pl.col("_best")))
                .drop("_total", "_n", "_blank", "_best")
            )
        if bars.height:
            # values read off the description and the postfix (regexes), each a function of that text alone
            dv = {
                "_tt_has": tt.struct.field("step").is_not_null(),
                "_tt_step": tt.struct.field("step").cast(pl.Int64, strict=False),
                "_tt_loss": _num(tt.struct.field("loss")),
                "_tt_epoch": _num(tt.struct.field("epoch")),
                "_ep_hit": desc.str.contains(_rx(r"Epoch \d+")),
                "_ep": _num(desc.str.extract(_rx(r"Epoch (\d+)"), 1)),
            }
            if bars.height < _LANE_MIN:
                v = dv | {f"_k_{name}": e for name, e in k.items()}
            else:  # worked out once per distinct description and postfix (a few per file), joined to the bars
                bars = bars.with_columns(_desc=desc, _post=post)
                # (the expressions read `m`'s struct: the distinct texts are put back in one)
                by_desc = (
                    bars.select(pl.col("_desc").unique())
                    .with_columns(m=pl.struct(desc=pl.col("_desc")))
                    .select("_desc", **dv)
                )
                # (only postfixes holding a literal one of the key regexes needs are read: the others, most
                # of them, get nulls, what the regexes give them; none such, no join)
                posts = bars.select(pl.col("_post"))
                if _POST_GATE is not None:
                    posts = posts.filter(pl.col("_post").str.contains_any(_POST_GATE).fill_null(False))
                by_post = (
                    posts.select(pl.col("_post").unique())
                    .with_columns(m=pl.struct(post=pl.col("_post")))
                    .select("_post", **{f"_k_{name}": e for name, e in k.items()})
                )
                bars = bars.join(by_desc, on="_desc", how="left", nulls_equal=True, maintain_order="left")
                if by_post.height:
                    bars = bars.join(by_post, on="_post", how="left", nulls_equal=True, maintain_order="left")
                else:
                    bars = bars.with_columns(
                        pl.lit(None, dtype=t).alias(c) for c, t in by_post.schema.items() if c != "_post"
                    )
                v = {c: pl.col(c) for c in dv} | {f"_k_{name}": pl.col(f"_k_{name}") for name in k}
            kv = {name: v[f"_k_{name}"] for name in k}
            fw = (
                pl.when(v["_tt_has"])
                .then(pl.lit("torchtune"))
                .when(kv["global_step"].is_not_null() | kv["consumed_samples"].is_not_null())
                .then(pl.lit("nemo"))
                .when(v["_ep_hit"])
                .then(pl.lit("lightning"))
                .otherwise(pl.lit("tqdm"))
            )
            out.append(
                _frag(
                    bars,
                    kind=pl.lit("tqdm"),
                    framework=fw,
                    prio=pl.lit(3),
                    anchor=pl.lit(True),
                    step=pl.coalesce(v["_tt_step"], n_i),
                    total_steps=t_i,
                    loss=pl.coalesce(v["_tt_loss"], kv["loss"], kv["reduced_loss"]),
                    step_time_s=pl.coalesce(kv["step_s"], 1.0 / it_s),
                    step_time_source=pl.when(kv["step_s"].is_not_null())
                    .then(pl.lit("reported"))
                    .when(it_s > 0)
                    .then(pl.lit("tqdm_rate")),
                    throughput=it_s,
                    throughput_unit=pl.when(it_s.is_not_null()).then(pl.lit("it/s")),
                    global_step=kv["global_step"],
                    consumed_samples=kv["consumed_samples"],
                    epoch=pl.coalesce(v["_tt_epoch"], v["_ep"]),
                )
            )
    m = _match(seg, g.RICH_BAR_RE, txt.str.starts_with("Epoch "), gate=("Epoch ",), present=present)
    seen.append(m.select("line"))
    if m.height:
        rate = _num(_f("rate"))
        it_s = pl.when(_f("unit") == "s/it").then(1.0 / rate).otherwise(rate)
        out.append(
            _frag(
                m.filter(_f("n").cast(pl.Int64, strict=False) > 0),
                kind=pl.lit("rich_bar"),
                framework=pl.lit("lightning"),
                prio=pl.lit(3),
                anchor=pl.lit(True),
                step=_f("n").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                step_time_s=1.0 / it_s,
                step_time_source=pl.when(it_s > 0).then(pl.lit("tqdm_rate")),
                throughput=it_s,
                throughput_unit=pl.lit("it/s"),
                loss=_key(_f("post"), rf"(?:^|\s)(?:train_)?loss(?:_step)?: (?P<v>{g.NUM})"),
            )
        )
    return out, pl.concat(seen)


def _block_fragments(
    seg: pl.DataFrame, present: frozenset[str], minmax: tuple[pl.DataFrame, pl.Series] | None = None
) -> tuple[list[pl.DataFrame], pl.DataFrame, pl.DataFrame]:
    """Header + indented-entry blocks (Megatron timers, composer batches, NVRx reports) and one-line timers.

    Returns (fragments, lines understood, NVRx rank-score rows for events). `minmax`: `_minmax_pre(seg)`, when
    the caller has it.
    """
    out: list[pl.DataFrame] = []
    txt = pl.col("text")
    # a block grammar whose header literal occurs nowhere has no header, so none of its entries is in a block
    t_on, c_on, n_on = "across ranks" in present, "[batch=" in present, "performance:" in present
    no_str, no = pl.lit(None, dtype=pl.String), pl.lit(False)
    no_blk = pl.lit(None, dtype=pl.Int64)
    # a timer entry matches one of four regexes: the (min, max) one (most entries), the other three as one
    # alternation (same truth value), on big inputs only on the lines the first does not take
    ents, t_mm, t_ent = seg, txt.str.contains(_rx(g.TIMER_MINMAX_RE)), None
    t_hdr = txt.str.extract(_rx(g.TIMER_HDR_RE), 1)
    if t_on and seg.height >= _LANE_MIN:
        text = seg.get_column("text")
        mm_s = text.str.contains(_rx(g.TIMER_MINMAX_RE)) if minmax is None else minmax[0].get_column("_mm")
        idx = (~mm_s).arg_true()
        other = text.gather(idx).str.contains(_rx(_TIMER_OTHER))
        # (a header holds `across ranks`: the regex only on the lines with it)
        hi = text.str.contains("across ranks", literal=True).arg_true()
        hdr = text.gather(hi).str.extract(_rx(g.TIMER_HDR_RE), 1)
        hdr = _nulls("t_hdr", seg.height, pl.String).scatter(hi, hdr)
        ents = seg.with_columns(t_mm=mm_s, t_ent=mm_s.clone().scatter(idx, other), t_hdr=hdr)
        if minmax is not None:  # (the lines cut at their first `(`, for `_minmax_groups`)
            ents = ents.with_columns(minmax[0].select("_hc", "_t"))
        t_mm, t_ent, t_hdr = pl.col("t_mm"), pl.col("t_ent"), pl.col("t_hdr")
    b = ents.lazy().with_columns(
        t_hdr=t_hdr if t_on else no_str,
        t_mm=t_mm if t_on else no,
        t_ent=(t_ent if t_ent is not None else t_mm | txt.str.contains(_rx(_TIMER_OTHER))) if t_on else no,
        c_hdr=txt.str.contains(_rx(g.COMPOSER_HDR_RE)) if c_on else no,
        c_ent=txt.str.contains(_rx(g.COMPOSER_ENTRY_RE)) if c_on else no,
        n_hdr=txt.str.extract(_rx(g.NVRX_HDR_RE), 1) if n_on else no_str,
        n_ent=(txt.str.contains(_rx(g.NVRX_SUB_RE)) | txt.str.contains(_rx(g.NVRX_RANK_RE))) if n_on else no,
    )

    def block(hdr: pl.Expr, ent: str) -> pl.Expr:
        """Line of the header an entry belongs to (the last non-entry line of its stream is that header)."""
        return (
            pl.when(pl.col(ent))
            .then(pl.lit(None, dtype=pl.Int64))
            .when(hdr)
            .then(pl.col("line"))
            .otherwise(pl.lit(-1, dtype=pl.Int64))
            .forward_fill()
            .over("key")
        )

    b = b.with_columns(
        t_blk=block(pl.col("t_hdr").is_not_null(), "t_ent") if t_on else no_blk,
        c_blk=block(pl.col("c_hdr"), "c_ent") if c_on else no_blk,
        n_blk=block(pl.col("n_hdr").is_not_null(), "n_ent") if n_on else no_blk,
        t_mode=pl.col("t_hdr").forward_fill().over("key") if t_on else no_str,
        n_kind=pl.col("n_hdr").forward_fill().over("key") if n_on else no_str,
    )
    understood = [seg.clear().select("line")]
    if t_on or c_on or n_on:  # (else no line is a block header or entry)
        b = b.collect()
        understood.append(
            b.filter(
                pl.col("t_hdr").is_not_null()
                | pl.col("c_hdr")
                | pl.col("n_hdr").is_not_null()
                | (pl.col("t_ent") & (pl.col("t_blk") > 0))
                | (pl.col("c_ent") & (pl.col("c_blk") > 0))
                | (pl.col("n_ent") & (pl.col("n_blk") > 0))
            ).select("line")
        )
    else:
        b = seg

    # Megatron timer blocks
    # (only the columns the timer fragments use are gathered: the entries in blocks are cut into the (min,
    # max) ones `mm` and the others `tb`, whose grammars below take no (min, max) entry)
    cut = ["_hc", "_t"] if "_hc" in b.columns else []
    mm = tb = seg.clear()
    if t_on:
        in_blk = pl.col("t_ent") & (pl.col("t_blk") > 0)
        is_mm = (pl.col("t_mode").str.starts_with("(min, max)") & pl.col("t_mm")).fill_null(False)
        sel = b.select(mm=in_blk & is_mm, tb=in_blk & ~is_mm)
        mm = b.select(*_BASE, "t_blk", *(cut or ["text"])).filter(sel.get_column("mm"))
        tb = b.select(*_BASE, "text", "t_ent", "t_mm", "t_blk", "t_mode").filter(sel.get_column("tb"))
    if tb.height or mm.height:
        if mm.height:
            m = (
                _minmax_groups(mm.get_column("_t"), mm.select(cut), minmax[1])
                if cut and minmax is not None
                else _minmax_groups(mm.get_column("text"))
            )
            # (only the columns the fragments use go through the filter; none when no head of a (min, max)
            # entry that `_minmax_pre` found names a timer to drop)
            mm = mm.select(*_BASE, "t_blk").with_columns(m=m)
            if minmax is not None and not _timer_names(minmax[1]).is_in(list(g.NON_STEP_TIMERS)).any():
                ent = mm
            else:
                ent = mm.filter(~_f("name").is_in(list(g.NON_STEP_TIMERS)))
            cols = {
                "kind": pl.lit("timer_block"),
                "framework": pl.lit("megatron"),
                "prio": pl.lit(1),
                "anchor": pl.lit(False),
            }
            if ent.height < _LANE_MIN:
                timers = _timers(name=_f("name"), min_ms=_num(_f("min")), max_ms=_num(_f("max")))
                out.append(_one_per_block(_frag(ent, **cols, attach_line=pl.col("t_blk"), timers=timers)))
            else:
                # the entries of each block combined first, from the few columns they set (what
                # `_one_per_block` does to their fragments: first line, seg and rank, first non-null other
                # value, timers in order); the values are NUMs (no `,` for `_num` to drop)
                num = {v: _f(v).cast(pl.Float64, strict=False) for v in ("min", "max")}
                entry = _timer(name=_f("name"), min_ms=num["min"], max_ms=num["max"])
                blocks = (
                    ent.select(*_BASE, attach_line=pl.col("t_blk"), _t=entry)
                    .group_by("key", "attach_line", maintain_order=True)
                    .agg(
                        pl.col("line", "seg", "rank").first(),
                        pl.col("host", "ts", "ts_quality").drop_nulls().first(),
                        timers="_t",
                    )
                )
                out.append(_frag(blocks, **cols, attach_line=pl.col("attach_line"), timers=pl.col("timers")))
        sg = _match(tb, g.TIMER_SINGLE_RE, pl.col("t_mode").is_in(["max time", "min time"]))
        if sg.height:
            v = _num(_f("v"))
            out.append(
                _frag(
                    sg.filter(~_f("name").is_in(list(g.NON_STEP_TIMERS))),
                    kind=pl.lit("timer_block"),
                    framework=pl.lit("megatron"),
                    prio=pl.lit(1),
                    anchor=pl.lit(False),
                    attach_line=pl.col("t_blk"),
                    timers=_timers(
                        name=_f("name"),
                        max_ms=pl.when(pl.col("t_mode") == "max time").then(v),
                        min_ms=pl.when(pl.col("t_mode") == "min time").then(v),
                    ),
                )
            )
        pr = tb.filter(pl.col("t_mode") == "times")
        if pr.height:
            pr = pr.with_columns(
                tname=txt.str.extract(_rx(g.TIMER_NAME_RE), 1).forward_fill().over("t_blk"),
                r=txt.str.extract_groups(_rx(g.TIMER_RANK_RE)),
            ).filter(pl.col("r").struct.field("rank").is_not_null() & pl.col("tname").is_not_null())
            pr = pr.with_columns(
                rr=pl.col("r").struct.field("rank").cast(pl.Int32, strict=False),
                v=_num(pl.col("r").struct.field("v")),
            )
            agg = (
                pr.group_by("key", "t_blk", "tname", maintain_order=True)
                .agg(
                    pl.col(*_BASE[:2], *_BASE[3:]).first(),
                    min_ms=pl.col("v").min(),
                    max_ms=pl.col("v").max(),
                    min_rank=pl.col("rr").sort_by("v").first(),
                    max_rank=pl.col("rr").sort_by("v").last(),
                )
                .filter(~pl.col("tname").is_in(list(g.NON_STEP_TIMERS)))
            )
            if agg.height:
                out.append(
                    _frag(
                        agg,
                        kind=pl.lit("timer_block"),
                        framework=pl.lit("megatron"),
                        prio=pl.lit(1),
                        anchor=pl.lit(False),
                        attach_line=pl.col("t_blk"),
                        timers=_timers(
                            name=pl.col("tname"),
                            min_ms=pl.col("min_ms"),
                            max_ms=pl.col("max_ms"),
                            min_rank=pl.col("min_rank"),
                            max_rank=pl.col("max_rank"),
                        ),
                    )
                )

    # one-line timers
    tl = seg.clear()
    if "time (ms)" in present:
        tl = seg.filter(txt.str.contains("time (ms)", literal=True))
        hits, after_tms = _timer_line_hits(tl.get_column("text"))
        tl = tl.with_columns(_after_tms=after_tms).filter(hits)
    if tl.height:
        understood.append(tl.select("line"))
        deferred = tl.height >= _LANE_MIN
        if deferred:
            # (the timers are read by `_rows` (`_with_timers`) off `_ttext`, the line's text, for the
            # fragments that make rows only: most one-line timers of a DeepSpeed log are other ranks', orphans
            # left out)
            timers = pl.lit(None, dtype=pl.List(_TIMER))
        else:
            tl = _timer_line_timers(tl, fast=False)
            timers = pl.col("timers")
        out.append(
            _frag(
                tl,
                kind=pl.lit("timer_line"),
                framework=pl.when(pl.col("text").str.contains(_rx(r"\[Rank \d+\]")))
                .then(pl.lit("deepspeed"))
                .otherwise(pl.lit("megatron")),
                prio=pl.lit(1),
                anchor=pl.lit(False),
                attach_line=pl.col("line"),
                timers=timers,
            )
        )
        if deferred:
            out[-1] = out[-1].with_columns(_ttext=tl.get_column("text"))

    # composer batch blocks: the header is the anchor, entries attach to it
    ch = _match(b, g.COMPOSER_HDR_RE, pl.col("c_hdr"), gate=("[batch=",), present=present)
    if ch.height:
        out.append(
            _frag(
                ch,
                kind=pl.lit("composer_batch"),
                framework=pl.lit("composer"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
            )
        )
        ce = _match(b, g.COMPOSER_ENTRY_RE, pl.col("c_ent") & (pl.col("c_blk") > 0)).filter(_f("split") == "Train")
        if ce.height:
            key, val = _f("key"), _num(_f("val"))

            def kv(name: str) -> pl.Expr:
                return pl.when(key == name).then(val)

            bps = kv("throughput/batches_per_sec")
            dev_tok = kv("throughput/device/tokens_per_sec")
            sps = kv("throughput/samples_per_sec")
            out.append(
                _frag(
                    ce,
                    kind=pl.lit("composer_entry"),
                    framework=pl.lit("composer"),
                    prio=pl.lit(0),
                    anchor=pl.lit(False),
                    attach_line=pl.col("c_blk"),
                    loss=kv("loss/train/total"),
                    step_time_s=1.0 / bps,
                    step_time_source=pl.when(bps > 0).then(pl.lit("rate")),
                    throughput=pl.coalesce(dev_tok, sps),
                    throughput_unit=pl.when(dev_tok.is_not_null())
                    .then(pl.lit("tokens/s/GPU"))
                    .when(sps.is_not_null())
                    .then(pl.lit("samples/s")),
                    cum_time_s=pl.coalesce(kv("wall_clock/train"), kv("time/train") * 3600.0),
                    lr=pl.when(key.str.starts_with("lr-")).then(val),
                    memory_gib=kv("memory/allocated_mem"),
                    mfu_pct=kv("throughput/device/mfu") * 100.0,
                )
            )

    if not n_on:
        return out, pl.concat(understood), seg.clear()
    nv = b.filter(pl.col("n_ent") & (pl.col("n_blk") > 0)).with_columns(
        role=pl.when(pl.col("text").str.contains(_rx(g.NVRX_SUB_RE)))
        .then(pl.col("text").str.extract(_rx(g.NVRX_SUB_RE), 1))
        .when(pl.col("text").str.contains(_rx(g.NVRX_RANK_RE)))
        .then(pl.lit(None, dtype=pl.String))
        .forward_fill()
        .over("n_blk")
    )
    nv = nv.with_columns(r=pl.col("text").str.extract_groups(_rx(g.NVRX_RANK_RE))).filter(
        pl.col("r").struct.field("rank").is_not_null()
    )
    return out, pl.concat(understood), nv


def _timer_line_timers(tl: pl.DataFrame, fast: bool) -> pl.DataFrame:
    """`tl` (one-line timer lines: `line`, `seg`, `text`, `_after_tms` the text after their first `time (ms)`)
    with their `timers` (rows in (line, seg) order when they came so; `fast`: the split lane may read
    them)."""
    # NOTE: split, not regex-captured (captures were most of the cost of DeepSpeed logs), same values:
    # `pairs` (all after the leftmost `time (ms) |` the grammar accepts) is the line without its shortest
    # prefix ending in one, found by a capture-free replace; a pair (`name: NUM`, one `:`) splits at its colon
    # into the lazy name (trailing blanks dropped) and the number (leading blanks dropped)
    # split lane: pairs text `name: NUM | … | name: NUM` (names of `[\w\- ]`, blanks spaces) after the
    # only `time (ms)` of the line: the pairs regex takes exactly its `|`-separated fields there
    if not fast:
        is_fast = pl.Series([False] * tl.height)
    else:
        tl = tl.with_columns(_after=pl.col("_after_tms").str.splitn("|", 2).struct.field("field_1"))
        after = pl.col("_after")
        is_fast = tl.select(after.str.contains(_rx(_TIMER_PAIRS_FAST)).fill_null(False)).to_series()
    tl = tl.drop("_after_tms")
    n_fast = int(is_fast.sum())
    if n_fast == 0:
        return _timer_line_pairs(tl.drop("_after", strict=False))
    tl_fast = tl.filter(is_fast) if n_fast < tl.height else tl
    # (two list evaluations: the `:` split materialised once, not once per field)
    kv = pl.element().struct
    tl_fast = tl_fast.with_columns(
        timers=pl.col("_after").str.split("|").list.eval(pl.element().str.splitn(":", 2)).list.eval(
            pl.struct(
                name=kv.field("field_0").str.strip_chars(),
                ms=kv.field("field_1").str.strip_chars().cast(pl.Float64, strict=False),
                min_ms=pl.lit(None, dtype=pl.Float64),
                max_ms=pl.lit(None, dtype=pl.Float64),
                min_rank=pl.lit(None, dtype=pl.Int32),
                max_rank=pl.lit(None, dtype=pl.Int32),
            )
        )
    )
    if n_fast < tl.height:
        tl = pl.concat([tl_fast, _timer_line_pairs(tl.filter(~is_fast))]).sort("line", "seg")
    else:
        tl = tl_fast
    return tl.drop("_after")


def _with_timers(frags: pl.DataFrame) -> pl.DataFrame:
    """`frags` with the timers of its one-line timer fragments read off their `_ttext` (see
    `_block_fragments`), that column dropped."""
    if "_ttext" not in frags.columns:
        return frags
    d = frags.get_column("_ttext").is_not_null()
    k = int(d.sum())
    if k == 0:
        return frags.drop("_ttext")
    text = frags.get_column("_ttext").filter(d)
    sub = frags.select("line", "seg").filter(d).with_columns(
        text=text,
        _after_tms=text.str.splitn("time (ms)", 2).struct.field("field_1"),
        _ri=pl.int_range(k, dtype=pl.Int64),
    )
    # (cast to the fragments' type, as `_frag` casts the timers it is given)
    t = _timer_line_timers(sub, fast=True).sort("_ri").get_column("timers")
    t = t.cast(pl.List(_TIMER), strict=False)
    n = frags.height
    # each row's timers: its own, or one of the `k` read (put after the `n` own ones), in the rows' order
    at = pl.select(
        pl.when(pl.lit(d))
        .then(pl.lit(d).cum_sum().cast(pl.Int64) - 1 + n)
        .otherwise(pl.int_range(n, dtype=pl.Int64))
    ).to_series()
    timers = pl.concat([frags.get_column("timers"), t.alias("timers")], rechunk=True).gather(at)
    return frags.with_columns(timers=timers).drop("_ttext")


def _timer_line_pairs(tl: pl.DataFrame) -> pl.DataFrame:
    """`tl` with its `timers` (one-line timer lines the split lane does not take)."""
    txt = pl.col("text")
    pairs = (
        tl.select(
            "line",
            "seg",
            pairs=txt.str.replace(_rx("^.*?" + _TIMER_LINE_PREFIX), "").str.extract_all(_rx(g.TIMER_PAIR_RE)),
        )
        .explode("pairs")
        .with_columns(p=pl.col("pairs").str.splitn(":", 2))
        .filter(pl.col("p").struct.field("field_0").is_not_null())
        .group_by("line", "seg", maintain_order=True)
        .agg(
            timers=pl.struct(
                name=pl.col("p").struct.field("field_0").str.strip_chars_end(),
                ms=_num(pl.col("p").struct.field("field_1").str.strip_chars_start()),
                min_ms=pl.lit(None, dtype=pl.Float64),
                max_ms=pl.lit(None, dtype=pl.Float64),
                min_rank=pl.lit(None, dtype=pl.Int32),
                max_rank=pl.lit(None, dtype=pl.Int32),
            )
        )
    )
    return tl.join(pairs, on=["line", "seg"], how="left")


# ----------------------------------------------------------------------------- fragments → rows


_ROWS_MIN = 512
"""From this many fragments on, `_rows` looks for its one-grammar shortcut (each anchor a row of its own) before
the general grouping: on a 1 MB Megatron log of 1,700 iteration lines it spares ~6 of ~57 ms; below, the test
costs about what it spares. (The tests take it everywhere and nowhere, as the split lanes of `_LANE_MIN`: the
rows are the same.)"""


def _rows(frags: pl.DataFrame) -> pl.DataFrame:
    """Group fragments into step rows (see the module docstring) and take each value from the best fragment."""
    # the column steps between the sorts run as one lazy query (one collect); the sorts stay eager (tie order)
    value_cols = [c for c in _FRAG if c not in ("line", "seg", "key", "timers", "anchor", "standalone", "attach_line")]
    if frags.height >= _ROWS_MIN:
        # anchors of one grammar that is no bar: none continues the row of the one above it (`same_step`
        # asks for another grammar or a bar redraw), so each fragment is a group of its own and no orphan,
        # what the query below gives them
        one = frags.select(
            pl.col("anchor").all(ignore_nulls=False).fill_null(False)
            & pl.col("kind").is_not_null().all()
            & (pl.col("kind") == pl.col("kind").first()).all()
            & ~pl.col("kind").first().is_in(["tqdm", "rich_bar"]).fill_null(True)
        ).item()
        if one:
            frags = _with_timers(frags)
            f = _sort_frags(frags).with_columns(
                group=pl.int_range(1, frags.height + 1, dtype=pl.UInt32), orphan=pl.lit(False)
            )
            return _single_rows(f, f.height, None, value_cols)
        return _rows_gathered(frags, value_cols)
    f = _grouped(_sort_frags(_with_timers(frags)).lazy(), over_key=True)
    # (few fragments: all aggregated, `orphan_group` in this query's collect)
    f = f.with_columns(orphan_group=pl.col("orphan").all().over("group")).collect()
    return _single_rows(f, 0, None, value_cols)


def _grouped(f: pl.LazyFrame, over_key: bool, one_run: bool = False) -> pl.LazyFrame:
    """`f` (fragments in (key, line, seg) order) with `group` (the fragments of one step row share it: a
    running count of the group starts), `orphan` and `_start` (see `_rows`). `over_key` false: the keys come
    in runs (the order above), and the per-key windows are worked out by the runs' starts instead (same
    values: the last anchor value above a fragment within its run); `one_run`: with it, every fragment has one
    same key (not null), the whole frame one run."""
    f = f.with_columns(
        attach_line=pl.coalesce(pl.col("attach_line"), pl.col("line")),
        standalone=pl.col("standalone").fill_null(False),
    )
    f = f.with_columns(
        a_step=pl.when(pl.col("anchor")).then(pl.col("step")),
        a_kind=pl.when(pl.col("anchor")).then(pl.col("kind")),
        a_line=pl.when(pl.col("anchor")).then(pl.col("line")),
        a_alone=pl.when(pl.col("anchor")).then(pl.col("standalone")),
    )
    prev_cols = ("a_step", "a_kind", "a_line", "a_alone")
    if over_key:
        prev = {f"prev_{c[2:]}": pl.col(c).shift(1).forward_fill().over("key") for c in prev_cols}
    elif one_run:
        # (one run of one key: the last non-null `x` above the fragment, wherever it is)
        prev = {f"prev_{c[2:]}": pl.col(c).forward_fill().shift(1) for c in prev_cols}
    else:
        # `x.shift(1).forward_fill().over("key")` on runs of keys: the last non-null `x` above the fragment,
        # when its position is in the fragment's run (at or after the run's first fragment), else null
        i = pl.int_range(pl.len(), dtype=pl.Int64)
        run_start = (i == 0) | pl.col("key").ne_missing(pl.col("key").shift(1))
        f = f.with_columns(
            _run=pl.when(run_start).then(i).forward_fill(),
            **{f"_at_{c}": _last_at(pl.col(c), i) for c in prev_cols},
        )
        above = {c: pl.col(c).forward_fill().shift(1) for c in prev_cols}
        within = {c: pl.col(f"_at_{c}") >= pl.col("_run") for c in prev_cols}
        prev = {f"prev_{c[2:]}": pl.when(within[c]).then(above[c]) for c in prev_cols}
    f = f.with_columns(
        **prev,
        prev_key=pl.col("key").shift(1),
        prev_attach=pl.col("attach_line").shift(1),
        prev_anchor=pl.col("anchor").shift(1),
    )
    # the same step twice: different grammars describing one step, or redraws of a progress bar
    redraw = pl.col("kind").is_in(["tqdm", "rich_bar"]) & (pl.col("kind") == pl.col("prev_kind"))
    same_step = (
        (pl.col("step") == pl.col("prev_step"))
        & ((pl.col("kind") != pl.col("prev_kind")) | redraw)
        & ((pl.col("line") - pl.col("prev_line")) <= MERGE_GAP)
        & ~pl.col("prev_alone").fill_null(True)
    ).fill_null(False)
    attached = (
        pl.col("prev_line").is_not_null()
        & ((pl.col("attach_line") - pl.col("prev_line")) <= ATTACH_GAP)
        & ~pl.col("prev_alone").fill_null(True)
    ).fill_null(False)
    # an orphan (breakdown without an anchor above it) starts a group unless it continues the same block
    orphan_start = ~attached & (
        pl.col("prev_anchor").fill_null(True) | (pl.col("attach_line") != pl.col("prev_attach")).fill_null(True)
    )
    start = (
        (pl.col("key") != pl.col("prev_key")).fill_null(True)
        | (pl.col("anchor") & (pl.col("standalone") | ~same_step))
        | (~pl.col("anchor") & orphan_start)
    )
    return f.with_columns(group=start.cum_sum(), orphan=~pl.col("anchor") & ~attached, _start=start)


def _last_at(x: pl.Expr, i: pl.Expr) -> pl.Expr:
    """The position `i` of the last non-null `x` above each row (null if none)."""
    return pl.when(x.is_not_null()).then(i).forward_fill().shift(1)


_PROGRESS = ("step_time_s", "loss", "throughput")
"""The values an orphan row must hold one of to count (see `_single_rows`)."""


def _rows_of_singles(singles: pl.DataFrame, vals: list[str]) -> pl.DataFrame:
    """Fragments that make a row each (with their `group`, `orphan` and `timers`) as rows: `vals` the value
    columns other than `rank`, timers without null entries, no timers an empty list."""
    if "timers" not in singles.columns:  # (no fragment has timers: the caller adds them, `_rows_gathered`)
        return singles.select("group", "line", "key", pl.col("orphan").alias("orphan_group"), "rank", *vals)
    timers = pl.col("timers")
    # (`list.drop_nulls` is slow on lists of structs: taken only when some list holds a null timer; a list
    # without one it leaves as it is, so the kept rows decide)
    tm = singles.get_column("timers")
    empty = singles.select((timers.is_null() | (timers.list.len() == 0)).sum()).item()
    if tm.explode().null_count() > empty:
        timers = timers.list.drop_nulls()
    return singles.select(
        "group",
        "line",
        "key",
        pl.col("orphan").alias("orphan_group"),
        "rank",
        *vals,
        timers.fill_null(pl.lit([], dtype=pl.List(_TIMER))),
    )


def _rows_gathered(frags: pl.DataFrame, value_cols: list[str]) -> pl.DataFrame:
    """`_rows` on many fragments: the order and the groups worked out on the few columns they read, then only
    the fragments that make rows gathered from the wide frame (a row of a single fragment without progress
    of its own, an orphan, is left out: most of the one-line timers of other ranks in DeepSpeed logs), in the
    order the sorts gave them (same rows, same order)."""
    narrow = frags.select(
        "key", "line", "seg", "kind", "step", "anchor", "standalone", "attach_line", *_PROGRESS
    ).with_row_index("_i")
    key = pl.col("key")
    one_run = narrow.height > 0 and bool(
        narrow.select(key.is_not_null().all() & (key == key.first()).all()).item()
    )
    f = _grouped(_sort_frags(narrow).lazy(), over_key=False, one_run=one_run)
    # a group is a run of fragments; one of a single fragment is that fragment as it is (what the aggregation
    # gives it), so only the others are sorted and aggregated
    start = pl.col("_start")
    f = f.select(
        "_i",
        "group",
        "orphan",
        _single=start & start.shift(-1).fill_null(True),
        _keep=~pl.col("orphan") | pl.any_horizontal(pl.col(c).is_not_null() for c in _PROGRESS),
    ).collect()
    single = f.get_column("_single")
    n_single = int(single.sum())
    n = f.height
    if n_single == 0:
        multi, kept = f, f.clear()
    else:
        kept = f.filter(pl.col("_single") & pl.col("_keep"))
        multi = f.filter(~pl.col("_single")) if n_single < n else f.clear()
    # (a column null in every fragment is null in every row, `drop_nulls().first()` of a group too: such
    # columns are left out of the gathers, aggregations and sorts and put back as nulls at the end)
    nulls = {
        c: t for c, t in frags.schema.items() if c not in _ROW_COLS and frags.get_column(c).null_count() == n
    }
    slim = frags.drop(list(nulls)) if nulls else frags
    # (no fragment with timers, neither a list nor a one-line timer text to read them from: every row's are
    # an empty list, what `_rows_of_singles` and `_group_rows` give them; the column is left out of the
    # gathers, aggregations and sorts, where its lists of structs are slow, and put back at the end)
    tt = frags.get_column("_ttext") if "_ttext" in frags.columns else None
    no_timers = frags.get_column("timers").null_count() == n and (tt is None or tt.null_count() == n)
    if no_timers:
        slim = slim.drop("timers", *(["_ttext"] if tt is not None else []))
    vals = [c for c in value_cols if c not in nulls and c != "rank"]
    rows = []
    groups = None
    if no_timers and 0 < n_single < n:
        # (the rows of the groups, then those of the single fragments and the groups' in one gather, in the
        # order `_sort_rows` gives them)
        m = _with_timers(slim[multi.get_column("_i")].with_columns(multi.select("group", "orphan")))
        groups = _group_rows(m, ["rank", *vals]).filter(_kept("orphan_group"))
        out = _singles_and_groups(slim.select("line", "key", "rank", *vals), kept, groups)
        if out is not None:
            return _nulls_back(out.with_columns(timers=pl.lit([], dtype=pl.List(_TIMER))), nulls, value_cols)
    if n_single:
        # (without timers, `_rows_of_singles` reads these columns only: the others are not gathered)
        part = slim.select("line", "key", "rank", *vals) if no_timers else slim
        singles = _with_timers(part[kept.get_column("_i")].with_columns(kept.select("group", "orphan")))
        rows.append(_rows_of_singles(singles, vals))
    if n_single < n and groups is not None:  # (worked out above: `_singles_and_groups` left them)
        rows.append(groups)
    elif n_single < n:
        m = _with_timers(slim[multi.get_column("_i")].with_columns(multi.select("group", "orphan")))
        rows.append(_group_rows(m, ["rank", *vals]).filter(_kept("orphan_group")))
    if n_single == n:  # (in (key, line) order already: one chunk, as the sort would give it)
        out = rows[0].rechunk()
    else:
        out = _sort_rows(rows[0] if len(rows) == 1 else pl.concat(rows))
    if no_timers:
        out = out.with_columns(timers=pl.lit([], dtype=pl.List(_TIMER)))
    return _nulls_back(out, nulls, value_cols)


def _nulls_back(out: pl.DataFrame, nulls: dict[str, pl.DataType], value_cols: Sequence[str]) -> pl.DataFrame:
    """`_rows_gathered`'s rows `out` in the row layout, the columns `nulls` (name: dtype) left out of the
    gathers put back as nulls in their place."""
    if not nulls:
        return out
    return out.select(
        "group",
        "line",
        "key",
        "orphan_group",
        "rank",
        *(pl.lit(None, dtype=nulls[c]).alias(c) if c in nulls else c for c in value_cols if c != "rank"),
        "timers",
    )


def _singles_and_groups(src: pl.DataFrame, kept: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame | None:
    """`_sort_rows` of the rows of the single fragments (`src[kept["_i"]]` with `kept`'s `group`, `orphan` as
    `orphan_group`: what `_rows_of_singles` gives without timers) followed by `groups` (the rows of the other
    groups, same columns), the wide columns gathered once from `src` and `groups` by the order the sort gives
    (worked out on `key`, `line` and `group` alone) instead of gathered, concatenated and sorted. None where
    `_sort_rows` would not sort by its packed key (nulls, negative lines, too many bits): the caller then
    takes the general way.

    (Exact: `group` is distinct over the rows (each group one row), so (key, line, group) has one sorted
    order, which the packed key's `arg_sort` gives; a gather of each column by the composed index is the
    gather of the concatenated rows by that order.)"""
    gi = kept.get_column("_i")
    at = src.select("line", "key")[gi]
    ng = groups.height
    cols = ["line", "key", "rank", *(c for c in src.columns if c not in ("line", "key", "rank"))]
    if groups.columns != ["group", "line", "key", "orphan_group", *cols[2:]]:  # (cannot be: `_group_rows`)
        return None
    narrow = pl.DataFrame(
        {
            "key": pl.concat([at.get_column("key"), groups.get_column("key")]),
            "line": pl.concat([at.get_column("line"), groups.get_column("line")]),
            "group": pl.concat([kept.get_column("group"), groups.get_column("group")]),
        }
    )
    packed = _packed_row_key(narrow)
    if packed is None:
        return None
    order = packed.arg_sort()
    # (the index of each row in `src` and `groups` stacked: the singles' `_i`, then past `src`'s rows)
    past = pl.int_range(src.height, src.height + ng, dtype=pl.Int64, eager=True)
    idx = pl.concat([gi.cast(pl.Int64), past])
    both = pl.concat([src.select(cols), groups.select(cols)], rechunk=True)
    orphan = pl.concat([kept.get_column("orphan").alias("orphan_group"), groups.get_column("orphan_group")])
    return (
        both[idx.gather(order)]
        .with_columns(group=narrow.get_column("group").gather(order), orphan_group=orphan.gather(order))
        .select("group", "line", "key", "orphan_group", *cols[2:])
    )


_ROW_COLS = ("line", "seg", "key", "prio", "rank", "timers", "_ttext", *_PROGRESS)
"""The columns of the fragments that `_rows_gathered` reads (always kept)."""


def _kept(orphan: str) -> pl.Expr:
    """Rows that count: orphans only when they carry progress of their own (HF dicts without a bar, ...)."""
    return ~pl.col(orphan) | pl.any_horizontal(pl.col(c).is_not_null() for c in _PROGRESS)


def _sort_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows.sort("group").sort("key", "line", maintain_order=True)` (`group` distinct: one order only, that
    of (key, line, group)); by one packed integer key where the key ranks, lines and groups fit in 62 bits."""
    packed = _packed_row_key(rows)
    if packed is None:
        return rows.sort("group").sort("key", "line", maintain_order=True)
    if bool((packed.diff().drop_nulls() > 0).all()):  # (in that order already)
        return rows.rechunk()
    return rows.with_columns(_sk=packed).sort("_sk").drop("_sk")


def _packed_row_key(rows: pl.DataFrame) -> pl.Series | None:
    """One Int64 per row of `rows` (columns key, line, group; `group` distinct) that sorts as (key, line, group):
    the key's rank among the distinct keys, the line and the group packed in 62 bits. None for fewer than two
    rows, a null in those columns, a negative line, or values that do not fit (then sort by the columns)."""
    line, group = pl.col("line"), pl.col("group")
    if rows.height < 2:
        return None
    st = rows.select(
        n=pl.col("key").null_count() + line.null_count() + group.null_count(),
        lo=line.min(),
        hl=line.max(),
        hg=group.max(),
    ).row(0, named=True)
    keys = _distinct_sorted(rows.get_column("key"))
    kb, lb = (keys.len() - 1).bit_length(), int(st["hl"] or 0).bit_length()
    gb = int(st["hg"] or 0).bit_length()
    if st["n"] or st["lo"] < 0 or kb + lb + gb > 62:
        return None
    return (
        _key_ranks(rows.select("key", "line", "group"), keys)
        .select((pl.col("_kr") * (1 << (lb + gb))) + (line * (1 << gb)) + group.cast(pl.Int64))
        .to_series()
    )


def _sort_frags(frags: pl.DataFrame) -> pl.DataFrame:
    """`frags.sort("key", "line", "seg")`; on many fragments whose (key, line, seg) are all distinct (one order
    only), by one integer sort key: the key's rank among the distinct keys, the line and the segment packed in
    63 bits (a sort by the three columns costs several times more)."""
    if frags.height < _LANE_MIN:
        return frags.sort("key", "line", "seg", maintain_order=True)
    line, seg = pl.col("line"), pl.col("seg")
    st = frags.select(
        n=pl.col("key").null_count() + line.null_count() + seg.null_count(),
        lo=pl.min_horizontal(line.min(), seg.min()),
        hl=line.max(),
        hs=seg.max(),
    ).row(0, named=True)
    keys = _distinct_sorted(frags.get_column("key"))
    if st["n"] or st["lo"] < 0 or st["hl"] >= 1 << 36 or st["hs"] >= 1 << 16 or keys.len() >= 1 << 11:
        return frags.sort("key", "line", "seg", maintain_order=True)
    packed = (
        _key_ranks(frags.select("key", "line", "seg"), keys)
        .select((pl.col("_kr") * (1 << 52)) + (line * (1 << 16)) + seg)
        .to_series()
    )
    if any(isinstance(t, pl.List) for t in frags.schema.values()):
        if not bool((packed.sort().diff().drop_nulls() > 0).all()):  # (a repeated triple: ties)
            return frags.sort("key", "line", "seg", maintain_order=True)
        # (the frame's own sort: a gather by index is slow on the list-of-struct timers)
        return frags.with_columns(_sk=packed).sort("_sk").drop("_sk")
    # (no list column, as `_rows_gathered`'s narrow frame: one sort of the keys, the frame gathered in that
    # order; the keys distinct, that is the one order the sort gives)
    order = packed.arg_sort()
    if not bool((packed.gather(order).diff().drop_nulls() > 0).all()):  # (a repeated triple: ties)
        return frags.sort("key", "line", "seg", maintain_order=True)
    return frags[order]


def _distinct_sorted(col: pl.Series) -> pl.Series:
    """`col.unique().sort()`; where no value is null and every one is the first (the one stream key of a log
    without envelopes), that value alone, by one pass of compares instead of a hash of each value."""
    if col.len() and col.null_count() == 0 and bool((col == col[0]).all()):
        return col.head(1)
    return col.unique().sort()


def _key_ranks(df: pl.DataFrame, keys: pl.Series) -> pl.DataFrame:
    """`df` with `_kr`, the rank of its `key` among `keys` (sorted, distinct, holding every key of `df`): a
    join, or 0 where there is one key (a join on one key costs a hash of every row's key)."""
    if keys.len() == 1:
        return df.with_columns(_kr=pl.lit(0, dtype=pl.Int64))
    rank = pl.DataFrame({"key": keys, "_kr": pl.int_range(keys.len(), eager=True, dtype=pl.Int64)})
    return df.join(rank, on="key", how="left", maintain_order="left")


def _single_rows(
    f: pl.DataFrame, n_single: int, single: pl.Series | None, value_cols: list[str]
) -> pl.DataFrame:
    """The rows of `_rows` from its grouped fragments `f` (columns `group`, `orphan`; `single`: the groups of
    one fragment, `n_single` of them; `orphan_group` instead when there is none), in (key, line) order.

    `f` comes in (key, line, seg) order (`_sort_frags`): when every group is a single fragment the rows are
    in (key, line) order already, and the stable sort that puts them there otherwise is left out."""
    def keep(orphan: str) -> pl.Expr:
        # orphans only count when they carry progress of their own (HF dicts without a bar, ...)
        return (
            ~pl.col(orphan)
            | pl.col("step_time_s").is_not_null()
            | pl.col("loss").is_not_null()
            | pl.col("throughput").is_not_null()
        )

    if n_single == 0:
        rows = _group_rows(f, value_cols).filter(keep("orphan_group"))
    else:
        # (the kept rows taken first, before the wide list-of-struct columns are copied and sorted: the
        # filter is row by row, so it gives the same rows in the same order after the selection)
        keep_single = keep("orphan")
        mask = f.select(keep_single if single is None else single & keep_single).to_series()
        singles = _rows_of_singles(f.filter(mask), [c for c in value_cols if c != "rank"])
        if n_single == f.height:
            rows = singles
        else:
            groups = _group_rows(f.filter(~single), value_cols).filter(keep("orphan_group"))
            rows = pl.concat([singles, groups]).sort("group")
    if n_single == f.height:  # (one chunk, as the sort would give it)
        return rows.rechunk()
    return rows.sort("key", "line", maintain_order=True)


def _group_rows(f: pl.DataFrame, value_cols: list[str]) -> pl.DataFrame:
    """One row per group of fragments (groups of two or more; see `_rows`)."""
    if "orphan_group" not in f.columns:
        f = f.with_columns(orphan_group=pl.col("orphan").all().over("group"))
    return (
        f.rechunk()
        .sort("group", "prio", "line", "seg", maintain_order=True)
        .group_by("group", maintain_order=True)
        .agg(
            pl.col("line").first(),
            pl.col("key").first(),
            pl.col("orphan_group").first(),
            pl.col("rank").first(),  # the best fragment's own rank: a DeepSpeed `[Rank 0]` beside it may be another writer
            *[pl.col(c).drop_nulls().first() for c in value_cols if c != "rank"],
            # (no timers column: no fragment has any, see `_rows_gathered`)
            *([pl.col("timers").explode().drop_nulls()] if "timers" in f.columns else []),
        )
    )


def _phases(rows: pl.DataFrame) -> pl.DataFrame:
    """Phase columns and the widest (min, max) spread from the attached timers.

    Only rows with timers are evaluated (list evals are the slow part); the others keep their phase
    columns and get no spread, which is what the evaluation gives them.
    """
    none = {"phase_spread_s": pl.lit(None, dtype=pl.Float64), "phase_spread_name": pl.lit(None, dtype=pl.String)}
    if rows.height == 0:
        return rows.with_columns(**none)
    # (no timers, the usual case but for Megatron's: tested in a query, which leaves a column of one value put
    # in for all rows (`_rows_gathered`'s empty lists) as it is: taken out whole it is made, ~10 ms a range)
    if not rows.select((pl.col("timers").list.len().fill_null(0) > 0).any()).item():
        return rows.with_columns(**none)
    has = (rows.get_column("timers").list.len().fill_null(0) > 0).arg_true()
    if len(has) == rows.height or len(has) < 2:
        # NOTE: polars divides a one-row frame by a literal exactly but longer ones by its reciprocal (last
        # digit may differ), so a one-row subset of a longer frame is evaluated with the whole frame
        return _phases_all(rows)
    sub = _phases_all(rows[has])
    out = rows.with_columns(**none)
    return out.with_columns(
        **{c: out.get_column(c).scatter(has, sub.get_column(c)) for c in [*g.PHASES, *none]}
    )


_PHASE_NAMES = pl.DataFrame(
    {
        "name": [n for names in g.PHASES.values() for n in names],
        "_col": [c for c, names in g.PHASES.items() for _ in names],
        "_rank": [i for names in g.PHASES.values() for i in range(len(names))],
    },
    schema={"name": pl.String, "_col": pl.String, "_rank": pl.Int32},
)


_SIG_MAX = 64
"""At most this many distinct timer-name lists for `_phase_values` to read positions per list."""


def _phase_values(rows: pl.DataFrame) -> dict[str, pl.Series]:
    """Per phase column, the ms value of its most specific timer name present in each row's timers (null if none).

    A name's value is that of its first timer in the row (`max_ms`, else `ms`); the column takes the first name
    of its `g.PHASES` list whose value is not null.

    By position where the rows' lists of timer names are few (Megatron prints the same timers every
    iteration): per distinct list, the positions of the first timer of each of the column's names, in the
    order of its `g.PHASES` list; the value is the first non-null of the row's values there.
    """
    el = pl.element().struct
    lists = rows.select(
        _n=pl.col("timers").list.eval(el.field("name")),
        _v=pl.col("timers").list.eval(el.field("max_ms").fill_null(el.field("ms"))),
    )
    groups = lists.select("_n").with_row_index("_r").group_by("_n").agg("_r")
    if groups.height > _SIG_MAX:
        return _phase_values_join(rows)
    picks: dict[str, list[tuple[pl.Series, list[int]]]] = {col: [] for col in g.PHASES}
    for names, idx in groups.iter_rows():
        first: dict[str, int] = {}
        for i, name in enumerate(names or ()):
            if name is not None:
                first.setdefault(name, i)
        for col, phase_names in g.PHASES.items():
            pos = [first[name] for name in phase_names if name in first]
            if pos:
                picks[col].append((pl.Series(idx, dtype=pl.UInt32), pos))
    out = {}
    n = rows.height
    for col in g.PHASES:
        full = _nulls(col, n, pl.Float64)
        if picks[col]:
            depth = max(len(pos) for _, pos in picks[col])
            at = []
            for k in range(depth):
                col_k = _nulls(f"_p{k}", n, pl.Int64)
                for idx, pos in picks[col]:
                    if k < len(pos):
                        col_k = col_k.scatter(idx, pos[k])
                at.append(col_k)
            v = pl.col("_v")
            full = (
                lists.select("_v", *at)
                .select(pl.coalesce(*(v.list.get(pl.col(f"_p{k}"), null_on_oob=True) for k in range(depth))))
                .to_series()
                .alias(col)
            )
        out[col] = full.rechunk()
    return out


def _phase_values_join(rows: pl.DataFrame) -> dict[str, pl.Series]:
    """`_phase_values` on the exploded timers by one join (was one list evaluation per name, ~37 a call)."""
    ex = rows.select(_r=pl.int_range(pl.len(), dtype=pl.Int64), t=pl.col("timers")).explode("t")
    t = pl.col("t").struct
    firsts = (
        ex.select("_r", name=t.field("name"), v=t.field("max_ms").fill_null(t.field("ms")))
        .join(_PHASE_NAMES, on="name", how="inner")
        .group_by("_r", "name", maintain_order=True)
        .agg(pl.col("v", "_col", "_rank").first())
        .filter(pl.col("v").is_not_null())
        .sort("_r", "_col", "_rank")
        .group_by("_r", "_col", maintain_order=True)
        .agg(pl.col("v").first())
    )
    out = {}
    for col in g.PHASES:
        got = firsts.filter(pl.col("_col") == col)
        full = _nulls(col, rows.height, pl.Float64)
        if got.height:
            full = full.scatter(got.get_column("_r"), got.get_column("v"))
        out[col] = full.rechunk()
    return out


def _phases_all(rows: pl.DataFrame) -> pl.DataFrame:
    """`_phases` evaluated on every row."""
    el = pl.element()
    # NOTE: the division runs on a full-length one-chunk column, as the per-name list evaluation gave it (polars
    # divides by a literal exactly in one-row chunks, by its reciprocal in longer ones)
    upd = {col: pl.coalesce(pl.col(col), pl.lit(v) / 1000.0) for col, v in _phase_values(rows).items()}
    spread = pl.col("timers").list.eval(
        (el.struct.field("max_ms") - el.struct.field("min_ms")).fill_null(-1.0)
    )
    rows = rows.with_columns(**upd, _sp=spread)
    best = pl.col("_sp").list.arg_max()
    name = pl.col("timers").list.eval(el.struct.field("name")).list.get(best, null_on_oob=True)
    val = pl.col("_sp").list.max()
    return rows.with_columns(
        phase_spread_s=pl.when(val >= 0).then(val / 1000.0),
        phase_spread_name=pl.when(val >= 0).then(name),
    ).drop("_sp")


def _times(rows: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """Inherit missing times from the line right above; derive missing step times (cumulative, then ts deltas).

    `rows` come in (key, line) order. On many rows whose (key, line) pairs are unique (so every sort and join
    below has one answer whatever the order it starts from) the work runs on narrow frames and the results go
    back by row position: the wide frame is gathered once at most; `_times_general` is the plain form.
    """
    if rows.height < _LANE_MIN:
        return _times_general(rows, seg)
    # (in (key, line) order a repeated pair is one next to its like)
    key, line = pl.col("key"), pl.col("line")
    if rows.select(((key == key.shift(1)) & (line == line.shift(1))).any()).item():
        return _times_narrow(rows, seg)
    n = rows.height
    quality = pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_quality"))
    narrow = rows.select(
        "key", "line", "ts", "kind", "framework", "step", "cum_time_s", ts_quality=quality, _i=pl.int_range(n)
    )
    # (a row with its own time keeps it: nothing to inherit when every row has one)
    inherit = rows.get_column("ts").null_count() > 0
    stamped = seg.clear().select("key", src_line=pl.col("line"), src_ts=pl.col("ts"))
    if inherit:
        stamped = seg.filter(pl.col("ts").is_not_null())
        stamped = stamped.select("key", src_line=pl.col("line"), src_ts=pl.col("ts"))
        if stamped.select(pl.struct("key", "src_line").is_duplicated().any()).item():
            stamped = stamped.unique(["key", "src_line"], keep="first", maintain_order=True)
        # (the seg frame is in line order and a line has one key: `stamped` is sorted by `src_line` as it is)
        narrow = narrow.with_columns(prev_row_line=pl.col("line").shift(1).over("key"))
    if stamped.height:
        j = _inherit_asof(narrow, stamped, bars=True)
        narrow = narrow.with_columns(j.get_column("ts"), j.get_column("ts_quality"))
    narrow = narrow.with_columns(pl.col("ts_quality").fill_null("none"))
    # (rows in (key, line) order, pairs unique: with one framework in all they are in this order already)
    fw = pl.col("framework")
    one_fw = narrow.select(fw.eq_missing(fw.first()).all()).item()
    order = None if one_fw else narrow.select(pl.arg_sort_by("key", "framework", "line")).to_series()
    if order is not None and not order.equals(pl.Series(range(n), dtype=order.dtype), check_names=False):
        narrow = narrow[order]
        rows = rows[order]
    grp = ["key", "framework"]
    has_step = pl.col("step").is_not_null()
    narrow = narrow.with_columns(_p=pl.int_range(n))
    cum = narrow.filter(has_step & pl.col("cum_time_s").is_not_null()).select(
        "_p",
        d_cum=(pl.col("cum_time_s") - pl.col("cum_time_s").shift(1)).over(grp),
        d_step=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    own_q = pl.col("ts_quality").is_in(["exact", "local_assumed_utc", "year_inferred"])
    own = narrow.filter(has_step & own_q).select(
        "_p",
        d_ts=((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp),
        d_step_ts=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    extra = {"ts": narrow.get_column("ts"), "ts_quality": narrow.get_column("ts_quality")}
    for part, cols in ((cum, ("d_cum", "d_step")), (own, ("d_ts", "d_step_ts"))):
        for c in cols:
            full = _nulls(c, n, part.schema[c])
            extra[c] = full.scatter(part.get_column("_p"), part.get_column(c)) if part.height else full
    rows = rows.with_columns(**extra)
    return _derived_step_time(rows)


def _times_general(rows: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """`_times` by sorts and joins of the whole frame."""
    rows = rows.with_columns(ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_quality")))
    stamped = seg.filter(pl.col("ts").is_not_null()).select(
        "key", src_line=pl.col("line"), src_ts=pl.col("ts")
    ).unique(["key", "src_line"], keep="first", maintain_order=True).sort("key", "src_line")
    key = rows.get_column("key")
    if rows.height and key.null_count() == 0 and key.n_unique() == 1:  # (one stream: no window)
        rows = rows.with_columns(prev_row_line=pl.col("line").shift(1)).sort("line")
    else:
        rows = rows.with_columns(prev_row_line=pl.col("line").shift(1).over("key")).sort("line")
    if stamped.height and rows.height:
        narrow = rows.select(
            "key", "line", "ts", "ts_quality", "kind", "prev_row_line", _i=pl.int_range(rows.height)
        )
        j = _inherit_asof(narrow, stamped.sort("src_line"), bars=True)
        rows = rows.with_columns(j.get_column("ts"), j.get_column("ts_quality"))
    rows = rows.with_columns(ts_quality=pl.col("ts_quality").fill_null("none"))
    rows = _sort_stable(rows, ("key", "framework", "line"))

    grp = ["key", "framework"]
    has_step = pl.col("step").is_not_null()
    # cumulative training time (composer wall_clock/train, modded-nanogpt train_time)
    cum = rows.filter(has_step & pl.col("cum_time_s").is_not_null()).select(
        "key",
        "framework",
        "line",
        d_cum=(pl.col("cum_time_s") - pl.col("cum_time_s").shift(1)).over(grp),
        d_step=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    # timestamp deltas, own (not inherited) times only
    own = rows.filter(has_step & pl.col("ts_quality").is_in(["exact", "local_assumed_utc", "year_inferred"])).select(
        "key",
        "framework",
        "line",
        d_ts=((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp),
        d_step_ts=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    # (a left join with no row on the right adds null columns; the rows stay as they are)
    for part in (cum, own):
        if part.height:
            rows = rows.join(part, on=["key", "framework", "line"], how="left")
        else:
            added = {c: t for c, t in part.schema.items() if c not in (*grp, "line")}
            rows = rows.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in added.items())
    return _derived_step_time(rows, "prev_row_line")


def _sort_stable(df: pl.DataFrame, by: tuple[str, ...]) -> pl.DataFrame:
    """`df.sort(*by, maintain_order=True)`; on big frames without nulls in `by`, by one packed integer key:
    the rank of each row's value in each column (strings: among the distinct values, in sort order;
    integers: the value less the least) and its position, when they fit in 62 bits (one order only)."""
    n = df.height
    if n < _LANE_MIN or any(df.get_column(c).null_count() for c in by):
        return df.sort(*by, maintain_order=True)
    ranks: list[tuple[pl.Series, int]] = []
    for c in by:
        col = df.get_column(c)
        if col.dtype == pl.String:
            uniq = _distinct_sorted(col)
            if uniq.len() == 1:  # (one value: every rank 0, no join)
                ranks.append((pl.zeros(n, dtype=pl.Int64, eager=True), 1))
                continue
            if uniq.len() <= 4:  # (a few values: the rank is how many of the others sort below it, no join)
                r = pl.select(pl.sum_horizontal(pl.lit(col) > u for u in uniq[:-1].to_list())).to_series()
                ranks.append((r.cast(pl.Int64), uniq.len()))
                continue
            table = pl.DataFrame({c: uniq, "_r": pl.int_range(uniq.len(), eager=True, dtype=pl.Int64)})
            r = df.select(c).join(table, on=c, how="left", maintain_order="left").get_column("_r")
            ranks.append((r, uniq.len()))
        elif col.dtype.is_integer():
            lo, hi = int(col.min()), int(col.max())  # type: ignore[arg-type]
            ranks.append((col.cast(pl.Int64) - lo, hi - lo + 1))
        else:
            return df.sort(*by, maintain_order=True)
    bits = [(size - 1).bit_length() for _, size in ranks]
    pb = (n - 1).bit_length()
    if sum(bits) + pb > 62:
        return df.sort(*by, maintain_order=True)
    packed = pl.int_range(n, dtype=pl.Int64, eager=True)
    shift = pb
    for (r, _), b in zip(reversed(ranks), reversed(bits)):
        packed = packed + r * (1 << shift)
        shift += b
    if bool((packed.diff().drop_nulls() > 0).all()):  # (in that order already)
        return df.rechunk()
    # (in order by the last columns already, the first ones of few values, as rows of one stream in line order
    # with two frameworks: the rows of each value of the first in turn, as they are, filtered, not gathered)
    for j in range(1, len(ranks)):
        low = sum(bits[j:]) + pb
        if not bool(((packed % (1 << low)).diff().drop_nulls() > 0).all()):
            continue
        lead = packed // (1 << low)
        vals = lead.unique().sort()
        if vals.len() <= 4:
            return pl.concat([df.filter(lead == v) for v in vals.to_list()]).rechunk()
        break
    return df.with_columns(_sk=packed).sort("_sk").drop("_sk")


_TIMES_COLS = ("key", "line", "ts", "ts_quality", "kind", "framework", "step", "cum_time_s", "step_time_s")
"""The columns `_times_general` reads (and `step_time_source`, which it sets with `ts`, `ts_quality` and
`step_time_s`)."""


def _times_narrow(rows: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """`_times_general(rows, seg)` run on the columns it reads and a row index (its sorts and joins order and
    repeat rows by those columns alone), the wide frame then gathered once by that index."""
    narrow = rows.select(*_TIMES_COLS, "step_time_source", _ri=pl.int_range(rows.height, dtype=pl.Int64))
    got = _times_general(narrow, seg)
    if got.columns != narrow.columns:  # (cannot happen: it sets columns in place and drops its own)
        return _times_general(rows, seg)
    return rows[got.get_column("_ri")].with_columns(
        got.select("ts", "ts_quality", "step_time_s", "step_time_source")
    )


def _derived_step_time(rows: pl.DataFrame, *drop: str) -> pl.DataFrame:
    """Step times from the deltas `d_cum`/`d_step` (cumulative time) and `d_ts`/`d_step_ts` (timestamps) where
    none is printed; the delta columns are dropped."""
    from_cum = pl.when((pl.col("d_step") > 0) & (pl.col("d_cum") > 0)).then(pl.col("d_cum") / pl.col("d_step"))
    from_ts = pl.when((pl.col("d_step_ts") > 0) & (pl.col("d_ts") > 0)).then(pl.col("d_ts") / pl.col("d_step_ts"))
    return rows.with_columns(
        step_time_source=pl.when(pl.col("step_time_s").is_not_null())
        .then(pl.col("step_time_source"))
        .when(from_cum.is_not_null())
        .then(pl.lit("cumulative_delta"))
        .when(from_ts.is_not_null())
        .then(pl.lit("ts_delta")),
        step_time_s=pl.coalesce(pl.col("step_time_s"), from_cum, from_ts),
    ).drop("d_cum", "d_step", "d_ts", "d_step_ts", *drop)


# ----------------------------------------------------------------------------- events


_STRAGGLER_NAMES = tuple(stat + metric for stat in ("Mn", "Mx") for metric in g.STRAGGLER_METRICS)
_STRAGGLER_ANY = g.STRAGGLER_ITEM_RE.format(metric=f"(?P<metric>{'|'.join(_STRAGGLER_NAMES)})", num=g.NUM)
"""`g.STRAGGLER_ITEM_RE` of any item (`Mn`/`Mx` and a metric), its name in group `metric`."""


def _straggler_items(text: pl.Series) -> pl.DataFrame:
    """Per line of `text` (a straggler report), the struct (`value`, `unit`, `rank`) of each item's first
    `g.STRAGGLER_ITEM_RE` match, in columns `_item_<name>` (`_STRAGGLER_NAMES`).

    That is the first of the line's `_STRAGGLER_ANY` matches whose `metric` is the item: at a place where
    one item's regex matches, `_STRAGGLER_ANY` matches it the same way (the names differ before `/Rnk: `,
    so one branch fits), and no match of it holds the place where another starts (a blank, `|` or the line
    start before `M`: none is inside a match, after its first character: names, `NUM`, units and ranks hold
    no blank or `|`). A match's groups are read again from its own text. (One regex, not one per item: a
    compile each per chunk, polars keeping ~32 compiled while a chunk uses ~100.)"""
    rx = _rx(_STRAGGLER_ANY)
    every = pl.DataFrame({"_s": text.str.extract_all(rx)}).with_row_index("_i")
    every = every.explode("_s", empty_as_null=True)  # (a line without a match: one null row)
    x = pl.col("_g")
    first = (
        every.select("_i", _g=pl.col("_s").str.extract_groups(rx))
        .group_by("_i", maintain_order=True)
        .agg(**{name: x.filter(x.struct.field("metric") == name).first() for name in _STRAGGLER_NAMES})
    )
    assert first.height == text.len()
    return first.select(
        **{
            f"_item_{name}": pl.struct(
                value=_num(pl.col(name).struct.field("v")),
                unit=pl.col(name).struct.field("unit"),
                rank=pl.col(name).struct.field("rank").cast(pl.Int32, strict=False),
            )
            for name in _STRAGGLER_NAMES
        }
    )


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
        # (one regex for the fourteen items: their matches, then each item's first; fourteen regexes cost
        # a compile each per chunk, polars keeping ~32 compiled while a chunk uses ~100)
        m = m.hstack(_straggler_items(m.get_column("text")))
        items = {name: pl.col(f"_item_{name}") for name in _STRAGGLER_NAMES}
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


# ----------------------------------------------------------------------------- parse

_NOISE_ANY = "|".join(f"(?:{p})" for p in (g.HF_DICT_RE, *g.NOISE_RES))
"""HF dicts and the framework lines that carry no step, as one alternation (one regex pass, same truth value)."""


_NOISE_DASHES = r"^\s*-{20,}\s*$"
_NOISE_LITS: tuple[str, ...] | None = None
_lits = [("-" * 20,) if p == _NOISE_DASHES else required_literals(p) for p in (g.HF_DICT_RE, *g.NOISE_RES)]
if all(_lits):
    _NOISE_LITS = tuple(sorted({lit for lits in _lits for lit in lits}))  # type: ignore[union-attr]
"""Literals one of which each `_NOISE_ANY` match holds (`parsers._sniff.required_literals`; the dash rule's
twenty dashes by hand, the derived `-` being in every timer name); None: no prefilter."""


def _noise_lines(seg: pl.DataFrame, understood: pl.Series) -> pl.Series:
    """Lines understood without a row: own timestamp, composer banner, `_NOISE_ANY`.

    On big inputs only the lines not `understood` already are looked at (what is returned goes into that set),
    and the regex runs only on those of them without a time or banner that hold one of `_NOISE_LITS`."""
    txt = pl.col("text")
    known = pl.col("ts").is_not_null() | pl.col("banner")
    if _NOISE_LITS is None or seg.height < _LANE_MIN:
        return seg.filter(known | txt.str.contains(_rx(_NOISE_ANY))).get_column("line")
    rest = seg.filter(~pl.col("line").is_in(understood.implode()))
    flags = rest.select(known=known, cand=~known & txt.str.contains_any(list(_NOISE_LITS)))
    hit = flags.get_column("known").fill_null(False)
    i = flags.get_column("cand").fill_null(False).arg_true()
    if i.len():
        cand = rest.get_column("text").gather(i)
        with _ascii_of(cand):
            got = cand.str.contains(_rx(_NOISE_ANY)).fill_null(False)
        hit = hit.clone().scatter(i, got)
    return rest.filter(hit).get_column("line")


_PYWARN_LIT = "Warning: "
_PYWARN_RE = r"^(.*?)(?:[A-Za-z]:)?[^\s:][^:]*?(?:\.py|>):\d+: [A-Z]\w*Warning: "
"""A Python warning as `warnings.formatwarning` writes it (`FILE:LINE: CategoryWarning: message`; FILE may be
`<frozen importlib._bootstrap>`), behind whatever prefix the launcher put before it (group 1)."""


def _warning_lines(seg: pl.DataFrame) -> pl.Series:
    """Lines understood without a row: Python warnings, and the source line Python prints under one (two
    spaces, then the code: `  warnings.warn(`) when it is the next line and has the same prefix. Training
    logs hold thousands (deprecations, graph breaks, scaling recipes); they say nothing about step times."""
    raw = seg.get_column("raw")
    at = raw.str.contains(_PYWARN_LIT, literal=True).arg_true()
    none = pl.Series("line", [], dtype=pl.Int64)
    if at.len() == 0:
        return none
    cand = raw.gather(at)
    with _ascii_of(cand):
        heads = seg.select(pl.col("line").gather(at), env=cand.str.extract(_rx(_PYWARN_RE), 1))
    heads = heads.filter(pl.col("env").is_not_null())
    if heads.height == 0:
        return none
    # the next line's first segment (`seg` is in (line, seg) order)
    lines = seg.get_column("line")
    after = heads.get_column("line") + 1
    pos = lines.search_sorted(after, side="left").clip(0, seg.height - 1)
    nxt = pl.DataFrame(
        {"line": after, "env": heads.get_column("env"), "at": lines.gather(pos), "raw": raw.gather(pos)}
    )
    indent = pl.concat_str(pl.col("env"), pl.lit("  "))
    source = nxt.filter(
        (pl.col("at") == pl.col("line"))
        & pl.col("raw").str.starts_with(indent)
        & pl.col("raw").str.slice(indent.str.len_chars(), 1).str.contains(_rx(r"^\S"))
    )
    return pl.concat([heads.get_column("line"), source.get_column("line")])


def parse(lines: pl.Series, ctx: FileContext, entries: MegEntries | None = None) -> ParseResult:
    """Parse a training log into `steps` rows and straggler `events` (see the module docstring). `entries`:
    `meg_entry_lines(lines)`, when the caller made it (`_mixed`)."""
    with ascii_scope(_ascii or is_ascii(lines)):
        got = _lanes(lines, ctx, entries)
        return got if got is not None else _parse(lines, ctx)


def _lanes(lines: pl.Series, ctx: FileContext, entries: MegEntries | None) -> ParseResult | None:
    """`parse` by the first lane that takes the log (timer lines only, torchtitan, Megatron), or None: then
    `_parse` (the general reading, whose result every lane equals)."""
    if len(lines) < _LANE_MIN:
        return None
    if _timer_only(lines.cast(pl.String)):
        return _timer_only_result(lines, ctx)
    got = _titan_lane(lines, ctx)
    return got if got is not None else _megatron_lane(lines, ctx, entries)


def parse_each(items: Sequence[tuple[pl.Series, FileContext, MegEntries | None, bool]]) -> list[ParseResult]:
    """`[parse(lines, ctx, entries) for lines, ctx, entries, ascii in items]`, each in `ascii_scope(ascii)`
    (a batch of whole files: `parse_many`, and what `_mixed` reads of files that hold both grammars, each
    file's other lines), where the files no lane takes are read by one general reading (`_parse_batch`) when
    they are two or more of one year: they share its fixed cost, ~300 polars calls (a 1 MB Megatron log with
    NCCL lines, of chatter the lane leaves: ~45 ms alone, ~20 in a batch of 8). Files of fewer than
    `BATCH_LANE_LINES` lines go to that reading without trying the lanes, where two or more do. A batch of
    non-ASCII lines runs the regexes with Unicode classes (the same matches on ASCII lines)."""
    out: list[ParseResult | None] = [None] * len(items)
    general: list[tuple[int, bool]] = []
    untried: list[tuple[int, bool]] = []
    for i, (lines, ctx, entries, ascii) in enumerate(items):
        with ascii_scope(ascii), ascii_scope(_ascii or is_ascii(lines)):
            if len(lines) < BATCH_LANE_LINES:
                untried.append((i, bool(_ascii)))
                continue
            out[i] = _lanes(lines, ctx, entries)
            if out[i] is None:
                general.append((i, bool(_ascii)))
    if len(general) + len(untried) < 2:
        for i, ascii in untried:  # (alone: the lanes first, as `parse`)
            with ascii_scope(ascii):
                out[i] = _lanes(*items[i][:3])
            if out[i] is None:
                general.append((i, ascii))
    else:
        general = sorted(general + untried)
    if len(general) >= 2 and len({_year(items[i][1]) for i, _ in general}) == 1:
        try:
            with ascii_scope(all(a for _, a in general)):
                got = _parse_batch([items[i][:2] for i, _ in general])
        except CONTAINED:  # noqa: BLE001 - (the file that fails raises again, alone, as `parse` of it does)
            got = None
        if got is not None:
            for (i, _), result in zip(general, got, strict=True):
                out[i] = result
            general = []
    for i, ascii in general:
        with ascii_scope(ascii):
            out[i] = _parse(*items[i][:2])
    return out  # type: ignore[return-value]


BATCH_LANE_LINES = 24_000
"""`parse_each` reads the files of fewer lines of a batch by the general reading without trying the lanes:
it costs them less there, with the lane's fixed costs (~40 ms: its reading of the other lines, `_finish`)
its own (Megatron logs by the lane alone, and by one general reading: 8 of 0.96 MB 44 and 32 ms a file; 6 of
1.4 MB 54 and 40; 3 of 2.7 MB (32,000 lines) 65 and 79; 2 of 4.1 MB 83 and 148)."""


def _parse(lines: pl.Series, ctx: FileContext, numbers: pl.Series | None = None) -> ParseResult:
    """`parse` by the general reading (`numbers`: see `_prepare`)."""
    return _parse_seg(lines, ctx, numbers)[0]


def _parse_seg(
    lines: pl.Series, ctx: FileContext, numbers: pl.Series | None = None
) -> tuple[ParseResult, pl.DataFrame]:
    """`_parse` and the prepared lines of its reading (`_prepare`'s segment frame: stream `key`, `line`, own
    time `ts`...), whose timed lines rows without a time may inherit (`_times`): what `_megatron_lane` needs
    of the lines it leaves to the general reading."""
    frame, seg = _prepare(lines, ctx, numbers=numbers)
    node = pl.coalesce(pl.col("host"), pl.lit(ctx.node))
    steps, events, understood = _read(seg, node, pl.lit(ctx.path))
    parsed, unrecognized, examples = account(frame, pl.col("line").is_in(understood.implode()))
    tables = {"steps": conform(steps, "steps")}
    hosts = seg.get_column("host").drop_nulls().unique().to_list()
    if events.height:
        tables["events"] = conform(events, "events")
    notes = []
    if numbers is None and steps.height == 0 and parsed:  # (a whole file, not the other lines of a lane)
        timers = frame.filter(pl.col("line").is_in(understood.implode())).get_column("text")
        if timers.str.contains("time (ms)", literal=True).any():
            notes.append(ORPHAN_TIMERS_NOTE)
    result = ParseResult(
        tables=tables,
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        notes=notes,
        partial=_cut_last_line(frame),
        node=hosts[0] if len(hosts) == 1 else None,
    )
    return result, seg


_EMPTY_STEPS = {"line": pl.Int64}
"""The columns of `_read`'s rows when there are none (the callers conform them: the table's columns)."""


def _read(
    seg: pl.DataFrame, node: pl.Expr, path: pl.Expr, batch: _Batch | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """The `steps` and `events` rows (not conformed) of the prepared lines `seg` and the lines understood
    (distinct). `node`, `path`: a row's `node` and `file` (over a row's `host` and `line`). `batch`: see
    `parse_many`."""
    titan = _titan_pre(seg)
    minmax = _minmax_pre(seg)
    # (bars redrawn with `\r`, as tqdm's are: matched before the gates are looked for, which then skip those
    # of the canonical shape; a log without `\r` has none of those in its many lines, most likely)
    tqdm, bar_gates = None, None
    if seg.height >= _LANE_MIN and seg.get_column("seg").max() > 0:  # type: ignore[operator]
        tqdm, bar_gates = _tqdm_lane(seg.select(*_BASE, "text"))
    present = _present(seg, titan, minmax, bar_gates)
    if not present:
        # no grammar runs (each match holds a gate): no fragment, bar, block line or event; the lines
        # understood are the noise and the warnings, the rows none (the callers conform them)
        none = pl.Series("line", [], dtype=pl.Int64)
        understood = pl.concat([_noise_lines(seg, none), _warning_lines(seg)]).unique()
        return pl.DataFrame(schema=_EMPTY_STEPS), pl.DataFrame(), understood
    frags = _step_fragments(seg, present, titan)
    bars, bar_lines = _bar_fragments(seg, present, batch, tqdm)
    blocks, block_lines, nv = _block_fragments(seg, present, minmax)
    events, event_lines = _events(seg, nv, node, path, present)

    # (the bars' fragments are left out: each is a line of the bars matched, `bar_lines`, and a set of lines
    # is the same without those repeats, which cost the `is_in` and `unique` below a hash each)
    understood_lines = pl.concat(
        [f.select("line") for f in frags + blocks] + [bar_lines, block_lines, event_lines],
        how="vertical_relaxed",
    ).get_column("line")
    frags += bars + blocks
    understood_lines = pl.concat(
        [understood_lines, _noise_lines(seg, understood_lines), _warning_lines(seg)]
    ).unique()
    if batch is None and not any(f.height for f in frags):
        # no fragment (grammars whose gates are there but match nothing: the lines a lane leaves to `_parse`):
        # no row, as when no grammar runs (`_rows` and `_finish` of no fragment cost ~8 ms of fixed stages)
        return pl.DataFrame(schema=_EMPTY_STEPS), events, understood_lines

    if frags:
        if any("_ttext" in f.columns for f in frags):  # (timers read later, see `_block_fragments`)
            no_text = pl.lit(None, dtype=pl.String).alias("_ttext")
            frags = [f if "_ttext" in f.columns else f.with_columns(no_text) for f in frags]
        all_frags = pl.concat(frags, how="vertical_relaxed")
        if batch is not None:
            batch.note_single_divisions(all_frags)
        rows = _rows(all_frags)
    else:
        rows = pl.DataFrame(schema=_FRAG).drop("seg").with_columns(orphan_group=pl.lit(None, dtype=pl.Boolean))
    if batch is not None:
        batch.note_single_phases(rows)
    return _finish(rows, seg, node, path), events, understood_lines


def _finish(
    rows: pl.DataFrame, seg: pl.DataFrame, node: pl.Expr, path: pl.Expr, times: bool = True
) -> pl.DataFrame:
    """The `steps` rows (not conformed) of `_rows`' rows: phases, times, detail (see `_read`). `times`
    False: every row has its own time and a step time (`_times` changes nothing then but the order, which
    the sort by line here sets)."""
    rows = _phases(rows)
    if times:
        rows = _times(rows, seg)
    extras = {c: pl.col(c) for c in _EXTRAS}
    if rows.height > 1 and not (rows.get_column("line").diff().drop_nulls() > 0).all():
        rows = rows.sort("line")  # (rows in strictly ascending line order stay as they are)
    rows = rows.with_columns(
        _detail=_step_detail(rows, {**extras, "timers": pl.when(pl.col("timers").list.len() > 0).then(pl.col("timers"))})
    )
    steps = rows.select(
        "ts",
        "ts_quality",
        node=node,
        rank=pl.col("rank"),
        step=pl.col("step"),
        step_time_s=pl.col("step_time_s"),
        step_time_source=pl.col("step_time_source"),
        forward_s=pl.col("forward_s"),
        backward_s=pl.col("backward_s"),
        optimizer_s=pl.col("optimizer_s"),
        comm_wait_s=pl.col("comm_wait_s"),
        data_s=pl.col("data_s"),
        throughput=pl.col("throughput"),
        throughput_unit=pl.col("throughput_unit"),
        tflops=pl.col("tflops"),
        loss=pl.col("loss"),
        phase_spread_s=pl.col("phase_spread_s"),
        phase_spread_name=pl.col("phase_spread_name"),
        framework=pl.col("framework").fill_null("unknown"),
        detail=pl.col("_detail"),
        file=path,
        line=pl.col("line"),
    )
    return steps


# ----------------------------------------------------------------------------- torchtitan lane

_D = r"[0-9]+(?:\.[0-9]+)?"
_TITAN_LINE = (
    r"^\[rank([0-9]+)\]:\[titan\] "
    r"([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-5][0-9]),([0-9]{3})"
    rf" - root - INFO - step: +([0-9]+) +loss: +({_D}) +(?:grad_norm: +({_D}) +)?memory: +({_D})GiB"
    rf"\([0-9.]+%\) +(?:tps|wps): +([0-9][0-9,]*(?:\.[0-9]+)?) +tflops: +({_D}) +mfu: +({_D})%$"
)
"""A torchtitan step line of the one shape `_titan_lane` reads off its groups (rank, date-time, milliseconds,
step, loss, grad_norm, memory, tps, tflops, mfu): a `[rankN]:` envelope or none, a `[titan]` logging header
(the `logging` module's time: `,` and three digits), the step line `_TITAN_CANON` reads, with ASCII digits.
(Runs of digits are not bounded, which costs ~10 % more in the regex: a rank or step out of range, a
number that reads infinite send the whole to `_parse`.)"""
_TITAN_LINE_LIT = " - root - INFO - step: "
assert re.compile(_TITAN_LINE).groups == 10 and _TITAN_LINE_LIT in _TITAN_LINE.replace("\\", "")
_TITAN_BARE = _TITAN_LINE.replace(r"^\[rank([0-9]+)\]:", r"^(?:\[rank([0-9]+)\]:){0}", 1)
"""`_TITAN_LINE` of a line without an envelope (group 1 never set). (One regex with the envelope optional
costs twice as much: the line's first `[` no longer tells the way, the capture takes a slower engine.)"""
assert _TITAN_BARE != _TITAN_LINE and re.compile(_TITAN_BARE).groups == 10


def _titan_lane(lines: pl.Series, ctx: FileContext) -> ParseResult | None:
    """`_parse(lines, ctx)` of a log whose step lines are torchtitan's in the shape `_TITAN_LINE` (at least
    `_LANE_MIN` of them) while no other line holds a `_GATES` literal or an ANSI code; None otherwise.

    There the general reading makes one row of each such line and nothing else holds a row or event: the
    gates it finds are `step:` and `loss:`, which run the torchtitan grammar alone, on those lines alone
    (they are canonical: `_titan_values` reads their tokens); each fragment is a row of its own (one
    grammar, all anchors), whose stream is its `[rankN]:` envelope's rank (no host: the key `|N`; without
    an envelope no rank, the key `|`, unless a Composer banner gives one: then None) and whose own time is
    its `[titan]` date-time (`_TS_CANON`, `local_assumed_utc`); rows with a time inherit none, and step
    times are the timestamp deltas between consecutive rows of a rank (`_times`).

    The other lines are read by `_parse` with their own line numbers: what it understands of them
    (timestamped chatter, warnings, noise) does not depend on the step lines, which no rule spanning lines
    takes (a warning's source line is the next line, indented under its envelope). Its rows must be none
    (else None: the general reading of the whole decides). A step line whose date does not parse, whose rank
    or step is out of range or whose number reads infinite also sends the whole to the general reading.
    """
    text = lines.cast(pl.String)
    # (one line in 31 looked at first: a log with thousands of step lines has some there, unless they repeat
    # with a period that is a multiple of 31 lines; other logs pay that small scan, not one of every line; a
    # log whose step lines all miss the sample is read in full)
    if not text.gather_every(31).str.contains(_TITAN_LINE_LIT, literal=True).any():
        return None
    cand = text.str.contains(_TITAN_LINE_LIT, literal=True).fill_null(False)
    if int(cand.sum()) < _LANE_MIN:
        return None
    at = cand.arg_true()
    cand_text = text if at.len() == text.len() else text.gather(at)  # (every line a candidate: no gather)
    numbers = lambda at: pl.lit(at).cast(pl.Int64, strict=False) + ctx.first_line  # noqa: E731
    got = _titan_scanned(cand_text, numbers(at), None)  # (every candidate of the shape: their values)
    if got is None:
        m, miss = _titan_matches(cand_text)
        n_miss = int(miss.sum())
        if at.len() - n_miss < _LANE_MIN:
            return None
        if n_miss:  # (candidates of another shape: other lines)
            cand = cand.scatter(at.filter(miss), False)
            at, m = at.filter(~miss), m.filter(~miss)
    others = (~cand).arg_true()
    if others.len():
        rest_text = text.gather(others)
        bad = rest_text.str.contains_any([*_GATES, "\x1b"]) | rest_text.str.contains(_rx(g.ANSI_PASTED_RE))
        if bad.any():
            return None
    if got is None:
        got = _titan_groups(m, numbers(at), None)
        if got is None:
            return None
    v, one, bare = got
    steps = _titan_steps(v, one, None, ctx.path, ctx.node)
    if bare and others.len() and rest_text.str.contains("global rank", literal=True).any():
        return None  # (a line without an envelope takes the rank of a Composer banner above it)
    rest = None
    if others.len():
        rest = _parse(rest_text, ctx, numbers=others.cast(pl.Int64, strict=False) + ctx.first_line)
        if rest.tables["steps"].height or "events" in rest.tables:
            return None
    n_fast = at.len()
    return ParseResult(
        tables={"steps": steps},
        parsed=n_fast + (rest.parsed if rest else 0),
        unrecognized=rest.unrecognized if rest else 0,
        unrecognized_examples=rest.unrecognized_examples if rest else [],
        notes=rest.notes if rest else [],
        partial=_cut_last_line(pl.DataFrame({"text": text})),
        node=rest.node if rest else None,
    )


def _titan_matches(text: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The `_TITAN_LINE` groups of each line of `text` (`_TITAN_BARE`'s where it has no envelope), and which
    lines neither matches (their groups null)."""
    m = text.str.extract_groups(_rx(_TITAN_LINE))
    miss = m.struct.field("2").is_null()
    if miss.any():  # (no envelope: lines with one fail that regex at their second character)
        bare = text.str.extract_groups(_rx(_TITAN_BARE))
        m = pl.select(pl.when(miss).then(pl.lit(bare)).otherwise(pl.lit(m))).to_series()
        miss = m.struct.field("2").is_null()
    return m, miss


_TitanValues = tuple[pl.DataFrame, bool, bool]


def _titan_groups(m: pl.Series, line: pl.Expr, fi: pl.Series | None) -> _TitanValues | None:
    """The values of torchtitan step lines from their `_TITAN_LINE` groups `m` (the lines' numbers `line`):
    a frame of `line`, `rank`, `_n` (the naive time), `step` and `_TITAN_FLOATS` (and `_fi` first, the file
    index `fi` of each line, for the lines of several files),
    whether the ranks are one a file (`_one_value`) and whether some line has no envelope; None where a date
    does not parse, a rank or step is out of range or a number reads infinite."""
    f = pl.col("_m").struct.field
    frame = pl.DataFrame({"_m": m}) if fi is None else pl.DataFrame({"_m": m, "_fi": fi})
    # (one rank text, or none, in each file: one stream a file, whose step times are nearly all distinct:
    # converted without polars' cache of converted strings, whose hashing and upkeep cost ~40 % of the
    # conversion there (a batch of four rank logs: 9.8 -> 6.6 ms), and whose windows below are each file's
    # rows, which lie together; the ranks of a log of several share their seconds, the cache pays there. The
    # cache only memoizes the conversion: the same values either way)
    one = _one_value(m.struct.field("1")) if fi is None else _one_value_a_file(m.struct.field("1"), fi)
    v = frame.select(
        *([] if fi is None else ["_fi"]),
        line=line,
        rank=f("1").cast(pl.Int32, strict=False),
        _n=f("2").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us", cache=not one)
        + pl.duration(microseconds=f("3").cast(pl.Int64, strict=False) * 1000),
        step=f("4").cast(pl.Int64, strict=False),
        loss=f("5").cast(pl.Float64),
        grad_norm=f("6").cast(pl.Float64),
        memory_gib=f("7").cast(pl.Float64),
        throughput=_num(f("8")),
        tflops=f("9").cast(pl.Float64),
        mfu_pct=f("10").cast(pl.Float64),
    )
    ok = v.select(
        pl.all_horizontal(pl.col("_n", "step").null_count() == 0)
        & pl.all_horizontal(pl.col(*_TITAN_FLOATS).is_infinite().any().not_())
        & (pl.col("rank").null_count() == pl.lit(m.struct.field("1").null_count(), dtype=pl.UInt32)),
        bare=pl.col("rank").is_null().any(),
    ).row(0)
    if not ok[0]:
        return None
    return v, one, bool(ok[1])


_TITAN_FLOATS = ("loss", "grad_norm", "memory_gib", "throughput", "tflops", "mfu_pct")


def _titan_scanned(text: pl.Series, line: pl.Expr, fi: pl.Series | None) -> _TitanValues | None:
    """`_titan_groups` of `text`, lines each of the shape `_TITAN_LINE` or `_TITAN_BARE`, read by the
    compiled scanner (`parsers._fastscan.titan`: the regexes' language, the casts' values; the tests hold
    it to `_titan_groups`); None where it is not built, or stops at a line: one of another shape, or whose
    value it does not convert (a date that does not exist, a number beyond its exact range), for the regex
    path to decide."""
    got = _scan("titan", text, 6, len(_TITAN_FLOATS))
    if got is None:
        return None
    ints, floats = got
    n = text.len()
    cols = {"_ts": ints[:n], "step": ints[n : 2 * n], "_rank": ints[2 * n : 3 * n]}
    cols |= {name: floats[k * n : (k + 1) * n] for k, name in enumerate(_TITAN_FLOATS)}
    frame = pl.DataFrame(cols) if fi is None else pl.DataFrame(cols).with_columns(_fi=fi)
    v = frame.select(
        *([] if fi is None else ["_fi"]),
        line=line,
        rank=pl.when(pl.col("_rank") >= 0).then(pl.col("_rank").cast(pl.Int32)),
        _n=pl.col("_ts").cast(pl.Datetime("us")),
        step=pl.col("step"),
        loss=pl.col("loss"),
        grad_norm=pl.col("grad_norm").fill_nan(None),  # (NaN: no `grad_norm:`; the scanner reads no `nan`)
        memory_gib=pl.col("memory_gib"),
        throughput=pl.col("throughput"),
        tflops=pl.col("tflops"),
        mfu_pct=pl.col("mfu_pct"),
    )
    detail = _titan_detail_scanned(ints[3 * n :], n)
    if detail is not None:
        v = v.with_columns(detail.alias(_DETAIL))
    rank = v.get_column("rank")
    one = _one_value(rank) if fi is None else _one_value_a_file(rank, fi)
    return v, one, rank.null_count() > 0


_DETAIL_FIELDS = ("grad_norm", "mfu_pct", "memory_gib")
"""The fields of a torchtitan step's `detail` object, in its order."""
_DETAIL = "_detail"
"""The column of `_titan_scanned`'s values holding each step's `detail`, where the compiled module wrote
it."""


def _titan_detail_scanned(digits: Any, n: int) -> pl.Series | None:
    """The `detail` objects of n torchtitan steps (`_titan_steps`: `struct.json_encode` of grad_norm, mfu_pct
    and memory_gib) written by the compiled module from the digits the scanner read (`digits`: each field's
    `m * 32 + k` for m / 10^k, in `_DETAIL_FIELDS` order) into a string column polars takes as it is,
    ~1.7 -> ~0.6 ms a rank log of 12k steps. None where a step has no grad_norm or a value has more than 15
    significant digits or needs an exponent (`parsers._fastscan.json_objects`: then polars encodes them)."""
    write = compiled("json_objects")
    if write is None:
        return None
    got = write([f.encode() for f in _DETAIL_FIELDS], digits, n)
    return None if got is None else pl.Series(ArrowCapsules(got)).alias("detail")


def _titan_steps(
    v: pl.DataFrame, one: bool, fi: pl.Series | None, path: str | pl.Series, node: str | None | pl.Series
) -> pl.DataFrame:
    """The `steps` rows (conformed) of torchtitan step lines from their values `v` (`_titan_groups`: `one`,
    whether the ranks are one a file). `fi`: for lines of several files, each line's file index (`path`,
    `node`: per file then), the streams being the ranks of each file."""
    # step times: timestamp deltas between a rank's consecutive rows (in line order within each rank)
    d_ts = (pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6
    d_step = pl.col("step") - pl.col("step").shift(1)
    if not one:
        grp = "rank" if fi is None else ["_fi", "rank"]
        d_ts, d_step = d_ts.over(grp), d_step.over(grp)
    elif fi is not None:  # (a file's rows, which lie together, are its one window: the row above in the file)
        same = pl.col("_fi") == pl.col("_fi").shift(1)
        d_ts, d_step = pl.when(same).then(d_ts), pl.when(same).then(d_step)
    v = v.with_columns(ts=pl.col("_n").dt.replace_time_zone("UTC")).with_columns(_dts=d_ts, _dst=d_step)
    from_ts = pl.when((pl.col("_dst") > 0) & (pl.col("_dts") > 0)).then(pl.col("_dts") / pl.col("_dst"))
    # (`_step_detail`: the object of the set fields, encoded once per pattern of set fields, here one or two)
    detail_fields = {c: pl.col(c) for c in _DETAIL_FIELDS}
    if _DETAIL in v.columns:  # (written by the compiled module: `_titan_detail_scanned`)
        detail = v.get_column(_DETAIL)
    elif v.get_column("grad_norm").null_count() == 0:
        detail = v.select(pl.struct(**detail_fields).struct.json_encode()).to_series()
    else:
        detail = _encode_by_null_pattern(v, detail_fields).get_column("_enc")
    null_f, null_s = pl.lit(None, dtype=pl.Float64), pl.lit(None, dtype=pl.String)
    if fi is None:
        file_e, node_e = pl.lit(path, dtype=pl.String), pl.lit(node, dtype=pl.String)
    else:
        file_e, node_e = pl.lit(path).gather(pl.col("_fi")), pl.lit(node).gather(pl.col("_fi"))
    steps = v.select(
        "ts",
        ts_quality=pl.lit("local_assumed_utc"),
        node=node_e,
        rank=pl.col("rank"),
        step=pl.col("step"),
        step_time_s=from_ts,
        step_time_source=pl.when(from_ts.is_not_null()).then(pl.lit("ts_delta")),
        forward_s=null_f,
        backward_s=null_f,
        optimizer_s=null_f,
        comm_wait_s=null_f,
        data_s=null_f,
        throughput=pl.col("throughput"),
        throughput_unit=pl.lit("tokens/s/GPU"),
        tflops=pl.col("tflops"),
        loss=pl.col("loss"),
        phase_spread_s=null_f,
        phase_spread_name=null_s,
        framework=pl.lit("torchtitan"),
        detail=detail,
        file=file_e,
        line=pl.col("line"),
    )
    return conform(steps, "steps")


def _one_value(col: pl.Series) -> bool:
    """Whether `col` holds one value, or only nulls (min and max: cheaper than counting distinct values; a
    sample holding another value than the first settles it sooner: the ranks of a log of several alternate)."""
    nulls = col.null_count()
    if nulls:
        return nulls == col.len()
    return bool((col.gather_every(61) == col[0]).all()) and col.min() == col.max()


def _one_value_a_file(col: pl.Series, fi: pl.Series) -> bool:
    """Whether each file's rows of `col` hold one value, or only nulls (`fi`: each row's file index, a file's
    rows together): no row differs from the row above it in the same file (null and a value differ)."""
    return not pl.select(
        (pl.lit(col).ne_missing(pl.lit(col).shift(1)) & (pl.lit(fi) == pl.lit(fi).shift(1))).any()
    ).item()


def _titan_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult] | None:
    """`[parse(lines, ctx) for lines, ctx in items]` when every line of every file is a torchtitan step line
    of the shape `_TITAN_LINE` (`_titan_lane` of each file, which there has no other line: one row a line,
    read off one pass of the compiled scanner, or one regex capture, over all the files' lines); None
    otherwise (or where `_titan_groups` hands a line back)."""
    sizes = [len(lines) for lines, _ in items]
    if not all(sizes):
        return None
    text = pl.concat([lines.cast(pl.String) for lines, _ in items], rechunk=True)
    k = len(items)
    spans = pl.DataFrame(
        {"s": [ctx.first_line for _, ctx in items], "n": sizes, "fi": range(k)},
        schema={"s": pl.Int64, "n": pl.Int64, "fi": pl.Int32},
    ).select(
        line=pl.int_ranges("s", pl.col("s") + pl.col("n"), dtype=pl.Int64),
        fi=pl.col("fi").repeat_by("n"),
    )
    line, fi = pl.lit(spans.get_column("line").explode()), spans.get_column("fi").explode()
    got = _titan_scanned(text, line, fi)
    if got is None:
        m, miss = _titan_matches(text)
        if miss.any():
            return None
        got = _titan_groups(m, line, fi)
        if got is None:
            return None
    v, one, _ = got
    steps = _titan_steps(
        v,
        one,
        fi,
        pl.Series([ctx.path for _, ctx in items], dtype=pl.String),
        pl.Series([ctx.node for _, ctx in items], dtype=pl.String),
    )
    ends = list(itertools.accumulate(sizes))
    lasts = text.gather([e - 1 for e in ends]).to_list()
    return [
        ParseResult(
            tables={"steps": steps.slice(end - n, n)},
            parsed=n,
            unrecognized=0,
            partial=_cut_text(last),
        )
        for n, end, last in zip(sizes, ends, lasts, strict=True)
    ]


# ----------------------------------------------------------------------------- DeepSpeed timer-only logs

ORPHAN_TIMERS_NOTE = (
    "one-line timer lines (`time (ms) | ...`, e.g. a rank's DeepSpeed wall_clock_breakdown) with no step "
    "line above them in their stream: understood, but with no step number they make no steps rows"
)
"""The note of a file whose understood lines hold timer lines and which gives no `steps` row: its timers are
all orphans (`_rows_gathered`), which the general reading leaves out."""
_DS_TIMER_LINE = (
    r"^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}\] \[INFO\] "
    r"\[logging\.py:[0-9]+:log_dist\] "
    rf"\[Rank [0-9]+\] time \(ms\) \| [a-z_]+: {_D}(?: \| [a-z_]+: {_D})*$"
)
"""A DeepSpeed `wall_clock_breakdown` line as `log_dist` prints it (`[Rank N] time (ms) | fwd: 5172.40 |
...`): a rank's own timers, with no step number."""
_DS_TIMER_LIT = ":log_dist] [Rank "
_DS_OTHER_GATES = [x for x in _GATES if x not in ("time (ms)", "step:")]


def _timer_only(text: pl.Series) -> bool:
    """Whether every line of `text` is a `_DS_TIMER_LINE` that holds no literal gating a grammar other than
    the timers' (`time (ms)`) and the torchtitan one's `step:` (whose grammar needs `loss:` too): a log of one
    or more ranks' timers and nothing else (`torchrun --tee` or a per-rank redirect of a job run with
    `wall_clock_breakdown`). There the general reading understands every line and makes no row (every timer
    line is an orphan: no step line above it in its stream), so `_timer_only_result` gives its result."""
    n = text.len()
    if n == 0 or text.null_count() or _DS_TIMER_LIT not in text[0] or _DS_TIMER_LIT not in text[n - 1]:
        return False
    return bool(_timer_only_lines(text).all())


def _timer_only_lines(text: pl.Series) -> pl.Series:
    """Per line of `text`: whether it is a line `_timer_only` takes (false for a null line)."""
    got = _timer_only_scanned(text)
    if got is not None:
        return got
    ok = text.str.contains(_rx(_DS_TIMER_LINE)).fill_null(False)
    return ok & ~text.str.contains_any(_DS_OTHER_GATES).fill_null(True)


_DS_TIMER_HEAD = "[0-0-0 0:0:0,0] [INFO] [logging.py:0:log_dist] [Rank 0] time (ms) | "
"""A `_DS_TIMER_LINE`'s text up to its timers with each run of digits as one `0` (the same for every such
line): before the shape `parsers._fastscan.ds_timers` gives of the rest, what a line holds besides its
digits."""


def _timer_only_scanned(text: pl.Series) -> pl.Series | None:
    """`_timer_only_lines(text)` by the compiled scanner (`parsers._fastscan.ds_timers`), ~10x faster than the
    regex and the gates' search (1,000 DeepSpeed rank logs of 7.3 M timer lines: ~6 s of the workers' CPU):
    the lines of `_DS_TIMER_LINE`, numbered by their shape (their text with each run of digits as one `0`),
    and the gates looked for in each shape once. A gate holds no digit, so it is in a line exactly where it is
    in the line's shape: an occurrence lies between two runs of digits, which the shape keeps as they are.
    None where the scanner is not built, a gate holds a digit, a line is null, or there are too many shapes."""
    scan = compiled("ds_timers")
    n = text.len()
    if scan is None or n == 0 or text.null_count() or any(c in "0123456789" for g in _DS_OTHER_GATES for c in g):
        return None
    import numpy as np  # (here: a worker that reads no timer-only log never imports it)

    at = np.empty(n, dtype=np.int64)
    shapes = scan(text.__arrow_c_stream__(), n, at)
    if shapes is None:
        return None
    texts = [_DS_TIMER_HEAD + s.decode() for s in shapes]
    free = [False] + [not any(g in t for g in _DS_OTHER_GATES) for t in texts]
    return pl.Series(np.array(free, dtype=bool)[at])


def _timer_only_result(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """`parse(lines, ctx)` of lines that are `_timer_only`: every line understood, no row, the note."""
    return ParseResult(
        tables={"steps": conform(pl.DataFrame(schema=_EMPTY_STEPS), "steps")},
        parsed=len(lines),
        unrecognized=0,
        notes=[ORPHAN_TIMERS_NOTE],
        partial=_cut_text(str(lines[len(lines) - 1])),
    )


def _timer_only_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`parse_many(items)` where some file starts with a DeepSpeed timer line: those that are `_timer_only`
    (one pass over the lines of the files that start so) by `_timer_only_result`, the others by
    `_parse_many`."""
    cand = [i for i, (lines, _) in enumerate(items) if len(lines) and _DS_TIMER_LIT in (lines[0] or "")]
    ok = _timer_only_lines(pl.concat([items[i][0].cast(pl.String) for i in cand], rechunk=True))
    out: list[ParseResult | None] = [None] * len(items)
    end = 0
    for i in cand:
        lines, ctx = items[i]
        start, end = end, end + len(lines)
        if ok.slice(start, end - start).all():
            out[i] = _timer_only_result(lines, ctx)
    rest = [i for i, r in enumerate(out) if r is None]
    if rest:
        for i, r in zip(rest, _parse_many([items[i] for i in rest]), strict=True):
            out[i] = r
    return out  # type: ignore[return-value]


# ----------------------------------------------------------------------------- Megatron lane

_SRUN_OPT = r"(?:\s*([0-9]{1,9}): )?"
"""An `srun -l` envelope or none (its group: the srun rank, null without one). A lane-shaped line without
the envelope is in the stream without one (`|`), which the lane calls rank `_NO_SRUN`."""
_NO_SRUN = -1
"""The rank the lane gives the lines of the stream without envelope (a Megatron job's output without `srun
-l`: its last rank prints the iteration lines and timer blocks, unprefixed); its rows get rank null and key
`|`."""
_MEG_I = (
    rf"^{_SRUN_OPT}( *(?:\[([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}} [0-9]{{2}}:[0-9]{{2}}:[0-5][0-9])\] )?"
    r"iteration +([0-9]{1,18})/ *([0-9]{1,18}) \|[^\r\x1b\[]*)$"
)
"""A Megatron iteration line with or without `srun -l` of the shape the lane takes: srun rank (null without
the envelope), the text after the envelope, date-time (null on the lines of Megatron before mid-2023, which
print none: such a row takes the time of a dated line right above it, as `_times` says, or none), step,
total (the values: `_megatron_frag` on that text, as the general reading)."""
_MEG_I_LIT = "iteration "
_MEG_I_HEAD = (
    rf"^({_SRUN_OPT}) *(?:\[([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}} [0-9]{{2}}:[0-9]{{2}}:[0-5][0-9])\] )?"
    r"iteration +([0-9]{1,18})/ *([0-9]{1,18}) $"
)
"""`_MEG_I` before the first `|` of the line (the envelope, empty without one, then srun rank, date-time or
null, step, total)."""
_MEG_H_LIT = "(min, max) time across ranks (ms):"
_MEG_H = rf"^({_SRUN_OPT})\(min, max\) time across ranks \(ms\):$"
"""A timer block's header: the envelope (empty without one), the srun rank."""
_MEG_E_LIT = ".: ("
_MEG_E = rf"^{_SRUN_OPT} +([A-Za-z0-9_][A-Za-z0-9_/-]*) \.\.+: \(({_D}), ({_D})\)$"
"""A (min, max) timer entry of the lane: srun rank (null without the envelope), name (no blank, dot, `:` or
`(`: the `TIMER_MINMAX_RE` name of the line), min, max. (Its dots hold `..`, a `g.TRIAGE_LITERALS` one, as
the iteration line holds a date and the header ends with `:`: the general reading keeps them in their
stream.)"""
_SRUN = r"^\s*[0-9]{1,9}: "
_MEG_MEMORY = (
    rf"^{_SRUN_OPT}\[Rank [0-9]{{1,9}}\] \(after [0-9]{{1,18}} iterations\) memory \(MB\)"
    r"(?: \| (?:max )?(?:allocated|reserved): [0-9]+(?:\.[0-9]+)?)+$"
)
"""Megatron's memory report (`report_memory`: `[Rank N] (after N iterations) memory (MB) | allocated: X | max
allocated: Y | reserved: Z | max reserved: W`), printed by a rank of each pipeline stage after the first
iterations: without srun envelope it lands in the unit stream, between an iteration line and its block. It
holds a gate literal (`iteration`) but makes no fragment, so it may lie near an iteration line."""
_MEG_QUIET = "|".join(
    f"(?:{p})"
    for p in (
        _MEG_MEMORY,
        # the validation (or test) report, between two rules of dashes: ` validation loss at iteration 1000 |
        # lm loss value: 6.439325E+00 | lm loss PPL: 6.259840E+02 | ` (from 2023 on: `... at iteration 100 on
        # validation set | ...`)
        rf"^{_SRUN_OPT} *(?:validation|test) loss at iteration [0-9]{{1,18}}(?: on [a-z]+ set)? \|"
        rf"(?: [A-Za-z][A-Za-z0-9_ -]{{0,39}} (?:value|PPL): {_D}(?:E[+-][0-9]{{1,3}})? \|)+ ?$",
        # `save_checkpoint`'s line (a path without blank or `|`; since 2024 with its format)
        rf"^{_SRUN_OPT} *(?:saving|successfully saved) checkpoint (?:at|from) iteration +[0-9]{{1,18}} to [^\s|]+"
        r"(?: in [a-z_]+ format)?(?: \[ t [0-9]+/[0-9]+, p [0-9]+/[0-9]+ \])? *$",
    )
)
"""Lines of a Megatron log that hold the gate literal `iteration` and make no fragment in the general reading
(the Megatron iteration grammar wants `iteration N/ M |`; the other grammars a gate of their own): the memory
report (`_MEG_MEMORY`), the validation report and the save-checkpoint line, which Megatron prints within
`ATTACH_GAP` lines of an iteration line where no timer block keeps them apart. The lane takes them near a
unit when they hold `iteration` once and no other gate (`_quiet`)."""
_GATES_BUT_ITERATION = [x for x in _GATES if x != "iteration"]
_PYLOG_ANYWHERE = g.PYLOG_PREFIX_RE.removeprefix("^")
"""`g.PYLOG_PREFIX_RE` anywhere in a line (after its envelopes too): the lines to look at more closely."""
_MEG_MIN = 4096
"""The fewest lines of a chunk whose timer entries `meg_entry_lines` reads for the lane (its own bound, not
`_LANE_MIN`, which tests set to 0: the lane works on the big frames the general reading computes with its
split lanes)."""
_MEG_UNITS = 256
"""The fewest units `_megatron_lane` takes: a 1 MB log of Megatron before mid-2023 (no date on its iteration
lines, `--log-interval 100`) holds ~1,300. Below it the general reading costs little more than the lane."""
_BLOCK_ENTRY = "|".join(
    "(?:" + re.sub(r"\(\?P<\w+>", "(?:", p) + ")"
    for p in (g.TIMER_MINMAX_RE, g.COMPOSER_ENTRY_RE, g.NVRX_SUB_RE, g.NVRX_RANK_RE)
) + f"|{_TIMER_OTHER}"
"""An entry line of any block kind (timers, composer, NVRx): one right after a unit in its stream would
continue a block there in the general reading (the unit's last line ends it: `_block_fragments`)."""


_MEG_E_HEAD = rf"^{_SRUN_OPT} +([A-Za-z0-9_][A-Za-z0-9_/-]*) \.\.+$"
_MEG_E_TAIL = rf"^({_D}), ({_D})\)$"
"""`_MEG_E` cut at its first `: (`: the part before (srun rank, name) and the part after (min, max)."""


def _meg_cut(
    text: pl.Series, at: pl.Series | None = None, with_tail: bool = True
) -> tuple[pl.Series, pl.Series | None]:
    """`text.str.splitn(": (", 2)`'s two fields (the text before the first `: (`, the text after it; null
    after where there is none). On ASCII lines (`_ascii`) with `: (` in each, by its byte offset (then its
    character offset): one slice each side at the usual offset (Megatron pads the names with dots to one
    width), each other line by its own (a split builds both parts as new strings: ~4x the cost; slices at
    offsets of a column ~3x). `at`: those offsets where the caller has them (`_meg_scanned`: ASCII lines);
    `with_tail` False: the part before only (the second None)."""
    if _ascii and text.len():
        if at is None:
            at = text.str.find(": (", literal=True)
        if not at.null_count():
            p = int(at.gather_every(64).mode()[0])
            head, tail = text.str.head(p), text.str.slice(p + 3) if with_tail else None
            other = (at != p).arg_true()
            if other.len() * 16 <= text.len():
                if other.len():
                    f = pl.DataFrame({"t": text.gather(other), "a": at.gather(other)}).select(
                        h=pl.col("t").str.head(pl.col("a")), r=pl.col("t").str.slice(pl.col("a") + 3)
                    )
                    head = head.scatter(other, f.get_column("h"))
                    if tail is not None:
                        tail = tail.scatter(other, f.get_column("r"))
                return head, tail
    cut = pl.DataFrame({"_p": text.str.splitn(": (", 2)}).unnest("_p")
    return cut.get_column("field_0"), cut.get_column("field_1") if with_tail else None


def _meg_scanned(text: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series] | None:
    """For ASCII lines (`_ascii`) each holding `: (`, read by the compiled scanner (`parsers._fastscan.
    meg_entries`): the offset of each line's first `: (`, whether the part after it is `_MEG_E_TAIL`, and its
    groups as Float64 (NaN where it is not); None where the scanner is not built or stops at a line (one
    without `: (`, or a number beyond its exact range: `_meg_entries_heads`' regex path decides)."""
    got = _scan("meg_entries", text, 2, 2) if _ascii else None
    if got is None:
        return None
    ints, floats = got
    n = text.len()
    at = pl.Series("at", ints[:n]).cast(pl.UInt32)
    return at, pl.Series("ok", ints[n:]).cast(pl.Boolean), pl.Series(floats[:n]), pl.Series(floats[n:])


def _meg_entries(text: pl.Series) -> pl.DataFrame:
    """The groups of `_MEG_E` on each line of `text` (`_meg_entries_heads`' first part)."""
    return _meg_entries_heads(text)[0]


def _meg_entries_heads(text: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """The groups of `_MEG_E` on each line of `text` (columns `rank` Int32, `name`, `min_ms`, `max_ms`
    Float64, all null where it does not match), as `text.str.extract_groups(_MEG_E)` and the casts, but for
    `rank` `_NO_SRUN` on a line without srun envelope that matches.

    A line `_MEG_E` matches holds `: (` first right after the dots (the blanks after the srun rank's `:` and
    the name hold none), so it is the part before its first `: (` matching `_MEG_E_HEAD`, then `: (`, then
    the part after matching `_MEG_E_TAIL`, and conversely; the groups are the same. The parts before are a
    few distinct texts (rank and name, padded), which the regex reads once each (each line then takes its
    text's values by the text's number in an Enum of them, where none is null: a join costs more); the
    parts after are short. Second: the distinct parts before `: (` that `_MEG_E_HEAD` matches (those of
    the lines `_MEG_E` matches and maybe more).
    """
    scan = _meg_scanned(text)
    head, tail = _meg_cut(text, None if scan is None else scan[0], with_tail=scan is None)
    uniq = head.unique()
    heads = pl.DataFrame({"h": uniq}).with_columns(m=pl.col("h").str.extract_groups(_rx(_MEG_E_HEAD)))
    # (a line without srun envelope: rank `_NO_SRUN`, so that a rank is there where the line matches)
    heads = heads.select(
        "h",
        rank=pl.when(pl.col("m").struct.field("2").is_not_null()).then(
            pl.col("m").struct.field("1").cast(pl.Int32, strict=False).fill_null(_NO_SRUN)
        ),
        name=pl.col("m").struct.field("2"),
    )
    if head.null_count() or not head.len():
        hv = pl.DataFrame({"h": head}).join(heads, on="h", how="left", maintain_order="left")
    else:
        code = head.cast(pl.Enum(uniq)).to_physical()
        hv = heads.select("rank", "name")[code]
    if scan is None:
        tv = tail.str.extract_groups(_rx(_MEG_E_TAIL))  # type: ignore[union-attr]
        hit = tv.struct.field("1").is_not_null()
        mn, mx = tv.struct.field("1").cast(pl.Float64), tv.struct.field("2").cast(pl.Float64)
    else:
        _at, hit, mn, mx = scan
    ok = hv.get_column("rank").is_not_null() & hit
    out = pl.DataFrame({"rank": hv.get_column("rank"), "name": hv.get_column("name"), "mn": mn, "mx": mx})
    matched = heads.filter(pl.col("rank").is_not_null()).get_column("h")
    if ok.all():  # (the usual case: no value to blank)
        return out.select("rank", "name", min_ms="mn", max_ms="mx"), matched
    return out.with_columns(ok=ok).select(
        pl.when("ok").then("rank").alias("rank"),
        pl.when("ok").then("name").alias("name"),
        pl.when("ok").then("mn").alias("min_ms"),
        pl.when("ok").then("mx").alias("max_ms"),
    ), matched


class MegEntries(NamedTuple):
    """The Megatron lane's `(min, max)` timer entries of a chunk's lines (`meg_entry_lines`)."""

    at: pl.Series
    """The lines (ascending numbers from 0) that `_MEG_E` matches."""
    groups: pl.DataFrame
    """Their groups (`_meg_entries`: `rank`, `name`, `min_ms`, `max_ms`), in that order."""
    heads: pl.Series
    """The distinct texts before `: (` of those lines (and maybe more: `_meg_entries_heads`)."""

    def without(self, blanked: pl.Series) -> MegEntries:
        """The entries of the lines not `blanked` (a Boolean per line, no null: lines blanked since)."""
        keep = ~blanked.gather(self.at)
        if keep.all():
            return self
        return MegEntries(self.at.filter(keep), self.groups.filter(keep), self.heads)


def meg_entry_lines(lines: pl.Series) -> MegEntries | None:
    """The timer entries `_megatron_lane` reads (`_MEG_E`'s lines and groups) when `lines` may be a chunk it
    takes (the lane's first test: a sample holds a `(min, max) time across ranks` header); else None.
    Made once where the caller reads the lines for something else first (`_mixed`: the NCCL lines' scans
    leave these lines out), handed to `parse`. Run inside the lines' `ascii_scope`."""
    text = lines.cast(pl.String)
    if text.len() < _MEG_MIN or not text.gather_every(31).str.contains(_MEG_H_LIT, literal=True).any():
        return None
    return _lane_entries(text)


def _lane_entries(text: pl.Series, hit: pl.Series | None = None) -> MegEntries:
    """`meg_entry_lines` of the String lines `text`, without the test (`hit`: which lines hold `_MEG_E_LIT`,
    when the caller found them)."""
    ce = (text.str.contains(_MEG_E_LIT, literal=True) if hit is None else hit).arg_true()
    me, heads = _meg_entries_heads(text.gather(ce))
    ok_e = me.get_column("rank").is_not_null()
    if not ok_e.null_count() and ok_e.all():  # (every line holding the literal an entry: nothing to leave out)
        return MegEntries(ce, me, heads)
    return MegEntries(ce.filter(ok_e), me.filter(ok_e), heads)


def _meg_iterations(text: pl.Series) -> pl.Series:
    """`text.str.extract_groups(_MEG_I)`: the line cut at its first `|`, the part before matching
    `_MEG_I_HEAD` and the part after holding no carriage return, escape or `[` (a line `_MEG_I` matches has
    its first `|` right after the total and its blank; the groups are the same, group 2 the line after the
    envelope `_MEG_I_HEAD`'s first group takes). The capture reads the short part before only."""
    cut = pl.DataFrame({"_p": text.str.splitn("|", 2)}).unnest("_p")
    head = cut.get_column("field_0").str.extract_groups(_rx(_MEG_I_HEAD))
    tail = cut.get_column("field_1")
    ok = head.struct.field("1").is_not_null() & ~tail.str.contains_any(["\r", "\x1b", "["])
    f = pl.DataFrame({"t": text, "h": head, "ok": ok.fill_null(False)})
    h = pl.col("h").struct.field
    ok_e = pl.col("ok")
    if f.get_column("ok").all():  # (every line takes the shape: no group to blank)
        return f.select(
            pl.struct(
                h("2").alias("1"),
                pl.col("t").str.slice(h("1").str.len_chars()).alias("2"),
                h("3").alias("3"),
                h("4").alias("4"),
                h("5").alias("5"),
            ).alias(text.name)
        ).to_series()
    return f.select(
        pl.struct(
            pl.when(ok_e).then(h("2")).alias("1"),
            pl.when(ok_e).then(pl.col("t").str.slice(h("1").str.len_chars())).alias("2"),
            pl.when(ok_e).then(h("3")).alias("3"),
            pl.when(ok_e).then(h("4")).alias("4"),
            pl.when(ok_e).then(h("5")).alias("5"),
        ).alias(text.name)
    ).to_series()


def _unit_entries(em: pl.DataFrame, ce: pl.Series, pos: pl.Series, n: int) -> pl.DataFrame:
    """The rows of `em` (one per line of `ce`, the lane-shaped entry lines, ascending) at the lines `pos` (a
    subset of `ce`, ascending), in order. Usually `pos` is one run of `ce` (the entries outside a unit are
    those of a block cut at the start or the end of the lines): a slice; else a mask over the lines read at
    the entries (a search costs 5x more)."""
    if pos.len():
        at = int(ce.search_sorted(pos[0]))
        run = ce.slice(at, pos.len())
        if run.len() == pos.len() and (run.cast(pl.Int64) == pos.cast(pl.Int64)).all():
            return em.slice(at, pos.len())
    return em.filter(_false(n).scatter(pos, True).gather(ce))


def _timer_lists(tm: pl.DataFrame) -> pl.DataFrame:
    """`tm.group_by("k", maintain_order=True).agg(timers="_t")` (`k` Int64 without nulls, `_t` a timer):
    where `k` is ascending and every unit holds as many entries (k0 repeated m times, then k0+1 m times,
    ...), the timers cut into lists of m by a reshape instead of a grouping."""
    k = tm.get_column("k")
    h = tm.height
    if h and not k.null_count() and k.is_sorted():
        k0 = int(k[0])
        m = int(k.search_sorted(k0, side="right"))
        if h % m == 0 and (k == pl.int_range(h, dtype=pl.Int64, eager=True) // m + k0).all():
            t = tm.get_column("_t")
            return pl.DataFrame(
                {
                    "k": pl.int_range(k0, k0 + h // m, dtype=pl.Int64, eager=True),
                    "timers": t.reshape((h // m, m)).cast(pl.List(t.dtype)),
                }
            )
        # (one stream: the entries in unit order; a group_by on a column flagged sorted is 3x faster)
        tm = tm.with_columns(pl.col("k").set_sorted())
    return tm.group_by("k", maintain_order=True).agg(timers="_t")


def _one_stream_units(
    typ: pl.Series,
    ci: pl.Series,
    ch: pl.Series,
    mh: pl.Series,
    ce: pl.Series,
    e_rank: pl.Series,
    others: pl.Series,
    o_rank: pl.Series,
    lane_ranks: pl.Series,
) -> tuple[pl.DataFrame, pl.Series, pl.Series, pl.Series] | None:
    """`_megatron_lane`'s framing where its units make one stream (srun rank r) of the usual shape: the unit
    lines (`pos` Int64, `t` the line type, `k` the unit; in line order), the stream's lines out of a unit
    near an iteration line and those right after a unit (`pos` each, ascending), and which entries `ce` are
    in a unit (a Boolean each); None where the shape does not hold (the lane frames the units by its general
    code then, which gives the same where it does).

    The stream: the iteration lines `ci`, the headers `ch` of rank `mh` r, the entries `ce` of rank `e_rank`
    r, the other lines `others` of stream rank `o_rank` r. The shape, from its first iteration line on:
    each iteration line's next line in the stream is a header at most `ATTACH_GAP` lines below it, an
    iteration line, another line, or none (not a header: a unit without timers);
    each header's previous one an iteration line at most `ATTACH_GAP` lines above it; each other line's next
    one an iteration line, another such line, or none. Then every iteration line makes a unit, every header
    is valid, an entry past the first iteration line follows a header with entries only between them, and
    an other line is in no unit: the units hold the lane-shaped lines from the first iteration line on,
    unit k from the (k+1)-th iteration line to the next (the general code's unit numbers, carried down).
    The stream's lines before the first iteration line are in no unit and follow no iteration line or unit.
    """
    if lane_ranks.len() != 1 or not ci.len():
        return None
    r = lane_ranks[0]
    if r is None:
        return None
    ci0 = int(ci[0])
    # (line types of the stream: the lane-shaped lines of another rank 0, the stream's other lines 4; the
    # entries before the first iteration line 0 too, the lines `f` reads coming after it)
    e_out = (e_rank != r).fill_null(True) | (ce < ci0)
    off = pl.concat([ch.filter(mh != r), ce.filter(e_out)])
    st = typ.clone().scatter(off, 0) if off.len() else typ
    own = others.filter((o_rank == r).fill_null(False))
    if own.len():
        st = st.clone().scatter(own, 4) if st is typ else st.scatter(own, 4)
    t, pos = pl.col("t"), pl.col("pos")
    f = (
        pl.DataFrame({"t": st.slice(ci0)})
        .select(pos=pl.int_range(ci0, st.len(), dtype=pl.Int64), t=t)
        .filter(t != 0)
    )
    nt, pt, gap_n, gap_p = t.shift(-1), t.shift(1), pos.shift(-1) - pos, pos - pos.shift(1)
    ok = f.select(
        ((t != 1) | ((nt == 2) & (gap_n <= ATTACH_GAP)) | (nt == 1) | (nt == 4) | nt.is_null())
        .fill_null(False)
        .all()
        & ((t != 2) | ((pt == 1) & (gap_p <= ATTACH_GAP))).fill_null(False).all()
        & ((t != 4) | (nt == 1) | (nt == 4) | nt.is_null()).fill_null(False).all()
    ).item()
    if not ok:
        return None
    f = f.with_columns(k=(t == 1).cum_sum().cast(pl.Int64) - 1)
    if not own.len():
        empty = pl.Series("pos", [], dtype=pl.Int64)
        return f, empty, empty, ~e_out
    last_i = pl.when(t == 1).then(pos).forward_fill()
    g4 = f.select(
        pos, near=(t == 4) & ((pos - last_i) <= ATTACH_GAP), after=(t == 4) & (pt != 4)
    ).filter(pl.col("near") | pl.col("after"))
    return (
        f.filter(t != 4),
        g4.filter(pl.col("near")).get_column("pos"),
        g4.filter(pl.col("after").fill_null(False)).get_column("pos"),
        ~e_out,
    )


def _quiet(text: pl.Series) -> pl.Series:
    """Whether each line is one of `_MEG_QUIET`'s, with `iteration` once and no other gate (`_GATES`)."""
    return (
        text.str.contains(_rx(_MEG_QUIET))
        & (text.str.count_matches("iteration", literal=True) == 1)
        & ~text.str.contains_any(_GATES_BUT_ITERATION)
    )


def _megatron_lane(lines: pl.Series, ctx: FileContext, entries: MegEntries | None = None) -> ParseResult | None:
    """`_parse(lines, ctx)` of a Megatron log, under `srun -l` or without it, whose iteration lines are each
    followed in their stream (srun rank; without envelope `_NO_SRUN`) by a `(min, max) time across ranks`
    block or by the next iteration line (`_MEG_I`, `_MEG_H`, `_MEG_E`; at least `_MEG_MIN` such units); None
    otherwise (the caller reads the whole by `_parse`).

    A unit is an iteration line, the next lane-shaped line of its stream a header at most `ATTACH_GAP` lines
    below it, and the run of entry lines of the stream after that (or an iteration line that the next
    iteration line of its stream follows, or that ends its stream: a unit without timers, as Megatron prints
    where no timer is logged): what the general reading makes one row of (the iteration fragment the anchor,
    the block attached to it). A line's stream is the rank of its innermost envelope (`_strip_passes` on the
    lines with one inside the srun one; one with a host is another stream; one the triage of `_prepare` leaves
    out is in the stream without envelope, whose key it takes). The values come from `_megatron_frag` (the
    general code) on the iteration lines, the timers from the entries' groups, and `_finish` does the rest.

    The other lines are read by `_parse` with their own line numbers (as `_titan_lane`); the whole goes back
    to the general reading when they hold a row, a carriage return, an ANSI code or a Composer banner, when
    a line of a unit's stream at most `ATTACH_GAP` lines below its iteration line holds a gate literal (a
    breakdown that could attach to it; but Megatron's memory report, `_MEG_MEMORY`), or when the line of its
    stream right after a unit is a timer entry (which would continue its block). `entries`:
    `meg_entry_lines(lines)` when the caller made it.
    """
    text = lines.cast(pl.String)
    if not text.gather_every(31).str.contains_any([_MEG_H_LIT, _MEG_I_LIT]).any():
        return None
    n = text.len()
    i_hit = None
    if entries is None:
        # (the share rule below, first on bounds: the lines holding the entries' and the iteration lines'
        # literals hold the entries and the iteration lines among the others, and the blank lines the others'
        # blank ones; where even those are outnumbered, the entries are not worth reading)
        e_hit = text.str.contains(_MEG_E_LIT, literal=True)
        i_hit = text.str.contains(_MEG_I_LIT, literal=True)
        n_i = int(i_hit.sum())
        if n_i < _MEG_UNITS or 2 * (int(e_hit.sum()) + n_i) + int((text.str.len_bytes() == 0).sum()) < n:
            return None
        ce, me = _lane_entries(text, e_hit)[:2]
    else:
        ce, me = entries[:2]
    # (the iteration lines and headers looked for among the other lines: an entry line holds no `]` and ends
    # with `)`; most lines are entries)
    rest = other_lines(n, ce) if ce.len() else None
    r_text = text.gather(rest) if rest is not None else text
    if i_hit is None:
        ci = r_text.str.contains(_MEG_I_LIT, literal=True).arg_true()
    else:
        ci = (i_hit.gather(rest) if rest is not None else i_hit).arg_true()
    if rest is not None:
        ci = rest.gather(ci)
    if ci.len() < _MEG_UNITS:
        return None
    # (the lane reads the other lines by the general reading, at its cost a line, and its units by captures at
    # far less, but for fixed costs: where the other lines that are not empty outnumber the lines of the units
    # (the entries, the iteration lines and headers, fewer than the lines holding their literals), reading the
    # whole generally costs less, as on a 1 MB log of iteration lines alone among setup and validation chatter)
    n_other = r_text.len() - ci.len() - int((r_text.str.len_bytes() == 0).sum())
    if ce.len() + ci.len() < n_other:
        return None
    ti = text.gather(ci)
    mi = _meg_iterations(ti)
    ok_i = mi.struct.field("4").is_not_null() & ~ti.str.contains("global rank", literal=True)
    ci, mi = ci.filter(ok_i), mi.filter(ok_i)
    i_rank = mi.struct.field("1").cast(pl.Int32, strict=False).fill_null(_NO_SRUN)
    if ci.len() < _MEG_UNITS:
        return None
    ch = r_text.str.ends_with(_MEG_H_LIT).arg_true()
    if rest is not None:
        ch = rest.gather(ch)
    mh = text.gather(ch).str.extract_groups(_rx(_MEG_H))
    ok_h = mh.struct.field("1").is_not_null()
    ch = ch.filter(ok_h)
    mh = mh.filter(ok_h).struct.field("2").cast(pl.Int32, strict=False).fill_null(_NO_SRUN)
    typ = repeated(0, n, pl.Int8)
    typ = typ.scatter(ci, 1).scatter(ch, 2).scatter(ce, 3)
    # the stream (srun rank) of each line: lane-shaped lines from their groups, the others from their envelope
    others = (typ == 0).arg_true()
    o_text = text.gather(others)
    # (the lane-shaped lines hold no carriage return or escape: their regexes do not take one)
    if o_text.str.contains_any(["\r", "\x1b", "global rank"]).any():
        return None
    if o_text.str.contains(_rx(g.ANSI_PASTED_RE)).any():
        return None
    # (the general reading cuts a collector's time off a line before its envelopes, and a Python logging
    # prefix after them: a line with the first may be in another stream than its envelope says, one with the
    # second may be a block's header or entry, neither of which the lane models)
    if o_text.str.contains(_rx(g.COLLECTOR_RE)).any():
        return None
    if o_text.str.contains(_rx(_PYLOG_ANYWHERE)).any():
        bare = o_text.str.replace(_rx(_ENV_STACK), "")
        bare = bare.filter(bare.str.contains(_rx(g.PYLOG_PREFIX_RE))).str.replace(_rx(g.PYLOG_PREFIX_RE), "")
        block = bare.str.contains(_rx(_BLOCK_ENTRY)) | bare.str.contains("across ranks", literal=True)
        if block.any():  # (a timer block's header holds `across ranks`)
            return None
    pref = o_text.str.extract(_rx(_SRUN), 0)
    content = o_text.str.slice(pref.str.len_chars().fill_null(0))
    o_rank = pref.str.strip_chars().str.strip_suffix(":").cast(pl.Int32, strict=False).fill_null(_NO_SRUN)
    lane_ranks = i_rank.unique()
    nested = content.str.contains(_rx(_ENV_RE)).arg_true()
    if nested.len():  # (the innermost envelope's rank and host make the stream key: a host, another stream)
        inner = _strip_passes(pl.DataFrame({"rest": content.gather(nested)}))
        r_in = pl.select(
            pl.when(pl.lit(inner.get_column("host")).is_null()).then(
                pl.coalesce(pl.lit(inner.get_column("env_rank")), pl.lit(o_rank.gather(nested)))
            )
        ).to_series()
        o_rank = o_rank.scatter(nested, r_in)
    # (a line the triage of `_prepare` leaves out gets blank text and key `|`, whatever its envelope: it is in
    # the stream without envelope, `_NO_SRUN`, where it may cut a block of that stream, and in no other)
    triaged = (
        o_text.str.contains_any(list(g.TRIAGE_LITERALS))
        | o_text.str.contains(_rx(g.TRIAGE_DATE_RE))
        | o_text.str.strip_chars_end().str.ends_with(":")
    )
    o_rank = pl.select(pl.when(pl.lit(triaged)).then(pl.lit(o_rank)).otherwise(_NO_SRUN)).to_series()
    framed = _one_stream_units(typ, ci, ch, mh, ce, me.get_column("rank"), others, o_rank, lane_ranks)
    if framed is None:  # (the general framing: the unit streams' lines, by windows over each stream)
        rank = repeated(None, n, pl.Int32)
        rank = rank.scatter(others, o_rank).scatter(ci, i_rank)
        rank = rank.scatter(ch, mh).scatter(ce, me.get_column("rank"))
        # lines of the unit streams, in line order: which form units
        s = (
            pl.DataFrame({"pos": pl.int_range(n, dtype=pl.Int64, eager=True), "r": rank, "t": typ})
            .filter(pl.col("r").is_in(lane_ranks.implode()))
        )
        t, pos = pl.col("t"), pl.col("pos")

        def ov(e: pl.Expr) -> pl.Expr:  # (by stream; one stream, the usual case: no window)
            return e if lane_ranks.len() == 1 else e.over("r")

        # (the next and previous lane-shaped lines of the stream: the general reading attaches a block to the
        # iteration line above it within `ATTACH_GAP` lines, whatever other lines lie between, unless one is a
        # breakdown, `near` below; without srun envelope every rank's chatter is in the unit stream)
        lt, lp = pl.when(t != 0).then(t), pl.when(t != 0).then(pos)
        s = s.with_columns(
            nt=ov(lt.shift(-1).backward_fill()),
            npos=ov(lp.shift(-1).backward_fill()),
            pt=ov(lt.shift(1).forward_fill()),
            ppos=ov(lp.shift(1).forward_fill()),
        )
        # (an iteration line that the next one of its stream follows, or that is the last lane-shaped line of
        # its stream, or whose next one is a header farther than `ATTACH_GAP` lines, whose block attaches to
        # no row, is a unit too: a row without timers)
        vi = (t == 1) & ((pl.col("nt") != 3) | pl.col("nt").is_null())
        vh = (t == 2) & (pl.col("pt") == 1) & ((pos - pl.col("ppos")) <= ATTACH_GAP)
        s = s.with_columns(vi=vi.fill_null(False), vh=vh.fill_null(False))
        head_h = ov(pl.when(t != 3).then(pl.col("vh")).forward_fill())
        s = s.with_columns(inu=pl.col("vi") | pl.col("vh") | ((t == 3) & head_h.fill_null(False)))
        # (`k`: the unit of a line, units numbered in line order of their iteration lines, over all streams:
        # the number of the unit's iteration line, then carried down its stream)
        s = s.with_columns(_u=pl.when(pl.col("vi")).then(pl.col("vi").cum_sum().cast(pl.Int64, strict=False) - 1))
        s = s.with_columns(
            last_i=ov(pl.when(pl.col("vi")).then(pos).forward_fill()),
            after_unit=(~pl.col("inu") & ov(pl.col("inu").shift(1))).fill_null(False),
            k=ov(pl.col("_u").forward_fill()),
        )
        n_units = int(s.get_column("vi").sum())
        if n_units < _MEG_UNITS:
            return None
        # the other lines of the unit streams: near an iteration line (could attach) or right after a unit
        near = s.filter(~pl.col("inu") & ((pos - pl.col("last_i")) <= ATTACH_GAP)).get_column("pos")
        after = s.filter(pl.col("after_unit")).get_column("pos")
        framed = s.select("pos", "t", "k", "inu").filter(pl.col("inu")).drop("inu"), near, after, None
    inu, near, after, e_in = framed
    if near.len():
        nt_ = text.gather(near)
        gated = nt_.str.contains_any(list(_GATES))
        if gated.any() and not _quiet(nt_.filter(gated)).all():
            return None
    if after.len():
        c = text.gather(after).str.replace(_rx(_ENV_STACK), "")
        if c.str.contains(_rx(_BLOCK_ENTRY)).any():
            return None
    i_pos = inu.filter(pl.col("t") == 1).get_column("pos")
    ent = inu.filter(pl.col("t") == 3)
    em = me.drop("rank")
    if ent.height < ce.len():  # (else the entries are all the lane-shaped ones, in the same order)
        em = em.filter(e_in) if e_in is not None else _unit_entries(em, ce, ent.get_column("pos"), n)
    tm = em.select(
        k=ent.get_column("k"),
        _t=_timer(name=pl.col("name"), min_ms=pl.col("min_ms"), max_ms=pl.col("max_ms")),
    )
    # (the general reading drops the entries of timers that time no step, `g.NON_STEP_TIMERS`, from their
    # block: a block of those alone, as the load-checkpoint one of a job started again right after a unit,
    # attaches nothing)
    step_timer = ~em.get_column("name").is_in(list(g.NON_STEP_TIMERS))
    if not step_timer.all():
        tm = tm.filter(step_timer)
    tl = _timer_lists(tm)
    # the iteration fragments, by the general code
    im = mi if i_pos.len() == ci.len() else mi.gather(ci.search_sorted(i_pos))
    base = pl.DataFrame({"m": im}).select(
        line=pl.lit(i_pos) + ctx.first_line,
        seg=pl.lit(0, dtype=pl.Int64),
        # (the stream without envelope: key `|`, rank null)
        key=pl.lit("|")
        + pl.col("m").struct.field("1").cast(pl.Int32, strict=False).cast(pl.String).fill_null(""),
        host=pl.lit(None, dtype=pl.String),
        rank=pl.col("m").struct.field("1").cast(pl.Int32, strict=False),
        ts=pl.col("m").struct.field("3").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
        .dt.replace_time_zone("UTC"),
        ts_quality=pl.when(pl.col("m").struct.field("3").is_not_null()).then(pl.lit("local_assumed_utc")),
        text=pl.col("m").struct.field("2"),
        m=pl.struct(step=pl.col("m").struct.field("4"), total=pl.col("m").struct.field("5")),
    )
    undated = int(im.struct.field("3").null_count())
    if base.get_column("ts").null_count() > undated:  # (a date that is none, as 2023-02-30)
        return None
    if undated:
        # (an iteration line without a date of its own: the general reading finds none elsewhere in it only
        # where it holds no date at all (`_prepare`'s `need`) nor an MLPerf record)
        u = base.filter(pl.col("ts").is_null()).get_column("text")
        if u.str.contains(_rx(g.TRIAGE_DATE_RE)).any() or u.str.contains(":::MLLOG", literal=True).any():
            return None
    fr = _megatron_frag(base)
    if fr.select(pl.col("step_time_s").null_count() + pl.col("step").null_count()).item():
        return None
    skip = ("line", "seg", "key", "timers", "anchor", "standalone", "attach_line")
    value_cols = [c for c in _FRAG if c not in skip]
    fr = fr.drop("timers").with_columns(k=pl.int_range(fr.height, dtype=pl.Int64))
    if tl.height == fr.height and tl.get_column("k").equals(fr.get_column("k")):  # (every unit has timers)
        fr = fr.with_columns(timers=tl.get_column("timers"))
    else:
        fr = fr.join(tl, on="k", how="left", maintain_order="left")
    rows = fr.select(
        pl.int_range(1, fr.height + 1, dtype=pl.UInt32).alias("group"),
        "line",
        "key",
        *[c for c in value_cols if c != "rank"],
        orphan_group=pl.lit(False),
        rank=pl.col("rank"),
        timers=pl.col("timers").fill_null(pl.lit([], dtype=pl.List(_TIMER))),
    )
    if lane_ranks.len() > 1:  # (one stream: one key, the rows in line order already)
        rows = rows.sort("key", "line", maintain_order=True)
    # the other lines
    lane_pos = inu.get_column("pos").sort()
    # (blank lines, which count as neither, left out when every other line without an srun envelope is
    # blank too and that stream holds no unit: then they alone make the stream without envelope, `|`, and no
    # rule takes them; `_mixed` blanks the lines it gives another parser, most of the others in a log with
    # NCCL lines. Where units are in that stream, a blank line there cuts a block)
    blank = ~o_text.str.contains(_rx(r"\S"))
    drop = (
        bool(blank.any())
        and not bool((pref.is_null() & ~blank).any())
        and not bool((lane_ranks == _NO_SRUN).any())
    )
    rest_pos = (others.filter(~blank) if drop else others).cast(pl.Int64, strict=False)
    if others.len() + lane_pos.len() != n:  # (lane-shaped lines outside a unit: read with the others)
        outside = (typ.clone().scatter(lane_pos, 0) != 0).arg_true().cast(pl.Int64, strict=False)
        rest_pos = pl.concat([rest_pos, outside]).sort()
    rest = None
    # (empty lines alone, the NCCL lines `_mixed` blanked: the general reading makes nothing of them, neither
    # parsed nor unrecognized; ~8 ms of fixed stages spared)
    only_empty = others.len() + lane_pos.len() == n and bool((o_text.str.len_bytes() == 0).all())
    rest_seg = None
    if rest_pos.len() and not only_empty:
        rest, rest_seg = _parse_seg(text.gather(rest_pos), ctx, numbers=rest_pos + ctx.first_line)
        if rest.tables["steps"].height:
            return None
    if undated:
        rows = _inherited(rows, rest_seg)
    stub = pl.DataFrame(schema={"key": pl.String, "line": pl.Int64, "ts": UTC_US})
    steps = _finish(rows, stub, pl.coalesce(pl.col("host"), pl.lit(ctx.node)), pl.lit(ctx.path), times=False)
    tables = {"steps": conform(steps, "steps")}
    if rest is not None and "events" in rest.tables:
        tables["events"] = rest.tables["events"]
    return ParseResult(
        tables=tables,
        parsed=lane_pos.len() + (rest.parsed if rest else 0),
        unrecognized=rest.unrecognized if rest else 0,
        unrecognized_examples=rest.unrecognized_examples if rest else [],
        notes=rest.notes if rest else [],
        partial=_cut_last_line(pl.DataFrame({"text": text})),
        node=rest.node if rest else None,
    )


def _inherited(rows: pl.DataFrame, rest_seg: pl.DataFrame | None) -> pl.DataFrame:
    """The lane's `rows` (one stream after the other, each in line order) with the times `_times` gives rows
    without their own: the time of the nearest line above in the row's stream that holds one (the rows' own,
    or one of the other lines, `rest_seg`: their reading's `_parse_seg`), at most `INHERIT_GAP` lines above
    and below the stream's previous row; `ts_quality` then `inherited`, or `none` where no such line is."""
    src = rows.filter(pl.col("ts").is_not_null()).select("key", "line", "ts")
    if rest_seg is not None:
        src = pl.concat([src, rest_seg.filter(pl.col("ts").is_not_null()).select("key", "line", "ts")])
    src = src.select("key", src_line=pl.col("line"), src_ts=pl.col("ts")).sort("src_line")
    line = pl.col("line")
    prev = line.shift(1) if rows.get_column("key").n_unique() == 1 else line.shift(1).over("key")
    narrow = rows.select("key", "line", "ts", "ts_quality", _i=pl.int_range(rows.height), prev_row_line=prev)
    j = _inherit_asof(narrow, src)
    return rows.with_columns(j.get_column("ts"), j.get_column("ts_quality").fill_null("none"))


def _inherit_asof(narrow: pl.DataFrame, stamped: pl.DataFrame, bars: bool = False) -> pl.DataFrame:
    """`_times`' inheritance: for each row of `narrow` (`key`, `line`, `ts`, `ts_quality`, `_i` its position,
    `prev_row_line` the line of its stream's previous row) its `ts` and `ts_quality` (in `_i` order), those of
    the nearest line of `stamped` (`key`, `src_line`, `src_ts`; sorted by `src_line`) strictly above it in its
    stream, at most `INHERIT_GAP` lines above and below its previous row, where it has none, `ts_quality`
    `inherited` then. `bars`: the rows may be progress bars (a `kind` column), which inherit nothing: a bar is
    redrawn long after the line above it."""
    j = narrow.sort("line").join_asof(
        stamped,
        left_on="line",
        right_on="src_line",
        by="key",
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    take = (
        pl.col("ts").is_null()
        & pl.col("src_ts").is_not_null()
        & ((pl.col("line") - pl.col("src_line")) <= INHERIT_GAP)
        & (pl.col("prev_row_line").is_null() | (pl.col("src_line") > pl.col("prev_row_line")))
    )
    if bars:
        take = take & ~pl.col("kind").is_in(["tqdm", "rich_bar"])
    return j.select(
        "_i",
        ts=pl.when(take).then(pl.col("src_ts")).otherwise(pl.col("ts")),
        ts_quality=pl.when(take).then(pl.lit("inherited")).otherwise(pl.col("ts_quality")),
    ).sort("_i")


_FILE_GAP = 64
"""`parse_many` numbers the files' lines one after the other with this many numbers left out between two files
(more than any line-distance rule spans, though the stream key holds the file too)."""

_DIVIDED_KINDS = ("megatron_iteration", "nanogpt", "nanochat", "modded_nanogpt", "litgpt", "llmc")
"""Fragment kinds whose values are divided by a literal (ms to s) on the frame of a grammar's matches."""


class _Batch:
    """The lines of several files read as one (`parse_many`): file i's line n is line n + `offsets[i]` of the
    batch, its lines starting at batch line `starts[i]`; `frame` is `numbered` of them all."""

    def __init__(self, items: Sequence[tuple[pl.Series, FileContext]]) -> None:
        ns = [len(lines) for lines, _ in items]
        starts, offsets, nxt = [], [], 1
        for (_, ctx), n in zip(items, ns, strict=True):
            starts.append(nxt)
            offsets.append(nxt - ctx.first_line)
            nxt += n + _FILE_GAP
        self.n = len(items)
        self.starts = pl.Series("start", starts, dtype=pl.Int64)
        self.offsets = pl.Series("offset", offsets, dtype=pl.Int64)
        self.paths = pl.Series("path", [ctx.path for _, ctx in items], dtype=pl.String)
        self.nodes = pl.Series("node", [ctx.node for _, ctx in items], dtype=pl.String)
        text = pl.concat([lines.cast(pl.String) for lines, _ in items], rechunk=True).alias("text")
        spans = pl.DataFrame({"s": starts, "n": ns}, schema={"s": pl.Int64, "n": pl.Int64})
        spans = spans.filter(pl.col("n") > 0)  # (an empty range explodes to a null)
        line = spans.select(pl.int_ranges("s", pl.col("s") + pl.col("n"), dtype=pl.Int64)).to_series()
        line = line.explode()
        self.lines = text
        self.frame = pl.DataFrame({"line": line.alias("line"), "text": text})
        self.alone: set[int] = set()
        """Files to read by `parse` after all: their reading divides on a frame of one row (polars divides a
        column of one row by a literal exactly, of more rows by its reciprocal: the last digit may differ)."""

    def file_of(self, line: pl.Expr) -> pl.Expr:
        """The index of the file of batch line `line`."""
        return pl.lit(self.starts).search_sorted(line, side="right").cast(pl.Int64, strict=False) - 1

    def note_single_divisions(self, frags: pl.DataFrame) -> None:
        """Note the files with one fragment of a `_DIVIDED_KINDS` kind (a grammar's frame of one row)."""
        one = (
            frags.filter(pl.col("kind").is_in(_DIVIDED_KINDS))
            .group_by(self.file_of(pl.col("line")).alias("_fi"), "kind")
            .len()
            .filter(pl.col("len") == 1)
        )
        self.alone.update(one.get_column("_fi").to_list())

    def note_single_phases(self, rows: pl.DataFrame) -> None:
        """Note the files of one row that has timers (`_phases` evaluates that one-row frame)."""
        if rows.height == 0:
            return
        one = (
            rows.group_by(self.file_of(pl.col("line")).alias("_fi"))
            .agg(n=pl.len(), t=(pl.col("timers").list.len().fill_null(0) > 0).any())
            .filter((pl.col("n") == 1) & pl.col("t"))
        )
        self.alone.update(one.get_column("_fi").to_list())


def _year(ctx: FileContext) -> int | None:
    return ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`, the files read as one column of lines (see `_Batch`).

    Every rule that spans lines is kept within a file: the stream key starts with the file's index (so the
    windows, groups and joins by stream, which all gap rules are, stay in it), a Composer banner's rank and a
    file's `Total optimization steps` hold in their file only, and the lines are numbered apart. The results
    are cut per file: rows in line order are contiguous per file, the events are put in file order (stable);
    lines are renumbered, the accounting, `partial` and `node` worked out per file in one pass each. Files
    whose reading divides on a one-row frame (`_Batch.alone`) and batches whose files need another year
    (or that fail) are read file by file. A file a lane takes (a Megatron log of the lane's shape, of
    `BATCH_LANE_LINES` lines or more) is read by the lane, the others together (`parse_each`); torchtitan
    logs and DeepSpeed timer logs by their own batched lanes.
    """
    items = list(items)
    if any(len(lines) and _DS_TIMER_LIT in (lines[0] or "") for lines, _ in items):
        return _timer_only_many(items)
    return _parse_many(items)


def _parse_many(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`parse_many` of files none of which `_timer_only_many` took."""
    if len(items) >= 2 and _TITAN_LINE_LIT in (items[0][0][0] if len(items[0][0]) else ""):
        try:
            got = _titan_many(items)
        except CONTAINED:  # noqa: BLE001 - (the general reading raises, or not, as `parse` does)
            got = None
        if got is not None:
            return got
    # each file by the lane that takes it, the others by one general reading (a Megatron log the lane takes
    # costs it about half what it costs in a batch: 8 logs of 5.9 MB, ~75 against ~145 ms a file)
    return parse_each([(lines, ctx, None, bool(_ascii)) for lines, ctx in items])


def _parse_batch(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`parse_many` of two or more files of one year."""
    batch = _Batch(items)
    k = batch.n
    frame, seg = _prepare(batch.lines, items[0][1], batch)
    fi = batch.file_of(pl.col("line"))
    seg = seg.with_columns(key=pl.concat_str(fi.cast(pl.String).str.zfill(6), pl.lit("#"), pl.col("key")))
    node = pl.coalesce(pl.col("host"), pl.lit(batch.nodes).gather(fi))
    steps, events, understood = _read(seg, node, pl.lit(batch.paths).gather(fi), batch)
    local = pl.col("line") - pl.lit(batch.offsets).gather(fi)

    # rows in line order: file i's are those from the first at or after its first line
    cut = steps.get_column("line").search_sorted(batch.starts, side="left").to_list() + [steps.height]
    steps = conform(steps.with_columns(line=local), "steps")
    ev_cut = [0] * (k + 1)
    if events.height:
        events = events.with_columns(_fi=fi, line=local).sort("_fi", maintain_order=True)
        firsts = pl.Series(range(k), dtype=pl.Int64)
        ev_cut = events.get_column("_fi").search_sorted(firsts, side="left").to_list()
        ev_cut.append(events.height)
        events = conform(events.drop("_fi"), "events")

    # accounting (as `account`), last lines (`_cut_last_line`) and hosts, per file
    txt = pl.col("text")
    flagged = frame.select(
        _fi=fi,
        line=local,
        text=txt,
        blank=~txt.str.contains(_rx(r"\S")),
        ok=pl.col("line").is_in(understood.implode()).fill_null(False),
    )
    bad_e = ~pl.col("ok") & ~pl.col("blank")
    per = flagged.group_by("_fi").agg(
        p=(pl.col("ok") & ~pl.col("blank")).sum(),
        u=bad_e.sum(),
        last=txt.filter(~pl.col("blank")).last(),  # (`\S`: what `strip_chars() != ""` keeps)
        tm=(pl.col("ok") & txt.str.contains("time (ms)", literal=True)).any(),
    )
    counts: dict[int, tuple[int, int, str | None]] = {}
    timed: set[int] = set()  # (files whose understood lines hold timer lines)
    for f, p, u, t, tm in per.iter_rows():
        counts[int(f)] = (int(p), int(u), t)
        if tm:
            timed.add(int(f))
    examples: list[list[tuple[int, str]]] = [[] for _ in range(k)]
    bad = flagged.filter(bad_e & (bad_e.cum_sum().over("_fi") <= MAX_EXAMPLES))
    for f, n, t in bad.select("_fi", "line", "text").iter_rows():
        examples[f].append((int(n), str(t)[:500]))
    hosts: dict[int, list[str]] = {}
    if seg.get_column("host").null_count() < seg.height:
        hosts = dict(
            seg.filter(pl.col("host").is_not_null())
            .group_by(fi.alias("_fi"))
            .agg(pl.col("host").unique())
            .iter_rows()
        )

    out: list[ParseResult] = []
    for i, (lines, ctx) in enumerate(items):
        if i in batch.alone:
            out.append(parse(lines, ctx))
            continue
        tables = {"steps": steps.slice(cut[i], cut[i + 1] - cut[i])}
        if ev_cut[i + 1] > ev_cut[i]:
            tables["events"] = events.slice(ev_cut[i], ev_cut[i + 1] - ev_cut[i])
        parsed, unrecognized, last = counts.get(i, (0, 0, None))
        h = hosts.get(i, [])
        out.append(
            ParseResult(
                tables=tables,
                parsed=parsed,
                unrecognized=unrecognized,
                unrecognized_examples=examples[i],
                notes=[ORPHAN_TIMERS_NOTE] if i in timed and cut[i + 1] == cut[i] and parsed else [],
                partial=last is not None and _cut_text(last),
                node=h[0] if len(h) == 1 else None,
            )
        )
    return out


_NULL_MEMBER = r',"\w+":null|"\w+":null,'


def _step_detail(rows: pl.DataFrame, fields: dict[str, pl.Expr]) -> pl.Series:
    """`_json_obj(**fields)` with its null members stripped (`_NULL_MEMBER`), for every row of `rows`.

    Fast path: one `json_encode` of the whole struct, null members then stripped by the same regex, which
    gives the same text whenever some member encodes to a non-null JSON value. Rows whose only non-null
    fields are non-finite floats (encoded `null`) take `_json_obj` itself; rows with no field are null.
    A `timers` field is taken to be `pl.col("timers")` (list of `_TIMER`) when its members are pruned.
    """
    # fields null in every row are left out of the struct: the regex strips every null member of an object with
    # a non-null one, so the text is the same, and encoding and stripping get much shorter strings
    probe = rows.select(**{name: e.is_not_null().any() for name, e in fields.items()})
    schema = rows.select(**fields).schema
    kept = {name: e for name, e in fields.items() if probe.get_column(name)[0]}
    if not kept:
        return _nulls("detail", rows.height, pl.String)
    enc = dict(kept)
    if "timers" in kept:
        # same for the members of the timer objects, provided each object keeps a non-null one (its name)
        el = rows.select(pl.col("timers").explode().drop_nulls()).to_series()
        if el.len() and el.struct.field("name").null_count() == 0:
            inner = [f for f in _TIMER.to_schema() if el.struct.field(f).null_count() < el.len()]
            if len(inner) < len(_TIMER.to_schema()):
                enc["timers"] = pl.when(pl.col("timers").list.len() > 0).then(
                    pl.col("timers").list.eval(pl.struct(*(pl.element().struct.field(f) for f in inner)))
                )
    real = [
        (e.is_not_null() & e.is_finite()) if schema[name].is_float() else e.is_not_null() for name, e in kept.items()
    ]
    small = rows.height < _LANE_MIN
    if small:
        f = rows.select(
            _enc=pl.struct(**enc).struct.json_encode().str.replace_all(_rx(_NULL_MEMBER), ""),
            _real=pl.any_horizontal(*real),
            _any=pl.any_horizontal(*(e.is_not_null() for e in kept.values())),
        )
    else:
        flags = rows.select(
            _real=pl.any_horizontal(*real), _any=pl.any_horizontal(*(e.is_not_null() for e in kept.values()))
        )
        f = _encode_by_null_pattern(rows, enc).with_columns(flags)
    # the strip needs `null` in the text: objects without one (every field set) are left as they are
    enc_s = f.get_column("_enc")
    nul = pl.Series([], dtype=pl.UInt32) if small else enc_s.str.contains("null", literal=True).arg_true()
    if nul.len():
        stripped = enc_s.gather(nul).str.replace_all(_rx(_NULL_MEMBER), "")
        f = f.with_columns(_enc=enc_s.clone().scatter(nul, stripped))
    out = f.select(pl.when(pl.col("_real")).then(pl.col("_enc")).otherwise(pl.lit(None, dtype=pl.String))).to_series()
    odd = f.select((pl.col("_any") & ~pl.col("_real")).fill_null(False)).to_series()
    if odd.any():
        idx = odd.arg_true()
        slow = rows[idx].select(_json_obj(**fields).str.replace_all(_rx(_NULL_MEMBER), "")).to_series()
        out = out.scatter(idx, slow)
    return out.alias("detail")


def _encode_by_null_pattern(rows: pl.DataFrame, enc: dict[str, pl.Expr]) -> pl.DataFrame:
    """Column `_enc`: the JSON object of the `enc` fields of each row without its null top-level members
    (null when all are null), encoded once per pattern of set fields (a few per file) from those fields alone.

    That is the whole struct's JSON with the `_NULL_MEMBER` regex applied to its top-level nulls: members keep
    their order and their text, and nested nulls (or non-finite floats, encoded `null`) are still there for
    the regex applied after it, the same way in both.
    """
    names = list(enc)
    narrow = rows.select(**enc)
    code = narrow.select(
        pl.sum_horizontal(*(pl.col(n).is_not_null().cast(pl.Int64) * (1 << i) for i, n in enumerate(names)))
    ).to_series()
    codes = code.unique().to_list()
    if len(codes) == 1 and codes[0]:  # (one pattern, every row: its encoding is the column, no scatter)
        set_fields = [n for i, n in enumerate(names) if codes[0] >> i & 1]
        return narrow.select(_enc=pl.struct(*set_fields).struct.json_encode())
    out = _nulls("_enc", rows.height, pl.String)
    for c in codes:
        if not c:
            continue
        idx = (code == c).arg_true()
        set_fields = [n for i, n in enumerate(names) if c >> i & 1]
        part = narrow.select(set_fields)[idx] if idx.len() < rows.height else narrow.select(set_fields)
        out = out.scatter(idx, part.select(pl.struct(*set_fields).struct.json_encode()).to_series())
    return pl.DataFrame({"_enc": out})


def _cut_last_line(frame: pl.DataFrame) -> bool:
    """True when the last non-blank line is a step record cut short (Megatron line without its closing `|`,
    HF dict without its `}`): the file was truncated."""
    last = frame.tail(64).filter(pl.col("text").str.strip_chars() != "").tail(1).get_column("text")
    if last.len() == 0 and frame.height > 64:
        last = frame.filter(pl.col("text").str.strip_chars() != "").tail(1).get_column("text")
    return last.len() > 0 and _cut_text(last[0])


def _cut_text(last: str) -> bool:
    """`_cut_last_line` of a file whose last non-blank line is `last`."""
    text = last.rstrip()
    if re.search(g.MEGATRON_ITER_RE, text):
        return not text.endswith("|")
    return text.lstrip().startswith("{'") and not text.endswith("}")
