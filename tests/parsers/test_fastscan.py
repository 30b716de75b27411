"""The compiled scanner of torchtitan step lines (`parsers._fastscan.titan`, `step_log._titan_scanned`) held
to the regex path it stands in for (`_TITAN_LINE` / `_TITAN_BARE` groups, `step_log._titan_groups`): a line
it reads is one those regexes match, with the same values to the bit; it reads the usual lines; where it
stops, the regex path decides, and the lanes' output is the same with the scanner and without it."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from parsers import base
from parsers import step_log as S  # noqa: N812
from tests.parsers.test_step_titan_many import _file, _items, _step_line


def test_scanner_is_built() -> None:
    # The install compiles it wherever there is a C compiler (CI has one): a missing scanner would leave the
    # torchtitan lanes on their regex path, correct but several times slower, without a word.
    assert base.compiled("titan") is not None, (
        "parsers._fastscan was not built: `pip install -e .` with a C compiler"
    )


def _regex_values(text: pl.Series) -> tuple[pl.DataFrame, bool, bool] | None:
    """The regex path of `_titan_many` on `text` (None: some line of neither shape, or a value it refuses)."""
    m, miss = S._titan_matches(text)
    if miss.any():
        return None
    return S._titan_groups(m, pl.int_range(pl.len(), dtype=pl.Int64), None)


def _scanned(text: pl.Series) -> tuple[pl.DataFrame, bool, bool] | None:
    return S._titan_scanned(text, pl.int_range(pl.len(), dtype=pl.Int64), None)


def _same(got: tuple[pl.DataFrame, bool, bool], want: tuple[pl.DataFrame, bool, bool]) -> None:
    frame = got[0]
    if S._DETAIL in frame.columns:
        # (the detail objects the compiled module wrote: those polars writes of the regex path's values)
        detail = want[0].select(pl.struct(*S._DETAIL_FIELDS).struct.json_encode()).to_series()
        assert frame.get_column(S._DETAIL).to_list() == detail.to_list()
        frame = frame.drop(S._DETAIL)
    assert_frame_equal(frame, want[0], check_exact=True)
    assert got[1:] == want[1:]


_DIGITS = st.text("0123456789", min_size=1, max_size=24)
_ODD_NUMBER = st.one_of(
    st.builds(lambda a, b: f"{a}.{b}", _DIGITS, _DIGITS),
    _DIGITS,
    st.sampled_from(["0", "0.0", "00012.5000", "1.", ".5", "1e5", "inf", "9" * 400, "1" + "0" * 30 + ".5"]),
)
_USUAL_NUMBER = st.builds(
    lambda v, k: f"{v:.{k}f}", st.floats(0, 1e6, allow_nan=False, allow_infinity=False), st.integers(0, 6)
)


def _mostly(draw: st.DrawFn, usual: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> str:
    """A usual value nine times in ten, else an odd one: most lines stay of the shape, each part varies."""
    return draw(odd) if draw(st.integers(0, 9)) == 0 else draw(usual)


@st.composite
def _line(draw: st.DrawFn) -> str:
    """A line of about the torchtitan shape: usual values, odd ones (long, cut, exponent), other spacing,
    dates that do not exist, either envelope or none; then perhaps a character changed, put in or cut."""
    num = lambda: _mostly(draw, _USUAL_NUMBER, _ODD_NUMBER)  # noqa: E731
    sp = lambda: _mostly(draw, st.sampled_from([" ", "  ", "   "]), st.text(" \t", max_size=3))  # noqa: E731
    env = _mostly(
        draw,
        st.sampled_from(["", "[rank0]:", "[rank17]:", "[rank4095]:"]),
        st.sampled_from(["[rank99999999999]:", "[rank2147483648]:", "[rank]:", "[rank3]", "[rank0]: "]),
    )
    y, mo, d = draw(st.integers(1, 9999)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
    h, mi, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
    ms = draw(st.integers(0, 999))
    if draw(st.integers(0, 9)) == 0:  # (a date or time that does not exist, or the year 0)
        y, d = draw(st.sampled_from([0, 1900, 2000, 2023, 2024])), draw(st.integers(28, 32))
        mo, h, mi = draw(st.integers(0, 13)), draw(st.integers(0, 25)), draw(st.integers(0, 61))
        s = draw(st.integers(0, 69))
    when = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d},{ms:03d}"
    step = _mostly(draw, st.integers(0, 10**7).map(str), _DIGITS)
    tps = _mostly(
        draw,
        st.one_of(_USUAL_NUMBER, st.integers(0, 10**7).map(lambda v: f"{v:,}")),
        st.sampled_from(["1,,4", ",5", "1,467.", "12,3", "2,011,345.5", "9" * 30]),
    )
    grad = f"grad_norm:{sp()}{num()}{sp()}" if draw(st.booleans()) else ""
    pct = _mostly(draw, st.sampled_from(["77.64", "5", "100.00"]), st.sampled_from(["1.2.3", "", "x", "."]))
    unit = _mostly(draw, st.sampled_from(["tps", "wps"]), st.sampled_from(["tpx", "TPS", "tps "]))
    end = _mostly(draw, st.just(""), st.sampled_from([" ", "\r", "%", "\n"]))
    line = (
        f"{env}[titan] {when} - root - INFO - step:{sp()}{step}{sp()}loss:{sp()}{num()}{sp()}"
        f"{grad}memory:{sp()}{num()}GiB({pct}%){sp()}{unit}:{sp()}{tps}{sp()}tflops:{sp()}{num()}{sp()}"
        f"mfu:{sp()}{num()}%{end}"
    )
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(line) - 1))
        c = draw(st.sampled_from(["", " ", "0", "9", ".", ",", ":", "%", "é", "\x00", "[", "]"]))
        line = line[:at] + c + line[at + draw(st.integers(0, 1)) :]
    return line


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_line())
@example(
    "[rank0]:[titan] 2025-04-08 12:52:54,036 - root - INFO - step: 1  loss: 10.6690  grad_norm: 1.0068  "
    "memory: 61.42GiB(77.64%)  tps: 1,467  tflops: 39.61  mfu: 12.70%"
)
@example(
    "[titan] 2024-02-29 23:59:59,999 - root - INFO - step:  2  loss:  7.1  memory: 1GiB(1.%)  wps: 1,,4  "
    "tflops: 0  mfu: 0.0%"
)
@example(
    "[titan] 2023-02-29 10:00:00,000 - root - INFO - step: 2  loss: 7  memory: 1GiB(1%)  tps: 4  "
    "tflops: 0  mfu: 0%"
)
@example(
    "[titan] 2025-04-08 24:00:00,000 - root - INFO - step: 2  loss: 7  memory: 1GiB(1%)  tps: 4  "
    "tflops: 0  mfu: 0%"
)
@example(
    "[titan] 2025-04-08 12:00:00,000 - root - INFO - step: 2  loss: 0.30000000000000004  memory: 1GiB(1%)"
    "  tps: 9007199254740993  tflops: 1e5  mfu: 0%"
)
def test_a_line_read_is_the_regexes_line(line: str) -> None:
    text = pl.Series("line", [line], dtype=pl.String)
    got, want = _scanned(text), _regex_values(text)
    if got is not None:
        assert want is not None, f"scanner read a line the regex path refuses: {line!r}"
        _same(got, want)


@pytest.mark.parametrize("seed", range(6))
def test_usual_lines_are_read_and_equal(seed: int) -> None:
    # the shapes of real rank logs (test_step_titan_many's generator): every line read, values identical
    rnd = random.Random(seed)
    lines = [ln for _ in range(8) for ln in _file(rnd, rnd.choice([1, 30, 200]))]
    text = pl.Series("line", lines, dtype=pl.String)
    got = _scanned(text)
    assert got is not None
    want = _regex_values(text)
    assert want is not None
    _same(got, want)


def test_stops_at_a_line_not_of_the_shape() -> None:
    t = datetime(2025, 3, 3, 8)
    rnd = random.Random(1)
    lines = [_step_line(rnd, 0, t + timedelta(seconds=i), i) for i in range(50)]
    text = pl.Series("line", lines, dtype=pl.String)
    assert _scanned(text) is not None
    odd = (lines[3] + " ", lines[3].replace("mfu:", "MFU:"), lines[3].replace(",", ";", 1))
    for bad in ("plain chatter", *odd):
        assert _scanned(text.clone().scatter(20, bad)) is None
    assert _scanned(text.clone().scatter(20, None)) is None  # (a null line: the regex path's)
    # a chunked column reads the same as one chunk
    two = pl.concat([text.slice(0, 17), text.slice(17)], rechunk=False)
    assert two.n_chunks() == 2
    _same(_scanned(two), _scanned(text))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
def test_lanes_same_with_and_without_scanner(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(100 + seed)
    files = [_file(rnd, rnd.choice([1, 3, 30, 160])) for _ in range(rnd.choice([2, 5, 12]))]
    items = _items(files, seed)
    whole = (pl.concat([lines for lines, _ in items]), items[0][1])
    with_scanner = (S._titan_many(items), S._titan_lane(*whole))
    monkeypatch.setattr(base, "_fastscan", None)
    without = (S._titan_many(items), S._titan_lane(*whole))
    assert with_scanner[0] is not None and without[0] is not None
    for g, w in zip(with_scanner[0], without[0], strict=True):
        assert g.parsed == w.parsed and g.partial == w.partial
        assert_frame_equal(g.tables["steps"], w.tables["steps"], check_exact=True)
    g, w = with_scanner[1], without[1]
    assert (g is None) == (w is None)
    if g is not None and w is not None:
        assert g.parsed == w.parsed and g.unrecognized == w.unrecognized
        assert_frame_equal(g.tables["steps"], w.tables["steps"], check_exact=True)


# ----------------------------------------------------------------------------- Megatron (min, max) entries

_TIMER_NAMES = ["forward-backward", "optimizer", "params-all-gather", "batch-generator", "all-grads-sync"]


@st.composite
def _entry(draw: st.DrawFn) -> str:
    """A line of about the Megatron timer entry shape (`_MEG_E`): usual or odd srun prefix, name, dots and
    numbers, sometimes a second `: (`; then perhaps a character changed, put in or cut."""
    srun = _mostly(
        draw,
        st.sampled_from(["", "31: ", "0: ", " 7: "]),
        st.sampled_from(["x: ", "1234567890: "]),
    )
    name = _mostly(draw, st.sampled_from(_TIMER_NAMES), st.sampled_from(["a b", "", "-x", "ok/a_b", "n.m"]))
    dots = "." * _mostly(draw, st.integers(2, 40), st.integers(0, 2))
    num = lambda: _mostly(draw, _USUAL_NUMBER, _ODD_NUMBER)  # noqa: E731
    sep = _mostly(draw, st.just(", "), st.sampled_from([",", ",  ", " , "]))
    end = _mostly(draw, st.just(")"), st.sampled_from([") ", "", "))", ")\r", ") x: (1, 2)"]))
    lead = _mostly(draw, st.just("    "), st.sampled_from(["", " ", "\t"]))
    line = f"{srun}{lead}{name} {dots}: ({num()}{sep}{num()}{end}"
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(line) - 1))
        c = draw(st.sampled_from(["", " ", "0", ".", ",", ":", "(", ")", ": (", "é"]))
        line = line[:at] + c + line[at + draw(st.integers(0, 1)) :]
    return line


def _entries(text: pl.Series, scanner: bool, mp: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.Series]:
    with mp.context() as m:
        if not scanner:
            m.setattr(base, "_fastscan", None)
        with S.ascii_scope(all(ln.isascii() for ln in text.to_list())):
            return S._meg_entries_heads(text)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_entry(), min_size=1, max_size=6))
@example(["31:     forward-backward ................................: (3618.65, 3635.72)"])
@example(["0:     optimizer ....: (1., 2.5)", "0:     optimizer ....: (1, 2.5)"])
@example(["  a: (b ..: (5, 6)", "    x ..: (0.30000000000000004, 9007199254740993)"])
def test_entries_same_with_and_without_scanner(lines: list[str]) -> None:
    text = pl.Series("line", lines, dtype=pl.String)
    with pytest.MonkeyPatch.context() as mp:
        got, want = _entries(text, True, mp), _entries(text, False, mp)
    assert_frame_equal(got[0], want[0], check_exact=True)
    assert got[1].sort().to_list() == want[1].sort().to_list()


def test_entries_scanner_reads_usual_lines() -> None:
    rnd = random.Random(3)
    lines = [
        f"{rnd.randrange(64)}:     {name} {'.' * (40 - len(name))}: ({rnd.uniform(1, 5000):.2f}, "
        f"{rnd.uniform(1, 5000):.2f})"
        for _ in range(300)
        for name in _TIMER_NAMES
    ]
    text = pl.Series("line", lines, dtype=pl.String)
    with S.ascii_scope(True):
        got = S._meg_scanned(text)
    assert got is not None and bool(got[1].all())
    assert got[2].to_list() == [float(ln.split("(")[1].split(",")[0]) for ln in lines]


# ----------------------------------------------------------------------------- Megatron iteration lines

_MEG_NAMES = ("consumed samples", "elapsed time per iteration (ms)", "learning rate", "lm loss", "grad norm")
_MEG_USUAL = st.one_of(
    _USUAL_NUMBER,
    st.builds(lambda v, k: f"{v:.{k}E}", st.floats(0, 1e6, allow_nan=False), st.integers(0, 8)),
    st.integers(-5, 10**9).map(str),
)
_MEG_ODD = st.sampled_from([".5", "5.", "+2", "1e999", "nan", "1e", "-", "1_0", "", "3.0E-04x", "1" * 30])


@st.composite
def _iteration_lines(draw: st.DrawFn) -> list[str]:
    """Iteration lines mostly laid out as the first (`_megatron_fast`'s one layout), usual numbers mostly:
    odd values, other names, another head, trailing text, a changed character now and then."""
    names = draw(st.lists(st.sampled_from(_MEG_NAMES), min_size=1, max_size=5))
    rows = []
    for _ in range(draw(st.integers(1, 8))):
        nm = (
            list(names)
            if draw(st.integers(0, 5))
            else draw(st.lists(st.sampled_from(_MEG_NAMES), max_size=5))
        )
        head = _mostly(
            draw,
            st.sampled_from(
                [" [2025-03-01 12:34:42] iteration     59/  500000 ", "iteration 1/2", "  iteration 7 / 9"]
            ),
            st.sampled_from(
                ["[2025-03-01] iteration 1/2 ", " [x 1] iteration 1/2", "iteration1/2", "iter 1/2"]
            ),
        )
        parts = [
            f"{' ' * draw(st.integers(0, 2))}{n}:{' ' * draw(st.integers(0, 3))}"
            f"{_mostly(draw, _MEG_USUAL, _MEG_ODD)}{' ' * draw(st.integers(0, 2))}"
            for n in nm
        ]
        line = (
            head
            + "|"
            + "|".join(parts)
            + "|"
            + _mostly(draw, st.sampled_from(["", " "]), st.sampled_from(["x", "|"]))
        )
        if draw(st.integers(0, 5)) == 0:
            at = draw(st.integers(0, len(line) - 1))
            line = line[:at] + draw(st.sampled_from(["", " ", "|", ":", "0", "e"])) + line[at + 1 :]
        rows.append(line)
    return rows


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(_iteration_lines())
@example(
    [" [2025-03-01 12:34:42] iteration 601/ 500000 | learning rate: 9.015000E-05 | lm loss: 4.724400E+00 |"]
)
@example(["iteration 1/2 | lm loss: -0 | grad norm: 0.30000000000000004 |"])
def test_iterations_same_with_and_without_scanner(rows: list[str]) -> None:
    text = pl.Series("text", rows, dtype=pl.String)
    got = S._megatron_fast(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base, "_fastscan", None)
        want = S._megatron_fast(text)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert got[0].equals(want[0])
        assert list(got[1]) == list(want[1])
        for k in want[1]:
            assert_frame_equal(got[1][k].to_frame(), want[1][k].to_frame(), check_exact=True)


# ----------------------------------------------------------------------------- --query-gpu CSV cells

_CELL = st.one_of(
    st.sampled_from([" 0", " 1", " Not Active", " Active", " [N/A]", "", " 1980 MHz", " 0x0000000000000001"]),
    st.text(" 0123456789.,:/%éab\t€", max_size=30),
    st.text(max_size=12).filter(lambda t: "\n" not in t),
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.integers(1, 9),
    st.lists(st.lists(_CELL, min_size=1, max_size=11), min_size=1, max_size=40),
    st.lists(st.booleans(), min_size=9, max_size=9),
    st.booleans(),
)
@example(3, [["a", " b", " c"], ["é, x", "", "€" * 9], ["1,2,3,"]], [False, True, True] + [False] * 6, True)
def test_csv_cells_as_split(fields: int, rows: list[list[str]], raw: list[bool], chunked: bool) -> None:
    """`_fastscan.csv_cells` against `str.split_exact(',', fields)`: the same lines have `fields` cells (a
    row's cells joined by commas: cells holding commas make more); a numbered cell is its column's distinct
    cell of its number, the distinct cells those of the rows kept in order of appearance; an unnumbered cell
    (`raw`) is the slice of its line at the offset and length given, in characters (non-ASCII lines too)."""
    import numpy as np

    lines = [",".join(r) for r in rows]
    text = pl.Series("text", lines, dtype=pl.String)
    if chunked and len(lines) > 1:  # (a column of two chunks, as a concatenation leaves it)
        text = pl.concat([text.head(len(lines) // 2), text.tail(len(lines) - len(lines) // 2)], rechunk=False)
    n = len(lines)
    flags = bytes(raw[:fields])
    codes, ok = np.empty(fields * n, dtype=np.uint32), np.empty(n, dtype=np.uint8)
    lens = np.empty(fields * n, dtype=np.uint32)
    distinct = base.compiled("csv_cells")(text.__arrow_c_stream__(), n, fields, codes, ok, flags, lens)
    cells = text.to_frame().select(pl.col("text").str.split_exact(",", fields).struct.unnest())
    want_ok = (
        cells.get_column(f"field_{fields - 1}").is_not_null() & cells.get_column(f"field_{fields}").is_null()
    )
    assert ok.astype(bool).tolist() == want_ok.to_list()
    kept = cells.filter(want_ok)
    at = np.flatnonzero(ok)
    for k in range(fields):
        want = kept.get_column(f"field_{k}")
        if flags[k]:
            assert distinct[k] == []
            got = pl.select(
                pl.lit(text.gather(at)).str.slice(pl.lit(codes[k * n + at]), pl.lit(lens[k * n + at]))
            ).to_series()
            assert got.to_list() == want.to_list()
        else:
            assert distinct[k] == want.unique(maintain_order=True).to_list()
            assert [distinct[k][c] for c in codes[k * n + at]] == want.to_list()


def test_csv_cells_refuses_nulls_and_short_buffers() -> None:
    import numpy as np

    from parsers import nvidia_smi_csv as C  # noqa: N812

    scan = base.compiled("csv_cells")
    text = pl.Series(["a,b", None, "c,d"], dtype=pl.String)
    with pytest.raises(ValueError, match="null"):
        scan(text.__arrow_c_stream__(), 3, 2, np.empty(6, np.uint32), np.empty(3, np.uint8))
    text = pl.Series(["a,b", "c,d"], dtype=pl.String)
    with pytest.raises(ValueError, match="too short"):
        scan(text.__arrow_c_stream__(), 2, 2, np.empty(3, np.uint32), np.empty(2, np.uint8))
    with pytest.raises(ValueError, match="fewer lines"):
        scan(text.__arrow_c_stream__(), 3, 2, np.empty(6, np.uint32), np.empty(3, np.uint8))
    assert C._rows_coded(pl.DataFrame({"text": ["a,b", None]}), 2) is None  # (the polars path then)


# ----------------------------------------------------------------------------- detail objects

_DECIMAL = st.one_of(
    st.builds(
        lambda a, b: f"{a}.{b}",
        st.text("0123456789", min_size=1, max_size=9),
        st.text("0123456789", min_size=1, max_size=9),
    ),
    st.text("0123456789", min_size=1, max_size=17),
    st.sampled_from(
        [
            "0",
            "0.0",
            "0.00001",
            "0.000015",
            "0.0000099",
            "1.0",
            "100",
            "999999999999999",
            "1000000000000000",
            "123456789012345.6",
            "0.30000000000000004",
            "61.42",
            "12.70",
            "0.10",
            "00012.5000",
        ]
    ),
)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_DECIMAL, _DECIMAL), min_size=1, max_size=8))
def test_json_objects_as_polars_writes_them(rows: list[tuple[str, str]]) -> None:
    """`_fastscan.json_objects` of numbers given by their digits (m * 32 + k for m / 10^k, as the titan scanner
    reads them) writes what polars' `struct.json_encode` writes of the Float64s their texts cast to, or
    nothing (None) where a number has more than 15 significant digits or needs an exponent."""
    import numpy as np

    def digits(t: str) -> int:
        whole, _, frac = t.partition(".")
        m = int(whole + frac)
        return m * 32 + len(frac) if m <= 2**53 and len(frac) <= 22 else -1

    n = len(rows)
    packed = np.array([digits(r[j]) for j in range(2) for r in rows], dtype=np.int64)
    got = base.compiled("json_objects")([b"a", b"bc"], packed, n)
    values = pl.DataFrame({"a": [r[0] for r in rows], "bc": [r[1] for r in rows]}).select(
        pl.all().cast(pl.Float64)
    )
    want = values.select(pl.struct("a", "bc").struct.json_encode()).to_series()

    def plain(t: str) -> bool:  # (15 significant digits at most, 1e-5 <= v < 1e16 or 0)
        v = float(t)
        sig = t.replace(".", "").lstrip("0").rstrip("0") if "." in t else t.lstrip("0").rstrip("0")
        return v == 0 or (len(sig) <= 15 and 1e-5 <= v < 1e16)

    if got is None:
        assert not all(plain(t) and digits(t) >= 0 for r in rows for t in r)
    else:
        assert pl.Series(S.ArrowCapsules(got)).to_list() == want.to_list()
        assert all(plain(t) for r in rows for t in r)


# ----------------------------------------------------------------------------- lines

_PIECES = [
    b"a",
    b"x" * 13,
    b"\n",
    b"\r",
    b"\r\n",
    b"\xc3\xa9",
    b"\xef\xbb\xbf",
    b"\xf0\x9d\x84\x9e",
    b"\xe2\x82\xac",
]
_BAD = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xe0\x80\x80",
    b"\xc0\xaf",
    b"\x80",
    b"\xf0\x9d\x84",
]


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(st.sampled_from(_PIECES), st.sampled_from(_BAD), st.binary(max_size=6)), max_size=40)
)
@example([b"\n"])
@example([b""])
@example([b"a\rb"])
@example([b"\xef\xbb\xbf", b"a", b"\r\r\n"])
def test_lines_cut_as_in_python(pieces: list[bytes]) -> None:
    """`base._compiled_lines` (the compiled module's cut) gives the lines `lines_from_bytes` gives without it,
    and declines (None) exactly where the bytes are not valid UTF-8 (Python's strict decoder the judge) or
    hold `\\r` but no `\\n`."""
    data = b"".join(pieces)
    got = base._compiled_lines(data)
    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert (got is None) == (not valid or (b"\r" in data and b"\n" not in data))
    if got is not None:
        mp = pytest.MonkeyPatch()
        with mp.context() as m:
            m.setattr(base, "_fastscan", None)
            want = base.lines_from_bytes(data)
        assert got.dtype == pl.String and got.name == "line"
        assert got.to_list() == want.to_list()


def test_lines_of_many_as_alone() -> None:
    """`lines_of_many`: each file's lines those it has alone, whichever way each was cut."""
    datas = [
        b"a\nb\n",
        b"",
        b"\n",
        b"\xff\nx",
        b"c\r\nd",
        b"e\rf",
        "é\n€\n".encode(),
        b"y" * 40 + b"\n" + b"z",
    ]
    many = base.lines_of_many(datas)
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(base, "_fastscan", None)
        alone = [base.lines_from_bytes(d) for d in datas]
    assert [s.to_list() for s in many] == [s.to_list() for s in alone]


_COLL_HEADS = st.sampled_from(
    [
        "gpu-a03:2253733:2253733 [0] NCCL INFO AllReduce",
        "gpu-a03:2253733:2253733 [1] NCCL INFO Send",
        " 3: node-b:1:2 [3] NCCL INFO ReduceScatter",
        "nœud-é:7:7 [0] NCCL INFO AllGather",  # (non-ASCII: no fast-lane key)
        "plain text without the marker: Broadcast",
        "x count 5 then",  # (` count ` before `: opCount `: no group)
        "",
    ]
)
_HEX = st.text("0123456789abcdefABCDEF", min_size=0, max_size=14)
_BUF = st.one_of(st.builds(lambda h: "0x" + h, _HEX), st.sampled_from(["(nil)", "(nil", "0x", "0xg1", "nil"]))
_COLL_MIDS = st.builds(
    lambda oc, sb, a, rb, b, junk: f"{oc}{sb}{a}{rb}{b}{junk}",
    _HEX,
    st.sampled_from([" sendbuff ", " sendbuf ", " sendbuff  "]),
    _BUF,
    st.sampled_from([" recvbuff ", " recvbuff", "recvbuff "]),
    _BUF,
    st.sampled_from(["", "", "", " ", "x", "é"]),
)
_COLL_TAILS = st.sampled_from(
    [
        "count 1048576 datatype 7 op 0 root 0 comm 0x55d1367fec79 [nranks=8] stream 0x7f1c",
        "count 262144 datatype 7 op 0 root 0 comm 0x55d1367fec79 [nranks=8] stream 0x7f1c",
        "count 262144 datatype 7 op 0 root -1 comm 0x55d1013f4a19 [nranks=8]",
        "count 1 datatype 7 op 0 root 0 comm 0x1 [nranks=2] stream (nil) count 2",
        "count é",
        "",
    ]
)
_COLL_LINE = st.one_of(
    st.builds(lambda h, m, t: f"{h}: opCount {m} {t}", _COLL_HEADS, _COLL_MIDS, _COLL_TAILS),
    st.builds(lambda h, m: f"{h}: opCount {m}", _COLL_HEADS, _COLL_MIDS),  # (no ` count `)
    st.sampled_from(["", "NCCL INFO Channel 00/02 : 0 1", ": opCount", ": opCount  count ", "a: opCount x"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    pool=st.lists(_COLL_LINE, min_size=1, max_size=12),
    picks=st.lists(st.integers(0, 11), min_size=1, max_size=120),
)
def test_coll_groups_as_polars_groups_them(
    pool: list[str], picks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nccl._compiled_coll_groups` (`_fastscan.coll_groups`) against `_polars_coll_groups`: the same groups
    (head, tail, whether the middle is `_COLL_MID`; their lines, first and last), the same candidate lines,
    and the same lines for any set of groups (`_CollCands.positions`), on lines drawn with and without each
    piece, ASCII or not."""
    from parsers import nccl

    monkeypatch.setattr(nccl, "_COLL_GROUPS_MIN", 1)
    texts = [pool[i % len(pool)] for i in picks]
    base_ = pl.DataFrame({"line": pl.int_range(7, 7 + len(texts), eager=True), "text": texts})
    want = nccl._polars_coll_groups(base_)
    got = nccl._compiled_coll_groups(base_)
    if want is None:
        assert got is None
        return
    assert got is not None and got is not ...
    assert_frame_equal(got.groups.drop("_g").sort("_if"), want.groups.sort("_if"), check_exact=True)
    assert got.cand.to_list() == want.cand.to_list()
    some = got.groups.filter(pl.col("calls") % 2 == 1)
    pick = want.groups.join(some.select("_if"), on="_if", how="semi")
    assert got.positions(some).to_list() == want.positions(pick).sort().to_list()


def test_coll_groups_refuses_nulls_and_short_buffers() -> None:
    import numpy as np

    scan = base.compiled("coll_groups")
    text = pl.Series("text", ["a: opCount 1 sendbuff (nil) recvbuff (nil) count 1", None], dtype=pl.String)
    assert scan(text.__arrow_c_stream__(), 2, np.empty(2, dtype=np.int32)) is None
    with pytest.raises(ValueError, match="codes"):
        scan(text.__arrow_c_stream__(), 2, np.empty(1, dtype=np.int32))
