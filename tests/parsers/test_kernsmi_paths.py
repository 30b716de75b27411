# ruff: noqa: E501  (the replaced code is kept verbatim in strings below)
"""Round 8 (kernsmi) fast paths of the nvidia-smi dmon / --query-gpu CSV parsers equal the code they replace.

The replaced code is kept here verbatim (`_old_*`) as the reference; inputs are random frames (hypothesis)
and the edges of each shortcut.
"""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _nvsmi_fields as fields
from parsers import base
from parsers import nvidia_smi_csv as csv_parser
from parsers.nvidia_smi_csv import _DAYS_IN, _DIGIT_AT, _timestamp


def _old_gpu_keys(df: pl.DataFrame, key: pl.Expr) -> list[pl.Expr]:
    nodes = df.get_column("node").unique()
    if nodes.null_count() or nodes.str.contains("|", literal=True).any():
        # `a|b` + `c` reads as `a` + `b|c`: keep the string
        return [pl.concat_str([pl.col("node"), key], separator="|")]
    n = df.height
    nulls = {c: df.get_column(c).null_count() for c in ("ident", "gpu_bus_id")}
    if nulls["ident"] == 0:
        return [pl.col("node"), pl.col("ident")]
    if nulls["ident"] == n and nulls["gpu_bus_id"] == 0:
        return [pl.col("node"), pl.col("gpu_bus_id")]
    if nulls["ident"] == n and nulls["gpu_bus_id"] == n:
        return [pl.col("node"), pl.col("gpu_index")]  # a null index is the '?' group (no index reads '?')
    return [pl.col("node"), key]


_KEY = pl.coalesce(pl.col("ident"), pl.col("gpu_bus_id"), pl.col("gpu_index").cast(pl.String), pl.lit("?"))


def _prev(df: pl.DataFrame, keys: list[pl.Expr], by: str | None) -> list:
    d = df.with_columns(_i=pl.int_range(pl.len(), dtype=pl.Int64))
    return d.select(pl.col("_i").shift(1).over([*keys, pl.col(by)] if by else keys)).to_series().to_list()


_nodes = st.sampled_from(["n1", "n2", "a|b", "", None])
_ids = st.sampled_from(["x", "y", "", None])
_idx = st.sampled_from([0, 1, 2, None])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_nodes, _ids, _ids, _idx, st.integers(0, 1)), max_size=30),
    st.booleans(),
    st.integers(0, 3),
)
def test_gpu_keys_group_as_before(rows: list, one_node: bool, fill: int) -> None:
    """The previous sample of each row's GPU (the window `_transitions` computes) is the same with the keys
    of `_gpu_keys` as with the old keys (which always held the node)."""
    if one_node:
        rows = [("n1", *r[1:]) for r in rows]
    if fill & 1:
        rows = [(r[0], r[1] if r[1] is not None else "z", *r[2:]) for r in rows]
    if fill & 2:
        rows = [(r[0], None, *r[2:]) for r in rows]
    df = pl.DataFrame(
        rows,
        schema={
            "node": pl.String, "ident": pl.String, "gpu_bus_id": pl.String,
            "gpu_index": pl.Int32, "_f": pl.Int64,
        },
        orient="row",
    )
    for by in (None, "_f"):
        assert _prev(df, fields._gpu_keys(df, _KEY), by) == _prev(df, _old_gpu_keys(df, _KEY), by)


# ----------------------------------------------------------------------------- nvidia_smi_csv._stamps

