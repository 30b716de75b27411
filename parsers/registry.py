"""The one ordered table of parsers, and format detection over it.

Detection sniffs the head of a file with every parser; the highest score wins, ties go to the higher
`PRIORITY`, then to table order. Sniffers run through `_safe_sniff`, so one buggy sniffer scores 0.0
instead of stopping ingestion (unit tests call sniffers directly, so the bug still shows there).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from types import ModuleType

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
    except Exception:  # noqa: BLE001 - a sniffer bug must not stop ingestion
        return 0.0
    if score != score:  # NaN
        return 0.0
    return min(1.0, max(0.0, score))


def name_matches(parser: ModuleType, name: str) -> bool:
    """True when the file's base name matches one of the parser's FILENAME_HINTS globs."""
    base = name.rsplit("/", 1)[-1].lower()
    return any(fnmatch.fnmatch(base, pat) for pat in parser.FILENAME_HINTS)


def detect(head: bytes, name: str) -> Detection:
    """Pick the parser for a file from its first bytes and (as a bonus only) its name."""
    scored = []
    for order, parser in enumerate(PARSERS):
        s = _safe_sniff(parser, head, name)
        if s > 0 and name_matches(parser, name):
            s = min(1.0, s + NAME_BONUS)
        scored.append((s, parser.PRIORITY, -order, parser))
    scored.sort(key=lambda t: (t[0], t[1], t[2]), reverse=True)
    best, second = scored[0], scored[1]
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
