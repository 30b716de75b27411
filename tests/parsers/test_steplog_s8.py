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
from tests.parsers import _steplog_s8_ref as R  # noqa: N812

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


def _ref_rows(frags: pl.DataFrame) -> pl.DataFrame:  # noqa: C901
    """Group fragments into step rows (see the module docstring) and take each value from the best fragment."""
    _FRAG, _LANE_MIN, _sort_frags = S._FRAG, S._LANE_MIN, S._sort_frags  # noqa: N806
    MERGE_GAP, ATTACH_GAP = S.MERGE_GAP, S.ATTACH_GAP  # noqa: N806
    # the column steps between the sorts run as one lazy query (one collect); the sorts stay eager (tie order)
    value_cols = [c for c in _FRAG if c not in ("line", "seg", "key", "timers", "anchor", "standalone", "attach_line")]
    if frags.height >= _LANE_MIN:
        # anchors of one grammar that is no bar: none continues the row of the one above it (`same_step`
        # asks for another grammar or a bar redraw), so each fragment is a group of its own and no orphan,
        # what the query below gives them
        one = frags.select(
            pl.col("anchor").all(ignore_nulls=False).fill_null(False)
            & pl.col("kind").is_not_null().all()
            & (pl.col("kind") == pl.col("kind").first()).all()
            & ~pl.col("kind").first().is_in(["tqdm", "rich_bar"]).fill_null(True)
        ).item()
        if one:
            f = _sort_frags(frags).with_columns(
                group=pl.int_range(1, frags.height + 1, dtype=pl.UInt32), orphan=pl.lit(False)
            )
            return _ref_single_rows(f, f.height, None, value_cols)
    f = _sort_frags(frags).lazy().with_columns(
        attach_line=pl.coalesce(pl.col("attach_line"), pl.col("line")),
        standalone=pl.col("standalone").fill_null(False),
    )
    f = f.with_columns(
        a_step=pl.when(pl.col("anchor")).then(pl.col("step")),
        a_kind=pl.when(pl.col("anchor")).then(pl.col("kind")),
        a_line=pl.when(pl.col("anchor")).then(pl.col("line")),
        a_alone=pl.when(pl.col("anchor")).then(pl.col("standalone")),
    )
    f = f.with_columns(
        prev_step=pl.col("a_step").shift(1).forward_fill().over("key"),
        prev_kind=pl.col("a_kind").shift(1).forward_fill().over("key"),
        prev_line=pl.col("a_line").shift(1).forward_fill().over("key"),
        prev_alone=pl.col("a_alone").shift(1).forward_fill().over("key"),
        prev_key=pl.col("key").shift(1),
        prev_attach=pl.col("attach_line").shift(1),
        prev_anchor=pl.col("anchor").shift(1),
    )
    # the same step twice: different grammars describing one step, or redraws of a progress bar
    redraw = pl.col("kind").is_in(["tqdm", "rich_bar"]) & (pl.col("kind") == pl.col("prev_kind"))
    same_step = (
        (pl.col("step") == pl.col("prev_step"))
        & ((pl.col("kind") != pl.col("prev_kind")) | redraw)
        & ((pl.col("line") - pl.col("prev_line")) <= MERGE_GAP)
        & ~pl.col("prev_alone").fill_null(True)
    ).fill_null(False)
    attached = (
        pl.col("prev_line").is_not_null()
        & ((pl.col("attach_line") - pl.col("prev_line")) <= ATTACH_GAP)
        & ~pl.col("prev_alone").fill_null(True)
    ).fill_null(False)
    # an orphan (breakdown without an anchor above it) starts a group unless it continues the same block
    orphan_start = ~attached & (
        pl.col("prev_anchor").fill_null(True) | (pl.col("attach_line") != pl.col("prev_attach")).fill_null(True)
    )
    start = (
        (pl.col("key") != pl.col("prev_key")).fill_null(True)
        | (pl.col("anchor") & (pl.col("standalone") | ~same_step))
        | (~pl.col("anchor") & orphan_start)
    )
    f = f.with_columns(group=start.cum_sum(), orphan=~pl.col("anchor") & ~attached)
    if frags.height < _LANE_MIN:  # (few fragments: all aggregated, `orphan_group` in this query's collect)
        f = f.with_columns(orphan_group=pl.col("orphan").all().over("group")).collect()
        n_single, single = 0, None
    else:
        # a group is a run of fragments; one of a single fragment is that fragment as it is (what the
        # aggregation below gives it), so only the others are sorted and aggregated
        f = f.with_columns(_single=start & start.shift(-1).fill_null(True)).collect()
        single = f.get_column("_single")
        n_single = int(single.sum())
    return _ref_single_rows(f, n_single, single, value_cols)


