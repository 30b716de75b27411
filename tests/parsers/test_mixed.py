"""Training stdout with step lines and NCCL/PyTorch-distributed lines: both grammars read it (parsers._mixed)."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed, nccl, step_log
from parsers.base import FileContext, ParseResult, check_accounting
from tests.conftest import assert_family_as_whole

CTX = FileContext(path="node-001/train.log", node="node-001")


def step(i: int, ms: float = 1500.0) -> str:
    return (
        f" [2026-11-29 10:{i // 60 % 60:02d}:{i % 60:02d}] iteration {i:>8}/  100000 | consumed samples: "
        f"{i * 512:>10} | elapsed time per iteration (ms): {ms:.1f} | learning rate: 1.000000E-04 | global batch "
        "size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:"
        "   0 | number of nan iterations:   0 |"
    )


def nccl_init(host: str = "node-001") -> list[str]:
    out = [f"{host}:1234:1300 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]
    for g in range(8):
        out += [
            f"{host}:1234:{1300 + g} [{g}] NCCL INFO Channel {c:02d}/0 : {g}[{g}] -> {(g + 1) % 8}[{(g + 1) % 8}] via P2P/IPC/read"
            for c in range(24)
        ]
        out.append(
            f"{host}:1234:{1300 + g} [{g}] NCCL INFO comm 0x55d0c{g}a0 rank {g} nranks 16 cudaDev {g} "
            f"busId {0x18 + g * 0x10:02x}000 commId 0x1f2e3d4c5b6a7988 - Init COMPLETE"
        )
    return out


WATCHDOG = (
    "[rank3]:[E1129 10:30:12.984683378 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=3150848, NumelOut=3150848, Timeout(ms)=600000) ran for "
    "600000 milliseconds before timing out."
)
IB_WARN = (
    "node-001:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<33092> "
    "with error 12, opcode 0, len 0, vendor err 129 (Recv)"
)


def series(lines: list[str]) -> pl.Series:
    return pl.Series("line", lines, dtype=pl.String)


def test_nccl_head_does_not_hide_the_step_times() -> None:
    """NCCL_DEBUG=INFO fills the head with init lines, so the NCCL parser wins the file: the steps are read too."""
    init = nccl_init()
    lines = series([*init, *(step(i, 1500 + i % 7) for i in range(1, 301))])
    alone = nccl.parse(lines, CTX)
    assert alone.unrecognized == 300 and "steps" not in alone.tables
    r = _mixed.parse(nccl, lines, CTX)
    assert check_accounting(r, lines) and (r.parsed, r.unrecognized) == (len(lines), 0)
    steps = r.tables["steps"]
    assert steps.height == 300
    assert steps["line"].to_list()[:2] == [len(init) + 1, len(init) + 2] and steps["line"].max() == len(lines)
    assert steps.filter(pl.col("line") == len(init) + 1)["step_time_s"].item() == pytest.approx(1.501)
    ranks = r.tables["comms"].filter(pl.col("record") == "rank")
    assert sorted(ranks["rank"].to_list()) == list(range(8))
    assert any("mixed log: 201 NCCL/PyTorch line(s) and 300 other line(s)" in n for n in r.notes)


def test_a_step_log_keeps_its_watchdog_timeout_and_nccl_warn() -> None:
    body = [step(i) for i in range(1, 200)] + [IB_WARN, WATCHDOG] + [step(i) for i in range(200, 210)]
    lines = series(body)
    alone = step_log.parse(lines, CTX)
    r = _mixed.parse(step_log, lines, CTX)
    assert check_accounting(r, lines) and r.unrecognized == 0
    assert r.tables["steps"].height == alone.tables["steps"].height == 209
    assert r.tables["steps"].equals(alone.tables["steps"])
    ev = r.tables["events"].sort("line")
    assert ev.select("kind", "line").rows() == [("nccl_ib_error", 200), ("watchdog_timeout", 201)]
    assert ev.filter(pl.col("kind") == "watchdog_timeout")["rank"].item() == 3


def test_single_grammar_chunks_are_parsed_as_before() -> None:
    pure_steps = series([step(i) for i in range(1, 50)])
    a, b = step_log.parse(pure_steps, CTX), _mixed.parse(step_log, pure_steps, CTX)
    assert (a.parsed, a.unrecognized, a.notes) == (b.parsed, b.unrecognized, b.notes)
    assert all(a.tables[t].equals(b.tables[t]) for t in a.tables)
    pure_nccl = series(nccl_init() + [IB_WARN])
    a, b = nccl.parse(pure_nccl, CTX), _mixed.parse(nccl, pure_nccl, CTX)
    assert (a.parsed, a.unrecognized, a.notes) == (b.parsed, b.unrecognized, b.notes)
    assert all(a.tables[t].equals(b.tables[t]) for t in a.tables)
    assert not _mixed.has_step_lines(pure_nccl) and not _mixed.has_family_lines(pure_steps)


KINDS = st.sampled_from(["step", "init", "warn", "watchdog", "noise", "blank"])
TEXT = {
    "step": lambda i: step(i),
    "init": lambda i: nccl_init()[i % 20],
    "warn": lambda i: IB_WARN,
    "watchdog": lambda i: WATCHDOG,
    "noise": lambda i: f"some framework chatter {i} with an Error: in it",
    "blank": lambda i: "",
}


@given(st.lists(KINDS, max_size=60), st.sampled_from(["nccl", "step-log"]))
@settings(max_examples=40, deadline=None)
def test_mixed_parse_keeps_the_accounting(kinds: list[str], winner: str) -> None:
    lines = series([TEXT[k](i + 1) for i, k in enumerate(kinds)])
    parser = nccl if winner == "nccl" else step_log
    r = _mixed.parse(parser, lines, CTX)
    assert check_accounting(r, lines)
    steps = r.tables.get("steps")
    assert (steps.height if steps is not None else 0) == kinds.count("step")
    events = r.tables.get("events")
    got = sorted(events["kind"].to_list()) if events is not None else []
    assert got == sorted(
        ["nccl_ib_error"] * kinds.count("warn") + ["watchdog_timeout"] * kinds.count("watchdog")
    )


# ------------------------------------------------------------------------- the family pass on candidate lines

FIX = Path(__file__).parent.parent / "fixtures"
FAMILY_FILES = sorted(
    p
    for d in ("nccl", "torch-distributed")
    for p in (FIX / d).glob("*")
    if p.is_file() and p.suffix in (".log", ".txt")
)
FILLER = [
    *(step(i) for i in range(1, 40)),
    "x" * 95,
    "x" * 130,
    " 3: ",
    "[rank1]:",
    "====  ",
    "   key=value",
    "  restart_count : 0",
    "",
    "plain chatter without any marker",
]


def embedded(path: Path, how: str, seed: int) -> pl.Series:
    """A fixture's lines inside step-log lines: one block, sprinkled, or each followed by 0-3 filler lines."""
    rng = random.Random(seed)
    fix = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n").split("\n")
    fill = [rng.choice(FILLER) for _ in range(3 * len(fix) + 50)]
    if how == "block":
        at = rng.randrange(len(fill))
        out = fill[:at] + fix + fill[at:]
    elif how == "sprinkle":
        pos = set(rng.sample(range(len(fix) + len(fill)), len(fix)))
        a, b = iter(fix), iter(fill)
        out = [next(a) if i in pos else next(b) for i in range(len(fix) + len(fill))]
    else:
        out = []
        for line in fix:
            out += [line, *(rng.choice(FILLER) for _ in range(rng.randrange(4)))]
    return series(out)


