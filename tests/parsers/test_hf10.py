# ruff: noqa: E501
"""hf10's changes to step_log (the Hugging Face Trainer path) give what the code they replace gives (the
references kept verbatim in `_hf10_ref`).

`_rows_gathered`: fragments without any timers (no list, no one-line timer text) leave the `timers` column out
of the gathers, aggregations and sorts and put an empty list in every row at the end (`_rows_of_singles` and
`_group_rows` then work without it).

Whole parses are compared: the parser's answer with the references patched in (`_REFS`) against its answer as
it is (tables, accounting), on the fixtures and real logs (as they are, grown past the big-input threshold and
redrawn into `\\r` segments), synthetic Hugging Face logs of the benchmark's shape (bars redrawn with `\\r`,
blank segments, postfix dicts, evaluation bars, bars past the total, NCCL lines), mutated, with envelopes, the
other synthetic training logs (DeepSpeed one-line timers: fragments with timers), and `parse_many`.
"""

from __future__ import annotations

import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, ParseResult, lines_from_bytes
from tests.conftest import assert_same_result, mutated
from tests.parsers import _hf10_ref as R  # noqa: N812
from tests.parsers.test_steplog9 import _redrawn
from tests.parsers.test_steplog_s8 import _GENS, _files, _grown, _mutate

_REFS = {
    name: getattr(R, name)
    for name in (
        "_rows_gathered",
        "_rows_of_singles",
        "_group_rows",
        "_segments",
        "_prepare",
        "_tqdm_match",
        "_bar_fragments",
        "_unlabelled_bars",
        "_step_fragments",
        "_times_general",
        "_sort_stable",
        "_read",
        "_present",
    )
}


def _result(lines: list[str], refs: bool, monkeypatch: pytest.MonkeyPatch) -> ParseResult:
    with monkeypatch.context() as m:
        if refs:
            for fn, ref in _REFS.items():
                m.setattr(S, fn, ref)
        ser = pl.Series("line", lines, dtype=pl.String)
        return S.parse(ser, FileContext(path="n1/train.log", node="n1", year_hint=2025))


def _same(got: ParseResult, want: ParseResult) -> None:
    assert_same_result(got, want)


def _prepare_same(lines: list[str], year: int | None = 2025) -> None:
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/train.log", node="n1", year_hint=year)
    with S.ascii_scope(S._ascii or S.is_ascii(ser)):
        got, want = S._prepare(ser, ctx), R._prepare(ser, ctx)
    for a, b in zip(got, want, strict=True):
        assert a.schema == b.schema
        assert a.equals(b, null_equal=True)


