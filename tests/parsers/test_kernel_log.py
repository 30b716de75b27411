"""Focused tests of the kernel-log parser: one per timestamp style, per event family, year inference, damage."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.schema import conform
from parsers import kernel_log
from parsers.base import FileContext, ParseResult, check_accounting, lines_from_bytes

REAL = Path("/work/shared/real-logs")
FIXTURES = Path(__file__).parent.parent / "fixtures" / "kernel-log"


def parse(text: str, *, node: str = "n1", year: int | None = 2025, collected: datetime | None = None) -> ParseResult:
    lines = lines_from_bytes(text.encode())
    result = kernel_log.parse(lines, FileContext(path="x/dmesg.log", node=node, year_hint=year, collected_at=collected))
    assert check_accounting(result, lines)
    return result


def events(text: str, **kw: object) -> pl.DataFrame:
    return conform(parse(text, **kw).tables["events"], "events")  # type: ignore[arg-type]


def one(text: str, **kw: object) -> dict:
    ev = events(text, **kw)
    assert ev.height == 1, ev
    row = ev.row(0, named=True)
    row["detail"] = json.loads(row["detail"])
    return row


def fixture(name: str) -> str:
    """A fixture's text with its #SOURCE lines blanked (line numbers kept), as the golden harness does."""
    text = (FIXTURES / name).read_text()
    return "\n".join("" if ln.startswith("#SOURCE:") else ln for ln in text.split("\n"))


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


XID79 = "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."

# ----------------------------------------------------------------------------- timestamp styles


def test_k1_raw_monotonic_is_unanchored() -> None:
    r = one(f"[ 5120.338220] {XID79}\n")
    assert r["ts"] is None and r["ts_quality"] == "unanchored" and r["uptime_s"] == pytest.approx(5120.33822)
    assert (r["code"], r["gpu_bus_id"], r["node"]) == ("79", "0000:18:00.0", "n1")


def test_k2_printk_caller_ids() -> None:
    r = one(f"[   12.345678][  T123] {XID79}\n")
    assert r["uptime_s"] == pytest.approx(12.345678) and r["code"] == "79"
    r = one(f"[   12.345678][    C3] {XID79}\n")
    assert r["uptime_s"] == pytest.approx(12.345678)


def test_k3_priority_prefix() -> None:
    r = one(f"<4>[    2.608284] {XID79}\n")
    assert r["uptime_s"] == pytest.approx(2.608284) and r["ts_quality"] == "unanchored"


def test_k4_kmsg_microseconds() -> None:
    r = one(f"4,3964,206764307,-;{XID79}\n")
    assert r["uptime_s"] == pytest.approx(206.764307)


def test_k4_kmsg_repeated_record_counted_once() -> None:
    ev = events(f"4,10,1000,-;{XID79}\n4,10,1000,-;{XID79}\n4,11,2000,-;{XID79}\n")
    assert ev.get_column("line").to_list() == [1, 3]


def test_k5_ctime_local_assumed_utc() -> None:
    r = one(f"[Sun Feb  2 16:24:18 2025] {XID79}\n")
    assert r["ts"] == utc(2025, 2, 2, 16, 24, 18) and r["ts_quality"] == "local_assumed_utc"


def test_k6_iso_comma_fraction() -> None:
    r = one(f"2024-11-15T05:39:15,491363+01:00 {XID79}\n")
    assert r["ts"] == utc(2024, 11, 15, 4, 39, 15, 491363) and r["ts_quality"] == "exact"


def test_k7_decode_iso() -> None:
    r = one(f"kern  :warn  : 2025-01-21T02:21:33,498559+00:00 {XID79}\n")
    assert r["ts"] == utc(2025, 1, 21, 2, 21, 33, 498559)


def test_k7_decode_raw_and_caller() -> None:
    r = one(f"kern  :warn  : [  100.250000] {XID79}\n")
    assert r["uptime_s"] == pytest.approx(100.25)


