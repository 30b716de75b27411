"""The sniffers changed in round 13 (helper a) as they were before it, kept verbatim (module-level names of
each in its own section, prefixed by the module: `step_log_sniff`, ...), for `test_sniff13a.py`.

From f8506c5 (parsers/step_log.py: its sniff section, lines 164-366).
"""
# ruff: noqa
# fmt: off

from __future__ import annotations

import re
from collections.abc import Iterator

from parsers import _step_grammars as g
from parsers._sniff import (
    any_of,
    anywhere,
    cheap_requirements,
    gate,
    gate_plan,
    head_text,
    holds_shared,
    opens_with_digit,
    required_literals,
    share_anchors,
    top_branches,
)

# ============================================================================ step_log (verbatim)

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


# Patterns that may match some line of a head without ANSI codes (`parsers._sniff.gate`): the strong regexes
# then each branch of the weak one, so that a head none of them can match in is told apart with a few literal
# scans (None: the weak regex could not be cut into its branches, `holds_shared` serves instead).
_WEAK_BRANCHES = top_branches(_SNIFF_WEAK)
_SNIFF_GATE = gate_plan([*_SNIFF_STRONG, *_WEAK_BRANCHES]) if _WEAK_BRANCHES else None
_N_STRONG = len(_SNIFF_STRONG)
# The branches of the other regex freed of their anchors (`parsers._sniff.anywhere`): none matching anywhere
# in a head, no line of it can count as `other` (None: not so derived, no shortcut).
_OTHER_ANYWHERE = [anywhere(p) for p in top_branches(_SNIFF_OTHER) or [None]]
_OTHER_GATE = (
    (gate_plan(_OTHER_ANYWHERE), [p.search for p in _OTHER_ANYWHERE])  # type: ignore[arg-type, union-attr]
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

step_log_sniff = sniff


# ============================================================================ kernel_log (verbatim)
# From f8506c5 (parsers/kernel_log.py: `sniff`, lines 340-445), run with that module's globals (none of the
# names it reads changed in round 13).

_KERNEL_LOG_SNIFF = r'''
def sniff(head: bytes, name: str) -> float:
    """Score by the share of head lines carrying a kernel-log/syslog prefix; kernel-ish content adds certainty.

    Strict on purpose: NCCL logs, nvidia-smi output and step logs have none of these prefixes, and a
    bare ISO timestamp (common to many loggers) does not count on its own.
    """
    text = head_text(head)
    if "\x1b" in text and "\x1b[" in text:
        text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    plain = text.isascii() and not any(c in text for c in _RARE_BREAKS)  # ('\n' the only line boundary)
    # Long heads: their line starts first (`_opened_lines`). Where none opens as `_OPENER` says, nor does a
    # bare or btime line (`NAME: ` and 'kernel:' are openers, and so is 'btime' then a blank and a digit).
    closed = few = False
    if plain and len(text) > OPENED_FIRST and _OPENS_KNOWN:
        if not _opened_lines(text, 1):
            closed = few = True
        else:
            # fewer lines open than 40 % of `_lines_at_least` (5 * opened < 2 * least): strong lines and bare
            # lines (which open too) are fewer than 40 % of the counted lines, and the score is 0 but for
            # /proc/stat and timedatectl
            least = _lines_at_least(text)
            need = max(1, -(-2 * least // 5))
            opened = _opened_lines(text, need)
            few = len(opened) < need
    # Literal guards before the multi-line patterns (`^\s*` in multi-line mode is quadratic over thousands of
    # blank lines; each literal's two rarest characters looked for first: a memchr each). A bare line and
    # /proc/stat's btime line open with one of `_LEAD`'s words: where the lines end at '\n' only (no other
    # `str.splitlines` boundary; '^' of re.M is the text's start and after '\n'), one scan for them at the
    # line starts rules both out (their literals anywhere cost a search each).
    if closed and _LEAD_KNOWN:
        leads = False
    elif few and _LEAD_KNOWN:
        leads = any(text.startswith("btime ", at) for at in opened)  # (only the btime test below reads it)
    elif few:
        leads = True
    elif not _LEAD_GUARDS or any(g in text and g2 in text for g, g2, _x in _LEAD_GUARDS):
        leads = not _LEAD_KNOWN or not plain or bool(_LEAD.match(text) or _LEAD_NL.search(text))
    else:
        leads = False  # (no bare-line literal and no 'btime ' in the head)
    btime = leads and contains(text, _SNIFF_BTIME)
    if btime and _PROC_STAT.search(text) and re.search(r"^cpu\d* +\d+ \d+", text, re.M):
        return 0.9  # /proc/stat: gives the boot time (btime)
    if (
        contains(text, _SNIFF_TZ)
        and _TIMEDATECTL.search(text)
        and "Local time: " in text
        and re.search(r"^\s*Local time: ", text, re.M)
    ):
        return 0.9  # timedatectl: gives the zone of the node's local-time logs
    if few:
        return 0.0
    maybe_bare = leads and (_BARE_LITERALS is None or any(contains(text, lit) for lit in _BARE_GUARDED))
    if not maybe_bare:
        # no bare line: the score is 0 unless strong lines are >= 40 % of the n counted lines (n <= 300);
        # `strong <= bound` and `n >= _lines_at_least`, and 5 * strong < 2 * n is `strong / n < 0.4`
        # (first up to 8: a head of strong lines stops its scans there; below 8 the bound is exact)
        bound = _strong_bound(text, 8)
        if bound == 0:
            return 0.0
        # (`_lines_at_least` counts lines of the first 2,048 characters: not needed where those are few)
        short = plain and bound >= 8 and 5 * 8 >= 2 * (text.count("\n", 0, 2048) + 1)
        least = 0 if short else _lines_at_least(text)
        if bound < 8 or 5 * 8 < 2 * least:
            if bound >= 8:
                bound = _strong_bound(text, 120)
            if bound < 120 and 5 * bound < 2 * least:
                return 0.0
    # (`ln and not ln.isspace()` is `ln.strip()`'s truth without a copy)
    lines = [ln for ln in text.splitlines()[:300] if ln and not ln.isspace() and ln[0] != "#"]
    if not lines:
        return 0.0
    n = len(lines)
    # The lines with a strong prefix are counted first, alone, the first 60 % of the lines at once: unless
    # the head may hold bare kernel lines, the score is 0 when the lines left cannot bring them to 40 % (a
    # strong share below it scores 0, and so does no strong line without bare ones), which most heads of
    # other formats reach there. The weak prefixes are tried on the other lines only where the score
    # depends on them.
    bodies = lines
    # (`PDSH_RE` needs ': '; on ASCII '\n' lines one scan for the line starts it may match comes first)
    if ": " in text and (not plain or not _PDSH_KNOWN or _pdsh_opens(text)):
        pdsh = list(map(_SNIFF_PDSH.match, lines))
        if pdsh.count(None) < n:
            bodies = [ln if m is None else m.group("rest") for ln, m in zip(lines, pdsh)]
    cut = n if maybe_bare else min(n, int(0.6 * n) + 1)
    hits = list(map(_SNIFF_STRONG_ANY.match, bodies[:cut]))
    strong = cut - hits.count(None)
    if cut < n:
        if (strong + n - cut) / n < 0.4:
            return 0.0
        hits += map(_SNIFF_STRONG_ANY.match, bodies[cut:])
        strong = n - hits.count(None)
    if strong == 0:
        # K12: kernel lines pasted without their stamp ('kernel: NVRM: Xid ...'); NVRM lines are unambiguous
        bare = sum(1 for ln in lines if _BARE.match(ln))
        return 0.6 if bare / n >= 0.6 else 0.0
    if strong / n < 0.4:
        return 0.0
    weak = sum(1 for ln, hit in zip(lines, hits) if hit is None and _SNIFF_WEAK_ANY.match(ln))
    share = (strong + weak) / n
    if share < 0.6:
        return 0.0
    kernelish = _kernelish(text)
    if kernelish:
        return 0.95 if share > 0.9 else 0.85
    return 0.6 if share > 0.9 else 0.4

'''
from parsers import kernel_log as _kernel_log

_kernel_log_ns = dict(vars(_kernel_log))
exec(_KERNEL_LOG_SNIFF, _kernel_log_ns)
kernel_log_sniff = _kernel_log_ns["sniff"]