@pytest.mark.parametrize("path", FAMILY_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_family_pass_on_candidate_lines_equals_the_whole_chunk(path: Path) -> None:
    """`_mixed._family` reads the candidate lines (and what is read with them) only: same rows, same
    understood lines, same count as `nccl.family_rows` over every line."""
    for i, how in enumerate(("block", "sprinkle", "tail")):
        lines = embedded(path, how, i)
        ctx = FileContext(path="train.log", node="node-001", first_line=1 + 500 * i, year_hint=2025)
        assert_family_as_whole(lines, ctx)


def test_family_pass_reads_few_lines_of_a_step_log() -> None:
    """A step log with a few NCCL lines: the grammar gets those (and a blank line per gap), not every line."""
    body = [step(i) for i in range(1, 400)]
    body[100:100] = nccl_init()[:5]
    body[300:300] = [IB_WARN, WATCHDOG]
    lines = series(body)
    seen: list[int] = []
    real = nccl.family_rows_frame

    def spy(base: pl.DataFrame, ctx: FileContext, wrap_width=None):  # noqa: ANN001, ANN202
        seen.append(base.height)
        return real(base, ctx, wrap_width)

    nccl.family_rows_frame = spy
    try:
        fam, n = _mixed._family(lines, CTX)
    finally:
        nccl.family_rows_frame = real
    assert n == 7 and seen and seen[0] <= 7 + 2 + 17


def test_every_family_mark_holds_a_family_literal() -> None:
    """`_mixed.parse` looks for the marks among the lines holding a family literal only."""
    assert all(any(lit in mark for lit in _mixed.FAMILY_LITERALS) for mark in _mixed.FAMILY_MARKS)


def test_literal_tests_of_big_chunks_equal_contains_any() -> None:
    """Over `SMALL_LINES` lines a literal test is one regex alternation: the same booleans (nulls too)."""
    rnd = random.Random(3)
    sets = (
        (_mixed.FAMILY_LITERALS, _mixed._FAMILY_ANY),
        (_mixed.FAMILY_MARKS, _mixed._MARKS_ANY),
        (step_log.STEP_LINE_LITERALS, _mixed._STEP_ANY),
    )
    pool = [lit for lits, _ in sets for lit in lits] + ["", "x", "é", "\\", ".*", "(", "[", "NCCL", "ste"]
    values = [
        None if rnd.random() < 0.01 else "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 3)))
        for _ in range(_mixed.SMALL_LINES + 50)
    ]
    lines = pl.Series("line", values, dtype=pl.String)
    for lits, pattern in sets:
        got = _mixed._holds_any(lines, lits, pattern)
        assert got.to_list() == lines.str.contains_any(list(lits)).to_list()


def _same(a: ParseResult, b: ParseResult) -> None:
    assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.notes, a.partial, a.node) == (
        b.parsed, b.unrecognized, b.unrecognized_examples, b.notes, b.partial, b.node
    )
    ta = {t: df for t, df in a.tables.items() if df.height}
    tb = {t: df for t, df in b.tables.items() if df.height}
    assert ta.keys() == tb.keys() and all(ta[t].equals(tb[t], null_equal=True) for t in ta)