OLD_STAMPS = '''
def _stamps(cells: pl.Series) -> pl.Series:
    """`_timestamp` of the cells: those of the form the loops print (`YYYY/MM/DD HH:MM:SS.fff`, a date of
    1970-2200 that exists and a time of day without leap second) computed from their bytes, the others (and
    nulls) parsed by `_timestamp` itself."""
    import numpy as np  # (here: a worker that reads no long CSV loop never imports it)

    usual = (cells.str.len_bytes() == 23).fill_null(False)
    at = usual.arg_true()
    micros = pl.repeat(None, len(cells), dtype=pl.Int64, eager=True)
    fast = pl.Series([], dtype=pl.UInt32)
    if len(at):
        raw = cells.gather(at).str.join("").cast(pl.Binary).item()
        b = np.frombuffer(raw, dtype=np.uint8).reshape(len(at), 23)
        d = b.astype(np.int64) - 48
        ok = (b[:, 4] == 47) & (b[:, 7] == 47) & (b[:, 10] == 32) & (b[:, 13] == 58) & (b[:, 16] == 58)
        ok &= (b[:, 19] == 46) & ((d[:, _DIGIT_AT] >= 0) & (d[:, _DIGIT_AT] <= 9)).all(axis=1)
        year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
        month, day = d[:, 5] * 10 + d[:, 6], d[:, 8] * 10 + d[:, 9]
        hour, minute, sec = d[:, 11] * 10 + d[:, 12], d[:, 14] * 10 + d[:, 15], d[:, 17] * 10 + d[:, 18]
        milli = d[:, 20] * 100 + d[:, 21] * 10 + d[:, 22]
        leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
        last = np.array(_DAYS_IN)[np.clip(month, 0, 12)] + ((month == 2) & leap)
        ok &= (year >= 1970) & (year <= 2200) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= last)
        ok &= (hour <= 23) & (minute <= 59) & (sec <= 59)
        # days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)
        y = year - (month <= 2)
        era = y // 400
        yoe = y - era * 400
        doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
        days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
        value = ((days * 86400 + hour * 3600 + minute * 60 + sec) * 1000 + milli) * 1000
        fast = at.filter(pl.Series(ok))
        micros = micros.scatter(fast, pl.Series(value[ok]))
    ts = micros.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    if len(fast) < len(cells):
        rest = pl.repeat(True, len(cells), dtype=pl.Boolean, eager=True)
        rest = (rest.scatter(fast, False) if len(fast) else rest).arg_true()
        ts = ts.scatter(rest, pl.select(_timestamp(pl.lit(cells.gather(rest)))).to_series())
    return ts
'''
_ns: dict = {"pl": pl, "_DIGIT_AT": _DIGIT_AT, "_DAYS_IN": _DAYS_IN, "_timestamp": _timestamp}
exec(OLD_STAMPS, _ns)  # (the code `_stamps` replaced, verbatim)
_old_stamps = _ns["_stamps"]


def _same_stamps(cells: list) -> None:
    s = pl.Series("c", cells, dtype=pl.String)
    new, old = csv_parser._stamps(s), _old_stamps(s)
    assert new.dtype == old.dtype
    assert new.to_physical().to_list() == old.to_physical().to_list()  # (years before 1 have no datetime)


