"""The compiled scanners of `dmesg --time-format iso` and plain `dmesg` lines (`parsers._fastscan.dmesg_iso`,
`dmesg_raw`; `kernel_log._compiled_rows`) held to the path they stand in for (`kernel_log._style_rows_rx`: the
style's regex, `_fast_iso`'s or `_fast_monotonic`'s split, `_iso_fast_then_full`'s stamps or the uptime's
Float64 cast): on every line the rows are the same, to the microsecond, the bit and the character; the usual
lines are theirs (none left to the regex path); the parse is the same with them and without them."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from parsers import _kernel_events as kev
from parsers import base, kernel_log
from parsers.base import FileContext, lines_from_bytes

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kernel-log"
CTX = FileContext(path="x/dmesg.log", node="n1")
PAD = {
    "dmesg_iso": "kern  :info  : 2025-01-17T15:36:{s:02d},{i:06d}+00:00 plain {i}",
    "dmesg_raw": "[{i:5d}.{s:06d}] plain {i}",
}


def _both(style: str, lines: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the compiled reading, the regex path) of `lines` among plain lines of the style, past `SMALL_ROWS` (so
    that the regex path is polars', as where the scanner runs), each line between two others."""
    pad = [PAD[style].format(i=i, s=i % 60) for i in range(kev.SMALL_ROWS + 1)]
    mixed = [x for i, p in enumerate(pad) for x in ([p, lines[i]] if i < len(lines) else [p])] + lines[len(pad) :]
    sub = pl.DataFrame({"line": pl.Series(range(len(mixed)), dtype=pl.Int64), "body": mixed})
    pattern = kernel_log._STYLE_RE[style].pattern
    got = kernel_log._compiled_rows(sub, style, pattern)
    assert got is not None
    return got, kernel_log._style_rows_rx(sub, style, pattern)


def _classes(style: str, lines: list[str]) -> list[int]:
    text = pl.Series(lines, dtype=pl.String)
    n_int, n_float = kernel_log._COMPILED_STYLES[style]
    ints, floats = np.empty(n_int * len(text), dtype=np.int64), np.empty(n_float * len(text))
    assert base.compiled(style)(text.__arrow_c_stream__(), len(text), ints, floats) == len(text)
    return ints[: len(text)].tolist()


def test_scanners_are_built() -> None:
    for style in kernel_log._COMPILED_STYLES:
        assert base.compiled(style) is not None, "parsers._fastscan was not built: `pip install -e .`"


_PREFIXES = ["", "", "kern  :info  : ", "kern  :err   : ", "daemon:warn  : ", "kern:info: ", "kern :info : ",
    "kern\t:info  : ", "kern  :info  :", "kern  :info  :  ", "kérn  :info  : ", "kern  :info\u00a0 : ",
    "Kern  :info  : ", "kern  ::info : ", "x", "1", "\u0661", " "]
_MSGS = ["NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.", "", " ", "[T123] x", "[ T12] x", "[  C3]\tx",
    "[T1]", "[T1]\u00a0x", "[T]x", "[Tx] x", "[\tT1] x", "[drm] init", "[ 12.5] x", "[T1\u0661] x", "[T12]x",
    "[C0] [T1] x", "ünïcode ✓", "a\tb", "[", "[T12", " [T1] x", "host kernel: x"]
_SEPS = [" ", "", "  ", "\t", "\u00a0", " [T123] ", "[T1] ", "\u3000"]
_DATES = ["2025-01-17", "2024-02-29", "2025-02-29", "2100-02-29", "2000-02-29", "0000-01-01", "0001-01-01", "9999-12-31",
    "2025-13-01", "2025-00-10", "2025-04-31", "2025-1-17", "2025-01-1\u0661"]
