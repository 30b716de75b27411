"""The step-log fast paths give what the regexes they replace give, and the big-log generator makes what it says."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _step_grammars as g
from parsers import registry, step_log
from parsers.base import FileContext, check_accounting, lines_from_bytes

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
    spec = importlib.util.spec_from_file_location("big_steps", ROOT / "bench" / "big_steps.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
