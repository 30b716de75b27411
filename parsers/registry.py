"""The one ordered table of parsers, and format detection over it.

Detection sniffs the head of a file with every parser; the highest score wins, ties go to the higher
`PRIORITY`, then to table order. Sniffers run through `_safe_sniff`, so one buggy sniffer scores 0.0
instead of stopping ingestion (unit tests call sniffers directly, so the bug still shows there).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from forensics.errors import CONTAINED
from parsers import (
    bug_report,
    dcgm,
    infiniband,
    kernel_log,
    nccl,
    nccl_tests,
    nvidia_smi,
    nvidia_smi_csv,
    nvidia_smi_dmon,
    nvidia_smi_table,
    nvidia_smi_topo,
    nvidia_smi_xml,
    perftest,
    step_log,
    step_table,
    torch_distributed,
)

PARSERS: tuple[ModuleType, ...] = (
    kernel_log,
    nvidia_smi,
    nvidia_smi_xml,
    nvidia_smi_csv,
    nvidia_smi_dmon,
    nvidia_smi_table,
    nvidia_smi_topo,
    dcgm,
    bug_report,
    nccl,
    torch_distributed,
    nccl_tests,
    infiniband,
    perftest,
    step_log,
    step_table,
)

MIN_SCORE = 0.3
"""Below this no parser claims the file: it is recorded as not recognised."""

NAME_BONUS = 0.1
"""Added to a sniff score when the file name matches one of the parser's FILENAME_HINTS."""


@dataclass(frozen=True)
class Detection:
    """The outcome of sniffing one file."""

    parser: ModuleType | None
    score: float
    runner_up: str | None
    runner_up_score: float


def _safe_sniff(parser: ModuleType, head: bytes, name: str) -> float:
    try:
        score = float(parser.sniff(head, name))
    except CONTAINED:  # noqa: BLE001 - a sniffer bug must not stop ingestion
        return 0.0
    if score != score:  # NaN
        return 0.0
    return min(1.0, max(0.0, score))


_HINT_MATCHERS: dict[ModuleType, tuple[object, tuple[Callable[[str], object], ...]]] = {}
"""Per parser: (its FILENAME_HINTS object, a compiled match of each glob), rebuilt when the object changes."""


def _hint_matchers(parser: ModuleType) -> tuple[Callable[[str], object], ...] | None:
    """What `fnmatch.fnmatch(base, pat)` does for each of `parser`'s FILENAME_HINTS (normcase both, then the
    match of `fnmatch.translate(pat)`), compiled once; None for hints not a tuple of str (fnmatch then)."""
    hints = parser.FILENAME_HINTS
    got = _HINT_MATCHERS.get(parser)
    if got is not None and got[0] is hints:
        return got[1]
    if not isinstance(hints, tuple) or not all(type(p) is str for p in hints):
        return None
    matchers = tuple(re.compile(fnmatch.translate(os.path.normcase(p))).match for p in hints)
    _HINT_MATCHERS[parser] = (hints, matchers)
    return matchers


def name_matches(parser: ModuleType, name: str) -> bool:
    """True when the file's base name matches one of the parser's FILENAME_HINTS globs."""
    base = name.rsplit("/", 1)[-1].lower()
    matchers = _hint_matchers(parser)
    if matchers is None:
        return any(fnmatch.fnmatch(base, pat) for pat in parser.FILENAME_HINTS)
    base = os.path.normcase(base)
    return any(m(base) is not None for m in matchers)


def detect(head: bytes, name: str) -> Detection:
    """Pick the parser for a file from its first bytes and (as a bonus only) its name."""
    # (the two highest tuples (score, PRIORITY, -order, parser): what sorting them by their first three,
    # highest first, put first and second; no two share -order, so comparing tuples never reaches parser)
    best = second = None
    for order, parser in enumerate(PARSERS):
        s = _safe_sniff(parser, head, name)
        if s > 0 and name_matches(parser, name):
            s = min(1.0, s + NAME_BONUS)
        t = (s, parser.PRIORITY, -order, parser)
        if best is None or t > best:
            best, second = t, best
        elif second is None or t > second:
            second = t
    assert best is not None and second is not None
    runner = second[3].NAME if second[0] > 0 else None
    if best[0] < MIN_SCORE:
        return Detection(None, best[0], best[3].NAME if best[0] > 0 else None, best[0])
    return Detection(best[3], best[0], runner, second[0])


def get_parser(name: str) -> ModuleType:
    """Return the parser module called `name`; raise KeyError otherwise."""
    for p in PARSERS:
        if p.NAME == name:
            return p
    raise KeyError(name)
