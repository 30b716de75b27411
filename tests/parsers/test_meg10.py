"""Tenth round's Megatron-lane paths (step_log) against the code they replace, kept here verbatim as the
reference: on hypothesis-random inputs, the lane's own shapes (uniform blocks, a block cut at either end)
and the ranges of the big Megatron log when it is there."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _step_grammars as g
from parsers import step_log as S  # noqa: N812

# ----------------------------------------------------------------------------- references (verbatim)


def _ref_unit_entries(em: pl.DataFrame, ce: pl.Series, pos: pl.Series, n: int) -> pl.DataFrame:
    # (those in a unit, kept in order: a mask over the lines read at the entries: a search costs 5x more)
    return em.filter(S._false(n).scatter(pos, True).gather(ce))


def _ref_timer_lists(tm: pl.DataFrame) -> pl.DataFrame:
    # (one stream: the entries in unit order; a group_by on a column flagged sorted is 3x faster)
    if tm.get_column("k").is_sorted():
        tm = tm.with_columns(pl.col("k").set_sorted())
    return tm.group_by("k", maintain_order=True).agg(timers="_t")


# ----------------------------------------------------------------------------- _unit_entries


def _entries(n: int, ce: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "name": [f"t{i % 7}" for i in ce],
            "min_ms": [float(i) for i in ce],
            "max_ms": [i + 0.5 for i in ce],
        },
        schema={"name": pl.String, "min_ms": pl.Float64, "max_ms": pl.Float64},
    )


def _check_unit_entries(n: int, ce: list[int], pos: list[int]) -> None:
    em = _entries(n, ce)
    ce_s = pl.Series(ce, dtype=pl.UInt32)
    pos_s = pl.Series(pos, dtype=pl.Int64)
    got = S._unit_entries(em, ce_s, pos_s, n)
    assert got.equals(_ref_unit_entries(em, ce_s, pos_s, n))
    assert got.schema == em.schema


@st.composite
def _lines_and_entries(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    n = draw(st.integers(1, 60))
    ce = sorted(draw(st.sets(st.integers(0, n - 1), max_size=n)))
    how = draw(st.sampled_from(["run", "any", "head", "tail"]))
    if how == "any" or not ce:
        pos = sorted(draw(st.sets(st.sampled_from(ce), max_size=len(ce)))) if ce else []
    else:
        a = draw(st.integers(0, len(ce)))
        b = draw(st.integers(a, len(ce)))
        a, b = {"run": (a, b), "head": (0, b), "tail": (a, len(ce))}[how]
        pos = ce[a:b]
    return n, ce, pos


@settings(max_examples=400, deadline=None)
@given(_lines_and_entries())
def test_unit_entries_random(case: tuple[int, list[int], list[int]]) -> None:
    _check_unit_entries(*case)


def test_unit_entries_shapes() -> None:
    ce = list(range(0, 300, 2))
    _check_unit_entries(300, ce, ce[5:])  # (a block cut at the start)
    _check_unit_entries(300, ce, ce[:-4])  # (at the end)
    _check_unit_entries(300, ce, ce[3:-4])
    _check_unit_entries(300, ce, ce[:10] + ce[12:])  # (a hole: the mask)
    _check_unit_entries(300, ce, [])
    _check_unit_entries(300, ce, ce[7:8])


# ----------------------------------------------------------------------------- _timer_lists


def _timers_frame(ks: list[int | None], seed: int = 0) -> pl.DataFrame:
    m = len(ks)
    names = pl.Series([f"n{(i * 7 + seed) % 5}" for i in range(m)], dtype=pl.String)
    lo = pl.Series([float(i * 3 + seed) for i in range(m)], dtype=pl.Float64)
    return pl.DataFrame({"k": pl.Series(ks, dtype=pl.Int64), "name": names, "lo": lo}).select(
        "k", _t=S._timer(name=pl.col("name"), min_ms=pl.col("lo"), max_ms=pl.col("lo") * 1.5)
    )


def _check_timer_lists(ks: list[int | None], seed: int = 0) -> None:
    tm = _timers_frame(ks, seed)
    got = S._timer_lists(tm)
    want = _ref_timer_lists(tm)
    assert got.equals(want), (ks, got, want)
    assert got.schema == want.schema


@st.composite
def _unit_keys(draw: st.DrawFn) -> list[int | None]:
    shape = draw(st.sampled_from(["uniform", "sizes", "any", "nulls"]))
    k0 = draw(st.integers(0, 5))
    units = draw(st.integers(0, 12))
    if shape == "uniform":
        m = draw(st.integers(1, 6))
        return [k0 + u for u in range(units) for _ in range(m)]
    if shape == "sizes":
        return [k0 + u for u in range(units) for _ in range(draw(st.integers(1, 4)))]
    ks: list[int | None] = draw(st.lists(st.integers(0, 6), max_size=30))
    if shape == "nulls" and ks:
        ks[draw(st.integers(0, len(ks) - 1))] = None
        ks = sorted(ks, key=lambda x: -1 if x is None else x) if draw(st.booleans()) else ks
    return ks


@settings(max_examples=400, deadline=None)
@given(_unit_keys(), st.integers(0, 3))
def test_timer_lists_random(ks: list[int | None], seed: int) -> None:
    _check_timer_lists(ks, seed)


def test_timer_lists_shapes() -> None:
    _check_timer_lists([4] * 14 * 1 + [5] * 14 + [6] * 14)
    _check_timer_lists([0, 0, 1, 1, 2])  # (the last unit shorter)
    _check_timer_lists([0, 0, 1, 1, 1, 2, 2])  # (one longer)
    _check_timer_lists([0, 0, 2, 2])  # (a unit without entries between)
    _check_timer_lists([1, 1, 0, 0])
    _check_timer_lists([])
    _check_timer_lists([3])


# ----------------------------------------------------------------------------- _megatron_fast (values)


def _ref_megatron_fast(text: pl.Series) -> tuple[pl.Series, dict[str, pl.Series]] | None:
    first = text[0]
    if first is None:
        return None
    parts = first.split("|")
    if len(parts) < 3 or not S._MEG_HEAD_RE.search(parts[0]) or parts[-1].strip(" "):
        return None
    names = []
    for p in parts[1:-1]:
        kv = p.split(":", 1)
        name = kv[0].strip()
        if len(kv) < 2 or not name or "=" in name or name != kv[0].strip(" "):
            return None
        names.append(name)
    # (the head with ASCII blanks and digits, a part of `_MEGATRON_HEAD`'s lines)
    head = r" *(?:\[[0-9-]+ [0-9:]+\] +)?iteration +[0-9]+ */ *[0-9]+ *"
    # (a test without groups, the values then cut at the `|` and `:` of the lines it takes: a capture of
    # the groups costs three times more)
    rx = "^" + head + r"\|" + "".join(rf" *{re.escape(nm)}: *{S._MEG_V} *\|" for nm in names) + " *$"
    ok = text.str.contains(S._rx(rx)).fill_null(False)
    mapping = S._megatron_name_keys(sorted(set(names)))
    fields = text.str.splitn("|", len(names) + 2).struct.unnest()
    every = bool(ok.all())
    cols = {}
    for k in g.MEGATRON_KEYS:
        at = next((i for i, nm in enumerate(names) if k in mapping[nm]), None)
        if at is None:
            cols[f"_k_{k}"] = S._nulls(f"_k_{k}", text.len(), pl.Float64)
        else:
            val = fields.get_column(f"field_{at + 1}").str.splitn(":", 2).struct.field("field_1")
            val = val.str.strip_chars(" ").cast(pl.Float64, strict=False)
            if every:  # (every line laid out as the first: no value to blank; one chunk, as the select gives)
                cols[f"_k_{k}"] = val.rechunk().alias(f"_k_{k}")
            else:
                kept = pl.select(pl.when(pl.lit(ok)).then(pl.lit(val))).to_series()
                cols[f"_k_{k}"] = kept.alias(f"_k_{k}")
    return ok, cols


_MEG_FIELDS = (
    "consumed samples",
    "elapsed time per iteration (ms)",
    "throughput per GPU (TFLOP/s/GPU)",
    "learning rate",
    "global batch size",
    "lm loss",
    "loss scale",
    "grad norm",
    "number of skipped iterations",
    "number of nan iterations",
    "samples/sec",
    "tokens per gpu per second (tgs)",
    "loss",
    "validation loss",
)
_NUMS = (
    *("1", "0", "3.5", "4000.7", "3.000000E-04", "2.015608E+00", ".5", "5.", "-1", "+2", "1e999"),
    *("nan", "inf", "1_0", "0x10", "", "1 2", "12a", "\t3"),
)


@st.composite
def _meg_lines(draw: st.DrawFn) -> list[str]:
    names = draw(st.lists(st.sampled_from(_MEG_FIELDS), min_size=1, max_size=6))
    rows = []
    for _ in range(draw(st.integers(1, 8))):
        other = st.lists(st.sampled_from(_MEG_FIELDS), max_size=6)
        nm = list(names) if draw(st.integers(0, 4)) else draw(other)
        head = " [2025-03-01 12:34:42] iteration     59/  500000 "
        parts = []
        for n in nm:
            pre = " " * draw(st.sampled_from([1, 1, 1, 0, 2]))
            mid = " " * draw(st.integers(0, 3))
            post = " " * draw(st.sampled_from([1, 1, 0, 2]))
            parts.append(f"{pre}{n}:{mid}{draw(st.sampled_from(_NUMS))}{post}")
        tail = draw(st.sampled_from(["", "", " ", "x", " | extra"]))
        rows.append(head + "|" + "|".join(parts) + "|" + tail)
    return rows


def _check_fast(rows: list[str]) -> None:
    text = pl.Series("text", rows, dtype=pl.String)
    for ascii_ in (False, True):
        with S.ascii_scope(ascii_):
            want = _ref_megatron_fast(text)
            got = S._megatron_fast(text)
        if want is None:
            assert got is None
            continue
        assert got is not None
        assert got[0].equals(want[0])
        assert list(got[1]) == list(want[1])
        for k in want[1]:
            assert got[1][k].equals(want[1][k]), (k, rows)
            assert got[1][k].n_chunks() == want[1][k].n_chunks()


@settings(max_examples=250, deadline=None)
@given(_meg_lines())
def test_megatron_fast_random(rows: list[str]) -> None:
    _check_fast(rows)


def test_megatron_fast_shapes() -> None:
    line = (
        " [2025-03-01 12:34:42] iteration     5902/  500000 | consumed samples:      6043648 | "
        "elapsed time per iteration (ms): 4000.7 | throughput per GPU (TFLOP/s/GPU): 401.9 | "
        "learning rate: 3.000000E-04 | "
        "global batch size:  1024 | lm loss: 2.374586E+00 | loss scale: 1.0 | grad norm: 1.028 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |"
    )
    _check_fast([line] * 5)
    _check_fast([line, line.replace("| lm loss:", "|  lm loss:"), line])  # (two blanks: the split)
    _check_fast([line, line.replace("| lm loss: ", "|lm loss:"), line])  # (none)
    _check_fast([line, line.replace("grad norm: 1.028", "grad norm: nan"), line])
    _check_fast([line, line.replace("| loss scale", "| loss  scale")])
