"""The bug-report parser splits sections, routes them through the registry and keeps the report's line numbers."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import bug_report, registry
from parsers.base import HARNESS_LINE, FileContext, check_accounting, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures" / "bug-report" / "bug_report_560_titanv_xid79_sections.log"


def load() -> pl.Series:
    lines = lines_from_bytes(FIX.read_bytes())
    return pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()


def test_sections_merged_with_report_line_numbers() -> None:
    lines = load()
    texts = lines.to_list()
    res = bug_report.parse(lines, FileContext(path="nvidia-bug-report.log", node="unknown"))
    assert check_accounting(res, lines)
    assert res.node == "gpu-node-17"
    xid = res.tables["events"].filter(pl.col("kind") == "xid").row(0, named=True)
    assert "Xid (PCI:0000:01:00): 79" in texts[xid["line"] - 1]
    assert xid["message"] == texts[xid["line"] - 1]
    inv = res.tables["inventory"]
    serial = inv.filter(pl.col("attribute") == "serial").row(0, named=True)
    assert serial["value"] == "0334517001520" and "0334517001520" in texts[serial["line"] - 1]
    drivers = inv.filter((pl.col("component") == "node") & (pl.col("attribute") == "driver_version"))
    assert set(drivers.get_column("value")) == {"560.35.03"}
    # topo rows carry no bus id in their section; the report's own -q section supplies it
    topo = inv.filter(pl.col("source") == "nvidia-smi-topo")
    assert topo.height > 0 and topo.get_column("gpu_bus_id").unique().to_list() == ["0000:01:00.0"]
    s = res.tables["gpu_samples"]
    assert s.height == 1 and s.row(0, named=True)["gpu_bus_id"] == "0000:01:00.0"
    assert res.unrecognized == 3 and any("lspci" in n for n in res.notes)


def test_detected() -> None:
    det = registry.detect(FIX.read_bytes()[:65536], "nvidia-bug-report.log")
    assert det.parser is bug_report


@settings(max_examples=30, deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            st.text(max_size=40),
            st.sampled_from(
                [
                    "____________________________________________",
                    "*** /proc/driver/nvidia/version",
                    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  560.35.03  Fri Aug 16 21:39:15 UTC 2024",
                    "==============NVSMI LOG==============",
                    "GPU 00000000:01:00.0",
                    "[ 5301.882100] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                    "uname: Linux h 6.8.0 #1 SMP x86_64",
                    "Start of NVIDIA bug report log file.",
                ]
            ),
        ),
        max_size=30,
    )
)
def test_parse_never_raises_and_accounts(lines: list[str]) -> None:
    series = pl.Series("line", [ln.replace("\n", " ").replace("\r", " ") for ln in lines], dtype=pl.String)
    res = bug_report.parse(series, FileContext(path="f", node="n1", first_line=1))
    assert check_accounting(res, series)