_STAMP_BASES = [
    "2026/11/28 00:00:00.001", "2024/02/29 23:59:59.999", "2023/02/29 12:00:00.000",
    "1970/01/01 00:00:00.000", "2200/12/31 23:59:59.999", "1969/12/31 23:59:59.999",
    "2201/01/01 00:00:00.000", "2026/13/01 00:00:00.000", "2026/00/10 00:00:00.000",
    "2026/04/31 00:00:00.000", "2026/11/28 24:00:00.000", "2026/11/28 23:60:00.000",
    "2026/11/28 23:59:60.000", "2026-11-28 00:00:00.001", "2026/11/28T00:00:00.001",
    "2026/11/28 00:00:00,001", "2026/11/28 00:00:00.00a", "20a6/11/28 00:00:00.001",
    "2100/02/29 00:00:00.000", "2000/02/29 00:00:00.000", " 2026/11/28 00:00:00.01",
    "2026/11/28 00:00:00.0012", "N/A", "", "2026/11/28 00:00:00.1", "2026/11/28 0é:00:00.1",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_STAMP_BASES),
            st.integers(0, 999),
            st.integers(1, 9),
            st.one_of(st.none(), st.tuples(st.integers(0, 22), st.sampled_from("0123456789/ :.-aé"))),
        ),
        max_size=40,
    ),
    st.booleans(),
)
def test_stamps_as_before(rows: list, nulls: bool) -> None:
    """Runs of rows with one second (the loops' shape: a row per GPU), each row its own milliseconds; bytes
    mutated anywhere (separators, digits, non-ASCII); impossible dates, leap days, out-of-range years; other
    lengths and nulls."""
    cells: list = []
    for base, ms, repeat, mutation in rows:
        for k in range(repeat):
            c = base[:20] + f"{(ms + k) % 1000:03d}" if len(base) == 23 and base[19] == "." else base
            if mutation is not None and k == 0 and mutation[0] < len(c):
                c = c[: mutation[0]] + mutation[1] + c[mutation[0] + 1 :]
            cells.append(c)
    if nulls and cells:
        cells[len(cells) // 2] = None
    _same_stamps(cells)


def test_stamps_fixture_and_long_run() -> None:
    cells = [
        f"2026/11/28 {h:02d}:{m:02d}:{s:02d}.{k:03d}"
        for h in (0, 23) for m in (0, 59) for s in range(60) for k in range(0, 1000, 125)
    ]
    _same_stamps(cells)
    _same_stamps(cells[::-1])
    _same_stamps([])
    _same_stamps([None, None])


# ----------------------------------------------------------------------------- nvidia_smi_dmon._stamps

_DMON_DT = (
    "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk"
    "   pclk",
    "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz"
    "    MHz",
)
_DMON_ROW = "      {}    643     42     50    100     37      0      0      0      0   2619   1980"
_DATES = ["20261128", "20240229", "20230229", "19700101", "22001231", "19691231", "22010101", "20261301",
          "20260010", "20260431", "20261100", "21000229", "20000229", "2026112a", "02611288"]
_TIMES = ["00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "12:3a:00", "12-30-00", "1:30:000"]


def _dmon_lines(rng, n: int, dates: list[str], times: list[str]) -> list[str]:  # noqa: ANN001
    out = list(_DMON_DT)
    date, tod = rng.choice(dates), rng.choice(times)
    for r in range(n):
        if r % 8 == 0 and rng.random() < 0.3:
            date, tod = rng.choice(dates), rng.choice(times)
        out.append(f" {date}   {tod}" + _DMON_ROW.format(r % 8))
    return out


def _dmon_fast_and_regex(lines: list[str]) -> tuple:
    from parsers import nvidia_smi_dmon as dmon

    s = pl.Series("line", lines, dtype=pl.String)
    fast = dmon.parse(s, _DMON_CTX)
    real = dmon._fixed_width
    try:
        dmon._fixed_width = lambda rows, fields: None  # (every row read by the row regex)
        slow = dmon.parse(s, _DMON_CTX)
    finally:
        dmon._fixed_width = real
    return fast, slow


_DMON_CTX = None


@pytest.mark.parametrize("odd", [*(("date", d) for d in _DATES), *(("time", t) for t in _TIMES), ("mix", "")])
def test_dmon_stamps_equal_strptime(odd: tuple[str, str]) -> None:
    """Dates and times of every shape (impossible days and months, leap days, out-of-range years, hour 24,
    second 60, letters, other separators), each among valid stamps: the byte path's `ts` equals the row
    regex's strptime, whether `_stamps` reads the chunk or leaves it to strptime."""
    import random

    from parsers.base import FileContext

    global _DMON_CTX
    _DMON_CTX = FileContext(path="n/nvidia-smi-dmon.log", node="n", year_hint=2026)
    rng = random.Random(hash(odd) % 1000)
    kind, value = odd
    dates, times = ["20261128", "20240229", "20000229"], ["00:00:00", "23:59:59", "12:34:56"]
    if kind == "date":
        dates = [*dates, value]
    elif kind == "time":
        times = [*times, value]
    else:
        dates, times = _DATES, _TIMES
    fast, slow = _dmon_fast_and_regex(_dmon_lines(rng, 9000, dates, times))
    assert (fast.parsed, fast.unrecognized, fast.unrecognized_examples) == (
        slow.parsed, slow.unrecognized, slow.unrecognized_examples
    )
    for name in fast.tables:
        a, b = fast.tables[name], slow.tables[name]
        assert a.schema == b.schema and a.equals(b, null_equal=True), name


def test_dmon_stamps_direct() -> None:
    """`_stamps` on rows of bytes: None for any odd cell, else strptime's values per row."""
    import numpy as np

    from parsers import nvidia_smi_dmon as dmon

    rows = [
        f" {d}   {t}" for d in ("20261128", "20240229") for t in ("00:00:01", "23:59:59") for _ in range(3)
    ]
    mat = np.frombuffer("".join(rows).encode(), dtype=np.uint8).reshape(len(rows), len(rows[0]))
    got = dmon._stamps(mat, 0, 9, 9, 20)
    want = pl.Series([r.strip().replace("   ", " ") for r in rows]).str.strptime(
        pl.Datetime("us"), "%Y%m%d %H:%M:%S"
    ).dt.replace_time_zone("UTC")
    assert got is not None and got.to_list() == want.to_list()
    odd = [*rows[:-1], " 20240230   23:59:59"]
    mat = np.frombuffer("".join(odd).encode(), dtype=np.uint8).reshape(len(odd), len(odd[0]))
    assert dmon._stamps(mat, 0, 9, 9, 20) is None
    odd = [*rows[:-1], "x20240229   23:59:59"]  # (a byte before the date: a run of its own, checked)
    mat = np.frombuffer("".join(odd).encode(), dtype=np.uint8).reshape(len(odd), len(odd[0]))
    assert dmon._stamps(mat, 0, 9, 9, 20) is None


# ----------------------------------------------------------------------------- nvidia_smi_csv._data_rows

OLD_DATA_ROWS = """
def _data_rows(
    frame: pl.DataFrame, sigs: dict[tuple[str, ...], int], at: str
) -> tuple[list[tuple[list[str], pl.DataFrame]], list[pl.Series]]:
    '''Per field list (`sigs`: field list -> its `sig`), the rows of `frame` that are its data rows, split
    into their cells `_c0`...; and their `at` column (which lines they are).

    A data row has as many cells as its header has fields: split into one more than that, the last cell must
    exist and the one after it must not (no separate count of the commas). One field list (the usual case):
    its rows filtered, split and checked in one query.'''
    is_cand = pl.col("sig").is_not_null() & ~pl.col("is_header") & ~pl.col("is_fail")
    cand = frame.filter(is_cand).lazy() if len(sigs) > 1 else frame.lazy().filter(is_cand)
    groups: list[tuple[list[str], pl.DataFrame]] = []
    found: list[pl.Series] = []
    for fields_t, sig in sigs.items():
        n = len(fields_t)
        names = [f"_c{i}" for i in range(n + 1)]
        cells = pl.col("text").str.split_exact(",", n).struct.rename_fields(names)
        rows = (
            (cand.filter(pl.col("sig") == sig) if len(sigs) > 1 else cand)
            .with_columns(cells.alias("_cells"))
            .unnest("_cells")
            .filter(pl.col(f"_c{n - 1}").is_not_null() & pl.col(f"_c{n}").is_null())
            .drop(f"_c{n}")
            .collect(engine="in-memory")
        )
        if rows.height == 0:
            continue
        found.append(rows.get_column(at))
        groups.append((list(fields_t), rows))
    return groups, found
"""
_ns2: dict = {"pl": pl}
exec(OLD_DATA_ROWS, _ns2)  # (the code `_rows_by_tail` bypasses, verbatim)
_old_data_rows = _ns2["_data_rows"]


def _csv_frame(lines: list[str]) -> tuple[pl.DataFrame, dict]:
    """`parse`'s frame of the lines (header, sig, flags) and its field lists, as `parse` builds them."""
    n = len(lines)
    text = pl.Series("text", lines, dtype=pl.String)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(1, 1 + n, dtype=pl.Int64, eager=True),
            "text": text,
            "raw": text,
            "host": pl.repeat(None, n, dtype=pl.String, eager=True),
        }
    )
    frame, headers_ok = csv_parser._hosts_and_headers(frame)
    is_header = pl.col("text").is_in(headers_ok)
    headers = frame.filter(is_header).select("line", "text")
    sig_of: dict[int, int] = {}
    sigs: dict[tuple[str, ...], int] = {}
    for ln, t in headers.iter_rows():
        sig_of[int(ln)] = sigs.setdefault(tuple(f.strip() for f in t.rstrip(", ").split(",")), len(sigs))
    frame = frame.with_columns(
        header=pl.when(is_header).then(pl.col("line")).otherwise(None).forward_fill().over("host"),
        is_header=is_header,
        is_fail=pl.lit(False),
    ).with_columns(sig=pl.col("header").replace_strict(sig_of, default=None, return_dtype=pl.Int64))
    return frame, sigs


