"""The literal tests `nccl_tests._small_rows` makes before its `^`-anchored regexes are implied by them (a
line they reject cannot match), `not h` is the blank-line regex on the body, and the digit shortcuts of
`_to_int` / `_to_float` give the regex path's values: on every line of the fixtures and real logs and on
generated lines around the edges."""

from __future__ import annotations

import random
from pathlib import Path

from parsers import nccl_tests as nt

ROOTS = [Path(__file__).resolve().parents[1] / "fixtures", Path("/work/shared/real-logs")]
HEADS = [
    "size count type", "bytes N x", "size", "sizes  count  x", "out-of-place", "out-of-placex",
    "(B) (elements)", "(B)", "Bitwise mismatch", "Bitwise mismatches", "GPU memory usage", "error: x",
    "Writing JSON output to",
    "skipping json output", "Blocking Enabled", "Per-Iteration Report", "Parallel Init Enabled",
    "Bitwise Repeatability", "Using devices", "Using devices  ", "1 2 float sum", "12 3 x y", "1", "#", "# #",
    " ", "", "\t#\t", "x", "nThread 1 nGpus 8", "Avg bus bandwidth : 1",
]  # fmt: skip


def _lines() -> list[str]:
    out: dict[str, None] = {}
    for root in ROOTS:
        if root.exists():
            for p in sorted(root.rglob("*")):
                if p.is_file() and p.stat().st_size < 4 << 20:
                    for line in p.read_bytes().decode("ascii", "replace").splitlines()[:3000]:
                        out.setdefault(line[:200])
    rng = random.Random(5)
    for _ in range(5000):
        lead, tail = rng.choice(["", " ", "# ", "#", "  #  "]), rng.choice(["", " ", " x"])
        out.setdefault(lead + rng.choice(HEADS) + tail)
    return list(out)


def _h(text: str) -> tuple[str, str]:
    body = text.rstrip()
    hb = body.lstrip()
    return body, hb[1:].lstrip() if hb.startswith("#") else hb


def test_guards_are_implied_by_the_regexes() -> None:
    rx = nt._RX
    for text in _lines():
        body, h = _h(text)
        if rx["colhdr"].search(h):
            assert h.startswith(("size", "bytes")), text
        if rx["row"].search(h):
            assert h[:1].isdigit(), text
        if rx["place"].search(h):
            assert h.startswith("out-of-place"), text
        if rx["units"].search(h):
            assert h.startswith("(B)"), text
        if rx["other"].search(h):
            assert h[:1] in nt._OTHER_FIRST, text
        assert bool(rx["blankish"].search(body)) == (not h), text


def test_number_shortcuts() -> None:
    extra = {"1.", ".5", "1.2.3", "..", ".", "0", "007", "1e5"}
    toks = {t for line in _lines() for t in line.split()} | extra
    for tok in toks:
        if tok.isascii():
            want_int = int(tok) if nt._INT_TOK.search(tok) else None
            got = nt._to_int(tok)
            assert got == (want_int if want_int is not None and -(2**63) <= want_int < 2**63 else None), tok
            if tok.replace(".", "", 1).isdigit():
                assert nt._FLOAT_TOK.search(tok), tok
