# ruff: noqa: N806, E501  (the references verbatim)
"""steplog9's changes to step_log give what the code they replace gives (the references kept verbatim, `_ref_*`).

`_encode_by_null_pattern`: one pattern of set fields over every row is encoded as the column (was a scatter into
a null column), compared on random frames of one or more patterns, nulls, nested lists, non-finite floats.

`_tqdm_match`: the split lane takes percentages of any number of digits (`_TQDM_HEAD_DIGITS`; was at most
three: the bars past 999 % took the regex), the description cut where `TQDM_RE`'s lazy `desc` ends; compared
with the regex's groups on mutated bars of 1 to 6 digits, with and without descriptions (hypothesis too).

`_prepare`: the lines go the small way (`_prepare_small`) when their `\r` segments are few, not their physical
lines (a tqdm log of 3k lines holds 45k bars); compared with the old `_prepare` (verbatim in `_steplog9_ref`)
on fixtures and real logs whose lines are joined by `\r` into fewer physical lines than the threshold, with
envelopes, ANSI codes and logging prefixes, directly and by whole parses (`parse` and `parse_many`).

`_read`: no fragment at all (grammars whose gates are there but match nothing, as in the lines the Megatron lane
leaves to `_parse`) gives no row without running `_rows` and `_finish`. `_read` gives other frames then (the
callers conform them), so whole parses are compared: the parser's answer with the references patched in
(`_REFS`) against its answer as it is (tables, accounting), on the fixtures and real logs (as they are and grown
past the big-input threshold), synthetic logs with mutations, and lines with gates but no match.
"""

from __future__ import annotations

import math
import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _step_grammars as g
from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result, mutated
from tests.parsers import _steplog9_ref as R  # noqa: N812
from tests.parsers.test_steplog_s8 import _GENS, _files, _grown, _mutate

_nulls = S._nulls
_EMPTY_STEPS, _FRAG = S._EMPTY_STEPS, S._FRAG
_titan_pre, _minmax_pre, _present, _noise_lines, _warning_lines = (
    S._titan_pre, S._minmax_pre, S._present, S._noise_lines, S._warning_lines,
)
_Batch = S._Batch


# ----------------------------------------------------------------------------- references (verbatim)


def _ref_encode_by_null_pattern(rows: pl.DataFrame, enc: dict[str, pl.Expr]) -> pl.DataFrame:
    names = list(enc)
    narrow = rows.select(**enc)
    code = narrow.select(
        pl.sum_horizontal(*(pl.col(n).is_not_null().cast(pl.Int64) * (1 << i) for i, n in enumerate(names)))
    ).to_series()
    out = _nulls("_enc", rows.height, pl.String)
    for c in code.unique().to_list():
        if not c:
            continue
        idx = (code == c).arg_true()
        set_fields = [n for i, n in enumerate(names) if c >> i & 1]
        part = narrow.select(set_fields)[idx] if idx.len() < rows.height else narrow.select(set_fields)
        out = out.scatter(idx, part.select(pl.struct(*set_fields).struct.json_encode()).to_series())
    return pl.DataFrame({"_enc": out})


