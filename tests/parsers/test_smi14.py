# ruff: noqa: E501
"""smi14's changes to the dmon and --query-gpu CSV parsers give what the code they replace gives (kept verbatim in
`_smi14_ref`).

`nvidia_smi_dmon.parse`: the rows of several field lists merged in line order by slicing the runs of rows that stay
together (`_merged`), instead of a sort of the concatenation that gathers every column; more than `_MERGE_RUNS` runs
keep the sort. `nvidia_smi_dmon._fixed_width`: the most common row length by a count per length (`_common_length`),
the rows' run numbers as UInt32. `_nvsmi_fields._transitions` (dmon and CSV): the previous-sample window's row numbers
as UInt32, a trigger's previous value gathered as UInt8. `nvidia_smi_csv._codes`, `_rows_by_tail`: the codes of the
distinct cells as UInt32; `_distinct_values`: Boolean columns gathered as UInt8.

Whole parses are compared (tables, accounting): generated dmon loops of the benchmark's shape (both field lists, in
blocks), two field lists interleaved header by header (runs of 8 rows: past `_MERGE_RUNS`, the sort), with odd and
mutated rows, CRLF and non-ASCII lines, cut at random lines, and the fixtures; `_merged` itself on random parts.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import _nvsmi_fields as F  # noqa: N812
from parsers import base
from parsers import nvidia_smi_csv, nvidia_smi_dmon
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines, mutated
from tests.parsers import _smi14_ref as R  # noqa: N812
from tests.parsers.conftest import uncoded
from tests.parsers.test_nvsmi11 import _ODD_CELLS, _dmon_odd, _loop
from tests.parsers.test_smi9 import _loop as _smi9_loop

_REFERENCES = [
    (F, "transition_events"),
    (nvidia_smi_csv, "_distinct_values"),
    (nvidia_smi_csv, "_rows_by_tail"),
]


def _reference(fn, *args):  # noqa: ANN001, ANN202
    """`fn(*args)` with the references in (`_smi14_ref`: the events, the CSV conversions per distinct cell)."""
    real = [(m, name, getattr(m, name)) for m, name in _REFERENCES]
    scanner = base._fastscan
    for m, name in _REFERENCES:
        setattr(m, name, uncoded(R._distinct_values) if name == "_distinct_values" else getattr(R, name))
    base._fastscan = None  # (the references read the rows as polars cuts them)
    try:
        return fn(*args)
    finally:
        for m, name, f in real:
            setattr(m, name, f)
        base._fastscan = scanner


def _both_dmon(lines: list[str], first_line: int = 1) -> None:
    """`nvidia_smi_dmon.parse` as it is against the reference parse (its own `_fixed_width`, the reference
    events)."""
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/dmon.log", node="n1", first_line=first_line)
    assert_same_result(_reference(R.parse, ser, ctx), nvidia_smi_dmon.parse(ser, ctx))


def _both_csv(lines: list[str], first_line: int = 1) -> None:
    """`nvidia_smi_csv.parse` as it is against it with the reference events."""
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/q.csv", node="n1", first_line=first_line)
    assert_same_result(_reference(nvidia_smi_csv.parse, ser, ctx), nvidia_smi_csv.parse(ser, ctx))


def _blocks(lines: list[str], rnd: random.Random, blocks: int) -> list[str]:
    """The loop's sections of one field list cut into `blocks` stretches that alternate with stretches of the
    other field list's rows (each with its header: a range of the benchmark's file, M E M ...)."""
    head_b = ["# gpu   pwr gtemp mtemp sbecc dbecc   pci", "# Idx     W     C     C  errs  errs  errs"]
    out: list[str] = []
    step = max(1, len(lines) // blocks)
    for at in range(0, len(lines), step):
        out += lines[at : at + step]
        out += head_b + [
            f"  {g:3d} " + " ".join(f"{rnd.randint(0, 9):>5d}" for _ in range(6))
            for _ in range(rnd.randint(1, 40))
            for g in range(8)
        ]
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_dmon_blocks_same_as_reference(tmp_path: Path, seed: int) -> None:
    """A benchmark-shaped dmon loop whose field lists come in a few blocks (the runs sliced), as it is, cut at
    random lines, with odd, mutated, CRLF and non-ASCII rows."""
    rnd = random.Random(seed)
    lines = _blocks(_loop(tmp_path, "dmon", 1.2, seed), rnd, rnd.randint(2, 7))
    assert len(lines) > nvidia_smi_dmon._MANY
    _both_dmon(lines, first_line=7)
    for _ in range(3):
        a = rnd.randrange(len(lines) // 2)
        _both_dmon(lines[a : a + rnd.randint(nvidia_smi_dmon._MANY, len(lines))], first_line=a + 1)
    _both_dmon(_dmon_odd(lines, rnd, 0.002))
    odd = [*lines]
    for i in rnd.sample(range(len(odd)), 40):
        odd[i] = rnd.choice(
            [odd[i] + "\r", odd[i].replace("0", "é", 1), mutated(rnd, odd[i], "0123456789 -#é\t", 3, 3)]
        )
    _both_dmon(odd)


@pytest.mark.parametrize("seed", [3, 4])
def test_dmon_interleaved_same_as_reference(tmp_path: Path, seed: int) -> None:
    """Two field lists alternating every few rows (hundreds of runs: the sort), and in a few long stretches."""
    rnd = random.Random(seed)
    lines = _loop(tmp_path, "dmon", 1.0, seed)
    many = _blocks(lines, rnd, 300)
    _both_dmon(many)
    _both_dmon(_dmon_odd(many, rnd, 0.003))
    _both_dmon(_blocks(lines, rnd, nvidia_smi_dmon._MERGE_RUNS // 2 - 1))  # (just under: the runs sliced)
    _both_dmon(_smi9_loop(6000, seed))


def test_dmon_fixtures_same_as_reference() -> None:
    for _name, lines in fixture_lines("nvidia-smi-dmon"):
        _both_dmon(lines)


def test_csv_fixtures_same_as_reference() -> None:
    for _name, lines in fixture_lines("nvidia-smi-csv"):
        _both_csv(lines)


@pytest.mark.parametrize("seed", [1, 2])
def test_csv_loop_same_as_reference(tmp_path: Path, seed: int) -> None:
    """A --query-gpu loop (ECC counts that stay up, throttle reasons that come and go, link state): as it is, cut at
    random lines, with error states and odd cells, flags flipped, CRLF, non-ASCII and mutated lines."""
    rnd = random.Random(seed)
    lines = _loop(tmp_path, "csv", 3.5, seed)
    assert len(lines) > nvidia_smi_csv._MANY
    _both_csv(lines, first_line=3)
    a = rnd.randrange(len(lines) // 2)
    _both_csv(lines[a : a + rnd.randint(100, len(lines))], first_line=a + 1)
    odd = []
    for s in lines:
        r = rnd.random()
        if r < 0.002:
            s = s.replace(" 0, 5, 16", " [GPU requires reset], 5, 16")
        elif r < 0.006:
            s = s.replace("Not Active", "Active", rnd.randint(1, 3))
        elif r < 0.008:
            s = s.replace(", 16", ", 8").replace(", 5,", ", 3,")
        elif r < 0.010:
            s = mutated(rnd, s, "0123456789 ,[]ERR!xé\r", 3, 4)
        elif r < 0.012:
            cells = s.split(",")
            cells[rnd.randrange(len(cells))] = rnd.choice(_ODD_CELLS)
            s = ",".join(cells)
        odd.append(s)
    _both_csv(odd)


def test_merged_same_as_sort() -> None:
    """`_merged` of random parts (each in line order, lines distinct, columns and dtypes differing): the frame, the
    schema and the line column's sorted flag of the sort of their diagonal concatenation."""
    rnd = random.Random(14)
    for _ in range(300):
        lines = rnd.sample(range(100000), rnd.randint(2, 300))
        k = rnd.randint(2, 4)
        if rnd.random() < 0.5:  # (blocks: few runs)
            lines.sort()
            cuts = sorted(rnd.sample(range(1, len(lines)), min(len(lines) - 1, rnd.randint(1, 6))))
            group = [sum(i >= c for c in cuts) % k for i in range(len(lines))]
        else:
            group = [rnd.randrange(k) for _ in lines]
        parts = []
        for j in range(k):
            mine = sorted(x for x, g in zip(lines, group, strict=True) if g == j)
            if mine:
                parts.append(
                    pl.DataFrame(
                        {
                            "line": pl.Series(mine, dtype=pl.Int64),
                            f"c{j}": [str(x) for x in mine],
                            "v": pl.Series(mine, dtype=[pl.Int32, pl.Float64, pl.Int64][j % 3]),
                        }
                    )
                )
        if len(parts) < 2:
            continue
        got = nvidia_smi_dmon._merged(parts, "line")
        want = pl.concat(parts, how="diagonal_relaxed").sort("line")
        assert got.schema == want.schema
        assert got.equals(want, null_equal=True)
        assert got.get_column("line").flags == want.get_column("line").flags


