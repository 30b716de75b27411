"""Focused tests of parsers/nccl.py: exact rank maps, versions, WARN peers/codes, IPs, COLL aggregates, sniff."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.schema import conform
from parsers import nccl, registry, torch_distributed
from parsers.base import HARNESS_LINE, FileContext, check_accounting, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures" / "nccl"


def run(name: str, node: str = "node-x") -> dict[str, pl.DataFrame]:
    path = FIX / name
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    result = nccl.parse(lines, FileContext(path=name, node=node, year_hint=2025))
    assert check_accounting(result, lines)
    return {k: conform(v, k) for k, v in result.tables.items()}


def details(df: pl.DataFrame) -> list[dict]:
    return [json.loads(d) for d in df.get_column("detail")]


def test_rank_map_multinode_init_start_complete_commid() -> None:
    comms = run("nccl_2.19_srun_label_init_start_complete_commid_ib_error_peer.log")["comms"]
    ranks = comms.filter(pl.col("record") == "rank").sort("comm_id", "rank")
    world = ranks.filter(pl.col("comm_id") == "0x9f2c4a1be0d3e511")
    assert world.select("rank", "node", "cuda_dev", "gpu_bus_id", "pid").rows() == [
        (0, "gpu-a01", 0, "0000:18:00.0", 2101),
        (1, "gpu-a01", 1, "0000:2a:00.0", 2102),
        (2, "gpu-b07", 0, "0000:18:00.0", 3301),  # FQDN cut at the first dot as NCCL does
        (3, "gpu-b07", 1, "0000:2a:00.0", 3302),
    ]
    assert set(world.get_column("nranks")) == {4}
    assert set(world.get_column("nccl_version")) == {"2.19.3"}
    # START and COMPLETE of one rank merge into one row, evidence on the COMPLETE line
    assert world.get_column("line").to_list() == [18, 19, 20, 21]
    split = ranks.filter(pl.col("comm_id") == "0x4be1d0c9a7f35a02")
    assert split.select("rank", "node", "nranks").rows() == [(0, "gpu-a01", 2), (1, "gpu-b07", 2)]


def test_rank_map_2_9_busid_no_commid_16_ranks() -> None:
    comms = run("nccl_2.9_info_init_complete_16ranks_busid.log")["comms"].filter(pl.col("record") == "rank")
    got = {r: (n, b) for r, n, b in comms.select("rank", "node", "gpu_bus_id").iter_rows()}
    assert got[15] == ("A03-R28-I49-3-9000018", "0000:e7:00.0")
    assert got[2] == ("A03-R28-I49-2-6000166", "0000:64:00.0")
    assert len(got) == 8 and set(comms.get_column("nranks")) == {16}


@pytest.mark.parametrize(
    ("name", "version", "node"),
    [
        ("nccl_2.7.8_info_init_ib_pytorch_docker.log", "2.7.8", "node08"),
        ("nccl_2.8.4_info_roce_bond_horovod_mpirun_tagged.log", "2.8.4", "j66d10267"),
        ("nccl_2.10.3_info_init_ib_channels_trees.log", "2.10.3", "xxx-xxx-xxx-xxx"),
        ("nccl_2.12.12_info_nvml_warn_roce_ro.log", "2.12.12", "gcn6"),
        ("nccl_2.13.4_info_debug_subsys_all_alloc.log", "2.13.4", "4c217144f0b1"),
        ("nccl_2.23.4_efa_ofi_plugin_selected_provider_tcp.log", "2.23.4", "6f2d8a82d208"),
        ("nccl_2.26.2_info_version_prefixed_alloc_subsys.log", "2.26.2", "Gabriel"),
        ("nccl_ras_2.26.2_mismatch_allgather_counts.txt", "2.26.2", "node-x"),
        ("nccl_2.21_mixed_training_log_coll_steps_watchdog_last_error.log", "2.21.5", "gpu-c03"),
    ],
)
def test_nccl_version_inventory(name: str, version: str, node: str) -> None:
    inv = run(name)["inventory"]
    v = inv.filter(pl.col("attribute") == "nccl_version")
    assert set(v.get_column("value")) == {version}
    assert node in set(v.get_column("node"))
    assert set(v.get_column("component")) == {"software"}


def test_node_ip_inventory_from_bootstrap_and_oob() -> None:
    inv = run("nccl_2.8.4_info_roce_bond_horovod_mpirun_tagged.log")["inventory"]
    ips = inv.filter((pl.col("component") == "node") & (pl.col("attribute") == "ip"))
    assert set(ips.select("node", "value", "device").rows()) == {
        ("j66d10267", "11.158.244.23", "bond0"),
        ("j63g01247", "11.158.237.10", "bond0"),
    }


def test_ib_completion_error_2_2x_status_form() -> None:
    ev = run("nccl_2.2x_net_ib_status12_recv_hca_nccltests.log")["events"]
    assert ev.get_column("kind").to_list() == ["nccl_ib_error", "nccl_ib_error"]
    d = details(ev)
    assert [(x["peer"], x["peer_port"], x["status"], x["vendor_err"], x["hca"], x["direction"]) for x in d] == [
        ("192.168.3.5", 53908, 12, 129, "mlx5_10", "Recv"),
        ("192.168.3.5", 50188, 12, 129, "mlx5_10", "Recv"),
    ]
    assert d[0]["local_gid"] == "::ffff:192.168.6.3" and d[0]["remote_gid"] == "::ffff:192.168.6.5"
    assert ev.get_column("node").unique().to_list() == ["mycl-g2"]
    assert ev.get_column("code").to_list() == ["12", "12"]
    assert ev.get_column("severity").to_list() == ["high", "high"]


def test_ib_completion_error_old_form_status5_is_secondary() -> None:
    ev = run("nccl_ib_plugin_error5_vendor249_gdr_hang.log")["events"]
    assert ev.height == 4
    d = details(ev)
    assert {(x["peer"], x["status"], x["vendor_err"]) for x in d} == {("10.1.32.3", 5, 249)}
    assert set(ev.get_column("severity")) == {"medium"}


def test_async_event_and_autolinks_and_quote() -> None:
    ev = run("nccl_ib_async_event_local_access_violation_cx7.log")["events"]
    asy = ev.filter(pl.col("kind") == "nccl_ib_async_event")
    assert asy.height == 3
    d = details(asy)[0]
    assert (d["hca"], d["port"]) == ("mlx5_0", 1)
    assert asy.get_column("code")[0] == "local access violation work queue error"
    ib = details(ev.filter(pl.col("kind") == "nccl_ib_error"))[0]
    assert (ib["peer"], ib["status"], ib["vendor_err"], ib["direction"]) == ("10.1.3.201", 9, 138, "Send")
    assert ev.filter(pl.col("kind") == "nccl_ib_error").get_column("node")[0] == "node023"


def test_timestamped_warn_2_26() -> None:
    ev = run("nccl_2.2x_timestamped_warn_status12_send_hca_mlx5_26.log")["events"]
    assert ev.get_column("ts")[0].isoformat() == "2026-01-04T21:33:04+00:00"
    assert ev.get_column("ts_quality")[0] == "local_assumed_utc"
    d = details(ev)[0]
    assert (d["peer"], d["status"], d["hca"], d["direction"]) == ("172.16.234.184", 12, "mlx5_26", "Send")


def test_other_warn_kinds() -> None:
    cuda = run("nccl_enqueue_cuda_failure_oom_invalid_resource_handle.log")["events"]
    assert cuda.get_column("code").to_list()[:2] == ["out of memory", "invalid resource handle"]
    assert set(cuda.get_column("kind")) == {"nccl_cuda_error"}
    ibv = run("nccl_tf_bazel_ib_plugin_create_qp_async_thread_unwind.log")["events"]
    assert ibv.select("kind", "code", "node").rows() == [("nccl_ibv_error", "ibv_create_qp", "hai-a100-3")]
    sock = run("nccl_2.7_socket_connection_closed_torchelastic_agent.log")["events"]
    assert sock.get_column("kind").to_list() == ["nccl_connection_error"]
    crlf = run("nccl_2.26_crlf_timestamped_warn_func_socket_fallback_lo.log")["events"]
    reset = crlf.filter(pl.col("kind") == "nccl_connection_error")
    assert details(reset)[0]["peer"] == "10.4.0.13" and details(reset)[0]["func"] == "ncclSocketTryAccept"


def test_wrapped_ib_error_line_is_joined() -> None:
    ev = run("nccl_azure_ib_error12_wrapped_and_torchrun_role_tee_prefix.log")["events"]
    ev = ev.filter(pl.col("kind") == "nccl_ib_error")
    d = json.loads(ev.get_column("detail")[0])
    assert (d["peer"], d["status"], d["len"], d["vendor_err"], d["direction"]) == ("10.2.0.5", 12, 0, 129, "Recv")


def test_coll_aggregated_per_comm_and_op_with_rank_from_init_map() -> None:
    comms = run("nccl_2.21_mixed_training_log_coll_steps_watchdog_last_error.log")["comms"]
    coll = comms.filter(pl.col("record") == "coll").sort("rank")
    assert coll.select("rank", "node", "op", "seq", "value", "dtype", "redop").rows() == [
        (0, "gpu-c03", "AllReduce", 0x3EA, 3.0, "bfloat16", "sum"),
        (1, "gpu-c04", "AllReduce", 0x3E9, 2.0, "bfloat16", "sum"),
    ]
    assert set(coll.get_column("comm_id")) == {"0x7d3e11a0c4f9b288"}
    tp = run("nccl_coll_allgather_reducescatter_allreduce_tp2.log")["comms"].filter(pl.col("record") == "coll")
    assert tp.height == 5  # (process, comm, op) pairs
    p2p = run("nccl_coll_send_recv_p2p_opcount.log")["comms"].filter(pl.col("record") == "coll")
    send = p2p.filter((pl.col("op") == "Send") & (pl.col("comm_id") == "0x7f516c002e10"))
    assert send.get_column("seq").to_list() == [0xD62]


def test_mixed_log_keeps_torch_and_last_error_lines() -> None:
    ev = run("nccl_2.21_mixed_training_log_coll_steps_watchdog_last_error.log")["events"]
    kinds = ev.get_column("kind").to_list()
    assert "watchdog_timeout" in kinds and "nccl_error" in kinds
    quoted = ev.filter((pl.col("source") == "torch") & (pl.col("kind") == "nccl_ib_error"))
    d = details(quoted)[0]
    assert (d["peer"], d["status"], d["hca"]) == ("10.0.0.12", 12, "mlx5_3")


def test_network_records() -> None:
    comms = run("nccl_2.23.4_efa_ofi_plugin_selected_provider_tcp.log")["comms"]
    net = details(comms.filter(pl.col("record") == "network"))
    assert {"transport": "OFI", "provider": "tcp", "nics": 1} in net
    inv = run("nccl_2.23.4_efa_ofi_plugin_selected_provider_tcp.log")["inventory"]
    assert ("node", "ip", "127.0.0.1") in inv.select("component", "attribute", "value").rows()
    sock = run("nccl_2.26_crlf_timestamped_warn_func_socket_fallback_lo.log")["comms"]
    assert sock.filter(pl.col("record") == "network").get_column("device").to_list()[0] == "eth0"


def test_ras_events() -> None:
    ev = run("nccl_ras_2.26.2_mismatch_allgather_counts.txt")["events"]
    ranks = ev.filter(pl.col("rank").is_not_null())
    assert ranks.get_column("rank").to_list() == [12, 13]
    d = details(ranks)[0]
    assert (d["gpu"], d["pid"], d["subject_ip"], d["comm_hash"]) == (4, 323032, "10.137.190.124", "fa93daea854b060b")
    assert set(ev.get_column("kind")) == {"nccl_ras_mismatch"}
    docs = run("nccl_ras_docs_incomplete_timeout_dead_samples.txt")["events"]
    assert set(docs.get_column("kind")) == {"nccl_ras_incomplete", "nccl_ras_timeout", "nccl_ras_dead"}
    assert docs.filter(pl.col("kind") == "nccl_ras_incomplete").get_column("rank").drop_nulls().to_list() == [21]


def test_sniff_tiers() -> None:
    line = b"node1:12:12 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    assert nccl.sniff(line * 20, "x.log") == 0.95
    assert nccl.sniff(b"hello\n" * 10, "x.log") == 0.0
    tests_head = b"# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n" + line
    assert nccl.sniff(tests_head, "x.txt") < 0.5
    # a file dominated by NCCL lines goes to nccl even when torch lines are present
    mixed = line * 30 + b"[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout\n"
    assert registry.detect(mixed, "train.log").parser is nccl
    assert torch_distributed.sniff(mixed, "train.log") < nccl.sniff(mixed, "train.log")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=120), max_size=30))
def test_parse_never_raises_and_accounts(texts: list[str]) -> None:
    lines = pl.Series("line", texts, dtype=pl.String)
    result = nccl.parse(lines, FileContext(path="p.log", node="n"))
    assert check_accounting(result, lines)
    for name, df in result.tables.items():
        conform(df, name)


def test_record_glued_after_progress_bar_and_non_ascii_host() -> None:
    lines = pl.Series(
        [
            "100%|██████████| 10/10 [00:01<00:00, 9.1it/s]gpu-a:12:40 [0] transport/net_ib.cc:1687 NCCL WARN "
            "NET/IB : Got completion from peer 10.0.0.2<1234> with error 12, opcode 0, len 0, vendor err 129",
            "höst-ü:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        ]
    )
    result = nccl.parse(lines, FileContext(path="x.log", node="n"))
    assert (result.parsed, result.unrecognized) == (2, 0)
    ev = result.tables["events"]
    assert ev.select("node", "kind", "code").rows() == [("gpu-a", "nccl_ib_error", "12")]
    inv = result.tables["inventory"].filter(pl.col("attribute") == "nccl_version")
    assert inv.select("node", "value").rows() == [("höst-ü", "2.21.5")]


def test_family_rows_hook_for_other_parsers() -> None:
    lines = pl.Series(
        [
            " iteration      100/   10000 | elapsed time per iteration (ms): 812.4 |",
            "gpu-a:12:40 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
            "[rank0]:[E1107 09:41:02.511203114 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1003, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600083 milliseconds before timing out.",
        ]
    )
    rows = nccl.family_rows(lines, FileContext(path="train.log", node="n", year_hint=2025))
    assert rows.understood.to_list() == [False, True, True]
    assert rows.tables["events"].get_column("kind").to_list() == ["watchdog_timeout"]
    assert rows.hosts == ["gpu-a"]


def test_coll_fast_path_agrees_with_coll_re() -> None:
    lines = (FIX / "nccl_coll_send_recv_p2p_opcount.log").read_text().splitlines()
    lines += (FIX / "nccl_coll_allgather_reducescatter_allreduce_tp2.log").read_text().splitlines()
    msgs = [ln.split(" NCCL INFO ", 1)[1] for ln in lines if " NCCL INFO " in ln]
    df = pl.DataFrame({"msg": msgs})
    fast = nccl.coll_fields(df).get_column("c").struct.unnest().select("op", "opc", "count", "dt", "redop", "root", "comm", "nranks")
    slow = df.select(pl.col("msg").str.extract_groups(nccl.COLL_RE)).unnest("msg")
    slow = slow.select("op", "opc", "count", "dt", "redop", "root", "comm", "nranks")
    assert fast.rows() == slow.rows()
    assert fast.height == 14 and fast.get_column("op").null_count() == 0


def test_malformed_coll_and_init_numbers_do_not_fail_the_file() -> None:
    """A COLL/Init line with a number that does not fit (or is not a number) must not raise: it reads as null."""
    base = "h1:11:11 [0] NCCL INFO AllReduce: opCount {opc} sendbuff 0x1 recvbuff 0x2 count {cnt} datatype 7 op 0 root 0 comm 0xabc [nranks=2] stream 0x3"
    lines = pl.Series(
        [
            base.format(opc="1", cnt="1024"),
            base.format(opc="2", cnt="12x"),
            base.format(opc="3", cnt="99999999999999999999999"),
            "h1:11:11 [0] NCCL INFO comm 0xabc rank 99999999999 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
        ]
    )
    result = nccl.parse(lines, FileContext(path="x.log", node="n"))
    coll = result.tables["comms"].filter(pl.col("record") == "coll")
    assert coll.select("seq", "count", "value").rows() == [(3, None, 3.0)]
    assert check_accounting(result, lines)


INIT_FORMS = [
    # 2.18+, before 2.18, and each optional part alone; with and without the function name
    "comm 0x55b1f7d09a10 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f2c - Init START",
    "ncclCommInitRank comm 0x55b1f7d09a10 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9f2c - Init COMPLETE",
    "comm 0x5581b3ec5e90 rank 0 nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE",
    "ncclCommInitRankConfig comm 0x77 rank 7 nranks 8 cudaDev 7 busId db000 - Init START",
    "comm 0x55d0c3a0 rank 3 nranks 64 cudaDev 3 busId 48000 commId 0x1f2e3d4c5b6a7988 - Init COMPLETE",
    "ncclCommSplit comm 0xAB rank 1 nranks 2 cudaDev 1 nvmlDev 5 busId 2A000 - Init COMPLETE",
]
INIT_OTHERS = [
    # INIT_RE matches these, `_INIT_FULL` does not: read by the regex
    "comm 0x77 rank 0 nranks 8 cudaDev 1 nvmlDev 3 busId 2a000 commId 0x1 localRank 0 - Init COMPLETE",
    "comm 0x77 rank 0 nranks 8 cudaDev 1 - Init START",
    "comm 0x77 rank 0 nranks 8 cudaDev 1 busId 2a000 commId 0x1 - Init COMPLETE ",
    "init.cc:1234 comm 0x77 rank 0 nranks 8 cudaDev 1 busId 2a000 - Init COMPLETE",
    "comm 0x77 rank ٣ nranks 8 cudaDev 1 busId 2a000 - Init COMPLETE",
    # and lines it does not match at all: left out
    "comm 0x77 rank x nranks 8 cudaDev 1 busId 2a000 - Init COMPLETE",
    "Init COMPLETE",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(INIT_FORMS + INIT_OTHERS), min_size=1, max_size=30))
def test_init_fields_read_by_token_as_init_re_reads_them(msgs: list[str]) -> None:
    """`_init_fields` reads every usual form of Init line by token position, the others by INIT_RE: the same
    groups as INIT_RE's on every line it matches, in line order, whatever forms a file mixes."""
    df = pl.DataFrame({"line": range(len(msgs)), "msg": msgs})
    want = df.filter(pl.col("msg").str.contains(nccl.INIT_RE)).with_columns(
        i=pl.col("msg").str.extract_groups(nccl.INIT_RE)
    )
    got = nccl._init_fields(df)
    assert got.equals(want)
    by_token = df.filter(pl.col("msg").str.contains(nccl._INIT_FULL)).get_column("msg").to_list()
    assert set(by_token) == set(msgs) & set(INIT_FORMS)


@pytest.mark.parametrize("first", INIT_FORMS + INIT_OTHERS)
def test_init_fields_of_one_form_or_led_by_another(first: str) -> None:
    """A file of one form (the first line's regex alone says so) and files whose other lines differ from their
    first: the same groups as INIT_RE's."""
    for msgs in ([first] * 5, [first, *INIT_FORMS], [first] * 3 + [INIT_OTHERS[0]]):
        df = pl.DataFrame({"line": range(len(msgs)), "msg": msgs})
        want = df.filter(pl.col("msg").str.contains(nccl.INIT_RE)).with_columns(
            i=pl.col("msg").str.extract_groups(nccl.INIT_RE)
        )
        assert nccl._init_fields(df).equals(want)
