"""The split lanes of step_log on big chunks read what the regexes they replace (Megatron timer entries)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import _step_grammars as g
from parsers import step_log as S  # noqa: N812

_PIECES = [
    *(" ", "  ", "\t", "(", ")", "((", ",", ", ", ".", "....", ":", ": ", "-", "+", "e", "E", "nan", "inf"),
    *("1", "12.5", "-3", ".5", "7.", "1e3", "2E-4", "forward-compute", "optimizer", "a b", "x(y)"),
    *("across ranks",),
    *("ms", "é", "|", "\u3000", "\xa0", "\x85", "\u2009"),
]


def _lines(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = ["(min, max) time across ranks (ms):"]
    for _ in range(n):
        r = rnd.random()
        if r < 0.4:  # a well-formed entry, perhaps with odd blanks
            name = rnd.choice(["forward-compute", "optimizer", "all-grads-sync", "a(b", "x y", "é"])
            out.append(
                f"{rnd.choice([' ', '    ', chr(9)])}{name} {'.' * rnd.randint(0, 5)}:{rnd.choice(['', ' '])}"
                f"({rnd.choice(['', ' '])}{rnd.choice(['1.5', '-2', 'nan', '3e2', '.7'])},"
                f"{rnd.choice(['', ' '])}{rnd.choice(['4', '5.25', '+inf', '1E-3'])}"
                f"{rnd.choice(['', ' ', chr(0xA0)])})"
                f"{rnd.choice(['', ' ', '  x', chr(0x3000)])}"
            )
        else:  # random pieces
            out.append("".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 12))))
    return out


def test_minmax_pre_is_the_regex() -> None:
    text = pl.Series("text", _lines(S._LANE_MIN + 500, 7), dtype=pl.String)
    got = S._minmax_pre(pl.DataFrame({"text": text}))
    assert got is not None
    cut, heads = got
    want = text.str.contains(g.TIMER_MINMAX_RE)
    assert cut.get_column("_mm").to_list() == want.to_list()
    assert int(want.sum()) > 500
    # each head is a line's text before its first `(`; `_hc` points at the line's own head
    before = text.str.splitn("(", 2).struct.field("field_0")
    assert set(heads.to_list()) <= set(before.to_list())
    hc = cut.get_column("_hc")
    assert heads.gather(hc.drop_nulls()).to_list() == before.filter(hc.is_not_null()).to_list()
    # the groups from the cut lines are the regex's
    mm = want.arg_true()
    groups = S._minmax_groups(text.gather(mm).str.splitn("(", 2).struct.field("field_1"), cut[mm], heads)
    ref = text.gather(mm).str.extract_groups(g.TIMER_MINMAX_RE)
    for f in ("name", "min", "max"):
        assert groups.struct.field(f).to_list() == ref.struct.field(f).to_list()


@pytest.mark.parametrize(("n", "seed"), [(S._MEG_VALUES_MIN, 4), (300, 5), (S._LANE_MIN + 200, 3)])
def test_megatron_values_are_the_key_regexes(n: int, seed: int) -> None:
    """`_megatron_values`, which `_megatron_frag` runs from `_MEG_VALUES_MIN` lines on, is the key regexes,
    with and without the line's date (Megatron before mid-2023 printed none)."""
    rnd = random.Random(seed)
    fields = [
        "consumed samples:     19213312", "elapsed time per iteration (ms): 3928.4",
        "throughput per GPU (TFLOP/s/GPU): 409.3", "learning rate: 3.000000E-04", "global batch size:  1024",
        "lm loss: 2.165198E+00", "loss scale: 1.0", "grad norm: 1.320", "number of skipped iterations:   0",
        "samples per second: 12.5", "tokens per gpu per second (tgs): 1000", "a=b: 1", "x: y", "lm loss: nan",
    ]
    lines = []
    first = rnd.sample(fields, 8)  # (most lines laid out as the first, as in a log: `_megatron_fast`)
    for i in range(n):
        fs = first if rnd.random() < 0.7 else rnd.sample(fields, rnd.randint(1, 8))
        if rnd.random() < 0.3:
            fs = fs + fs[:2]  # a key twice: the first one counts
        tail = rnd.choice([" |", " |", " |  ", " | x", ""])
        date = "[2025-03-02 02:59:14] " if seed % 2 else ""
        lines.append(f" {date}iteration {i:8d}/  500000 | " + " | ".join(fs) + tail)
    text = pl.Series("text", lines, dtype=pl.String)
    got = S._megatron_values(text)
    for k, p in g.MEGATRON_KEYS.items():
        want = pl.DataFrame({"t": text}).select(S._key(pl.col("t"), p)).to_series()
        assert got.get_column(f"_k_{k}").equals(want, null_equal=True), k


def test_blank_set_is_unicode_white_space() -> None:
    chars = pl.Series([chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF])
    assert sorted(chars.filter(chars.str.contains(r"^\s$")).to_list()) == sorted(S._WS)
    assert sorted(chars.filter(chars.str.strip_chars() == "").to_list()) == sorted(S._WS)
