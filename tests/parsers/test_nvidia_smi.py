"""Focused tests of the nvidia-smi parsers (-q text, -q -x XML, --query-gpu CSV, dmon, table, topo/nvlink).

Exact values are checked against the fixture lines by hand; identities must come out exactly as printed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import (
    _nvsmi_fields,
    nvidia_smi,
    nvidia_smi_csv,
    nvidia_smi_dmon,
    nvidia_smi_table,
    nvidia_smi_topo,
    nvidia_smi_xml,
    registry,
)
from parsers.base import HARNESS_LINE, FileContext, ParseResult, check_accounting, lines_from_bytes
from tests.conftest import assert_same_result

FIX = Path(__file__).parent.parent / "fixtures"


def run(module, rel: str, node: str = "n1") -> ParseResult:
    path = FIX / rel
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    res = module.parse(lines, FileContext(path=rel, node=node))
    assert check_accounting(res, lines)
    return res


def inv_value(res: ParseResult, attr: str, gpu_index: int | None = None) -> list[str]:
    inv = res.tables["inventory"].filter(pl.col("attribute") == attr)
    if gpu_index is not None:
        inv = inv.filter(pl.col("gpu_index") == gpu_index)
    return inv.get_column("value").to_list()


# ----------------------------------------------------------------------------- -q text


def test_q_identities_verbatim_and_bus_normalised() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_h100_535_hw_power_brake_active.txt")
    assert inv_value(res, "serial", 0) == ["1655022005478"]
    assert inv_value(res, "uuid", 0) == ["GPU-566e6f65-c38e-b12f-4824-6944218668b9"]
    assert inv_value(res, "bus_id", 0) == ["00000000:53:00.0"]
    assert inv_value(res, "vbios", 2) == ["96.00.74.00.01"]
    assert inv_value(res, "board_part_number", 1) == ["692-2G520-0200-000"]
    assert inv_value(res, "module_id", 0) == ["7"]
    assert inv_value(res, "inforom_image", 0) == ["G520.0200.00.05"]
    assert inv_value(res, "driver_version") == ["535.183.01"]
    assert inv_value(res, "cuda_version") == ["12.2"]
    gpu_rows = res.tables["inventory"].filter(pl.col("component") == "gpu")
    assert gpu_rows.get_column("gpu_index").null_count() == 0
    assert gpu_rows.get_column("gpu_bus_id").null_count() == 0
    assert sorted(gpu_rows.get_column("gpu_bus_id").unique().to_list()) == ["0000:53:00.0", "0000:64:00.0", "0000:75:00.0"]


def test_q_sample_values_and_throttle_columns() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_h100_535_hw_power_brake_active.txt")
    s = res.tables["gpu_samples"].sort("gpu_index")
    assert s.height == 3
    row = s.row(2, named=True)
    assert row["gpu_bus_id"] == "0000:75:00.0"
    assert row["ts"] == datetime(2024, 6, 21, 2, 3, 8, tzinfo=UTC)
    assert row["ts_quality"] == "local_assumed_utc"
    assert row["throttle_sw_power_cap"] is True
    assert row["throttle_hw_power_brake_slowdown"] is True
    assert row["throttle_sw_thermal_slowdown"] is True
    assert row["throttle_gpu_idle"] is False
    assert row["throttle_hw_slowdown"] is False
    assert row["power_w"] == pytest.approx(118.01)
    assert row["memory_used_mib"] == 9221.0
    assert row["sm_clock_mhz"] == 1980.0
    first = s.row(0, named=True)
    assert (first["temperature_c"], first["mem_temperature_c"], first["power_limit_w"]) == (36.0, 44.0, 700.0)
    assert (first["pcie_gen"], first["pcie_gen_max"], first["pcie_width"], first["pcie_width_max"]) == (5, 5, 16, 16)
    assert (first["remap_pending"], first["remap_failure"], first["remapped_rows_uncorrectable"]) == (False, False, 0)
    ev = res.tables["events"]
    assert ev.select("gpu_index", "kind", "code", "line").rows() == [(2, "thermal", "hw_power_brake_slowdown", 501)]


def test_q_old_keys_two_dumps_faults() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_a100_470_two_dumps_remap_pending_x8_link.txt")
    s = res.tables["gpu_samples"]
    assert s.height == 4
    assert sorted(set(s.get_column("ts").to_list())) == [
        datetime(2023, 11, 14, 13, 34, 16, tzinfo=UTC),
        datetime(2023, 11, 14, 13, 39, 16, tzinfo=UTC),
    ]
    late = s.filter((pl.col("gpu_index") == 1) & (pl.col("ts").dt.minute() == 39)).row(0, named=True)
    assert late["ecc_uncorrected_volatile"] == 1 and late["ecc_corrected_volatile"] == 3
    assert late["ecc_corrected_aggregate"] == 17
    assert late["remap_pending"] is True and late["throttle_hw_thermal_slowdown"] is True
    assert late["temperature_c"] is None  # 'Unknown Error'
    assert late["power_limit_w"] == 400.0  # 'Enforced Power Limit' of the old layout
    kinds = res.tables["events"].select("kind", "code").rows()
    assert kinds.count(("pcie_link_degraded", "width")) == 2
    for k in (("ecc_uncorrectable", "volatile"), ("row_remap_pending", None), ("thermal", "hw_thermal_slowdown"), ("gpu_error", "Unknown Error")):
        assert k in kinds
    # inventory is not repeated for the second identical dump
    assert inv_value(res, "serial", 1) == ["1564720013752"]


def test_q_idle_gen1_is_not_a_fault() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_rtx4090_535_idle_pcie_gen1.txt")
    s = res.tables["gpu_samples"].row(0, named=True)
    assert (s["pcie_gen"], s["pcie_gen_max"], s["utilization_pct"]) == (1, 4, 0.0)
    assert res.tables["events"].height == 0


def test_q_volta_per_structure_ecc_and_retired_pages() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_titanv_560_volta_per_structure_ecc.txt")
    s = res.tables["gpu_samples"].row(0, named=True)
    assert s["ecc_corrected_volatile"] is None  # 'Total : N/A'
    assert s["retired_pages_sbe"] is None and s["remapped_rows_correctable"] is None
    assert (s["temperature_c"], s["mem_temperature_c"]) == (44.0, 41.0)
    assert inv_value(res, "serial") == ["0334517001520"]


def test_q_partial_dumps_and_truncation() -> None:
    cut = run(nvidia_smi, "nvidia-smi/q_h100_535_truncated_first_gpu.txt")
    assert cut.partial and cut.tables["gpu_samples"].height == 1
    cut3 = run(nvidia_smi, "nvidia-smi/q_h100_535_cut_inside_third_gpu.txt")
    assert cut3.partial and cut3.tables["gpu_samples"].height == 3
    whole = run(nvidia_smi, "nvidia-smi/q_h100_535_hw_power_brake_active.txt")
    assert not whole.partial
    d = run(nvidia_smi, "nvidia-smi/q_d_ecc_performance_550_crlf_partial_sections.txt")
    assert not d.partial
    row = d.tables["gpu_samples"].row(0, named=True)
    # SRAM Correctable 2 + DRAM Correctable 5; SEC-DED 1 + parity 0 + DRAM 0
    assert (row["ecc_corrected_volatile"], row["ecc_uncorrected_volatile"]) == (7, 1)
    assert inv_value(d, "bus_id") == ["00000000:1B:00.0"]


# ----------------------------------------------------------------------------- XML


def test_xml_v11_and_v12() -> None:
    old = run(nvidia_smi_xml, "nvidia-smi-xml/qx_a100_510_v11_mig_throttle_tags.xml")
    assert inv_value(old, "serial") == ["1324321002473"]
    assert inv_value(old, "bus_id") == ["00000000:00:04.0"]
    assert inv_value(old, "mig_mode") == ["Enabled"]
    s = old.tables["gpu_samples"].row(0, named=True)
    assert s["gpu_bus_id"] == "0000:00:04.0" and s["throttle_hw_slowdown"] is False
    assert s["power_w"] == pytest.approx(66.92) and s["utilization_pct"] is None
    new = run(nvidia_smi_xml, "nvidia-smi-xml/qx_h100_535_v12_event_reasons_remap_pending.xml")
    g1 = new.tables["gpu_samples"].filter(pl.col("gpu_index") == 1).row(0, named=True)
    assert (g1["ecc_uncorrected_volatile"], g1["ecc_corrected_volatile"], g1["remap_pending"]) == (2, 12, True)
    assert g1["throttle_hw_power_brake_slowdown"] is True
    kinds = sorted(new.tables["events"].get_column("kind").to_list())
    assert kinds == ["ecc_uncorrectable", "gpu_error", "row_remap_pending", "thermal"]
    p100 = run(nvidia_smi_xml, "nvidia-smi-xml/qx_p100_510_v11_tabs_single_double_bit.xml")
    assert p100.tables["gpu_samples"].row(0, named=True)["ecc_corrected_aggregate"] == 3


def test_xml_truncated_and_hostile() -> None:
    cut = run(nvidia_smi_xml, "nvidia-smi-xml/qx_p100_truncated_inside_ecc_errors.xml")
    assert cut.partial and inv_value(cut, "serial") == ["0324217145110"]
    evil = pl.Series(
        [
            '<?xml version="1.0"?>',
            '<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd"><!ENTITY a "aaaaaaaaaa">]>',
            "<nvidia_smi_log><driver_version>&x;&a;</driver_version></nvidia_smi_log>",
        ]
    )
    res = nvidia_smi_xml.parse(evil, FileContext(path="x.xml", node="n1"))
    assert check_accounting(res, evil)
    assert "root:" not in str(res.tables["inventory"].get_column("value").to_list())


# ----------------------------------------------------------------------------- CSV


def test_csv_loop_values_and_mask() -> None:
    res = run(nvidia_smi_csv, "nvidia-smi-csv/csv_loop_l1_index_busid_event_mask.csv")
    s = res.tables["gpu_samples"]
    assert s.height == 6
    r = s.filter(pl.col("line") == 6).row(0, named=True)
    assert r["ts"] == datetime(2023, 11, 14, 13, 34, 17, 148000, tzinfo=UTC)
    assert (r["gpu_index"], r["gpu_bus_id"], r["pcie_width"], r["ecc_uncorrected_volatile"]) == (1, "0000:2a:00.0", 8, 2)
    assert r["throttle_hw_power_brake_slowdown"] is True and r["throttle_hw_slowdown"] is True
    assert r["throttle_sw_power_cap"] is False
    assert inv_value(res, "bus_id", 1) == ["00000000:2A:00.0"]
    assert inv_value(res, "serial", 0) == ["1652923034561"]
    # onset only: GPU 1 stays degraded in the next sample, one event per fault
    assert res.tables["events"].group_by("kind").len().sort("kind").rows() == [
        ("ecc_uncorrectable", 1),
        ("pcie_link_degraded", 1),
        ("row_remap_pending", 1),
        ("thermal", 1),
    ]


def test_csv_repeated_headers_unknown_fields_and_na() -> None:
    res = run(nvidia_smi_csv, "nvidia-smi-csv/csv_repeated_headers_two_runs_reordered.csv")
    s = res.tables["gpu_samples"]
    assert s.height == 6 and res.unrecognized == 0
    assert s.filter(pl.col("line") == 7).row(0, named=True)["throttle_hw_thermal_slowdown"] is True
    assert '"encoder.stats.sessionCount":"0"' in s.filter(pl.col("line") == 7).row(0, named=True)["extra"]
    assert inv_value(res, "driver_version") == ["470.141.03"]
    na = run(nvidia_smi_csv, "nvidia-smi-csv/csv_na_not_supported_requires_reset.csv")
    assert na.unrecognized == 1  # the cut last row
    bad = na.tables["gpu_samples"].filter(pl.col("gpu_index") == 1).row(0, named=True)
    assert bad["power_w"] is None and bad["temperature_c"] is None
    assert na.tables["events"].select("gpu_index", "kind", "code").rows() == [(1, "gpu_error", "GPU requires reset")]
    nounits = run(nvidia_smi_csv, "nvidia-smi-csv/csv_nounits_p100_na_fan.csv")
    r = nounits.tables["gpu_samples"].row(0, named=True)
    assert (r["memory_used_mib"], r["power_w"], r["sm_clock_mhz"], r["gpu_index"]) == (0.0, 28.16, 405.0, 0)


def test_csv_without_header_is_unrecognized_with_note() -> None:
    res = run(nvidia_smi_csv, "nvidia-smi-csv/csv_noheader_field_list_unknown.csv")
    assert (res.parsed, res.unrecognized) == (0, 2)
    assert res.notes and "field list unknown" in res.notes[0]


# ----------------------------------------------------------------------------- dmon, table, topo


def test_dmon_columns() -> None:
    res = run(nvidia_smi_dmon, "nvidia-smi-dmon/dmon_o_dt_spu_repeated_header.txt")
    s = res.tables["gpu_samples"].sort("line")
    assert s.height == 4
    last = s.row(3, named=True)
    assert (last["gpu_index"], last["power_w"], last["mem_temperature_c"], last["utilization_pct"], last["sm_clock_mhz"]) == (1, 98.0, None, 0.0, 345.0)
    assert last["ts"] == datetime(2023, 11, 14, 13, 34, 17, tzinfo=UTC)


def test_table_rows_processes_and_err() -> None:
    res = run(nvidia_smi_table, "nvidia-smi-table/table_550_89col_h100x8_time_first_line.txt")
    s = res.tables["gpu_samples"].sort("gpu_index")
    assert s.height == 8
    assert s.row(2, named=True)["gpu_bus_id"] == "0000:4c:00.0"
    assert s.row(0, named=True)["ts"] == datetime(2025, 1, 20, 10, 18, 26, tzinfo=UTC)
    assert inv_value(res, "bus_id", 7) == ["00000000:DB:00.0"]
    legacy = run(nvidia_smi_table, "nvidia-smi-table/table_525_79col_err_fan_no_final_newline.txt")
    assert legacy.tables["events"].select("kind", "code").rows() == [("gpu_error", "ERR!")]
    assert inv_value(legacy, "name") == ["NVIDIA GeForce ..."]
    two = run(nvidia_smi_table, "nvidia-smi-table/table_535_processes_ecc_two_snapshots.txt")
    assert two.tables["events"].select("gpu_index", "kind", "line").rows() == [(1, "ecc_uncorrectable", 39)]
    assert '"pid":412734' in two.tables["gpu_samples"].filter(pl.col("gpu_index") == 1).get_column("extra")[0]


def test_topo_nic_affinity_and_nvlink() -> None:
    res = run(nvidia_smi_topo, "nvidia-smi-topo/topo_m_tabs_ansi_nic_legend.txt")
    assert inv_value(res, "nic_affinity", 2) == ["mlx5_0:SYS,mlx5_1:PIX"]
    assert inv_value(res, "nearest_nics", 0) == ["mlx5_0"]
    assert inv_value(res, "cpu_affinity", 3) == ["48-95"]
    nv = run(nvidia_smi_topo, "nvidia-smi-topo/nvlink_e_s_inactive_link_errors.txt")
    assert inv_value(nv, "uuid", 1) == ["GPU-a7605225-d684-1f65-4ad4-ee2ab39338b4"]
    assert inv_value(nv, "nvlink_inactive_links", 1) == ["3"]
    assert sorted(nv.tables["events"].get_column("kind").to_list()) == ["nvlink_errors"] * 3 + ["nvlink_inactive"]


# ----------------------------------------------------------------------------- detection and properties

DETECT_CASES = sorted(p for d in FIX.glob("nvidia-smi*") for p in d.iterdir() if not p.name.endswith(".expected.jsonl"))


@pytest.mark.parametrize("path", DETECT_CASES, ids=[p.name for p in DETECT_CASES])
def test_detected_without_name_bonus(path: Path) -> None:
    det = registry.detect(path.read_bytes()[:65536], "capture.out")
    assert det.parser is not None and det.parser.NAME == path.parent.name


MODULES = [nvidia_smi, nvidia_smi_xml, nvidia_smi_csv, nvidia_smi_dmon, nvidia_smi_table, nvidia_smi_topo]
LINE = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "==============NVSMI LOG==============",
            "GPU 00000000:53:00.0",
            "    Serial Number                         : 1655022005478",
            "    Clocks Event Reasons",
            "        HW Slowdown                       : Active",
            "Timestamp                                 : Fri Jun 21 02:03:08 2024",
            "<nvidia_smi_log>",
            '<gpu id="00000000:00:04.0">',
            "timestamp, index, pci.bus_id, utilization.gpu [%]",
            "2023/11/14 13:34:16.123, 0, 00000000:18:00.0, 98 %",
            "# gpu   pwr gtemp",
            "    0    88    45",
            "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |                    0 |",
            "\tGPU0\tGPU1\tNIC0",
            "GPU0\t X \tNV18\tPIX",
            "GPU 0: NVIDIA A100 (UUID: GPU-1)",
            "\t Link 0: <inactive>",
        ]
    ),
)


@pytest.mark.parametrize("module", MODULES, ids=[m.NAME for m in MODULES])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, max_size=25))
def test_parse_never_raises_and_accounts(module, lines: list[str]) -> None:
    series = pl.Series("line", [ln.replace("\n", " ").replace("\r", " ") for ln in lines], dtype=pl.String)
    res = module.parse(series, FileContext(path="f", node="n1", first_line=5))
    assert check_accounting(res, series)
    head = "\n".join(lines).encode()
    assert 0.0 <= module.sniff(head, "f") <= 1.0


def test_csv_pdsh_rows_take_their_host_as_node() -> None:
    res = run(nvidia_smi_csv, "nvidia-smi-csv/csv_pdsh_two_hosts_interleaved.csv", node="unknown")
    s = res.tables["gpu_samples"].sort("line")
    assert s.select("node", "gpu_index", "temperature_c").rows() == [
        ("gpu-node-01", 0, 63.0),
        ("gpu-node-02", 0, 88.0),
        ("gpu-node-01", 1, 66.0),
        ("gpu-node-02", 1, 64.0),
    ]
    inv = res.tables["inventory"].filter(pl.col("attribute") == "serial").sort("line")
    assert inv.select("node", "value").rows()[:2] == [("gpu-node-01", "1652923034561"), ("gpu-node-02", "1652923099001")]
    assert res.tables["events"].select("node", "gpu_index", "code").rows() == [("gpu-node-02", 0, "hw_slowdown")]


def test_failure_lines_are_events() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_d_memory_gpu_lost_device_handle_error.txt")
    ev = res.tables["events"].row(0, named=True)
    assert (ev["kind"], ev["code"], ev["gpu_bus_id"], ev["line"]) == ("gpu_error", "Unknown Error", "0000:3b:00.0", 2)
    assert ev["ts"] == datetime(2025, 3, 1, 4, 12, 55, tzinfo=UTC)
    lines = pl.Series(["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."])
    for module in (nvidia_smi, nvidia_smi_table, nvidia_smi_csv):
        r = module.parse(lines, FileContext(path="f", node="n1"))
        assert r.parsed == 1 and r.tables["events"].get_column("kind").to_list() == ["driver_error"]


def test_q_pdsh_hosts_split_and_named() -> None:
    res = run(nvidia_smi, "nvidia-smi/q_pdsh_two_hosts_interleaved_memory.txt", node="unknown")
    assert res.unrecognized == 0
    s = res.tables["gpu_samples"].sort("node")
    assert s.select("node", "gpu_bus_id", "memory_used_mib").rows() == [
        ("gpu-a01", "0000:1a:00.0", 71233.0),
        ("gpu-a02", "0000:1b:00.0", 80111.0),
    ]
    drivers = res.tables["inventory"].filter(pl.col("attribute") == "driver_version")
    assert sorted(drivers.get_column("node").to_list()) == ["gpu-a01", "gpu-a02"]


@pytest.mark.parametrize(
    ("module", "rel"),
    [
        (nvidia_smi_csv, "nvidia-smi-csv/csv_loop_l1_index_busid_event_mask.csv"),
        (nvidia_smi_csv, "nvidia-smi-csv/csv_pdsh_two_hosts_interleaved.csv"),
        (nvidia_smi_dmon, "nvidia-smi-dmon/dmon_o_dt_spu_repeated_header.txt"),
        (nvidia_smi_dmon, "nvidia-smi-dmon/dmon_default_no_time_ecc_pci.txt"),
    ],
)
def test_carry_lets_a_later_chunk_read_its_rows(module, rel: str) -> None:
    """Cut anywhere, the header lines `carry` returns for the first part make the second part parse as in
    the whole file (same samples; counts equal once the carried header lines are taken off)."""
    path = FIX / rel
    lines = lines_from_bytes(path.read_bytes())
    texts = ["" if re.match(HARNESS_LINE, t) else t for t in lines.to_list()]
    whole = module.parse(pl.Series(texts, dtype=pl.String), FileContext(path=rel, node="n1"))
    for k in range(1, len(texts)):
        head = pl.Series(texts[:k], dtype=pl.String)
        carried = module.carry(head)
        a = module.parse(head, FileContext(path=rel, node="n1"))
        b = module.parse(
            pl.Series([*carried, *texts[k:]], dtype=pl.String),
            FileContext(path=rel, node="n1", first_line=k + 1 - len(carried)),
        )
        both = pl.concat([a.tables["gpu_samples"], b.tables["gpu_samples"]])
        assert both.equals(whole.tables["gpu_samples"]), k
        assert a.parsed + b.parsed - len(carried) == whole.parsed, k
        assert a.unrecognized + b.unrecognized == whole.unrecognized, k


# ----------------------------------------------------------------------------- fast paths of long loops


def _loop_lines(tmp_path: Path, kind: str, mb: float, seed: int) -> pl.Series:
    from tests.conftest import load_script

    big_nvsmi = load_script("bench/big_nvsmi.py")
    path = tmp_path / f"{kind}.txt"
    big_nvsmi.write(path, mb, seed, kind)
    return lines_from_bytes(path.read_bytes())


@pytest.mark.parametrize("seed", [1, 2])
def test_csv_long_loop_per_distinct_cells_same_as_per_row(tmp_path: Path, monkeypatch, seed: int) -> None:
    """A long --query-gpu loop converts repetitive columns once per distinct cell, drops inventory rows
    repeating an earlier row before the unpivot and narrows the inventory join: same result as row by row."""
    lines = _loop_lines(tmp_path, "csv", 2.5, seed)
    ctx = FileContext(path="loop.csv", node="n1", first_line=7)
    fast = nvidia_smi_csv.parse(lines, ctx)
    assert fast.tables["gpu_samples"].height > nvidia_smi_csv._MANY
    monkeypatch.setattr(nvidia_smi_csv, "_MANY", 10**12)
    assert_same_result(fast, nvidia_smi_csv.parse(lines, ctx))


def test_q_loop_inventory_seen_same_as_frames_dedup(tmp_path: Path, monkeypatch) -> None:
    """-q dumps skip building inventory rows an earlier dump stated (snapshot_rows(seen=...)): same tables as
    building them all for frames() to drop; a second parse (lines classified from the process cache) too."""
    lines = _loop_lines(tmp_path, "q", 0.6, 3)
    ctx = FileContext(path="q.txt", node="n1")
    fast = nvidia_smi.parse(lines, ctx)
    assert_same_result(fast, nvidia_smi.parse(lines, ctx))
    rows = _nvsmi_fields.snapshot_rows

    def without_seen(*args, **kw):
        kw.pop("seen", None)
        return rows(*args, **kw)

    monkeypatch.setattr(_nvsmi_fields, "snapshot_rows", without_seen)
    assert_same_result(fast, nvidia_smi.parse(lines, ctx))


@pytest.mark.parametrize("module", [nvidia_smi, nvidia_smi_xml])
def test_parse_leaves_the_garbage_collector_as_it_was(module) -> None:
    """The Python walks pause the cyclic collector while they run: it is on again after, off if it was."""
    import gc

    lines = pl.Series(["==============NVSMI LOG==============", "", "<nvidia_smi_log>", "x : 1"])
    ctx = FileContext(path="f", node="n1")
    was = gc.isenabled()
    try:
        gc.enable()
        module.parse(lines, ctx)
        assert gc.isenabled()
        gc.disable()
        module.parse(lines, ctx)
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize(
    ("parser", "fixture", "pattern", "value"),
    [
        (nvidia_smi, "nvidia-smi/q_a100_470_two_dumps_remap_pending_x8_link.txt", r"(Current\s+: )4",
         "99999999999"),
        (nvidia_smi_xml, "nvidia-smi-xml/qx_a100_510_v11_mig_throttle_tags.xml",
         r"(<current_link_gen>)4", "99999999999"),
        (nvidia_smi_xml, "nvidia-smi-xml/qx_a100_510_v11_mig_throttle_tags.xml",
         r"(<sram_uncorrectable>)0", str(2**70)),
    ],
)
def test_a_number_its_column_cannot_hold_is_null_and_the_rest_is_kept(
    parser: object, fixture: str, pattern: str, value: str
) -> None:
    """A corrupt value (a PCIe generation of 99999999999, an ECC counter of 2**70) loses that value only: the
    file's other rows and values are those of the file without it (it made the whole file fail before)."""
    text = (FIX / fixture).read_text()
    bad = re.sub(pattern, r"\g<1>" + value, text, count=1)
    assert bad != text
    ctx = FileContext(path="n1/x", node="n1")
    good = parser.parse(lines_from_bytes(text.encode()), ctx)
    got = parser.parse(lines_from_bytes(bad.encode()), ctx)
    assert (got.parsed, got.unrecognized) == (good.parsed, good.unrecognized)
    for t, df in good.tables.items():
        other = got.tables[t]
        assert other.shape == df.shape, t
        changed = [c for c in df.columns if not other[c].equals(df[c], null_equal=True)]
        assert len(changed) <= 1, (t, changed)  # the corrupt value's column only, where the table holds it
        for c in changed:
            assert other[c].null_count() == df[c].null_count() + 1
    # and so in a batch of files (`parse_many`), the good file's rows untouched
    batch = parser.parse_many([(lines_from_bytes(text.encode()), ctx), (lines_from_bytes(bad.encode()), ctx)])
    assert_same_result(batch[0], good)
    assert_same_result(batch[1], got)