def test_k8_syslog_host_is_node() -> None:
    res = parse(f"Feb 14 05:03:41 gpu-17.cluster.local kernel: {XID79}\n")
    r = conform(res.tables["events"], "events").row(0, named=True)
    assert r["ts"] == utc(2025, 2, 14, 5, 3, 41) and r["ts_quality"] == "year_inferred"
    assert r["node"] == "gpu-17" and res.node == "gpu-17"


def test_k8_syslog_without_host_and_ip_host() -> None:
    r = one(f"Feb 14 05:03:41 kernel: {XID79}\n")
    assert r["node"] == "n1"
    r = one(f"Feb 14 05:03:41 10.1.2.3 kernel: {XID79}\n")
    assert r["node"] == "10.1.2.3"


@pytest.mark.parametrize(
    ("month", "num"), [("11月", 11), ("Mär", 3), ("фев", 2), ("jan.", 1), ("déc.", 12), ("Okt", 10), ("3월", 3)]
)
def test_k8a_localized_months(month: str, num: int) -> None:
    r = one(f"{month} 15 14:15:47 leon kernel: {XID79}\n")
    assert r["ts"] == utc(2025, num, 15, 14, 15, 47)


def test_k8a_unknown_month_keeps_row_with_null_time() -> None:
    r = one(f"Xyz 15 14:15:47 leon kernel: {XID79}\n")
    assert r["ts"] is None and r["ts_quality"] == "none"


def test_k8b_syslog_with_printk_time_gives_both_clocks_and_boot_time() -> None:
    res = parse(f"Mar  3 10:00:00 gpu-node-12 kernel: [ 1000.500000] {XID79}\n")
    r = conform(res.tables["events"], "events").row(0, named=True)
    assert r["ts"] == utc(2025, 3, 3, 10, 0, 0) and r["uptime_s"] == pytest.approx(1000.5)
    inv = conform(res.tables["inventory"], "inventory").filter(pl.col("attribute") == "boot_time")
    assert inv.get_column("value").to_list() == ["2025-03-03T09:43:19.500000+00:00"]


def test_k9_short_iso_offset_converted_to_utc() -> None:
    r = one(f"2025-01-02T15:20:12+0800 jmsph-a800 kernel: {XID79}\n")
    assert r["ts"] == utc(2025, 1, 2, 7, 20, 12) and r["node"] == "jmsph-a800"


def test_k10_rfc3339_precise() -> None:
    r = one(f"2025-01-17T17:10:43.123456-05:00 host1 kernel: {XID79}\n")
    assert r["ts"] == utc(2025, 1, 17, 22, 10, 43, 123456)


def test_k11_talos() -> None:
    r = one(f"node-9: kern: warning: [2025-01-01T00:00:00.123456789Z]: {XID79}\n")
    assert r["ts"] == utc(2025, 1, 1, 0, 0, 0, 123456) and r["node"] == "node-9"


def test_k12_bare_nvrm_line_inherits_previous_time() -> None:
    ev = events(f"[Sun Feb  2 16:24:18 2025] usb 1-1: new device\n{XID79}\n")
    r = ev.row(0, named=True)
    assert r["ts"] == utc(2025, 2, 2, 16, 24, 18) and r["ts_quality"] == "inherited" and r["line"] == 2


def test_rfc5424() -> None:
    r = one(f'<4>1 2025-03-03T10:00:00.123456+01:00 gpu-3.example kernel - - [meta sequenceId="4"] {XID79}\n')
    assert r["ts"] == utc(2025, 3, 3, 9, 0, 0, 123456) and r["node"] == "gpu-3"


def test_journal_short_precise_and_monotonic() -> None:
    r = one(f"Nov 28 23:59:59.912345 gpu-node-21 kernel: {XID79}\n")
    assert r["ts"] == utc(2025, 11, 28, 23, 59, 59) and r["node"] == "gpu-node-21"
    r = one(f"[ 1234.567890] gpu-node-21 kernel: {XID79}\n")
    assert r["uptime_s"] == pytest.approx(1234.56789) and r["node"] == "gpu-node-21"


