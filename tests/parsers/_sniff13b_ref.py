"""The sniffers of nccl_tests and nvidia_smi_csv, and registry.detect and name_matches, as they were before
round 13 (kept verbatim, their module constants imported), for tests/parsers/test_sniff13b.py."""

# ruff: noqa
import fnmatch
import re
from types import ModuleType

from parsers._sniff import head_text, holds
from parsers.nccl_tests import (
    _SNIFF_DEVICE, _SNIFF_DEVICE_REQS, _SNIFF_JSON_FILE, _SNIFF_JSON_REQS, _SNIFF_NCCL_FAST, _SNIFF_ROW,
    _SNIFF_ROW_HINTS, _SNIFF_STRONG_REQS, _two,
)
from parsers.nvidia_smi_csv import HEADER_RE, PDSH_RE, _known
from parsers.registry import MIN_SCORE, NAME_BONUS, PARSERS, Detection, _safe_sniff


def nccl_tests_sniff(head: bytes, name: str) -> float:
    """Score nccl-tests markers in the head; low when NCCL debug lines dominate (the NCCL parser's file)."""
    text = head_text(head)
    # each regex runs only when a literal it needs is in the head (parsers._sniff): same scores, and the
    # multi-line ones (`^\s*` spanning blank lines, `[\s\S]*`) never run over text they cannot match
    if '"' in text and ('"minimum_bytes"' in text or '"results"' in text) and holds(_SNIFF_JSON_REQS, text):
        if _SNIFF_JSON_FILE.search(text) and any(ln.strip() and not ln.startswith("#SOURCE") for ln in text.splitlines()):
            return 0.95
    strong = any(holds(reqs, text) and r.search(text) for r, reqs in _SNIFF_STRONG_REQS)
    # (the score only asks whether there are none, one or more device lines and rows, and not at all when a
    # strong marker is there or there are two device lines: counting stops where the score is settled)
    devices = rows = 0
    if not strong:
        devices = _two(_SNIFF_DEVICE, text) if holds(_SNIFF_DEVICE_REQS, text) else 0
        if devices < 2:
            rows = _two(_SNIFF_ROW, text) if any(h.search(text) for h in _SNIFF_ROW_HINTS) else 0
    if not (strong or devices or rows):
        return 0.0
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#SOURCE")]
    if not lines:
        return 0.0
    nccl_share = (len(_SNIFF_NCCL_FAST.findall(text)) if "] NCCL " in text else 0) / len(lines)
    if strong or devices >= 2 or rows >= 2:
        return 0.95 if nccl_share < 0.5 else 0.45
    if devices == 1 or rows == 1:
        return 0.6 if nccl_share < 0.5 else 0.2
    return 0.0


def nvidia_smi_csv_sniff(head: bytes, name: str) -> float:
    """0.95 for a --query-gpu header in the first lines; 0.4 for header-less rows that look like it."""
    if b"," not in head:  # (both need commas: no decode for a head without one)
        return 0.0
    text = head_text(head)
    # (what follows reads the first 5 counted lines among the first 30 (and whether there is one): from the
    # lines of the first 4,096 characters but the last, maybe cut short, when they settle it)
    raw = text[:4096].splitlines()[:-1] if len(text) > 4096 else None
    if raw is not None and len(raw) < 30:
        raw = raw if sum(1 for ln in raw if ln.strip() and not ln.startswith("#")) >= 5 else None
    raw = (text.splitlines() if raw is None else raw)[:30]
    lines = [ln for ln in raw if ln.strip() and not ln.startswith("#")]
    lines = [m.group("rest") if (m := re.match(PDSH_RE, ln)) else ln for ln in lines[:5]]
    for ln in lines[:5]:
        if "," in ln and re.match(HEADER_RE, ln):
            fields = ln.split(",")
            known = _known(fields)
            if known and len(known) >= min(2, len(fields)):
                return 0.95
    if lines and all(ln.count(",") >= 2 for ln in lines[:5]) and any(
        re.search(r"(^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3},|, GPU-[0-9a-f]{8}-|, [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d)", ln)
        for ln in lines[:5]
    ):
        return 0.4
    return 0.0


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
