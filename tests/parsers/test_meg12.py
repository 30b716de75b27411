"""meg12: the straggler-detector reports' fourteen items read with one regex (`step_log._straggler_matches`:
each item's first match among one pattern's matches) instead of one regex each (a compile each per chunk);
against the code it replaced, verbatim in tests/parsers/_meg12_ref.py: `_events` on report lines and their
mutations (ASCII and not, blanks and `|` in odd places, items repeated, missing, glued), whole `_mixed.parse`
results on the benchmark's Megatron logs (its reports every 100 iterations) cut at random lines, with CRLF,
mutated and non-ASCII lines, and on the fixtures' step logs grown past the big-chunk size."""

from __future__ import annotations

import itertools
import random
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
from tests.parsers import _meg12_ref as R  # noqa: N812
from tests.parsers.test_steplog_s8 import _files, _grown

# ----------------------------------------------------------------------------- _events


_UNITS = ["ms", "W", "C", "%", "MHz", "TF"]
_VALUES = ["1.10", "3395.37", "612000", "-2.5e3", "nan", "+inf", ".5", "7."]


def _report(rnd: random.Random, sep: str = " | ") -> str:
    items = [
        f"{stat}{metric}/Rnk: {rnd.choice(_VALUES)}{rnd.choice(_UNITS)}/{rnd.randrange(64)}"
        for stat in ("Mn", "Mx")
        for metric in S.g.STRAGGLER_METRICS
    ]
    return "INFO:megatron.core.utils:[2025-03-11 01:55:09] | " + sep.join(items)


def _topk(rnd: random.Random) -> str:
    which = rnd.choice(["Bottom 2 Ranks with lowest  ", "Top    2 Ranks with highest "])
    pairs = ", ".join(f"{rnd.choice(_VALUES)}/{rnd.randrange(64)}" for _ in range(rnd.randint(0, 3)))
    return f"INFO:megatron.core.utils:^^^^ {which}Etpt(TF): {pairs},"


def _events_same(lines: list[str | None], ascii: bool) -> None:
    n = len(lines)
    seg = pl.DataFrame(
        {
            "text": pl.Series(lines, dtype=pl.String),
            "line": pl.Series(range(1, n + 1), dtype=pl.Int64),
            "ts": pl.Series([None] * n, dtype=pl.Datetime("us", "UTC")),
            "ts_quality": pl.Series([None] * n, dtype=pl.String),
        }
    ).with_columns(raw=pl.col("text"))
    nv = pl.DataFrame()
    node, path = pl.lit("n1"), pl.lit("n1/train.log")
    present = frozenset(S._GATES)
    with S.ascii_scope(ascii):
        got_ev, got_seen = S._events(seg, nv, node, path, present)
        want_ev, want_seen = R._events(seg, nv, node, path, present)
    assert got_ev.schema == want_ev.schema
    assert got_ev.equals(want_ev, null_equal=True), [
        (a, b) for a, b in zip(got_ev.iter_rows(), want_ev.iter_rows(), strict=False) if a != b
    ]
    assert got_seen.equals(want_seen, null_equal=True)


def test_events_reports() -> None:
    rnd = random.Random(1)
    lines: list[str | None] = [_report(rnd) for _ in range(20)]
    lines += [_report(rnd, sep) for sep in ("|", " |", "| ", "\t|\t", "  ", "\t", "")]
    lines += [None, "", "no report here", "MnRtt/Rnk: 1ms/2", " MnRtt/Rnk: 1ms/2", "|MnRtt/Rnk: 1ms/2"]
    lines += ["x MnRtt/Rnk: 1ms/2 | MnRtt/Rnk: 2ms/3 | MxRtt/Rnk: 3ms/4MnRtt/Rnk: 4ms/5"]  # (repeated, glued)
    lines += ["MnRtt/Rnk: 1ms/2MxRtt/Rnk: 3ms/4 MnDRtt/Rnk: 1,5ms/2 MxDRtt/Rnk: 1.5ms/99999999999"]
    lines += ["MnRtt/Rnk: 1ms/ | MxRtt/Rnk: ms/4 | MnPwr/Rnk: 1W/2/3 | MxPwr/Rnk: 1W/2 | MnRtt/Rnk: 5ms/6"]
    lines += [_topk(rnd) for _ in range(12)]
    lines += ["^^^^ Top 1 Ranks with highest Etpt(TF): 1/2/3, 4//5, /6, 7/, 1,5/2, -2.5e3/8 nan/9"]
    _events_same(lines, False)
    _events_same([x for x in lines if x is not None], True)
    _events_same([], False)
    _events_same(["MnRtt/Rnk: garbage", "MxRtt/Rnk: "], True)  # (report lines without an item)