def test_pdsh_prefix_names_the_node_per_line() -> None:
    ev = events(f"node-a01: [ 3301.000100] {XID79}\nnode-a02: [ 3302.0] {XID79}\n")
    assert ev.get_column("node").to_list() == ["node-a01", "node-a02"]


# ----------------------------------------------------------------------------- year inference


def test_year_rollover_within_file() -> None:
    text = f"Dec 31 23:59:58 h kernel: {XID79}\nJan  1 00:00:03 h kernel: {XID79}\n"
    ts = events(text, year=2025).get_column("ts").to_list()
    assert ts == [utc(2024, 12, 31, 23, 59, 58), utc(2025, 1, 1, 0, 0, 3)]


def test_month_after_collection_month_is_previous_year() -> None:
    ts = events(f"Dec 30 10:00:00 h kernel: {XID79}\n", year=None, collected=utc(2026, 1, 2)).get_column("ts")
    assert ts.to_list() == [utc(2025, 12, 30, 10, 0, 0)]
    ts = events(f"Jan  1 10:00:00 h kernel: {XID79}\n", year=None, collected=utc(2026, 1, 2)).get_column("ts")
    assert ts.to_list() == [utc(2026, 1, 1, 10, 0, 0)]


def test_no_year_known_leaves_time_null_with_note() -> None:
    res = parse(f"Dec 30 10:00:00 h kernel: {XID79}\n", year=None)
    r = conform(res.tables["events"], "events").row(0, named=True)
    assert r["ts"] is None and r["ts_quality"] == "none" and res.notes


# ----------------------------------------------------------------------------- NVIDIA events


@pytest.mark.parametrize(
    ("line", "code", "bus", "detail"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 31, Ch 00000010, engmask 00000101, intr 10000000", "31", "0000:3b:00.0", {"channel": "00000010"}),
        ("NVRM: Xid (PCI:0000:3b:00): 13, pid=4312, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Illegal", "13", "0000:3b:00.0", {"pid": "4312", "gpc": "1", "tpc": "2", "sm": "0"}),
        ("NVRM: Xid (PCI:0000:3b:00): 45, pid=4312, name=python, Ch 00000008 caused by previous Xid 31", "45", "0000:3b:00.0", {"process": "python", "caused_by_xid": "31"}),
        ("NVRM: Xid (PCI:0000:5e:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3(0x0, 0x0)", "74", "0000:5e:00.0", {"link": "3", "pid": "<unknown>"}),
        ("NVRM: Xid (PCI:0009:01:00): 43, pid=3188489, name=trigger_xid, channel 0x0b00000a", "43", "0009:01:00.0", {"channel": "0b00000a"}),
        ("NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000)", "149", "0018:01:00.0", {"unit": "NETIR_LINK_EVT", "nvlink_severity": "Fatal", "link": "08"}),
        ("NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1.", "48", "0000:19:00.0", {"phys_addr": "0x12bac1c3e0"}),
        ("NVRM: Xid (0000:01:00): 13, 0003 00000000 0000a097 00001b0c 00000000 00000000", "13", "0000:01:00.0", {}),
    ],
)
def test_xid_driver_variants(line: str, code: str, bus: str, detail: dict) -> None:
    r = one(f"[  1.0] {line}\n")
    assert (r["kind"], r["code"], r["gpu_bus_id"]) == ("xid", code, bus)
    for k, v in detail.items():
        assert r["detail"][k] == v


def test_xid_severity_from_catalog() -> None:
    assert one(f"[1.0] {XID79}\n")["severity"] == "critical"
    assert one("[1.0] NVRM: Xid (PCI:0000:38:00): 43, pid=2815167, name=pt_main_thread, Ch 00000008\n")["severity"] == "low"


