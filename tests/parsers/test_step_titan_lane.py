"""step_log's torchtitan lane (`_titan_lane`: the rows of `[rankN]:[titan] ... step: ...` lines read off one
regex capture, the other lines by the general reading) against the general reading `_parse` of the same
lines: same tables, accounting, examples, `partial` and `node`, on seeded random logs, both those the lane
takes and those it must hand back (a gate or ANSI code in another line, a date that does not parse)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext

_WARN = (
    "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: "
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
    "  return fn(*args, **kwargs)",
)
_CHATTER = (
    "[GC] Performing periodical GC collection 0.05 seconds",
    "Saving the checkpoint (or staging if async is enabled).",
    "Training starts at step 1.",
    "Dataset c4 is being re-looped",
)


def _num(rnd: random.Random, lo: float, hi: float) -> str:
    v = rnd.uniform(lo, hi)
    forms = [f"{v:.2f}", f"{v:.4f}", f"{v:.5f}", f"{v:.0f}", f"{v:.1f}", "80.00", "1.10", "0.0", "12"]
    return rnd.choice(forms)


def _step_line(rnd: random.Random, rank: int, t: datetime, step: int, odd: bool, bare: float = 0.0) -> str:
    sp = (lambda: " " * rnd.choice([1, 2, 2, 2, 3])) if odd else (lambda: "  ")
    frac = f",{t.microsecond // 1000:03d}"
    r = f"{rank:03d}" if odd and rnd.random() < 0.05 else str(rank)
    env = "" if rnd.random() < bare else f"[rank{r}]:"
    tps = rnd.uniform(100, 2_000_000)
    tps_s = rnd.choice([f"{tps:,.0f}", f"{tps:.0f}", f"{tps:,.2f}"]) if odd else f"{tps:,.0f}"
    grad = f"grad_norm:{sp()}{_num(rnd, 0.1, 3)}{sp()}" if not odd or rnd.random() < 0.8 else ""
    key = rnd.choice(["tps", "wps"]) if odd else "tps"
    return (
        f"{env}[titan] {t:%Y-%m-%d %H:%M:%S}{frac} - root - INFO - step:{sp()}{step:2}{sp()}"
        f"loss:{sp()}{_num(rnd, 0.5, 12)}{sp()}{grad}memory:{sp()}{_num(rnd, 1, 80)}GiB({_num(rnd, 1, 99)}%)"
        f"{sp()}{key}:{sp()}{tps_s}{sp()}tflops:{sp()}{_num(rnd, 1, 999)}{sp()}mfu:{sp()}{_num(rnd, 1, 99)}%"
    )


def _log(seed: int, extra: str | None = None, bare: float = 0.0) -> list[str]:
    """A torchtitan log of 8 ranks (`odd`: field spacing, ranks, values varied; steps that repeat or go
    back, clocks that stand still or go back), with chatter, warnings, tracebacks and blank lines; `extra`:
    one line of another kind put somewhere in it; `bare`: the share of step lines without an envelope."""
    rnd = random.Random(seed)
    odd = seed % 2 == 1
    t = datetime(2025, 3, 3, 8, 0, 0, 123456)
    out: list[str] = []
    step = rnd.randint(1, 50_000)
    while len(out) < S._LANE_MIN + 1200:
        step += 1 if not odd or rnd.random() < 0.9 else rnd.choice([0, -1, -5, 2])
        t += timedelta(seconds=rnd.uniform(0.5, 2.0))
        for rank in range(8):
            if odd and rnd.random() < 0.02:
                t -= timedelta(seconds=rnd.uniform(0, 3))
            elif not odd or rnd.random() < 0.9:
                t += timedelta(microseconds=rnd.randint(0, 2000))
            out.append(_step_line(rnd, rank, t, step, odd, bare))
        x = rnd.random()
        r = rnd.randrange(8)
        if x < 0.05:
            out += [f"[rank{r}]:{_WARN[0]}", f"[rank{r}]:{_WARN[1]}"]
        elif x < 0.08:
            out.append(f"[rank{r}]:[titan] {t:%Y-%m-%d %H:%M:%S},000 - root - INFO - {rnd.choice(_CHATTER)}")
        elif x < 0.09:
            out += [f"[rank{r}]:Traceback (most recent call last):", f"[rank{r}]:    obj = dumps(obj)", ""]
        elif x < 0.10:
            out.append(rnd.choice(["", "   ", "plain text line", f"[rank{r}]:unknown chatter"]))
    if extra is not None:
        out.insert(rnd.randrange(len(out)), extra)
    return out


def _check(lines: list[str], first_line: int = 1, node: str = "gpu-node-003") -> bool:
    """Assert the lane (or its hand-back) gives what the general reading gives; return whether it took."""
    s = pl.Series("literal", lines, dtype=pl.String)
    ctx = FileContext(path="n/train.log", node=node, first_line=first_line, year_hint=2026)
    got, want = S.parse(s, ctx), S._parse(s, ctx)
    assert sorted(got.tables) == sorted(want.tables)
    for name, df in want.tables.items():
        assert got.tables[name].schema == df.schema, name
        assert got.tables[name].equals(df, null_equal=True), name
    assert (got.parsed, got.unrecognized, got.unrecognized_examples) == (
        want.parsed,
        want.unrecognized,
        want.unrecognized_examples,
    )
    assert (got.partial, got.node, got.notes) == (want.partial, want.node, want.notes)
    return S._titan_lane(s, ctx) is not None


@pytest.mark.parametrize("seed", range(4))
def test_lane_equals_general_reading(seed: int) -> None:
    assert _check(_log(seed), first_line=1 + seed * 1000)


@pytest.mark.parametrize(("seed", "bare"), [(0, 1.0), (1, 1.0), (2, 0.3)])
def test_lane_without_envelopes(seed: int, bare: float) -> None:
    """Step lines of a rank's own file (no `[rankN]:`; no rank, one stream), or some of them."""
    assert _check(_log(seed, bare=bare))
    assert _check(_log(seed, "[rank3]:x", bare=bare))
    # (a Composer banner gives a line without an envelope a rank: handed back)
    assert not _check(_log(seed, "-----Begin global rank 3 STDOUT-----", bare=bare))


