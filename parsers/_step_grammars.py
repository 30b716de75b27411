"""Line grammars of training step logs (FORMATS.md §9), written once as data for `parsers.step_log`.

Every regex is applied with polars (Rust `regex`: named groups, no look-around) to the text of a line
after launcher envelopes, ANSI colours and Python-logging prefixes were removed. Numbers are matched by
`NUM` (signs, exponents, `nan`/`inf`); thousands separators only where a format prints them (`INT_SEP`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

NUM = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))"
INT_SEP = r"\d[\d,]*"

# ----------------------------------------------------------------------------- timestamps

# A date-time in the first 40 characters (logger headers: DeepSpeed `[2025-09-04 15:18:01,200] [INFO]`,
# 2020 `[INFO 2020-06-08 05:26:19]`, torchtitan `[titan] 2025-06-16 22:30:48,735 -`, HF
# `[INFO|trainer.py:1156] 2021-06-05 16:46:31,375 >>`, ALCF `[2024-09-16 22:59:07.230671][INFO]`, Megatron
# ` [2024-04-06 02:59:36] iteration`, NeMo `[NeMo I 2023-05-25 10:00:00 ...]`, Automodel `2026-08-10 15:55:20 |`).
# Megatron's `[before the start of training step] datetime: ...` markers lie further right on purpose: they
# mark phases, not the line they are printed with, and must not lend their time to step lines.
TS_RE = (
    r"^.{0,40}?(?P<date>\d{4}-\d\d-\d\d)[ T](?P<time>\d\d:\d\d:\d\d)(?P<frac>[.,]\d{1,9})?"
    r"(?P<tz>Z|[+-]\d\d:?\d\d)?(?:[^\d]|$)"
)

# Log collectors (k8s, CloudWatch exports) put their own clock first: `2024-06-01T10:00:05.123456Z ` (outermost).
COLLECTOR_RE = r"^(?P<cts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?):?\s+|^\d\d:\d\d:\d\d\.\d{3} "
# absl (MaxText, JAX) `I0512 10:24:13.123456 140234 train.py:540] ` and PyTorch c10 `[W1006 03:29:26.926188014 …]`:
# month and day without a year (the year comes from the bundle, ts_quality 'year_inferred').
MMDD_TS_RE = r"^\[?[IWEF](?P<mo>\d\d)(?P<d>\d\d) (?P<time>\d\d:\d\d:\d\d)(?P<frac>\.\d+)?\s"

ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"
ANSI_PASTED_RE = r"\[(?:\d{1,3};)*\d{1,3}m"  # colour codes whose ESC was lost in a paste: `[32m`, `[0m`
PYLOG_PREFIX_RE = r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:"  # logging.basicConfig default: `INFO:megatron.core.utils:`

COMPOSER_BANNER_RE = r"^-{5,}(?P<what>Begin|End) global rank (?P<rank>\d+) (?:STDOUT|STDERR)-{5,}\s*$"
MSG_RANK_RE = r"\[Rank (?P<rank>\d+)\]"  # DeepSpeed log_dist / Megatron memory lines name their writer

# ----------------------------------------------------------------------------- step lines (anchors)

# Megatron-LM / Core / Bridge / NeMo-Megatron, their forks (epfLLM, savanna), GPT-NeoX (`samples/sec: … |
# iteration`), ALCF Megatron-DeepSpeed (`iteration=   1/  635782 | key=value |`).
MEGATRON_ITER_RE = r"(?:^|[|\]-])\s*(?:\[[\d-]+ [\d:]+\]\s+)?iteration\s*[=:]?\s*(?P<step>\d+)\s*/\s*(?P<total>\d+)\s*\|"
MEGATRON_KEYS: dict[str, str] = {
    "elapsed_ms": rf"elapsed[ _]time[ _]per[ _]iteration[ _]\(?ms\)?\s*[:=]\s*(?P<v>{NUM})",
    "tflops": rf"(?:throughput per GPU \(TFLOP/s/GPU\)\s*:|\[LM\]TFLOPs\s*=|approx flops per GPU:|TFLOPs:)\s*(?P<v>{NUM})",
    "samples_per_s": rf"(?:samples/sec|samples_per_second|samples per second)\s*[:=]\s*(?P<v>{NUM})",
    "tokens_per_gpu_s": rf"tokens[ _]per[ _]gpu[ _]per[ _]second(?:[ _]\(?tgs\)?)?\s*[:=]\s*(?P<v>{NUM})",
    "lm_loss": rf"\|\s*lm[ _]loss\s*[:=]\s*(?P<v>{NUM})",
    "loss": rf"\|\s*loss\s*[:=]\s*(?P<v>{NUM})",
    "lr": rf"learning[ _]rate\s*[:=]\s*(?P<v>{NUM})",
    "grad_norm": rf"grad[ _]norm\s*[:=]\s*(?P<v>{NUM})",
    "loss_scale": rf"loss[ _]scale\s*[:=]\s*(?P<v>{NUM})",
    "consumed_samples": rf"consumed[ _]samples\s*[:=]\s*(?P<v>{NUM})",
    "global_batch_size": rf"global[ _]batch[ _]size\s*[:=]\s*(?P<v>{NUM})",
    "skipped_iterations": rf"number[ _]of[ _]skipped[ _]iterations\s*[:=]\s*(?P<v>{NUM})",
    "nan_iterations": rf"number[ _]of[ _]nan[ _]iterations\s*[:=]\s*(?P<v>{NUM})",
}
# A value counts only when its field is closed by the next `|`: a line cut mid-number (truncated file) keeps
# the fields before the cut and loses the cut one.
MEGATRON_KEYS = {k: v + r"\s*(?:TFLOPS)?\s*\|" for k, v in MEGATRON_KEYS.items()}

# DeepSpeed PipelineEngine: `steps: 1 loss: 0.0614 iter time (s): 531.283 samples/sec: 0.008`.
DS_PIPE_RE = (
    rf"^\s*steps:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{NUM})\s+iter time \(s\):\s*(?P<t>{NUM})"
    rf"\s+samples/sec:\s*(?P<sps>{NUM})"
)
# DeepSpeed log_dist `[Rank 0] step=40, skipped=2, lr=[5e-05], mom=[...]`: step number and time, no duration.
DS_STEP_RE = r"\[Rank (?P<rank>\d+)\] step=(?P<step>\d+), skipped=(?P<skipped>\d+), lr=\[(?P<lr>[^\],]*)"
# DeepSpeed ThroughputTimer: 2020 `0/2650, SamplesPerSec=13.19`, ≈0.5 `0/40, SamplesPerSec=…, MemAllocated=…`
# (running averages since start), ≥ ≈0.9 `epoch=0/micro_step=80/global_step=40, RunningAvgSamplesPerSec=…,
# CurrSamplesPerSec=…, MemAllocated=…`.
DS_TPUT_OLD_RE = rf"(?:^|\]\s)(?P<epoch>\d+)/(?P<step>\d+), SamplesPerSec=(?P<avg>{NUM})"
DS_TPUT_NEW_RE = (
    rf"epoch=(?P<epoch>\d+)/micro_step=(?P<micro>\d+)/global_step=(?P<step>\d+), "
    rf"RunningAvgSamplesPerSec=(?P<avg>{NUM}), CurrSamplesPerSec=(?P<cur>{NUM})"
)

# torchtitan: `step: 200  loss:  6.1384  [grad_norm: 0.83  ]memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%`
TITAN_RE = rf"(?:^|\s)step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{NUM})\s+(?P<rest>.*(?:memory|tps|wps|tflops|mfu):.*)$"
TITAN_KEYS: dict[str, str] = {
    "grad_norm": rf"grad_norm:\s*(?P<v>{NUM})",
    "memory_gib": rf"memory:\s*(?P<v>{NUM})GiB",
    "tps": rf"(?:tps|wps):\s*(?P<v>{INT_SEP}(?:\.\d+)?)",  # `wps` in 2024 releases
    "tflops": rf"tflops:\s*(?P<v>{NUM})",
    "mfu_pct": rf"mfu:\s*(?P<v>{NUM})%",
}

# nanoGPT `iter 340: loss 5.4983, time 33785.52ms[, mfu 0.96%]`.
NANOGPT_RE = rf"^(?:> )?iter (?P<step>\d+): loss (?P<loss>{NUM}), time (?P<ms>{NUM})ms(?:, mfu (?P<mfu>{NUM})%)?"
# nanochat `step 00010/01000 (1.00%) | loss: 5.3 | ... | dt: 385.12ms | tok/sec: 1,361,355 | mfu: 45.83 | ...`.
NANOCHAT_RE = (
    rf"^step (?P<step>\d+)/(?P<total>\d+) \([\d.]+%\) \| loss: (?P<loss>{NUM}) \|.*?dt: (?P<ms>{NUM})ms"
    rf"(?:.*?tok/sec: (?P<tps>{INT_SEP}))?(?:.*?mfu: (?P<mfu>{NUM}))?"
)
# modded-nanogpt `step:10/1770 [train_loss:…|val_loss:…] train_time:1234ms step_avg:123.4ms` (cumulative time).
MODDED_RE = (
    rf"^step:(?P<step>\d+)/(?P<total>\d+)\s(?:.*?train_loss:(?P<loss>{NUM})\s)?.*?"
    rf"train_time:(?P<cum_ms>{NUM})ms step_avg:(?P<avg>\S+?)ms"
)
# litgpt `iter 10 step 5: loss 2.3, iter time: 456.78ms` / `Epoch 1 | iter 10 step 5 | loss train: 2.3, … | iter time: 456.78 ms`.
LITGPT_RE = rf"iter (?P<step>\d+) step (?P<ostep>\d+)\s*[:|]\s*loss(?: train)?:?\s*(?P<loss>{NUM}).*?iter time:\s*(?P<ms>{NUM})\s*ms"
# llm.c `step    1/74 | train loss 11.012345 | norm 15.4 | lr 1.00e-06 | (123.45 ms | 12345 tok/s)`.
LLMC_RE = (
    rf"^step\s+(?P<step>\d+)/(?P<total>\d+) \| train loss (?P<loss>{NUM}) \|.*?\((?P<ms>{NUM}) ms \| (?P<tps>{NUM}) tok/s\)"
)
# MLPerf logging `:::MLLOG {"namespace": "", "time_ms": 1700000000123, "event_type": "POINT_IN_TIME", "key": "tracked_stats",
# "value": {"throughput": 12.3}, "metadata": {"file": "…", "lineno": 1, "step": 1536}}` (time_ms: epoch UTC).
MLLOG_RE = r":::MLLOG (?P<json>\{.*\})\s*$"

# MaxText `completed step: 9, seconds: 1.341, TFLOP/s/device: 257.9, Tokens/s/device: 36653.2, …, loss: 0.000`.
MAXTEXT_RE = (
    rf"completed step: (?P<step>\d+), seconds: (?P<s>{NUM}), TFLOP/s(?:/device)?: (?P<tflops>{NUM})"
    rf"(?:, Tokens/s/device: (?P<tps>{NUM}))?.*?, loss: (?P<loss>{NUM})"
)
# NeMo 2 `Training epoch 0, iteration 9/99 | lr: … | global_step: 9 | reduced_train_loss: … | train_step_timing in s: 3.9 |`.
NEMO2_RE = r"Training epoch (?P<epoch>\d+), iteration (?P<step>\d+)/(?P<total>\d+)(?P<rest>.*)$"
NEMO2_KEYS: dict[str, str] = {
    "global_step": rf"global_step:\s*(?P<v>{NUM})",
    "loss": rf"reduced_train_loss:\s*(?P<v>{NUM})",
    "step_s": rf"train_step_timing in s:\s*(?P<v>{NUM})",
    "consumed_samples": rf"consumed_samples:\s*(?P<v>{NUM})",
    "lr": rf"\blr:\s*(?P<v>{NUM})",
}
# NeMo Automodel `… | step 9 | epoch 0 | loss 0.6974 | grad_norm 1.54 | lr 1e-05 | mem 24.90 GiB | tps 11278.56(1409.82/gpu) |`.
AUTOMODEL_RE = rf"(?:^|\|\s)step (?P<step>\d+) \| epoch (?P<epoch>\d+) \| loss (?P<loss>{NUM})(?P<rest>.*)$"
AUTOMODEL_KEYS: dict[str, str] = {
    "grad_norm": rf"grad_norm (?P<v>{NUM})",
    "lr": rf"\| lr (?P<v>{NUM})",
    "memory_gib": rf"mem (?P<v>{NUM}) GiB",
    "tps": rf"tps (?P<v>{NUM})",
    "tps_gpu": rf"tps {NUM}\((?P<v>{NUM})/gpu\)",
}
# torchtune StdoutLogger / DiskLogger `Step 5 | loss:2.345 lr:2e-05 tokens_per_second_per_gpu:1234.5 …`.
TORCHTUNE_RE = r"^Step (?P<step>\d+) \| (?P<rest>.*\S.*)$"
TORCHTUNE_KEYS: dict[str, str] = {
    "loss": rf"(?:^|\s)loss:(?P<v>{NUM})",
    "tps_gpu": rf"tokens_per_second_per_gpu:(?P<v>{NUM})",
    "lr": rf"(?:^|\s)lr:(?P<v>{NUM})",
    "grad_norm": rf"grad_norm:(?P<v>{NUM})",
}

# tqdm bars (HF Trainer, accelerate, Lightning, NeMo 1, torchtune): `desc: 12%|███  | 123/1000 [01:02<07:20, 1.99it/s, postfix]`.
# The rate flips between it/s and s/it; pasted bars may be cut (`9.33s/i`), hence the unit by its first letters.
TQDM_RE = (
    r"(?P<desc>.*?)(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<(?P<remain>[\d:?]*)"
    r"(?:,\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>s/it|it/s|s/i|it/|s/|it(?:\]|,|$)|s(?:\]|,|$))?)?(?P<post>.*)$"
)
TQDM_POST_KEYS: dict[str, str] = {
    "loss": rf"[,\s](?:train_)?loss(?:_step)?=(?P<v>{NUM})",
    "reduced_loss": rf"reduced_train_loss=(?P<v>{NUM})",
    "global_step": rf"global_step=(?P<v>{NUM})",
    "step_s": rf"train_step_timing(?: in s)?=(?P<v>{NUM})",
    "consumed_samples": rf"consumed_samples=(?P<v>{NUM})",
}
TORCHTUNE_DESC_RE = rf"^\s*(?P<epoch>\d+)\|(?P<step>\d+)\|Loss: (?P<loss>{NUM})"
# Bars that are no training steps: evaluation, and data/checkpoint chores (`Loading checkpoint shards`, datasets `Map`).
EVAL_DESC_RE = (
    r"(?i)eval|valid|test|predict|sanity|loading|shards|download|upload|\bmap\b|filter|tokeniz|generat|"
    r"preprocess|processing|saving|extract|convert|checkpoint|warmup|benchmark"
)
# Lightning RichProgressBar `Epoch 0/9  ━━━━━━━━━━ 50/100 0:00:10 • 0:00:10 4.95it/s v_num: 0 train_loss: 1.23`.
RICH_BAR_RE = (
    r"^Epoch (?P<epoch>\d+)/(?P<epochs>\d+)\s+\S*\s*(?P<n>\d+)/(?P<total>\d+)\s+[\d:]+\s*•\s*\S+\s+(?P<rate>[\d.]+)"
    r"(?P<unit>it/s|s/it)(?P<post>.*)$"
)
HF_TOTAL_STEPS_RE = r"Total optimization steps = (?P<n>[\d,]+)"

# HF Trainer logged dicts, values plain (`{'loss': 2.119, …}`) or quoted (newer releases `{'loss': '2.119', …}`).
HF_DICT_RE = r"^\s*\{\s*['\"][\w/.-]+['\"]\s*:\s*.*\}\s*$"
HF_KEYS: dict[str, str] = {
    "loss": rf"['\"]loss['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "grad_norm": rf"['\"]grad_norm['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "lr": rf"['\"]learning_rate['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "epoch": rf"['\"]epoch['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "step": r"['\"](?:step|global_step)['\"]\s*:\s*['\"]?(?P<v>\d+)",
    "step_runtime": rf"['\"]train_step_runtime['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "step_sps": rf"['\"]train_step_samples_per_second['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "train_runtime": rf"['\"]train_runtime['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "train_sps": rf"['\"]train_samples_per_second['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "train_steps_ps": rf"['\"]train_steps_per_second['\"]\s*:\s*['\"]?(?P<v>{NUM})",
    "train_loss": rf"['\"]train_loss['\"]\s*:\s*['\"]?(?P<v>{NUM})",
}

# MosaicML Composer ConsoleLogger: `[batch=1/10]:` (older `[epoch=1][batch=16/100]:`) then indented
# `         Train <key>: <value>` lines. `time/*` counters are in hours (cumulative), `wall_clock/*` in seconds.
COMPOSER_HDR_RE = r"^(?:\[epoch=(?P<epoch>\d+)\])?\[batch=(?P<step>\d+)/(?P<total>\d+)\]:\s*$"
COMPOSER_ENTRY_RE = r"^\s+(?P<split>Train|Eval) (?P<key>[^:]+): (?P<val>\S+)\s*$"

# ----------------------------------------------------------------------------- timers (phase breakdowns)

# Single-line timers: Megatron ≤ 2022 / GPT-NeoX `time (ms) | forward-compute: 58.16 | …` (max over ranks) and
# DeepSpeed wall_clock_breakdown `[Rank 0] time (ms) | fwd: … | bwd: … | step: …` (rank 0's own values).
TIMER_LINE_RE = r"(?:^|\]\s*|rank=\d+\s+)time \(ms\)\s*\|(?P<pairs>.*)$"
TIMER_PAIR_RE = rf"[A-Za-z_][\w\- ]*?:\s*(?:{NUM})"
# Megatron timer blocks: `(min, max) time across ranks (ms):` + `    <name> ....: (<min>, <max>)`,
# `max time across ranks (ms):` + `    <name> ....: <max>`, `times across ranks (ms):` + `  <name>:` + `     rank  N: <ms>`.
TIMER_HDR_RE = r"^\s*(?P<mode>\(min, max\) time|max time|min time|times) across ranks \(ms\):\s*$"
TIMER_MINMAX_RE = rf"^\s+(?P<name>[^\s(][^(]*?)\s*\.*:\s*\(\s*(?P<min>{NUM}),\s*(?P<max>{NUM})\s*\)\s*$"
TIMER_SINGLE_RE = rf"^\s+(?P<name>[^\s(][^:(]*?)\s*\.*:\s*(?P<v>{NUM})\s*$"
TIMER_NAME_RE = r"^\s+(?P<name>[^\s:][^:]*?):\s*$"
TIMER_RANK_RE = rf"^\s+rank\s+(?P<rank>\d+):\s*(?P<v>{NUM})\s*$"

# Timers that are not part of a training step (setup, checkpointing, evaluation): a block of only these is
# not attached to a step.
NON_STEP_TIMERS = (
    "model-and-optimizer-setup",
    "train/valid/test-data-iterators-setup",
    "load-checkpoint",
    "save-checkpoint",
    "evaluate",
    "interval-time",
)

# Timer names → phase columns, most specific first (values in ms; for min/max blocks the max is used,
# which is what the single-line form prints). `forward-backward` (Megatron core) has no column of its own.
PHASES: dict[str, tuple[str, ...]] = {
    "forward_s": ("forward-compute", "forward", "fwd", "fwd_microstep"),
    "backward_s": (
        "backward-compute",
        "bwd_inner",
        "backward-backward",
        "backward_inner",
        "bwd_inner_microstep",
        "backward_inner_microstep",
        "backward",
        "bwd",
        "bwd_microstep",
        "backward_microstep",
    ),
    "optimizer_s": ("optimizer", "step", "optimizer_step", "step_microstep", "optimizer-inner-step"),
    "comm_wait_s": (
        "all-grads-sync",
        "backward-params-all-reduce",
        "bwd_allreduce",
        "backward-allreduce",
        "backward_allreduce",
        "grads-all-reduce",
        "bwd_allreduce_microstep",
        "backward_allreduce_microstep",
        "allreduce",  # Megatron 2020 `time (ms) | … | allreduce: …`
        "all-reduce",
    ),
    "data_s": ("batch-generator", "batch generator", "batch_generator", "data", "dataloader"),
}

# ----------------------------------------------------------------------------- straggler detectors

# Megatron-Core StragglerDetector (`--log-straggler`) and its ports (savanna lost the leading `[`).
STRAGGLER_METRICS = ("Rtt", "Pwr", "Tmp", "Utl", "Clk", "DRtt", "Etpt")
STRAGGLER_ITEM_RE = r"(?:^|[|\s]){metric}/Rnk: (?P<v>{num})(?P<unit>ms|W|C|%|MHz|TF)/(?P<rank>\d+)"
STRAGGLER_LINE_RE = r"M[nx](?:Rtt|Pwr|Tmp|Utl|Clk|DRtt|Etpt)/Rnk: "
STRAGGLER_TOPK_RE = r"\^\^\^\^ (?P<which>Bottom|Top)\s+(?P<k>\d+) Ranks with (?:lowest|highest)\s+Etpt\(TF\):(?P<list>.*)$"
# Composer prototype GlobalStragglerDetector: `Train MinThroughput/Rank: 129.44TF/0`.
COMPOSER_STRAGGLER_RE = rf"^\s*(?:Train )?(?P<stat>Min|Max)(?P<metric>[A-Za-z]+)/Rank: (?P<v>{NUM})(?P<unit>[A-Za-z%]*)/(?P<rank>\d+)\s*$"
# NVIDIA resiliency-ext (NeMo / Megatron-Bridge): headers, sub-headers, per-rank scores, warnings, dict summaries.
NVRX_HDR_RE = r"GPU (?P<kind>relative|individual) performance:\s*$"
NVRX_SUB_RE = r"^\s*(?P<role>Worst|Best) performing \d+/\d+ ranks:\s*$"
NVRX_RANK_RE = rf"^\s+Rank=(?P<rank>\d+) Node=(?P<node>\S+) Score=(?P<score>{NUM})\s*$"
NVRX_WARN_RE = r"STRAGGLER DETECTION WARNING: (?P<what>.*?)\. Affected ranks: (?P<ranks>[\[{].*[\]}])"
NVRX_OTHER_RE = r"gpu_(?:relative|individual)_perf scores: \{|Straggler report processing time:"

# ----------------------------------------------------------------------------- understood, no row

# Lines of these frameworks that carry no step: counted as parsed, yield nothing.
NOISE_RES: tuple[str, ...] = (
    r"\(?after \d+ iterations\)? memory \(MB\)",  # Megatron/NeoX memory report
    r"validation loss at iteration \d+",
    r"^\s*-{20,}\s*$",
    r"(?:saving|successfully saved) checkpoint (?:at|from) iteration",
    r"^\s*Evaluating (?:iter \d+/\d+|on \d+ samples)",
    r"^\[(?:after|before) [^\]]+\] datetime: ",
    r"^(?:training|done with setup) \.\.\.\s*$",
    r"^Step Time : [\d.]+s",  # Megatron-Bridge, repeats the iteration line's time
    rf"^step \d+: train loss {NUM}, val loss {NUM}",  # nanoGPT eval
    r"^\s+(?:Num examples|Num Epochs|Instantaneous batch size per device|Total train batch size"
    r"|Gradient Accumulation steps|Total optimization steps|Number of trainable parameters) = ",
    r"^\s*\*{5} Running (?:training|Evaluation|Prediction) \*{5}",
    r"^Number of parameters in .* in billions:",
    r"^Theoretical memory footprints:",
    r"^\s*> number of parameters on \(tensor, pipeline\) model parallel rank",
    # Megatron's start-up preamble ('> initializing torch distributed ...', '> initialized tensor model
    # parallel with size 8', '> setting random seeds to 1234 ...', '> compiling dataset index builder ...')
    r"^\s*> (?:initializ|setting |compiling |building |finished |done with )",
    r"^\s*\*{5} (?:train|eval|predict|test) metrics \*{5}",  # HF Trainer metrics block
    r"^\s+(?:epoch|total_flos|(?:train|eval|predict|test)_\w+)\s+=\s+\S",
)

# ----------------------------------------------------------------------------- triage

# Every line any grammar above understands contains one of these literals, a date, or ends with `:`.
# Other lines (NCCL INFO, tensors, tracebacks) are blanked before the grammars run: they stay in place
# (so blocks and neighbours keep their meaning) but cost nothing more.
TRIAGE_LITERALS = (
    "iteration", "steps: ", "step=", "step:", "step ", "Step ", "SamplesPerSec", "time (ms)", "across ranks",
    "iter ", "%|", "{", "[batch=", "Train ", "Eval", "/Rnk", "/Rank", "^^^^", "performance", "performing",
    "Score=", "STRAGGLER", "Straggler", "Training epoch", "datetime:", "-----", "checkpoint", "memory (MB)",
    "Num ", "Total ", "Instantaneous", "Gradient Accumulation", "Running ", "Number of parameters",
    "Theoretical memory", "number of parameters", "..", "training", "done with setup", "Epoch ", "rank ",
    "train_time:", " | ", ":::MLLOG", "> ",
)
TRIAGE_DATE_RE = r"\d{4}-\d\d-\d\d"

# ----------------------------------------------------------------------------- ASCII classes

_ASCII_CLASS = {
    "d": "[0-9]",
    "s": r"[\t\n\x0B\f\r\x20]",
    "w": "[0-9A-Za-z_]",
    "D": "[^0-9]",
    "S": r"[^\t\n\x0B\f\r\x20]",
    "W": "[^0-9A-Za-z_]",
    "b": r"(?-u:\b)",
    "B": r"(?-u:\B)",
}
_ASCII_MEMO: dict[str, str] = {}


class ThreadFlag(threading.local):
    """A switch of each thread, off until turned on there (`value`; the object is true when it is on): a
    module's "the lines being read are ASCII" (`step_log.ascii_scope`, `_common.ascii_scope`), which two
    threads reading other lines at once must not share (a Dask worker runs its tasks in threads)."""

    value = False

    def __bool__(self) -> bool:
        return self.value

    @contextlib.contextmanager
    def scope(self, on: bool) -> Iterator[None]:
        """The switch set to `on` (in this thread) inside the block, back to what it was after it."""
        outer = self.value
        self.value = bool(on)
        try:
            yield
        finally:
            self.value = outer


def ascii_classes(pattern: str) -> str:
    """`pattern` with its Perl classes and word boundaries written for ASCII text (`\\d` → `[0-9]`, `\\s` →
    `[\\t\\n\\x0B\\f\\r\\x20]`, `\\w` → `[0-9A-Za-z_]`, their negations, `\\b`/`\\B` → ASCII boundaries): on a text
    without non-ASCII characters it matches exactly where `pattern` does, with the same groups (Unicode's
    classes hold no other ASCII character). Such a regex compiles ~5-15x faster (no Unicode tables): polars
    keeps only the last 32 regexes compiled, and a range's reading uses ~100, so each is compiled again on
    every range. A class inside a class is written as a nested class (`[^\\s(]` → `[^[\\t\\n\\x0B\\f\\r\\x20](]`)."""
    got = _ASCII_MEMO.get(pattern)
    if got is not None:
        return got
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt in _ASCII_CLASS:
                out.append(_ASCII_CLASS[nxt])
                i += 2
                continue
            if nxt in "pPx" and i + 2 < n and pattern[i + 2] == "{":  # (a braced escape: copied whole)
                j = pattern.index("}", i) + 1
                out.append(pattern[i:j])
                i = j
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    got = "".join(out)
    _ASCII_MEMO[pattern] = got
    return got