def test_xid_154_recovery_action_one_line_and_split() -> None:
    r = one("[1.0] NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)\n")
    assert r["detail"]["recovery_action"] == "Node Reboot Required" and r["severity"] == "critical"
    text = (
        "[1.0] NVRM: Xid (PCI:0000:af:00): 154, pid='<unknown>', name=<unknown>, GPU recovery action changed from 0x0 (None) to\n"
        "      NVRM: 0x1 (GPU Reset Required)\n"
    )
    r = one(text)
    assert r["detail"]["recovery_action"] == "GPU Reset Required" and r["severity"] == "high"


def test_fallen_off_bus_three_wordings() -> None:
    ev = events(
        "[ 49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n"
        "[ 50.0] NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.\n"
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
    )
    assert ev.get_column("kind").unique().to_list() == ["gpu_fallen_off_bus"]
    assert ev.get_column("gpu_bus_id").to_list() == ["0000:01:00.0", "0000:18:00.0", "0000:b3:00.0"]
    assert ev.get_column("line").to_list() == [1, 2, 3]


def test_crash_dump_takes_bus_of_preceding_nvrm_line() -> None:
    ev = events(f"[1.0] {XID79}\n[2.0] NVRM: A GPU crash dump has been created. If possible, please run\n")
    r = ev.filter(pl.col("kind") == "gpu_crash_dump").row(0, named=True)
    assert r["gpu_bus_id"] == "0000:18:00.0" and r["severity"] == "high"


def test_init_failures() -> None:
    ev = events(
        "[21.0] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)\n"
        "[21.1] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0\n"
        "[21.2] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
    )
    assert ev.get_column("code").to_list() == ["rm_init_adapter_failed", "probe_failed"]
    assert ev.get_column("gpu_bus_id").to_list() == ["0000:01:00.0", None]


def test_identity_serial_driver_inventory() -> None:
    res = parse(
        "[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d\n"
        "[Sun Feb 23 16:24:18 2025] NVRM: GPU Board Serial Number: 1650124014249\n"
        "[Sun Feb 23 16:24:19 2025] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build\n"
    )
    inv = conform(res.tables["inventory"], "inventory")
    got = {(r["component"], r["gpu_bus_id"], r["attribute"]): r["value"] for r in inv.iter_rows(named=True)}
    assert got == {
        ("gpu", "0000:9b:00.0", "uuid"): "GPU-509665ad-b600-ac93-3616-d754b23d636d",
        ("gpu", "0000:9b:00.0", "serial"): "1650124014249",
        ("node", None, "driver_version"): "570.158.01",
    }
    assert set(inv.get_column("source")) == {"kernel"}


def test_sxid_with_continuation_lines() -> None:
    ev = events(
        "[5120.412000] nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 12 LTSSM Fault Up\n"
        "[5120.412003] nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 20034, Severity 1 Engine instance 12 Sub-engine instance 00\n"
        "[5120.412005] nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 20034, Data {0x00000000, 0x00000080}\n"
        "[5120.412100] nvidia-nvswitch3: SXid (PCI:0000:87:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)\n"
    )
    assert ev.get_column("code").to_list() == ["20034", "12028"]
    assert ev.get_column("severity").to_list() == ["critical", "medium"]
    d = json.loads(ev.item(0, "detail"))
    assert d["link"] == "12" and d["switch"] == "2" and "Engine instance 12" in d["continuation"]
    assert ev.item(0, "gpu_bus_id") == "0000:86:00.0"


# ----------------------------------------------------------------------------- PCIe AER


def test_aer_old_kernel_id_decoding_one_event_per_block() -> None:
    res = parse(fixture("aer_kernel_4x_id_format_dmesg_raw.log"))
    ev = conform(res.tables["events"], "events")
    assert ev.get_column("kind").to_list() == ["pcie_aer", "pcie_aer"]
    assert ev.get_column("gpu_bus_id").to_list() == ["0000:00:03.0", "0000:3b:00.0"]
    assert ev.get_column("code").to_list() == ["corrected", "nonfatal"]
    d = json.loads(ev.item(1, "detail"))
    assert d["reporting_port"] == "0000:3a:00.0" and d["first_bit"] == "Completion Timeout" and d["multiple"] is True
    assert res.unrecognized == 0


