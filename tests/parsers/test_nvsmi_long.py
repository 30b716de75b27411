"""The long-group paths of the dmon and `--query-gpu` CSV parsers give what the row-by-row paths give.

- dmon: a long field-list group's rows of dmon's fixed-width layout are read as columns of bytes
  (`nvidia_smi_dmon._fixed_width`); the result must equal the row regex's (the byte path switched off) on
  generated monitoring loops (`bench/big_nvsmi.py`) and on seeded mutations of their rows (cells one byte
  wider, signs, leading zeros, dots, tabs, CR, NBSP, long digit runs, cut rows, other field lists: a `-o T`
  time kept in `extra`, a date without time, a repeated field, a lone `gpu`).
- CSV: a long group's repetitive cells converted once per distinct cell (`_distinct_values`) or per run must
  equal the conversion of every cell (the probe switched off).
"""

from __future__ import annotations

import contextlib
import random
from datetime import UTC, datetime
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from parsers import nvidia_smi_csv, nvidia_smi_dmon
from parsers.base import FileContext, ParseResult, lines_from_bytes

CTX = FileContext(path="node-1/nvidia-smi-dmon.log", node="node-1", year_hint=2026)


def assert_same(a: ParseResult, b: ParseResult) -> None:
    assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.notes, a.partial, a.node) == (
        b.parsed, b.unrecognized, b.unrecognized_examples, b.notes, b.partial, b.node
    )
    assert set(a.tables) == set(b.tables)
    for name in a.tables:
        assert a.tables[name].schema == b.tables[name].schema, name
        assert a.tables[name].equals(b.tables[name], null_equal=True), name


def generated(tmp_path: Path, kind: str, mb: float, seed: int) -> list[str]:
    from bench import big_nvsmi

    out = tmp_path / f"{kind}{seed}.log"
    big_nvsmi.write(out, mb, seed, kind)
    return lines_from_bytes(out.read_bytes()).to_list()


@contextlib.contextmanager
def bytes_counted(monkeypatch: pytest.MonkeyPatch, path: str = "_fixed_width") -> Iterator[list[int]]:
    """Within the block, dmon's byte path (`path`: `_fixed_width`, or `_scanned`, its compiled reading) adds
    the rows it reads to the one-item list yielded."""
    seen = [0]
    real = getattr(nvidia_smi_dmon, path)

    def counting(rows: pl.DataFrame, fields: list[str]) -> tuple[pl.DataFrame, pl.Series] | None:
        got = real(rows, fields)
        seen[0] += got[0].height if got is not None else 0
        return got

    with monkeypatch.context() as mp:
        mp.setattr(nvidia_smi_dmon, path, counting)
        yield seen


@contextlib.contextmanager
def regex_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Within the block, dmon's byte path is off (every row read by the row regex)."""
    with monkeypatch.context() as mp:
        mp.setattr(nvidia_smi_dmon, "_fixed_width", lambda rows, fields: None)
        yield


