"""Focused tests of the DCGM parser: dcgmi diag (text 3.x/4.x, JSON), health -c, discovery -l, hostengine log."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import dcgm, registry
from parsers.base import HARNESS_LINE, FileContext, ParseResult, check_accounting, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures" / "dcgm"


def run(name: str) -> ParseResult:
    lines = lines_from_bytes((FIX / name).read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    res = dcgm.parse(lines, FileContext(path=name, node="n1"))
    assert check_accounting(res, lines)
    return res


def test_diag_3x_fail_per_gpu_with_rejoined_warning() -> None:
    res = run("diag_r3_dcgm3_fail_gpu0_wrapped_warning.txt")
    ev = res.tables["events"].sort("line")
    assert ev.select("source", "kind", "code", "gpu_index", "severity", "line").rows() == [
        ("dcgm", "dcgm_diag", "PCIe", None, "medium", 21),
        ("dcgm", "dcgm_diag", "GPU Memory", 0, "high", 26),
    ]
    notes = json.loads(ev.row(1, named=True)["detail"])["notes"]
    assert notes == [
        "Warning: GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. "
        "Reset GPU. Restart DCGM. Rerun diagnostics."
    ]
    inv = dict(res.tables["inventory"].select("attribute", "value").rows())
    assert inv == {"dcgm_version": "3.3.5", "driver_version": "550.54.15", "gpu_device_ids": "20b5,20b5"}


def test_diag_4x_per_gpu_rows_only_failures_are_events() -> None:
    res = run("diag_r2_dcgm4_per_gpu_rows.txt")
    assert res.tables["events"].select("code", "gpu_index", "severity").rows() == [("memory", 2, "high")]


def test_diag_json() -> None:
    res = run("diag_r1_json_dcgm33.json")
    assert res.tables["events"].sort("gpu_index").select("code", "gpu_index", "severity").rows() == [
        ("Persistence Mode", 0, "medium"),
        ("Page Retirement/Row Remap", 1, "high"),
    ]
    assert res.tables["inventory"].select("attribute", "value").rows() == [("dcgm_version", "3.3.1")]
    cut = dcgm.parse(pl.Series(['{"DCGM GPU Diagnostic" : {"test_categories" : [']), FileContext(path="c", node="n1"))
    assert cut.partial


def test_health_incidents() -> None:
    res = run("health_c_pcie_warning_gpu0.txt")
    ev = res.tables["events"].sort("line")
    assert ev.select("kind", "code", "gpu_index", "severity").rows() == [
        ("dcgm_health", "PCIe system", 0, "medium"),
        ("dcgm_health", "Memory system", 2, "high"),
    ]
    assert json.loads(ev.row(0, named=True)["detail"])["text"] == "Detected more than 8 PCIe replays per minute for GPU 0 : 13"


def test_discovery_inventory_verbatim() -> None:
    res = run("discovery_l_h100_name_null_cut.txt")
    inv = res.tables["inventory"]
    g1 = dict(inv.filter(pl.col("gpu_index") == 1).select("attribute", "value").rows())
    assert g1 == {"name": "<<<NULL>>>", "bus_id": "00000000:5D:00.0", "uuid": "GPU-75c4ee16-a840-6f6c-9a7b-5ed8f41598b8"}
    assert inv.filter(pl.col("gpu_index") == 1).get_column("gpu_bus_id").unique().to_list() == ["0000:5d:00.0"]
    assert res.partial


def test_hostengine_errors() -> None:
    res = run("nv_hostengine_dcgm33_sysmon_errors_cut.log")
    ev = res.tables["events"]
    assert ev.height == 6 and set(ev.get_column("severity")) == {"low"}
    assert ev.row(2, named=True)["code"].endswith("DcgmHostEngineHandler.cpp:1831")


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.iterdir() if not p.name.endswith(".jsonl")))
def test_detected(name: str) -> None:
    det = registry.detect((FIX / name).read_bytes()[:65536], "capture.out")
    assert det.parser is not None and det.parser.NAME == "dcgm"


LINE = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "+---------------------------+------------------------------------------------+",
            "| Diagnostic                | Result                                         |",
            "|-----  Metadata  ----------+------------------------------------------------|",
            "| GPU Memory                | Fail - GPU: 0                                  |",
            "|                           | GPU0: Fail                                     |",
            "| Warning                   | GPU 0 Error                                    |",
            "| Health Monitor Report                                                      |",
            "| GPU ID: 0                 | Warning                                        |",
            '{"DCGM GPU Diagnostic" : {',
            "2024-02-01 14:12:01.205 ERROR [9596:9598] x",
        ]
    ),
)


@settings(max_examples=50, deadline=None)
@given(lines=st.lists(LINE, max_size=25))
def test_parse_never_raises_and_accounts(lines: list[str]) -> None:
    series = pl.Series("line", [ln.replace("\n", " ").replace("\r", " ") for ln in lines], dtype=pl.String)
    res = dcgm.parse(series, FileContext(path="f", node="n1", first_line=3))
    assert check_accounting(res, series)
    assert 0.0 <= dcgm.sniff("\n".join(lines).encode(), "f") <= 1.0