def test_aer_5x_fatal_with_tlp_and_recovery() -> None:
    ev = events(fixture("aer_kernel_5x_received_bdf_dmesg_ctime.log"))
    aer = ev.filter(pl.col("kind") == "pcie_aer")
    assert aer.get_column("code").to_list() == ["corrected", "fatal"]
    assert aer.get_column("severity").to_list() == ["low", "critical"]
    d = json.loads(aer.item(1, "detail"))
    assert d["bits"] == "MalfTLP" and d["tlp_header"].startswith("4a000001") and d["recovery"] == "Root Port link has been reset"
    assert aer.item(1, "ts") == utc(2025, 3, 4, 10, 11, 14)


def test_aer_6x_blocks_survive_interleaved_lines() -> None:
    ev = events(fixture("aer_kernel_6x_message_received_journal_short_iso.log"))
    aer = ev.filter(pl.col("kind") == "pcie_aer")
    assert aer.get_column("line").to_list() == [2, 6, 12]
    assert json.loads(aer.item(1, "detail"))["bits"] == "BadTLP,BadDLLP"
    assert set(aer.get_column("gpu_bus_id")) == {"0000:18:00.0"} and set(aer.get_column("node")) == {"gpu-node-07"}
    deg = ev.filter(pl.col("kind") == "pcie_link_degraded")
    assert deg.get_column("code").to_list() == ["bandwidth_limited", "link_down"]
    assert json.loads(deg.item(0, "detail"))["limited_at"] == "0000:17:01.0"


def test_aer_firmware_first_merged_with_apei_block() -> None:
    ev = events(fixture("aer_firmware_first_apei_dmesg_raw.log"))
    assert ev.select("line", "kind", "code", "gpu_bus_id").rows() == [
        (2, "pcie_aer", "corrected", "0000:b1:00.0"),
        (18, "edac", "recoverable", None),
    ]


# ----------------------------------------------------------------------------- NIC, host


def test_nic_and_ib_events() -> None:
    ev = events(
        "[1.0] mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN\n"
        "[2.0] mlx5_core 0000:01:00.0 enp1s0f0: Link up\n"
        "[3.0] mlx5_core 0000:41:00.1: Port module event: module 1, Cable unplugged\n"
        "[4.0] mlx5_core 0000:41:00.1: Port module event[error]: module 1, Cable error, High Temperature\n"
        "[5.0] ib0: carrier lost\n"
        "[6.0] ice 0000:3b:00.0 ens1f0: NIC Link is Down\n"
        "[7.0] mlx5_core 0000:c1:00.0: mlx5_port_module_event:1089:(pid 0): Port module event: module 0, Cable plugged\n"
    )
    assert ev.select("kind", "code", "severity", "gpu_bus_id").rows() == [
        ("nic_link", "down", "high", "0000:ab:00.0"),
        ("nic_link", "up", "info", "0000:01:00.0"),
        ("nic_module", "unplugged", "high", "0000:41:00.1"),
        ("nic_module", "error", "high", "0000:41:00.1"),
        ("ib_carrier", "lost", "high", None),
        ("nic_link", "down", "high", "0000:3b:00.0"),
        ("nic_module", "plugged", "info", "0000:c1:00.0"),
    ]


