"""nvidia_smi_xml: a document fed whole (`_read_whole`) reads as fed line by line (`_read_lines`).

`_parse` with the lines' `_tag_counts` takes the whole read where the lines allow it; without them it reads
every document line by line. Both must give the same result on the fixtures, the real logs and mutations of
them aimed at what the whole read must refuse: markup over two lines, comments, CDATA, processing
instructions, DOCTYPEs with a subset, text after the root, cut documents.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import _nvsmi_fields as F
from parsers import nvidia_smi_xml as X
from parsers.base import FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result, fixture_lines, mutated

REAL = Path("/work/shared/real-logs/hw")


def _both(lines: list[str | None]) -> tuple[ParseResult, ParseResult, int]:
    """(whole read where allowed, line by line only, documents read whole) of one file."""
    s = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n/x.xml", node="n1", first_line=3)
    texts, blank, starts, tags = X._prepare(s)
    whole = [0]
    real = X._read_whole

    def counting(*a):  # type: ignore[no-untyped-def]
        got = real(*a)
        whole[0] += got is not None
        return got

    X._read_whole = counting
    try:
        rows_a, res_a = X._parse(texts, blank, ctx, starts, tags)
    finally:
        X._read_whole = real
    rows_b, res_b = X._parse(texts, blank, ctx)
    a = ParseResult(tables=F.frames(*rows_a, inv_tuples=True), **res_a)
    b = ParseResult(tables=F.frames(*rows_b, inv_tuples=True), **res_b)
    return a, b, whole[0]


def _sources() -> list[list[str]]:
    out = [lines for _n, lines in fixture_lines("nvidia-smi-xml")]
    if REAL.is_dir():
        out += [lines_from_bytes(p.read_bytes()).to_list() for p in sorted(REAL.glob("*.xml"))]
    return out


def test_fixtures_read_whole_as_by_lines() -> None:
    taken = 0
    for lines in _sources():
        a, b, n = _both(lines)
        assert_same_result(a, b)
        taken += n
    assert taken  # (the whole read is reached)


EDITS = [
    lambda t: t.replace("><", ">\n<", 1),
    lambda t: t.replace(">", "\n>", 1),
    lambda t: t.replace(" id=", "\n id=", 1),
    lambda t: t + "<!-- c <x> -->",
    lambda t: "<!-- note -->" + t,
    lambda t: t.replace(">", "><![CDATA[<a>]]>", 1) if t.lstrip().startswith("<") and "</" in t else t,
    lambda t: t + "<?pi data?>",
    lambda t: "<?pi <a> ?>",
    lambda t: "<?pi a>b",
    lambda t: "c </x ?>",
    lambda t: t.replace("</", "</ ", 1),
    lambda t: t.replace(">", " >", 1),
    lambda t: t.replace("<", "<\u00e9", 1),
    lambda t: t + " > text",
    lambda t: t + " &amp; x",
    lambda t: "",
    lambda t: "prompt$ nvidia-smi -q -x",
    lambda t: '<!DOCTYPE nvidia_smi_log [ <!ENTITY e "<y>"> ]>',
    lambda t: "<!DOCTYPE nvidia_smi_log SYSTEM 'x'>",
    lambda t: t.replace("<", "<a/><", 1),
    lambda t: t + "\n<?pi </x> ?>",
    lambda t: t + "\n<!DOCTYPE </x>>",
]


@pytest.mark.parametrize("seed", range(8))
def test_mutated_documents_read_whole_as_by_lines(seed: int) -> None:
    rnd = random.Random(seed)
    sources = _sources()
    for _ in range(12):
        lines = list(rnd.choice(sources))
        if not lines:
            continue
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(lines))
            edit = rnd.choice(EDITS)
            # (edits may cut a line in two: the lines are those of the edited text)
            lines[i : i + 1] = edit(lines[i] or "").split("\n")
        if rnd.random() < 0.3:
            lines = lines[: rnd.randrange(len(lines) + 1)]
        if rnd.random() < 0.3:
            lines = lines + ["", "user@host:~$ exit"] if rnd.random() < 0.5 else lines + lines
        if rnd.random() < 0.2 and lines:
            i = rnd.randrange(len(lines))
            lines[i : i + 1] = mutated(rnd, lines[i] or "", "<>/?!-[]\"'= ax\t\n", 3, 3).split("\n")
        a, b, _n = _both(lines)
        assert_same_result(a, b)


def test_many_equals_parse_with_whole_reads() -> None:
    items = [
        (pl.Series("line", lines, dtype=pl.String), FileContext(path=f"n{k}/x.xml", node=f"n{k}"))
        for k, lines in enumerate(_sources() * 2)
    ]
    for (lines, ctx), got in zip(items, X.parse_many(items), strict=True):
        texts, blank, _s, _t = X._prepare(lines)
        rows, res = X._parse(texts, blank, ctx)
        assert_same_result(ParseResult(tables=F.frames(*rows, inv_tuples=True), **res), got)


AIMS = (
    "<gpu ", "<product_name>", "<gpu_temp>", "<current_link_gen>", "</nvidia_smi_log>", "<?xml", "<!DOCTYPE"
)  # fmt: skip


@pytest.mark.parametrize("edit", range(len(EDITS)))
def test_each_edit_on_lines_that_matter(edit: int) -> None:
    """Each edit on the lines whose numbers reach the tables (a GPU, leaves read, the root's end, the
    prolog), and on the line after each."""
    for lines in _sources():
        for aim in AIMS:
            at = [i for i, t in enumerate(lines) if t is not None and aim in t][:2]
            for i in at + [i + 1 for i in at if i + 1 < len(lines)]:
                changed = list(lines)
                changed[i : i + 1] = EDITS[edit](changed[i] or "").split("\n")
                a, b, _n = _both(changed)
                assert_same_result(a, b)