@pytest.mark.parametrize(
    "extra",
    [
        "[rank0]:[titan] 2025-03-03 08:00:00,123 - root - INFO - iteration 5",  # a gate in another line
        "[rank1]: [titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1.0%",  # a step line of another shape
        "[rank2]:\x1b[32mcoloured\x1b[0m",
        "[rank2]:[0mpasted colour",
        "[rank3]:[titan] 2025-02-30 08:00:00,123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1.0%",  # a date that does not parse
        "[rank3]:[titan] 2025-03-03 08:00:00.123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1.0%",  # another time format
        "[rank3]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  1e400  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1.0%",
        "[rank99999999999]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  2.0  "
        "memory: 1GiB(2%)  tps: 10  tflops: 1.0  mfu: 1.0%",  # a rank out of range
        "[rank3]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 3  loss:  2.0  memory: 1GiB(2%)  "
        "tps: 10  tflops: 1.0  mfu: 1" + "0" * 400 + ".0%",  # a number that reads infinite
        "{'loss': 1.0, 'epoch': 1.0}",
    ],
)
def test_lane_hands_back(extra: str) -> None:
    assert not _check(_log(0, extra))


@pytest.mark.parametrize(
    "extra",
    ["[rank4]:a\rb\rc", "[rank4]:Begin global rank 3 STDOUT", "-----Begin global rank 3 STDOUT-----", "\t"],
)
def test_lane_takes_other_lines(extra: str) -> None:
    assert _check(_log(1, extra))


def test_lane_steps_alone() -> None:
    lines = [line for line in _log(2) if " - root - INFO - step: " in line]
    assert _check(lines)
    assert _check(lines[:-1] + [lines[-1][:40]])  # (a cut last line: a line of another kind)


def test_lane_keeps_line_distances() -> None:
    """A warning's source line is the next line: not when a step line lies between them (the other lines
    are read with their own numbers)."""
    lines = _log(3)
    at = next(i for i, line in enumerate(lines) if " - root - INFO - step: " in line and i > 100)
    lines[at:at] = [f"[rank1]:{_WARN[0]}"]
    lines[at + 2 : at + 2] = [f"[rank1]:{_WARN[1]}", f"[rank1]:{_WARN[0]}", f"[rank1]:{_WARN[1]}"]
    assert _check(lines)
    s = pl.Series(lines)
    got = S.parse(s, FileContext(path="n/train.log", node="n", year_hint=2026))
    assert (at + 3, f"[rank1]:{_WARN[1]}") in got.unrecognized_examples