_TIMES = ["15:36:15", "00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "9:36:15"]
_FRACS = [",345059", ",000000", ",999999", ",34505", ",3450591", ",", ".345059", ""]
_OFFS = ["+00:00", "Z", "+0000", "-05:30", "+05:45", "-0800", "+23:59", "+24:00", "+05:60", "+05", "z", "", "+00:00x"]
_PRIOS = ["", "", "<4>", "<12>", "<123>", "<1234>", "<>", "<\u0661>", "4>"]
_UPS = ["[ 1478.475357]", "[    0.000000]", "[12345678.123456]", "[0.5]", "[ \t12.5]", "[\t12.5]", "[ 12]", "[ 12.]",
    "[ .5]", "[ 12.5 <  0.001>]", "[ 12.5\u0661]", "[\u300012.5]", "[ 9007199254740993.5]", "[ 1.00000000000000000000001]",
    "[ 00012.500]", "[+0.000015]", "[ 12.5", "12.5]"]
_PREFIX = st.sampled_from(_PREFIXES)
_MSG = st.sampled_from(_MSGS)
_SEP = st.sampled_from(_SEPS)
_DATE = st.sampled_from(_DATES)
_TIME = st.sampled_from(_TIMES)
_FRAC = st.sampled_from(_FRACS)
_OFF = st.sampled_from(_OFFS)
_PRIO = st.sampled_from(_PRIOS)
_UP = st.sampled_from(_UPS)
_ISO = st.builds(lambda *p: "".join(p), _PREFIX, _DATE, st.just("T"), _TIME, _FRAC, _OFF, _SEP, _MSG)
_RAW = st.builds(lambda *p: "".join(p), _PREFIX, _PRIO, _UP, _SEP, _MSG)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ISO, min_size=1, max_size=40))
@example(["kern  :info  : 2025-01-17T15:36:15,345059+00:00 [T123] x", "2024-02-29T23:59:59,999999-05:30"])
@example(["kern  :info  : 2025-01-17T15:36:15,345059+00:00[T1] x", "2025-01-17T15:36:15,3450591+00:00 x"])
@example(["", " kern  :info  : 2025-01-17T15:36:15,345059+00:00 x", "[ 1.5] x", "Jan 17 15:36:15 h kernel: x"])
def test_iso_rows_are_the_regex_paths(lines: list[str]) -> None:
    got, want = _both("dmesg_iso", lines)
    assert_frame_equal(got, want, check_exact=True)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RAW, min_size=1, max_size=40))
@example(["[ 1478.475357] [T123] x", "<4>[ 12.5]  two", "kern  :info  : [ 12.5] host kernel: x"])
@example(["[ 12.5]x", "[ 12.5]", "[ 12.5] ", "[ 1.00000000000000000000001] x", "[ 9007199254740993.5] x", "[ 12] x"])
@example(["", "2025-01-17T15:36:15,345059+00:00 x", "[Sun Feb 23 16:24:18 2025] x", "[  +0.000015] x"])
def test_raw_rows_are_the_regex_paths(lines: list[str]) -> None:
    got, want = _both("dmesg_raw", lines)
    assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("style", ["dmesg_iso", "dmesg_raw"])
