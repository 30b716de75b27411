"""csv15's changes to the --query-gpu CSV parser give what the code they replace gives (kept verbatim in
`_csv15_ref`): `_distinct_values` (the columns of a long group converted per distinct cell or per tail of
cells) by a few queries for all columns instead of a few calls per column; `_repetitive` not probing the
tail's cells; `_rows_by_tail` without the filter that keeps every row; a file parsed alone taking the long
paths from _MANY // _ALONE rows (not _MANY).

Whole parses are compared (tables, accounting): generated loops of the medium files' size (1-2 MB, with and
without units), cut at random lines, with error states and odd cells, flags flipped, CRLF, non-ASCII and
mutated lines, a column of more than `_ENUM_MAX` distinct cells, a header with a field twice, and the
fixtures.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest

from parsers import base, nvidia_smi_csv
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines, mutated
from tests.parsers import _csv15_ref as R  # noqa: N812
from tests.parsers.test_nvsmi11 import _ODD_CELLS, _loop

pytestmark = pytest.mark.usefixtures("csv_cells_path")  # (the compiled scanner's rows, and polars')


def _both(lines: list[str], first_line: int = 1) -> None:
    """`nvidia_smi_csv.parse` as it is against the reference module's parse."""
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/q.csv", node="n1", first_line=first_line)
    assert_same_result(R.parse(ser, ctx), nvidia_smi_csv.parse(ser, ctx))


def _nounits(lines: list[str]) -> list[str]:
    """The loop as `--format=csv,nounits` prints it (no units after the numbers)."""
    return [lines[0], *(re.sub(r" (?:%|MiB|W|MHz)(?=,|$)", "", s) for s in lines[1:])]


def _odd(lines: list[str], rnd: random.Random, rate: float) -> list[str]:
    out = [lines[0]]
    for s in lines[1:]:
        r = rnd.random()
        if r < rate / 5:
            s = s.replace(", 0, 5, 16", ", [GPU requires reset], 5, 16")
        elif r < rate * 2 / 5:
            s = s.replace("Not Active", "Active", rnd.randint(1, 3))
        elif r < rate * 3 / 5:
            s = s.replace(", 16", ", 8").replace(", 5,", ", 3,")
        elif r < rate * 4 / 5:
            s = mutated(rnd, s, "0123456789 ,[]ERR!xé\r", 3, 4)
        elif r < rate:
            cells = s.split(",")
            cells[rnd.randrange(len(cells))] = rnd.choice(_ODD_CELLS)
            s = ",".join(cells)
        out.append(s)
    return out


def test_fixtures_same_as_reference() -> None:
    for _name, lines in fixture_lines("nvidia-smi-csv"):
        _both(lines)


