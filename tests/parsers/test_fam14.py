"""fam14: fewer polars calls where a training log's NCCL/PyTorch lines are read (`_mixed._family`, its
scans and closures, `nccl._prepare_frame`'s and `_family_rows_frame`'s literal checks fused into one select
each, the lines not in a chunk's timer entries found once for both scans); against the code it replaced,
verbatim in tests/parsers/_fam14_ref.py: whole `_mixed.parse` results and `_family` on the benchmark's
training logs cut at random lines (plain, mutated, CRLF, non-ASCII), `family_rows` on the fixtures' NCCL,
PyTorch and step logs, `_prepare_frame` on lines with links, quotes, collector timestamps and envelopes
(each alone, together, and made by one another), the whole-file checks on lines that hold their literals
in either lane, `_sparse_reach` on random closures."""

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
from parsers import nccl
from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, lines_from_bytes, numbered
from tests.conftest import assert_same_result, mutated
from tests.parsers import _fam14_ref as R  # noqa: N812

FIX = Path(__file__).parent.parent / "fixtures"


def _ctx(first: int = 1) -> FileContext:
    return FileContext(path="n1/train.log", node="n1", first_line=first, year_hint=2026, collected_at=None)


def _same_family(a: nccl.FamilyRows, b: nccl.FamilyRows) -> None:
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        x, y = a.tables[name], b.tables[name]
        assert x.schema == y.schema, name
        assert x.equals(y, null_equal=True), (name, x, y)
    assert a.understood.equals(b.understood) and a.understood.name == b.understood.name
    assert (a.notes, a.hosts, a.whole) == (b.notes, b.hosts, b.whole)
    for u, v in ((a.fast, b.fast), (a.continued, b.continued)):
        assert (u is None) == (v is None) and (u is None or u.equals(v))


def _same(lines: list[str | None], first: int = 1) -> None:
    s = pl.Series("literal", lines, dtype=pl.String)
    ctx = _ctx(first)
    assert_same_result(M.parse(S, s, ctx), R.parse(S, s, ctx))
    for ascii in {False, bool(S.is_ascii(s))}:
        (fa, na), (fb, nb) = M._family(s, ctx, ascii=ascii), R._family(s, ctx, ascii=ascii)
        assert na == nb
        _same_family(fa, fb)


_MUT = ' .:/|[]()0123456789eE+-,=^#>\u00e9\u2003\tNCLWARINFOFile"]:'
_GENS = {"megatron": big_steps._megatron, "deepspeed": big_steps._deepspeed, "titan": big_steps._torchtitan}


@pytest.mark.parametrize(
    ("gen", "seed", "how"),
    [
        ("megatron", 0, "plain"),
        ("megatron", 4, "mutated"),
        ("megatron", 12, "unicode"),
        ("megatron", 16, "small"),
        ("deepspeed", 1, "plain"),
        ("titan", 2, "plain"),
    ],
)
def test_benchmark_training_logs(gen: str, seed: int, how: str) -> None:
    """The benchmark's generators (NCCL INFO set-ups of new communicators, c10 warnings, tracebacks, a
    watchdog timeout), a piece cut at random lines past the big-chunk size (or under it: `small`)."""
    rnd = random.Random(seed)
    lines_iter = _GENS[gen](big_steps._Job(seed, 4, 8))
    size = S._MEG_MIN // 2 if how == "small" else S._MEG_MIN + 2000
    lines = list(itertools.islice(lines_iter, rnd.randrange(0, 5000), rnd.randrange(0, 5000) + size))
    if how == "mutated":  # (and CRLF ends)
        lines = [mutated(rnd, x, _MUT, 3, 4) if "NCCL" in x or rnd.random() < 0.01 else x for x in lines]
        lines = [x + "\r" if rnd.random() < 0.05 else x for x in lines]
    elif how == "unicode":
        lines = [x.replace(" ", "\u2003", 1) if "NCCL" in x and rnd.random() < 0.3 else x for x in lines]
        lines[rnd.randrange(len(lines))] += " \u00e9"
    _same(lines, first=rnd.choice([1, 1001]))


