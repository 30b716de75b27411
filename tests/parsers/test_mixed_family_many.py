"""`_mixed._family_many` (the first round of `parse_many` over the files that hold both grammars) gives,
chunk by chunk, what `_mixed._family` gives: the plain chunks of one year read by one run of the family
grammar when it finds nothing in them but lines it understands, every other chunk (and every chunk of a run
that finds more) alone."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed, nccl, step_log
from parsers.base import FileContext
from tests.parsers.test_mixed import FAMILY_FILES, FILLER, WATCHDOG, nccl_init, series, step

C10_WARN = (
    "[W ProcessGroupNCCL.cpp:1692] Warning: 0NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point "
    "collectives. (function operator())"
)
RULE = "-" * 60
WRAPPED_TAIL = "    which goes on here on the next line of the terminal"
"""A line the grammar joins onto a c10 warning of 80 characters or more before it (a hard wrap)."""
FIXTURE_LINES = [
    [x for x in p.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n").split("\n")]
    for p in FAMILY_FILES
]


def _chunk(rng: random.Random, kind: str) -> list[str]:
    """Step-log lines with family lines among them: c10 warnings and rule lines (what a Megatron log holds), a
    window of a real NCCL/PyTorch fixture, or both."""
    out = [rng.choice(FILLER) for _ in range(rng.randrange(5, 40))]
    family: list[str] = []
    if kind in ("warnings", "both"):
        pool = [C10_WARN, RULE, RULE, "", step(rng.randrange(1, 99))]
        family += [rng.choice(pool) for _ in range(rng.randrange(1, 30))]
        if rng.random() < 0.1:
            family.append(WRAPPED_TAIL)
    if kind in ("fixture", "both"):
        fix = rng.choice(FIXTURE_LINES)
        at = rng.randrange(len(fix))
        family += fix[at : at + rng.randrange(1, 12)]
    for line in family:
        out.insert(rng.randrange(len(out) + 1), line)
    return out


def _ctx(k: int, year: int | None = None) -> FileContext:
    return FileContext(path=f"n{k}/train.log", node=f"n{k}", year_hint=year)


def _same(a: tuple[nccl.FamilyRows, int], b: tuple[nccl.FamilyRows, int]) -> None:
    (fa, na), (fb, nb) = a, b
    assert na == nb
    assert (fa.notes, fa.hosts) == (fb.notes, fb.hosts)
    assert fa.understood.fill_null(False).to_list() == fb.understood.fill_null(False).to_list()
    assert fa.tables.keys() == fb.tables.keys()
    for name, df in fa.tables.items():
        assert df.equals(fb.tables[name], null_equal=True), name


def _items(texts: list[list[str]], years: list[int | None] | None = None) -> list[tuple]:
    out = []
    for k, t in enumerate(texts):
        lines = series(t)
        ctx = _ctx(k, years[k] if years else None)
        out.append((lines, ctx, None, step_log.is_ascii(lines)))
    return out


def _alone(items: list[tuple]) -> list[tuple[nccl.FamilyRows, int]]:
    return [_mixed._family(lines, ctx, lit, ascii) for lines, ctx, lit, ascii in items]


@given(
    st.lists(
        st.tuples(st.sampled_from(["warnings", "fixture", "both"]), st.integers(0, 10**6)),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.sampled_from([None, 2025]), min_size=6, max_size=6),
)
@settings(max_examples=120, deadline=None)
def test_many_equals_each_chunk_alone(chunks: list[tuple[str, int]], years: list[int | None]) -> None:
    items = _items([_chunk(random.Random(seed), kind) for kind, seed in chunks], years)
    for got, want in zip(_mixed._family_many(items), _alone(items), strict=True):
        _same(got, want)


class _Runs:
    """Counts the runs of the family grammar (wrapping `nccl.family_rows_frame`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: list[int] = []
        real = nccl.family_rows_frame

        def counted(base: pl.DataFrame, *args: object, **kwargs: object) -> nccl.FamilyRows:
            self.rows.append(base.height)
            return real(base, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(nccl, "family_rows_frame", counted)


def _read(items: list[tuple], monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list]:
    """`_family_many(items)`, checked against each chunk alone, and the rows of each run of the grammar."""
    want = _alone(items)
    runs = _Runs(monkeypatch)
    got = _mixed._family_many(items)
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    return runs.rows, got


def _megatron_like(k: int) -> list[str]:
    """Iteration lines, chatter, validation lines between rule lines, c10 warnings: the family's lines (the
    rules and warnings) under `SUBSET_SHARE` of the chunk (a chunk of more is read whole: `_whole`)."""
    rng = random.Random(k)
    out = []
    for i in range(40):
        out += [step(i), "building GPT model ...", "> finished creating GPT datasets ...", RULE]
        out += ["validation loss at iteration 10 | lm loss value: 2.0E+00 |", RULE]
        if rng.random() < 0.5:
            out.append(C10_WARN)
    return out


def test_plain_chunks_are_read_by_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _items([_megatron_like(k) for k in range(4)])
    rows, got = _read(items, monkeypatch)
    assert len(rows) == 1 and rows[0] > sum(n for _, n in got)
    assert all(n > 0 for _, n in got)


def test_a_wrap_in_one_chunk_sends_every_chunk_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [_megatron_like(k) for k in range(3)]
    texts[1] += [C10_WARN, WRAPPED_TAIL]
    rows, got = _read(_items(texts), monkeypatch)
    assert len(rows) == 1 + 3  # (the run over all, which finds the wrap, then each chunk alone)
    # the wrapped tail is understood (joined onto its warning) in the chunk that holds it
    at = len(texts[1]) - 1
    assert got[1][0].understood[at]


def test_rows_found_in_one_chunk_send_every_chunk_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # a watchdog timeout (a PyTorch line, no NCCL record) gives an event: the run over all finds it
    texts = [_megatron_like(k) for k in range(3)]
    texts[2].insert(7, WATCHDOG)
    items = _items(texts)
    rows, got = _read(items, monkeypatch)
    assert len(rows) == 1 + 3
    assert "events" in got[2][0].tables and not got[0][0].tables


def test_chunks_of_other_years_are_read_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _items([_megatron_like(k) for k in range(4)], [2024, 2025, 2024, 2025])
    items[3] = (items[3][0], FileContext(path="n3/train.log", node="n3", year_hint=2025,
                                         collected_at=datetime(2025, 3, 1, tzinfo=timezone.utc)), None, True)
    rows, got = _read(items, monkeypatch)
    # (2024: files 0 and 2 together; 2025: 1 alone, 3 alone, as its collection differs)
    assert len(rows) == 3


def test_off_reads_each_chunk_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _items([_megatron_like(k) for k in range(3)])
    monkeypatch.setattr(_mixed, "FAMILY_TOGETHER", False)
    rows, _ = _read(items, monkeypatch)
    assert len(rows) == 3


def test_chunks_holding_nccl_records_are_read_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # NCCL records mostly give rows, which the run over all cannot part: no such run is tried (it would be
    # thrown away, and the chunks read twice)
    texts = [_megatron_like(k) for k in range(3)]
    texts[0] += nccl_init("n0")[:3]
    texts[2] += nccl_init("n2")[:3]
    items = _items(texts)
    rows, got = _read(items, monkeypatch)
    assert len(rows) == 3
