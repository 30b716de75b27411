"""step_log's Megatron lane (`_megatron_lane`: the rows of iteration lines and their `(min, max) time across
ranks` blocks read off captures, the other lines by the general reading) against the general reading `_parse`
of the same lines: same tables, accounting, examples, `partial` and `node`, on seeded random logs under
`srun -l` and without it (every rank's output in one stream), both those the lane takes and those it must
hand back."""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext

_TIMERS = (
    "forward-backward",
    "forward-compute",
    "backward-compute",
    "batch-generator",
    "all-grads-sync",
    "params-all-gather",
    "optimizer-copy-to-main-grad",
    "optimizer-inner-step",
    "optimizer",
    "layernorm-grads-all-reduce",
    "embedding-grads-all-reduce",
    "optimizer-clip-main-grad",
    "optimizer-count-zeros",
    "optimizer-copy-main-to-model-params",
)
_WARN = (
    "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: "
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
    "  return fn(*args, **kwargs)",
)


_SRUN_ENV = re.compile(r"^\s*[0-9]+: ")


def _log(
    seed: int,
    n_iter: int = 4300,
    extra: str | None = None,
    extra_at: int = 7,
    k: int | None = None,
    srun: bool = True,
    blocks: float = 1.0,
    dated: bool = True,
) -> list[str]:
    """A Megatron log under `srun -l` (the last of 16 ranks prints the iterations and timer blocks; the
    others chatter, sometimes between an iteration line and its block), with memory reports, validation
    lines, save-checkpoint blocks of rank 0, c10 warnings, straggler reports and blank lines. `extra`: one
    line (with `{r}` for the iteration rank) put after the `extra_at`-th line of some unit; `k`: the number
    of timers (else random: with few, the validation line lies close enough to its iteration line for a
    breakdown there to attach to it, and the lane hands back). `srun` False: the same log without `srun -l`
    (the envelopes cut off every line, `extra` too: the memory reports then lie in the unit stream). `blocks`:
    the share of iteration lines followed by their timer block (Megatron prints one only where timers are
    logged; 0: iteration lines alone). `dated` False: iteration lines without their date, as Megatron printed
    them before mid-2023 (the straggler reports keep theirs: without `srun -l` they are in the unit stream,
    where the next iteration line may take its time from one)."""
    rnd = random.Random(seed)
    last = 15
    t = datetime(2025, 5, 1, 7, 0, 0)
    out: list[str] = []
    total = 500_000
    k = rnd.randint(3, len(_TIMERS)) if k is None else k
    names = _TIMERS[:k]
    put = rnd.randrange(100, n_iter - 100)
    for it in range(1, n_iter + 1):
        t += timedelta(seconds=rnd.uniform(0.5, 5))
        dt = rnd.uniform(500, 5000)
        date = f"[{t:%Y-%m-%d %H:%M:%S}] " if dated else ""
        unit = [
            f"{last:2}:  {date}iteration {it:>8}/{total:>8} | "
            f"consumed samples: {it * 512:>12} | elapsed time per iteration (ms): {dt:.1f} | "
            f"throughput per GPU (TFLOP/s/GPU): {rnd.uniform(100, 500):.1f} | "
            f"learning rate: {3e-4 * min(1.0, it / 2000):.6E} | global batch size:   512 | "
            f"lm loss: {rnd.uniform(1.5, 9):.6E} | loss scale: 1.0 | grad norm: {rnd.uniform(0.1, 3):.3f} | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |"
        ]
        if rnd.random() < 0.03:  # memory reports of other ranks between the iteration line and its block
            mem = "(after {it} iterations) memory (MB) | allocated: 41234.5"
            unit += [f"{r:2}: [Rank {r}] {mem.format(it=it)}" for r in (0, 8)]
        if blocks >= 1 or rnd.random() < blocks:
            unit.append(f"{last:2}: (min, max) time across ranks (ms):")
            for name in names:
                lo = rnd.uniform(10, dt)
                dots = "." * max(3, 40 - len(name))
                unit.append(f"{last:2}:     {name} {dots}: ({lo:.2f}, {lo * 1.01:.2f})")
        if extra is not None and it == put:
            unit.insert(min(extra_at, len(unit)), extra.format(r=last))
        out += unit
        x = rnd.random()
        if x < 0.05:
            r = rnd.randrange(16)
            out += [f"{r:2}: {_WARN[0]}", f"{r:2}: {_WARN[1]}"]
        elif x < 0.07:
            r = rnd.randrange(16)
            c10 = "[W501 07:00:00.000000000 ProcessGroupNCCL.cpp:4561] Guessing device ID"
            out.append(f"{r:2}: [rank{r}]:{c10}")
        elif x < 0.08:
            out.append("")
        if it % 100 == 0:
            out.append(
                f" 0: INFO:megatron.core.utils:[{t:%Y-%m-%d %H:%M:%S}] | MnRtt/Rnk: 3588.90ms/3 | MxRtt/Rnk: "
                f"4386.44ms/5 | MnPwr/Rnk: 612000W/5 | MxPwr/Rnk: 700000W/3"
            )
        if it % 500 == 0:
            val = f"{last:2}:  validation loss at iteration {it} | lm loss value: 2.0E+00 | "
            out += [f"{last:2}: {'-' * 60}", val]
        if it % 1000 == 0:
            out += [
                f" 0: saving checkpoint at iteration {it:>7} to /ckpt in torch_dist format",
                " 0: (min, max) time across ranks (ms):",
                " 0:     save-checkpoint ................................: (21234.50, 21301.70)",
            ]
    return out if srun else [_SRUN_ENV.sub("", x, count=1) for x in out]


