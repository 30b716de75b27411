"""nvidia_smi_table._lane (polars over the column of lines, for long `nvidia-smi -l` loops) against the
Python walk `_parse` it stands in for (the reference: `parse` with the lane off): on loops generated from
every fixture with varying times (some invalid), values, error cells (`ERR!`, `[N/A]`, `Unknown Error`),
fans, ECC counts, process rows, MIG blocks, missing final newline, truncated last snapshots, pdsh/srun
prefixes, CRLF and random line mutations. Where the lane answers (not None) it must give the same result;
on the canonical loops it must answer."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import nvidia_smi_table as table
from parsers.base import FileContext, ParseResult, lines_from_bytes
from tests.conftest import FIXTURES, assert_same_result

NAMES = sorted(p.name for p in (FIXTURES / "nvidia-smi-table").iterdir() if not p.name.endswith(".jsonl"))
CANONICAL = [n for n in NAMES if "mig" not in n]  # (MIG device blocks: the lane declines)


def snapshots(name: str) -> list[list[str]]:
    """The fixture's snapshots, each from its border line (time lines dropped: the generator adds its own)."""
    lines = [
        ln for ln in (FIXTURES / "nvidia-smi-table" / name).read_text().splitlines() if not ln.startswith("#")
    ]
    out: list[list[str]] = []
    for i, ln in enumerate(lines):
        if "| NVIDIA-SMI" in ln:
            out.append([lines[i - 1], ln])
        elif out and not table._TIME.match(ln) and "| NVIDIA-SMI" not in (lines[i + 1 : i + 2] or [""])[0]:
            out[-1].append(ln)
    return out


TOKENS = (
    "ERR!",
    "[N/A]",
    "N/A",
    "Unknown Error",
    "0",
    "1",
    "2",
    "37C",
    "100C",
    "12%",
    "250W",
    "1MiB",
    "81559MiB",
    "P8",
    "On",
    "Off",
    "Default",
    "Disabled",
    "Enabled",
    "12.5",
    "-3",
    "+4",
    "007",
    "E. Process",
    "30%",
    "GPU is lost",
)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Foo")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "Jun", "Sep", "Dec", "Xyz")


def time_line(rng: random.Random) -> str:
    if rng.random() < 0.9:
        clock = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        day, year = rng.randint(1, 28), rng.randint(2019, 2026)
        return f"{rng.choice(WEEKDAYS[:7])} {rng.choice(MONTHS[:7])} {day:2d} {clock} {year}"
    day, hour = rng.choice([0, 1, 9, 29, 30, 31, 32, 99]), rng.choice([0, 23, 24, 99])
    minute, second = rng.choice([0, 59, 60, 61]), rng.choice([0, 59, 60, 61])
    year = rng.choice(["0000", "2024", "2023", "9999"])
    return f"{rng.choice(WEEKDAYS)} {rng.choice(MONTHS)} {day} {hour:02d}:{minute:02d}:{second:02d} {year}"


def mutate_cell_tokens(line: str, rng: random.Random) -> str:
    """One value of a GPU row replaced (the row's `|` and widths kept where possible)."""
    cells = line.split("|")
    if len(cells) < 5:
        return line
    k = rng.randint(1, 3)
    toks = list(re.finditer(r"\S+", cells[k]))
    if not toks:
        cells[k] = cells[k][:-6] + rng.choice(TOKENS).rjust(5) + " "
        return "|".join(cells)
    m = rng.choice(toks)
    cells[k] = cells[k][: m.start()] + rng.choice(TOKENS) + cells[k][m.end() :]
    return "|".join(cells)


def process_rows(width: int, gpus: list[int], rng: random.Random) -> list[str]:
    rows = []
    for _ in range(rng.randint(1, 4)):
        g = str(rng.choice(gpus)) if rng.random() < 0.9 else rng.choice(["N/A", "00", "17"])
        pid = str(rng.randint(1, 4_000_000)) if rng.random() < 0.9 else "000123"
        name = rng.choice(["/usr/bin/python3", "python", "torchrun --nproc 8 train.py", "Usage", "x  y"])
        mem = rng.choice([f"{rng.randint(1, 80000)}MiB", "N/A"])
        body = f"  {g:>4}   N/A  N/A {pid:>9}      {rng.choice('CG')}   {name}"
        rows.append("|" + body + " " * max(1, width - len(body) - len(mem) - 3) + mem + " |")
    return rows


