# ruff: noqa: E501
"""nccl11's fast lane gives what the code it replaces gives (the references kept verbatim in `_nccl11_ref`).

`_fast_lane` groups a COLL-heavy chunk's lines holding `: opCount ` by what they hold before it and after their
first ` count ` (`_coll_groups`) and reads each strict group once (`_coll_read`) before any per-line head; the
other lines take the per-line reading as before (`_strict_coll` finds the strict COLL lines among them). The
lane's `rows` (a head per record) and `texts` are made only when asked (`_fast_before` for a bare version
line's host, `_full_frame`, `_may_wrap`, `_drop_fast`).

Whole readings are compared: `nccl.parse`, `torch_distributed.parse`, the mixed training-log reading and the
family rows (understood lines, notes, hosts, tables) with the references patched in (`_REFS`) against the module
as it is, with the groups read from the first candidate line on (`_COLL_GROUPS_MIN` = 1) and at the threshold
as shipped: on the fixtures, the real logs, generated NCCL logs (every launcher prefix, COLL on and off) as they
are and with mutated lines, and random mixes of awkward NCCL lines (odd COLL ops, middles and tails, non-ASCII
text, WARN-level COLL lines, envelopes that keep a line off the lane).
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed, nccl, step_log
from parsers import torch_distributed as td
from parsers.base import HARNESS_LINE, FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result, mutated
from tests.parsers import _nccl11_ref as R  # noqa: N812
from tests.parsers.test_nccl_fast import COLL, ENVELOPES, HEADS, LEVELS, MESSAGES, OTHER, nccl_lines

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")
FILES = sorted(
    p
    for d in ("nccl", "torch-distributed", "nccl-tests", "step-log")
    for p in (FIX / d).glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)
REAL_FILES = sorted(p for d in ("nccl", "steps") for p in (REAL / d).glob("*") if p.is_file())
_REFS = (
    "FastLane",
    "_empty_lane",
    "_fast_lane",
    "_nccl_rows",
    "family_rows_frame",
    "_family_rows_frame",
    "_full_frame",
    "_drop_fast",
    "_may_wrap",
)


def _read(
    lines: pl.Series, first_line: int, mp: pytest.MonkeyPatch, refs: bool, least: int | None = None, every: bool = True
) -> list[object]:
    with mp.context() as m:
        if refs:
            for name in _REFS:
                m.setattr(nccl, name, getattr(R, name))
        elif least is not None:
            m.setattr(nccl, "_COLL_GROUPS_MIN", least)
        ctx = FileContext(path="x.log", node="node-x", first_line=first_line, year_hint=2025)
        fam = nccl.family_rows(lines, ctx)
        return [
            nccl.parse(lines, ctx),
            *((td.parse(lines, ctx), _mixed.parse(step_log, lines, ctx)) if every else ()),
            (fam.understood.to_list(), fam.notes, fam.hosts, dict(fam.tables)),
        ]


def _same(a: list[object], b: list[object]) -> None:
    for x, y in zip(a[:-1], b[:-1], strict=True):
        assert isinstance(x, ParseResult) and isinstance(y, ParseResult)
        assert_same_result(x, y)
    (ua, na, ha, ta), (ub, nb, hb, tb) = a[-1], b[-1]  # type: ignore[misc]
    assert (ua, na, ha) == (ub, nb, hb)
    assert list(ta) == list(tb)
    for name in ta:
        assert ta[name].schema == tb[name].schema
        assert ta[name].equals(tb[name], null_equal=True), name


def same(lines: pl.Series | list[str], mp: pytest.MonkeyPatch, first_line: int = 1, every: bool = True) -> None:
    """The module reads `lines` as the references do, groups from the first candidate on and as shipped
    (`every`: also the PyTorch and the mixed training-log readings)."""
    if not isinstance(lines, pl.Series):
        lines = pl.Series("line", lines, dtype=pl.String)
    want = _read(lines, first_line, mp, refs=True, every=every)
    _same(_read(lines, first_line, mp, refs=False, least=1, every=every), want)
    if len(lines) >= nccl._COLL_GROUPS_MIN:
        _same(_read(lines, first_line, mp, refs=False, every=every), want)


def test_groups_read_the_strict_coll_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups take a chunk's strict COLL lines (and only those); odd ones take the per-line reading."""
    good = (
        " 3: gpu-a01:2101:2101 [0] NCCL INFO AllReduce: opCount {o} sendbuff 0x7f00 recvbuff 0x7f10 count 8 "
        "datatype 7 op 0 root 0 comm 0x55 [nranks=2] stream 0x3"
    )
    odd = [
        good.replace("opCount {o}", "opCount zz"),  # the middle (per line)
        good.replace("INFO", "WARN"),  # the level (per group)
        good.replace("stream 0x3", "stream 0x3 x"),  # the tail (per group)
        good.replace("AllReduce", "All_Reduce"),  # the op (per group)
        good.replace("gpu-a01", "gpu-é01"),  # non-ASCII before `: opCount ` (no key for the group)
        "[rank3]:" + good[4:],  # an envelope the lane leaves to the full path
    ]
    lines = [good.format(o=f"{i:x}") for i in range(40)] + [x.format(o="1") for x in odd] + [" 3: gpu-a01:2101:2101 [0] NCCL INFO Connected all rings"]
    series = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="x.log", node="node-x")
    monkeypatch.setattr(nccl, "_COLL_GROUPS_MIN", 1)
    cg = nccl._coll_groups(nccl.numbered(series, ctx))
    assert cg is not None and cg.cand.to_list() == [True] * 44 + [False, True, False]
    lane = nccl._fast_lane(nccl.numbered(series, ctx), ctx)
    assert lane.coll.get_column("calls").sum() == 40 and lane.n == 45  # (no head of the lane: 'gpu-é01', '[rank3]:')
    assert lane.mask.to_list() == [True] * 44 + [False, False, True]
    assert lane.rows.height == 45 and lane.rows.get_column("hc").null_count() == 0
    same(series, monkeypatch)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_same_on_fixtures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    same(lines, monkeypatch, first_line=7)