_CSV_HEADER = (
    "timestamp, name, pci.bus_id, index, utilization.gpu [%], utilization.memory [%], memory.used [MiB],"
    " temperature.gpu, power.draw [W], clocks.sm [MHz], clocks.mem [MHz], clocks_event_reasons.active,"
    " clocks_event_reasons.sw_power_cap, clocks_event_reasons.hw_slowdown,"
    " ecc.errors.uncorrected.volatile.total,"
    " pcie.link.gen.current, pcie.link.width.current"
)
_CSV_TAILS = [
    " 1980 MHz, 2619 MHz, 0x0000000000000000, Not Active, Not Active, 0, 5, 16",
    " 1980 MHz, 2619 MHz, 0x0000000000000004, Active, Not Active, 0, 5, 16",
    " 1755 MHz, 2619 MHz, 0x0000000000000008, Not Active, Active, 2, 4, 16",
    " [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A]",
]
_CSV_ODD_TAILS = [
    " 1980 MHz, 2619 MHz, 0x0, Not Active, Not Active, 0, 5, 16, 7",  # a cell too many
    " 1980 MHz, 2619 MHz, 0x0, Not Active, Not Active, 0, 5",  # one too few
    " 1980 MHz, 2619 MHz, 0x0, Not Active, Not Active, 0, 5, 16,",  # a trailing comma
    "",
    " 1980 MHz,, 0x0, Not Active, , 0, 5, 16",
]