def _ctx() -> FileContext:
    return FileContext(path="n1/train.log", node="n1", first_line=1, year_hint=2026, collected_at=None)


def _same(lines: list[str], taken: bool | None) -> None:
    """`parse` (the lane when it takes the lines) is `_parse`; `taken`: whether the lane must take them."""
    s = pl.Series("literal", lines, dtype=pl.String)
    want = S._parse(s, _ctx())
    lane = S._megatron_lane(s, _ctx())
    if taken is not None:
        assert (lane is not None) == taken
    got = S.parse(s, _ctx())
    assert set(got.tables) == set(want.tables)
    for name, df in want.tables.items():
        assert got.tables[name].schema == df.schema
        assert got.tables[name].equals(df, null_equal=True), name
    assert (got.parsed, got.unrecognized, got.partial, got.node) == (
        want.parsed,
        want.unrecognized,
        want.partial,
        want.node,
    )
    assert got.unrecognized_examples == want.unrecognized_examples
    assert got.notes == want.notes


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_lane_takes_megatron_logs(seed: int, srun: bool) -> None:
    _same(_log(seed, k=len(_TIMERS), srun=srun), taken=True)


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("seed", [3, 6, 7])
def test_lane_or_not_same_rows(seed: int, srun: bool) -> None:
    _same(_log(seed, srun=srun), taken=None)


def test_lane_takes_a_log_without_srun_envelope() -> None:
    """Megatron's output without `srun -l`: its memory reports, warnings of every rank and straggler reports
    in the unit stream, some between an iteration line and its block; rank null, key `|`."""
    lines = _log(11, k=len(_TIMERS), srun=False)
    assert sum("iterations) memory" in x for x in lines) > 10
    _same(lines, taken=True)
    steps = S.parse(pl.Series(lines), _ctx()).tables["steps"]
    assert steps.height == 4300 and steps.get_column("rank").null_count() == steps.height