@pytest.mark.skipif(not REAL_FILES, reason="no /work/shared/real-logs here")
def test_same_on_real_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    for p in REAL_FILES:
        same(lines_from_bytes(p.read_bytes()), monkeypatch, every=p.parent.name == "nccl")


_ODD = "0123456789abcdefx:[]() é€\t\r" + "NCCLINFOWARNopCountcountsendbuffrecvbuff"


@pytest.mark.parametrize("seed", range(6))
def test_same_on_generated_logs(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every launcher prefix (srun `-l`, none, Open MPI), COLL lines on (even seeds) and off; as written and
    with mutated lines (truncations, CR, odd spacing, non-ASCII, huge numbers, tokens dropped)."""
    from bench import big_nccl

    out = tmp_path / "big.log"
    big_nccl.write(out, 0.25, seed)
    lines = lines_from_bytes(out.read_bytes()).to_list()
    same(lines, monkeypatch)
    rnd = random.Random(seed)
    bent = []
    for line in lines:
        k = rnd.randrange(40)
        if k == 0:
            line = mutated(rnd, line, _ODD, 3, 6)
        elif k == 1:
            line = line[: rnd.randrange(len(line) + 1)]
        elif k == 2:
            line += "\r"
        elif k == 3:
            line = line.replace(" ", "  ", 1) if rnd.random() < 0.5 else line.replace(" count ", " count 99999999999999999999", 1)
        elif k == 4:
            words = line.split(" ")
            del words[rnd.randrange(len(words))]
            line = " ".join(words)
        bent.append(line)
    same(bent, monkeypatch, first_line=3)


@settings(max_examples=40, deadline=None)
@given(st.lists(nccl_lines(), min_size=1, max_size=40), st.integers(1, 3))
def test_same_on_random_mixes(lines: list[str], first_line: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        same(lines, mp, first_line=first_line, every=False)


def test_same_on_a_big_random_mix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups past `_COLL_GROUPS_MIN` as shipped: mostly strict COLL lines of a few heads, odd ones among them."""
    rnd = random.Random(7)
    heads = [f"{env}{head}" for env in ENVELOPES[:8] for head in HEADS[:3]]
    lines = []
    for i in range(nccl._COLL_GROUPS_MIN + 800):
        r = rnd.random()
        if r < 0.03:
            lines.append(rnd.choice(OTHER))
        elif r < 0.1:
            lines.append(f"{rnd.choice(ENVELOPES)}{rnd.choice(HEADS)} NCCL {rnd.choice(LEVELS)} {rnd.choice(MESSAGES)}")
        else:
            tmpl = COLL[0] if r < 0.8 else rnd.choice(COLL)
            msg = tmpl.format(o=f"{i:x}", c=rnd.choice(["8", "1048576"]), m=rnd.choice(["0x55", "0x56"]), r=rnd.choice(["0", "1"]))
            lines.append(f"{rnd.choice(heads)} NCCL {'INFO' if r < 0.9 else rnd.choice(LEVELS)} {msg}")
    same(lines, monkeypatch)
