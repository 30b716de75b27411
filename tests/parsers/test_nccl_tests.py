"""Focused tests of the nccl-tests parser: exact values from the fixtures, plus a property test."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.schema import conform
from parsers import nccl_tests
from parsers.base import HARNESS_LINE, FileContext, ParseResult, check_accounting, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures" / "nccl-tests"


def run(name: str, node: str = "node-x") -> ParseResult:
    lines = lines_from_bytes((FIX / name).read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    result = nccl_tests.parse(lines, FileContext(path=f"nccl-tests/{name}", node=node))
    assert check_accounting(result, lines)
    return result


def comms(result: ParseResult, record: str) -> pl.DataFrame:
    return conform(result.tables["comms"], "comms").filter(pl.col("record") == record)


def test_device_lines_with_pci_domain_give_rank_map() -> None:
    r = run("h100_16ranks_domain_busid_avg_bw_zero.txt")
    ranks = comms(r, "rank").sort("rank")
    assert ranks.height == 12
    row8 = ranks.filter(pl.col("rank") == 8).row(0, named=True)
    assert (row8["node"], row8["cuda_dev"], row8["gpu_bus_id"], row8["pid"]) == (
        "h100-4",
        0,
        "0002:00:01.0",
        739786,
    )
    assert ranks.filter(pl.col("rank") == 4).item(0, "gpu_bus_id") == "0003:00:01.0"
    assert set(ranks.get_column("nodes")) == {"h100-2,h100-4"}
    assert json.loads(row8["detail"])["gpu_name"] == "NVIDIA H100 80GB HBM3"
    inv = conform(r.tables["inventory"], "inventory")
    assert inv.filter(pl.col("node") == "h100-4").height == 4
    assert r.partial  # the excerpt stops inside the device list


def test_short_bus_forms_and_unknown_bus() -> None:
    srun = comms(run("h100_16ranks_srun_pmix_device_list.txt"), "rank").sort("rank")
    assert srun.item(0, "gpu_bus_id") == "0000:8d:00.0" and srun.item(0, "node") == "worker-1"
    assert srun.filter(pl.col("rank") == 11).item(0, "node") == "worker-0"
    a100 = comms(run("a100_mpirun_no_hash_prefix_error_column.txt"), "rank")
    assert a100.height == 8 and a100.get_column("gpu_bus_id").null_count() == 8  # [0x00] = unknown
    assert a100.get_column("test").unique().to_list() == ["all_reduce_perf"]
    single = run("rtx4090_single_process_8gpus_tree.txt")
    assert comms(single, "rank").get_column("pid").unique().to_list() == [28307]
    assert single.node == "gpu59"


def test_rows_na_wrong_and_summary() -> None:
    r = run("alltoall_rtx5090_complete_output_na_wrong.txt")
    rows = comms(r, "nccl_test")
    oop = rows.filter(pl.col("placement") == "out-of-place").row(0, named=True)
    ip = rows.filter(pl.col("placement") == "in-place").row(0, named=True)
    assert (oop["size_bytes"], oop["count"], oop["dtype"], oop["redop"]) == (
        33554432,
        8388608,
        "float",
        "none",
    )
    assert (oop["time_us"], oop["algbw_gbps"], oop["busbw_gbps"], oop["wrong"]) == (19.56, 1715.44, 0.0, 0)
    assert (ip["time_us"], ip["algbw_gbps"], ip["wrong"]) == (0.78, 43046.10, None)
    summ = comms(r, "nccl_test_summary").row(0, named=True)
    assert (summ["value"], summ["wrong"], summ["test"], summ["nodes"]) == (
        0.0,
        0,
        "alltoall_perf",
        "GENOA-01",
    )
    assert not r.partial


def test_error_column_is_not_a_wrong_count() -> None:
    rows = comms(run("128gpu_sharp_error_column_1e06.txt"), "nccl_test")
    assert rows.height == 12
    assert rows.get_column("wrong").null_count() == 12
    assert json.loads(rows.item(0, "detail"))["max_error"] == "1e-06"
    first = rows.filter((pl.col("size_bytes") == 131072) & (pl.col("placement") == "in-place")).row(
        0, named=True
    )
    assert (first["time_us"], first["algbw_gbps"], first["busbw_gbps"]) == (117.4, 1.12, 2.22)


def test_zero_count_rows_kept() -> None:
    rows = comms(run("reduce_scatter_zero_count_rows.txt"), "nccl_test")
    assert rows.filter(pl.col("size_bytes") == 0).height == 10
    assert (
        rows.filter((pl.col("size_bytes") == 128) & (pl.col("placement") == "in-place")).item(0, "algbw_gbps")
        == 0.01
    )


def test_two_runs_keep_their_node_sets() -> None:
    r = run("multi_run_two_node_sets_mpirun_tagged.txt")
    summ = comms(r, "nccl_test_summary").sort("line")
    assert summ.select("nodes", "value").rows() == [("node-a,node-b", 165.8), ("node-c,node-d", 41.85)]
    rows = comms(r, "nccl_test")
    slow = rows.filter(pl.col("nodes") == "node-c,node-d")
    assert slow.height == 4 and slow.get_column("busbw_gbps").max() == 45.6
    assert set(rows.get_column("nccl_version")) == {"2.26.2"} and set(rows.get_column("nranks")) == {4}
    assert r.unrecognized == 0 and not r.partial


def test_failures_wrong_values_and_interleaved_nccl_lines() -> None:
    r = run("srun_labels_wrong_values_failure.txt")
    rows = comms(r, "nccl_test")
    assert rows.filter(pl.col("size_bytes") == 2097152).sort("placement", descending=True).get_column(
        "wrong"
    ).to_list() == [17, 0]
    assert (
        rows.filter((pl.col("size_bytes") == 4194304) & (pl.col("placement") == "out-of-place")).item(
            0, "wrong"
        )
        == 1234570
    )
    assert comms(r, "nccl_test_summary").item(0, "wrong") == 1234584
    ev = conform(r.tables["events"], "events").sort("line")
    assert ev.get_column("kind").to_list() == [
        "nccl_test_wrong_values",
        "nccl_test_failure",
        "nccl_test_failure",
    ]
    assert ev.get_column("node").to_list() == ["gpu-07", "gpu-08", "gpu-07"]
    assert r.unrecognized == 1 and "NCCL debug" in r.notes[0]


def test_destroy_complete_lines_counted_unrecognized() -> None:
    r = run("destroy_complete_interleaved_summary.txt")
    assert r.unrecognized == 2
    assert comms(r, "nccl_test_summary").item(0, "value") == 8.62002


def test_json_output_cut_line() -> None:
    r = run("json_output_pr318.txt")
    rows = comms(r, "nccl_test").sort("size_bytes", "placement")
    assert rows.height == 4 and r.partial
    assert set(rows.get_column("size_bytes")) == {33554432, 67108864}
    ip = rows.filter((pl.col("size_bytes") == 33554432) & (pl.col("placement") == "in-place")).row(
        0, named=True
    )
    assert (ip["busbw_gbps"], ip["wrong"], ip["test"], ip["nccl_version"]) == (
        20.115716,
        None,
        "alltoall_perf",
        "2.26.6",
    )


def test_header_mapped_bitwise_and_timestamp_columns_truncated() -> None:
    r = run("broadcast_bitwise_timestamp_crlf_truncated.txt")
    rows = comms(r, "nccl_test")
    assert rows.height == 4 and r.partial and r.unrecognized == 1
    ip = rows.filter((pl.col("size_bytes") == 2048) & (pl.col("placement") == "in-place")).row(0, named=True)
    assert (ip["time_us"], ip["algbw_gbps"], ip["busbw_gbps"], ip["wrong"], ip["test"]) == (
        8.01,
        0.26,
        0.26,
        0,
        "broadcast_perf",
    )
    assert json.loads(ip["detail"])["root"] == 0


def test_sniff() -> None:
    assert nccl_tests.sniff(b"[ 1.0] kernel: hello\n", "dmesg") == 0.0
    nccl_heavy = (
        b"#  Rank  1 Group  0 Pid 5 on node4 device  0 [0x4c] NVIDIA H800\n"
        + b"node2:1:1 [0] NCCL INFO x\n" * 20
    )
    assert nccl_tests.sniff(nccl_heavy, "x.log") < 0.3
    assert nccl_tests.sniff((FIX / "reduce_scatter_zero_count_rows.txt").read_bytes(), "x") >= 0.9


GRAMMAR_LINES = [
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1",
    "#  Rank  0 Group  0 Pid 1 on h1 device  0 [0x4c] NVIDIA H100",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
    "         128            32     float     sum      -1    10.00    0.01    0.02      0    10.00    0.01    0.02    N/A",
    "         128            32     float     sum    10.00    0.01",
    "# Out of bounds values : 3 FAILED",
    "# Avg bus bandwidth    : 1.5 ",
    '{"identifier": "nccl-tests structured output", "benchmark": [{"8": {"count": 2, "oop_time": 1.0',
    "[1,0]<stdout>:# Collective test starting: all_reduce_perf",
    "h1: Test NCCL failure common.cu:1 'x'",
    "h1:1:1 [0] NCCL INFO hello",
    "",
]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(GRAMMAR_LINES), st.text(max_size=80)), max_size=25))
def test_parse_never_raises_and_accounts_every_line(raw: list[str]) -> None:
    lines = lines_from_bytes("\n".join(raw).encode("utf-8", "replace"))
    result = nccl_tests.parse(lines, FileContext(path="p", node="n"))
    assert check_accounting(result, lines)
    for table, df in result.tables.items():
        conform(df, table)
    assert 0.0 <= nccl_tests.sniff("\n".join(raw).encode("utf-8", "replace"), "p") <= 1.0


def test_collector_time_prefix_gives_row_times() -> None:
    r = run("kubectl_timestamps_mpi_operator_sendrecv.txt")
    rows = comms(r, "nccl_test").sort("line")
    assert rows.item(0, "ts").isoformat() == "2025-06-14T10:30:02.004000+00:00"
    assert comms(r, "rank").get_column("node").to_list() == ["nccl-worker-0", "nccl-worker-1"]
    assert comms(r, "nccl_test_summary").item(0, "value") == 29.6675
    assert r.unrecognized == 0


def test_run_records_say_whether_the_run_concluded() -> None:
    runs = comms(run("multi_run_two_node_sets_mpirun_tagged.txt"), "nccl_test_run")
    assert [json.loads(d)["concluded"] for d in runs.get_column("detail")] == [True, True]
    assert json.loads(runs.item(0, "detail"))["max_bytes"] == 536870912
    cut = comms(run("a10g_single_gpu_efa_blocking_header.txt"), "nccl_test_run")
    assert json.loads(cut.item(0, "detail"))["concluded"] is False


def test_json_report_file_v3() -> None:
    r = run("json_report_file_v3_two_nodes.json")
    assert not r.partial and r.unrecognized == 0
    ranks = comms(r, "rank").sort("rank")
    assert ranks.select("node", "gpu_bus_id", "pid").rows()[1] == ("gb200-n02", "0008:01:00.0", 812)
    rows = comms(r, "nccl_test")
    ip = rows.filter((pl.col("size_bytes") == 2097152) & (pl.col("placement") == "in-place")).row(
        0, named=True
    )
    assert (ip["busbw_gbps"], ip["wrong"], ip["test"], ip["nccl_version"]) == (
        21.98,
        None,
        "all_gather_perf",
        "2.27.3",
    )
    assert comms(r, "nccl_test_summary").item(0, "value") == 19.625
    cut = run("json_report_file_v3_pretty_cut.json")
    assert cut.partial and comms(cut, "nccl_test").height == 2 and comms(cut, "rank").height == 2


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "rank",
                        "size",
                        "devices",
                        "results",
                        "config",
                        "args",
                        "in_place",
                        "out_of_place",
                        "hostname",
                        "time",
                    ]
                ),
                c,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_json_report_never_raises(obj: object) -> None:
    doc = {"nccl_version": 22703, "results": obj, "config": {"devices": obj}, "args": obj}
    lines = lines_from_bytes(json.dumps(doc).encode())
    result = nccl_tests.parse(lines, FileContext(path="p", node="n"))
    assert check_accounting(result, lines)
    for table, df in result.tables.items():
        conform(df, table)


def test_duplicate_rank0_headers_flag_a_mislaunched_test() -> None:
    r = run("mislaunched_duplicate_rank0_headers.txt")
    ev = conform(r.tables["events"], "events")
    assert ev.select("kind", "node", "line").rows() == [("nccl_test_duplicate_rank", "cnode2-002", 11)]
    assert comms(r, "nccl_test").height == 4 and r.unrecognized == 0
