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
import warnings
from collections.abc import Callable
from functools import lru_cache

from parsers.base import compiled

try:  # CPython's regex parser (`sre_parse` before 3.11)
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Pythons: no shortcut, same results
    _p = None  # type: ignore[assignment]
    _c = None  # type: ignore[assignment]


@lru_cache(maxsize=4)
def _decoded(head: bytes) -> str:
    return head.decode("utf-8", "replace")


def head_text(head: bytes) -> str:
    """`head` decoded as UTF-8 with invalid bytes replaced (what every sniffer used to do itself), cached; the
    text of the head last decoded is known to `has`, which scans the head's bytes for it."""
    global _LAST
    text = _decoded(head)
    if type(head) is bytes:
        _LAST = (text, head)
    return text


def _libc_memmem() -> Callable[[bytes, int, bytes, int], int | None] | None:
    """The C library's `memmem` (glibc, musl, the BSDs and macOS have one) from the symbols already loaded
    into this process (`dlopen(NULL)`: no search for the library, which runs `ldconfig`, ~20 ms), or None
    where there is none (Windows)."""
    try:
        import ctypes

        fn = ctypes.CDLL(None).memmem
    except (OSError, AttributeError, ImportError, TypeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return fn  # type: ignore[no-any-return]


_MEMMEM = _libc_memmem()
_LAST: tuple[str | None, bytes] = (None, b"")
"""(text, head) of the last `head_text`: one tuple, read once by `has`, so the two always belong together."""
_ASCII: dict[str, bytes | None] = {}
"""A literal's bytes where it is ASCII (None otherwise), for `has`."""


_CONTAINS: Callable[[bytes, bytes], bool] | None = compiled("contains")
"""`parsers._fastscan.contains`: `memmem` without ctypes' ~0.6 us a call (~30 calls a file's head; detection
170 -> 144 us a file of the simulator's default hour, 198 -> 172 of a DeepSpeed job), None where the install
did not build it."""


_SCANS = _CONTAINS is not None or _MEMMEM is not None
"""Whether `has_bytes` scans a head's bytes in C (the compiled module, or `memmem` through ctypes)."""


def has_bytes(head: bytes, lit: bytes) -> bool:
    """`lit in head`: by the compiled module's `contains` where it is built, else by the C library's `memmem`
    through ctypes where there is one and `lit` has two bytes or more (see `has`)."""
    if type(head) is bytes and type(lit) is bytes:
        if _CONTAINS is not None:
            return _CONTAINS(head, lit)
        if _MEMMEM is not None and len(lit) > 1:
            return _MEMMEM(head, len(head), lit, len(lit)) is not None
    return lit in head


def has(text: str, lit: str) -> bool:
    """`lit in text`. Where `text` is the head `head_text` decoded last and `lit` is ASCII of two characters
    or more, the C library's `memmem` scans the head's bytes instead (`has_bytes`): 2-5x faster than `in`
    over a 64 KB head that lacks the literal (the scans of absent literals are most of what sniffing a large
    head costs).

    The same answer: decoding with replacement never takes an ASCII byte into a replaced sequence, and a
    valid multi-byte character holds none, so an ASCII string occurs in the text exactly where its bytes
    occur in the head."""
    last = _LAST
    if last[0] is text and _SCANS and len(lit) > 1:
        b = _ASCII.get(lit, b"")
        if b == b"":
            b = _ASCII[lit] = lit.encode() if lit.isascii() else None
        if b is not None:
            return _CONTAINS(last[1], b) if _CONTAINS is not None else has_bytes(last[1], b)
    return lit in text


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
        # The patterns run in polars (Rust's regex): a set Python reads as a nested set or a set operation
        # (`[[:digit:]]`, `&&`, `--`, `~~` in a class, where Python warns) means something else there, so
        # Python's parse is not the pattern's: no shortcut
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
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


RARITY = "&^$Z*`?!\\{}@~|+J<\";QY>'qXK=%[]j#,W/zH_F-EVTO()LGSNUhRPACxvwBMD.bmgutcyIf7k89634521d 0:aeilnoprs"
"""Printable ASCII, the characters fewest log heads hold first (share of 16 KiB heads holding each, measured
on the fixtures, the real logs and simulated bundles). Only speed depends on it."""
_RANK = {c: i for i, c in enumerate(RARITY)}


def guard_char(lit: str) -> str:
    """The character of `lit` (non-empty) that the fewest heads hold (any non-ASCII one first).

    `guard in text` for one character is a memchr, far cheaper than `lit in text` for a longer needle:
    testing it first (`guard in text and lit in text`) gives the same truth and skips the long search on
    most heads.
    """
    return min(lit, key=lambda c: _RANK.get(c, -1))


def guarded(lit: str) -> tuple[str, str, str]:
    """(guard, second guard, lit): `lit`'s two rarest distinct characters (the same one twice if it has one),
    each looked for by a memchr before `lit` itself (`holds`)."""
    chars = sorted(set(lit), key=lambda c: _RANK.get(c, -1))
    return (chars[0], chars[1] if len(chars) > 1 else chars[0], lit)


def requirement_sets(pattern: re.Pattern[str] | str, flags: int = 0) -> list[tuple[str, ...]]:
    """Every requirement of `pattern` that `required_literals` weighs, not only its pick: tuples of strings,
    at least one string of each tuple occurring in every match (all of them must hold at once); a repeat
    'c{n,}' of one character also gives n c's. Empty when none can be named (case-insensitive or unusual
    patterns). Sound on the same grounds as `required_literals`; a branch gives the union of one requirement
    of each alternative (their cheapest; their most selective)."""
    if isinstance(pattern, re.Pattern):
        flags |= pattern.flags
        pattern = pattern.pattern
    if _p is None or flags & re.IGNORECASE:
        return []
    try:
        tree = _p.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - no shortcut is always correct
        return []
    if tree.state.flags & re.IGNORECASE:
        return []
    try:
        found = _seq_all(list(tree))
    except Exception:  # noqa: BLE001
        return []
    return sorted({tuple(sorted(s)) for s in found if s and all(s)})


def _seq_all(items: list) -> list[frozenset[str]]:  # type: ignore[type-arg]
    out: list[frozenset[str]] = []
    run: list[str] = []
    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            out.append(frozenset(["".join(run)]))
            run = []
        if op is _c.SUBPATTERN:
            _group, add_flags, _del_flags, sub = av
            if not add_flags & re.IGNORECASE:
                out += _seq_all(list(sub))
        elif op is _c.BRANCH:
            alts = [_seq_all(list(a)) for a in av[1]]
            if alts and all(alts):  # (the cheapest requirement of each alternative; their most selective)
                out.append(frozenset().union(*(min(a, key=_set_cost) for a in alts)))
                out.append(frozenset().union(*(max(a, key=_selectivity) for a in alts)))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            lo, _hi, sub = av
            if lo >= 1:
                out += _seq_all(list(sub))
            sub = list(sub)
            if lo >= 2 and len(sub) == 1 and sub[0][0] is _c.LITERAL:  # 'c{lo,}': lo c's in a row
                out.append(frozenset([chr(sub[0][1]) * lo]))
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            out += _seq_all(list(av))
    if run:
        out.append(frozenset(["".join(run)]))
    return [s for s in out if s and all(s)]


def _set_cost(s: frozenset[str] | tuple[str, ...]) -> tuple[float, float]:
    """How likely a head holds some string of `s` (its guards' ranks, summed), then shortest first-missed."""
    return (sum(_RANK.get(guard_char(x), -1) + 1 for x in s), -min(map(len, s)))


def _guards_held(x: str) -> float:
    """Roughly how likely a head is to hold `x`'s two guard characters (`guarded`), from their ranks."""
    g, g2, _x = guarded(x)
    return (_RANK.get(g, -1) + 1) * (_RANK.get(g2, -1) + 1) / len(RARITY) ** 2


def _selectivity(s: frozenset[str] | tuple[str, ...]) -> tuple[int, int]:
    """Longer strings, fewer of them: the likelier a requirement is to be missing from a head."""
    return (min(map(len, s)), -len(s))


def _scan_form(x: str) -> str:
    """`x` without its leading and trailing blanks (a substring, so still required) unless that leaves under 5
    characters: a blank in a needle defeats the search's skips over the many blanks of aligned tool output."""
    y = x.strip(" ")
    return y if len(y) >= 5 else x


def probed(lit: str) -> tuple[str, str, str, str]:
    """`guarded(lit)` plus a probe: for a string with blanks, its longest blank-free piece when that has 5
    characters or more (searched for first: a blank in a needle slows its search over aligned text), else
    ""."""
    piece = max(lit.split(" "), key=len) if " " in lit else ""
    return (*guarded(lit), piece if len(piece) >= 5 else "")


Requirements = tuple[tuple[tuple[str, str, str, str], ...], ...]
"""`cheap_requirements`'s value: requirements, each a tuple of `probed` strings (one of which must occur)."""


def cheap_requirements(pattern: re.Pattern[str] | str, k: int = 3) -> Requirements:
    """Up to `k` requirements of `pattern` (`requirement_sets`) as tuples of `probed` strings: the likeliest
    to be missing from a head and the one with the longest strings (the most selective), in the order to
    test them: those of single characters first (a memchr each), then those whose strings' guards a head is
    the least likely to hold. Strings lose their leading and trailing blanks (`_scan_form`).

    `holds(reqs, text)` is False only when some requirement has none of its strings in `text`, so `pattern`
    cannot match any substring of `text`."""
    sets = sorted(requirement_sets(pattern), key=_set_cost)
    pick = sets[:k]
    if sets:
        longest = max(sets, key=_selectivity)
        if longest not in pick:
            pick = pick[: k - 1] + [longest] if k > 1 else [longest]
    # (single characters first, then by how likely a head is to hold both guards of some string)
    pick.sort(key=lambda s: (max(map(len, s)) > 1, max(map(_guards_held, s))))
    return tuple(tuple(dict.fromkeys(probed(y) for y in map(_scan_form, s))) for s in pick)


def holds(reqs: Requirements, text: str) -> bool:
    """Whether every requirement of `reqs` (`cheap_requirements`) has a string in `text` (each string's two
    guard characters looked for first, a memchr each, then its probe)."""
    for req in reqs:
        for g, g2, x, p in req:
            if g in text and g2 in text and (not p or has(text, p)) and (len(x) == 1 or has(text, x)):
                break
        else:
            return False
    return True


def contains(text: str, lit: tuple[str, str, str]) -> bool:
    """`lit[2] in text` for a `guarded` string, its two guard characters looked for first (a memchr each)."""
    g, g2, x = lit
    return g in text and g2 in text and has(text, x)


def opens_with_digit(pattern: str) -> bool:
    """Whether every match of `pattern` starts at the string's start with a `\\d` (a character `str.isdecimal`
    accepts, for a str pattern): each top-level branch opens with `^` then a digit, however grouped or
    repeated (at least once). False when that cannot be shown (so no shortcut is taken)."""
    if _p is None:
        return False
    try:
        tree = _p.parse(pattern)
    except Exception:  # noqa: BLE001
        return False
    if tree.state.flags & re.MULTILINE:  # ('^' after each newline too)
        return False
    items = list(tree)
    if items and items[0][0] is _c.BRANCH and len(items) == 1:
        return all(_anchored_digit(list(alt)) for alt in items[0][1][1])
    return _anchored_digit(items)


def _anchored_digit(items: list) -> bool:  # type: ignore[type-arg]
    return bool(items) and items[0] == (_c.AT, _c.AT_BEGINNING) and _digit_first(items[1:])


def _digit_first(items: list) -> bool:  # type: ignore[type-arg]
    if not items:
        return False
    op, av = items[0]
    if op is _c.IN:
        return list(av) == [(_c.CATEGORY, _c.CATEGORY_DIGIT)]
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        return av[0] >= 1 and _digit_first(list(av[2]))
    if op is _c.SUBPATTERN:
        return _digit_first(list(av[3]))
    if op is _c.BRANCH:
        return all(_digit_first(list(a)) for a in av[1])
    return False


def share_anchors(lists: list[Requirements], k: int = 4) -> list[Requirements]:
    """`lists` of requirements with each string's probe replaced by a k-character substring it shares with
    other strings of `lists` where there is one, so that one search of an absent anchor (`holds_shared`,
    which remembers each anchor's answer for the head) rules out all its strings."""
    strings = sorted({x for reqs in lists for req in reqs for _g, _g2, x, _p in req if len(x) >= k})
    count: dict[str, int] = {}
    for x in strings:
        for sub in {x[i : i + k] for i in range(len(x) - k + 1)}:
            count[sub] = count.get(sub, 0) + 1
    anchor = {}
    for x in strings:
        subs = sorted({x[i : i + k] for i in range(len(x) - k + 1)}, key=lambda sub: (-count[sub], sub))
        if subs and count[subs[0]] >= 2 and " " not in subs[0] and len(set(subs[0])) > 1:
            anchor[x] = subs[0]
    return [
        tuple(tuple((g, g2, x, anchor.get(x, p)) for g, g2, x, p in req) for req in reqs) for reqs in lists
    ]


def holds_shared(reqs: Requirements, text: str, seen: dict[str, bool]) -> bool:
    """`holds` for `share_anchors` requirements, each probe's answer kept in `seen` for this `text`."""
    for req in reqs:
        for g, g2, x, a in req:
            if g in text and g2 in text:
                if a:
                    got = seen.get(a)
                    if got is None:
                        got = seen[a] = has(text, a)
                    if not got:
                        continue
                if len(x) == 1 or has(text, x):
                    break
        else:
            return False
    return True


def _finder(lit: str) -> Callable[[str], object]:
    """A function giving None exactly when `lit` is not in its argument: `has` on a head's text (`memmem`),
    else a one-literal regex's `search` (it scans a 16 KiB head for a short literal 1.5-2.5 times faster than
    `in` does, CPython 3.11)."""
    search = re.compile(re.escape(lit)).search
    if not _SCANS or len(lit) < 2 or not lit.isascii():
        return search
    b = lit.encode()

    def find(text: str) -> object:
        last = _LAST
        if last[0] is text:
            return True if has_bytes(last[1], b) else None
        return search(text)

    return find


def _anchor_key(s: str, cover: dict[str, int]) -> tuple[float, int, str]:
    """Which substring of a required string to search for first: the more patterns its absence rules out and
    the likelier it is to be absent (from its characters' `RARITY`), the sooner; then the longest."""
    held = 1.0
    for c in s:
        held *= ((_RANK.get(c, -1) + 1) / len(RARITY)) ** 0.25
    return (-cover.get(s, 0) * (1.0 - held), -len(s), s)


_ANCHOR_MIN = 3
"""The shortest anchor `gate_plan` picks (2 measured slower: short ones are present in most heads)."""


GatePlan = tuple[
    tuple[tuple[str, int], ...],
    tuple[tuple[tuple[int, ...], ...] | None, ...],
    tuple[tuple[tuple[tuple[int, tuple[tuple[str, Callable[[str], object]], ...]], ...], ...] | None, ...],
]
"""`gate_plan`'s value: (guard characters with their bits; per pattern its requirements, each string of one as
the mask of its guards; per pattern the same with each string's anchors and their finders). None for a pattern
no requirement is known of."""


def gate_plan(patterns: list[re.Pattern[str]] | tuple[re.Pattern[str], ...], chars: int = 3) -> GatePlan:
    """What `gate` needs to tell which of `patterns` may match somewhere in a text: every requirement of each
    (`requirement_sets`), each string of a requirement with its `chars` rarest characters (its guards, one bit
    each) and the substrings searched for before the string itself (its anchors: one that rules out many
    patterns when absent, the string without blanks at its ends, the string)."""
    reqs_of = [requirement_sets(p) for p in patterns]
    # how many patterns one absent substring rules out (a requirement all of whose strings hold it)
    cover: dict[str, int] = {}
    for reqs in reqs_of:
        subs: set[str] = set()
        for req in reqs:
            common = None
            for x in req:
                got = {x[i : i + k] for k in range(_ANCHOR_MIN, len(x) + 1) for i in range(len(x) - k + 1)}
                common = got if common is None else common & got
            subs |= common or set()
        for sub in subs:
            cover[sub] = cover.get(sub, 0) + 1
    guard: dict[str, int] = {}

    def mask(x: str) -> int:
        m = 0
        for c in sorted(set(x), key=lambda c: _RANK.get(c, -1))[:chars]:
            m |= guard.setdefault(c, 1 << len(guard))
        return m

    known: dict[str, tuple[str, ...]] = {}

    def anchors(x: str) -> tuple[str, ...]:
        got = known.get(x)
        if got is None:
            # (none opens or closes with a blank: a scan for a literal opening with a frequent character is
            # slow)
            subs = {x[i : i + k] for k in range(_ANCHOR_MIN, len(x)) for i in range(len(x) - k + 1)}
            best = min((s for s in subs if s == s.strip(" ")), key=lambda s: _anchor_key(s, cover), default=x)
            best = [best] if _anchor_key(best, cover) < _anchor_key(x, cover) else []
            y = x.strip(" ")
            got = known[x] = tuple(dict.fromkeys((*best, *([y] if len(y) >= 3 else []), x)))
        return got

    masks = []
    probes = []
    for reqs in reqs_of:
        if not reqs:
            masks.append(None)
            probes.append(None)
            continue
        # the requirements whose absence is likeliest found with a scan that rules out most patterns first
        reqs = sorted(reqs, key=lambda req: (max(_anchor_key(anchors(x)[0], cover) for x in req), len(req)))
        masks.append(tuple(tuple(mask(x) for x in req) for req in reqs))
        probes.append(
            tuple(tuple((mask(x), tuple((a, _finder(a)) for a in anchors(x))) for x in req) for req in reqs)
        )
    return tuple(guard.items()), tuple(masks), tuple(probes)


def gate(plan: GatePlan, text: str, seen: dict[str, bool]) -> tuple[int, ...]:
    """The numbers of the patterns of `plan` (`gate_plan`) that may match some substring of `text`: a pattern
    is left out only when some requirement of it has none of its strings in `text` (a guard character of the
    string missing, or an anchor, or the string itself), so that no match of it can lie in `text`.

    First the guards (a memchr each) rule patterns out, then anchor scans the patterns left. `seen` keeps each
    scan's answer (`a in text`) for this `text`, as `holds_shared` does."""
    guards, masks, probes = plan
    absent = 0
    for c, bit in guards:
        if c not in text:
            absent |= bit
    left = []
    for i, reqs in enumerate(masks):
        if reqs is not None:
            for req in reqs:
                for m in req:
                    if not m & absent:
                        break
                else:
                    break  # every string of this requirement lacks a character: pattern i cannot match
            else:
                left.append(i)
        else:
            left.append(i)
    alive = []
    for i in left:
        reqs2 = probes[i]
        if reqs2 is not None:
            for req2 in reqs2:
                for m, anchors in req2:
                    if not m & absent:
                        for a, find in anchors:
                            got = seen.get(a)
                            if got is None:
                                got = seen[a] = find(text) is not None
                            if not got:
                                break  # this string is absent
                        else:
                            break  # this string is there: the requirement holds
                else:
                    break  # no string of the requirement is there: pattern i cannot match
            else:
                alive.append(i)
        else:
            alive.append(i)
    return tuple(alive)


def top_branches(pattern: re.Pattern[str]) -> list[re.Pattern[str]] | None:
    """`pattern` cut at its top-level `|` into regexes (same flags): the pattern matches where one of them
    does. None when that cannot be checked: the cut must give as many branches as CPython's parser sees at
    the top (it merges branches sharing a prefix: then no cut) and no inline flag may open the pattern."""
    src = pattern.pattern
    out, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1
            if src[i : i + 1] == "^":
                i += 1
            if src[i : i + 1] == "]":  # a ']' first in a class is a member
                i += 1
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(src[start:i])
            start = i + 1
        i += 1
    out.append(src[start:])
    if _p is None or re.search(r"\(\?[aiLmsux]", src):
        return None
    try:
        items = list(_p.parse(src, pattern.flags))
        branches = [re.compile(b, pattern.flags) for b in out]
    except Exception:  # noqa: BLE001 - no cut is always correct
        return None
    n = len(items[0][1][1]) if len(items) == 1 and items[0][0] is _c.BRANCH else 1
    return branches if n == len(out) else None


def anywhere(pattern: re.Pattern[str] | None) -> re.Pattern[str] | None:
    """`pattern` without the zero-width assertions it opens or closes with (`^`, `\\b`), or None when another
    anchor, boundary or look-around is left in it (or `pattern` is None). It matches wherever `pattern` does,
    and (depending on nothing around a match) whatever it matches in a piece of a text it matches in the text:
    so where it finds nothing in a text, `pattern` finds nothing in any piece of it (a line, a line's end)."""
    if pattern is None or pattern.flags & (re.MULTILINE | re.VERBOSE):
        return None
    out = pattern.pattern
    for lead in ("^", "\\b"):
        out = out.removeprefix(lead)
    if out.endswith("\\b") and not out.endswith("\\\\b"):
        out = out.removesuffix("\\b")
    if any(a in out for a in ("^", "$", "\\b", "\\B", "\\A", "\\Z", "(?=", "(?!", "(?<", "(?(")):
        return None
    try:
        return re.compile(out, pattern.flags)
    except re.error:
        return None
