"""meg11: a big training-log chunk's Megatron timer entries found once (`step_log.meg_entry_lines`, cut by
offsets on ASCII lines), handed to the lane and left out of `_mixed`'s scans for the NCCL/PyTorch lines;
against the code it replaced, verbatim in tests/parsers/_meg11_ref.py: `_meg_entries` on entry lines and
their mutations, whole `_mixed.parse` results on generated Megatron logs (the lane's, the benchmark's, with
NCCL lines, mutated lines, timer names holding family literals, CRLF, non-ASCII lines), fixtures and real
logs grown past the big-chunk size."""

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
from tests.parsers import _meg11_ref as R  # noqa: N812
from tests.parsers.test_hf10 import _hf_log
from tests.parsers.test_step_meg_entries import _GOOD, _ODD
from tests.parsers.test_step_megatron_lane import _log
from tests.parsers.test_steplog_s8 import _GENS, _files, _grown

# ----------------------------------------------------------------------------- _meg_entries


def _entries_same(lines: list[str | None], ascii: bool) -> None:
    text = pl.Series("t", lines, dtype=pl.String)
    with S.ascii_scope(ascii):
        got = S._meg_entries(text)
        want = R._meg_entries(text)
    # (an entry without srun envelope has rank `_NO_SRUN` since, where the code before found none:
    # test_step_meg_entries checks those against the capture)
    bare = (got.get_column("rank") == S._NO_SRUN).fill_null(False)
    assert all(want.filter(bare).select(pl.all().is_null().all()).row(0))
    got = got.select(pl.when(~pl.lit(bare)).then(pl.col(c)).alias(c) for c in got.columns)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True), [
        (x, a, b) for x, a, b in zip(lines, got.iter_rows(), want.iter_rows(), strict=True) if a != b
    ]


_ASCII_ODD = [x for x in _ODD if x is None or x.isascii()]


def test_entries_ascii_cut() -> None:
    good = list(_GOOD)
    _entries_same(good * 40, True)  # (one offset)
    _entries_same(good * 40 + _ASCII_ODD, True)  # (a few other offsets, a null: the split)
    _entries_same([x for x in _ASCII_ODD if x is not None] + good * 40, True)
    _entries_same([x for x in _ASCII_ODD if x is not None] * 3, True)  # (offsets of their own)
    _entries_same([], True)
    _entries_same(list(_GOOD + _ODD), False)
    _entries_same(["3:  a ..: (1, 2)"] * 100 + ["no cut here"], True)  # (a line without `: (`)


_ALPHABET = " .:()0123456789,ab-_/\t\r\n"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_GOOD), st.integers(0, 80), st.integers(0, 3), st.text(_ALPHABET, max_size=3)
        ),
        max_size=60,
    ),
    st.integers(0, 40),
)
def test_entries_ascii_mutated(edits: list[tuple[str, int, int, str]], n_good: int) -> None:
    lines = [line[:at] + put + line[at + cut :] for line, at, cut, put in edits]
    _entries_same(lines + [_GOOD[0]] * n_good, True)


# ----------------------------------------------------------------------------- the scans left out


def test_entry_safe() -> None:
    assert M.ENTRY_SAFE


def _edge_pieces() -> list[str]:
    return [
        "> ", ">", "stdout: ", "stderr P ", "[1,2]<stdout>:", "[1,2]<stderr>: ", "(worker pid=12) ",
        "(w pid=1, ip=10.0.0.1) ", " 3: ", "[default0]:", "[rank3]: ", "[host-1.a:12]", "[rank: 3] ",
        "node7: ", "10.0.0.1: ", "2024-01-01 00:00:00 ", "2024-01-01T00:00:00.5+01:00: ", "=", "-", "^",
        "]:", ") ABC", " ", "\t", "x", "1", "(", ")",
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_edge_pieces()), max_size=8), st.sampled_from(["", "1, 2", "1.5, 2.25"]))
def test_edges_never_end_in_a_parenthesis(pieces: list[str], nums: str) -> None:
    """`_EDGES` (line ends of the family's lines, lines of prefixes only) matches no line ending with `)`
    (what `_mixed._entry_lines` leaves out of its scan: a timer entry ends with its numbers' `)`)."""
    line = "".join(pieces) + nums + ")"
    assert not re.search(M._EDGES, line)
    assert not re.search(M._EDGES, line.replace(" ", "\u2003"))


# ----------------------------------------------------------------------------- whole chunks


def _ctx(first: int = 1) -> FileContext:
    return FileContext(path="n1/train.log", node="n1", first_line=first, year_hint=2026, collected_at=None)


def _same(lines: list[str | None], first: int = 1) -> ParseResult:
    s = pl.Series("literal", lines, dtype=pl.String)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(S, "_phases", R._phases)
        m.setattr(S, "_rows_gathered", R._rows_gathered)
        want = R.parse(S, s, _ctx(first))
    got = M.parse(S, s, _ctx(first))
    assert_same_result(got, want)
    return got


_NCCL = (
    "{r:2}: gpu-node-1:2011{r:02d}:2012{r:02d} [{g}] NCCL INFO Channel 0{g}/0 : {g}[{g}] -> 0[0] via P2P/CUMEM/read",
    "{r:2}: gpu-node-1:2011{r:02d}:2012{r:02d} [{g}] NCCL INFO comm 0x23fa4351d33 rank {g} nRanks 8 nNodes 4 "
    "localRanks 8 localRank {g} MNNVL 0",
    "{r:2}: gpu-node-1:2011{r:02d}:2012{r:02d} [{g}] NCCL WARN NET/IB : Got async event : port error",
)