def _ref_timer_line_frag(seg: pl.DataFrame, present: frozenset[str]) -> pl.DataFrame | None:
    """The one-line timer fragment of `_block_fragments` as it was (timers read at once)."""
    txt = pl.col("text")
    # one-line timers
    tl = seg.clear()
    if "time (ms)" in present:
        tl = seg.filter(txt.str.contains("time (ms)", literal=True))
        hits, after_tms = S._timer_line_hits(tl.get_column("text"))
        tl = tl.with_columns(_after_tms=after_tms).filter(hits)
    if tl.height:
        # NOTE: split, not regex-captured (captures were most of the cost of DeepSpeed logs), same values:
        # `pairs` (all after the leftmost `time (ms) |` the grammar accepts) is the line without its shortest
        # prefix ending in one, found by a capture-free replace; a pair (`name: NUM`, one `:`) splits at its colon
        # into the lazy name (trailing blanks dropped) and the number (leading blanks dropped)
        # split lane: pairs text `name: NUM | … | name: NUM` (names of `[\w\- ]`, blanks spaces) after the
        # only `time (ms)` of the line: the pairs regex takes exactly its `|`-separated fields there
        if tl.height < S._LANE_MIN:
            fast = pl.Series([False] * tl.height)
        else:
            tl = tl.with_columns(_after=pl.col("_after_tms").str.splitn("|", 2).struct.field("field_1"))
            after = pl.col("_after")
            fast = tl.select(after.str.contains(S._rx(S._TIMER_PAIRS_FAST)).fill_null(False)).to_series()
        tl = tl.drop("_after_tms")
        n_fast = int(fast.sum())
        if n_fast == 0:
            tl = S._timer_line_pairs(tl)
        else:
            tl_fast = tl.filter(fast) if n_fast < tl.height else tl
            # (two list evaluations: the `:` split materialised once, not once per field)
            kv = pl.element().struct
            tl_fast = tl_fast.with_columns(
                timers=pl.col("_after").str.split("|").list.eval(pl.element().str.splitn(":", 2)).list.eval(
                    pl.struct(
                        name=kv.field("field_0").str.strip_chars(),
                        ms=kv.field("field_1").str.strip_chars().cast(pl.Float64, strict=False),
                        min_ms=pl.lit(None, dtype=pl.Float64),
                        max_ms=pl.lit(None, dtype=pl.Float64),
                        min_rank=pl.lit(None, dtype=pl.Int32),
                        max_rank=pl.lit(None, dtype=pl.Int32),
                    )
                )
            )
            if n_fast < tl.height:
                tl = pl.concat([tl_fast, S._timer_line_pairs(tl.filter(~fast))]).sort("line", "seg")
            else:
                tl = tl_fast
            tl = tl.drop("_after")
        return (
            S._frag(
                tl,
                kind=pl.lit("timer_line"),
                framework=pl.when(pl.col("text").str.contains(S._rx(r"\[Rank \d+\]")))
                .then(pl.lit("deepspeed"))
                .otherwise(pl.lit("megatron")),
                prio=pl.lit(1),
                anchor=pl.lit(False),
                attach_line=pl.col("line"),
                timers=pl.col("timers"),
            )
        )
    return None


def _ref_rows_read(frags: pl.DataFrame) -> pl.DataFrame:
    """`_rows` as it was, on the fragments with their one-line timers read (as `_block_fragments` gave them)."""
    return _ref_rows(S._with_timers(frags))


def _ref_block_fragments(
    seg: pl.DataFrame, present: frozenset[str], minmax: object = None
) -> tuple[list[pl.DataFrame], pl.DataFrame, pl.DataFrame]:
    """The new `_block_fragments`, whose one-line timer fragment, its timers read, must be the old one."""
    got = _NEW["_block_fragments"](seg, present, minmax)
    tl = [f for f in got[0] if f.height and (f.get_column("kind") == "timer_line").all()]
    want = _ref_timer_line_frag(seg, present)
    assert len(tl) == (want is not None)
    if tl:
        assert want is not None
        new = S._with_timers(tl[0])
        _same(new.sort("line", "seg"), want.sort("line", "seg"))
    return got