def loop(name: str, rng: random.Random, n: int, mutate: float) -> list[str]:
    """`n` snapshots of the fixture's shapes, values varied (`mutate`: the chance of a changed value per GPU
    row)."""
    snaps = snapshots(name)
    out: list[str] = []
    for _ in range(n):
        snap = list(rng.choice(snaps))
        width = len(snap[0])
        if rng.random() < 0.3 and any("No running processes found" in ln for ln in snap):
            at = next(i for i, ln in enumerate(snap) if "No running processes found" in ln)
            gpus = [
                int(m.group(1)) for ln in snap if (m := re.match(r"\|\s+(\d+)\s+\S", ln)) and "NVIDIA" in ln
            ]
            snap[at : at + 1] = process_rows(width - 2, gpus or [0], rng)
        body = []
        for ln in snap:
            if (
                re.match(r"^\s*\|\s+(\d+|N/A|ERR!|\d+%)\s", ln)
                and ln.count("|") >= 4
                and rng.random() < mutate
            ):
                ln = mutate_cell_tokens(ln, rng)
            body.append(ln)
        if (
            mutate and rng.random() < 0.05 and len(body) > 8
        ):  # a GPU's third row dropped (pairs), or a row doubled
            del body[rng.randrange(6, len(body))]
        if rng.random() < 0.8:
            out.append(time_line(rng))
        out += body
        if rng.random() < 0.1:
            out.append("")
    return out


def damage(lines: list[str], rng: random.Random) -> list[str]:
    kind = rng.choice(["none", "none", "truncate", "prefix", "swap", "char", "failure", "blank_tail"])
    if kind == "truncate":
        return lines[: rng.randint(len(lines) // 2, len(lines))]
    if kind == "prefix":
        pre = rng.choice(["node-1: ", "gpu-node-003: ", "0: "])
        return [pre + ln for ln in lines]
    if kind == "swap" and len(lines) > 3:
        i = rng.randrange(len(lines) - 1)
        lines = list(lines)
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    if kind == "char" and lines:
        i = rng.randrange(len(lines))
        ln = lines[i]
        j = rng.randrange(len(ln) + 1)
        lines = list(lines)
        lines[i] = ln[:j] + rng.choice(["|", " ", "x", "+", "-", "\t", "é", '"', "9"]) + ln[j + 1 :]
    if kind == "failure":
        lines = list(lines)
        lines.insert(
            rng.randrange(len(lines) + 1),
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        )
    if kind == "blank_tail":
        lines = [*lines, "", "   "]
    return lines


def as_series(lines: list[str], rng: random.Random):  # noqa: ANN201
    """The lines as the ingest hands them over: through bytes (CRLF or LF, final newline or not)."""
    eol = "\r\n" if rng.random() < 0.2 else "\n"
    text = eol.join(lines) + (eol if rng.random() < 0.7 else "")
    return lines_from_bytes(text.encode())


def reference(lines, ctx: FileContext) -> ParseResult:  # noqa: ANN001
    saved = table.LANE_MIN_LINES
    table.LANE_MIN_LINES = 1 << 62
    try:
        return table.parse(lines, ctx)
    finally:
        table.LANE_MIN_LINES = saved


def compare(lines, first: int = 1) -> bool:  # noqa: ANN001
    ctx = FileContext(path="gpu-node-001/smi.log", node="gpu-node-001", first_line=first)
    got = table._lane(lines, ctx)
    if got is not None:
        assert_same_result(got, reference(lines, ctx))
    return got is not None


@pytest.mark.parametrize("name", CANONICAL)
def test_canonical_loops_take_the_lane(name: str) -> None:
    rng = random.Random(name)
    for n in (1, 3, 40):
        lines = loop(name, rng, n, 0.0)
        assert compare(lines_from_bytes(("\n".join(lines) + "\n").encode()), first=rng.randint(1, 10**6))


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_as_they_are(name: str) -> None:
    text = (FIXTURES / "nvidia-smi-table" / name).read_bytes()
    compare(lines_from_bytes(text))
    body = b"\n".join(ln for ln in text.split(b"\n") if not ln.startswith(b"#"))
    compare(lines_from_bytes(body))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    name=st.sampled_from(NAMES),
    n=st.integers(1, 12),
    mutate=st.sampled_from([0.0, 0.05, 0.3, 1.0]),
)
def test_random_loops_same_as_python(seed: int, name: str, n: int, mutate: float) -> None:
    rng = random.Random(seed)
    lines = damage(loop(name, rng, n, mutate), rng)
    compare(as_series(lines, rng), first=rng.choice([1, 2, 12345]))


def test_lane_answers_on_most_generated_loops() -> None:
    """Guard against a lane that declines everything: mutated values alone keep most loops in the lane."""
    rng = random.Random(7)
    taken = sum(compare(as_series(loop(rng.choice(CANONICAL), rng, 6, 0.05), rng)) for _ in range(60))
    assert taken >= 25


def test_parse_uses_the_lane_on_long_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    lines = as_series(loop(CANONICAL[-1], rng, 60, 0.0), rng)
    assert len(lines) >= table.LANE_MIN_LINES
    monkeypatch.setattr(table, "_parse", None)  # (the Python walk would fail)
    table.parse(lines, FileContext(path="a/smi.log", node="a"))
