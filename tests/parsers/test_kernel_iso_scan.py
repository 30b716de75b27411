"""The compiled scanner of `dmesg --time-format iso` lines (`parsers._fastscan.dmesg_iso`, `kernel_log.
_iso_compiled`) held to the path it stands in for (`kernel_log._style_rows_rx`: the style's regex, `_fast_iso`'s
split and `_iso_fast_then_full`'s stamps): on every line the rows are the same, to the microsecond and the
character; the usual lines are its own (none left to the regex path); the parse is the same with it and
without it."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from parsers import _kernel_events as kev
from parsers import base, kernel_log
from parsers.base import FileContext, lines_from_bytes

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kernel-log"
PATTERN = kernel_log._STYLE_RE["dmesg_iso"].pattern
CTX = FileContext(path="x/dmesg.log", node="n1")


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line": pl.Series(range(len(lines)), dtype=pl.Int64), "body": lines})


def _both(lines: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the compiled reading, the regex path) of `lines` padded past `SMALL_ROWS` with plain ISO lines, so
    that the regex path is polars' (as where the scanner runs), each line between others."""
    pad = [f"kern  :info  : 2025-01-17T15:36:{i % 60:02d},{i:06d}+00:00 plain {i}" for i in range(kev.SMALL_ROWS + 1)]
    mixed = [x for pair in zip(pad, lines + [""] * (len(pad) - len(lines)), strict=False) for x in pair]
    mixed += lines[len(pad) :]
    sub = _frame(mixed)
    got = kernel_log._iso_compiled(sub, PATTERN)
    assert got is not None
    return got, kernel_log._style_rows_rx(sub, "dmesg_iso", PATTERN)


def test_scanner_is_built() -> None:
    assert base.compiled("dmesg_iso") is not None, "parsers._fastscan was not built: `pip install -e .`"


_PREFIX = st.sampled_from(
    ["", "kern  :info  : ", "kern  :err   : ", "daemon:warn  : ", "kern:info: ", "kern :info : ", "kern\t:info  : ",
     "kern  :info  :", "kern  :info  :  ", "kérn  :info  : ", "kern  :info\u00a0 : ", "Kern  :info  : ", "kern  ::info : ",
     "x", "1", "\u0661"]
)
_DATE = st.sampled_from(
    ["2025-01-17", "2024-02-29", "2025-02-29", "2100-02-29", "2000-02-29", "0000-01-01", "0001-01-01", "9999-12-31",
     "2025-13-01", "2025-00-10", "2025-04-31", "2025-1-17", "2025-01-1\u0661"]
)
_TIME = st.sampled_from(["15:36:15", "00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "9:36:15"])
_FRAC = st.sampled_from([",345059", ",000000", ",999999", ",34505", ",3450591", ",", ".345059", ""])
_OFF = st.sampled_from(
    ["+00:00", "Z", "+0000", "-05:30", "+05:45", "-0800", "+23:59", "+24:00", "+05:60", "+05", "z", "", "+00:00x"]
)
_SEP = st.sampled_from([" ", "", "  ", "\t", "\u00a0", " [T123] ", "[T1] ", " "])
_MSG = st.sampled_from(
    ["NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.", "", " ", "[T123] x", "[ T12] x", "[  C3]\tx",
     "[T1]", "[T1]\u00a0x", "[T]x", "[Tx] x", "[\tT1] x", "[drm] init", "[ 12.5] x", "[T1\u0661] x", "[T12]x",
     "[C0] [T1] x", "ünïcode ✓", "a\tb", "[", "[T12"]
)
_LINE = st.builds(lambda *p: "".join(p), _PREFIX, _DATE, st.just("T"), _TIME, _FRAC, _OFF, _SEP, _MSG)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, min_size=1, max_size=40))
@example(["kern  :info  : 2025-01-17T15:36:15,345059+00:00 [T123] x", "2024-02-29T23:59:59,999999-05:30"])
@example(["kern  :info  : 2025-01-17T15:36:15,345059+00:00[T1] x", "kern  :info  : 2025-01-17T15:36:15,3450591+00:00 x"])
@example(["", " kern  :info  : 2025-01-17T15:36:15,345059+00:00 x", "[ 1.5] x", "Jan 17 15:36:15 h kernel: x"])
def test_rows_are_the_regex_paths(lines: list[str]) -> None:
    got, want = _both(lines)
    assert_frame_equal(got, want, check_exact=True)


