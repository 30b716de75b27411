"""nvidia_smi_xml.parse_many: a file of the shape of a file read before (`_nvsmi_xml_shapes.Shape`: the
same lines but for the texts of elements alone on their line) gives what `parse` gives.

Batches of a fixture or real dump and copies of it whose element texts are replaced by ordinary and odd
texts (error markers, N/A, blanks, tabs, markup and references, CR, control and non-ASCII characters), and
copies with edits of their markup, each batch read twice (the first read keeps the shapes).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest

from parsers import _nvsmi_xml_shapes as shapes
from parsers import nvidia_smi_xml as X
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import assert_same_result, fixture_lines

REAL = Path("/work/shared/real-logs/hw")
VALUE = re.compile(r"^(\s*<([A-Za-z_]\w*)(?: [^<>]*)?>)([^<>]*)(</\2>\s*)$")
TEXTS = [
    "0", "1", "42 %", "81559 MiB", "N/A", "[N/A]", "", " ", "  padded  ", "a\tb", "GPU is lost",
    "Unknown Error", "ERR!", "GPU requires reset", "Active", "Not Active", "Yes", "No", "Enabled", "Disabled",
    "0x0000000000000088", "Fri Jun 21 02:03:08 2024", "Mon Nov 30 13:14:19 2026", "535.183.01", "12.2",
    "a & b", "a &amp; b", "x < y",
    "x > y", "]]>", "a\rb", "a\x01b", "\x7f", "é", "\u00a0", "\ufffe", "P0", "P8", "00000000:07:00.0",
    "Success", "Failure", "Pending", "123456",
]  # fmt: skip


def _sources() -> list[list[str]]:
    out = [lines for _n, lines in fixture_lines("nvidia-smi-xml")]
    if REAL.is_dir():
        out += [lines_from_bytes(p.read_bytes()).to_list() for p in sorted(REAL.glob("*.xml"))]
    return out


def _gpu_temp_lines() -> list[tuple[list[str], int]]:
    """Each source that has a `<gpu_temp>` value line, with the index of its first."""
    out = []
    for lines in _sources():
        at = [i for i, t in enumerate(lines) if t is not None and VALUE.match(t) and "<gpu_temp>" in t]
        if at:
            out.append((lines, at[0]))
    return out


def _texts_changed(lines: list[str], rnd: random.Random, rate: float) -> list[str]:
    out = []
    for t in lines:
        m = VALUE.match(t or "")
        if m and rnd.random() < rate:
            t = m.group(1) + rnd.choice(TEXTS) + m.group(4)
        out.append(t)
    return out


def _markup_changed(lines: list[str], rnd: random.Random) -> list[str]:
    out = list(lines)
    i = rnd.randrange(len(out))
    t = out[i] or ""
    out[i] = rnd.choice(
        [
            t.replace(">", " >", 1),
            t.replace("</", "<x/></", 1),
            t + " ",
            t.replace("<", "<!-- c --><", 1),
            "",
            t.upper(),
            t.replace(">", "/>", 1),
            t + "<x>GPU is lost</x>" if t.rstrip().endswith(">") else t,
        ]
    )
    return out


def _check(files: list[list[str]], first_line: int = 1) -> int:
    """parse_many of the files (twice) == parse of each; files read by their shape in the second run."""
    items = [
        (
            pl.Series("line", lines, dtype=pl.String),
            FileContext(path=f"n{k}/q.xml", node=f"n{k % 3}", first_line=first_line),
        )
        for k, lines in enumerate(files)
    ]
    used = [0]
    real = shapes.Shape.docs_of

    def counting(self, values):  # type: ignore[no-untyped-def]
        used[0] += 1
        return real(self, values)

    shapes.Shape.docs_of = counting  # type: ignore[method-assign]
    try:
        for _ in range(2):
            for (lines, ctx), got in zip(items, X.parse_many(items), strict=True):
                assert_same_result(X.parse(lines, ctx), got)
    finally:
        shapes.Shape.docs_of = real  # type: ignore[method-assign]
    return used[0]


@pytest.mark.parametrize("seed", range(4))
def test_copies_with_other_texts(seed: int) -> None:
    rnd = random.Random(seed)
    shapes.forget()
    used = 0
    for lines in _sources():
        # (two plain copies first: the second file of a length keeps its shape)
        files = [lines, lines] + [_texts_changed(lines, rnd, rate) for rate in (0.05, 0.3, 1.0, 0.5)]
        used += _check(files, first_line=1 + seed)
    assert used


@pytest.mark.parametrize("seed", range(4))
def test_copies_with_other_markup(seed: int) -> None:
    rnd = random.Random(100 + seed)
    shapes.forget()
    for lines in _sources():
        files = [lines, lines, _texts_changed(lines, rnd, 0.2)]
        files += [_markup_changed(lines, rnd) for _ in range(8)]
        files += [_markup_changed(_texts_changed(lines, rnd, 0.1), rnd) for _ in range(2)]
        _check(files)


def test_shape_of_a_changed_file_replaces_the_last() -> None:
    shapes.forget()
    rnd = random.Random(5)
    for lines in _sources():
        other = _markup_changed(lines, rnd)
        _check([lines, lines, other, lines, other, other])


def test_empty_element_before_an_end_tag_is_no_text_line() -> None:
    """`<a><a /></a>` over two lines: the second holds an empty element and the outer one's end tag, not an
    element and its text; a copy with text there (the inner element's tail) reads as parsed."""
    shapes.forget()
    for lines, i in _gpu_temp_lines():
        ind, tag = re.match(r"^(\s*)<(\w+)", lines[i]).groups()  # type: ignore[union-attr]
        t = lines[:i] + [f"{ind}<{tag}>", f"{ind}<{tag} /></{tag}>"] + lines[i + 1 :]
        b = list(t)
        b[i + 1] = f"{ind}<{tag} />GPU is lost</{tag}>"
        _check([t, t, b, t, b])


def test_shapes_kept_from_the_second_file_of_a_length_while_they_serve() -> None:
    shapes.forget()
    key = (1, 10)
    assert not shapes.wanted(key)  # (the first file of a length keeps none)
    assert [shapes.wanted(key) for _ in range(shapes.TRIES_MAX + 1)] == [True] * shapes.TRIES_MAX + [False]
    shapes.served(key)
    assert shapes.wanted(key)
    shapes.forget()


def test_text_over_lines_is_the_shape_s() -> None:
    """A leaf whose text is on lines of its own (no `VALUE` line): other text there, or after its start tag,
    makes another shape."""
    shapes.forget()
    for lines, i in _gpu_temp_lines():
        m = VALUE.match(lines[i])
        assert m is not None
        ind = m.group(1)[: len(m.group(1)) - len(m.group(1).lstrip())]
        t = lines[:i] + [m.group(1), "34 C", f"{ind}{m.group(4)}"] + lines[i + 1 :]
        same_length = list(t)
        same_length[i + 1] = "35 C"
        appended = list(t)
        appended[i] = m.group(1) + "9"
        _check([t, t, same_length, appended, t])
