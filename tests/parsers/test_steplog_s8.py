# ruff: noqa: E501  (synthetic log lines are long)
"""The eighth performance round's step-log changes give what the code they replace gives.

Each replaced function is kept here verbatim as the reference (`_ref_*`). The parser runs with the new function
wrapped so that every call also runs the reference on the same arguments and the two answers must be equal
(schema, values, order). Inputs: the step-log fixtures and real logs (as they are, and repeated past the big-
input threshold so the big paths run), and synthetic DeepSpeed / Hugging Face / Megatron logs with random
mutations (lines dropped, duplicated, cut, shuffled; ranks and steps changed).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, lines_from_bytes

_FIX = Path(__file__).parent.parent / "fixtures" / "step-log"
_REAL = Path("/work/shared/real-logs/steps")


# ----------------------------------------------------------------------------- references (verbatim)


def _ref_single_rows(
    f: pl.DataFrame, n_single: int, single: pl.Series | None, value_cols: list[str]
) -> pl.DataFrame:
    _group_rows, _TIMER = S._group_rows, S._TIMER  # noqa: N806
    if n_single == 0:
        rows = _group_rows(f, value_cols)
    else:
        singles = f.filter(single) if n_single < f.height else f
        timers = pl.col("timers")
        # (`list.drop_nulls` is slow on lists of structs: taken only when some list holds a null timer)
        tm = singles.get_column("timers")
        empty = singles.select((timers.is_null() | (timers.list.len() == 0)).sum()).item()
        if tm.explode().null_count() > empty:
            timers = timers.list.drop_nulls()
        singles = singles.select(
            "group",
            "line",
            "key",
            pl.col("orphan").alias("orphan_group"),
            "rank",
            *[c for c in value_cols if c != "rank"],
            timers.fill_null(pl.lit([], dtype=pl.List(_TIMER))),
        )
        if n_single == f.height:
            rows = singles
        else:
            rows = pl.concat([singles, _group_rows(f.filter(~single), value_cols)]).sort("group")
    # orphans only count when they carry progress of their own (HF dicts without a bar, ...)
    rows = rows.filter(
        ~pl.col("orphan_group")
        | pl.col("step_time_s").is_not_null()
        | pl.col("loss").is_not_null()
        | pl.col("throughput").is_not_null()
    )
    if n_single == f.height:  # (one chunk, as the sort would give it)
        return rows.rechunk()
    return rows.sort("key", "line", maintain_order=True)


_REFS: dict[str, Callable] = {"_single_rows": _ref_single_rows}


# ----------------------------------------------------------------------------- harness


def _same(got: object, want: object) -> None:
    if isinstance(want, pl.DataFrame):
        assert isinstance(got, pl.DataFrame)
        assert got.schema == want.schema
        assert got.equals(want, null_equal=True)
    elif isinstance(want, pl.Series):
        assert isinstance(got, pl.Series)
        assert got.dtype == want.dtype and got.name == want.name
        assert got.equals(want, check_names=True, null_equal=True)
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, type(want)) and len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    else:
        assert got == want


@pytest.fixture
def shadowed(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every replaced function runs beside its reference; the counts of calls compared."""
    calls = dict.fromkeys(_REFS, 0)
    for name, ref in _REFS.items():
        new = getattr(S, name)

        def both(
            *a: object, _new: Callable = new, _ref: Callable = ref, _name: str = name, **kw: object
        ) -> object:
            got = _new(*a, **kw)
            _same(got, _ref(*a, **kw))
            calls[_name] += 1
            return got

        monkeypatch.setattr(S, name, both)
    return calls


def _ctx(name: str = "train.log") -> FileContext:
    return FileContext(path=f"n1/{name}", node="n1", year_hint=2025)


def _parse(lines: list[str]) -> None:
    S.parse(pl.Series("line", lines, dtype=pl.String), _ctx())


def _files() -> list[Path]:
    out = sorted(p for p in _FIX.glob("*.log"))
    if _REAL.is_dir():
        out += sorted(p for p in _REAL.iterdir() if p.is_file())
    return out