def test_every_stamp_piece_crossed(style: str) -> None:
    # each stamp's pieces crossed (every date, time, fraction and offset; every prio and uptime), the prefix,
    # the separator and the message turned round with them: hypothesis draws, this covers
    pre, sep, msg = _PREFIXES, _SEPS, _MSGS
    if style == "dmesg_iso":
        stamps = [d + "T" + t + f + o for d in _DATES for t in _TIMES for f in _FRACS for o in _OFFS]
    else:
        stamps = [p + u for p in _PRIOS for u in _UPS]
    lines = [pre[i % len(pre)] + x + sep[i % len(sep)] + msg[(i // 3) % len(msg)] for i, x in enumerate(stamps)]
    got, want = _both(style, lines)
    assert_frame_equal(got, want, check_exact=True)


def test_usual_lines_are_theirs() -> None:
    # the real decoded and plain ISO logs, and plain dmesg: every line the style's regex matches read by the
    # scanner, none left undecided
    files = {
        "dmesg_iso": ["dmesg_decode_iso_h100_boot_mlx5_nvswitch.log", "dmesg_iso_no_decode_xid48_63_94_peermem.log"],
        "dmesg_raw": [p.name for p in sorted(FIXTURES.glob("*dmesg_raw*.log")) if not p.name.startswith("garbage")],
    }
    for style, names in files.items():
        read = 0
        for name in names:
            lines = lines_from_bytes((FIXTURES / name).read_bytes())
            body = lines.filter(~lines.str.starts_with("#SOURCE"))
            cls = pl.Series(_classes(style, body.to_list()))
            matched = int(body.str.contains(kernel_log._STYLE_RE[style].pattern).sum())
            assert (cls == 1).sum() == matched, name
            assert (cls == 2).sum() == 0, name
            read += matched
        assert read > 80, style


def test_classes() -> None:
    iso = [
        "kern  :info  : 2025-01-17T15:36:15,345059+00:00 x",  # 1
        "2025-01-17T15:36:15,345059Z",  # 1: no message
        "kern\t:info  : 2025-01-17T15:36:15,345059+00:00 x",  # 2: a tab the regex's \\s takes
        "2025-01-17T15:36:15,3450591+00:00 x",  # 2: seven fraction digits (not the plain shape)
        "2025-02-29T15:36:15,345059+00:00 x",  # 2: no such date
        "\u0661025-01-17T15:36:15,345059+00:00 x",  # 2: a non-ASCII digit first
        "[ 12.345] x",  # 0
        "",  # 0
        "Jan 17 15:36:15 h kernel: x",  # 0
    ]
    assert _classes("dmesg_iso", iso) == [1, 1, 2, 2, 2, 2, 0, 0, 0]
    raw = [
        "[ 1478.475357] x",  # 1
        "<4>[ 12.5]",  # 1
        "kern  :info  : [ 12.5] [T1] x",  # 1
        "[\t12.5] x",  # 2: a tab
        "[ 12.5 <  0.001>] x",  # 2: a delta after the uptime
        "[ 9007199254740993.5] x",  # 2: more digits than a double holds exactly
        "2025-01-17T15:36:15,345059+00:00 x",  # 0
        "\u3000[ 12.5] x",  # 0: the regex opens with ASCII
        "",  # 0
    ]
    assert _classes("dmesg_raw", raw) == [1, 1, 1, 2, 2, 2, 0, 0, 0]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "style, names",
    [
        ("dmesg_iso", ["dmesg_decode_iso_h100_boot_mlx5_nvswitch.log", "dmesg_decode_iso_xid13_xid43_flood.log"]),
        ("dmesg_raw", None),
    ],
)
def test_parse_same_with_and_without_scanners(
    style: str, names: list[str] | None, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # real lines of the style shuffled with odd ones, past SMALL_ROWS: tables, accounting and notes alike
    rnd = random.Random(seed)
    paths = [FIXTURES / n for n in names] if names else sorted(FIXTURES.glob("*dmesg_raw*.log"))
    pattern = kernel_log._STYLE_RE[style]
    real = [x for p in paths for x in p.read_text().splitlines() if pattern.match(x)]
    odd = ["kern\t:info  : 2025-01-17T15:36:15,345059+00:00 NVRM: Xid (PCI:0000:18:00): 79, x",
           "2025-02-29T15:36:15,345059+00:00 x", "continuation line", "", "[\t1.5] x", "<4>[ 12.5 < 0.1>] x",
           "Linux version 6.8.0"]
    lines = [rnd.choice(real) if rnd.random() < 0.97 else rnd.choice(odd) for _ in range(3000)]
    series = pl.Series("text", lines)
    fast = kernel_log.parse(series, CTX)
    monkeypatch.setattr(kernel_log, "COMPILED_STAMPS", False)
    slow = kernel_log.parse(series, CTX)
    assert fast.tables.keys() == slow.tables.keys()
    for name, df in fast.tables.items():
        assert_frame_equal(df, slow.tables[name], check_exact=True)
    assert (fast.parsed, fast.unrecognized, fast.unrecognized_examples, fast.notes) == (
        slow.parsed, slow.unrecognized, slow.unrecognized_examples, slow.notes
    )