def _csv_lines(rng, n: int, odd: float, odd_tail: float | None = None) -> list[str]:  # noqa: ANN001
    odd_tail = odd if odd_tail is None else odd_tail
    out = [_CSV_HEADER]
    tail = rng.choice(_CSV_TAILS)
    for r in range(n):
        if rng.random() < 0.01:
            tail = rng.choice(_CSV_TAILS)
        t = rng.choice(_CSV_ODD_TAILS) if rng.random() < odd_tail else tail
        head = f"2026/11/28 00:00:{r // 8 % 60:02d}.{r % 1000:03d}, NVIDIA H100, 00000000:{r % 8:02X}:00.0"
        used = f"{rng.randrange(101)} %, {rng.randrange(50)} %, {rng.randrange(80000)} MiB"
        row = f"{head}, {r % 8}, {used}, 45, 612.3 W,{t}"
        if rng.random() < odd:
            row = rng.choice([row.replace(", ", ",", 1), row[: rng.randrange(len(row))], row + ",", "x,y"])
        out.append(row)
        if rng.random() < odd / 10:
            other = "index, name, pci.bus_id, temperature.gpu, power.draw [W]"
            out.append(_CSV_HEADER if rng.random() < 0.5 else other)
    return out


@pytest.mark.parametrize(
    ("odd", "odd_tail"), [(0.0, None), (0.001, None), (0.05, None), (0.3, None), (0.0, 0.03)]
)
def test_data_rows_by_tail_equal_split(csv_cells_path: str, odd: float, odd_tail: float | None) -> None:
    """Loops whose lines end in a few tails (with odd tails: a cell too many or too few, empty cells, cut
    lines, other field lists): `_data_rows` (for a long group the compiled scanner's numbered cells, or the
    tail path) gives the rows and cells of splitting every line whole; numbered, each cell is its column's
    distinct cell of its number, the distinct cells those of the column in order of appearance."""
    import random

    rng = random.Random(int(odd * 1000))
    frame, sigs = _csv_frame(_csv_lines(rng, 12000, odd, odd_tail))
    new_groups, new_found = csv_parser._data_rows(frame, sigs, "line")
    old_groups, old_found = _old_data_rows(frame, sigs, "line")
    assert len(new_groups) == len(old_groups) and len(new_found) == len(old_found)
    coded = 0
    for (fa, a, uniq), (fb, b) in zip(new_groups, old_groups, strict=True):
        assert fa == fb
        codes = [c for c in a.columns if c.startswith(csv_parser._CODE)]
        if uniq:
            coded += 1
            # (each field's cells, or their numbers: the mostly distinct ones, milliseconds, come as cells)
            assert [c for c in a.columns if c.startswith(("_c", csv_parser._CODE))] == [
                f"{csv_parser._CODE}{c[2:]}" if c in uniq else c for c in (f"_c{i}" for i in range(len(fa)))
            ]
            assert "_c0" not in uniq and 0 < len(uniq) < len(fa)
            for c, u in uniq.items():
                assert u.equals(b.get_column(c).unique(maintain_order=True), check_names=False)
            # (the cells, by their numbers, in the fields' order)
            a = a.with_columns(
                u.gather(a.get_column(f"{csv_parser._CODE}{c[2:]}")).alias(f"{csv_parser._CODE}{c[2:]}")
                for c, u in uniq.items()
            ).rename({f"{csv_parser._CODE}{c[2:]}": c for c in uniq})
        else:
            assert not codes
        # (each row's tail, when read by tails)
        a = a.drop(c for c in a.columns if c.startswith(csv_parser._TAIL))
        assert a.schema == b.schema and a.equals(b, null_equal=True)
    for a, b in zip(new_found, old_found, strict=True):
        assert a.equals(b)
    # (the field lists of _MANY candidate lines or more numbered by the compiled scanner)
    cand = frame.filter(pl.col("sig").is_not_null() & ~pl.col("is_header")).get_column("sig").value_counts()
    long = cand.filter(pl.col("count") >= csv_parser._MANY).height
    assert coded == (long if csv_cells_path == "compiled" else 0) and (long or odd > 0.01)