def dmon_both(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[ParseResult, ParseResult, int]:
    """(byte path, regex only, rows the byte path read)."""
    s = pl.Series("line", lines, dtype=pl.String)
    with bytes_counted(monkeypatch) as seen:
        fast = nvidia_smi_dmon.parse(s, CTX)
    with regex_only(monkeypatch):
        slow = nvidia_smi_dmon.parse(s, CTX)
    return fast, slow, seen[0]


HEADERS = [  # (names line, units line) of dmon selections
    (
        "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec"
        "    jpg    ofa   mclk   pclk",
        "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %"
        "      %      %    MHz    MHz",
    ),
    ("# gpu    pwr  gtemp  mtemp  sbecc  dbecc     sm", "# Idx      W      C      C   errs   errs      %"),
    ("#Time        gpu    pwr  gtemp     sm    mem", "#HH:MM:SS    Idx      W      C      %      %"),
    ("#Date       gpu    pwr  gtemp     sm    mem", "#YYYYMMDD    Idx      W      C      %      %"),
    ("# gpu    pwr  pwr     sm", "# Idx      W      W      %"),
    ("# gpu", "# Idx"),
    ("# gpu    pwr    fb   bar1  rxpci  txpci", "# Idx      W    MB     MB   MB/s   MB/s"),
]


ODD_TOKENS = ["-", "--", "-5", "+5", "1.5", "N/A", "1e3", "0x1", "é", "5-", "9" * 9, "9" * 8, "00000000"]


def mutate(line: str, rng: random.Random) -> str:
    if not line or line.startswith("#"):
        return line
    k = rng.randrange(20)
    toks = line.split()
    if k == 0:
        i = rng.randrange(len(toks))
        toks[i] = rng.choice(ODD_TOKENS)
        return "   ".join(toks)
    if k in (1, 2, 3):  # a byte before a token (same width): leading zero, sign, dot, letter
        spots = [j for j in range(1, len(line)) if line[j - 1] == " " and line[j] != " "]
        if spots:
            j = rng.choice(spots) - 1
            return line[:j] + rng.choice("00000+-.x") + line[j + 1 :]
        return line
    if k == 4:
        i = rng.randrange(1, len(line))
        return line[:i] + "9" + line[i:]  # a cell one byte wider
    if k == 5:
        i = rng.randrange(len(line))
        return line[:i] + rng.choice(" -\t\r\u00a0") + line[i + 1 :]
    if k == 6:
        return line[: rng.randrange(len(line))]
    if k == 7:
        return line + rng.choice([" ", "\t", "\r", "     99"])
    if k == 8:
        return line.replace("  ", " ", 1)
    if k == 9:
        return rng.choice(["", "garbage line", line[1:] + " "])
    return line


def mutated(base: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    i = rng.randrange(1000)
    while len(out) < 9000:
        if rng.random() < 0.002:
            names, units = rng.choice(HEADERS)
            out += [names, units]
            fields = names.lstrip("#").lower().split()
            for r in range(rng.randrange(50, 2000)):
                cells = []
                for f in fields:
                    if f == "date":
                        cells.append(" 20261128")
                    elif f == "time":
                        cells.append(f"   00:00:{r // 8 % 60:02d}")
                    else:
                        cells.append(f"{rng.choice([str(r % 8), str(rng.randrange(1000)), '-', '0']):>7}")
                row = "".join(cells)
                out.append(mutate(row, rng) if rng.random() < 0.02 else row)
            continue
        line = base[i % len(base)]
        i += 1
        out.append(mutate(line, rng) if rng.random() < rng.choice([0.0, 0.001, 0.02, 0.2]) else line)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_dmon_bytes_equal_regex_on_generated_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    lines = generated(tmp_path, "dmon", 1.5, seed)
    fast, slow, by_bytes = dmon_both(lines, monkeypatch)
    assert by_bytes > 0.9 * fast.tables["gpu_samples"].height > 0
    assert_same(fast, slow)


def test_dmon_bytes_equal_regex_on_mutated_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = generated(tmp_path, "dmon", 0.5, 3)
    total = 0
    for seed in range(12):
        fast, slow, by_bytes = dmon_both(mutated(base, seed), monkeypatch)
        assert_same(fast, slow)
        total += by_bytes
    assert total > 50_000


def test_dmon_bytes_chunk_with_carried_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk that starts inside a group (its header carried from the previous chunk)."""
    lines = generated(tmp_path, "dmon", 2, 4)
    cut = len(lines) // 2
    carried = nvidia_smi_dmon.carry(pl.Series(lines[:cut]))
    fast, slow, by_bytes = dmon_both(carried + lines[cut:], monkeypatch)
    assert by_bytes
    assert_same(fast, slow)


ODD_CELLS = ["", " ", " [N/A]", " [Unknown Error]", " 12.5 W", " 0x0000000000000088", " Active", " 7"]


@pytest.mark.parametrize("seed", [1, 2])
def test_csv_per_value_equals_per_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    lines = generated(tmp_path, "csv", 3, seed)
    rng = random.Random(seed)
    for i in rng.sample(range(1, len(lines)), 200):  # odd cells: states, empty, spaces, other units
        cells = lines[i].split(",")
        j = rng.randrange(len(cells))
        cells[j] = rng.choice(ODD_CELLS)
        lines[i] = ",".join(cells)
    s = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="node-1/nvidia-smi-query.csv", node="node-1", year_hint=2026)
    long = nvidia_smi_csv.parse(s, ctx)
    with monkeypatch.context() as mp:
        mp.setattr(nvidia_smi_csv, "_MANY", 10**9)
        per_cell = nvidia_smi_csv.parse(s, ctx)
    assert long.tables["gpu_samples"].height > nvidia_smi_csv._MANY
    assert_same(long, per_cell)


def test_csv_timestamps_from_bytes_equal_strptime() -> None:
    """`_stamps` (the usual `YYYY/MM/DD HH:MM:SS.fff` cells from their bytes) equals `_timestamp` on every
    cell: leap years, impossible dates and times, leap seconds, years out of range, other shapes, nulls."""
    rng = random.Random(7)

    def cell() -> str | None:
        y = rng.choice([1969, 1970, 2000, 2024, 2025, 2026, 2100, 2200, 2201, 0, rng.randrange(10000)])
        mo, da = rng.choice([0, 1, 2, 12, 13, rng.randrange(100)]), rng.choice([0, 1, 28, 29, 30, 31, 32])
        h, mi, se = rng.choice([0, 23, 24]), rng.choice([0, 59, 60]), rng.choice([0, 59, 60, 61])
        s = f"{y:04d}/{mo:02d}/{da:02d} {h:02d}:{mi:02d}:{se:02d}.{rng.randrange(1000):03d}"
        k = rng.randrange(8)
        if k == 0:
            i = rng.randrange(len(s))
            return s[:i] + rng.choice("0 /:.-aé\t+") + s[i + 1 :]
        if k == 1:
            return rng.choice(["", "[N/A]", None, " " + s, s + "0", s[:-1], s[:19], s[1:] + " "])
        return s

    cells = pl.Series("c", [cell() for _ in range(20000)], dtype=pl.String)
    fast = nvidia_smi_csv._stamps(cells)
    assert fast.dtype == pl.Datetime("us", "UTC")
    assert fast.equals(pl.select(nvidia_smi_csv._timestamp(pl.lit(cells))).to_series(), check_names=False)
    assert fast.drop_nulls().len() > 1000  # (cells read from their bytes or by strptime: valid ones)


# ----------------------------------------------------------------------------- the compiled dmon rows


@contextlib.contextmanager
def uncompiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Within the block, the compiled module is not there (dmon's bytes read as numpy columns)."""
    from parsers import base

    with monkeypatch.context() as mp:
        mp.setattr(base, "_fastscan", None)
        yield


def _dmon_group(rng: random.Random, names: str, rows: int, widths: bool, extra_runs: float) -> list[str]:
    """A dmon header and `rows` rows of its fields: numbers of 1-8 digits or `-`, dates and times that exist
    (a leap day, the end of a year), `extra` cells that change now and then (`extra_runs`), cells as dmon
    right-aligns them (`widths`: some wider than the column, so rows differ in length)."""
    fields = names.lstrip("#").lower().split()
    units = next(u for n, u in HEADERS if n == names) if any(n == names for n, _ in HEADERS) else "# Idx"
    out = [names, units]
    day = rng.choice(["20240229", "20261231", "19700101", "22001231", "20261128"])
    extra = [rng.choice(["0", "-", "12", "100"]) for _ in fields]
    for r in range(rows):
        if rng.random() < extra_runs:
            extra = [rng.choice(["0", "-", "12", "100", "7"]) for _ in fields]
        cells = []
        for i, f in enumerate(fields):
            if f == "date":
                cells.append(f" {day}")
            elif f == "time":
                cells.append(f"   {r // 8 // 3600 % 24:02d}:{r // 8 // 60 % 60:02d}:{r // 8 % 60:02d}")
            elif f in nvidia_smi_dmon._MAP or f == "gpu":
                v = rng.choice([str(r % 8), str(rng.randrange(1000)), "-", "0", "007"])
                v = "9" * rng.randrange(1, 9) if rng.random() < 0.1 else v
                cells.append(" " + f"{v:>{6 if not widths else rng.choice([6, 6, 6, 8])}}")
            else:
                cells.append(f" {extra[i]:>6}")
        lead, trail = ("  " if rng.random() < 0.5 else ""), (" " if rng.random() < 0.01 else "")
        out.append(lead + "".join(cells) + trail)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_dmon_compiled_rows_equal_the_byte_and_regex_paths(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """`_fastscan.dmon_rows` (`_scanned`: every row of a group of the fields' shape, whatever its width) gives
    the rows the numpy byte path and the row regex give, value for value: every field list of `HEADERS`,
    `-`, leading zeros, 8-digit numbers, cells wider than their column, `extra` in runs or changing."""
    rng = random.Random(seed)
    lines: list[str] = []
    for names, _units in HEADERS:
        rows, widths, runs = rng.randrange(1100, 2500), rng.random() < 0.5, rng.choice([0, 0.01, 0.5])
        lines += _dmon_group(rng, names, rows, widths, runs)
    s = pl.Series("line", lines, dtype=pl.String)
    with bytes_counted(monkeypatch, "_scanned") as scanned:
        fast = nvidia_smi_dmon.parse(s, CTX)
    # (every group but the one with a repeated field, which no byte path reads, and the lone `gpu`'s)
    assert scanned[0] > 0.6 * fast.tables["gpu_samples"].height
    with uncompiled(monkeypatch):
        numpy_path = nvidia_smi_dmon.parse(s, CTX)
    with regex_only(monkeypatch):
        slow = nvidia_smi_dmon.parse(s, CTX)
    assert_same(fast, numpy_path)
    assert_same(fast, slow)


@pytest.mark.parametrize(
    "row",
    [
        " 20261128   00:00:01      0    100\t    40",  # a tab
        " 20261128   00:00:01      0    100     4é",  # not ASCII
        " 20261128   00:00:01      0    100     40\r",  # a CR
        " 20261128   00:00:01      0    100",  # a token short
        " 20261128   00:00:01      0    100     40     1",  # a token more
        " 20261128   00:00:01      0 123456789     40",  # 9 digits
        " 20261128   00:00:01      0     -5     40",  # a sign
        " 20261128   00:00:01      0    1.5     40",  # a point
        " 20261128   00:00:01      0     --     40",  # not N/A
        " 20260229   00:00:01      0    100     40",  # no such day
        " 20261128   24:00:01      0    100     40",  # no such hour
        " 20261128   00:00:60      0    100     40",  # a leap second
        " 19691231   23:59:59      0    100     40",  # before 1970
        " 20261128   0:00:01      0    100     40",  # a short time
        " 2026-11-28   00:00:01      0    100     40",  # another date
        "",  # blank
    ],
)
def test_dmon_compiled_rows_stop_at_another_shape(row: str) -> None:
    """A row of another shape stops the scan (the byte path and the regex then decide for the group)."""
    import numpy as np

    from parsers import base

    scan = base.compiled("dmon_rows")
    good = " 20261128   00:00:00      1    200     41"
    text = pl.Series("t", [good, row, good], dtype=pl.String)
    ints, floats = np.empty(6, dtype=np.int64), np.empty(9, dtype=np.float64)
    assert scan(text.__arrow_c_stream__(), 3, b"dtnnn", ints, floats) == 1
    assert floats[0] == 1 and floats[3] == 200 and floats[6] == 41
    assert ints[0] == int(datetime(2026, 11, 28, tzinfo=UTC).timestamp() * 1_000_000) and ints[3] == 1
    rows = pl.DataFrame({"line": [1, 2, 3], "text": text})
    assert nvidia_smi_dmon._scanned(rows, ["date", "time", "gpu", "pwr", "gtemp"]) is None