def test_lane_blank_lines_cut_blocks_of_the_stream_without_envelope() -> None:
    """A log of lane-shaped and blank lines only, without `srun -l`: the blank lines are in the unit stream
    (where one cuts a block), not left out as the blank lines of a stream that holds no unit."""
    shaped = re.compile(
        r"^( *\[.*\] iteration .*|\(min, max\) time across ranks \(ms\):| +\S+ \.\.+: \(.*\)|)$"
    )
    lines = [x for x in _log(4, k=len(_TIMERS), srun=False) if shaped.match(x)]
    _same(lines, taken=True)
    at = [i for i, x in enumerate(lines) if "] iteration " in x][1200]
    _same([*lines[: at + 5], "", *lines[at + 5 :]], taken=True)
    save = next(i for i, x in enumerate(lines) if "save-checkpoint" in x)
    _same([*lines[:save], "", *lines[save:]], taken=True)


def test_lane_hands_back_a_breakdown_near_an_iteration_line_without_envelope() -> None:
    lines = _log(12, k=len(_TIMERS), srun=False)
    at = [i for i, x in enumerate(lines) if "] iteration " in x][300]
    lines.insert(at + 1, "[Rank 0] (after 5 iterations) memory (MB) | allocated: 1.0 | step: 3")
    _same(lines, taken=False)


@pytest.mark.parametrize("srun", [True, False])
def test_lane_takes_a_cut_first_block(srun: bool) -> None:
    lines = _log(3, k=len(_TIMERS), srun=srun)
    head = next(i for i, x in enumerate(lines) if "iteration" in x)
    _same(lines[head + 3 :], taken=True)  # (entries without their iteration line and header)


_ROW = "{r}: [2025-05-01 08:00:00] iteration 5/ 10 | elapsed time per iteration (ms): 1.0 |"


@pytest.mark.parametrize(
    ("extra", "at"),
    [
        (_ROW, 1),  # another row between an iteration line and its block
        (_ROW, 99),  # another row after a block
        ("{r}:     extra-timer ......: (1.0, 2.0)x", 99),  # no entry of the lane, after a block
        ("{r}:     extra-timer ......: 1.5", 99),  # a timer entry of another kind continuing the block
        ("{r}:     extra-timer ......: (1.0, 2.0)", 2),  # an entry right after the header
        ("{r}: step: 3 loss: 1.0", 1),  # a gate between the iteration line and its header
        ("{r}: some text with a | time (ms) | marker", 99),  # a gate after a block
        ("[rank{r}]: a line without srun envelope in the unit stream", 99),
        ("{r}: \x1b[32mcoloured\x1b[0m", 99),
        ("{r}: [32mpasted colour[0m", 99),
        ("", 1),
        ("2025-05-01T07:00:00Z {r}: some chatter", 5),  # a collector's time before the envelope, in a block
        ("07:00:00.123 [rank3]: some chatter ..", 5),
        # an entry behind a Python logging prefix: after a block, in it, between an iteration line and it
        ("{r}: INFO:megatron.core.timers:    extra-timer ....: (1.0, 2.0)", 99),
        ("{r}: INFO:megatron.core.timers:    extra-timer ....: (1.0, 2.0)", 5),
        ("{r}: INFO:megatron.core.timers:    extra-timer ....: 1.5", 1),
        ("{r}: INFO:megatron.core.timers:(min, max) time across ranks (ms):", 5),
    ],
)
@pytest.mark.parametrize("srun", [True, False])
def test_lane_hands_back_or_reads_the_same(extra: str, at: int, srun: bool) -> None:
    _same(_log(4, extra=extra, extra_at=at, k=len(_TIMERS), srun=srun), taken=None)


@pytest.mark.parametrize("srun", [True, False])
def test_lane_hands_back_rows_elsewhere(srun: bool) -> None:
    """A row the lane does not read (a Hugging Face dict line) after a block: the general reading reads it
    all."""
    hf = "{r}: {{'loss': 1.0, 'learning_rate': 1e-05, 'epoch': 0.1}}"
    _same(_log(5, extra=hf, extra_at=99, k=len(_TIMERS), srun=srun), taken=False)


@pytest.mark.parametrize("srun", [True, False])
def test_lane_takes_another_iteration_line_after_a_block(srun: bool) -> None:
    """An iteration line of the stream after a block, before the next unit: a unit of its own, without
    timers."""
    _same(_log(5, extra=_ROW, extra_at=99, k=len(_TIMERS), srun=srun), taken=True)