def test_data_rows_tail_path_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    monkeypatch.setattr(base, "_fastscan", None)
    seen = []
    real = csv_parser._rows_by_tail
    try:
        csv_parser._rows_by_tail = lambda sub, n: (lambda r: (seen.append(r is not None), r)[1])(real(sub, n))
        frame, sigs = _csv_frame(_csv_lines(random.Random(5), 12000, 0.001))
        csv_parser._data_rows(frame, sigs, "line")
    finally:
        csv_parser._rows_by_tail = real
    assert seen and seen[0]


_TAIL_ODD = [
    " [N/A]", " [Unknown Error]", " [GPU requires reset]", " Active", "", " 7", " 0x0000000000000088", " 1e3"
]


@pytest.mark.parametrize("seed", range(3))
def test_csv_tail_conversions_equal_per_cell(csv_cells_path: str, seed: int) -> None:
    """A loop read by tails (`_rows_by_tail`, its cells converted once per tail in `_distinct_values`), odd
    cells (states, error markers, empty, other numbers) in its tails: the whole parse equals the per-cell
    parse (the long-group paths off)."""
    import random

    from parsers.base import FileContext

    rng = random.Random(seed)
    lines = _csv_lines(rng, 12000, 0.0)
    for i in rng.sample(range(1, len(lines)), 40):  # (few distinct tails: the tail path still taken)
        cells = lines[i].split(",")
        cells[rng.randrange(9, len(cells))] = rng.choice(_TAIL_ODD)
        lines[i] = ",".join(cells)
    s = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="node-1/nvidia-smi-query.csv", node="node-1", year_hint=2026)
    seen = []
    real = csv_parser._rows_by_tail
    many = csv_parser._MANY
    try:
        csv_parser._rows_by_tail = lambda sub, n: (lambda r: (seen.append(r is not None), r)[1])(real(sub, n))
        fast = csv_parser.parse(s, ctx)
        csv_parser._MANY = 10**9
        per_cell = csv_parser.parse(s, ctx)
    finally:
        csv_parser._rows_by_tail = real
        csv_parser._MANY = many
    assert seen == ([True] if csv_cells_path == "polars" else [])  # (numbered by the compiled scanner)
    assert (fast.parsed, fast.unrecognized, fast.unrecognized_examples, fast.notes, fast.node) == (
        per_cell.parsed, per_cell.unrecognized, per_cell.unrecognized_examples, per_cell.notes, per_cell.node
    )
    assert fast.tables.keys() == per_cell.tables.keys()
    for name in fast.tables:
        a, b = fast.tables[name], per_cell.tables[name]
        assert a.schema == b.schema and a.equals(b, null_equal=True), name
    assert fast.tables["events"].height  # (the error markers in the tails)


# ----------------------------------------------------------------------------- carry, _hosts_and_headers

