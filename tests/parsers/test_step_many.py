"""`step_log.parse_many` gives what `step_log.parse` gives file by file: the same tables (rows, order, dtypes,
values), accounting, examples, `partial` and `node`, on the fixtures, on batches of variants that probe the
rules spanning lines (stream windows, banner ranks, block headers, HF total steps, line gaps) and on random
files built from fixture lines."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from parsers import step_log
from parsers.base import FileContext, ParseResult, lines_from_bytes

FIXTURES = Path(__file__).parent.parent / "fixtures"
STEP_FIXTURES = sorted(p for p in (FIXTURES / "step-log").glob("*.log"))
MIXED_FIXTURE = FIXTURES / "nccl" / "nccl_2.21_mixed_training_log_coll_steps_watchdog_last_error.log"


def _lines(path: Path) -> pl.Series:
    return lines_from_bytes(path.read_bytes())


def _ctx(i: int, name: str = "train.log", year: int | None = 2025, first_line: int = 1) -> FileContext:
    return FileContext(path=f"node{i:03d}/{name}", node=f"node{i:03d}", first_line=first_line, year_hint=year)


def _series(lines: list[str]) -> pl.Series:
    return pl.Series("text", lines, dtype=pl.String)


def _assert_same(got: ParseResult, want: ParseResult, what: str) -> None:
    assert (got.parsed, got.unrecognized, got.unrecognized_examples, got.notes, got.partial, got.node) == (
        want.parsed,
        want.unrecognized,
        want.unrecognized_examples,
        want.notes,
        want.partial,
        want.node,
    ), what
    assert sorted(got.tables) == sorted(want.tables), what
    for name, table in want.tables.items():
        assert got.tables[name].schema == table.schema, (what, name)
        assert got.tables[name].equals(table, null_equal=True), (what, name, got.tables[name], table)


def _check(items: list[tuple[pl.Series, FileContext]], batched: bool = True) -> None:
    """parse_many (and, when `batched`, the batch path itself, which does not fall back on errors) == parse"""
    want = [step_log.parse(lines, ctx) for lines, ctx in items]
    runs = [step_log.parse_many(items)]
    if batched:
        runs.append(step_log._parse_batch(items))
    for got in runs:
        assert len(got) == len(want)
        for (_, ctx), g, w in zip(items, got, want, strict=True):
            _assert_same(g, w, ctx.path)


def test_every_fixture_in_one_batch_and_in_small_shuffled_ones() -> None:
    items = [(_lines(p), _ctx(i, p.name)) for i, p in enumerate(STEP_FIXTURES)]
    items.append((_lines(MIXED_FIXTURE), _ctx(999, MIXED_FIXTURE.name)))
    _check(items)
    order = list(range(len(items)))
    random.Random(7).shuffle(order)
    for k in range(0, len(order), 5):
        _check([items[i] for i in order[k : k + 5]])


def test_batch_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the files whose reading divides on a one-row frame go to `parse` (none of these)."""
    names = (
        "torchtitan_rank0_prefix_grad_norm.log",
        "synthetic_hf_tqdm_carriage_returns_dicts_summary.log",
        "synthetic_megatron_srun_minmax_timers_straggler_detector.log",
        "composer_llmfoundry_per_rank_stdout_dump.log",
    )
    items = [(_lines(FIXTURES / "step-log" / n), _ctx(i, n)) for i, n in enumerate(names)]
    want = [step_log.parse(lines, ctx) for lines, ctx in items]
    calls: list[str] = []
    real = step_log.parse

    def counted(lines: pl.Series, ctx: FileContext) -> ParseResult:
        calls.append(ctx.path)
        return real(lines, ctx)

    monkeypatch.setattr(step_log, "parse", counted)
    got = step_log.parse_many(items)
    assert calls == []
    for (_, ctx), g, w in zip(items, got, want, strict=True):
        _assert_same(g, w, ctx.path)


MEGATRON = (
    "[2024-05-01 10:00:{s:02d}] iteration {i:>8}/ 1000 | consumed samples: {c} | "
    "elapsed time per iteration (ms): {ms} | learning rate: 1.0E-04 | global batch size: 8 | "
    "lm loss: 2.5E+00 | loss scale: 1.0 | "
    "number of skipped iterations: 0 | number of nan iterations: 0 |"
)


def _megatron(first: int, n: int, ms: str = "1234.5") -> list[str]:
    return [MEGATRON.format(s=(first + i) % 60, i=first + i, c=8 * (first + i), ms=ms) for i in range(n)]


