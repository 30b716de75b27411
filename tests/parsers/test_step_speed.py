"""The step-log fast paths give what the regexes they replace give, and the big-log generator makes what it says."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _step_grammars as g
from parsers import registry, step_log
from parsers.base import FileContext, check_accounting, lines_from_bytes
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------------------- (min, max) timer entries

_ws = st.sampled_from([" ", "  ", "    ", "\t", " \u00a0"])
_name_chars = st.sampled_from(list("ab-_ .:xyz/") + ["..", " .", ". "])
_num = st.sampled_from(["1", "12.5", "0.000", "1e3", "-2.5E-02", "nan", "inf", "+3.", ".5", "1,000"])


@st.composite
def _minmax_lines(draw: st.DrawFn) -> str:
    name = "".join(draw(st.lists(_name_chars, min_size=1, max_size=6)))
    dots = draw(st.sampled_from(["", " ", " ....", "....", " .. "]))
    sep = draw(st.sampled_from([":", ": ", ":  ", " :"]))
    gap = draw(st.sampled_from(["", " ", "  "]))
    tail = draw(st.sampled_from(["", " ", "  \t"]))
    return f"{draw(_ws)}{name}{dots}{sep}({gap}{draw(_num)},{gap}{draw(_num)}{gap}){tail}"


@settings(max_examples=300, deadline=None)
@given(st.lists(_minmax_lines(), min_size=1, max_size=8))
def test_minmax_groups_equal_the_regex(lines: list[str]) -> None:
    s = pl.Series("text", lines)
    s = s.filter(s.str.contains(g.TIMER_MINMAX_RE))
    if s.len() == 0:
        return
    want = s.str.extract_groups(g.TIMER_MINMAX_RE).struct.unnest()
    got = step_log._minmax_groups(s).struct.unnest()
    assert got.equals(want), (lines, got.to_dicts(), want.to_dicts())


# ----------------------------------------------------------------------------- one-line timers

_prefix = st.sampled_from(
    ["", "[Rank 0] ", "[2024-03-01 08:00:10,101] [INFO] [logging.py:96:log_dist] [Rank 3] ", "rank=2 ", "x] ", "a time (ms) "]
)
_pair = st.builds(
    lambda n, sp, v: f"{n}{sp}:{sp}{v}",
    st.sampled_from(["fwd", "bwd_inner", "forward-compute", "batch generator", "step", "a b", "x-"]),
    st.sampled_from(["", " ", "  "]),
    _num,
)


@st.composite
def _timer_lines(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(_pair, max_size=5))
    seps = draw(st.sampled_from([" | ", "|", " |  ", " , "]))
    return f"{draw(_prefix)}time (ms){draw(st.sampled_from([' | ', '|', '  |']))}{seps.join(pairs)}{draw(st.sampled_from(['', ' ', ' |']))}"


@settings(max_examples=300, deadline=None)
@given(st.lists(_timer_lines(), min_size=1, max_size=6))
def test_timer_line_split_equals_the_regex(lines: list[str]) -> None:
    df = pl.DataFrame({"text": lines}).filter(pl.col("text").str.contains(g.TIMER_LINE_RE))
    if df.height == 0:
        return
    txt = pl.col("text")
    old_pairs = df.select(p=txt.str.extract_groups(g.TIMER_LINE_RE).struct.field("pairs")).to_series()
    new_pairs = df.select(p=txt.str.replace("^.*?" + step_log._TIMER_LINE_PREFIX, "")).to_series()
    assert new_pairs.equals(old_pairs)
    each = pl.DataFrame({"p": old_pairs}).with_row_index().select("index", p=pl.col("p").str.extract_all(g.TIMER_PAIR_RE))
    each = each.explode("p")
    old = each.select("index", g=pl.col("p").str.extract_groups(rf"^\s*(?P<name>.*?)\s*:\s*(?P<v>{g.NUM})$")).select(
        "index", name=pl.col("g").struct.field("name"), v=pl.col("g").struct.field("v")
    )
    sp = pl.col("p").str.splitn(":", 2)
    new = each.select(
        "index", name=sp.struct.field("field_0").str.strip_chars_end(), v=sp.struct.field("field_1").str.strip_chars_start()
    )
    assert new.equals(old)


# ----------------------------------------------------------------------------- gates


def test_every_gated_grammar_needs_its_gate() -> None:
    """A gate literal must be in every line its grammar can match: the grammar's prefilter literal."""
    for lit in step_log._GATES:
        assert lit and isinstance(lit, str)
    assert set(step_log._NVRX_OTHER_GATES) <= set(step_log._GATES)
    for lit in ("across ranks", "[batch=", "performance:"):  # block headers
        assert lit in step_log._GATES


# ----------------------------------------------------------------------------- bench/big_steps.py


def _big_steps():
    return load_script("bench/big_steps.py")


