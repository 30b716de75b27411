"""forensics/hangs.py: the culprit rank from watchdog reports, Flight Recorder dumps and NCCL COLL aggregates."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import polars as pl

from forensics import hangs
from forensics.schema import conform, empty
from parsers import nccl, torch_distributed
from parsers.base import HARNESS_LINE, FileContext, lines_from_bytes

FIXTURES = Path(__file__).parent.parent / "fixtures"


def parsed(rel: str) -> dict[str, pl.DataFrame]:
    path = FIXTURES / rel
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    parser = nccl if rel.startswith("nccl/") else torch_distributed
    result = parser.parse(lines, FileContext(path=rel, node="node-x", year_hint=2025))
    return {k: conform(v, k) for k, v in result.tables.items()}


def culprits(df: pl.DataFrame) -> list[tuple]:
    return df.filter(pl.col("role") == "culprit").select("pg", "rank", "reason", "lag").rows()


def test_watchdog_fixture_one_behind_one_silent() -> None:
    events = parsed("torch-distributed/torch_2.5_watchdog_pg1_8ranks_one_behind_one_silent.log")["events"]
    out = hangs.culprit_from_watchdog(events)
    assert culprits(out) == [("1", 3, "not_enqueued", 1), ("1", 5, "absent", None)]
    waiting = out.filter(pl.col("role") == "waiting")
    assert waiting.get_column("rank").to_list() == [0, 1, 2, 4, 6, 7]
    assert set(waiting.get_column("seq")) == {42}
    rank3 = out.filter(pl.col("rank") == 3).row(0, named=True)
    assert (rank3["progress"], rank3["line"], rank3["op"]) == (40, 7, "ALLREDUCE")


def _event(rank: int, kind: str, node: str, line: int, **detail: object) -> dict:
    return {"node": node, "rank": rank, "source": "torch", "kind": kind, "severity": "high",
            "message": "m", "detail": json.dumps(detail), "file": "f.log", "line": line}


def test_watchdog_set_made_in_test_lowest_seq_is_culprit() -> None:
    # 4 ranks of PG 2; rank 2 completed only up to 98 while the others completed 99 and wait in 100
    rows = [
        _event(r, "watchdog_timeout", f"n{r // 2}", 10 + r, pg_rank=r, seq=100, op="ALLREDUCE", timeout_ms=600000)
        for r in (0, 1, 3)
    ]
    rows += [_event(r, "watchdog_work_status", f"n{r // 2}", 20 + r, pg_rank=r, pg=2, seq=100, last_enqueued=100,
                    last_completed=99) for r in (0, 1, 3)]
    rows += [_event(2, "watchdog_work_status", "n1", 30, pg_rank=2, pg=2, seq=99, last_enqueued=100, last_completed=98)]
    events = conform(pl.DataFrame(rows), "events")
    out = hangs.culprit_from_watchdog(events)
    assert culprits(out) == [("2", 2, "behind", 1)]
    assert out.filter(pl.col("rank") == 2).get_column("node").to_list() == ["n1"]
    # the untagged watchdog lines joined PG 2 through the status lines of the same rank and SeqNum
    assert set(out.get_column("pg")) == {"2"}
    # with the group size given, a silent rank 4 shows up too
    out8 = hangs.culprit_from_watchdog(events, expected_ranks={"2": 5})
    assert ("2", 4, "absent", None) in culprits(out8)


def test_watchdog_all_in_collective_names_nobody() -> None:
    events = parsed("torch-distributed/pytorch_watchdog_timeout_pg_id_guid_format.log")["events"]
    out = hangs.culprit_from_watchdog(events)
    assert culprits(out) == []
    assert set(out.get_column("reason")) == {"all_in_collective"}
    assert out.get_column("rank").to_list() == [0, 1, 2]


def _fr_dump(entries: list[tuple[int, str]]) -> bytes:
    dump = {
        "version": "2.5",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {"0": {"last_enqueued_collective": entries[-1][0], "last_started_collective": -1,
                            "last_completed_collective": max(s for s, st in entries if st == "completed")}},
        "entries": [
            {"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": s,
             "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce", "time_created_ns": 1724779239936775119 + i,
             "state": st, "timeout_ms": 600000, "is_p2p": False}
            for i, (s, st) in enumerate(entries)
        ],
    }
    return pickle.dumps(dump, protocol=4)


def test_flight_recorder_dump_made_in_test_rank_never_joined() -> None:
    # the tutorial's case: rank 0 is stuck in all_reduce #5 (scheduled), rank 1 never issued it
    r0 = torch_distributed.parse_bytes(_fr_dump([(3, "completed"), (4, "completed"), (5, "scheduled")]),
                                       FileContext(path="dumps/nccl_trace_rank_0", node="gpu-a"))
    r1 = torch_distributed.parse_bytes(_fr_dump([(3, "completed"), (4, "completed")]),
                                       FileContext(path="dumps/nccl_trace_rank_1", node="gpu-b"))
    comms = pl.concat([conform(r0.tables["comms"], "comms"), conform(r1.tables["comms"], "comms")])
    out = hangs.culprit_from_flight_recorder(comms)
    assert culprits(out) == [("pg0", 1, "not_entered", 1)]
    row = out.filter(pl.col("rank") == 1).row(0, named=True)
    assert (row["node"], row["seq"], row["progress"], row["file"]) == ("gpu-b", 5, 4, "dumps/nccl_trace_rank_1")
    assert out.filter(pl.col("rank") == 0).get_column("role").to_list() == ["waiting"]


def test_flight_recorder_started_vs_completed() -> None:
    r0 = torch_distributed.parse_bytes(_fr_dump([(6, "completed"), (7, "completed")]),
                                       FileContext(path="nccl_trace_rank_0", node="a"))
    r1 = torch_distributed.parse_bytes(_fr_dump([(6, "completed"), (7, "started")]),
                                       FileContext(path="nccl_trace_rank_1", node="b"))
    comms = pl.concat([conform(r0.tables["comms"], "comms"), conform(r1.tables["comms"], "comms")])
    assert culprits(hangs.culprit_from_flight_recorder(comms)) == [("pg0", 1, "stuck_inside", 0)]


def test_flight_recorder_missing_dump_is_named() -> None:
    comms = parsed("torch-distributed/fr_dump_json_nccl_trace_rank_1_of_2.json")["comms"]
    out = hangs.culprit_from_flight_recorder(comms)
    assert culprits(out) == [("pg0", 0, "no_dump", None)]


def test_coll_last_opcount_behind() -> None:
    comms = parsed("nccl/nccl_2.21_mixed_training_log_coll_steps_watchdog_last_error.log")["comms"]
    out = hangs.culprit_from_coll(comms)
    assert culprits(out) == [("0x7d3e11a0c4f9b288", 1, "behind", 1)]
    assert out.filter(pl.col("rank") == 1).get_column("node").to_list() == ["gpu-c04"]


def test_empty_inputs() -> None:
    assert hangs.culprit_from_watchdog(empty("events")).height == 0
    assert hangs.culprit_from_flight_recorder(empty("comms")).height == 0
    assert hangs.culprit_from_coll(empty("comms")).height == 0


def test_flight_recorder_json_dumps_of_two_ranks() -> None:
    comms = pl.concat(
        [
            parsed("torch-distributed/fr_dump_json_single_line_nccl_trace_rank_0.json")["comms"],
            parsed("torch-distributed/fr_dump_json_nccl_trace_rank_1_of_2.json")["comms"],
        ]
    )
    out = hangs.culprit_from_flight_recorder(comms)
    assert culprits(out) == [("pg0", 1, "not_entered", 1)]
    assert out.filter(pl.col("rank") == 0).select("role", "seq").rows() == [("waiting", 5)]


def test_watchdog_nodes_from_nccl_rank_map() -> None:
    # rank 1 of the default group is silent; NCCL's init lines say where it ran
    events = parsed("torch-distributed/pytorch_watchdog_timeout_pg_id_guid_format.log")["events"]
    events = events.filter(pl.col("rank") != 2)
    rank_rows = conform(
        pl.DataFrame(
            {
                "record": ["rank"] * 3,
                "node": ["gpu-a", "gpu-b", "gpu-c"],
                "comm_id": ["0xabc"] * 3,
                "rank": [0, 1, 2],
                "nranks": [3, 3, 3],
                "file": ["nccl.log"] * 3,
                "line": [1, 2, 3],
            }
        ),
        "comms",
    )
    out = hangs.culprit_from_watchdog(events, expected_ranks=3, comms=rank_rows)
    assert out.filter(pl.col("role") == "culprit").select("rank", "reason", "node").rows() == [(2, "absent", "gpu-c")]
    assert out.filter(pl.col("rank") == 0).get_column("node").to_list() == ["gpu-a"]
