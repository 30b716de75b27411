"""The shapes of `nvidia-smi -q -x` files read before, for `parsers.nvidia_smi_xml.parse_many`.

Dumps of one machine type repeat their markup line for line: only the texts of the elements differ. A file
read whole (`keep_shapes`) keeps its shape (`Shape`): per line, whether it must be the same or is an element
alone on its line with its text (`VALUE`), and what the parser's walk read of its documents, each text as
an index into a file's texts of its `VALUE` lines. Another file of that length is of that shape when its
lines are (`verify`, one polars pass over a batch); its documents are then the shape's with its own texts
(`Shape.docs_of`), what parsing it would give: the same markup parses to the same tree, and the text of an
element alone on a line, holding no markup, reference or character XML forbids or normalises, is the line's.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import polars as pl

from parsers._common import repeated
from parsers.base import FileContext

if TYPE_CHECKING:
    from parsers.nvidia_smi_xml import _Doc

WHOLE, VALUE = 1, 2
"""The kinds of a shape's lines (`Shape.kind`): a line that must be the same (`Shape.shape` holds it, `suffix`
is ''); a line of one element and its text, whose text may differ (`Shape.shape` holds the line up to the
text, `suffix` the rest)."""
VALUE_LINE = r"^(\s*<([A-Za-z_:][-.\w:]*)(?:\s(?:[^<>]*[^<>/])?)?>)([^<>&]*)(</([A-Za-z_:][-.\w:]*)\s*>\s*)$"
"""A `VALUE` line (when both names are the same): a start tag (not of an empty element), text, end tag."""
BAD_TEXT = r"[<>&\x00-\x08\x0a-\x1f\x7f-\x9f\x{FFFE}\x{FFFF}]"
"""What the text of another file's `VALUE` line may not hold: markup, references, characters XML forbids
or normalises (CR, LF), discouraged ones. (Where it holds none, the parser's text is the line's.)"""
SHAPES: dict[tuple[int, int], Shape] = {}
"""By (first line, number of lines): the shape of the last file of that length read whole."""
SHAPES_MAX = 32
SHAPE_LINES_MAX = 20_000
"""Files of more lines keep no shape (they would take memory and seldom serve again: a `-q -x -l` loop's
length varies)."""
_TRIES: dict[tuple[int, int], int] = {}
"""By (first line, number of lines) of a file read: shapes kept of files of that length since one served (a
key is added on its first file, which keeps none)."""
TRIES_MAX = 3
"""Shapes kept for a length none served before no more are (keeping one costs about half a parse)."""


def wanted(key: tuple[int, int]) -> bool:
    """Whether to keep the shape of a file read whole of this (first line, number of lines): from the second
    file of that length on, while the shapes kept for it serve (see `TRIES_MAX`)."""
    tries = _TRIES.get(key)
    if tries is None:
        if len(_TRIES) >= 4 * SHAPES_MAX:
            _TRIES.clear()
        _TRIES[key] = 0
        return False
    if tries >= TRIES_MAX:
        return False
    _TRIES[key] = tries + 1
    return True


def served(key: tuple[int, int]) -> None:
    """A file of this (first line, number of lines) was read by its shape."""
    _TRIES[key] = 0


def forget() -> None:
    """Drop every shape kept and every length seen (tests)."""
    SHAPES.clear()
    _TRIES.clear()


class _Refs:
    """Where a shape reads each text of its parse from: `ref(text, line)` is the text's place among the
    document's value lines (`kinds[i] == VALUE`, their text `mids[i]`, line `first + i`; raises ValueError
    where the parse's text is not that line's), or else its place in `statics` (texts that do not vary),
    after the value lines; a static text is added there once."""

    def __init__(
        self, kinds: list[int], mids: list[str | None], first: int, statics: list[str | None]
    ) -> None:
        self.order = {i: j for j, i in enumerate(i for i, kd in enumerate(kinds) if kd == VALUE)}
        self.mids = mids
        self.first = first
        self.statics = statics
        self.static_at: dict[str | None, int] = {}

    def __call__(self, t: str | None, line: int) -> int:
        i = line - self.first
        j = self.order.get(i)
        if j is not None:
            if (t or "") != self.mids[i]:
                raise ValueError(i)
            return j
        r = self.static_at.get(t)
        if r is None:
            r = self.static_at[t] = len(self.order) + len(self.statics)
            self.statics.append(t)
        return r


class Shape:
    """A file read whole (`keep_shapes`), for the files of its shape: per line its `kind`, `shape` and
    `suffix` (see `WHOLE`, `VALUE`), the lengths of both in bytes (`plen`, `slen`); what
    `nvidia_smi_xml._read_docs` gave (`docs`, `spans`) with each text as an index into a file's texts of its
    `VALUE` lines, in order, then `statics` (texts the shape fixes; a text of a `VALUE` line where the parser
    gives None is '', which `nvidia_smi_xml._rows` reads the same)."""

    __slots__ = ("shape", "suffix", "plen", "slen", "kind", "n_values", "statics", "docs", "spans")

    def __init__(self) -> None:
        self.shape = self.suffix = pl.Series([], dtype=pl.String)
        self.plen = self.slen = pl.Series([], dtype=pl.Int64)
        self.kind = pl.Series([], dtype=pl.Int8)
        self.n_values = 0
        self.statics: list[str | None] = []
        self.docs: list[Any] = []  # (as `_Doc`s, an index for each text)
        self.spans: list[tuple[int, int]] = []

    def docs_of(self, values: list[str]) -> list[_Doc]:
        """The documents of a file of this shape whose `VALUE` lines hold these texts."""
        v = values + self.statics
        return [
            (
                None if ts is None else (v[ts[0]], ts[1]),
                [(a, v[r], ln) for a, r, ln in nodes],
                [(i, bus, line, [(v[r], ln, st) for r, ln, st in leaves]) for i, bus, line, leaves in gpus],
            )
            for ts, nodes, gpus in self.docs
        ]


_DTYPES = (pl.String, pl.String, pl.Int64, pl.Int64, pl.Int8)
"""The dtypes of `Shape.shape`, `suffix`, `plen`, `slen`, `kind`."""


def verify(
    text: pl.Series, sizes: list[int], cands: list[Shape | None]
) -> tuple[list[bool], list[bool], list[list[str]]]:
    """The blank flags of the lines of a batch (`text`, no null) and per file whether it has the shape of its
    candidate (False without one: each line starting and ending as the shape's, holding nothing between
    where the shape's is `WHOLE`, and where it is `VALUE`, nothing of `BAD_TEXT`), and the texts of its
    `VALUE` lines (where it has a candidate). Per-file counts from running sums."""
    t = pl.col("t")
    cols: dict[str, Any] = {"t": text}
    exprs: dict[str, pl.Expr] = {"blank": t.str.strip_chars().str.len_bytes() == 0}
    if any(c is not None for c in cands):
        parts: dict[str, list[pl.Series]] = {"s": [], "x": [], "p": [], "q": [], "k": []}
        for c, n in zip(cands, sizes, strict=True):
            if c is None:
                for name, dt in zip("sxpqk", _DTYPES, strict=True):
                    parts[name].append(repeated(None, n, dt))
            else:
                for name, col in zip("sxpqk", (c.shape, c.suffix, c.plen, c.slen, c.kind), strict=True):
                    parts[name].append(col)
        cols |= {name: pl.concat(ps, rechunk=True) for name, ps in parts.items()}
        s, x, p, q, k = (pl.col(c) for c in "sxpqk")
        n_bytes = t.str.len_bytes()
        # (between the shape's start and end: what is left of the line without them, when both are there)
        mid = t.str.strip_prefix(s).str.strip_suffix(x)
        ok = (
            t.str.starts_with(s)
            & t.str.ends_with(x)
            & (n_bytes >= p + q)
            & ((k == VALUE) | (n_bytes == p))
            & ~mid.str.contains(BAD_TEXT)
        )
        exprs["nok"] = (~ok).fill_null(True).cast(pl.UInt32).cum_sum()
        exprs["mid"] = pl.when(k == VALUE).then(mid)
    got = pl.DataFrame(cols).lazy().select(**exprs).collect()
    shaped, values = [False] * len(sizes), [[] for _ in sizes]
    if "nok" not in got.columns:
        return got.get_column("blank").to_list(), shaped, values
    ends = [e - 1 for e in accumulate(sizes)]
    nok = got.get_column("nok").gather([max(e, 0) for e in ends]).to_list() if ends else []
    mids: list[str] = got.get_column("mid").drop_nulls().to_list()
    prev, m = 0, 0
    for f, n in enumerate(sizes):
        if n:
            shaped[f] = nok[f] == prev and cands[f] is not None
            prev = nok[f]
        c = cands[f]
        if c is not None:
            values[f] = mids[m : m + c.n_values]
            m += c.n_values
    return got.get_column("blank").to_list(), shaped, values

def keep_shapes(
    text: pl.Series,
    at: list[int],
    sizes: list[int],
    keys: list[tuple[int, int]],
    items: Sequence[tuple[pl.Series, FileContext]],
    made: list[tuple[int, list[_Doc], list[tuple[int, int]]]],
) -> None:
    """Keep the shape of each file of `made` (file number, what `nvidia_smi_xml._read_docs` gave), read whole,
    no note, not ending early: its `VALUE` lines found in one pass over their lines (`text`, from `at`). A
    text of the documents is the text of its element's line when that is a `VALUE` line (the element alone
    on it), else fixed by the shape (the line is kept whole, and so are the others its text reaches: a
    `VALUE` line begins with its start tag). No shape is kept when a `VALUE` line's element has another
    text."""
    sub = pl.concat([text.slice(at[k], sizes[k]) for k, _d, _s in made])
    g = sub.to_frame("t").select(v=pl.col("t").str.extract_groups(VALUE_LINE)).unnest("v")
    is_v = (pl.col("2") == pl.col("5")).fill_null(False)
    shape = pl.when(is_v).then(pl.col("1")).otherwise(sub)
    suffix = pl.when(is_v).then(pl.col("4")).otherwise(pl.lit(""))
    cols = g.select(
        kind=pl.when(is_v).then(pl.lit(VALUE, pl.Int8)).otherwise(pl.lit(WHOLE, pl.Int8)),
        shape=shape,
        suffix=suffix,
        plen=shape.str.len_bytes().cast(pl.Int64),
        slen=suffix.str.len_bytes().cast(pl.Int64),
        mid=pl.when(is_v).then(pl.col("3")),
    )
    start = 0
    for k, docs, spans in made:
        n = sizes[k]
        part = cols.slice(start, n)
        start += n
        kinds = part.get_column("kind").to_list()
        mids = part.get_column("mid").to_list()
        first = items[k][1].first_line
        sh = Shape()
        ref = _Refs(kinds, mids, first, sh.statics)

        try:
            for ts_el, node_texts, gpus in docs:
                ts = None if ts_el is None else (ref(*ts_el), ts_el[1])
                nodes = [(a, ref(t, ln), ln) for a, t, ln in node_texts]
                refs = [(i, bus, ln, [(ref(t, n), n, st) for t, n, st in lv]) for i, bus, ln, lv in gpus]
                sh.docs.append((ts, nodes, refs))
        except ValueError:
            continue
        # (the columns copied: a slice would keep those of every file of `made`)
        sh.shape, sh.suffix, sh.plen, sh.slen, sh.kind = (
            pl.Series(c, part.get_column(c).to_list(), dtype=dt)
            for c, dt in zip(("shape", "suffix", "plen", "slen", "kind"), _DTYPES, strict=True)
        )
        sh.n_values, sh.spans = len(ref.order), spans
        if len(SHAPES) >= SHAPES_MAX:
            SHAPES.clear()
        SHAPES[keys[k]] = sh


class DocShape:
    """The shape of one document of a file (`doc_shape`), for the documents of a `-q -x -l N` loop
    (`nvidia_smi_xml._loop`): the columns `verify` reads (as `Shape`'s), what `nvidia_smi_xml._read_doc` gave
    for it with each text as an index into a document's texts of its `VALUE` lines then `statics` and each
    line counted from the document's first (`ts`, `nodes`, `gpus`), and where its lines read end (`upto`)."""

    __slots__ = (
        *("shape", "suffix", "plen", "slen", "kind", "n_values", "statics"),
        *("ts", "nodes", "gpus", "upto"),
    )

    def __init__(self) -> None:
        self.shape = self.suffix = pl.Series([], dtype=pl.String)
        self.plen = self.slen = pl.Series([], dtype=pl.Int64)
        self.kind = pl.Series([], dtype=pl.Int8)
        self.n_values = 0
        self.statics: list[str | None] = []
        self.ts: tuple[int, int] | None = None
        self.nodes: list[tuple[str, int, int]] = []
        self.gpus: list[Any] = []
        self.upto = 0

    def doc_at(self, values: list[str], at: int) -> _Doc:
        """What `nvidia_smi_xml._read_doc` gives for a document of this shape whose first line is number `at`
        and whose `VALUE` lines hold these texts."""
        v = values + self.statics
        ts = self.ts
        return (
            None if ts is None else (v[ts[0]], at + ts[1]),
            [(a, v[r], at + ln) for a, r, ln in self.nodes],
            [(i, bus, at + line, ShapedLeaves(v, at, leaves)) for i, bus, line, leaves in self.gpus],
        )


class Template(list[tuple[int, int, Any]]):
    """The leaves of a GPU of a shape, `(text index, line, steps)` each, with the texts (`refs`) and lines
    (`lines`) in order and the steps of each operation (`ops`: operation -> (leaf number, line, argument,
    priority, whether no step of this operation before has this argument) in order)."""

    def __init__(self, leaves: list[tuple[int, int, Any]]) -> None:
        super().__init__(leaves)
        self.refs = [r for r, _ln, _st in leaves]
        self.lines = [ln for _r, ln, _st in leaves]
        self.ops: dict[str, list[tuple[int, int, str, int, bool]]] = {}
        seen: set[tuple[str, str]] = set()
        for k, (_r, ln, steps) in enumerate(leaves):
            for op, arg, pri in steps:
                self.ops.setdefault(op, []).append((k, ln, arg, pri, (op, arg) not in seen))
                seen.add((op, arg))


class ShapedLeaves:
    """The leaves of a GPU of a document read by its shape (`DocShape.doc_at`), for `nvidia_smi_xml._apply`:
    leaf k is `(values[r], at + line, steps)` for `(r, line, steps) = template[k]` (no tuple made for
    each)."""

    __slots__ = ("values", "at", "template")

    def __init__(self, values: list[str | None], at: int, template: Template) -> None:
        self.values, self.at, self.template = values, at, template

    def __iter__(self):  # type: ignore[no-untyped-def]
        v, at = self.values, self.at
        return iter([(v[r], at + ln, st) for r, ln, st in self.template])


def doc_shape(part: pl.Series, doc: _Doc, at: int, upto: int) -> DocShape | None:
    """The shape of a document (its lines `part`, no null, the first numbered `at`), read whole without a note
    as `doc`, its lines read ending at `upto` (from its first): as `keep_shapes` keeps a file's; None when a
    `VALUE` line's element has another text."""
    g = part.to_frame("t").select(v=pl.col("t").str.extract_groups(VALUE_LINE)).unnest("v")
    is_v = (pl.col("2") == pl.col("5")).fill_null(False)
    shape = pl.when(is_v).then(pl.col("1")).otherwise(part)
    suffix = pl.when(is_v).then(pl.col("4")).otherwise(pl.lit(""))
    cols = g.select(
        kind=pl.when(is_v).then(pl.lit(VALUE, pl.Int8)).otherwise(pl.lit(WHOLE, pl.Int8)),
        shape=shape,
        suffix=suffix,
        plen=shape.str.len_bytes().cast(pl.Int64),
        slen=suffix.str.len_bytes().cast(pl.Int64),
        mid=pl.when(is_v).then(pl.col("3")),
    )
    kinds = cols.get_column("kind").to_list()
    mids = cols.get_column("mid").to_list()
    sh = DocShape()
    ref = _Refs(kinds, mids, at, sh.statics)

    ts_el, node_texts, gpus = doc
    try:
        sh.ts = None if ts_el is None else (ref(*ts_el), ts_el[1] - at)
        sh.nodes = [(a, ref(t, ln), ln - at) for a, t, ln in node_texts]
        sh.gpus = [
            (i, bus, ln - at, Template([(ref(t, n), n - at, st) for t, n, st in lv]))
            for i, bus, ln, lv in gpus
        ]
    except ValueError:
        return None
    sh.shape, sh.suffix, sh.plen, sh.slen, sh.kind = (
        cols.get_column(c) for c in ("shape", "suffix", "plen", "slen", "kind")
    )
    sh.n_values, sh.upto = len(ref.order), upto
    return sh