def test_big_steps_generator_is_deterministic_sized_and_parsed(tmp_path: Path) -> None:
    big = _big_steps()
    for seed in range(4):
        a, b = tmp_path / f"a{seed}.log", tmp_path / f"b{seed}.log"
        big.write(a, 0.3, seed)
        big.write(b, 0.3, seed)
        data = a.read_bytes()
        assert data == b.read_bytes()
        assert 300_000 <= len(data) < 300_000 + 70_000  # one long tqdm line at most past the size
        det = registry.detect(data[:16384], a.name)
        assert det.parser is step_log, (seed, det)
        lines = lines_from_bytes(data)
        result = step_log.parse(lines, FileContext(path=a.name, node="n1", year_hint=2025))
        assert check_accounting(result, lines)
        assert result.tables["steps"].height > 20
        assert result.unrecognized < 0.25 * (result.parsed + result.unrecognized)


# ----------------------------------------------------------------------------- torchtitan step lines

_titan_piece = st.sampled_from(
    ["step: 2", "step:  14", "loss:  3.24", "loss: -1.0", "loss: nan", "loss: 3.5e", "memory: 9.46GiB(64.99%)", "tps: 7,282",
     "wps: 10", "mfu: 0.17%", "tflops: 0.52", "grad_norm:  0.83", "[titan] 2026-05-18 16:04:46,338 - root - INFO -", "x"]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(_titan_piece, max_size=3),
            st.sampled_from(["step: 5", "step:12", " step:  7"]),
            st.sampled_from([" ", "  ", "\t"]),
            st.sampled_from(["loss: 2.5", "loss:  -1.0", "loss: nan", "loss: 1e-3", "loss: 3.5e"]),
            st.lists(_titan_piece, max_size=5),
        ).map(lambda t: "  ".join(t[0]) + t[1] + t[2] + t[3] + "  " + "  ".join(t[4])),
        min_size=1,
        max_size=6,
    )
)
def test_titan_head_split_equals_the_regex(lines: list[str]) -> None:
    df = pl.DataFrame({"text": lines}).filter(pl.col("text").str.contains(g.TITAN_RE))
    if df.height == 0:
        return
    txt = pl.col("text")
    want = df.select(m=txt.str.extract_groups(g.TITAN_RE)).unnest("m")
    head = txt.str.extract_groups(step_log._TITAN_HEAD)
    got = df.select(
        step=head.struct.field("step"),
        loss=head.struct.field("loss"),
        rest=txt.str.replace("^.*?" + step_log._TITAN_HEAD_NC, ""),
    )
    assert got.equals(want), (lines, got.to_dicts(), want.to_dicts())


# ----------------------------------------------------------------------------- split lanes (issue 10)


def _lane_inputs(tmp_path: Path) -> list[tuple[str, bytes]]:
    out = [(p.name, p.read_bytes()) for p in sorted((ROOT / "tests" / "fixtures" / "step-log").glob("*.log"))]
    big = _big_steps()
    for seed in range(4):
        f = tmp_path / f"big{seed}.log"
        big.write(f, 0.25, seed)
        out.append((f.name, f.read_bytes()))
    return out


def test_split_lanes_give_the_rows_of_the_regex_paths(tmp_path: Path, monkeypatch) -> None:
    """Every split lane and subset pass forced on (`_LANE_MIN` 0) and off gives the same result."""
    for name, data in _lane_inputs(tmp_path):
        lines = lines_from_bytes(data)
        ctx = FileContext(path=name, node="n1", year_hint=2025)
        got = {}
        for lane_min in (0, 10**12):
            monkeypatch.setattr(step_log, "_LANE_MIN", lane_min)
            monkeypatch.setattr(step_log, "_ROWS_MIN", lane_min)
            monkeypatch.setattr(step_log, "_MEG_VALUES_MIN", lane_min)
            r = step_log.parse(lines, ctx)
            got[lane_min] = r
        a, b = got[0], got[10**12]
        assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.partial, a.node) == (
            b.parsed, b.unrecognized, b.unrecognized_examples, b.partial, b.node
        ), name
        assert sorted(a.tables) == sorted(b.tables), name
        for t in a.tables:
            assert a.tables[t].equals(b.tables[t], null_equal=True), (name, t)