@given(
    st.lists(st.lists(KINDS, max_size=30), min_size=2, max_size=6),
    st.sampled_from(["nccl", "step-log"]),
    st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_parse_many_equals_parse_per_file(files: list[list[str]], winner: str, staged: bool) -> None:
    """Files that mix both grammars take `_both` (in two rounds, `STAGED`, or file by file), the others the
    parser's `parse_many`, with the results of `parse` for each file (the marks of the small step logs looked
    for in one pass over all their lines)."""
    parser = step_log if winner == "step-log" else nccl
    items = [
        (series([TEXT[k](i) for i, k in enumerate(kinds)]), FileContext(path=f"n{j}/train.log", node=f"n{j}"))
        for j, kinds in enumerate(files)
    ]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_mixed, "STAGED", staged)
        many = _mixed.parse_many(parser, items)
    for (lines, ctx), got in zip(items, many, strict=True):
        _same(got, _mixed.parse(parser, lines, ctx))


def test_parse_many_of_big_mixed_logs_in_two_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real Megatron log of 2023 (NCCL warnings, validation rules) repeated past the lane's size, with NCCL
    # init lines, next to plain step logs and an NCCL log with step lines: the two rounds give, file by file,
    # what `parse` gives (and the batch file by file, `STAGED` off)
    real = [
        x
        for x in (Path(__file__).parent.parent / "fixtures" / "step-log" / "megatron_lm_2023_gpt345m_dp4_tp2pp2.log")
        .read_text()
        .splitlines()
        if not x.startswith("#SOURCE")
    ]
    texts = [
        real * 60,
        nccl_init("node-002") + real * 55 + [WATCHDOG],
        [step(i) for i in range(300)],
        real * 3,
        [step(i) for i in range(50)] + nccl_init("node-005"),
    ]
    items = [(series(t), FileContext(path=f"n{j}/train.log", node=f"n{j}")) for j, t in enumerate(texts)]
    each = step_log.parse_each
    rounds: list[int] = []
    monkeypatch.setattr(step_log, "parse_each", lambda rests: rounds.append(len(rests)) or each(rests))
    staged = _mixed.parse_many(step_log, items)
    assert rounds == [4]  # (the other lines of the four mixed logs read in one call)
    monkeypatch.setattr(_mixed, "STAGED", False)
    apart = _mixed.parse_many(step_log, items)
    for (lines, ctx), a, b in zip(items, staged, apart, strict=True):
        _same(a, b)
        _same(a, _mixed.parse(step_log, lines, ctx))
    assert sum(r.tables["steps"].height for r in staged if "steps" in r.tables) > 1000


def test_marked_finds_the_files_holding_a_family_mark() -> None:
    items = [
        (series([step(1), step(2)]), CTX),
        (series([]), CTX),
        (series([step(3), WATCHDOG]), CTX),
        (series([IB_WARN]), CTX),
        (series([step(4)]), CTX),
    ]
    assert _mixed._marked(step_log, items) == [False, False, True, True, False]
    assert _mixed._marked(nccl, items) == [True, False, True, False, True]