OLD_DMON_CARRY = """
def carry(lines: pl.Series) -> list[str]:
    '''The header line in force at the end of `lines` ([] when none): a file parsed in chunks can prepend it
    to the next chunk, whose first rows it governs (it is then parsed, and counted, as a header line).'''
    text = lines.cast(pl.String).fill_null("")
    hpos = text.str.starts_with("#").arg_true()
    heads = hpos.filter(text.gather(hpos).str.contains(HEADER_RE))
    return [text[int(heads[-1])]] if len(heads) else []
"""
OLD_CSV_HEADERS = """
def _hosts_and_headers(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    '''`frame` (columns text, host) with pdsh/clush prefixes split off into `host` when most lines have one,
    and the distinct header lines. Used by `parse` and `carry` alike.'''
    # pdsh/clush captures (`node01: index, name, ...`): every host prints its own header and rows.
    text = frame.get_column("text")
    # A prefixed line contains ': ': when too few lines do, the file is no capture (no regex pass needed;
    # none at all, no count of the non-blank lines either).
    prefixed = int(text.str.contains(": ", literal=True).sum())
    nonblank = int((text.str.strip_chars() != "").sum()) if prefixed else 0
    maybe = nonblank and prefixed * 2 >= nonblank
    env = frame.select(g=pl.col("text").str.extract_groups(PDSH_RE)).unnest("g") if maybe else None
    if env is not None and env.get_column("host").is_not_null().sum() * 2 >= nonblank:
        frame = frame.with_columns(
            host=env.get_column("host").str.split(".").list.first(),
            text=pl.coalesce(env.get_column("rest"), pl.col("text")),
        )
    # (the comma test on the lines of the header's shape only: they are few)
    shaped = frame.get_column("text").filter(frame.get_column("text").str.contains(HEADER_RE))
    # A header names at least one known field (data rows such as `P0, Enabled` also fit the token shape).
    cands = shaped.filter(shaped.str.contains(",", literal=True)).unique().to_list()
    return frame, [t for t in cands if _known(t.split(","))]


def carry(lines: pl.Series) -> list[str]:
    '''The header lines in force at the end of `lines` (the last one of each pdsh host, as printed; [] when
    none): a file parsed in chunks can prepend them to the next chunk, whose first rows they govern (they are
    then parsed, and counted, as header lines). Same header rules as `parse`.'''
    text = lines.cast(pl.String).fill_null("")
    if not text.str.contains(": ", literal=True).any():
        # No line can carry a pdsh prefix (see _hosts_and_headers): the last known header line, if any.
        rows = text.filter(text.str.contains(HEADER_RE))
        rows = rows.filter(rows.str.contains(",", literal=True))  # (on the few lines of the header's shape)
        known = {t for t in rows.unique().to_list() if _known(t.split(","))}
        return next(([t] for t in reversed(rows.to_list()) if t in known), [])
    frame = pl.DataFrame({"i": pl.int_range(0, len(text), eager=True), "raw": text, "text": text}).with_columns(
        host=pl.lit(None, dtype=pl.String)
    )
    frame, headers_ok = _hosts_and_headers(frame)
    last = (
        frame.filter(pl.col("text").is_in(headers_ok))
        .group_by("host", maintain_order=True)
        .agg(pl.col("i").last(), pl.col("raw").last())
        .sort("i")
    )
    return last.get_column("raw").to_list()
"""


def _old(code: str, module) -> dict:  # noqa: ANN001
    ns = dict(vars(module))
    exec(code, ns)  # (the code replaced, verbatim, with the module's names)
    return ns


_HEAD_LINES = st.sampled_from(
    [
        "#Date       Time        gpu    pwr  gtemp", "#YYYYMMDD   HH:MM:SS    Idx      W      C",
        "# gpu   pwr", "# Idx     W", "# restarted", " 20261128   00:00:00      0    643", "    0   432", "", "#", "# gpu x",
        "timestamp, index, name", "index, name, pci.bus_id", " index, name",
        "0, NVIDIA H100, 00000000:18:00.0",
        "2026/11/28 00:00:00.001, NVIDIA H100", "9x, y", ":a, b", "/x, y", "é, name", "name, temperature.gpu",
        "n1: index, name", "n1: 0, NVIDIA H100", "Temperature.gpu, Index", "\tindex, name", "0index, name",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_HEAD_LINES, max_size=60), st.integers(1, 20))
def test_carry_and_headers_as_before(lines: list[str], block: int) -> None:
    """`carry` of dmon (looked for from the end, by blocks) and of the CSV parser, and the CSV parser's
    `_hosts_and_headers` (the lines starting with a digit left out of the regex) give what the old code
    gives, on lines of every kind (headers, rows, pdsh prefixes, digits, colons, non-ASCII first)."""
    from parsers import nvidia_smi_dmon as dmon

    s = pl.Series("line", lines, dtype=pl.String)
    real = dmon._CARRY_BLOCK
    try:
        dmon._CARRY_BLOCK = block
        assert dmon.carry(s) == _old(OLD_DMON_CARRY, dmon)["carry"](s)
    finally:
        dmon._CARRY_BLOCK = real
    assert dmon.carry(s) == _old(OLD_DMON_CARRY, dmon)["carry"](s)
    old = _old(OLD_CSV_HEADERS, csv_parser)
    assert csv_parser.carry(s) == old["carry"](s)
    n = len(lines)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(1, 1 + n, dtype=pl.Int64, eager=True),
            "text": s,
            "raw": s,
            "host": pl.repeat(None, n, dtype=pl.String, eager=True),
        }
    )
    new_frame, new_heads = csv_parser._hosts_and_headers(frame)
    old_frame, old_heads = old["_hosts_and_headers"](frame)
    assert sorted(new_heads) == sorted(old_heads)
    assert new_frame.equals(old_frame, null_equal=True)


