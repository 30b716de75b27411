"""hf14: the Hugging Face (tqdm) training log's reading, against the code it replaced (verbatim in
tests/parsers/_hf14_ref.py).

`_tqdm_lane`: the postfixes of canonical bars with a negative remaining time (all distinct, mostly) go to
`_present` as they are, the others made distinct as before (a set of gates found is the same over repeats);
`_read`: the lines understood gathered without the bars' fragments' lines (each a line of the bars matched);
`_rows_gathered` (no timers, single fragments and groups both): the wide columns gathered once, by the order
`_sort_rows` gives, worked out on the key, line and group (`_singles_and_groups`); `_sort_frags`,
`_sort_rows`, `_sort_stable`: one key found by compares (`_distinct_sorted`).

Whole parses are compared (`_mixed.parse`, tables and accounting, and `_present`'s gates): the benchmark's
Hugging Face logs cut at random lines (bars past their total, evaluation bars, postfix dicts, NCCL lines),
with envelopes, mutated lines, CRLF, non-ASCII lines, postfixes and descriptions that hold gates; the
synthetic Hugging Face logs of hf10 (postfixes with `loss=`, `global_step=`, descriptions `Epoch 1: `, ...);
the other generated training logs and the fixtures grown past the big-chunk size.
"""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import big_steps
from parsers import _mixed as M  # noqa: N812
from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, ParseResult
from tests.conftest import assert_same_result, mutated
from tests.parsers import _hf14_ref as R  # noqa: N812
from tests.parsers.test_hf10 import _bar, _hf_log
from tests.parsers.test_steplog_s8 import _GENS, _files, _grown

_REFS = ("_tqdm_lane", "_read", "_rows_gathered", "_sort_frags", "_sort_rows", "_sort_stable")


def _ctx(first: int = 1) -> FileContext:
    return FileContext(path="gpu-node-003/train.log", node="gpu-node-003", first_line=first, year_hint=2025)


def _same(lines: list[str | None], first: int = 1) -> ParseResult:
    s = pl.Series("literal", lines, dtype=pl.String)
    gates: list[list[frozenset[str]]] = [[], []]
    present = S._present

    def spy(k: int):  # noqa: ANN202
        return lambda *a, **kw: (gates[k].append(got := present(*a, **kw)), got)[1]

    seen: list[pl.DataFrame] = []
    rows = S._rows
    with pytest.MonkeyPatch.context() as m:
        m.setattr(S, "_present", spy(0))
        m.setattr(S, "_rows", lambda frags: (seen.append(frags), rows(frags))[1])
        got = M.parse(S, s, _ctx(first))
    with pytest.MonkeyPatch.context() as m:
        for fn in _REFS:
            m.setattr(S, fn, getattr(R, fn))
        m.setattr(R, "_present", spy(1))
        m.setattr(S, "_present", spy(1))
        want = M.parse(S, s, _ctx(first))
    assert_same_result(got, want)
    assert gates[0] == gates[1]
    # (the rows `_rows` gives, every column: the parse reads some of them only)
    for frags in seen:
        a = S._rows(frags)
        with pytest.MonkeyPatch.context() as m:
            for fn in ("_rows_gathered", "_sort_frags", "_sort_rows"):
                m.setattr(S, fn, getattr(R, fn))
            b = S._rows(frags)
        assert a.schema == b.schema
        assert a.equals(b, null_equal=True)
    return got


def _bench_hf(seed: int, skip: int, n: int) -> list[str]:
    gen = big_steps._hf(big_steps._Job(seed, 2, 8))
    return list(itertools.islice(gen, skip, skip + n))


_MUT = " .:()0123456789,ab-_/[]|{}'%<>?siteé\u2003\r█"
_GATE_POSTS = [", loss=1.5]", "] | epoch 2", ", global_step=12, consumed_samples=64]"]
_PAST_POSTS = [", step=3]", ", iteration 4]", ", loss: 2.5]"]
"""Postfixes that hold gates (`step=`, `iteration`, `loss:` in bars past their total alone)."""