_NEW: dict[str, Callable] = {}
_REFS: dict[str, Callable] = {
    "_single_rows": _ref_single_rows,
    "_rows": _ref_rows_read,
    "_block_fragments": _ref_block_fragments,
    # (the caller may hand on its `_tqdm_match`, which the reference works out itself)
    "_bar_fragments": lambda seg, present, batch=None, tqdm=None: R._bar_fragments(seg, present, batch),
    "_times": R._times,
    "_times_general": R._times_general,
    "_step_fragments": R._step_fragments,
}


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
        new = _NEW.setdefault(name, getattr(S, name))

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
    """`parse` (which a lane may take) and the general reading `_parse`, whose steps are the ones shadowed
    (a log the Megatron lane takes, from `_MEG_UNITS` units on, would leave them out)."""
    s = pl.Series("line", lines, dtype=pl.String)
    S.parse(s, _ctx())
    S._parse(s, _ctx())


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
        if rnd.random() < 0.05:  # one-line timers the split lane leaves to the pairs regex (or that no grammar takes)
            yield rnd.choice(
                [
                    f"{pre}[{ts}] [Rank 0] time (ms) | fwd: 1,234.5 | bwd: 2e3 | x y-z: nan",
                    f"{pre}[{ts}] [Rank 1] time (ms) | fwd: 12 ms | bwd: 3 | step: inf",
                    f"{pre}[{ts}] [Rank 2] time (ms) |fwd:1|bwd:2|",
                    f"{pre}[{ts}] [Rank 3] time (ms) | fwd: 1 | time (ms) | bwd: 2",
                    f"{pre}rank=3 time (ms) | a: 1 | b:\t2",
                    f"{pre}[{ts}] time (ms) | é: 1 | b: 2",
                    f"{pre}xtime (ms) | a: 1",
                ]
            )


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
        if rnd.random() < 0.05:
            yield host + rnd.choice(
                [
                    "{'eval_loss': 1.5, 'eval_runtime': 3.0, 'epoch': 1.0}",
                    "{'train_runtime': 100.5, 'train_samples_per_second': 3.2, 'train_steps_per_second': 0.4, 'train_loss': 1.1, 'epoch': 2.0}",
                    "{'loss': 1.25, 'step': 7, 'train_step_runtime': 1.5, 'train_step_samples_per_second': 9.0}",
                    '{"loss": "2.5", "global_step": 8, "learning_rate": 1e-4}',
                    "{'loss': 1,234.5, 'grad_norm': nan}",
                ]
            )
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


@pytest.mark.parametrize("seed", range(3))
def test_deepspeed_many_timer_lines(seed: int, shadowed: dict[str, int]) -> None:
    """Enough one-line timers for their timers to be read late (`_with_timers`), fast and slow lane lines."""
    rnd = random.Random(seed)
    lines: list[str] = []
    while sum("time (ms)" in ln for ln in lines) < S._LANE_MIN + 100:
        lines += list(_ds(rnd, 300))
    if seed:
        lines = _mutate(rnd, lines)
    _parse(lines)
    assert shadowed["_block_fragments"] and shadowed["_rows"]


@pytest.mark.parametrize("seed", range(3))
def test_hf_many_dicts(seed: int, shadowed: dict[str, int]) -> None:
    """Enough Trainer dicts for their keys to be read as columns (ASCII dicts, and with a non-ASCII one)."""
    rnd = random.Random(100 + seed)
    lines: list[str] = []
    while sum(ln.lstrip().startswith("{") for ln in lines) < S._LANE_MIN + 100:
        for ln in _hf(rnd, 40):
            lines.append(ln)
            if "{" not in ln and rnd.random() < 0.6:
                lines.append(f"{{'loss': {rnd.uniform(0, 3):.4f}, 'grad_norm': {rnd.uniform(0, 3):.6f}, 'epoch': 0.5}}")
    if seed == 1:
        lines.append("{'loss': 1.5, 'grad_norm': 2.0, 'note': 'é'}")
    if seed == 2:
        lines = _mutate(rnd, lines)
    _parse(lines)
    assert shadowed["_step_fragments"]


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
