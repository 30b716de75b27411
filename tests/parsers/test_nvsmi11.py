# ruff: noqa: E501
"""nvsmi11's changes to the events of the dmon and --query-gpu CSV parsers give what the code they replace gives (kept
verbatim in `_nvsmi11_ref`).

`_nvsmi_fields._transitions`: the previous sample's test of every rule on all rows in one query, the rows where a rule
fires kept (of the columns read after), instead of the triggered rows (a counter that stays up: half a loop's rows)
filtered whole and tested apart. `nvidia_smi_csv._distinct_values`: each cell's place among a column's distinct cells by
a cast to their Enum (shared by the column's conversions), instead of a `replace_strict` per conversion; more than
`_ENUM_MAX` distinct cells keep `replace_strict`.

Whole parses are compared (tables, accounting): generated dmon and CSV loops of the benchmark's shape (long enough for
the byte and per-distinct paths), with markers, letters and odd cells put in rows (a marker in an `extra` cell, one
spread over two cells, letters that are no marker, mutated lines), the fixtures, and `parse_many` of small files.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from bench import big_nvsmi
from parsers import _nvsmi_fields as F  # noqa: N812
from parsers import base
from parsers import nvidia_smi_csv, nvidia_smi_dmon
from parsers.base import FileContext, ParseResult, lines_from_bytes
from tests.conftest import fixture_lines, mutated
from tests.parsers import _nvsmi11_ref as R  # noqa: N812
from tests.parsers.conftest import uncoded
from tests.parsers.test_smi9 import _loop as _smi9_loop


def _same(a: ParseResult, b: ParseResult) -> None:
    assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.notes, a.node) == (
        b.parsed, b.unrecognized, b.unrecognized_examples, b.notes, b.node
    )
    assert a.tables.keys() == b.tables.keys()
    for t in a.tables:
        assert a.tables[t].schema == b.tables[t].schema, t
        assert a.tables[t].equals(b.tables[t], null_equal=True), t


def _both(module, lines: list[str], monkeypatch: pytest.MonkeyPatch, first_line: int = 1) -> None:
    """`module.parse` as it is against it with the references in."""
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/loop.log", node="n1", first_line=first_line)
    new = module.parse(ser, ctx)
    with monkeypatch.context() as m:
        m.setattr(F, "_transitions", R._transitions)
        m.setattr(F, "transition_events", R.transition_events)
        m.setattr(nvidia_smi_csv, "_distinct_values", uncoded(R._distinct_values))
        m.setattr(base, "_fastscan", None)
        old = module.parse(ser, ctx)
    _same(old, new)


def _loop(tmp_path: Path, kind: str, mb: float, seed: int) -> list[str]:
    path = tmp_path / f"{kind}-{seed}.log"
    big_nvsmi.write(path, mb, seed, kind)
    return lines_from_bytes(path.read_bytes()).to_list()


_MARKED = ["ERR!", "Unknown", "Error", "GPU", "is", "lost", "requires", "reset", "E", "G", "U", "e", "[GPU", "xERR!y"]


def _dmon_odd(lines: list[str], rnd: random.Random, rate: float) -> list[str]:
    """Rows with a token replaced by marker words and letters (right-aligned in its cell: the row keeps its
    layout), with two neighbouring cells spelling a marker, or mutated (then read by the row regex)."""
    out = []
    for s in lines:
        r = rnd.random()
        if s.startswith("#") or r > rate:
            out.append(s)
        elif r < rate / 3:
            toks = s.split()
            k = rnd.randrange(len(toks))
            word = rnd.choice(_MARKED)
            out.append(s.replace(" " + toks[k], " " + word.rjust(len(toks[k])), 1) if len(word) <= len(toks[k]) else s)
        elif r < rate * 2 / 3:
            out.append(s[:-12] + "Unknown Error" if len(s) > 30 else s)
        else:
            out.append(mutated(rnd, s, "0123456789 -ERGU!ab\t", 3, 3))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dmon_loop_same_as_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """A dmon loop of both field lists (as the benchmark's), long enough for the byte path: as it is and with
    markers, letters and mutated rows."""
    lines = _loop(tmp_path, "dmon", 1.2, seed)
    assert len(lines) > nvidia_smi_dmon._MANY
    _both(nvidia_smi_dmon, lines, monkeypatch, first_line=11)
    rnd = random.Random(seed)
    for rate in (0.00005, 0.002, 0.05):
        _both(nvidia_smi_dmon, _dmon_odd(lines, rnd, rate), monkeypatch)


@pytest.mark.parametrize("seed", [1, 2])
def test_dmon_two_field_lists_same_as_reference(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Two field lists interleaved (each read as bytes), odd lines and comments (`test_smi9._loop`): as they are and
    with markers, letters and mutated rows."""
    lines = _smi9_loop(20000, seed)
    _both(nvidia_smi_dmon, lines, monkeypatch)
    _both(nvidia_smi_dmon, _dmon_odd(lines, random.Random(seed), 0.003), monkeypatch)


def test_dmon_letters_without_markers_and_markers_in_regex_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Letters in fixed-width cells that spell no marker (`E`, `U`, `G` alone: the events look for markers in
    every row), a marker only in rows the regex reads (other lengths), and neither."""
    head = ["# gpu   pwr gtemp mtemp sbecc dbecc   pci", "# Idx     W     C     C  errs  errs  errs"]
    rows = [f"{g:>5} {300 + i % 40:>5} {40 + g:>5} {50:>5} {0:>5} {(i // 500) % 3:>5} {0:>5}" for i in range(1500) for g in range(8)]
    plain = head + rows
    _both(nvidia_smi_dmon, plain, monkeypatch)
    for word in ("E", "G", "U", "ERR!"):
        odd = [*plain]
        odd[500] = odd[500][:-5] + word.rjust(5)
        _both(nvidia_smi_dmon, odd, monkeypatch)
    odd = [*plain]
    odd[700] = odd[700] + "  GPU is lost"  # (another length: the row regex reads it, or it is unrecognized)
    odd[900] = odd[900][:-5] + "  ERR!"
    _both(nvidia_smi_dmon, odd, monkeypatch)


@pytest.mark.parametrize("seed", [1, 2])
def test_csv_loop_same_as_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """A --query-gpu loop (ECC counts that stay up, throttle reasons that come and go): as it is, with error
    states in cells and with mutated lines."""
    lines = _loop(tmp_path, "csv", 1.5, seed)
    _both(nvidia_smi_csv, lines, monkeypatch, first_line=3)
    rnd = random.Random(seed)
    odd = []
    for s in lines:
        r = rnd.random()
        if r < 0.002:
            s = s.replace(" 0, 5, 16", " [GPU requires reset], 5, 16")
        elif r < 0.004:
            s = s.replace("Not Active", "Active", 2)
        elif r < 0.006:
            s = mutated(rnd, s, "0123456789 ,[]ERR!x", 3, 4)
        odd.append(s)
    _both(nvidia_smi_csv, odd, monkeypatch)


_ODD_CELLS = ["[N/A]", "", " ", "[Not Supported]", "[GPU requires reset]", "99999999999 %", "2**70", "-5 %", "\u0669\u0668 %", "98  %", " 98 % ", "0x", "1e3 W", "Active", "nan", "ERR!"]


def test_csv_odd_cells_and_many_distinct_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns whose first rows repeat their cells (converted per distinct cell) holding odd cells (states, empty,
    huge numbers, other digits, spaces), and one whose later rows bring more than `_ENUM_MAX` distinct cells."""
    rnd = random.Random(11)
    head = "timestamp, index, pci.bus_id, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], clocks_event_reasons.hw_slowdown, ecc.errors.uncorrected.volatile.total, pcie.link.gen.current, pcie.link.width.current"
    rows = [head]
    for i in range(14000):
        g = i % 8
        used = f"{70000 + (i // 8) % 3} MiB" if i < 6000 else f"{rnd.randint(0, 10**6)} MiB"
        cells = [f"2026/11/28 00:{i // 480 % 60:02d}:{i // 8 % 60:02d}.00{g}", str(g), f"00000000:{g + 16:02X}:00.0", f"{rnd.choice([97, 98, 99])} %", used, str(40 + g), f"{600 + g}.00 W", rnd.choice(["Active", "Not Active"]), str(i // 3000), "5", "16"]
        if rnd.random() < 0.01:
            k = rnd.choice([1, 3, 4, 5, 6, 7, 8])
            cells[k] = rnd.choice(_ODD_CELLS)
        rows.append(", ".join(cells))
    _both(nvidia_smi_csv, rows, monkeypatch)
    assert nvidia_smi_csv._ENUM_MAX < 8000


@pytest.mark.parametrize("module", [nvidia_smi_dmon, nvidia_smi_csv])
def test_fixtures_same_as_reference(module, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = "nvidia-smi-dmon" if module is nvidia_smi_dmon else "nvidia-smi-csv"
    for _name, lines in fixture_lines(folder):
        _both(module, lines, monkeypatch)


@pytest.mark.parametrize("module", [nvidia_smi_dmon, nvidia_smi_csv])
def test_parse_many_same_as_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module) -> None:
    """Batches of small files cut from a loop (`transition_events_many`)."""
    rnd = random.Random(5)
    if module is nvidia_smi_dmon:  # (random counters: events in most files)
        lines = _dmon_odd(_smi9_loop(4000, 5), rnd, 0.01)
    else:
        lines = [s.replace(", 0, 5, 16", f", {rnd.randint(0, 2)}, 5, 16") for s in _loop(tmp_path, "csv", 0.3, 5)]
    items = []
    at = 0
    while at < len(lines) and len(items) < 12:
        size = rnd.randint(20, 600)
        items.append((pl.Series("line", lines[at : at + size], dtype=pl.String), FileContext(path=f"n{len(items)}/f.log", node=f"n{len(items) % 3}")))
        at += size
    new = module.parse_many(items)
    with monkeypatch.context() as m:
        m.setattr(F, "_transitions", R._transitions)
        m.setattr(F, "transition_events", R.transition_events)
        m.setattr(nvidia_smi_csv, "_distinct_values", uncoded(R._distinct_values))
        m.setattr(base, "_fastscan", None)
        old = module.parse_many(items)
    for a, b in zip(old, new, strict=True):
        _same(a, b)
    assert sum(r.tables["events"].height for r in new) > 0