@pytest.mark.parametrize(
    ("seed", "how"),
    [(3, "plain"), (7, "envelope"), (11, "mutated crlf"), (19, "unicode nulls"), (23, "gates"), (29, "past")],
)
def test_benchmark_hf_logs(seed: int, how: str) -> None:
    rnd = random.Random(seed)
    n = S._MEG_MIN + 100 if how == "plain" else 1500
    lines: list = _bench_hf(seed, rnd.randrange(0, 3000), n)
    if how == "past":  # (the benchmark's bars run far past their total: negative remaining times, `<-`)
        lines = [re.sub(r"<([0-9][0-9:]*), ", r"<-\1, ", x) if rnd.random() < 0.9 else x for x in lines]
    if "envelope" in how:  # (one stream, or lines of several: keys ranked by a join)
        envs = ["3: [rank3]: ", "[rank1]:", "gpu-node-7: "]
        lines = [rnd.choice(envs) + x if rnd.random() < 0.7 else x for x in lines]
    if "mutated" in how:
        lines = [mutated(rnd, x, _MUT, 3, 3) if rnd.random() < 0.05 else x for x in lines]
    if "crlf" in how:
        lines = [x + "\r" if rnd.random() < 0.1 else x for x in lines]
    if "unicode" in how:
        lines = [x.replace("1", "\u0661", 1) if rnd.random() < 0.01 else x for x in lines]
        lines[rnd.randrange(len(lines))] = "\u0663: é line"
    if "nulls" in how:
        lines = [None if rnd.random() < 0.01 else ("" if rnd.random() < 0.01 else x) for x in lines]
    if "gates" in how:
        # (gates in the postfixes of bars past their total and of bars with a rate, and in descriptions)
        for _ in range(20):
            i = rnd.randrange(len(lines))
            lines[i] = lines[i].replace("s/it]", "s/it" + rnd.choice(_GATE_POSTS), 1)
        for post in _PAST_POSTS:
            past = "\r".join(_bar(rnd, s, 5, "", post) for s in (86, 87, 88))
            lines.insert(rnd.randrange(len(lines)), past)
        lines.insert(rnd.randrange(len(lines)), "\r".join(_bar(rnd, s, 50, "iteration ") for s in (6, 7)))
    got = _same(lines, first=rnd.choice([1, 1001]))
    assert got.tables["steps"].height > 500


@pytest.mark.parametrize("seed", range(4))
def test_hf_logs(seed: int) -> None:
    rnd = random.Random(seed)
    env = ["", "worker-1: ", "[default0]:", ""][seed]
    lines = _hf_log(rnd, rnd.choice([2000, S._LANE_MIN * 2]), nccl=seed % 2 > 0, envelope=env)
    if seed == 3:  # (all bars past their total)
        lines = [x.replace("<00:01,", "<-0:01,").replace("<?,", "<-1:00,") for x in lines]
    _same(lines)


_ALPHABET = " |[]<>-,:0123456789/%?.sit{}'\u00e9\r█"


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 3))
def test_hf_logs_mutated_hypothesis(seed: int, edits: int) -> None:
    rnd = random.Random(seed)
    lines = _hf_log(rnd, S._LANE_MIN + 100, envelope=rnd.choice(["", "w1: "]))
    lines = [mutated(rnd, ln, _ALPHABET, edits=edits, span=3) if rnd.random() < 0.2 else ln for ln in lines]
    _same(lines)


@pytest.mark.parametrize("gen", sorted(_GENS))
def test_other_logs(gen: str) -> None:
    rnd = random.Random(5)
    lines = list(_GENS[gen](rnd, 1500))
    lines = [mutated(rnd, x, _MUT, 2, 3) if rnd.random() < 0.01 else x for x in lines]
    _same(lines)


@pytest.mark.parametrize("path", _files()[::3], ids=lambda p: p.name)
def test_files_grown(path: Path) -> None:
    _same(_grown(path.read_text(errors="replace").splitlines(), S._MEG_MIN + 300))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([10, S._LANE_MIN + 7]), st.booleans())
def test_sort_stable_keys_hypothesis(seed: int, n: int, nulls: bool) -> None:
    rnd = random.Random(seed)
    keys = rnd.choice([["|"], ["|", "h|0"], ["h|1", "|3", "é"]])
    df = pl.DataFrame(
        {
            "key": [None if nulls and rnd.random() < 0.01 else rnd.choice(keys) for _ in range(n)],
            "framework": [rnd.choice(["tqdm", "hf-trainer"][: rnd.randint(1, 2)]) for _ in range(n)],
            "line": sorted(rnd.randint(0, n // 3) for _ in range(n)),
            "group": pl.int_range(n, dtype=pl.UInt32, eager=True),
            "seg": [rnd.randint(0, 3) for _ in range(n)],
        }
    )
    by = ("key", "framework", "line")
    assert S._sort_stable(df, by).equals(R._sort_stable(df, by), null_equal=True)
    assert S._sort_rows(df).equals(R._sort_rows(df), null_equal=True)
    assert S._sort_frags(df).equals(R._sort_frags(df), null_equal=True)
    for k in keys:
        col = pl.Series("key", [k] * n)
        assert S._distinct_sorted(col).equals(col.unique().sort())