def test_host_event_families() -> None:
    ev = events(fixture("syslog_embedded_printk_time_host_events.log"))
    kinds = ev.get_column("kind").to_list()
    for k in ("thermal", "mce", "edac", "oom", "hung_task", "segfault", "soft_lockup", "kernel_panic", "ib_carrier"):
        assert k in kinds
    oom = json.loads(ev.filter(pl.col("kind") == "oom").item(0, "detail"))
    assert (oom["pid"], oom["process"]) == ("48211", "python3")
    seg = ev.filter(pl.col("kind") == "segfault")
    assert seg.get_column("severity").to_list() == ["high", "medium"]
    assert json.loads(seg.item(0, "detail"))["object"] == "libnccl.so.2"
    hung = json.loads(ev.filter(pl.col("kind") == "hung_task").item(0, "detail"))
    assert hung["seconds"] == "122" and hung["process"] == "pt_main_thread"


# ----------------------------------------------------------------------------- damage, sniff, properties


def test_garbage_and_truncated_lines_are_unrecognized() -> None:
    text = f"[1.0] {XID79}\nthis is not kernel\n[2.0] usb 1-1: x\n[  100.5000"
    res = parse(text)
    assert (res.parsed, res.unrecognized, res.partial) == (2, 2, True)
    assert [n for n, _ in res.unrecognized_examples] == [2, 4]


def test_pstore_rows_flagged_as_crash_record() -> None:
    ev = events(fixture("pstore_erst_prio_prefix_panic_mlx5_x8.txt"))
    panic = ev.filter(pl.col("kind") == "kernel_panic").row(0, named=True)
    assert json.loads(panic["detail"])["crash_record"] is True and panic["uptime_s"] == pytest.approx(3098.275469)


@pytest.mark.parametrize("path", sorted((REAL / "hw").glob("*")), ids=lambda p: p.name)
def test_sniff_real_samples(path: Path) -> None:
    score = kernel_log.sniff(path.read_bytes()[:65536], path.name)
    kernelish = path.name.startswith(("dmesg", "journalctl", "kmsg", "pstore"))
    if kernelish:
        assert score >= 0.5
    elif not path.name.startswith(("fabricmanager", "nv_hostengine")):
        assert score == 0.0


@pytest.mark.parametrize("path", sorted((REAL / "nccl").glob("*")) + sorted((REAL / "steps").glob("*")), ids=lambda p: p.name)
def test_sniff_rejects_other_formats(path: Path) -> None:
    assert kernel_log.sniff(path.read_bytes()[:65536], path.name) == 0.0


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=80), st.sampled_from([f"[1.0] {XID79}", "[  100.5", "Dec 31 23:59:58 h kernel: x", "2025-01-01T00:00:00,1+00:00 NVRM: Xid (PCI:0000:3b:00): 13, x", "pcieport 0000:00:01.0: AER: Corrected error received: id=0018", "  [ 0] RxErr"])), max_size=20))
def test_parse_never_raises(lines: list[str]) -> None:
    text = "\n".join(lines)
    series = lines_from_bytes(text.encode("utf-8", "replace"))
    result = kernel_log.parse(series, FileContext(path="f", node="n", year_hint=2025))
    assert check_accounting(result, series)
    conform(result.tables["events"], "events")
    conform(result.tables["inventory"], "inventory")
    assert 0.0 <= kernel_log.sniff(text.encode("utf-8", "replace"), "f") <= 1.0


# ----------------------------------------------------------------------------- more journal shapes, colour


def test_journal_short_full_zone_words() -> None:
    assert one(f"Sun 2025-02-23 16:24:18 UTC gpu1 kernel: {XID79}\n")["ts_quality"] == "exact"
    r = one(f"Sun 2025-02-23 16:24:18 CET gpu1 kernel: {XID79}\n")
    assert r["ts"] == utc(2025, 2, 23, 16, 24, 18) and r["ts_quality"] == "local_assumed_utc"
    assert one(f"2025-02-23 16:24:18.5 +0100 gpu1 kernel: {XID79}\n")["ts"] == utc(2025, 2, 23, 15, 24, 18, 500000)