_mg_field = st.sampled_from(
    [
        "consumed samples:  1024", "elapsed time per iteration (ms): 3891.0",
        "throughput per GPU (TFLOP/s/GPU): 413.2", "learning rate: 1.5E-07", "global batch size:  1024",
        "lm loss: 9.968890E+00", "loss: 2.5", "loss scale: 1.0", "grad norm: 0.931",
        "number of skipped iterations:   0", "number of nan iterations:   0", "decoupled learning rate: 3",
        "num zeros: 5", "params norm: nan", "z loss: 1,0", "samples per second: 12", "x=1", "",
        "lm loss: 3.5e",
        "tokens per gpu per second (tgs): 9", "approx flops per GPU: 5.7TFLOPS", "grad_norm: -inf",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["", " [2025-03-01 06:00:04] ", "[2025-03-01 06:00:04]  ", "x | ", "samples/sec: 1 | "]
            ),
            st.sampled_from(["iteration        1/  500000", "iteration 2/5", "iteration=  3/ 9"]),
            st.lists(_mg_field, max_size=8),
            st.sampled_from([" |", "|", " | ", "", " | cut: 1"]),
        ).map(lambda t: t[0] + t[1] + "".join(" | " + f for f in t[2]) + t[3]),
        min_size=1,
        max_size=6,
    )
)
def test_megatron_split_lane_equals_the_key_regexes(lines: list[str]) -> None:
    text = pl.Series("text", lines)
    got = step_log._megatron_values(text)
    want = pl.DataFrame({"text": text}).select(
        **{f"_k_{k}": step_log._key(pl.col("text"), p) for k, p in g.MEGATRON_KEYS.items()}
    )
    assert got.equals(want, null_equal=True), (lines, got.to_dicts(), want.to_dicts())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(_titan_piece, max_size=2),
            st.sampled_from(["step: 5", "step:  12", " step:  7"]),
            st.sampled_from(["  ", " "]),
            st.sampled_from(["loss: 2.5", "loss:  -1.0", "loss: nan", "loss: 3.5e"]),
            st.lists(_titan_piece, max_size=6),
        ).map(lambda t: "  ".join(t[0]) + t[1] + t[2] + t[3] + "  " + "  ".join(t[4])),
        min_size=1,
        max_size=6,
    )
)
def test_titan_split_lane_equals_the_regexes(lines: list[str]) -> None:
    df = pl.DataFrame({"text": lines}).filter(pl.col("text").str.contains(g.TITAN_RE))
    if df.height == 0:
        return
    import parsers.step_log as s

    old = s._LANE_MIN
    try:
        s._LANE_MIN = 0
        got = step_log._titan_values(df.get_column("text"))
        s._LANE_MIN = 10**12
        want = step_log._titan_values(df.get_column("text"))
    finally:
        s._LANE_MIN = old
    assert got.equals(want, null_equal=True), (lines, got.to_dicts(), want.to_dicts())


_bar = st.tuples(
    st.sampled_from(["", "  ", "Training: ", "Epoch 1: ", "é ", "12"]),
    st.sampled_from(["0", "10", "100", "1234"]),
    st.sampled_from(["|          |", "|█         |", "|██|"]),
    st.sampled_from([" 2693/200000", "5/10", "  7/ 9"]),
    st.sampled_from([" [1:03:54<76:40:58", " [00:00<?", "[00:01<00:02"]),
    st.sampled_from([", 1.34s/it]", ", ?it/s]", ",  2.5 it/s, loss=2.3]", ", 1.2it/s", ", 3.3s/i]", "]"]),
).map(lambda t: t[0] + t[1] + "%" + t[2] + t[3] + t[4] + t[5])


@settings(max_examples=300, deadline=None)
@given(st.lists(_bar, min_size=1, max_size=6))
def test_tqdm_split_lane_equals_the_regex(lines: list[str]) -> None:
    seg = pl.DataFrame({"line": list(range(len(lines))), "seg": [0] * len(lines), "text": lines})
    import parsers.step_log as s

    old = s._LANE_MIN
    try:
        s._LANE_MIN = 0
        got = step_log._tqdm_match(seg)
    finally:
        s._LANE_MIN = old
    want = step_log._match(seg, g.TQDM_RE, pl.col("text").str.contains("%|", literal=True))
    fields = list(step_log._TQDM_FIELDS.to_schema())
    want = want.select("line", *(pl.col("m").struct.field(f) for f in fields))
    got = got.select("line", *(pl.col("m").struct.field(f) for f in fields))
    assert got.equals(want, null_equal=True), (lines, got.to_dicts(), want.to_dicts())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "[", "[titan] ", " [", "I0512 ", "é ", "x1 ", "[INFO|trainer.py:1156] "]),
            st.sampled_from(["2025-03-03 08:00:01", "2025-03-03T08:00:01", "2025-13-45 08:00:01"]),
            st.sampled_from(["", ",107", ".660123", ".1234567890", ",5"]),
            st.sampled_from(["", "Z", "+02:00", "-0530", " ", "] x", ",", "1", " - root"]),
        ).map(lambda t: "".join(t)),
        min_size=1,
        max_size=6,
    )
)
def test_own_time_split_lane_equals_the_regexes(lines: list[str]) -> None:
    seg = pl.DataFrame(
        {"text": lines, "coll_ts": [None] * len(lines)}, schema_overrides={"coll_ts": pl.String}
    )
    import parsers.step_log as s

    old = s._LANE_MIN
    try:
        s._LANE_MIN = 0
        got = step_log._own_time(seg, 2025, True, False)
    finally:
        s._LANE_MIN = old
    want = step_log._own_time_re(seg, 2025, True, False)
    assert got.equals(want, null_equal=True), (lines, got.to_dicts(), want.to_dicts())
