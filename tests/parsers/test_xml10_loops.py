"""nvidia_smi_xml: an `nvidia-smi -q -x -l N` loop read by `_loop` (documents of a repeated shape taken by
their texts, the others read one by one) parses as the code it replaces (`tests/parsers/_xml10_ref.py`, the
module before it, verbatim).

Loops made of every fixture (as is and with the harness annotations blanked) and real dump: documents with
varied texts (numbers, N/A, error markers, spaces, empty, markup and references, control characters), tags
missing or added, lines cut or joined, lone CRs, a BOM, prompts before the first document and between
documents, indented `<?xml`, a truncated last document, several document lengths.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import nvidia_smi_xml as X  # noqa: N812
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import assert_same_result, fixture_lines
from tests.parsers import _xml10_ref as R  # noqa: N812

REAL = Path("/work/shared/real-logs/hw")
_TEXT = re.compile(r"^(\s*<([A-Za-z_][\w]*)>)([^<>]*)(</\2>\s*)$")
_VALUES = [
    *("0", "17", "123.45 W", "N/A", "[N/A]", "[Unknown Error]", "Unknown Error", "Unknown  Error", "ERR!"),
    *("GPU is lost", "GPU requires reset", "", " ", "\t5 %\t", "Not Active", "Active", "Enabled", "Disabled"),
    *("P0", "P8", "1410 MHz", "00000000:18:00.0", "a &amp; b", "&lt;x&gt;", "x<y", "a>b", "\x01", "é ü"),
    *("Sat Nov 28 00:01:00 2026", "Sun Nov 29 10:11:12 2026", "2026/11/28 00:00:00.5"),
    *("Mon Feb 30 00:00:00 2026", "Sat Nov 28 0:1:2 2026", "sat nov 28 00:00:00 2026"),
    *("81559 MiB", "16x", "5"),
]


def _sources() -> list[list[str]]:
    out = [lines for _n, lines in fixture_lines("nvidia-smi-xml")]
    if REAL.is_dir():
        out += [lines_from_bytes(p.read_bytes()).to_list() for p in sorted(REAL.glob("*.xml"))]
    return out


SOURCES = _sources()


def _doc(rnd: random.Random, base: list[str], vary: float, odd: float) -> list[str]:
    """A document of the loop: `base` with some texts changed and, now and then, lines changed."""
    out = []
    for line in base:
        m = _TEXT.match(line)
        if m and rnd.random() < vary:
            line = m.group(1) + rnd.choice(_VALUES) + m.group(4)
        out.append(line)
    if rnd.random() < odd:
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(out))
            what = rnd.randrange(6)
            if what == 0:
                del out[i]
            elif what == 1:
                out.insert(i, "\t\t<extra_tag>5</extra_tag>")
            elif what == 2:
                out[i] = out[i] + "\r"
            elif what == 3 and i + 1 < len(out):
                out[i : i + 2] = [out[i] + out[i + 1]]
            elif what == 4:
                out.insert(i, "$ nvidia-smi -q -x")
            else:
                out[i] = out[i][: rnd.randrange(len(out[i]) + 1)]
    return out


def _loop(rnd: random.Random) -> list[str]:
    base = rnd.choice(SOURCES)
    if rnd.random() < 0.5:  # (one-line comments blanked: more documents of a shape)
        base = ["" if t.lstrip().startswith("<!--") and t.rstrip().endswith("-->") else t for t in base]
    bases = [base]
    if rnd.random() < 0.3:  # (a second document length)
        bases.append([*base[:5], *base[6:]])
    lines: list[str] = []
    if rnd.random() < 0.3:
        lines += ["$ nvidia-smi -q -x -l 60 > smi.xml", ""]
    vary, odd = rnd.choice([0.0, 0.1, 0.5]), rnd.choice([0.0, 0.1, 0.4])
    for _ in range(rnd.randint(2, 9)):
        lines += _doc(rnd, rnd.choice(bases), vary, odd)
        if rnd.random() < 0.1:
            lines.append("")
    if rnd.random() < 0.3:  # (a truncated last document)
        lines += base[: rnd.randrange(len(base))]
    if rnd.random() < 0.1:
        lines[0] = "\ufeff" + lines[0]
    if rnd.random() < 0.1:
        for i, t in enumerate(lines):
            if t.startswith("<?xml") and rnd.random() < 0.5:
                lines[i] = " \t" + t
    if rnd.random() < 0.1:  # (CRLF kept on every line)
        lines = [t + "\r" for t in lines]
    return lines


def _check(lines: list[str | None], first: int = 1) -> None:
    s = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n/smi.xml", node="n1", first_line=first)
    assert_same_result(X.parse(s, ctx), R.parse(s, ctx))


@pytest.fixture
def lane_always(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """`_loop` on files of any length; counts the documents it reads by a shape."""
    monkeypatch.setattr(X, "LOOP_LINES_MIN", 0)
    served = [0]
    real = X.shapes.DocShape.doc_at

    def counting(self, values, at):  # type: ignore[no-untyped-def]
        served[0] += 1
        return real(self, values, at)

    monkeypatch.setattr(X.shapes.DocShape, "doc_at", counting)
    return served


def test_fixture_loops(lane_always: list[int]) -> None:
    for base in SOURCES:
        for k in (1, 3, 4, 6):
            _check(base * k)
            _check(base * k, first=40)
    assert lane_always[0] > 0


def test_random_loops(lane_always: list[int]) -> None:
    rnd = random.Random(10)
    for _ in range(150):
        _check(_loop(rnd), first=rnd.choice([1, 2, 1001]))
    assert lane_always[0] > 80


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_hypothesis_loops(lane_always: list[int], seed: int) -> None:
    rnd = random.Random(seed)
    lines: list[str | None] = list(_loop(rnd))
    if rnd.random() < 0.1:
        lines[rnd.randrange(len(lines))] = None
    _check(lines, first=rnd.choice([1, 7]))


def test_long_loop_default_threshold() -> None:
    """A loop past `LOOP_LINES_MIN` (the default) with a few odd documents and a cut last one."""
    rnd = random.Random(3)
    base = next(b for b in SOURCES if len(b) > 300 and not any("<!--" in t for t in b))
    lines: list[str] = []
    while len(lines) < X.LOOP_LINES_MIN + 500:
        lines += _doc(rnd, base, 0.3, 0.05)
    lines += base[:100]
    _check(lines)


def test_parse_many_loops(lane_always: list[int]) -> None:
    """A batch of loops, single documents and odd files reads as the module before reads it
    (`parse_many`)."""
    rnd = random.Random(5)
    for _ in range(12):
        items = []
        for j in range(rnd.randint(1, 6)):
            lines = _loop(rnd) if rnd.random() < 0.6 else list(rnd.choice(SOURCES))
            ctx = FileContext(path=f"n/{j}.xml", node="n1")
            items.append((pl.Series("line", lines, dtype=pl.String), ctx))
        X.shapes.forget()
        got = X.parse_many(items)
        X.shapes.forget()
        want = R.parse_many(items)
        for a, b in zip(got, want, strict=True):
            assert_same_result(a, b)
    assert lane_always[0] > 0