def test_csv_odd_cells_and_many_distinct_cells() -> None:
    """Columns converted per distinct cell (flags among them: Boolean gathers) holding odd cells, one with more than
    `_ENUM_MAX` distinct cells later on, flags of one, two and three states."""
    rnd = random.Random(12)
    head = "timestamp, index, pci.bus_id, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.sw_power_cap, ecc.errors.uncorrected.volatile.total, pcie.link.gen.current, pcie.link.width.current"
    rows = [head]
    for i in range(12000):
        g = i % 8
        used = f"{70000 + (i // 8) % 3} MiB" if i < 6000 else f"{rnd.randint(0, 10**6)} MiB"
        cells = [
            f"2026/11/28 00:{i // 480 % 60:02d}:{i // 8 % 60:02d}.00{g}",
            str(g),
            f"00000000:{g + 16:02X}:00.0",
            f"{rnd.choice([97, 98, 99])} %",
            used,
            str(40 + g),
            f"{600 + g}.00 W",
            rnd.choice(["Active", "Not Active"]),
            "Not Active" if i % 500 else "Active",
            rnd.choice(["Active", "Not Active", "[N/A]"]),
            str(i // 3000),
            rnd.choice(["5", "5", "4"]),
            "16",
        ]
        if rnd.random() < 0.01:
            k = rnd.choice([1, 3, 4, 5, 6, 7, 8, 9])
            cells[k] = rnd.choice(_ODD_CELLS)
        rows.append(", ".join(cells))
    _both_csv(rows)
    assert nvidia_smi_csv._ENUM_MAX < 6000
