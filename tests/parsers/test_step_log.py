"""Focused tests of the step-log parser: exact values read off the lines, stream keys, times, sniffing."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from parsers import step_log
from parsers.base import FileContext, check_accounting

CTX = FileContext(path="logs/train.log", node="node-a")


def parse(text: str):
    lines = pl.Series("line", text.split("\n"))
    result = step_log.parse(lines, CTX)
    assert check_accounting(result, lines)
    return result


def steps(text: str) -> list[dict]:
    return parse(text).tables["steps"].to_dicts()


MEGATRON = (
    " 7:  [2024-06-01 10:00:05] iteration       10/    1000 | consumed samples:         1280 | elapsed time per "
    "iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 401.2 | learning rate: 1.000000E-05 | global batch "
    "size:   128 | lm loss: 7.123400E+00 | loss scale: 1.0 | grad norm: 2.345 | number of skipped iterations:   0 | "
    "number of nan iterations:   0 |"
)


def test_megatron_iteration_line_values_and_srun_rank() -> None:
    (row,) = steps(MEGATRON)
    assert row["step"] == 10
    assert row["step_time_s"] == 1.2345
    assert row["tflops"] == 401.2 and row["throughput_unit"] == "TFLOP/s/GPU"
    assert row["loss"] == 7.1234
    assert row["rank"] == 7 and row["node"] == "node-a"
    assert row["ts"] == datetime(2024, 6, 1, 10, 0, 5, tzinfo=timezone.utc)
    assert row["ts_quality"] == "local_assumed_utc"
    assert row["framework"] == "megatron" and row["step_time_source"] == "reported"
    assert json.loads(row["detail"])["grad_norm"] == 2.345


def test_megatron_minmax_timer_block_attaches_to_the_step_above() -> None:
    text = "\n".join(
        [
            MEGATRON,
            " 7: (min, max) time across ranks (ms):",
            " 7:     forward-compute ................................: (301.50, 713.50)",
            " 7:     optimizer ......................................: (50.00, 52.00)",
        ]
    )
    (row,) = steps(text)
    assert row["forward_s"] == 0.7135 and row["optimizer_s"] == 0.052
    assert row["phase_spread_name"] == "forward-compute" and abs(row["phase_spread_s"] - 0.412) < 1e-9
    timers = json.loads(row["detail"])["timers"]
    assert {"name": "forward-compute", "min_ms": 301.5, "max_ms": 713.5} in timers


def test_setup_timer_block_before_training_is_no_step() -> None:
    text = "(min, max) time across ranks (ms):\n    model-and-optimizer-setup ......................: (222.27, 225.22)"
    result = parse(text)
    assert result.tables["steps"].height == 0
    assert result.parsed == 2 and result.unrecognized == 0


def test_alcf_key_value_iteration() -> None:
    line = (
        "[2024-09-16 22:59:27.744603][INFO][training_log:661] -  iteration=       2/  635782 | consumed_samples=        "
        "1536 | elapsed_time_per_iteration_ms=8457.2 | learning_rate=1.88744e-08 | lm loss=11.164009 | "
        "samples_per_second=90.810 | [LM]TFLOPs=70.98| [DS]TFLOPs=91.53 |"
    )
    (row,) = steps(line)
    assert (row["step"], row["step_time_s"], row["loss"], row["tflops"]) == (2, 8.4572, 11.164009, 70.98)
    assert row["throughput"] == 90.81 and row["throughput_unit"] == "samples/s"
    assert row["ts"] == datetime(2024, 9, 16, 22, 59, 27, 744603, tzinfo=timezone.utc)


def test_deepspeed_step_and_pipe_lines_are_one_row_with_the_log_time() -> None:
    text = (
        "[2025-09-04 15:18:01,200] [INFO] [logging.py:107:log_dist] [Rank 0] step=1, skipped=0, lr=[1.5968e-07], mom=[0.0]\n"
        "steps: 1 loss: 0.0614 iter time (s): 531.283 samples/sec: 0.008"
    )
    (row,) = steps(text)
    assert row["step"] == 1 and row["step_time_s"] == 531.283 and row["loss"] == 0.0614
    assert row["line"] == 2
    assert row["ts"] == datetime(2025, 9, 4, 15, 18, 1, 200000, tzinfo=timezone.utc)


def test_deepspeed_throughput_timer_step_time_from_timestamp_deltas() -> None:
    text = (
        "[2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48, MemAllocated=0.26GB\n"
        "[2022-03-11 02:07:14,130] [INFO] [timer.py:189:stop] 0/50, SamplesPerSec=83.73, MemAllocated=0.26GB"
    )
    rows = steps(text)
    assert [r["step"] for r in rows] == [40, 50]
    assert rows[0]["step_time_s"] is None
    assert abs(rows[1]["step_time_s"] - 1.5145) < 1e-9 and rows[1]["step_time_source"] == "ts_delta"
    assert rows[1]["throughput"] is None  # a running average since start is no per-step rate


def test_torchtitan_ansi_thousands_separator_and_pipeline_sentinel() -> None:
    e = "\x1b"
    text = (
        f"[rank0]:[titan] 2025-02-01 09:00:00,000 - root - INFO - {e}[31mstep:  1  {e}[32mloss: 12.0000  "
        f"{e}[33mmemory: 40.12GiB(42.22%)  {e}[34mtps: 1,234  {e}[36mtflops: 71.23  {e}[35mmfu: 7.20%{e}[39m\n"
        f"[rank0]:[titan] 2025-02-01 09:00:02,500 - root - INFO - step:  2  loss: -1.0000  memory: 45.00GiB(47.36%)  "
        "tps: 6,012  tflops: 347.10  mfu: 35.10%"
    )
    rows = steps(text)
    assert [(r["rank"], r["step"], r["throughput"]) for r in rows] == [(0, 1, 1234.0), (0, 2, 6012.0)]
    assert rows[1]["loss"] is None and rows[1]["step_time_s"] == 2.5


def test_tqdm_carriage_returns_split_and_dict_joins_its_bar() -> None:
    text = (
        "\r 10%|#         | 1/10 [00:01<00:09, 1.02s/it]\r 20%|##        | 2/10 [00:02<00:08,  1.00it/s]"
        "\r{'loss': 2.5, 'grad_norm': 3.25, 'learning_rate': 4e-05, 'epoch': 0.2}\n"
        "{'train_runtime': 12.5, 'train_samples_per_second': 6.4, 'train_steps_per_second': 0.8, 'train_loss': 2.25, 'epoch': 1.0}"
    )
    rows = steps(text)
    by_step = {r["step"]: r for r in rows}
    assert by_step[1]["step_time_s"] == 1.02 and by_step[1]["step_time_source"] == "tqdm_rate"
    assert by_step[2]["loss"] == 2.5 and by_step[2]["step_time_s"] == 1.0
    summary = by_step[None]
    assert summary["step_time_s"] == 1.25 and summary["step_time_source"] == "run_mean"


def test_nanogpt_times_are_seconds() -> None:
    rows = steps("iter 0: loss 4.2648, time 9371.81ms, mfu -100.00%\niter 340: loss 5.4983, time 33785.52ms, mfu 0.96%")
    assert [(r["step"], r["step_time_s"]) for r in rows] == [(0, 9.37181), (340, 33.78552)]
    assert "mfu_pct" not in json.loads(rows[0]["detail"] or "{}")


def test_megatron_straggler_detector_names_slowest_rank() -> None:
    line = (
        " 0: INFO:megatron.core.utils:[2024-03-14 23:07:56] | MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: 3468.20ms/0 | "
        "MnEtpt/Rnk: 296.02TF/0 | MxEtpt/Rnk: 297.32TF/8"
    )
    result = parse(line)
    (ev,) = result.tables["events"].to_dicts()
    assert ev["source"] == "straggler-detector" and ev["kind"] == "straggler_report"
    assert ev["rank"] == 0
    detail = json.loads(ev["detail"])
    assert detail["slowest_rank"] == 0 and detail["fastest_rank"] == 8
    assert detail["MxRtt"] == {"value": 3468.2, "unit": "ms", "rank": 0}


def test_nvrx_scores_name_their_node() -> None:
    text = "GPU relative performance:\n Worst performing 1/8 ranks:\n  Rank=3 Node=gpu-07 Score=0.61"
    (ev,) = parse(text).tables["events"].to_dicts()
    assert (ev["rank"], ev["node"], ev["kind"]) == (3, "gpu-07", "straggler_score")
    assert json.loads(ev["detail"])["score"] == 0.61


def test_time_inherited_only_from_the_line_right_above() -> None:
    text = (
        "[2024-01-01 00:00:00,000] [INFO] [engine.py:1:f] something\n"
        "iter 1: loss 1.0, time 100.00ms\n"
        "iter 2: loss 1.0, time 100.00ms"
    )
    rows = steps(text)
    assert rows[0]["ts_quality"] == "inherited"
    assert rows[0]["ts"] == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert rows[1]["ts"] is None and rows[1]["ts_quality"] == "none"


def test_unknown_lines_are_counted_not_claimed() -> None:
    result = parse("node1:1:1 [0] NCCL INFO Bootstrap\nTraceback (most recent call last):\niter 1: loss 1.0, time 5.00ms")
    assert (result.parsed, result.unrecognized) == (1, 2)


def test_sniff_prefers_step_dominant_heads_and_leaves_nccl_dominant_ones() -> None:
    step_head = "\n".join(f"iter {i}: loss 1.0, time 100.00ms" for i in range(20)).encode()
    nccl_head = "\n".join(["node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"] * 40)
    nccl_head = (nccl_head + "\niter 1: loss 1.0, time 100.00ms").encode()
    assert step_log.sniff(step_head, "x.log") >= 0.9
    assert step_log.sniff(nccl_head, "x.log") < 0.7
    assert step_log.sniff(b"hello world\n", "x.log") == 0.0


LINE_PIECES = st.sampled_from(
    [
        MEGATRON,
        " iteration 5/ 10 | elapsed time per iteration (ms): 12",
        "(min, max) time across ranks (ms):",
        "    forward-compute ....: (1.0, 2.0)",
        "times across ranks (ms):",
        "  optimizer:",
        "     rank  1: 3.5",
        "steps: 1 loss: 0.1 iter time (s): 2.0 samples/sec: 1.0",
        "[Rank 0] time (ms) | fwd: 1.0 | bwd: 2.0",
        " 50%|#####     | 5/10 [00:05<00:05, 1.00it/s]",
        "{'loss': 1.0, 'epoch': 0.5}",
        "[batch=1/10]:",
        "         Train loss/train/total: 1.0",
        "GPU relative performance:",
        "  Rank=1 Node=n Score=0.5",
        "^^^^ Bottom 2 Ranks with lowest  Etpt(TF): 1.0/1, 2.0/2,",
        "worker-0: ",
        "[default3]:",
        "\r",
        "\x1b[31m",
        "",
    ]
)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(LINE_PIECES, st.text(max_size=40)), max_size=12), st.integers(0, 3))
def test_parse_never_raises_and_accounts_for_every_line(pieces: list[str], joins: int) -> None:
    text = "".join(pieces) if joins == 0 else "\n".join(pieces)
    lines = pl.Series("line", text.split("\n"))
    result = step_log.parse(lines, CTX)
    assert check_accounting(result, lines)
    assert result.tables["steps"].get_column("file").null_count() == 0


# ----------------------------------------------------------------------------- step-table (generic CSV / JSON Lines)

from parsers import step_table  # noqa: E402


def table_rows(text: str) -> list[dict]:
    lines = pl.Series("line", text.split("\n"))
    result = step_table.parse(lines, CTX)
    assert check_accounting(result, lines)
    return result.tables["steps"].to_dicts()


def test_step_table_csv_ms_column_is_seconds() -> None:
    rows = table_rows("step,step_time_ms,rank,host\n7,1234.5,3,gpu-07")
    assert [(r["step"], r["step_time_s"], r["rank"], r["node"]) for r in rows] == [(7, 1.2345, 3, "gpu-07")]


def test_step_table_jsonl_timestamp_deltas_per_rank() -> None:
    text = "\n".join(
        [
            '{"iteration": 1, "timestamp": 1714557600.0, "rank": 0}',
            '{"iteration": 1, "timestamp": 1714557600.5, "rank": 1}',
            '{"iteration": 3, "timestamp": 1714557604.0, "rank": 0}',
            '{"iteration": 3, "timestamp": 1714557610.5, "rank": 1}',
        ]
    )
    rows = table_rows(text)
    assert [(r["rank"], r["step_time_s"]) for r in rows] == [(0, None), (1, None), (0, 2.0), (1, 5.0)]
    assert rows[2]["step_time_source"] == "ts_delta"


def test_step_table_sniff_needs_step_and_time() -> None:
    assert step_table.sniff(b"step,step_time_s\n1,2.0\n", "a.csv") == 0.95
    assert step_table.sniff(b"timestamp, name, pci.bus_id\n", "a.csv") == 0.0
    assert step_table.sniff(b'{"step": 1, "loss": 2}\n', "a.jsonl") == 0.0


def test_data_and_eval_bars_are_no_steps() -> None:
    text = "\n".join(
        [
            "Loading checkpoint shards: 100%|##########| 4/4 [00:05<00:00,  1.25s/it]",
            "Map: 100%|##########| 1000/1000 [00:01<00:00, 800.00 examples/s]",
            " 10%|#         | 1/10 [00:02<00:18,  2.00s/it]",
            " 20%|##        | 2/10 [00:04<00:16,  2.00s/it]",
            " 50%|#####     | 1/2 [00:00<00:00,  9.00it/s]",  # an unlabelled evaluation bar
            " 30%|###       | 3/10 [00:06<00:14,  2.10s/it]",
        ]
    )
    result = parse(text)
    rows = result.tables["steps"].to_dicts()
    assert [(r["step"], r["step_time_s"]) for r in rows] == [(1, 2.0), (2, 2.0), (3, 2.1)]
    assert result.unrecognized == 0


def test_step_table_on_foreign_text_is_empty_and_accounted() -> None:
    lines = pl.Series("line", ["[  1.0] kernel: hello", "", "NVRM: Xid 79"])
    result = step_table.parse(lines, CTX)
    assert result.tables["steps"].height == 0
    assert check_accounting(result, lines) and result.unrecognized == 2


TABLE_PIECES = st.sampled_from(
    ["step,step_time_s,rank", "1,0.5,0", "iteration\tduration_s", '{"step": 1, "timestamp": 1714557600}', "x,y", ""]
)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(TABLE_PIECES, st.text(max_size=30)), max_size=8))
@example(["0\r\t"])  # a lone carriage return in a header-like line (csv.reader refused it)
@example(["step,step_time_s\r,rank", "1,0.5,0"])
def test_step_table_never_raises_and_accounts(pieces: list[str]) -> None:
    lines = pl.Series("line", "\n".join(pieces).split("\n"))
    result = step_table.parse(lines, CTX)
    assert check_accounting(result, lines)


def test_timer_block_after_eight_memory_reports_still_attaches() -> None:
    memory = [f"[Rank {r}] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0" for r in range(8)]
    text = "\n".join(
        [MEGATRON.removeprefix(" 7: "), *memory, "(min, max) time across ranks (ms):", "    forward-compute ....: (300.00, 420.00)"]
    )
    (row,) = steps(text)
    assert row["forward_s"] == 0.42 and abs(row["phase_spread_s"] - 0.12) < 1e-9


def test_a_megatron_log_is_read_in_larger_chunks_than_the_others() -> None:
    """`chunk_factor` of the real logs' heads: 2 for Megatron-LM and its forks (iteration lines, or the preamble
    Megatron prints before any: its arguments banner, its world size line in either spelling), 1 for the other
    frameworks (the ALCF Megatron-DeepSpeed log of key-value timers has no iteration line of Megatron's shape)."""
    from tests.conftest import FIXTURES

    megatron = {  # (NeMo 2 and Megatron-DeepSpeed print Megatron's iteration line)
        "gpt_neox_llama_bf16_first_iterations.log",
        "megatron_2022_bert_timers_and_iteration_sop_loss.log",
        "megatron_bridge_nemo2509_8gpu_eval.log",
        "megatron_iteration_mixtral_moe_timestamped.log",
        "megatron_llm_epfl_iteration_slow.log",
        "megatron_lm_2023_gpt345m_dp4_tp2pp2.log",
        "synthetic_k8s_collector_clock_megatron_deepspeed_tgs.log",
        "synthetic_megatron_crlf_truncated.log",
        "synthetic_megatron_srun_minmax_timers_straggler_detector.log",
        "synthetic_megatron_times_across_ranks_per_rank.log",
        "synthetic_nemo2_nanochat_modded_litgpt_torchtune.log",
    }
    paths = sorted((FIXTURES / "step-log").glob("*.log"))
    assert megatron <= {p.name for p in paths} and len(paths) > len(megatron) + 10
    for path in paths:
        want = 2 if path.name in megatron else 1
        assert step_log.chunk_factor(path.read_bytes()[:16384]) == want, path.name
    for preamble in (
        b"------------------------ arguments ------------------------\n  fp16 ......... False\n",
        b"using world size: 8, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size\n",
        b"using world size: 1, data-parallel-size: 1, tensor-model-parallel size: 1, pipeline-model\n",
    ):
        assert step_log.chunk_factor(b"[INFO] starting\n" + preamble) == 2
    assert step_log.chunk_factor(b"{'loss': 2.1, 'learning_rate': 5e-05, 'epoch': 0.01}\n") == 1