def _same_parse(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> ParseResult:
    _prepare_same(lines)
    # (the fragments `_rows` is given are kept, and its rows compared with the references' too: the whole
    # parse reads some columns of them only)
    seen: list[pl.DataFrame] = []
    rows = S._rows
    with monkeypatch.context() as m:
        m.setattr(S, "_rows", lambda frags: (seen.append(frags), rows(frags))[1])
        got = _result(lines, False, monkeypatch)
    _same(got, _result(lines, True, monkeypatch))
    for frags in seen:
        a = S._rows(frags)
        with monkeypatch.context() as m:
            for fn, ref in _REFS.items():
                m.setattr(S, fn, ref)
            b = S._rows(frags)
        assert a.schema == b.schema
        assert a.equals(b, null_equal=True)
    return got


_POST = [
    "]",
    ", loss=1.25]",
    ", loss=2.5, global_step=12]",
    "]  ",
    ", reduced_train_loss=3.1, consumed_samples=100]",
]
_DESC = ["", "", "", " ", "Epoch 1: ", "Training: ", "Evaluating: ", "é "]


def _bar(rnd: random.Random, s: int, total: int, desc: str = "", post: str = "]") -> str:
    pct = 100 * s // max(total, 1)
    fill = "█" * min(10, pct // 10) + rnd.choice(["", "▌", "▏"])
    el = f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
    if s > total and rnd.random() < 0.9:
        rem = f"-{(s - total) // 60}:{(s - total) % 60:02d}"
    else:
        rem = rnd.choice(["77:43:32", "?", "00:01", "1:02:03"])
    rate = rnd.choice([f"{rnd.uniform(1, 2.3):.2f}s/it", f"{rnd.uniform(0.4, 9):.2f}it/s", "?it/s"])
    return f"{desc}{pct:3d}%|{fill:10s}| {s}/{total} [{el}<{rem}, {rate}{post}"


def _hf_log(rnd: random.Random, n_steps: int, nccl: bool = True, envelope: str = "") -> list[str]:
    """A Hugging Face Trainer log of the benchmark's shape: runs of bars redrawn with `\\r` (the first segment
    empty, the last bar redrawn at the head of the next line), a blank segment and the postfix dict."""
    total = rnd.choice([n_steps, n_steps // 2 + 1, n_steps * 2])
    out = [
        "[INFO|trainer.py:2128] 2025-03-04 09:00:00,123 >> ***** Running training *****",
        f"[INFO|trainer.py:2136] 2025-03-04 09:00:00,123 >>   Total optimization steps = {total:,}",
    ]
    if rnd.random() < 0.3:
        out.pop()
    step, k, last = 0, rnd.choice([5, 10, 20]), None
    desc, post = rnd.choice(_DESC), rnd.choice(_POST) if rnd.random() < 0.3 else "]"
    while step < n_steps:
        segs = [""] + ([last] if last else [])
        segs += [_bar(rnd, s, total, desc, post) for s in range(step + 1, min(step + k, n_steps) + 1)]
        step = min(step + k, n_steps)
        last = segs[-1]
        r = rnd.random()
        if r < 0.8:
            segs += [" " * 40, f"{{'loss': {rnd.uniform(0, 4):.4f}, 'grad_norm': {rnd.uniform(0, 2):.6f}, 'learning_rate': {rnd.uniform(0, 2e-5):.6e}, 'epoch': {step / 1e4:.4f}}}"]
        out.append(envelope + "\r".join(segs))
        if r > 0.97:
            out.append(envelope + "\r".join(["", *[_bar(rnd, s, 40, "Evaluating: ") for s in range(1, 6)]]))
            out.append(envelope + "{'eval_loss': 1.5, 'eval_runtime': 3.0, 'epoch': 1.0}")
        elif nccl and r > 0.95:
            out.append(envelope + "gpu-node-343:   warnings.warn(")
            out.append(envelope + "gpu-node-343: 2025-03-04 09:00:01 NCCL WARN NET/IB : Got async event : port error")
            out.append(envelope + f"[INFO|trainer.py:3410] 2025-03-07 18:38:30,357 >> Saving model checkpoint to /out/checkpoint-{step}")
    if rnd.random() < 0.5:
        out.append("{'train_runtime': 100.5, 'train_samples_per_second': 3.2, 'train_steps_per_second': 0.4, 'train_loss': 1.1, 'epoch': 2.0}")
    return out


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_files(path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    lines = lines_from_bytes(path.read_bytes()).to_list()
    _same_parse(lines, monkeypatch)
    _same_parse(_grown(lines), monkeypatch)
    _same_parse(_redrawn(random.Random(path.name), lines), monkeypatch)


@pytest.mark.parametrize("seed", range(10))
def test_hf_logs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    env = ["", "", "worker-1: ", "[default0]:", "3: "][seed % 5]
    lines = _hf_log(rnd, rnd.choice([300, 2000, S._LANE_MIN * 2]), nccl=seed % 3 > 0, envelope=env)
    if seed % 2:
        lines = _mutate(rnd, lines)
    got = _same_parse(lines, monkeypatch)
    assert got.tables["steps"].height > 100


@pytest.mark.parametrize("seed", range(6))
def test_other_training_logs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    kind = list(_GENS)[seed % 3]
    lines = list(_GENS[kind](rnd, rnd.choice([60, 2500])))
    if seed % 2:
        lines = _mutate(rnd, lines)
    _same_parse(lines, monkeypatch)
    _same_parse(_redrawn(rnd, lines), monkeypatch)


_ALPHABET = " |[]<>-,:0123456789/%?.sit{}'\u00e9\r█"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 3))
def test_hf_logs_mutated_hypothesis(seed: int, edits: int) -> None:
    rnd = random.Random(seed)
    lines = _hf_log(rnd, rnd.choice([200, S._LANE_MIN + 500]), envelope=rnd.choice(["", "w1: "]))
    lines = [mutated(rnd, ln, _ALPHABET, edits=edits, span=3) if rnd.random() < 0.2 else ln for ln in lines]
    with pytest.MonkeyPatch.context() as mp:
        _same_parse(lines, mp)


def test_parse_many(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(7)
    items = []
    for i, path in enumerate(_files()[:10]):
        lines = lines_from_bytes(path.read_bytes()).to_list()
        items.append((pl.Series("line", lines, dtype=pl.String), FileContext(path=f"n{i}/train.log", node=f"n{i}")))
    for i in range(3):
        lines = _hf_log(rnd, 1500)
        items.append((pl.Series("line", lines, dtype=pl.String), FileContext(path=f"h{i}/train.log", node=f"h{i}")))
    got = S.parse_many(items)
    with monkeypatch.context() as m:
        for fn, ref in _REFS.items():
            m.setattr(S, fn, ref)
        want = S.parse_many(items)
    for a, b in zip(got, want, strict=True):
        _same(a, b)


_WORDS = ["hf-trainer", "tqdm", "a", "", "é", "deepspeed", "Z", "tqdm "]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(1, 6),
    st.sampled_from([10, S._LANE_MIN + 7, 3 * S._LANE_MIN]),
    st.booleans(),
)
def test_sort_stable_hypothesis(seed: int, n_words: int, n: int, nulls: bool) -> None:
    rnd = random.Random(seed)
    words = rnd.sample(_WORDS, n_words)
    keys = rnd.sample(["|", "h|0", "h|1", "|3"], rnd.randint(1, 3))
    df = pl.DataFrame(
        {
            "key": [rnd.choice(keys) for _ in range(n)],
            "framework": [None if nulls and rnd.random() < 0.01 else rnd.choice(words) for _ in range(n)],
            "line": sorted(rnd.randint(0, n // 3) for _ in range(n)),
            "v": range(n),
        }
    )
    by = ("key", "framework", "line")
    got, want = S._sort_stable(df, by), R._sort_stable(df, by)
    assert got.equals(want, null_equal=True)
    assert got.equals(df.sort(*by, maintain_order=True), null_equal=True)


def _ref_hf_keys(m: pl.DataFrame) -> pl.DataFrame:
    """The old `_step_fragments` lines that `_hf_keys` replaces (verbatim but for `m`'s name and the return)."""
    txt = pl.col("text")
    k = {name: S._key(txt, pat) for name, pat in S.g.HF_KEYS.items()}
    text = m.get_column("text")
    with S.ascii_scope(S._ascii or S.is_ascii(text)):
        k = {name: S._key(txt, pat) for name, pat in S.g.HF_KEYS.items()}
        m = m.with_columns(
            **{
                f"_hk_{name}": e
                if S._HF_KEY_LITS[name] is None or text.str.contains_any(list(S._HF_KEY_LITS[name])).any()
                else pl.lit(None, dtype=pl.Float64)
                for name, e in k.items()
            }
        )
    return m


_NUMS = ["3.9540", "1.", ".5", "nan", "-inf", "1e5", "1.5e", "1,234", "\u0663.5", "+3", "1E+05", "-0.0", "2e-05", "7", "inf", "1.2.3"]
_DICTS = [
    "{{'loss': {a}, 'grad_norm': {b}, 'learning_rate': {c}, 'epoch': {d}}}",
    "{{'loss': {a}, 'grad_norm': {b}, 'learning_rate': {c}, 'epoch': {d}}} ",
    " {{'loss': {a}, 'grad_norm': {b}, 'learning_rate': {c}, 'epoch': {d}}}",
    "{{'loss': {a}, 'grad_norm': {b}, 'learning_rate': {c}, 'epoch': {d}, 'step': 12}}",
    "{{'loss': {a}, 'learning_rate': {c}, 'grad_norm': {b}, 'epoch': {d}}}",
    "{{'eval_loss': {a}, 'eval_runtime': {b}, 'epoch': {d}}}",
    "{{'train_runtime': {a}, 'train_samples_per_second': {b}, 'train_steps_per_second': {c}, 'train_loss': {d}, 'epoch': 2.0}}",
    '{{"loss": "{a}", "global_step": 8, "learning_rate": {c}}}',
    "{{'loss': {a}, 'grad_norm': {b}, 'learning_rate': {c}, 'epoch': {d}, 'loss': 9}}",
]


@pytest.mark.parametrize("seed", range(8))
def test_hf_keys(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([50, S._LANE_MIN + 100])
    pick = (lambda: _DICTS[0]) if seed % 4 == 0 else (lambda: rnd.choice(_DICTS))
    lines = [
        pick().format(**{x: rnd.choice(_NUMS) if rnd.random() < 0.3 else f"{rnd.uniform(0, 5):.4f}" for x in "abcd"})
        for _ in range(n)
    ]
    if seed % 2:
        lines = [mutated(rnd, ln, _ALPHABET, edits=2, span=2) if rnd.random() < 0.2 else ln for ln in lines]
    m = pl.DataFrame({"line": range(n), "text": lines}, schema={"line": pl.Int64, "text": pl.String})
    want = _ref_hf_keys(m)
    text = m.get_column("text")
    with S.ascii_scope(S._ascii or S.is_ascii(text)):
        got = m.with_columns(**S._hf_keys(text))
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)


@pytest.mark.parametrize("seed", range(6))
def test_tqdm_match(seed: int) -> None:
    rnd = random.Random(seed)
    total = rnd.choice([50, 200000, 7])
    segs = []
    for s in range(S._LANE_MIN + 300):
        bar = _bar(rnd, s + rnd.choice([0, 0, total]), total, rnd.choice(_DESC), rnd.choice(_POST))
        if rnd.random() < 0.1:
            bar = rnd.choice(["1234", "12", "99999"]) + bar.lstrip(" 0123456789")
        segs.append(mutated(rnd, bar, _ALPHABET, edits=2, span=2) if rnd.random() < 0.2 * (seed % 3) else bar)
    seg = pl.DataFrame(
        {"line": range(len(segs)), "seg": [0] * len(segs), "text": segs},
        schema={"line": pl.Int64, "seg": pl.Int64, "text": pl.String},
    )
    got, want = S._tqdm_match(seg), R._tqdm_match(seg)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)


_GATE_BITS = ["", "", "Step ", "{", "iter ", "step:", "loss:", "Epoch ", " epoch ", "time (ms)", "tok/s)", ":::MLLOG", "/Rank: ", "^^^^"]


@pytest.mark.parametrize("seed", range(12))
def test_present_skips_canonical_bars(seed: int) -> None:
    """`_present` with the canonical bars left out for their parts (`_tqdm_lane`) finds the gates it finds
    scanning every segment: bars with gates in their descriptions, drawings and postfixes, mutated."""
    rnd = random.Random(seed)
    # (the gates in the bars' parts, one kind of part each, none in the other lines: a part left out is missed)
    bits = rnd.sample(_GATE_BITS[2:], 4)
    where = seed % 3
    segs = []
    for s in range(S._LANE_MIN + 600):
        if rnd.random() < 0.05:
            segs.append(bits[3] + " x")
            continue
        desc = rnd.choice(_DESC) if where != 0 or rnd.random() < 0.9 else bits[0].replace("|", "") + " "
        post = rnd.choice(_POST) if where != 1 or rnd.random() < 0.9 else ", " + bits[1] + "]"
        if desc == "Epoch 1: " and (bits[0] == "Epoch " or where > 0):  # (a digit: no canonical bar; its own gate)
            desc = ""
        bar = _bar(rnd, s, rnd.choice([300, 20000]), desc, post)
        if where == 2 and rnd.random() < 0.05:
            head, _, rest = bar.partition("|")
            bar = head + "|" + bits[2] + "|" + rest.partition("|")[2]
        if rnd.random() < 0.1 * (seed // 3 % 3):
            bar = mutated(rnd, bar, _ALPHABET + "{:Sepa", edits=2, span=2)
        segs.append(bar)
    if seed % 4 == 0:  # (no gate but the bars' own)
        segs = [x for x in segs if "%|" in x]
    seg = pl.DataFrame(
        {"line": range(len(segs)), "seg": [1] * len(segs), "text": segs, "key": ["|"] * len(segs)},
        schema={"line": pl.Int64, "seg": pl.Int64, "text": pl.String, "key": pl.String},
    ).with_columns(**{c: pl.lit(None, dtype=t) for c, t in S._FRAG.items() if c in ("host", "rank", "ts", "ts_quality")})
    m, gates = S._tqdm_lane(seg.select(*S._BASE, "text"))
    assert gates is not None and gates[0].len() > S._LANE_MIN // 2
    want = S._present(seg)
    assert S._present(seg, None, None, gates) == want
    assert len(want) > 1 + (seed % 4 > 0)
    assert m.equals(R._tqdm_match(seg.select(*S._BASE, "text")), null_equal=True)


def test_present_gate_across_a_bar_pipe() -> None:
    """`| epoch ` across the first `|` of a canonical bar whose drawing starts ` epoch `, `%|` across none."""
    segs = [f"  3%| epoch 1| {s}/300 [00:01<00:02, 1.00s/it]" for s in range(S._LANE_MIN + 10)]
    seg = pl.DataFrame(
        {"line": range(len(segs)), "seg": [1] * len(segs), "text": segs, "key": ["|"] * len(segs)},
        schema={"line": pl.Int64, "seg": pl.Int64, "text": pl.String, "key": pl.String},
    ).with_columns(host=pl.lit(None, dtype=pl.String), rank=pl.lit(None, dtype=pl.Int32), ts=pl.lit(None, dtype=S._FRAG["ts"]), ts_quality=pl.lit(None, dtype=pl.String))
    _, gates = S._tqdm_lane(seg.select(*S._BASE, "text"))
    assert gates is not None and gates[0].len() == seg.height
    assert S._present(seg, None, None, gates) == S._present(seg) == {"%|", "| epoch "}