def _grown(lines: list[str], n: int = S._LANE_MIN + 300) -> list[str]:
    """`lines` repeated past the big-input threshold."""
    if not lines:
        return lines
    return (lines * (n // len(lines) + 1))[:n]


# ----------------------------------------------------------------------------- synthetic logs


def _ds(rnd: random.Random, n_steps: int) -> Iterator[str]:
    ranks = rnd.choice([1, 2, 8])
    for step in range(1, n_steps + 1):
        ts = f"2025-03-02 07:{step // 60 % 60:02d}:{step % 60:02d},{rnd.randint(0, 999):03d}"
        pre = "[default0]:" if rnd.random() < 0.9 else ""
        if rnd.random() < 0.8:
            yield f"{pre}[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]"
        for r in range(ranks):
            p = f"[default{r}]:" if pre else ""
            v = [f"{rnd.uniform(1, 999):.2f}" for _ in range(5)]
            if rnd.random() < 0.9:
                yield (
                    f"{p}[{ts}] [INFO] [logging.py:96:log_dist] [Rank {r}] time (ms) | fwd_microstep: {v[0]} | "
                    f"bwd_microstep: {v[1]} | bwd_inner_microstep: {v[2]} | bwd_allreduce_microstep: {v[3]} | "
                    f"step_microstep: {v[4]}"
                )
            yield (
                f"{p}[{ts}] [INFO] [logging.py:96:log_dist] [Rank {r}] time (ms) | fwd: {v[0]} | bwd: {v[1]} | "
                f"bwd_inner: {v[2]} | bwd_allreduce: {v[3]} | step: {v[4]}"
            )
        if rnd.random() < 0.9:
            yield (
                f"{pre}[{ts}] [INFO] [timer.py:260:stop] epoch=0/micro_step={step * 4}/global_step={step}, "
                f"RunningAvgSamplesPerSec={rnd.uniform(100, 200):.6f}, CurrSamplesPerSec={rnd.uniform(100, 200):.6f}, "
                "MemAllocated=10.5GB, MaxMemAllocated=20.1GB"
            )
        if rnd.random() < 0.02:
            yield f"{pre}/usr/lib/python3.10/x.py:12: UserWarning: something"


def _hf(rnd: random.Random, n_steps: int) -> Iterator[str]:
    total = n_steps + rnd.randint(-50, 50)
    host = rnd.choice(["", "worker-1: "])
    step = 1
    while step <= n_steps:
        k = rnd.randint(1, 12)
        draws = []
        for s in range(step, step + k):
            pct = 100 * s // max(total, 1)
            draws.append(
                f"{pct:3d}%|{'█' * (pct // 10):10s}| {s}/{total} [01:{s % 60:02d}<02:00, {rnd.uniform(1, 2):.2f}s/it]"
            )
        step += k
        yield host + "\r".join(draws)
        if rnd.random() < 0.5:
            yield host + " " * 40
            yield (
                host
                + f"{{'loss': {rnd.uniform(0, 3):.4f}, 'grad_norm': {rnd.uniform(0, 3):.6f}, "
                + f"'learning_rate': {rnd.uniform(0, 1e-4):.6e}, 'epoch': {step / 100:.4f}}}"
            )
            yield ""


def _meg(rnd: random.Random, n_steps: int) -> Iterator[str]:
    for it in range(1, n_steps + 1):
        yield (
            f"[2025-03-02 07:00:{it % 60:02d}] iteration {it:8d}/ 100000 | consumed samples: {it * 512:12d} | "
            f"elapsed time per iteration (ms): {rnd.uniform(1000, 2000):.1f} | learning rate: 3.000000E-04 | "
            f"global batch size:   512 | lm loss: {rnd.uniform(1, 3):.6E} | loss scale: 1.0 | "
            f"grad norm: {rnd.uniform(0, 1):.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
        if rnd.random() < 0.5:
            yield "(min, max) time across ranks (ms):"
            for name in ("forward-backward", "forward-compute", "backward-compute", "optimizer"):
                a = rnd.uniform(1, 900)
                yield f"    {name} ...............................: ({a:.2f}, {a + rnd.uniform(0, 50):.2f})"


def _mutate(rnd: random.Random, lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        r = rnd.random()
        if r < 0.01:
            continue
        if r < 0.02:
            out += [ln, ln]
        elif r < 0.03:
            out.append(ln[: rnd.randint(0, len(ln))])
        elif r < 0.04 and out:
            out.insert(rnd.randint(0, len(out)), ln)
        elif r < 0.05:
            out.append(ln.replace("0", str(rnd.randint(0, 9)), 1))
        else:
            out.append(ln)
    return out


_GENS = {"ds": _ds, "hf": _hf, "meg": _meg}


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_files_as_they_are_and_grown(path: Path, shadowed: dict[str, int]) -> None:
    lines = lines_from_bytes(path.read_bytes()).to_list()
    _parse(lines)
    _parse(_grown(lines))


@pytest.mark.parametrize("kind", sorted(_GENS))
@pytest.mark.parametrize("seed", range(4))
def test_synthetic_logs(kind: str, seed: int, shadowed: dict[str, int]) -> None:
    rnd = random.Random(seed * 31 + len(kind))
    n = {"ds": 500, "hf": 3000, "meg": 900}[kind]
    lines = list(_GENS[kind](rnd, n))
    while len(lines) < S._LANE_MIN + 200:
        lines += list(_GENS[kind](rnd, n))
    if seed % 2:
        lines = _mutate(rnd, lines)
    if seed == 3:  # two frameworks in one range
        other = sorted(set(_GENS) - {kind})[0]
        lines = lines[: len(lines) // 2] + list(_GENS[other](rnd, n // 3)) + lines[len(lines) // 2 :]
    assert len(lines) >= S._LANE_MIN
    _parse(lines)
    assert sum(shadowed.values()) > 0