def test_events_unicode() -> None:
    rnd = random.Random(2)
    lines = [_report(rnd, sep) for sep in (" \u00a0|\u2003", "\u2003", "\u00a0", " | \u00e9 | ")]
    lines += ["\u00e9MnRtt/Rnk: 1ms/2 \u2028MxRtt/Rnk: 2ms/3"]
    lines += ["MnRtt/Rnk: \u0661ms/2 | MxRtt/Rnk: 1ms/\u0662"]
    lines += ["^^^^ Top 2 Ranks with highest\u2003Etpt(TF): 1.5/\u0662, \u0661/3, 2/4\u0663, \u00e9 3/4"]
    _events_same(lines, False)


_MUT = " .:/|0123456789eE+-,MnxRtPwrDk%WCHzTFmsRnk\u00e9\u2003\t"


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_events_mutated(seed: int, n: int) -> None:
    rnd = random.Random(seed)
    lines = [mutated(rnd, _report(rnd, rnd.choice([" | ", "|", " "])), _MUT, 6, 4) for _ in range(n)]
    lines += [mutated(rnd, _topk(rnd), _MUT + "^(),", 4, 3) for _ in range(n)]
    _events_same(lines, False)
    if all(x.isascii() for x in lines):
        _events_same(lines, True)


# ----------------------------------------------------------------------------- whole chunks


def _ctx(first: int = 1) -> FileContext:
    return FileContext(path="n1/train.log", node="n1", first_line=first, year_hint=2026, collected_at=None)


def _same(lines: list[str | None], first: int = 1) -> ParseResult:
    s = pl.Series("literal", lines, dtype=pl.String)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(S, "_events", R._events)
        want = M.parse(S, s, _ctx(first))
    got = M.parse(S, s, _ctx(first))
    assert_same_result(got, want)
    return got


def _reports(res: ParseResult) -> int:
    ev = res.tables.get("events")
    return 0 if ev is None else ev.filter(pl.col("source") == "straggler-detector").height


@pytest.mark.parametrize(
    ("seed", "how"), [(0, "plain"), (4, "mutated"), (8, "crlf"), (12, "unicode"), (16, "small")]
)
def test_benchmark_megatron_logs(seed: int, how: str) -> None:
    """The benchmark's generator (seed % 4 == 0: Megatron, a straggler report every 100 iterations), a piece
    cut at random lines past the big-chunk size (or under it: `small`)."""
    rnd = random.Random(seed)
    gen = big_steps._megatron(big_steps._Job(seed, 4, 8))
    size = S._MEG_MIN // 2 if how == "small" else 24_000
    lines = list(itertools.islice(gen, rnd.randrange(0, 5000), rnd.randrange(0, 5000) + size))
    if how == "mutated":
        lines = [mutated(rnd, x, _MUT, 3, 3) if "/Rnk: " in x or rnd.random() < 0.002 else x for x in lines]
    elif how == "crlf":
        lines = [x + "\r" if "/Rnk: " in x or rnd.random() < 0.001 else x for x in lines]
    elif how == "unicode":
        lines = [x.replace(" | ", " |\u2003", 3) if "/Rnk: " in x else x for x in lines]
        lines[rnd.randrange(len(lines))] += " \u00e9"
    got = _same(lines, first=rnd.choice([1, 1001]))
    assert _reports(got) > 0


def _straggler_files() -> list[Path]:
    """The fixtures' (and real logs') step logs with straggler-detector reports, and two without."""
    files = _files()
    some = [p for p in files if "/Rnk: " in p.read_text(errors="replace")]
    return some + [p for p in files if p not in some][:2]


@pytest.mark.parametrize("path", _straggler_files(), ids=lambda p: p.name)
def test_files_grown(path: Path) -> None:
    lines = path.read_text(errors="replace").splitlines()
    _same(lines)
    _same(_grown(lines, S._MEG_MIN + 300))