def _with_nccl(lines: list[str], rnd: random.Random, share: float) -> list[str]:
    out = []
    for line in lines:
        out.append(line)
        if rnd.random() < share:
            r = rnd.randrange(16)
            out.append(rnd.choice(_NCCL).format(r=r, g=r % 8))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lane_logs_with_nccl_lines(seed: int) -> None:
    rnd = random.Random(seed)
    lines = _with_nccl(_log(seed, k=14), rnd, 0.05)
    got = _same(lines)
    assert got.tables["steps"].height > 4000


_MUT = " .:()0123456789,ab-_/[]|\u00e9\u2003\r"


@pytest.mark.parametrize(
    ("seed", "how"),
    [
        (4, "mutated"),
        (5, "crlf"),
        (6, "unicode"),
        (7, "error-name"),
        (8, "literal-name"),
        (9, "source-name"),
        (10, "no-nccl"),
        (11, "cut"),
    ],
)
def test_megatron_logs_varied(seed: int, how: str) -> None:
    rnd = random.Random(seed)
    lines = _log(seed, n_iter=4200, k=14)
    if how != "no-nccl":
        lines = _with_nccl(lines, rnd, 0.03)
    if how == "mutated":
        lines = [mutated(rnd, x, _MUT, 3, 3) if rnd.random() < 0.002 else x for x in lines]
    elif how == "crlf":
        lines = [x + "\r" if rnd.random() < 0.001 else x for x in lines]
    elif how == "unicode":
        lines[rnd.randrange(len(lines))] += " \u00e9"
        lines = [x.replace("    ", "  \u2003 ", 1) if rnd.random() < 0.001 else x for x in lines]
    elif how == "error-name":  # (a timer name holding a family literal: the scans read every line)
        lines = [x.replace("optimizer-inner-step", "Error-inner-step") for x in lines]
    elif how == "literal-name":
        lines = [x.replace("all-grads-sync", "c10d-sync") for x in lines]
    elif how == "source-name":
        lines = [x.replace("     optimizer ..", "     x.py:12] ..") for x in lines]
    elif how == "cut":
        lines = lines[rnd.randrange(5, 40) : -rnd.randrange(5, 40)]
    _same(lines, first=rnd.choice([1, 1001]))


def test_benchmark_megatron_log() -> None:
    """The benchmark's generator (NCCL init lines, arguments, stragglers), two pieces of ~70k lines."""
    gen = big_steps._megatron(big_steps._Job(0, 4, 8))
    _same(list(itertools.islice(gen, 70_000)))
    _same(list(itertools.islice(gen, 70_000)), first=70_001)


def test_short_and_other_chunks() -> None:
    rnd = random.Random(12)
    lines = _with_nccl(_log(12, n_iter=400, k=14), rnd, 0.05)  # (entries found, too few for the lane)
    assert len(lines) >= S._MEG_MIN
    _same(lines)
    _same(lines[: S._MEG_MIN - 1])
    _same([x if i % 7 else None for i, x in enumerate(lines)])


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_files_grown(path: Path) -> None:
    lines = path.read_text(errors="replace").splitlines()
    _same(_grown(lines, S._MEG_MIN + 300))


_HEADS = Path("/tmp/s11/heads/megatron/gpu-node-001/train.log")


@pytest.mark.skipif(not _HEADS.exists(), reason="the benchmark's Megatron head is not here")
def test_benchmark_head() -> None:
    data = _HEADS.read_bytes()[: 6 << 20]
    lines = data.decode(errors="replace").splitlines()[:-1]
    _same(lines)


# ----------------------------------------------------------------------------- _phases


def _rows(n: int, timers: str, rnd: random.Random) -> pl.DataFrame:
    names = ["forward-backward", "forward-compute", "backward-compute", "optimizer", "batch-generator", "x"]

    def one() -> list[dict] | None:
        if timers == "empty" or (timers == "some" and rnd.random() < 0.7):
            return [] if rnd.random() < 0.9 else None
        return [
            {"name": rnd.choice(names), "ms": None, "min_ms": rnd.uniform(0, 9), "max_ms": rnd.uniform(9, 99),
             "min_rank": None, "max_rank": None}
            for _ in range(rnd.randint(0, 5))
        ]

    df = pl.DataFrame({"line": list(range(n))}).with_columns(
        **{c: pl.lit(None, dtype=pl.Float64) for c in S.g.PHASES}
    )
    if timers == "scalar":  # (one value put in for every row, as `_rows_gathered` does)
        return df.with_columns(timers=pl.lit([], dtype=pl.List(S._TIMER)))
    return df.with_columns(timers=pl.Series([one() for _ in range(n)], dtype=pl.List(S._TIMER)))


@pytest.mark.parametrize("timers", ["scalar", "empty", "some", "all"])
@pytest.mark.parametrize("n", [0, 1, 2, 50])
def test_phases(timers: str, n: int) -> None:
    rows = _rows(n, timers, random.Random(n))
    got, want = S._phases(rows), R._phases(rows)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)


@pytest.mark.parametrize("seed", [1, 2])
def test_hf_logs(seed: int) -> None:
    rnd = random.Random(seed)
    _same(_hf_log(rnd, 20000))
    _same(_hf_log(rnd, 5000))


@pytest.mark.parametrize("gen", sorted(_GENS))
@pytest.mark.parametrize("seed", [1, 2])
def test_other_logs_rows(gen: str, seed: int) -> None:
    """`_rows_gathered` (single fragments' rows gathered on the columns they read when no fragment has
    timers) against the old one on the synthetic logs of test_steplog_s8: DeepSpeed one-line timers, HF
    bars and dicts, Megatron iteration lines with timer blocks, some lines mutated."""
    rnd = random.Random(seed)
    lines = list(_GENS[gen](rnd, 3000))
    lines = [mutated(rnd, x, _MUT, 2, 3) if rnd.random() < 0.01 else x for x in lines]
    _same(lines)