def _ref_read(
    seg: pl.DataFrame, node: pl.Expr, path: pl.Expr, batch: _Batch | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """The `steps` and `events` rows (not conformed) of the prepared lines `seg` and the lines understood
    (distinct). `node`, `path`: a row's `node` and `file` (over a row's `host` and `line`). `batch`: see
    `parse_many`."""
    titan = _titan_pre(seg)
    minmax = _minmax_pre(seg)
    present = _present(seg, titan, minmax)
    if not present:
        # no grammar runs (each match holds a gate): no fragment, bar, block line or event; the lines
        # understood are the noise and the warnings, the rows none (the callers conform them)
        none = pl.Series("line", [], dtype=pl.Int64)
        understood = pl.concat([_noise_lines(seg, none), _warning_lines(seg)]).unique()
        return pl.DataFrame(schema=_EMPTY_STEPS), pl.DataFrame(), understood
    frags = S._step_fragments(seg, present, titan)
    bars, bar_lines = S._bar_fragments(seg, present, batch)
    blocks, block_lines, nv = S._block_fragments(seg, present, minmax)
    frags += bars + blocks
    events, event_lines = S._events(seg, nv, node, path, present)

    understood_lines = pl.concat(
        [f.select("line") for f in frags] + [bar_lines, block_lines, event_lines], how="vertical_relaxed"
    ).get_column("line")
    understood_lines = pl.concat(
        [understood_lines, _noise_lines(seg, understood_lines), _warning_lines(seg)]
    ).unique()

    if frags:
        if any("_ttext" in f.columns for f in frags):  # (timers read later, see `_block_fragments`)
            no_text = pl.lit(None, dtype=pl.String).alias("_ttext")
            frags = [f if "_ttext" in f.columns else f.with_columns(no_text) for f in frags]
        all_frags = pl.concat(frags, how="vertical_relaxed")
        if batch is not None:
            batch.note_single_divisions(all_frags)
        rows = S._rows(all_frags)
    else:
        rows = pl.DataFrame(schema=_FRAG).drop("seg").with_columns(orphan_group=pl.lit(None, dtype=pl.Boolean))
    if batch is not None:
        batch.note_single_phases(rows)
    return S._finish(rows, seg, node, path), events, understood_lines


# ----------------------------------------------------------------------------- tests


def _val(rnd: random.Random, kind: str, p_null: float) -> object:
    if rnd.random() < p_null:
        return None
    if kind == "f":
        return rnd.choice([rnd.uniform(-1e6, 1e6), rnd.random(), 0.0, 1e21, math.inf, math.nan, 3.0])
    if kind == "i":
        return rnd.randint(-(10**12), 10**12)
    if kind == "s":
        return rnd.choice(["a", 'q"u', "null", "x\\y", "é", ""])
    return [{"name": rnd.choice(["fwd", "bwd", None]), "ms": _val(rnd, "f", 0.3)} for _ in range(rnd.randint(0, 3))]


@pytest.mark.parametrize("seed", range(30))
def test_encode_by_null_pattern(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([0, 1, 5, 200, S._LANE_MIN + 3])
    kinds = [rnd.choice("fisl") for _ in range(rnd.randint(1, 5))]
    # per field: never null, always null, or sometimes (one pattern or several)
    p = [rnd.choice([0.0, 0.0, 1.0, 0.2]) for _ in kinds]
    data = {f"c{j}": [_val(rnd, k, p[j]) for _ in range(n)] for j, k in enumerate(kinds)}
    schema = {
        f"c{j}": {"f": pl.Float64, "i": pl.Int64, "s": pl.String, "l": pl.List(pl.Struct({"name": pl.String, "ms": pl.Float64}))}[k]
        for j, k in enumerate(kinds)
    }
    rows = pl.DataFrame(data, schema=schema)
    enc = {c: pl.col(c) for c in rows.columns}
    if rnd.random() < 0.3:  # (an expression field, as `_step_detail` gives for the timers)
        enc[rows.columns[0]] = pl.when(pl.col(rows.columns[0]).is_not_null()).then(pl.col(rows.columns[0]))
    got = S._encode_by_null_pattern(rows, enc)
    ref = _ref_encode_by_null_pattern(rows, enc)
    assert got.schema == ref.schema
    assert got.equals(ref, null_equal=True)


_REFS = {"_read": _ref_read, "_prepare": R._prepare}


def _result(lines: list[str], refs: bool, monkeypatch: pytest.MonkeyPatch, name: str = "train.log") -> ParseResult:
    with monkeypatch.context() as m:
        if refs:
            for fn, ref in _REFS.items():
                m.setattr(S, fn, ref)
        return S.parse(pl.Series("line", lines, dtype=pl.String), FileContext(path=f"n1/{name}", node="n1", year_hint=2025))


def _same_parse(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> ParseResult:
    got, want = _result(lines, False, monkeypatch), _result(lines, True, monkeypatch)
    assert_same_result(got, want)
    return got


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_files_as_they_are_and_grown(path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    lines = lines_from_bytes(path.read_bytes()).to_list()
    _same_parse(lines, monkeypatch)
    _same_parse(_grown(lines), monkeypatch)


def _meg_srun(rnd: random.Random, n_steps: int, rank: int) -> list[str]:
    """A Megatron log under `srun -l` of the lane's shape: each iteration line followed by its timers."""
    out = []
    for it in range(1, n_steps + 1):
        out.append(
            f"{rank}:  [2025-03-02 07:{it // 60 % 60:02d}:{it % 60:02d}] iteration {it:8d}/ 100000 | consumed samples: "
            f"{it * 512:12d} | elapsed time per iteration (ms): {rnd.uniform(1000, 2000):.1f} | learning rate: "
            f"3.000000E-04 | global batch size:   512 | lm loss: {rnd.uniform(1, 3):.6E} | loss scale: 1.0 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
        out.append(f"{rank}: (min, max) time across ranks (ms):")
        for name in ("forward-backward", "forward-compute", "backward-compute", "optimizer"):
            a = rnd.uniform(1, 900)
            out.append(f"{rank}:     {name} ...............................: ({a:.2f}, {a + rnd.uniform(0, 50):.2f})")
    return out


_GATED = [  # (lines holding gates of grammars but matching none: no fragment)
    "/opt/x.py:3: UserWarning: iteration is slow",
    "(min, max) time across ranks (ms):",
    "INFO:megatron.core.utils:^^^^ Bottom 2 Ranks with lowest  Etpt(TF): 280.02/16, 399.17/17,",
    "step: nothing here",
    "loss: none",
    "  warnings.warn(",
    "",
    "Epoch 3 began",
    "100%| done",
]


@pytest.mark.parametrize("seed", range(12))
def test_synthetic(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    kind = list(_GENS)[seed % 3]
    lines = list(_GENS[kind](rnd, rnd.choice([5, 60])))
    if seed % 2:
        lines = _mutate(rnd, lines)
    _same_parse(lines, monkeypatch)
    gated = [rnd.choice(_GATED) for _ in range(rnd.choice([3, 50, S._LANE_MIN + 5]))]
    _same_parse(gated, monkeypatch)
    if seed % 4 == 0:  # (a Megatron srun log whose lane leaves the straggler and warning lines to `_parse`)
        meg = list(_meg_srun(rnd, S._MEG_MIN + 300, seed % 8))
        at = sorted(rnd.sample(range(len(meg)), 200))
        for k, i in enumerate(at):
            meg.insert(i + k, f"{seed % 8 + rnd.randint(1, 4)}: " + rnd.choice(_GATED))  # (other streams)
        _same_parse(meg, monkeypatch)


_BARS = (
    "1217%|████████████████████████████| 2435262/200000 [964:52:10<-34026:42, 1.40s/it]",
    "202%|████████████████████| 405230/200000 [160:34:55<-4786:16, 1.35s/it]",
    "99999%|██| 9/0 [00:01<-00:01, 1.00s/it, loss=1.5]",
    "Epoch 1:  45%|████▌     | 450/1000 [01:02<01:10,  7.80it/s, loss=1.23]",
    "Train: 1000%|██████████| 10000/1000 [01:02<-10:00,  7.80it/s, loss=2]",
    "é 0001%|| 1/1 [00:00<00:00, 1.0it/s]",
    "45%|███| 450/1000 [01:02<?, ?it/s]",
    "12345%|██████████| 123450/1000 [20:00<-3:20, 1.00s/it, loss=<-1]",
)
_ALPHABET = " |[]<>-,:0123456789/%?.sit\u0663\u00e9\r"


def _tqdm_same(segs: list[str]) -> None:
    seg = pl.DataFrame(
        {"line": range(len(segs)), "seg": [0] * len(segs), "text": segs},
        schema={"line": pl.Int64, "seg": pl.Int64, "text": pl.String},
    )
    got = S._tqdm_match(seg)
    want = S._match(seg, g.TQDM_RE, pl.col("text").str.contains("%|", literal=True))
    want = want.with_columns(m=pl.struct(*(pl.col("m").struct.field(f) for f in S._TQDM_FIELDS.to_schema())))
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)


@pytest.mark.parametrize("seed", range(4))
def test_tqdm_lane_many_digits(seed: int) -> None:
    rnd = random.Random(seed)
    segs = [mutated(rnd, rnd.choice(_BARS), _ALPHABET, edits=2, span=2) for _ in range(S._LANE_MIN + 500)]
    _tqdm_same(segs)
    fast = pl.Series(segs).str.contains(S._TQDM_CANON)
    assert fast.sum() > S._LANE_MIN // 2  # (the lane takes most)


_bar = st.tuples(
    st.sampled_from(["", "Epoch 1: ", "Train: ", " ", "é ", "x"]),
    st.from_regex(r"\A[0-9]{1,7}\Z"),
    st.sampled_from(["|          |", "|█         |", "||"]),
    st.sampled_from([" 2693/200000", "5/10", "  7/ 9"]),
    st.sampled_from([" [1:03:54<76:40:58", " [00:00<?", "[00:01<00:02", " [964:52:10<-34026:42"]),
    st.sampled_from([", 1.34s/it]", ", ?it/s]", ",  2.5 it/s, loss=2.3]", ", 1.2it/s", "]", ", 1.40s/it]"]),
).map(lambda t: t[0] + t[1] + "%" + t[2] + t[3] + t[4] + t[5])


@settings(max_examples=200, deadline=None)
@given(st.lists(_bar, min_size=1, max_size=6))
def test_tqdm_lane_many_digits_hypothesis(bars: list[str]) -> None:
    # (repeated past the lane's threshold, the bars in order)
    _tqdm_same((bars * (S._LANE_MIN // len(bars) + 1))[: S._LANE_MIN + len(bars)])


_PREFIXES = ["", "[default0]:", "worker-1: ", "\x1b[32m", "[rank3]: ", "3: ", "INFO:root:", "é "]


def _redrawn(rnd: random.Random, lines: list[str]) -> list[str]:
    """`lines` (repeated to past the threshold of segments) joined by `\r` into fewer physical lines than the
    threshold, some behind a prefix (envelope, ANSI code, logging prefix)."""
    if not lines:
        lines = [""]
    segs = (lines * (S._LANE_MIN // len(lines) + 2))[: S._LANE_MIN + rnd.randint(1, 900)]
    out, i = [], 0
    while i < len(segs):
        k = rnd.randint(2, 12)
        pre = rnd.choice(_PREFIXES)
        out.append(pre + "\r".join(segs[i : i + k]))
        i += k
    assert len(out) < S._LANE_MIN <= len(segs)
    return out


def _prepare_same(lines: list[str], ctx: FileContext) -> None:
    ser = pl.Series("line", lines, dtype=pl.String)
    with S.ascii_scope(S._ascii or S.is_ascii(ser)):
        got, want = S._prepare(ser, ctx), R._prepare(ser, ctx)
    for a, b in zip(got, want, strict=True):
        assert a.schema == b.schema
        assert a.equals(b, null_equal=True)


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_prepare_many_segments_files(path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    rnd = random.Random(path.name)
    lines = _redrawn(rnd, lines_from_bytes(path.read_bytes()).to_list())
    _prepare_same(lines, FileContext(path="n1/train.log", node="n1", year_hint=2025))
    _same_parse(lines, monkeypatch)


@pytest.mark.parametrize("seed", range(8))
def test_prepare_many_segments_synthetic(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    kind = list(_GENS)[seed % 3]
    lines = _mutate(rnd, list(_GENS[kind](rnd, 400)))
    lines = _redrawn(rnd, lines)
    _prepare_same(lines, FileContext(path="n1/train.log", node="n1", year_hint=None if seed % 4 == 1 else 2025))
    _same_parse(lines, monkeypatch)


def test_prepare_many_segments_parse_many(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(7)
    items = []
    for i, path in enumerate(_files()[:12]):
        lines = lines_from_bytes(path.read_bytes()).to_list()
        if i % 2:
            lines = _redrawn(rnd, lines)[:300]
        items.append((pl.Series("line", lines, dtype=pl.String), FileContext(path=f"n{i}/train.log", node=f"n{i}", year_hint=2025)))
    got = S.parse_many(items)
    with monkeypatch.context() as m:
        for fn, ref in _REFS.items():
            m.setattr(S, fn, ref)
        want = S.parse_many(items)
    for a, b in zip(got, want, strict=True):
        assert_same_result(a, b)
