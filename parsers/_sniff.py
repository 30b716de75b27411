"""Helpers that keep format detection cheap: every sniffer sees every file's head, so what each one does
per head is paid ~16 times per file.

- `head_text`: the head decoded once (invalid UTF-8 replaced), shared by all sniffers of a file.
- `required_literals`: from a regex, literal strings of which at least one must occur in any text the
  regex matches (derived from the parsed pattern, so it cannot drift from it). A sniffer tests them
  with `in` (a C-speed substring scan) and skips the regex, or a whole per-line loop, when none is
  there: an exact shortcut, never a change of result.
"""

from __future__ import annotations

import re
from functools import lru_cache

try:  # CPython's regex parser (`sre_parse` before 3.11)
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Pythons: no shortcut, same results
    _p = None  # type: ignore[assignment]
    _c = None  # type: ignore[assignment]


@lru_cache(maxsize=4)
def head_text(head: bytes) -> str:
    """`head` decoded as UTF-8 with invalid bytes replaced (what every sniffer used to do itself), cached."""
    return head.decode("utf-8", "replace")


def required_literals(pattern: re.Pattern[str] | str, flags: int = 0) -> tuple[str, ...] | None:
    """Strings of which at least one occurs in every match of `pattern`, or None when none can be named.

    Sound by construction: a run of literal characters in the pattern's top-level sequence (or in a
    mandatory group, or in a repeat taken at least once) is matched contiguously; a branch requires
    one of its alternatives' literals. Case-insensitive patterns and anything unusual give None.
    """
    if isinstance(pattern, re.Pattern):
        flags |= pattern.flags
        pattern = pattern.pattern
    if _p is None or flags & re.IGNORECASE:
        return None
    try:
        tree = _p.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - no shortcut is always correct
        return None
    if tree.state.flags & re.IGNORECASE:
        return None
    try:
        best = _seq(list(tree))
    except Exception:  # noqa: BLE001
        return None
    return tuple(sorted(best)) if best else None


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The more selective of two requirements (longest shortest literal, then fewest alternatives)."""
    if a is None:
        return b
    if b is None:
        return a
    ka = (min(map(len, a)), -len(a))
    kb = (min(map(len, b)), -len(b))
    return a if ka >= kb else b


def _seq(items: list) -> frozenset[str] | None:  # type: ignore[type-arg]
    best: frozenset[str] | None = None
    run: list[str] = []

    def flush() -> None:
        nonlocal best, run
        if run:
            best = _better(best, frozenset(["".join(run)]))
        run = []

    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        flush()
        req: frozenset[str] | None = None
        if op is _c.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if not add_flags & re.IGNORECASE:
                req = _seq(list(sub))
        elif op is _c.BRANCH:
            alts = [_seq(list(a)) for a in av[1]]
            if alts and all(a is not None for a in alts):
                req = frozenset().union(*alts)  # type: ignore[arg-type]
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            lo, _hi, sub = av
            if lo >= 1:
                req = _seq(list(sub))
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            req = _seq(list(av))
        best = _better(best, req)
    flush()
    if best is not None and any(not s for s in best):
        return None
    return best


def may_match(lits: tuple[str, ...] | None, text: str) -> bool:
    """False only when no literal of `lits` is in `text` (so the regex they came from cannot match it)."""
    return lits is None or any(s in text for s in lits)


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def alternation(patterns: list[re.Pattern[str]] | tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """One regex matching where any of `patterns` matches (`alt.match(s)` is truthy iff `any(p.match(s) ...)`,
    likewise for `search`), or None when they cannot be joined (backreferences, differing flags).

    One call instead of one per pattern: the per-line loops of sniffers run 3-4 times faster. Group names
    are dropped (the same name in two patterns would clash); only truthiness is meant to be used.
    """
    if not patterns or len({p.flags for p in patterns}) != 1:
        return None
    if any("(?P=" in p.pattern or re.search(r"\\[1-9]", p.pattern) for p in patterns):
        return None
    try:
        return re.compile("|".join(f"(?:{_NAMED_GROUP.sub('(?:', p.pattern)})" for p in patterns), patterns[0].flags)
    except re.error:
        return None


class _AnyOf:
    """Fallback of `any_of`: the patterns tried one by one."""

    def __init__(self, patterns: list[re.Pattern[str]] | tuple[re.Pattern[str], ...]) -> None:
        self.patterns = tuple(patterns)

    def match(self, s: str) -> bool:
        return any(p.match(s) for p in self.patterns)

    def search(self, s: str) -> bool:
        return any(p.search(s) for p in self.patterns)


def any_of(patterns: list[re.Pattern[str]] | tuple[re.Pattern[str], ...]) -> re.Pattern[str] | _AnyOf:
    """`alternation(patterns)`, or when they cannot be joined an object whose match/search try each in turn."""
    return alternation(patterns) or _AnyOf(patterns)