@pytest.mark.parametrize("seed", [1, 2])
def test_medium_loops_same_as_reference(tmp_path: Path, seed: int) -> None:
    """Loops of 1-2 MB (one header, 8 GPUs), with units and without, as they are, cut at random lines (the
    long and the short path), with odd lines; CRLF line ends and non-ASCII cells."""
    rnd = random.Random(seed)
    units = _loop(tmp_path, "csv", 2.2, seed)
    assert len(units) > nvidia_smi_csv._MANY
    for lines in (units, _nounits(units)):
        _both(lines, first_line=3)
        a = rnd.randrange(len(lines) // 2)
        _both(lines[a : a + rnd.randint(100, len(lines))], first_line=a + 1)
        _both([lines[0], *lines[a : a + rnd.randint(4000, 9000)]])
        _both(_odd(lines, rnd, 0.01))
        _both(_odd(lines, rnd, 0.0005))
        _both(_odd(lines[:6000], rnd, 0.01))  # (alone: the long paths from _MANY // _ALONE rows)
    crlf = [s + "\r" for s in units[:9000]]
    _both(crlf)
    _both([s.replace("NVIDIA", "NVIDIA ÜΣ") if i % 7 == 0 else s for i, s in enumerate(units)])


def test_many_distinct_cells_and_a_field_twice() -> None:
    """A head column of more than `_ENUM_MAX` distinct cells later on (mapped back by `replace_strict`), flags
    of one, two and three states in the head and the tail, a field queried twice (once in the head, once in
    the tail), all-state columns, odd cells."""
    rnd = random.Random(15)
    head = (
        "timestamp, index, pci.bus_id, utilization.gpu [%], memory.used [MiB],"
        " clocks_event_reasons.sw_power_cap, temperature.gpu, power.draw [W],"
        " clocks_event_reasons.hw_slowdown, temperature.memory, ecc.errors.uncorrected.volatile.total,"
        " pcie.link.gen.current,"
        " pcie.link.width.current, temperature.gpu, clocks_event_reasons.active"
    )
    rows = [head]
    for i in range(10000):
        g = i % 8
        used = f"{70000 + (i // 8) % 3} MiB" if i < 6000 else f"{rnd.randint(0, 10**6)} MiB"
        cells = [
            f"2026/11/28 00:{i // 480 % 60:02d}:{i // 8 % 60:02d}.00{g}",
            str(g),
            f"00000000:{g + 16:02X}:00.0",
            f"{rnd.choice([97, 98, 99])} %",
            used,
            rnd.choice(["Active", "Not Active", "[N/A]"]),
            str(40 + g),
            f"{600 + g + rnd.random():.2f} W",
            "Not Active" if i % 500 else "Active",
            "[N/A]",
            str(i // 3000),
            rnd.choice(["5", "5", "5", "4"]) if i > 2000 else "5",
            "16",
            "41",
            "0x0000000000000001" if i % 700 else "0x0000000000000088",
        ]
        if rnd.random() < 0.01:
            k = rnd.choice([1, 3, 4, 5, 6, 7, 8, 9, 13])
            cells[k] = rnd.choice(_ODD_CELLS)
        rows.append(", ".join(cells))
    assert nvidia_smi_csv._ENUM_MAX < 6000
    _both(rows)
    _both(rows[:5000])
    seen: list[bool] = []
    real = nvidia_smi_csv._rows_by_tail

    def spy(sub: pl.DataFrame, n: int) -> pl.DataFrame | None:
        seen.append((r := real(sub, n)) is not None)
        return r

    try:
        nvidia_smi_csv._rows_by_tail = spy
        nvidia_smi_csv.parse(pl.Series(rows[:5000]), FileContext(path="n1/q.csv", node="n1"))
    finally:
        nvidia_smi_csv._rows_by_tail = real
    # (5,000 rows: read by tails, where the compiled scanner does not number the cells)
    assert seen == ([True] if base.compiled("csv_cells") is None else [])


def test_tails_too_many_and_several_field_lists() -> None:
    """Lines whose last cells each hold few values but whose tails are many (`_rows_by_tail` gives up after
    splitting: the lines split whole), and a file of two field lists (the field list of each line looked up
    per header)."""
    rnd = random.Random(7)
    head = "timestamp, index, power.draw [W], pstate, pcie.link.gen.current, pcie.link.width.current, fan"
    rows = [head]
    for i in range(6000):
        tail = [rnd.choice(["P0", "P2", "P8"]), rnd.choice(["3", "4", "5"]), rnd.choice(["8", "16"])]
        cells = [f"2026/11/28 00:00:{i // 8 % 60:02d}.000", str(i % 8), f"{rnd.random():.2f} W", *tail]
        rows.append(", ".join([*cells, rnd.choice(["30 %", "31 %", "32 %", "[N/A]"])]))
    _both(rows)
    other = "timestamp, index, temperature.gpu, clocks_event_reasons.active"
    block = [f"2026/11/28 00:01:00.000, {g}, 4{g}, 0x0000000000000001" for g in range(8)]
    mixed = [*rows[:3000], other, *block]
    _both(mixed + rows[:1] + rows[3000:])