@pytest.mark.parametrize("seed", range(3))
def test_read_without_gates_equals_full_reading(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """`_read` of a text holding no gate returns at once what the full reading returns (no grammar matches):
    the full reading forced by a `_present` that reports a gate no line holds (its grammar finds nothing)."""
    rnd = random.Random(seed)
    lines = [line for line in _log(seed) if " - root - INFO - step: " not in line]
    lines += [
        "-----Begin global rank 3 STDOUT-----",
        "[rank3]:[W0302 01:41:32.203077686 CUDAAllocatorConfig.h:28] Warning: expandable_segments",
        "-----End global rank 3 STDOUT-----",
        "2025-03-03T08:00:00.5Z stdout F [rank0]:[titan] 2025-03-03 08:00:00,123 - root - INFO - chatter",
        "INFO:megatron.core.utils:hello",
        "[Rank 3] chatter",
        "a\rb\rc",
    ]
    rnd.shuffle(lines)
    lines *= 1 + seed  # (seed 2: more than `_LANE_MIN` lines, the big preparation)
    s = pl.Series(lines)
    ctx = FileContext(path="n/train.log", node="n", first_line=5, year_hint=2026)
    got = S._parse(s, ctx)
    present = S._present
    monkeypatch.setattr(S, "_present", lambda *a: present(*a) or frozenset({"iteration"}))
    want = S._parse(s, ctx)
    assert got.tables["steps"].equals(want.tables["steps"]) and got.tables["steps"].height == 0
    assert sorted(got.tables) == sorted(want.tables) == ["steps"]
    assert (got.parsed, got.unrecognized, got.unrecognized_examples, got.partial, got.node) == (
        want.parsed,
        want.unrecognized,
        want.unrecognized_examples,
        want.partial,
        want.node,
    )


def test_lane_found_whatever_the_period() -> None:
    """8 lines of chatter, then the 8 ranks' step lines, every step (a period of 16 lines): the sample the
    lane looks at first still holds step lines."""
    steps = [line for line in _log(0) if " - root - INFO - step: " in line]
    chatter = "[rank0]:[titan] 2025-03-03 08:00:00,000 - root - INFO - [GC] collection 0.01 seconds"
    lines = [x for i in range(0, len(steps) - 7, 8) for x in [chatter] * 8 + steps[i : i + 8]]
    assert _check(lines)


_POOL = "0123456789 .,:-+ex%()[]\t\u0663\u00a0Z"


def _mutate(rnd: random.Random, s: str, keep: bool) -> str:
    """`s` with one character changed, inserted or deleted (`keep`: after the `step:`, a digit for a digit, a
    digit more or less in a run of them, a blank more or less in a run of blanks: the same shape)."""
    if keep:
        lo = s.index("step:") + 5
        at = [k for k in range(lo, len(s) - 1) if s[k].isdigit() or (s[k] == " " and s[k - 1] == " ")]
        k = rnd.choice(at)
        if s[k] == " ":
            return s[:k] + rnd.choice(["", "  "]) + s[k + 1 :]
        op, d = rnd.randrange(3), rnd.choice("0123456789")
        if op == 0 or not (s[k - 1].isdigit() or s[k + 1].isdigit()):
            return s[:k] + d + s[k + 1 :]
        return s[:k] + d + s[k:] if op == 1 else s[:k] + s[k + 1 :]
    k = rnd.randrange(len(s))
    op, c = rnd.randrange(3), rnd.choice(_POOL)
    return s[:k] + c + s[k + 1 :] if op == 0 else s[:k] + c + s[k:] if op == 1 else s[:k] + s[k + 1 :]


@pytest.mark.parametrize("seed", range(8))
def test_lane_on_mutated_step_lines(seed: int) -> None:
    """Step lines with a character changed, inserted or deleted here and there: the lane reads the ones its
    regex takes as the general reading does, and hands back the log when a line of another shape holds a
    gate or a date does not parse."""
    rnd = random.Random(100 + seed)
    lines = _log(seed % 2)
    at = [i for i, line in enumerate(lines) if " - root - INFO - step: " in line]
    for i in rnd.sample(at, 200):
        lines[i] = _mutate(rnd, lines[i], keep=True)
    if seed >= 5:
        i = rnd.choice(at)
        lines[i] = _mutate(rnd, lines[i], keep=False)
    took = _check(lines)
    assert took or seed >= 5
