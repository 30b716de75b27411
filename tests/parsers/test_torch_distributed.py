"""Focused tests of parsers/torch_distributed.py: watchdog fields, elastic failures, Flight Recorder dumps."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.schema import conform
from parsers import torch_distributed as td
from parsers.base import HARNESS_LINE, FileContext, check_accounting, lines_from_bytes

FIX = Path(__file__).parent.parent / "fixtures" / "torch-distributed"


def run(name: str) -> dict[str, pl.DataFrame]:
    path = FIX / name
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    result = td.parse(lines, FileContext(path=name, node="node-x", year_hint=2025))
    assert check_accounting(result, lines)
    return {k: conform(v, k) for k, v in result.tables.items()}


def watchdog(name: str) -> list[tuple]:
    ev = run(name)["events"].filter(pl.col("kind") == "watchdog_timeout")
    return [
        (r, d["seq"], d["op"], d["timeout_ms"], d["ran_ms"])
        for r, d in zip(ev.get_column("rank"), map(json.loads, ev.get_column("detail")), strict=True)
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "pytorch_watchdog_timeout_legacy_1x_format.log",
            [(1, 469508, "ALLREDUCE", 1800000, 1802212), (3, 469508, "ALLREDUCE", 1800000, 1802211),
             (2, 469508, "ALLREDUCE", 1800000, 1802212), (6, 469508, "ALLREDUCE", 1800000, 1802210),
             (7, 469508, "ALLREDUCE", 1800000, 1802220)],
        ),
        ("pytorch_2.1_nccl_watchdog_thread_terminated_allgather.log", [(9, 956300, "_ALLGATHER_BASE", 7200000, 17031048)]),
        ("pytorch_2.3_watchdog_timeout_no_usec_timestamp.log", [(3, 1, "ALLREDUCE", 600000, 600021)]),
        ("pytorch_watchdog_timeout_ray_worker_prefix_alltoall.log", [(3, 8, "ALLTOALL", 600000, 600000)]),
        (
            "pytorch_watchdog_timeout_allgather_base_pg3_sglang.log",
            [(1, 9141, "_ALLGATHER_BASE", 600000, 600071), (4, 9141, "_ALLGATHER_BASE", 600000, 600071)],
        ),
    ],
)
def test_watchdog_timeouts(name: str, expected: list[tuple]) -> None:
    assert watchdog(name) == expected


def test_work_status_last_enqueued_completed_and_pg() -> None:
    ev = run("pytorch_watchdog_timeout_pg_id_guid_format.log")["events"].filter(pl.col("kind") == "watchdog_work_status")
    d = [json.loads(x) for x in ev.get_column("detail")]
    assert [(x["pg_rank"], x["pg"], x["pg_name"], x["seq"], x["last_enqueued"], x["last_completed"]) for x in d] == [
        (1, 0, "default_pg", 808, 811, 807),
        (0, 0, "default_pg", 808, 811, 807),
    ]
    # c10 MMDD time with a 3-digit month-day and the year from the hint
    assert ev.get_column("ts")[0].isoformat() == "2025-06-26T06:24:44.906457+00:00"


def test_heartbeat_and_wrapped_stuck_watchdog() -> None:
    ev = run("pytorch_heartbeat_monitor_timed_out_2.3.log")["events"]
    assert ev.filter(pl.col("kind") == "heartbeat_timeout").get_column("rank").to_list() == [1, 0, 2]
    wrapped = run("pytorch_heartbeat_watchdog_stuck_wrapped_2.6.log")["events"]
    stuck = wrapped.filter(pl.col("kind") == "watchdog_stuck")
    assert stuck.height == 1 and json.loads(stuck.get_column("detail")[0])["stuck_s"] == 480


def test_torchrun_failures_and_signals() -> None:
    ev = run("torchrun_failed_exitcode_sigabrt_minus6.log")["events"]
    failed = ev.filter(pl.col("kind") == "worker_failed")
    d = [json.loads(x) for x in failed.get_column("detail")]
    assert [(x["exitcode"], x.get("signal"), x["local_rank"], x["pid"]) for x in d] == [(-6, "SIGABRT", 0, 16), (1, None, 7, 153932)]
    assert ev.filter(pl.col("kind") == "worker_signal").height == 3


def test_childfailederror_root_cause() -> None:
    ev = run("torchrun_2.4_childfailederror_root_cause_block.log")["events"].filter(pl.col("kind") == "worker_failed")
    root = ev.filter(pl.col("line") == 18)
    assert root.select("node", "rank", "code").rows() == [("gpu-d11", 13, "-6")]
    d = json.loads(root.get_column("detail")[0])
    assert d["root_cause"] is True and d["local_rank"] == 5 and d["signal"] == "SIGABRT"


def test_rendezvous_result_block() -> None:
    ev = run("torchrun_elastic_1.9_rendezvous_restart_result.log")["events"]
    rdzv = ev.filter(pl.col("kind") == "rendezvous")
    d = json.loads(rdzv.get_column("detail")[0])
    assert (d["restart_count"], d["group_world_size"], d["master_port"]) == (1, 1, 29500)
    assert ev.filter(pl.col("kind") == "worker_group_restart").height == 1


def test_flight_recorder_json_text_and_frtrace_report() -> None:
    t = run("pytorch_flight_recorder_dump_v2.5_and_torchfrtrace_report.txt")
    fr = t["comms"].filter(pl.col("record") == "flight_recorder")
    assert fr.select("comm_id", "op", "seq").rows() == [("pg0", "nccl:all_reduce", 1)]
    assert json.loads(fr.get_column("detail")[0])["state"] == "completed"
    rep = t["events"].filter(pl.col("kind") == "fr_missing_ranks")
    d = json.loads(rep.get_column("detail")[0])
    assert (d["seq"], d["missing_ranks"], d["expected_ranks"], d["state"]) == (5, [1], 2, "scheduled")
    per_rank = run("fr_dump_json_nccl_trace_rank_1_of_2.json")["comms"]
    assert set(per_rank.get_column("rank")) == {1}
    assert per_rank.filter(pl.col("record") == "flight_recorder").get_column("seq").to_list() == [3, 4]


def _dump(rank_entries: list[tuple[int, str]]) -> dict:
    return {
        "version": "2.5",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {"0": {"last_enqueued_collective": max(s for s, _ in rank_entries),
                            "last_started_collective": -1, "last_completed_collective": 4}},
        "entries": [
            {"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": s,
             "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce", "time_created_ns": 1724779239936775119 + i,
             "state": state, "timeout_ms": 600000, "is_p2p": False, "frames": [{"name": "f", "line": 1}]}
            for i, (s, state) in enumerate(rank_entries)
        ],
    }


def test_parse_bytes_pickle_dump() -> None:
    data = pickle.dumps(_dump([(4, "completed"), (5, "scheduled")]), protocol=4)
    assert td.is_pickle(data[:2]) and td.sniff(data[:4096], "nccl_trace_rank_0") >= 0.9
    result = td.parse_bytes(data, FileContext(path="dumps/nccl_trace_rank_0", node="n0"))
    comms = conform(result.tables["comms"], "comms")
    fr = comms.filter(pl.col("record") == "flight_recorder")
    assert fr.select("rank", "seq", "op").rows() == [(0, 4, "nccl:all_reduce"), (0, 5, "nccl:all_reduce")]
    assert json.loads(fr.get_column("detail")[1])["state"] == "scheduled"


class _Evil:
    def __reduce__(self) -> tuple:
        return (os.system, ("echo pwned > /dev/null",))


def test_parse_bytes_refuses_globals() -> None:
    data = pickle.dumps({"entries": [_Evil()]}, protocol=4)
    result = td.parse_bytes(data, FileContext(path="nccl_trace_rank_3", node="n"))
    assert result.tables == {} and result.unrecognized == 1
    assert any("refused" in n for n in result.notes)


def test_parse_bytes_truncated_pickle_is_partial() -> None:
    data = pickle.dumps(_dump([(1, "completed")]), protocol=4)[:-20]
    result = td.parse_bytes(data, FileContext(path="nccl_trace_rank_3", node="n"))
    assert result.tables == {}
    assert result.notes


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=120), max_size=30))
def test_parse_never_raises_and_accounts(texts: list[str]) -> None:
    lines = pl.Series("line", texts, dtype=pl.String)
    result = td.parse(lines, FileContext(path="p.log", node="n"))
    assert check_accounting(result, lines)
    for name, df in result.tables.items():
        conform(df, name)


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=200))
def test_parse_bytes_never_raises(data: bytes) -> None:
    td.parse_bytes(b"\x80\x04" + data, FileContext(path="x", node="n"))
    assert 0.0 <= td.sniff(data, "x") <= 1.0


def test_desync_debug_report_names_lagging_ranks() -> None:
    ev = run("torch_desync_debug_report_lagging_ranks.log")["events"].filter(pl.col("kind") == "desync_report")
    got = [(c, json.loads(d)["lagging_ranks"], json.loads(d).get("seq")) for c, d in ev.select("code", "detail").iter_rows()]
    assert got == [
        ("joined_not_finished", [47], 41207),
        ("finished_not_joined_next", [0, 1, 2], 41208),
        ("never_joined", [5, 6], None),
    ]


_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=50, deadline=None)
@given(
    st.fixed_dictionaries(
        {"entries": st.lists(st.dictionaries(st.sampled_from(["collective_seq_id", "state", "pg_id", "process_group",
                                                            "profiling_name", "time_created_ns", "is_p2p"]), _plain),
                             max_size=5),
         "pg_status": _plain, "pg_config": _plain, "rank": _plain}
    )
)
def test_parse_bytes_odd_dumps_never_raise(dump: dict) -> None:
    result = td.parse_bytes(pickle.dumps(dump), FileContext(path="nccl_trace_rank_2", node="n"))
    for name, df in result.tables.items():
        conform(df, name)


def test_store_errors_and_nccl_errors_raised_to_python() -> None:
    lines = pl.Series(
        [
            "[rank1]: torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
            "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect "
            "to (10.0.0.5, 29500).",
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system "
            "error, NCCL version 2.10.3",
            "Last error:",
            "socketStartConnect: Connect to 10.0.0.5<34567> failed : Software caused connection abort",
        ]
    )
    result = td.parse(lines, FileContext(path="x", node="n"))
    assert (result.parsed, result.unrecognized) == (5, 0)
    ev = result.tables["events"]
    d = {k: json.loads(v) for k, v in ev.select("kind", "detail").iter_rows() if k != "nccl_error"}
    assert (d["store_timeout"]["exception"], d["nccl_connection_error"]["peer"]) in {
        ("DistStoreError", "10.0.0.5"),
        ("DistNetworkError", "10.0.0.5"),
    }
    stores = [json.loads(x) for x in ev.filter(pl.col("kind") == "store_timeout").get_column("detail")]
    assert (stores[0]["joined"], stores[0]["expected"]) == (1, 3)
    assert (stores[1]["store_host"], stores[1]["store_port"]) == ("10.0.0.5", 29500)
    nerr = ev.filter(pl.col("kind") == "nccl_error")
    assert json.loads(nerr.get_column("detail")[0])["nccl_version"] == "2.10.3"


def test_uncaught_cpp_exception_head_is_understood_and_no_error_of_its_own() -> None:
    """libstdc++'s `terminate called after throwing an instance of '<type>'` (the shape of the reports in
    NVIDIA/Megatron-LM#935 and instructlab/training#520) heads the `what():` text of the exception that killed
    the process: understood, with or without a launcher prefix, and no `nccl_error` of its own (it names the
    type only; its `what():` line carries the message). Two processes' heads written into each other stay
    not understood."""
    what = (
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 5] Process group watchdog thread terminated with exception: "
        "[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=8, "
        "NumelOut=8, Timeout(ms)=600000) ran for 600042 milliseconds before timing out."
    )
    lines = pl.Series(
        [
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            what,
            "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 "
            "(most recent call first):",
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1 in /x/libc10.so)",
            "",
            "[rank2]:terminate called after throwing an instance of 'std::runtime_error'",
            "[rank2]:  what():  NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system "
            "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
            "terminate called without an active exception",
            "terminate called recursively",
            "terminate called after throwing an instance of 'c10::DistBackendErrorterminate called after throwing an "
            "instance of ''",
        ]
    )
    result = td.parse(lines, FileContext(path="x", node="n", year_hint=2025))
    assert check_accounting(result, lines)
    assert result.unrecognized == 1
    assert [x[1] for x in result.unrecognized_examples] == [lines[9]]
    ev = result.tables["events"]
    # the watchdog's timeout is read off the `what():` line (its rule comes first), the NCCL error too
    assert sorted(ev.select("line", "kind").rows()) == [(2, "watchdog_timeout"), (7, "nccl_error")]
    assert ev.filter(pl.col("kind") == "nccl_error").get_column("rank").to_list() == [2]