def _without_validation(lines: list[str]) -> list[str]:
    """`lines` without the validation reports (and the rule above each)."""
    drop = [i for i, x in enumerate(lines) if "validation loss" in x]
    gone = set(drop) | {i - 1 for i in drop}
    return [x for i, x in enumerate(lines) if i not in gone]


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("validation", [True, False])
@pytest.mark.parametrize(("seed", "blocks"), [(21, 0.0), (22, 0.5), (23, 0.97)])
def test_lane_iteration_lines_without_blocks(seed: int, blocks: float, validation: bool, srun: bool) -> None:
    """Iteration lines without a timer block after them (none, or some): each is a unit without timers. The
    lane hands back where a validation report lies within `ATTACH_GAP` lines of an iteration line, no longer
    kept apart by a block (a breakdown could attach), or, without `srun -l`, a save-checkpoint block does."""
    lines = _log(seed, k=len(_TIMERS), srun=srun, blocks=blocks)
    if not validation:
        lines = _without_validation(lines)
    _same(lines, taken=True if srun and not validation else None)
    if blocks == 0.0:
        steps = S.parse(pl.Series(lines), _ctx()).tables["steps"]
        assert steps.height == 4300 and steps.get_column("step_time_s").null_count() == 0


def test_lane_iteration_lines_between_blanked_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A training log whose NCCL lines `_mixed` blanked (empty lines between the iteration lines, no
    envelope, no timer block): the lane takes it, framed by `_one_stream_units` (the empty lines are the
    stream's other lines, after units without timers), and the empty lines count as neither parsed nor not."""
    rnd = random.Random(24)
    lines = []
    for x in _log(24, k=len(_TIMERS), srun=False, blocks=0.0):
        if "] iteration " in x:
            lines.append(x)
        lines += [""] * rnd.randint(0, 3)
    one, framed = S._one_stream_units, []
    monkeypatch.setattr(S, "_one_stream_units", lambda *a: framed.append(one(*a)) or framed[-1])
    _same(lines, taken=True)
    assert framed and all(f is not None for f in framed)
    got = S.parse(pl.Series(lines), _ctx())
    assert got.parsed == 4300 and got.unrecognized == 0


@pytest.mark.parametrize("seed", range(3))
def test_lane_random_lines_anywhere_without_blocks(seed: int) -> None:
    """Lines of many kinds at random places in a log the lane takes without them (`srun -l`, some iteration
    lines without a block, no validation report): `parse` is `_parse`."""
    rnd = random.Random(seed)
    lines = _without_validation(_log(30 + seed, k=len(_TIMERS), blocks=0.3))
    _same(lines, taken=True)
    for _ in range(rnd.choice([1, 3, 30])):
        lines.insert(rnd.randrange(len(lines)), rnd.choice(_POOL).format(r=15, o=rnd.randrange(15)))
    _same(lines, taken=None)


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("cut", [1, 2, 3])
def test_lane_takes_a_log_cut_after_an_iteration_line(cut: int, srun: bool) -> None:
    lines = _log(8, k=len(_TIMERS), srun=srun)
    last = max(i for i, x in enumerate(lines) if "] iteration " in x)
    _same(lines[: last + cut], taken=True)  # (the iteration line, its header, one entry last)


@pytest.mark.parametrize(
    "block",
    [
        ["{r}: GPU relative performance:", "{r}:   Rank=3 Node=n1 Score=0.5"],
        ["{r}: GPU relative performance:", "{r}:  Worst performing 1/16 ranks:"],
        ["{r}: [batch=3/100]:", "{r}:   Train loss: 1.5"],
    ],
)
def test_lane_blocks_of_other_kinds_around_a_unit(block: list[str]) -> None:
    """A block header of another kind before a unit, its entries right after it (the unit ends that block)."""
    lines = _log(9, k=len(_TIMERS))
    at = [i for i, x in enumerate(lines) if "] iteration " in x][200]
    head, entry = (b.format(r=15) for b in block)
    end = at + 2 + len(_TIMERS)
    lines = lines[: at - 20] + [head] + lines[at - 20 : end] + [entry] + lines[end:]
    _same(lines, taken=None)


_POOL = (
    "{r}:     stray-timer .......: (1.00, 2.00)",
    "{r}:     stray-timer .......: 1.5",
    "{r}:     rank 3: 12.5",
    "{r}: (min, max) time across ranks (ms):",
    "{r}: max time across ranks (ms):",
    "{r}: [rank{r}]:    nested-timer ....: (1.00, 2.00)",
    "{r}: [rank{o}]: [2025-05-01 08:00:00] iteration 7/ 10 | lm loss: 1.0 |",
    "{o}: [rank{r}]: some chatter",
    "[rank{r}]: a line of the unit stream without srun envelope",
    "\t{r}: tab before the srun envelope",
    "{r}:\t    tabbed-timer ....: (1.00, 2.00)",
    "{r}: ",
    "",
    "   ",
    "{r}: {{'loss': 1.0, 'learning_rate': 1e-05}}",
    "{r}: some text with time (ms) | forward: 1.0 | backward: 2.0",
    "{r}:  validation loss at iteration 5 | lm loss value: 2.0E+00 |",
    "{o}: " + _WARN[0],
    "{o}: " + _WARN[1],
    "host1: {r}: pdsh host before srun",
    "{r}: [Rank {o}] (after 7 iterations) memory (MB) | allocated: 1.5 | max allocated: 2.0",
    "{r}: [Rank {o}] (after 7 iterations) memory (MB) | allocated: 1.5 | lm loss: 2.0",
    "{r}:  [2025-05-01 08:00:00] iteration 7/ 10 | elapsed time per iteration (ms): 1.0 |",
)


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_lane_random_lines_anywhere(seed: int, srun: bool) -> None:
    """Lines of many kinds put at random places (in units, right after them, in other streams): `parse` is
    `_parse` whether the lane takes the log or hands it back. Without `srun -l` the log's lines and the pool's
    lose their envelopes (each pool line keeps it or loses it at random: a few lines of one stream in
    another's log)."""
    rnd = random.Random(seed)
    lines = _log(10 + seed, k=len(_TIMERS), srun=srun)
    for _ in range(rnd.choice([1, 3, 30])):
        at = rnd.randrange(len(lines))
        extra = rnd.choice(_POOL).format(r=15, o=rnd.randrange(15))
        if not srun and rnd.random() < 0.7:
            extra = _SRUN_ENV.sub("", extra, count=1)
        lines.insert(at, extra)
    _same(lines, taken=None)


def test_lane_takes_the_benchmark_log_without_srun(tmp_path: Path) -> None:
    """bench/big_steps' Megatron job without `srun -l` (every rank's chatter, NCCL lines, tracebacks and
    memory reports in the unit stream): the lane takes it and reads what the general reading does."""
    from bench import big_steps

    path = tmp_path / "train.log"
    big_steps.write(path, 7.5, seed=0, srun=False)
    lines = path.read_text().splitlines()
    assert not any(_SRUN_ENV.match(x) for x in lines[:1000])
    _same(lines, taken=True)


# ----------------------------------------------------------------------------- iteration lines without a date


def _ts_quality(lines: list[str]) -> dict[str, int]:
    steps = S.parse(pl.Series(lines), _ctx()).tables["steps"]
    return dict(steps.get_column("ts_quality").value_counts().rows())


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_lane_takes_iteration_lines_without_a_date(seed: int, srun: bool) -> None:
    """Megatron before mid-2023 printed no date on its iteration lines: the lane takes them, each row without a
    time, or, without `srun -l`, with the time of the straggler report right above it (`inherited`)."""
    lines = _log(seed, k=len(_TIMERS), srun=srun, dated=False)
    assert not any("] iteration " in x for x in lines)
    _same(lines, taken=True)
    got = _ts_quality(lines)
    assert got.get("none", 0) > 4000
    assert (got.get("inherited", 0) > 0) == (not srun)


@pytest.mark.parametrize("srun", [True, False])
def test_lane_undated_rows_inherit_as_the_general_reading(srun: bool) -> None:
    """Dated lines 1, 2 and 3 lines above undated iteration lines, in their stream and in another, one below
    the previous row only or above it too: the lane gives the times `_times` gives."""
    rnd = random.Random(40)
    lines = _log(40, k=len(_TIMERS), srun=srun, dated=False)
    at = [i for i, x in enumerate(lines) if " iteration " in x and "validation" not in x]
    env = "15: " if srun else ""
    for i in sorted(rnd.sample(at[1:], 300), reverse=True):
        stamp = f"[2025-05-0{rnd.randint(1, 9)} 07:00:{rnd.randint(10, 59)}] chatter"
        mine = env + stamp if rnd.random() < 0.7 else f" 3: {stamp}" if srun else f"[rank3]: {stamp}"
        filler = [env + "filler"] * rnd.choice([0, 0, 1, 2])
        lines[i:i] = [mine, *filler]
    _same(lines, taken=True)
    got = _ts_quality(lines)
    assert got.get("inherited", 0) > 100 and got.get("none", 0) > 100


@pytest.mark.parametrize("srun", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_lane_random_lines_anywhere_without_dates(seed: int, srun: bool) -> None:
    """`test_lane_random_lines_anywhere` on iteration lines without a date, the pool's dated lines too."""
    rnd = random.Random(50 + seed)
    lines = _log(50 + seed, k=len(_TIMERS), srun=srun, dated=False)
    pool = (*_POOL, "{r}: [2025-05-01 08:00:00] a dated line", "{o}: 2025-05-01 08:00:00 another")
    for _ in range(rnd.choice([1, 3, 30])):
        extra = rnd.choice(pool).format(r=15, o=rnd.randrange(15))
        if not srun and rnd.random() < 0.7:
            extra = _SRUN_ENV.sub("", extra, count=1)
        lines.insert(rnd.randrange(len(lines)), extra)
    _same(lines, taken=None)


@pytest.mark.parametrize(
    "extra",
    [
        # a date in an undated iteration line (the general reading reads it as the line's own time)
        "{r}:  iteration {it}/ 10 | 2025-05-01 08:00:00 | elapsed time per iteration (ms): 1.0 |",
        "{r}:  iteration {it}/ 10 | elapsed time per iteration (ms): 1.0 | at 2025-05-01 |",
        "{r}:  iteration {it}/ 10 | elapsed time per iteration (ms): 1.0 | :::MLLOG {{}} |",
        "{r}:  [2023-02-30 08:00:00] iteration {it}/ 10 | elapsed time per iteration (ms): 1.0 |",  # no such day
    ],
)
def test_lane_undated_lines_it_hands_back(extra: str) -> None:
    lines = _log(41, k=len(_TIMERS), dated=False)
    at = [i for i, x in enumerate(lines) if " iteration " in x][500]
    _same([*lines[:at], extra.format(r=15, it=7), *lines[at:]], taken=None)


@pytest.mark.parametrize("srun", [True, False])
def test_lane_undated_rows_inherit_below_the_previous_row_only(srun: bool) -> None:
    """Iteration lines without blocks, one line apart, some dated: an undated row takes the time of a dated line
    1 or 2 lines above it only where that line lies below the previous row of its stream (a dated iteration
    line right above is that row)."""
    rnd = random.Random(43)
    lines = _without_validation(_log(43, k=len(_TIMERS), srun=srun, blocks=0.0, dated=False))
    env = "15: " if srun else ""
    at = [i for i, x in enumerate(lines) if " iteration " in x]
    for i in sorted(rnd.sample(at[1:-1], 400), reverse=True):
        if rnd.random() < 0.5:  # a dated line right above this row (which the next row must not take)
            lines.insert(i, env + "[2025-05-02 09:00:00] chatter")
        else:  # this row dated
            lines[i] = lines[i].replace(" iteration ", " [2025-05-02 09:00:00] iteration ", 1)
    _same(lines, taken=True if srun else None)
    got = _ts_quality(lines)
    assert got.get("inherited", 0) > 100 and got.get("local_assumed_utc", 0) > 100


# ----------------------------------------------------------------------------- lines near a unit


def _units_then(extra: list[str], srun: bool, dated: bool, every: int = 37, seed: int = 42) -> list[str]:
    """A log of iteration lines without blocks, `extra` (lines, `{r}` the rank, `{it}` the step) right after
    every `every`-th iteration line."""
    out = []
    for x in _without_validation(_log(seed, k=len(_TIMERS), srun=srun, blocks=0.0, dated=dated)):
        out.append(x)
        m = re.search(r"iteration +([0-9]+)/", x)
        if m and "validation" not in x and int(m.group(1)) % every == 0:
            env = "15: " if srun else ""
            out += [env + e.format(it=m.group(1)) for e in extra]
    return out


_QUIET = [
    "-" * 100,
    " validation loss at iteration {it} | lm loss value: 6.439325E+00 | lm loss PPL: 6.259840E+02 | ",
    " validation loss at iteration {it} on validation set | lm loss value: 1.0E+01 | lm loss PPL: 2.4E+04 |",
    "-" * 100,
    "saving checkpoint at iteration    {it} to /workspace/model/megatron-models/345m-init-mp",
    " successfully saved checkpoint from iteration {it} to /ckpt [ t 1/2, p 1/1 ]",
    "...",
]


@pytest.mark.parametrize("dated", [True, False])
@pytest.mark.parametrize("srun", [True, False])
def test_lane_takes_validation_and_checkpoint_lines_near_units(srun: bool, dated: bool) -> None:
    """Megatron's validation report and save-checkpoint line within `ATTACH_GAP` lines of an iteration line
    (where no timer block keeps them apart) hold `iteration` and make no fragment: the lane takes them (under
    `srun -l`: without it, the straggler reports of rank 0 lie near iteration lines too, and it hands back)."""
    _same(_units_then(_QUIET, srun, dated), taken=True if srun else None)


@pytest.mark.parametrize(
    "line",
    [
        " validation loss at iteration {it} | lm loss value: 1.0 | step: 3 value: 2.0 |",  # another gate
        " validation loss at iteration {it} | iteration 5/ 9 | lm loss value: 1.0 |",
        " validation loss at iteration {it} | iteration loss value: 1.0 |",
        " validation loss at iteration {it} | lm loss value: nan |",
        "saving checkpoint at iteration {it} to /ckpt | iteration 3/ 4 |",
        "saving checkpoint at iteration {it} to /ckpt/step=3",
        " validation loss at iteration {it} | time (ms) | forward: 1.0 |",
    ],
)
@pytest.mark.parametrize("dated", [True, False])
def test_lane_near_lines_of_other_shapes(line: str, dated: bool) -> None:
    _same(_units_then([line], True, dated), taken=None)
    _same(_units_then([line], False, dated), taken=None)


@pytest.mark.parametrize("gap", [3, 12, 13, 14])
@pytest.mark.parametrize("dated", [True, False])
@pytest.mark.parametrize("srun", [True, False])
def test_lane_blocks_of_non_step_timers_after_units(gap: int, srun: bool, dated: bool) -> None:
    """A job started again: its set-up blocks (`load-checkpoint`, `model-and-optimizer-setup`: timers that
    time no step, which the general reading drops) `gap` lines after an iteration line, in its stream; and a
    block mixing them with step timers. Near (`ATTACH_GAP` lines) or not, the lane gives what the general
    reading gives."""
    hdr = "(min, max) time across ranks (ms):"
    setup = [
        *["> some set-up chatter"] * (gap - 1),
        hdr,
        "    load-checkpoint ................................: (1.15, 1.15)",
        "    model-and-optimizer-setup ......................: (222.27, 225.22)",
    ]
    mixed = [
        *["> some set-up chatter"] * (gap - 1),
        hdr,
        "    load-checkpoint ................................: (1.15, 1.15)",
        "    forward-compute ................................: (10.15, 11.15)",
    ]
    # (under `srun -l` the lane takes them all; without it the straggler reports of rank 0 lie near units)
    _same(_units_then(setup, srun, dated), taken=True if srun else None)
    _same(_units_then(mixed, srun, dated, every=53), taken=True if srun else None)


@pytest.mark.parametrize(
    "name",
    [
        "megatron_lm_2023_gpt345m_dp4_tp2pp2.log",
        "megatron_2022_bert_timers_and_iteration_sop_loss.log",
        "megatron_llm_epfl_iteration_slow.log",
        "gpt_neox_llama_bf16_first_iterations.log",
        "synthetic_megatron_crlf_truncated.log",
        "synthetic_megatron_srun_minmax_timers_straggler_detector.log",
    ],
)
@pytest.mark.parametrize("units", [300, 5000])
def test_real_megatron_logs_grown(name: str, units: int) -> None:
    """The fixtures' real Megatron logs (without dates before mid-2023, with them since), repeated to `units`
    iteration lines: the lane (where it takes them) reads what the general reading does."""
    lines = (Path(__file__).parents[1] / "fixtures" / "step-log" / name).read_text().splitlines()
    n_iter = sum(" iteration " in x for x in lines)
    _same(lines * (units // max(1, n_iter) + 1), taken=None)


def test_real_2023_megatron_log_with_timer_blocks_taken() -> None:
    """The 2023 real log with a `(min, max)` timer block after each iteration line (as `--timing-log-level 1`
    prints): units most of its lines, the lane takes it; its rows have no time."""
    path = Path(__file__).parents[1] / "fixtures" / "step-log" / "megatron_lm_2023_gpt345m_dp4_tp2pp2.log"
    block = [
        "(min, max) time across ranks (ms):",
        *(f"    {t} {'.' * (40 - len(t))}: (1{i}.00, 2{i}.50)" for i, t in enumerate(_TIMERS[:8])),
    ]
    lines = []
    for x in path.read_text().splitlines():
        lines.append(x)
        if x.startswith(" iteration "):
            lines += block
    lines = lines * 40
    _same(lines, taken=True)
    assert _ts_quality(lines) == {"none": 640}



@pytest.mark.parametrize("noise", [["plain chatter"], ["validation at iteration 7 went fine", "x ....: (1.0, 2.0) then"]])
@pytest.mark.parametrize("blank", [0, 2])
def test_share_rule_on_bounds_decides_as_the_rule(noise: list[str], blank: int) -> None:
    """Without the caller's entries the lane tries its share rule first on bounds (the lines holding the
    literals, all blank lines): it hands back exactly where the rule on the entries and iteration lines would,
    from logs the lane takes to logs mostly chatter, with chatter lines that hold an iteration line's or an
    entry's literal without being one among them, and blank lines."""
    path = Path(__file__).parents[1] / "fixtures" / "step-log" / "megatron_lm_2023_gpt345m_dp4_tp2pp2.log"
    block = [
        "(min, max) time across ranks (ms):",
        *(f"    {t} {'.' * (40 - len(t))}: (1{i}.00, 2{i}.50)" for i, t in enumerate(_TIMERS[:8])),
    ]
    taken = []
    for chatter in (0, 1, 2, 3, 4, 6, 9):
        lines = []
        for x in path.read_text().splitlines():
            lines.append(x)
            if x.startswith(" iteration "):
                lines += block + [noise[k % len(noise)] for k in range(chatter)] + [""] * blank
        s = pl.Series("literal", lines * 30, dtype=pl.String)
        with S.ascii_scope(True):
            bounded = S._megatron_lane(s, _ctx())
            exact = S._megatron_lane(s, _ctx(), S._lane_entries(s))
        assert (bounded is None) == (exact is None), chatter
        taken.append(bounded is not None)
        if chatter in (0, 9):
            _same(lines * 30, taken=chatter == 0)
    assert taken[0] and not taken[-1]
