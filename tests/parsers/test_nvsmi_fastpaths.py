"""The nvidia-smi family's fast paths agree with their general paths.

- dmon: a long chunk whose `extra` fields repeat captures each run of them as one cell and encodes the JSON
  once per distinct run text (`_layout`, `_extra_per_value`); the general path captures every field.
- --query-gpu CSV: a long group converts a seldom-changing column once per run of equal cells (rle) or per
  distinct cell; the general path converts every cell.
- topo/nvlink: each distinct line is classified once per process (`_classify` cache); a cold and a warm
  cache give the same result.
- sniffers: the literal pre-checks return 0 only where the full test would.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import (
    _nvsmi_fields,
    nvidia_smi,
    nvidia_smi_csv,
    nvidia_smi_dmon,
    nvidia_smi_table,
    nvidia_smi_topo,
)
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"


def _dmon_text(rng: random.Random) -> str:
    """About 10k lines of dmon output: a repetitive -s pucm -o DT selection with odd extra cells (escapes,
    '-', tabs, non-ASCII), a header naming a field twice, single extra fields, varying counters, bad rows."""
    out: list[str] = []
    odd = ["0", "0", "0", "-", '"q"', "\\", "é", "x\ty", "1", "0"]
    blocks = [
        (
            "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa"
            "   mclk   pclk",
            "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %"
            "    MHz    MHz",
            lambda: f" 20261128   00:00:{rng.randint(0, 59):02d}      {rng.randint(0, 7)}"
            f"    {rng.randint(50, 700)}"
            f"     {rng.randint(30, 90)}     {rng.choice(['-', '50'])}    {rng.randint(0, 100)}     37"
            f"      {rng.choice(odd)}      0      0      {rng.choice(['0', '-'])}   2619   1980",
            3000,
        ),
        (
            "# gpu   pwr enc enc  sm",
            "# Idx     W   %   %   %",
            lambda: f"    {rng.randint(0, 7)}   {rng.randint(50, 700)}   {rng.choice('01')}"
            f"   {rng.choice('02')}  7",
            200,
        ),
        (
            "# gpu   pwr  rxpci txpci  sm  enc",
            "# Idx     W   MB/s  MB/s   %    %",
            lambda: f"    {rng.randint(0, 7)}   {rng.randint(50, 700)}  {rng.randint(0, 99999)} "
            f"{rng.randint(0, 99999)}  {rng.randint(0, 100)}  0",
            1500,
        ),
    ]
    for _ in range(2):
        for head, units, row, n in blocks:
            out += [head, units, *(row() for _ in range(n))]
            out += ["garbage", "    1   100    40"]
    return "\n".join(out) + "\n"


def test_dmon_run_cells_agree_with_per_field_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = lines_from_bytes(_dmon_text(random.Random(3)).encode())
    ctx = FileContext(path="dmon.log", node="n1", first_line=5)
    fast = nvidia_smi_dmon.parse(lines, ctx)
    monkeypatch.setattr(nvidia_smi_dmon, "_MANY", 10**9)  # never the run layout
    general = nvidia_smi_dmon.parse(lines, ctx)
    assert_same_result(fast, general)
    assert fast.tables["gpu_samples"].height > 9000


def test_dmon_layout_groups_runs_of_extra_fields() -> None:
    fields = ("date", "time", "gpu", "pwr", "sm", "enc", "dec", "jpg", "mclk", "pviol")
    rx, runs = nvidia_smi_dmon._layout(fields)
    assert runs == (("r5", ("enc", "dec", "jpg")), ("f9", ("pviol",)))
    assert rx.count("(?P<") == 8
    assert nvidia_smi_dmon._layout(("gpu", "pwr", "enc", "sm")) is None  # no run of two
    assert nvidia_smi_dmon._layout(("gpu", "enc", "enc")) is None  # a repeated field


def _csv_text(rng: random.Random) -> str:
    head = (
        "timestamp, name, pci.bus_id, index, utilization.gpu [%], memory.used [MiB], power.draw [W], "
        "clocks.sm [MHz], clocks_event_reasons.active, clocks_event_reasons.hw_slowdown, "
        "pcie.link.gen.current, ecc.errors.uncorrected.volatile.total, fan.speed [%]"
    )
    out = [head]
    slow = 0
    for s in range(1400):
        for g in range(8):
            if rng.random() < 0.002:
                slow = 40
            slow = max(0, slow - 1)
            mask = "0x0000000000000088" if slow and g == 3 else "0x0000000000000000"
            out.append(
                f"2026/11/28 00:{s // 60 % 60:02d}:{s % 60:02d}.{g:03d}, NVIDIA H100 80GB HBM3,"
                f" 00000000:{g + 16:02X}:00.0,"
                f" {g}, {rng.choice(['97 %', '98 %', '[N/A]'])}, {rng.randint(70000, 71000)} MiB,"
                f" {rng.uniform(500, 700):.2f} W, {1980 if not slow else 1500} MHz, {mask},"
                f" {'Active' if slow and g == 3 else 'Not Active'}, {rng.choice(['5', '5', '5', '4'])},"
                f" {rng.choice(['0'] * 50 + ['1', '[Unknown Error]'])}, {rng.choice(['30 %', '31 %'])}"
            )
        if s == 700:
            out += ["garbage", head]
    return "\n".join(out) + "\n"


def test_csv_run_and_distinct_conversions_agree_with_per_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = lines_from_bytes(_csv_text(random.Random(5)).encode())
    ctx = FileContext(path="q.csv", node="n1")
    fast = nvidia_smi_csv.parse(lines, ctx)
    monkeypatch.setattr(nvidia_smi_csv, "_MANY", 10**9)  # every cell converted by itself
    general = nvidia_smi_csv.parse(lines, ctx)
    assert_same_result(fast, general)
    assert fast.tables["events"].height > 0


def test_topo_line_cache_cold_and_warm() -> None:
    for path in sorted((FIX / "nvidia-smi-topo").glob("*.txt")):
        lines = lines_from_bytes(path.read_bytes())
        ctx = FileContext(path=path.name, node="n1")
        nvidia_smi_topo._LINES.clear()
        cold = nvidia_smi_topo.parse(lines, ctx)
        warm = nvidia_smi_topo.parse(lines, ctx)
        assert_same_result(cold, warm)


@pytest.mark.parametrize(
    "module,bypass",
    [
        # A trailing line holding the literal the pre-check looks for, in a form no pattern can use
        # (comment lines are skipped, the patterns anchor elsewhere): the full test runs on every head.
        (nvidia_smi, b"\n#Driver Version"),
        (nvidia_smi_table, b"\n#NVIDIA-SMI"),
        (nvidia_smi_dmon, b"\nIdx gpu"),
        (nvidia_smi_csv, b"\n#,"),
        (nvidia_smi_topo, b"\n\x1b"),
    ],
)
def test_sniff_literal_checks_keep_the_scores(module, bypass: bytes) -> None:  # noqa: ANN001
    heads = [p.read_bytes()[:16384] for p in sorted(FIX.rglob("*")) if p.is_file()]
    for head in heads:
        for h in (head, head.replace(b"\n", b"\r\n"), head[: len(head) // 3]):
            assert module.sniff(h, "x.txt") == module.sniff(h + bypass, "x.txt")


def test_frames_conform_only_validates() -> None:
    # frames builds every column of the table from the rows: absent ones null, in the table's order.
    rows = [
        {"node": "n", "component": "gpu", "gpu_index": 0, "attribute": "a", "value": "v", "source": "s",
         "file": "f", "line": 1}
    ]
    inv = _nvsmi_fields.frames(rows, [], [])["inventory"]
    assert inv.height == 1 and inv.get_column("gpu_bus_id").null_count() == 1
    assert inv.get_column("device").dtype == pl.String
