# ruff: noqa: E501  (the reference is kept verbatim)
"""`nccl.join_wrapped` (runs found by a forward fill, heads by their being the run's one non-candidate) gives
what it gave with window ops over the runs (the old code, kept verbatim below), on random frames and on every
prepared fixture."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import nccl
from parsers._sniff import may_match
from parsers.base import FileContext

FIX = Path(__file__).parent.parent / "fixtures"


def _join_wrapped_ref(frame: pl.DataFrame, wrap_width: Callable[[], int | None] | None = None) -> pl.DataFrame:
    """`nccl.join_wrapped` with window (`over`) ops, before the forward fill (verbatim). Mark hard-wrapped continuation lines (`cont`) and append them to the body of the line they continue.

    A line is a continuation when no grammar knows it, it is not blank, it does not open like a record of
    its own (`[`, `(`, a date, a step line, a traceback), the previous line is at least 80 characters
    long, and the run it extends starts at a warning/error record (NCCL WARN, c10 E/F/W line): those are
    the records events come from, and INFO/COLL lines are never re-joined. Pieces are joined without a separator when
    the previous line has the file's wrap width (the most common length ≥ 80, seen ≥ 3 times), else with
    one space (soft wrap at a word). `wrap_width`, when given, says the wrap width (of the whole file when
    `frame` holds some of its lines only); it is asked only when some line is joined.
    """
    blank = pl.col("body").fill_null("").str.strip_chars().str.len_bytes() == 0
    plen = pl.col("body").fill_null("").str.len_chars().shift(1)
    own_start = pl.col("body").fill_null("").str.contains(nccl._OWN_START)
    cand = ~pl.col("known") & (plen >= 80) & ~blank & ~own_start
    # only warning/error records are re-joined (NCCL WARN, c10 E/F/W, the 1.x "[E ...]" form)
    head = pl.col("known") & pl.col("body").fill_null("").str.contains(nccl._WRAPPABLE)
    f = frame.with_columns(_cand=cand.fill_null(False))
    if not f.get_column("_cand").any():
        return f.drop("_cand").with_columns(cont=pl.lit(False))
    f = f.with_columns(_wrap=head.fill_null(False))
    f = f.with_columns(_run=(~pl.col("_cand")).cast(pl.Int32).cum_sum())
    f = f.with_columns(cont=pl.col("_cand") & pl.col("_wrap").first().over("_run") & (pl.col("_run") > 0)).drop("_wrap")
    if not f.get_column("cont").any():
        return f.drop("_cand", "_run")
    width = wrap_width() if wrap_width is not None else nccl._wrap_width(frame.get_column("text"))
    sep = (
        pl.when(plen == width).then(pl.lit("")).otherwise(pl.lit(" "))
        if width is not None
        else pl.lit(" ")
    )
    f = f.with_columns(_piece=pl.when(pl.col("cont")).then(sep + pl.col("body")))
    tails = f.filter(pl.col("cont")).group_by("_run").agg(_tail=pl.col("_piece").str.join(""))
    f = f.join(tails, on="_run", how="left", maintain_order="left")
    first = pl.col("line") == pl.col("line").first().over("_run")
    f = f.with_columns(
        body=pl.when(first & pl.col("_tail").is_not_null()).then(pl.col("body") + pl.col("_tail")).otherwise(pl.col("body")),
    )
    return f.drop("_cand", "_run", "_piece", "_tail")


_BODIES = [
    "",
    "   ",
    "x" * 85,
    "NCCL WARN " + "y" * 90,
    "continued text of the record",
    "[W1206 12:00:00.123 ProcessGroupNCCL.cpp:607] " + "z" * 60,
    "E1206 12:00:00.1 c.cpp:9] short",
    "(not a tail)",
    "[also not]",
    "2024-01-01 x",
    "  File \"x.py\", line 3",
    "iteration 5",
    "tail " * 20,
    None,
]


@st.composite
def _frames(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(0, 40))
    bodies, known = [], []
    for _ in range(n):
        kind = draw(st.integers(0, 3))
        if kind == 0:  # a record a wrap may continue (known or not)
            bodies.append(draw(st.sampled_from(_BODIES[3:6])))
            known.append(draw(st.sampled_from([True, True, False, None])))
        elif kind == 1:  # a tail (unknown)
            bodies.append(draw(st.sampled_from([_BODIES[4], _BODIES[12], _BODIES[2]])))
            known.append(draw(st.sampled_from([False, False, None, True])))
        else:
            bodies.append(draw(st.sampled_from(_BODIES)))
            known.append(draw(st.one_of(st.booleans(), st.none())))
    lines = sorted(draw(st.sets(st.integers(1, 500), min_size=n, max_size=n)))
    return pl.DataFrame(
        {"line": lines, "text": [b or "" for b in bodies], "body": bodies, "known": known},
        schema={"line": pl.Int64, "text": pl.String, "body": pl.String, "known": pl.Boolean},
    )


def _same(frame: pl.DataFrame, width: Callable[[], int | None] | None) -> None:
    got = nccl.join_wrapped(frame, width)
    ref = _join_wrapped_ref(frame, width)
    assert got.schema == ref.schema
    assert got.equals(ref, null_equal=True)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_frames(), st.sampled_from([None, 85, 100]))
def test_join_wrapped_same_on_random_frames(frame: pl.DataFrame, width: int | None) -> None:
    _same(frame, None if width is None else (lambda: width))
    _same(frame, None)


def test_join_wrapped_same_on_fixtures() -> None:
    ctx = FileContext(path="x", node="n", first_line=1)
    n = 0
    for d in ("nccl", "torch-distributed", "step-log"):
        for p in sorted((FIX / d).rglob("*")):
            if not p.is_file() or p.stat().st_size > 3_000_000:
                continue
            lines = pl.Series(p.read_bytes().decode("utf-8", "replace").splitlines(), dtype=pl.String)
            frame = nccl.prepare(lines, ctx)
            known = nccl.nccl_understood(pl.col("body")).fill_null(False)
            frame = frame.with_columns(known=known)
            _same(frame, None)
            n += 1
    assert n > 30


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.sampled_from(["6b000", "1b000", "0", "", " 7f ", "zz", "fffffffffffffffff", "-1", "+10", "ABCDEF"]),
            st.text("0123456789abcdefABx-+ ", max_size=18),
            st.text("0123456789abcdefABCDEF", min_size=1, max_size=17),
        ),
        max_size=30,
    )
)
def test_init_bus_ids_same_as_the_expression(tokens: list[str | None]) -> None:
    """`nccl._init_bus_ids` (once per distinct busId) gives `_INIT_BUS_ID` (row by row)."""
    bus = pl.Series("bus", tokens, dtype=pl.String)
    ref = pl.select(i=pl.struct(pl.lit(bus).alias("bus"))).select(g=nccl._INIT_BUS_ID).get_column("g")
    got = nccl._init_bus_ids(bus)
    assert got.dtype == ref.dtype == pl.String
    assert got.to_list() == ref.to_list()


def _may_ref(col: pl.Series, rx: str) -> bool:
    """`nccl._may` before its regex of literals (verbatim, module names aside)."""
    if len(col) > nccl._SMALL:
        return True
    lits = nccl._literals(rx)
    if lits is None:
        return True
    return may_match(lits, "\n".join(col.drop_nulls().to_list()))


_MAY_PATTERNS = [nccl.NCCL_START, nccl._COLLECTOR_TS, nccl._RAS_MARK, nccl._UNDERSTOOD, nccl.td.ROOT_CAUSE_RE, r"a\.b|c\(d"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.text("NCL Ia.b(cd\n: 2024-0[]", max_size=30)), max_size=20),
    st.sampled_from(_MAY_PATTERNS),
)
def test_may_same_as_joined_text(values: list[str | None], rx: str) -> None:
    """`nccl._may` says False exactly when no value holds a required literal (the joined-text search could also
    find one across two values: then it said True, a guard that only cost a regex pass); when it says False,
    the regex matches no value."""
    col = pl.Series(values, dtype=pl.String)
    got = nccl._may(col, rx)
    lits = nccl._literals(rx)
    assert got == (lits is None or any(v is not None and any(x in v for x in lits) for v in values))
    assert got <= _may_ref(col, rx)
    if not got:
        assert not col.str.contains(rx).any()