def _variants() -> list[list[str]]:
    titan = _lines(FIXTURES / "step-log" / "torchtitan_rank0_prefix_grad_norm.log").to_list()
    timers = _lines(
        FIXTURES / "step-log" / "synthetic_megatron_srun_minmax_timers_straggler_detector.log"
    ).to_list()
    hf = _lines(FIXTURES / "step-log" / "synthetic_hf_tqdm_carriage_returns_dicts_summary.log").to_list()
    composer = _lines(FIXTURES / "step-log" / "composer_llmfoundry_per_rank_stdout_dump.log").to_list()
    hdr = [i for i, t in enumerate(timers) if "across ranks" in t]
    begin = [i for i, t in enumerate(composer) if "Begin" in t and "global rank" in t]
    return [
        titan,
        [t + "\r" for t in titan],  # CRLF
        [f"3: [default1]:{t}" for t in titan],  # launcher prefixes
        titan[:-1] + [titan[-1][: len(titan[-1]) // 2]],  # truncated last line
        [],  # empty file
        ["", "   ", ""],  # blank lines only
        ["nothing to see here", "neither here", "x" * 700],  # only unknown lines
        _megatron(1, 20) + [_megatron(21, 1)[0][:-30]],  # truncated Megatron line: partial
        _megatron(5, 1, "52.0"),  # one iteration line: a one-row division (read by parse)
        [  # one row with timers: `_phases` on a one-row frame (read by parse)
            "step:  1  loss:  2.0000  memory: 10.00GiB(10.00%)  tps: 1,000  tflops: 100.00  mfu: 10.00%",
            "(min, max) time across ranks (ms):",
            "    optimizer ...................: (50.00, 52.00)",
        ],
        _megatron(1, 3, "1000.1") + timers[hdr[0] : hdr[0] + 3],  # a timer header at the end ...
        timers[hdr[0] + 1 : hdr[0] + 6] + _megatron(7, 2),  # ... entries at the start of the next file
        composer[: begin[0] + 1] if begin else composer[:5],  # a banner left open ...
        _megatron(1, 4),  # ... does not give this file its rank
        hf,  # HF totals and bars
        [t for t in hf if "Total optimization steps" not in t],  # bars without totals
        ["node7: " + t for t in _megatron(1, 5)],  # a pdsh host: node of the file
        [f"[rank{r}]:" + t for r in (0, 1) for t in titan[:40]],  # two ranks
        timers,
        _megatron(100, 3) + [""] * 3 + _megatron(103, 3),
    ]


def test_variants_in_one_batch_and_pairwise() -> None:
    files = _variants()
    items = [(_series(lines), _ctx(i)) for i, lines in enumerate(files)]
    _check(items)
    for i in range(len(items) - 1):  # each file right after the one before it
        _check([items[i], items[i + 1]])
    _check(items[::-1])


def test_other_first_lines_and_same_paths() -> None:
    files = _variants()[:6]
    items = [(_series(lines), _ctx(0, first_line=1 + 7 * i)) for i, lines in enumerate(files)]
    _check(items)


def test_years_that_differ_fall_back() -> None:
    files = _variants()[:3]
    items = [(_series(lines), _ctx(i, year=2024 + i)) for i, lines in enumerate(files)]
    _check(items, batched=False)
    items = [(_series(["05-01 10:00:00.123 step: 1  loss: 2.0"]), _ctx(i, year=None)) for i in range(2)]
    _check(items)
    items = [
        (_series(["I0501 10:00:01.000000 1 train.py:1] completed step: 1, seconds: 1.5, loss: 2.0"]), c)
        for c in (
            FileContext(path="a", node="a", collected_at=datetime(2023, 5, 2)),
            FileContext(path="b", node="b", collected_at=datetime(2024, 5, 2)),
        )
    ]
    _check(items, batched=False)


def test_random_files_of_fixture_lines() -> None:
    pool = [_lines(p).to_list() for p in STEP_FIXTURES]
    rnd = random.Random(2026)
    for _ in range(6):
        items = []
        for i in range(rnd.randint(2, 7)):
            lines: list[str] = []
            for _ in range(rnd.randint(0, 3)):
                src = rnd.choice(pool)
                a = rnd.randrange(len(src))
                lines += src[a : a + rnd.randint(1, 60)]
            if rnd.random() < 0.2:
                lines = [t + "\r" for t in lines]
            if rnd.random() < 0.2:
                lines = [f"{rnd.randint(0, 3)}: " + t for t in lines]
            items.append((_series(lines), _ctx(i, year=2025)))
        _check(items)


def _bars(n: int, per_line: int) -> list[str]:
    """tqdm redraws of `n` steps, `per_line` in each physical line (`\\r`-separated), HF dicts between."""
    bars = [
        f"{100 * i // n:3d}%|##   | {i}/{n} [00:{i % 60:02d}<01:00,  {1 + i % 7}.{i % 10}1it/s, loss=2.0]"
        for i in range(1, n + 1)
    ]
    out = ["{'loss': 2.1, 'learning_rate': 1e-05, 'epoch': 0.5}"]
    for k in range(0, n, per_line):
        out += ["\r".join(bars[k : k + per_line]), "{'loss': 2.1, 'learning_rate': 1e-05, 'epoch': 0.5}"]
    return out


def test_rows_of_one_physical_line_keep_their_order() -> None:
    """Rows sharing a line (bar redraws) are sorted stably: in segment order, whatever is in the batch."""
    items = [
        (_series(_bars(n, per)), _ctx(i)) for i, (n, per) in enumerate(((450, 400), (300, 7), (120, 120)))
    ]
    _check(items)
    for lines, ctx in items:
        steps = step_log.parse(lines, ctx).tables["steps"]
        assert steps.get_column("step").drop_nulls().is_sorted()