def test_usual_lines_are_its_own() -> None:
    # the real decoded and plain dmesg logs: every stamped line read by the scanner, none left undecided
    for name in ("dmesg_decode_iso_h100_boot_mlx5_nvswitch.log", "dmesg_iso_no_decode_xid48_63_94_peermem.log"):
        lines = lines_from_bytes((FIXTURES / name).read_bytes())
        body = lines.filter(~lines.str.starts_with("#SOURCE"))
        import numpy as np

        ints = np.empty(3 * len(body), dtype=np.int64)
        assert base.compiled("dmesg_iso")(body.__arrow_c_stream__(), len(body), ints, np.empty(0)) == len(body)
        cls = pl.Series(ints[: len(body)])
        assert (cls == 1).sum() == body.str.contains(PATTERN).sum() > 20, name
        assert (cls == 2).sum() == 0, name


def test_undecided_and_refused_lines() -> None:
    import numpy as np

    lines = pl.Series(
        [
            "kern  :info  : 2025-01-17T15:36:15,345059+00:00 x",  # 1
            "2025-01-17T15:36:15,345059Z",  # 1: no message
            "kern\t:info  : 2025-01-17T15:36:15,345059+00:00 x",  # 2: a tab the regex's \\s takes
            "2025-01-17T15:36:15,3450591+00:00 x",  # 2: seven fraction digits (no plain shape)
            "2025-02-29T15:36:15,345059+00:00 x",  # 2: no such date
            "\u0661025-01-17T15:36:15,345059+00:00 x",  # 2: a non-ASCII digit first
            "[ 12.345] x",  # 0
            "",  # 0
            "Jan 17 15:36:15 h kernel: x",  # 2 (a capital: refused by the regex, undecided here: ASCII letters
        ]
    )
    ints = np.empty(3 * len(lines), dtype=np.int64)
    assert base.compiled("dmesg_iso")(lines.__arrow_c_stream__(), len(lines), ints, np.empty(0)) == len(lines)
    assert ints[: len(lines)].tolist() == [1, 1, 2, 2, 2, 2, 0, 0, 0]


@pytest.mark.parametrize("seed", range(3))
def test_parse_same_with_and_without_scanner(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # real decoded dmesg lines shuffled with odd ones, past SMALL_ROWS: tables, accounting and notes alike
    rnd = random.Random(seed)
    real = [
        x
        for name in ("dmesg_decode_iso_h100_boot_mlx5_nvswitch.log", "dmesg_decode_iso_xid13_xid43_flood.log")
        for x in (FIXTURES / name).read_text().splitlines()
        if not x.startswith("#SOURCE")
    ]
    odd = ["kern\t:info  : 2025-01-17T15:36:15,345059+00:00 NVRM: Xid (PCI:0000:18:00): 79, x",
           "2025-02-29T15:36:15,345059+00:00 x", "continuation line", "", "[ 1.5] x"]
    lines = [rnd.choice(real) if rnd.random() < 0.97 else rnd.choice(odd) for _ in range(3000)]
    series = pl.Series("text", lines)
    fast = kernel_log.parse(series, CTX)
    monkeypatch.setattr(kernel_log, "COMPILED_ISO", False)
    slow = kernel_log.parse(series, CTX)
    assert fast.tables.keys() == slow.tables.keys()
    for name, df in fast.tables.items():
        assert_frame_equal(df, slow.tables[name], check_exact=True)
    assert (fast.parsed, fast.unrecognized, fast.unrecognized_examples, fast.notes) == (
        slow.parsed, slow.unrecognized, slow.unrecognized_examples, slow.notes
    )