# ----------------------------------------------------------------------------- kernel_log (syslog lane, accounting)

_TEXT_CHARS = st.sampled_from(list(" \t\x0b\x0c\r\x85\xa0\u1680\u2000\u2028\u3000!~\x7f\x00\x1fAz09:é€") + ["\U0001f600"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(_TEXT_CHARS, max_size=6)), max_size=40))
def test_nonblank_equals_regex(texts: list) -> None:
    """`kernel_log._nonblank` (the regex only on lines not starting with printable ASCII) equals
    `str.contains(r"\\S")` on every line: Unicode white space first, control characters, DEL, nulls."""
    from parsers import kernel_log

    s = pl.Series("text", texts, dtype=pl.String)
    got = kernel_log._nonblank(s)
    assert got.name == "nonblank" and got.dtype == pl.Boolean
    assert got.to_list() == s.str.contains(r"\S").to_list()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(_TEXT_CHARS, max_size=8), st.text(_TEXT_CHARS, max_size=8)), max_size=30))
def test_syslog_lane_byte_cuts(parts: list) -> None:
    """`_bytes_before(body, find(': '))` and `_bytes_from(body, find(': ') + 2)` cut where `str.head`/
    `str.slice` cut when the part before ': ' is ASCII, and the lane's prefix test reads the same lines
    as before on any text (non-ASCII prefixes included)."""
    from parsers import kernel_log

    body = pl.Series("body", [f"{a}: {b}" if k % 3 else a + b for k, (a, b) in enumerate(parts)], dtype=pl.String)
    df = body.to_frame().with_columns(_c=pl.col("body").str.find(": ", literal=True))
    b, c = pl.col("body"), pl.col("_c")
    got = df.select(p=kernel_log._bytes_before(b, c), m=kernel_log._bytes_from(b, c + 2))
    old = df.select(p=b.str.head(c), m=b.str.slice(c + 2))
    ascii_prefix = df.select((b.str.head(c).str.len_bytes() == c).fill_null(True)).to_series()
    for i, ok in enumerate(ascii_prefix.to_list()):
        if ok:
            assert got.row(i) == old.row(i)
    for pattern in (kernel_log._LANE_PREFIX, kernel_log._LANE_PREFIX.replace(kernel_log._LANE_FRAC, "")):
        assert got.select(pl.col("p").str.contains(pattern).fill_null(False)).to_series().to_list() == (
            old.select(pl.col("p").str.contains(pattern).fill_null(False)).to_series().to_list()
        )


@pytest.mark.parametrize("shape", ["no commas", "short", "long", "mixed"])
def test_csv_tail_path_on_rows_unlike_their_header(shape: str) -> None:
    """A long group whose rows do not have their header's cells (none, too few, too many, a mix): the same
    result as the per-cell parse (no row read, or the right ones), no error."""
    from parsers.base import FileContext

    hdr = (
        "timestamp, name, pci.bus_id, index, utilization.gpu [%], utilization.memory [%], memory.used [MiB],"
        " temperature.gpu, power.draw [W], clocks.sm [MHz], clocks.mem [MHz], pcie.link.gen.current,"
        " pcie.link.width.current"
    )
    good = ", 0, 5 %, 3 %, 100 MiB, 40, 500 W, 1980 MHz, 2619 MHz, 5, 16"
    rows = []
    for i in range(9000):
        head = f"2026/11/28 00:00:{i % 60:02d}.{i % 1000:03d}, NVIDIA H100, 00000000:{i % 8:02X}:00.0"
        kind = shape if shape != "mixed" else ("short", "long", "good", "good")[i % 4]
        rows.append(
            {"no commas": f"garbage line {i}", "short": head, "long": head + good + ", 9", "good": head + good}[kind]
        )
    s = pl.Series("line", [hdr, *rows], dtype=pl.String)
    ctx = FileContext(path="n/q.csv", node="n")
    fast = csv_parser.parse(s, ctx)
    many = csv_parser._MANY
    try:
        csv_parser._MANY = 10**9
        per_cell = csv_parser.parse(s, ctx)
    finally:
        csv_parser._MANY = many
    assert (fast.parsed, fast.unrecognized, fast.unrecognized_examples) == (
        per_cell.parsed, per_cell.unrecognized, per_cell.unrecognized_examples
    )
    for name in fast.tables:
        a, b = fast.tables[name], per_cell.tables[name]
        assert a.schema == b.schema and a.equals(b, null_equal=True), name