def _fixture_files() -> list[Path]:
    return sorted(
        p
        for d in ("nccl", "torch-distributed", "step-log")
        for p in (FIX / d).iterdir()
        if not p.name.endswith(".expected.jsonl") and p.stat().st_size < 2_000_000
    )


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: p.name)
def test_fixtures(path: Path) -> None:
    lines = lines_from_bytes(path.read_bytes())
    ctx = FileContext(path=path.name, node="n1", first_line=1, year_hint=2026, collected_at=None)
    _same_family(nccl.family_rows(lines, ctx), R.family_rows(lines, ctx))
    (fa, na), (fb, nb) = M._family(lines, ctx), R._family(lines, ctx)
    assert na == nb
    _same_family(fa, fb)
    if path.parent.name == "step-log":
        assert_same_result(M.parse(S, lines, ctx), R.parse(S, lines, ctx))


# ----------------------------------------------------------------------------- `_prepare_frame`

_PIECES = [
    "[link](http://x.org/a)",
    "[>q](https://h/p)",
    "> ",
    ">",
    "2024-05-01T12:00:00.123Z ",
    "2024-05-01 12:00:00,5+0200: ",
    "[1,3]<stdout>: ",
    "3: ",
    "[rank7]:",
    "[default2]:",
    "gpu-node-1:123:456 [0] NCCL INFO Channel 00/02 : 0 1",
    "NCCL WARN x",
    "plain text",
    "",
    "\u00e9 ",
]


def _prepare_same(lines: list[str | None]) -> None:
    frame = numbered(pl.Series("literal", lines, dtype=pl.String), _ctx())
    got, want = nccl._prepare_frame(frame), R._prepare_frame(frame)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 40))
def test_prepare_frame_pieces(seed: int, n: int) -> None:
    rnd = random.Random(seed)
    lines: list[str | None] = [
        "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 4))) for _ in range(n)
    ]
    lines = [mutated(rnd, x, "[]()>: \u00e9", 2, 2) if rnd.random() < 0.3 else x for x in lines]
    if rnd.random() < 0.2:
        lines.append(None)
    _prepare_same(lines)


def test_prepare_frame_big() -> None:
    """Past `_SMALL` rows the literal guards are not run (true): the same."""
    rnd = random.Random(5)
    lines = ["".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 3))) for _ in range(nccl._SMALL + 50)]
    _prepare_same(lines)
    _prepare_same([x for x in lines if ">" not in x and "http" not in x])


# ----------------------------------------------------------------------------- whole-file checks

_NCCL = "gpu-node-1:123:456 [0] NCCL INFO "
_CHECKS = [
    "Rendezvous complete for workers. Result:",
    "launch configs:",
    "Root Cause (first observed failure):",
    "Last error:",
    "  restart_count=0",
    "[0]:",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "=====",
]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_whole_file_checks(seed: int) -> None:
    """The block heads and `Last error:` in plain lines, in fast-lane NCCL records (`fast.hits`), or none."""
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(1, 30)):
        x = rnd.choice(_CHECKS + ["step 1 loss 2.0", "", _NCCL + "Connected all rings"])
        lines.append(_NCCL + x if rnd.random() < 0.3 else x)
    lines = [mutated(rnd, x, ":()= \u00e9", 1, 2) if rnd.random() < 0.2 else x for x in lines]
    s = pl.Series("literal", lines, dtype=pl.String)
    _same_family(nccl.family_rows(s, _ctx()), R.family_rows(s, _ctx()))


# ----------------------------------------------------------------------------- `_sparse_reach`


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([None, 1, 3, 16]))
def test_sparse_reach(seed: int, limit: int | None) -> None:
    rnd = random.Random(seed)
    n = rnd.randint(0, 60)
    pos = pl.Series(sorted(rnd.sample(range(200), n)), dtype=pl.Int64)
    start = pl.Series([rnd.random() < 0.2 for _ in range(n)], dtype=pl.Boolean)
    carry = pl.Series([rnd.choice([True, True, False, None]) for _ in range(n)], dtype=pl.Boolean)
    for a, b in zip(
        M._sparse_reach(pos, start, carry, limit), R._sparse_reach(pos, start, carry, limit), strict=True
    ):
        assert a.dtype == b.dtype and a.to_list() == b.to_list()