def test_journal_json_both_clocks() -> None:
    rec = {
        "__REALTIME_TIMESTAMP": "1740327858123456",
        "__MONOTONIC_TIMESTAMP": "5120338220",
        "_HOSTNAME": "gpu-7.cluster",
        "SYSLOG_IDENTIFIER": "kernel",
        "MESSAGE": XID79,
    }
    r = one(json.dumps(rec) + "\n")
    assert r["ts"] == utc(2025, 2, 23, 16, 24, 18, 123456) and r["uptime_s"] == pytest.approx(5120.33822)
    assert (r["node"], r["code"], r["ts_quality"]) == ("gpu-7", "79", "exact")


def test_ansi_colour_and_localized_ctime() -> None:
    r = one(f"\x1b[32m[  123.456789]\x1b[0m \x1b[33m{XID79}\x1b[0m\n")
    assert r["uptime_s"] == pytest.approx(123.456789) and r["code"] == "79"
    assert one(f"[So Mär  2 16:24:18 2025] {XID79}\n")["ts"] == utc(2025, 3, 2, 16, 24, 18)


def test_dmesg_delta_and_reltime_formats() -> None:
    r = one(f"[12345.678901 <    0.000123>] {XID79}\n")
    assert r["uptime_s"] == pytest.approx(12345.678901)
    ev = events(f"[Feb23 16:24] usb 1-1: reset\n[  +0.000015] {XID79}\n")
    r = ev.row(0, named=True)
    assert r["ts"] == utc(2025, 2, 23, 16, 24, 0) and r["ts_quality"] == "inherited"


def test_sxid_continuations_attach_to_their_own_record() -> None:
    # shape of a real 570.195 boot (NVIDIA/nvtrust#124): primary, Severity, Data per link, records back to back
    text = "".join(
        f"[38.1{i}0] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link {i} Minion Link DLREQ interrupt\n"
        f"[38.1{i}1] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance {i} Sub-engine instance 00\n"
        f"[38.1{i}2] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {{0x000000{i}}}\n"
        for i in (44, 45)
    )
    ev = events(text)
    assert ev.get_column("line").to_list() == [1, 4]
    details = [json.loads(d) for d in ev.get_column("detail")]
    assert [d["link"] for d in details] == ["44", "45"]
    assert details[0]["continuation"] == "Severity 0 Engine instance 44 Sub-engine instance 00 | Data {0x00000044}"


def test_proc_stat_and_timedatectl_give_boot_time_and_zone() -> None:
    inv = conform(parse("cpu  1 2 3 4\ncpu0 1 2 3 4\nbtime 1748851200\nprocesses 3\n").tables["inventory"], "inventory")
    assert inv.select("attribute", "value").rows() == [("boot_time", "2025-06-02T08:00:00+00:00")]
    text = "      Local time: Sun 2025-11-30 09:15:01 CET\n       Time zone: Europe/Berlin (CET, +0100)\n"
    assert kernel_log.sniff(text.encode(), "timedatectl") == 0.9
    inv = conform(parse(text).tables["inventory"], "inventory")
    assert inv.select("attribute", "value").rows() == [("timezone", "Europe/Berlin")]


def test_rtc_line_gives_the_boot_time_and_anchors_raw_dmesg() -> None:
    from forensics import timebase

    lines = pl.Series(
        [
            "[    1.500000] rtc_cmos 00:02: setting system clock to 2025-03-02T14:29:44 UTC (1740925784)",
            "[  100.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        ]
    )
    r = kernel_log.parse(lines, FileContext(path="n1/dmesg", node="n1"))
    inv = r.tables["inventory"].filter(pl.col("attribute") == "boot_time")
    assert inv["value"].to_list() == ["2025-03-02T14:29:42.500000+00:00"]
    tables, _ = timebase.anchor({"events": r.tables["events"], "inventory": r.tables["inventory"]})
    ev = tables["events"].row(0, named=True)
    assert ev["ts"] == datetime(2025, 3, 2, 14, 31, 22, 500000, tzinfo=UTC) and ev["ts_quality"] == "boot_anchored"
