"""Focused tests of the InfiniBand parser (and perftest): exact values from the fixtures, plus property tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.schema import conform
from parsers import infiniband, perftest
from parsers.base import HARNESS_LINE, FileContext, ParseResult, check_accounting, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures"


def run(module, folder: str, name: str, node: str = "node-x") -> ParseResult:  # noqa: ANN001
    lines = lines_from_bytes((FIX / folder / name).read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    result = module.parse(lines, FileContext(path=f"{folder}/{name}", node=node))
    assert check_accounting(result, lines)
    return result


def ib(name: str) -> ParseResult:
    return run(infiniband, "infiniband", name)


def inv(result: ParseResult) -> pl.DataFrame:
    return conform(result.tables["inventory"], "inventory")


def attr(result: ParseResult, device: str, attribute: str, port: int | None = 1) -> list[str]:
    df = inv(result).filter((pl.col("device") == device) & (pl.col("attribute") == attribute))
    df = df.filter(pl.col("port").is_null()) if port is None else df.filter(pl.col("port") == port)
    return df.get_column("value").to_list()


def counters(result: ParseResult) -> pl.DataFrame:
    return conform(result.tables["comms"], "comms").filter(pl.col("record") == "ib_counter")


def test_ibstat_ports_down_are_medium_events() -> None:
    r = ib("ibstat_h100_8x400g_some_down.txt")
    assert r.unrecognized == 0 and not r.partial
    assert attr(r, "mlx5_0", "fw_ver", None) == ["28.39.1002"]
    assert attr(r, "mlx5_0", "port_guid") == ["0x946dae0300cde72c"]
    assert attr(r, "mlx5_2", "state") == ["Down"] and attr(r, "mlx5_2", "phys_state") == ["Disabled"]
    assert attr(r, "mlx5_2", "rate") == ["40"] and attr(r, "mlx5_0", "rate") == ["400"]
    assert inv(r).filter(pl.col("attribute") == "state").height == 12
    ev = conform(r.tables["events"], "events")
    devs = [json.loads(d)["device"] for d in ev.get_column("detail")]
    assert sorted(devs) == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert set(ev.get_column("kind")) == {"ib_port_down"} and set(ev.get_column("severity")) == {"medium"}


def test_ibstat_polling_port() -> None:
    ev = conform(ib("ibstat_h100_8x400g_some_down_polling.txt").tables["events"], "events")
    details = {json.loads(d)["device"]: json.loads(d) for d in ev.get_column("detail")}
    assert details["mlx5_11"]["phys_state"] == "Polling" and details["mlx5_5"]["phys_state"] == "Disabled"


def test_ibpanic_marks_partial_and_names_device() -> None:
    r = ib("ibstat_a100_ibpanic_exit255.txt")
    assert r.partial
    ev = conform(r.tables["events"], "events")
    assert ev.get_column("kind").to_list() == ["ib_tool_error"]
    assert json.loads(ev.item(0, "detail"))["device"] == "mlx5_8"
    assert inv(r).filter(pl.col("attribute") == "state").height == 8


def test_ibstatus_normalised_like_ibstat() -> None:
    r = ib("ibstatus_a100_all_active.txt")
    assert attr(r, "mlx5_0", "state") == ["Active"] and attr(r, "mlx5_0", "phys_state") == ["LinkUp"]
    assert attr(r, "mlx5_0", "rate") == ["200"] and attr(r, "mlx5_0", "link_width_speed") == ["4X HDR"]
    assert attr(r, "mlx5_0", "base_lid") == ["13247"]  # 0x33bf, as ibstat prints it
    assert r.tables["events"].height == 0


def test_ibv_devinfo_port_down() -> None:
    r = ib("ibv_devinfo_v_dual_port_one_down_polling.txt")
    assert attr(r, "mlx5_0", "node_guid", None) == ["0x946dae0300cde72c"]
    assert attr(r, "mlx5_0", "board_id", None) == ["MT_0000000838"]
    assert attr(r, "mlx5_1", "state", 1) == ["Active"] and attr(r, "mlx5_1", "state", 2) == ["Down"]
    assert attr(r, "mlx5_0", "rate") == ["400"] and attr(r, "mlx5_1", "rate", 1) == ["100"]  # width x speed
    ev = conform(r.tables["events"], "events")
    assert ev.height == 1 and json.loads(ev.item(0, "detail"))["port"] == 2
    assert json.loads(ev.item(0, "detail"))["phys_state"] == "Polling"


def test_sysfs_counters_and_attributes() -> None:
    r = ib("sysfs_class_infiniband_h100_counters.txt")
    c = counters(r)
    one = c.filter((pl.col("device") == "mlx5_0") & (pl.col("counter") == "port_rcv_errors")).row(
        0, named=True
    )
    assert (one["port"], one["value"], one["ts"]) == (1, 14.0, None)
    assert (
        c.filter((pl.col("device") == "mlx5_0") & (pl.col("counter") == "port_xmit_wait")).item(0, "value")
        == 2489603687
    )
    assert c.filter(pl.col("counter") == "roce_adp_retrans").height >= 1
    assert attr(r, "mlx5_bond_0", "fw_ver", None) == ["32.38.3056"]
    assert attr(r, "mlx5_bond_0", "rate") == ["200"] and attr(r, "mlx5_bond_0", "link_width_speed") == [
        "2X NDR"
    ]


def test_sysfs_pdsh_readings_kept_apart_with_ts() -> None:
    r = ib("sysfs_echo_space_form_pdsh_two_readings.txt")
    c = (
        counters(r)
        .filter(
            (pl.col("node") == "gpu-02")
            & (pl.col("device") == "mlx5_1")
            & (pl.col("counter") == "symbol_error")
        )
        .sort("line")
    )
    assert c.get_column("value").to_list() == [12.0, 9012.0]
    assert c.get_column("ts").to_list() == [
        datetime(2025, 6, 14, 10, 0, tzinfo=UTC),
        datetime(2025, 6, 14, 10, 5, tzinfo=UTC),
    ]
    assert [json.loads(d)["reading"] for d in c.get_column("detail")] == [0, 1]
    ev = conform(r.tables["events"], "events")
    assert ev.select("node", "kind").rows() == [("gpu-02", "ib_port_down")]


def test_perfquery_classic_and_extended() -> None:
    r = ib("perfquery_classic_and_x_two_readings_dated.txt")
    c = counters(r)
    sym = c.filter(pl.col("counter") == "symbol_error").sort("line")
    assert sym.get_column("value").to_list() == [3.0, 1450.0]
    assert sym.get_column("device").unique().to_list() == ["mlx5_0"]
    assert sym.get_column("ts").dt.minute().to_list() == [0, 10]
    assert c.filter(pl.col("counter") == "port_xmit_data").item(0, "value") == 56832719360  # -x, 64 bit
    assert c.filter(pl.col("counter") == "port_xmit_data_32").height == 2  # classic, 32 bit
    assert c.filter(pl.col("counter").is_in(["PortSelect", "CounterSelect"])).height == 0
    assert r.partial  # ends with ibpanic


def test_mlxlink_ber_and_head_form() -> None:
    c = counters(ib("mlxlink_ber_counters_degraded.txt"))
    assert c.filter(pl.col("counter") == "raw_physical_ber").item(0, "value") == pytest.approx(1e-6)
    assert c.filter(pl.col("counter") == "link_downed").item(0, "device") == "mlx5_3"
    r = ib("head_sysfs_form_and_ibdev2netdev.txt")
    assert counters(r).filter(pl.col("device") == "mlx5_1").item(0, "value") == 65535
    assert attr(r, "mlx5_2", "netdev") == ["eth2"]


def test_truncated_ibstat_partial() -> None:
    r = ib("ibstat_a100_truncated_mid_port_crlf.txt")
    assert r.partial and r.unrecognized == 1
    assert attr(r, "mlx5_1", "state") == ["Active"]


def test_perftest_rows() -> None:
    r = run(perftest, "perftest", "ib_write_bw_a_and_lat_mb_units_dated.txt")
    c = conform(r.tables["comms"], "comms").sort("line")
    bw = c.filter(pl.col("size_bytes") == 65536).row(0, named=True)
    assert (bw["test"], bw["device"], bw["count"]) == ("ib_write_bw", "mlx5_2", 5000)
    assert bw["algbw_gbps"] == pytest.approx(23610.17 * 1048576 / 1e9)
    lat = c.filter(pl.col("test") == "ib_write_lat").row(0, named=True)
    assert lat["time_us"] == 1.07 and json.loads(lat["detail"])["p99"] == 1.24
    post = conform(run(perftest, "perftest", "ib_write_bw_post_list_result_row.txt").tables["comms"], "comms")
    assert post.item(0, "value") == pytest.approx(0.48) and post.item(0, "count") == 224958464
    assert run(perftest, "perftest", "ib_write_bw_roce_server_banner_gid.txt").partial


def test_sniffers() -> None:
    assert infiniband.sniff(b"hello world\n", "x") == 0.0
    assert perftest.sniff(b"hello world\n", "x") == 0.0
    assert infiniband.sniff((FIX / "infiniband" / "ibstatus_a100_all_active.txt").read_bytes(), "x") == 1.0


IB_LINES = [
    "CA 'mlx5_0'", "\tCA type: MT4129", "\tPort 1:", "\t\tState: Down", "\t\tPhysical state: Polling", "\t\tRate: 40",
    "Infiniband device 'mlx5_1' port 1 status:", "\tstate:\t 1: DOWN", "hca_id:\tmlx5_2", "\t\tport:\t1",
    "\t\t\tstate:\t\tPORT_INIT (2)", "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:7",
    "# Port counters: Lid 1 port 1 (CapMask: 0x5A00)", "SymbolErrorCounter:..............0x12",
    "ibpanic: [1] main: x", "Sat Jun 14 10:10:00 UTC 2025", "gpu-01: /sys/class/infiniband/m/ports/2/state 4: ACTIVE",
    "==> /sys/class/infiniband/mlx5_0/ports/1/counters/link_downed <==", "mlx5_0 port 1 ==> ib0 (Down)",
    "Physical Counters and BER Info", "Raw Physical BER                : 1E-06", "",
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]", " 8  10  1.0  2.0  3.0",
]  # fmt: skip


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(IB_LINES), st.text(max_size=80)), max_size=25))
def test_parse_never_raises_and_accounts_every_line(raw: list[str]) -> None:
    data = "\n".join(raw).encode("utf-8", "replace")
    lines = lines_from_bytes(data)
    for module in (infiniband, perftest):
        result = module.parse(lines, FileContext(path="p", node="n"))
        assert check_accounting(result, lines)
        for table, df in result.tables.items():
            conform(df, table)
        assert 0.0 <= module.sniff(data, "p") <= 1.0


def test_collector_prefix_and_pdsh_on_ibstat() -> None:
    text = "\n".join(
        [
            "2025-06-14T10:00:00.5Z node-07: CA 'mlx5_3'",
            "2025-06-14T10:00:00.5Z node-07: \tPort 1:",
            "2025-06-14T10:00:00.6Z node-07: \t\tState: Initializing",
            "2025-06-14T10:00:00.6Z node-07: \t\tPhysical state: LinkUp",
        ]
    )
    lines = lines_from_bytes(text.encode())
    r = infiniband.parse(lines, FileContext(path="x", node="unknown"))
    assert r.unrecognized == 0 and r.node == "node-07"
    ev = conform(r.tables["events"], "events").row(0, named=True)
    assert (ev["node"], ev["kind"], ev["code"], ev["ts_quality"]) == (
        "node-07",
        "ib_port_not_active",
        "Initializing",
        "exact",
    )
    assert ev["ts"] == datetime(2025, 6, 14, 10, 0, 0, 600000, tzinfo=UTC)
