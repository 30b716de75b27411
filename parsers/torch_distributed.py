"""PyTorch distributed: ProcessGroupNCCL watchdog/heartbeat output, NCCL errors raised to Python,
torchrun / torch.distributed.elastic agent messages, and Flight Recorder dumps (JSON text, or pickle
through `parse_bytes` with a restricted unpickler).

The line grammar is written once here as module-level regex constants (`C10_RE`, `WATCHDOG_RE`, ...)
and applied by `torch_events`, which `parsers.nccl` also calls: a training log mixes NCCL lines,
watchdog lines and tracebacks, and whichever of the two parsers wins the file reads both families
(`parsers.nccl.parse_family`). This module's `parse` adds Flight Recorder dumps and torchfrtrace
reports on top.

Rows:
- events (source 'torch'): watchdog_timeout, watchdog_work_status (last enqueued/completed work),
  watchdog_terminated, heartbeat_timeout, watchdog_stuck, process_abort, nccl_comm_aborted, desync_report
  (TORCH_NCCL_DESYNC_DEBUG: code never_joined | joined_not_finished | finished_not_joined_next, detail
  lagging_ranks and seq; `rank` is the reporter), nccl_error
  (ncclRemoteError/ncclSystemError/DistBackendError/`NCCL error in:`), nccl_last_error (the WARN text
  PyTorch quotes after `Last error:`, classified like an NCCL WARN), store_timeout, worker_failed
  (torchrun `failed (exitcode: …)` and ChildFailedError `Root Cause` blocks), worker_signal,
  worker_group_restart, rendezvous (`Result:` block), python_exception, fr_missing_ranks (torchfrtrace).
  `rank` is the global rank of the `[rankN]:`/launcher prefix when present, else the process-group
  rank of `[Rank N]`/`[PG … Rank N]`; `detail` keeps both (`global_rank`, `pg_rank`, `pg`, `pg_name`).
- comms (record 'flight_recorder'): one row per Flight Recorder entry: comm_id = 'pg<pg_id>', rank =
  the dump's rank (top-level `rank`, else `_rank_<n>`/trailing digits of the file name), ts =
  time_created_ns, detail = {seq (collective_seq_id), p2p_seq, op (profiling_name), state, pg_name,
  pg_desc, record_id, time_started_ns, time_completed_ns, timeout_ms, is_p2p, input_sizes}; record
  'flight_recorder_status': one row per pg_status entry (last enqueued/started/completed).
  `forensics.hangs.culprit_from_flight_recorder` reads these.
"""

from __future__ import annotations

import ast
import io
import json
import pickle
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import polars as pl

from parsers._common import arx, format_str, to_json
from parsers._sniff import cheap_requirements, head_text, holds, probed, required_literals
from parsers.base import FILE_SPAN, BatchContext, FileContext, NotTogether, ParseResult

NAME = "torch-distributed"
DESCRIPTION = "PyTorch distributed: ProcessGroupNCCL watchdog, torchrun/elastic agent, Flight Recorder dumps"
TABLES = ("events", "comms", "inventory")
FILENAME_HINTS = ("*nccl_trace_rank*", "*flight*recorder*", "*torchrun*", "*elastic*", "*fr_trace*", "*trace_rank_*")
DETECTS = (
    "ProcessGroupNCCL watchdog/heartbeat lines, torch.distributed.elastic agent lines, Flight Recorder "
    "dumps (JSON with pg_config/pg_status/entries, or a pickle) and torchfrtrace reports"
)
PRIORITY = 20

# ----------------------------------------------------------------------------- grammar (shared with nccl.py)

C10_RE = (
    r"^\[?(?P<sev>[IWEF])(?:(?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?)(?: +(?P<tid>\d+))? ?)? ?"
    r"(?P<src>[\w./-]+\.(?:cpp|hpp|cc|h|py)):(?P<srcline>\d+)\] ?(?P<msg>.*)$"
)
"""c10/glog line: `[E ProcessGroupNCCL.cpp:737] msg` (≤2.1), `[E1206 18:44:12.715298746 X.cpp:607] msg` (2.4+),
glog `E0101 12:00:00.123456 1234 api.py:869] msg` (after the `[rankN]:` envelope is stripped)."""
PYLOG_RE = r"^(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>torch[\w.]*|__main__):(?P<msg>.*)$"
ELASTIC_RE = (
    r"^\[(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] (?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) "
    r"(?P<logger>[\w.]+): (?P<msg>.*)$"
)
PG_RE = r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>\d+))?(?: ?\((?P<pg_name>[^)]*)\))? Rank (?P<pg_rank>\d+)\]"
RANK_TAG_RE = r"\[Rank (?P<pg_rank>\d+)\]"
WATCHDOG_RE = (
    r"Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
    r"(?:, NumelIn=(?P<numel_in>-?\d+), NumelOut=(?P<numel_out>-?\d+))?, Timeout\(ms\)=(?P<timeout_ms>\d+)\)"
    r" ran for (?P<ran_ms>\d+) milliseconds before timing out"
)
WORK_STATUS_RE = (
    r"(?:detected by watchdog at work|Timeout at NCCL work|detected by watchdog at work sequence id): "
    r"(?P<seq>\d+)(?:,| PG status:) last enqueued (?:NCCL )?work: (?P<enq>-?\d+), "
    r"last completed (?:NCCL )?work: (?P<comp>-?\d+)"
)
TERMINATED_RE = r"(?:NCCL|Process group) watchdog thread terminated with exception: (?P<what>.*)$"
HEARTBEAT_RE = r"Heartbeat monitor timed out!.*?workMetaList_\.size\(\)\s*=\s*(?P<work>\d+)"
STUCK_RE = r"watchdog got stuck for (?P<secs>\d+) seconds"
ABORT_TEXT = "taking the entire process down"
TERMINATE_TEXT = "terminate called "
TERMINATE_RE = (
    r"^terminate called (?:after throwing an instance of '[^']*'|without an active exception|recursively)\s*$"
)
"""libstdc++'s head of the abort text of an uncaught C++ exception (`what():` and the exception's message follow
it): the process dies by SIGABRT; the line names the exception's type only (`c10::DistBackendError`), so it is
no NCCL error of its own (the `what():` line under it carries the message)."""
COMM_ABORTED_RE = r"NCCL communicator was aborted on rank (?P<rank>\d+)"
DESYNC_RANKS_RE = (
    r"(?:ranks \[(?P<never>[\d, ]+)\] are the lagging ranks that caused this timeout|"
    r"\[(?P<unfinished>[\d, ]+)\] joined but didn't finish collective #(?P<useq>\d+)|"
    r"\[(?P<unjoined>[\d, ]+)\] finished collective #\d+, but didn't join collective #(?P<jseq>\d+))"
)
"""TORCH_NCCL_DESYNC_DEBUG report lines (TraceUtils.h retrieveDesyncReport), often on their own `\t - ` lines."""
NCCL_ERROR_RE = (
    r"(?P<exc>[\w.]*(?:Error|Exception))?:? ?(?:NCCL error in: (?P<where>[^,\s]+), (?P<reason>[^,]+?)"
    r"(?:, NCCL [Vv]ersion (?P<ver>[\w.+-]+))?(?:$|\n|,)|(?P<code>nccl(?:Remote|System|Internal|UnhandledCuda"
    r"|InvalidUsage|InvalidArgument)Error)\b:? ?(?P<text>.*))"
)
DIST_BACKEND_RE = r"(?P<exc>torch\.distributed\.\w*(?:DistBackendError|DistError)|DistBackendError)\b:? ?(?P<text>.*)$"
LAST_ERROR_TEXT = "Last error:"
STORE_RE = r"(?P<exc>DistStoreError|DistNetworkError)\b:? ?(?P<text>.*)$"
STORE_WAIT_RE = r"Timed out after (?P<secs>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<expected>\d+) clients joined"
STORE_CONNECT_RE = r"timed out after (?P<ms>\d+)ms while trying to connect to \((?P<host>[^,]+), (?P<port>\d+)\)"
FAILED_RE = (
    r"failed \(exitcode: (?P<exitcode>-?\d+)\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\) "
    r"of binary: (?P<binary>\S+)"
)
SIGNAL_RE = r"Sending process (?P<pid>\d+) closing signal (?P<signal>SIG\w+)"
RESTART_RE = (
    r"\[(?P<role>\w+)\] Worker group FAILED\. (?P<left>\d+)/(?P<max>\d+) attempts left; will restart worker group"
)
RESULT_HEAD_TEXT = "Rendezvous complete for workers. Result:"
KV_EQ_RE = r"^\s{2,}(?P<key>[a-z_]+)=(?P<value>.*)$"
KV_COLON_RE = r"^\s{2,}(?P<key>[a-z_]+)\s*: ?(?P<value>.*)$"
ROOT_CAUSE_RE = r"^(?:Root Cause \(first observed failure\):|Failures:|\[\d+\]:)\s*$"
EXCEPTION_RE = r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))(?::\s?(?P<text>.*))?$"
TRACEBACK_RE = (
    r"^(?:Traceback \(most recent call last\):|\s+File \".*\", line \d+|Exception raised from \w+ at |"
    r"frame #\d+: |=+$|-+$|\S+ FAILED$|\s+<NO_OTHER_FAILURES>$|\s*\^+\s*$|"
    r"During handling of the above exception|The above exception was the direct cause)"
)
FRTRACE_RE = r"^Not all ranks joining collective (?P<seq>\d+) at entry (?P<entry>\d+)"
FRTRACE_KV_RE = (
    r"^(?P<key>group info|collective|missing ranks|input sizes|output sizes|expected ranks|collective state|"
    r"collective stack trace):\s*(?P<value>.*)$"
)

TORCH_LITERALS = (
    "ProcessGroupNCCL",
    "Watchdog",
    "watchdog",
    "NCCL error",
    "nccl",
    "torch.distributed",
    "torch/distributed",
    "elastic",
    "Rendezvous",
    "exitcode",
    "Traceback",
    "Error",
    "Exception",
    "frame #",
    "File \"",
    "lagging",
    "collective #",
)

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


# ----------------------------------------------------------------------------- sniff


_SNIFF_STRONG = re.compile(
    r"torch\.distributed\.run|elastic_operator|c10d_rendezvous_backend|local_elastic_agent|api: \[default\] |"
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL\.cpp:\d+\]|torch\.distributed\.elastic|"
    r"Heartbeat monitor timed out|Rendezvous complete for workers|failed \(exitcode: -?\d+\) local_rank|"
    r"Not all ranks joining collective|last enqueued NCCL work"
)
_SNIFF_FR = re.compile(r'["\']pg_status["\']\s*:|["\']pg_config["\']\s*:|["\']collective_seq_id["\']\s*:')
_SNIFF_FR_LITS = required_literals(_SNIFF_FR)
_SNIFF_STRONG_LITS = required_literals(_SNIFF_STRONG)
# the same gates as several requirements each, tested cheapest first (`parsers._sniff.cheap_requirements`)
_SNIFF_FR_REQS = ((probed('"'), probed("'")), *cheap_requirements(_SNIFF_FR))
"""(a flight-recorder key opens with a quote: two memchr rule it out on most heads)"""
_SNIFF_STRONG_COVER = (
    "elastic", "endezvous", "ollective", "torch.distributed.run", "[default]", "ProcessGroupNCCL.cpp:",
    "Heartbeat", "local_rank", "enqueued",
)  # fmt: skip
"""Every alternative of `_SNIFF_STRONG` holds one of these (nine searches instead of thirteen: 'elastic' is in
three alternatives, 'endezvous' and 'ollective' in two each; tests/parsers/test_sniff_equiv_s7ib.py)."""
_SNIFF_STRONG_REQS = (tuple(map(probed, _SNIFF_STRONG_COVER)), *cheap_requirements(_SNIFF_STRONG))
_NCCL_LINE = re.compile(r"^\S+:\d+:\d+ \[\d+\] .*NCCL (?:INFO|WARN|TRACE)", re.M)


def sniff(head: bytes, name: str) -> float:
    """Score PyTorch-distributed content; yield to nccl when NCCL debug lines dominate the head."""
    if is_pickle(head):
        return 0.9 if b"entries" in head[:65536] or b"pg_config" in head[:65536] else 0.5
    text = head_text(head)
    # (each regex tried only when a literal it needs is there: a scan for a literal is much cheaper)
    if holds(_SNIFF_FR_REQS, text) and _SNIFF_FR.search(text):
        return 0.95
    strong = len(_SNIFF_STRONG.findall(text)) if holds(_SNIFF_STRONG_REQS, text) else 0
    if not strong:
        return 0.0
    nccl_lines = len(_NCCL_LINE.findall(text))
    if nccl_lines > 3 * strong:
        return 0.5  # a training log dominated by NCCL lines: nccl wins (it reads torch lines too)
    lines = [ln for ln in text.splitlines()[:400] if ln.strip() and not ln.startswith("#SOURCE")]
    if lines and strong / len(lines) < 0.1:
        return 0.6  # a few torch lines in another log (step lines): that log's parser should win
    return 0.9 if strong >= 2 else 0.75


def is_pickle(head: bytes) -> bool:
    """True when the bytes open with a pickle protocol 2-5 header (`\\x80` + protocol byte)."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


# ----------------------------------------------------------------------------- line events


def _mmdd_time(mmdd: pl.Expr, hms: pl.Expr, year: int | None) -> pl.Expr:
    """c10/glog `MMDD HH:MM:SS.fffffffff` (no year) → UTC datetime using `year`, else null."""
    if year is None:
        return pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    frac = hms.str.extract(arx(r"\.(\d+)$"), 1).fill_null("0").str.slice(0, 6).str.pad_end(6, "0")
    hms_whole = hms.str.extract(arx(r"^(\d\d:\d\d:\d\d)"), 1)
    s = format_str("{}{} {}.{}", pl.lit(str(year)), mmdd.str.pad_start(4, "0"), hms_whole, frac)
    return s.str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S%.f", strict=False).dt.replace_time_zone("UTC")


def _drop_nulls(js: pl.Expr) -> pl.Expr:
    from parsers.nccl import drop_json_nulls

    return drop_json_nulls(js)


def _start(rx: str) -> str:
    """A line-start regex cut before its free-text tail, so `contains` stops early (speed)."""
    return rx.split("(?P<msg>")[0]


C10_START = _start(C10_RE)
PYLOG_START = _start(PYLOG_RE)
ELASTIC_START = _start(ELASTIC_RE)
EXCEPTION_START = r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)(?::|\s*$)"
NCCL_ERROR_START = r"^(?:[\w.]+: )?(?:NCCL error in: |nccl(?:Remote|System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b)"


def _torch_line_starts() -> str:
    """The line starts `torch_understood` accepts, as one alternation (named groups made non-capturing):
    one regex pass instead of fourteen."""
    pats = [
        C10_START,
        PYLOG_START,
        ELASTIC_START,
        TRACEBACK_RE,
        EXCEPTION_START,
        ROOT_CAUSE_RE,
        FRTRACE_RE,
        FRTRACE_KV_RE,
        r"^(?:DistStoreError|DistNetworkError|torch\.distributed)",
        NCCL_ERROR_START,
        "^" + re.escape(LAST_ERROR_TEXT),
        r"^\s*-?\s*(?:To our best knowledge|\[[\d, ]+\] (?:joined|finished)|Snapshot of ranks)",
        # libstdc++'s abort text of an uncaught C++ exception, and the hints PyTorch prints under CUDA errors
        r"^\s*what\(\):\s",
        TERMINATE_RE,
        r"^(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing CUDA_LAUNCH_BLOCKING=1"
        r"|Compile with `TORCH_USE_CUDA_DSA`)",
    ]
    return "|".join(f"(?:{re.sub(r'[(][?]P<[A-Za-z_][A-Za-z_0-9]*>', '(?:', p)})" for p in pats)


TORCH_LINE_START = _torch_line_starts()


def torch_understood(body: pl.Expr) -> pl.Expr:
    """Boolean: the line belongs to the PyTorch-distributed grammar (c10/glog and elastic log lines,
    tracebacks, exception lines, ChildFailedError/torchfrtrace blocks). Matched by line starts only:
    watchdog and work-status messages always come inside a c10 line."""
    return body.str.contains(arx(TORCH_LINE_START))


def _gated(df: pl.DataFrame, literals: tuple[str, ...], pattern: str) -> pl.Series:
    """`body.str.contains(pattern)` over `df`, the regex run only on rows holding one of `literals` (each
    match of `pattern` contains one of them); other rows False (null where body is null)."""
    body = df.get_column("body")
    pre = body.str.contains_any(list(literals))
    idx = pre.fill_null(False).arg_true()
    out = pl.Series("hit", [False] * df.height, dtype=pl.Boolean)
    if len(idx):
        out = out.scatter(idx, body.gather(idx).str.contains(arx(pattern)))
    if body.null_count():
        out = pl.select(pl.when(body.is_null()).then(None).otherwise(out)).to_series()
    return out


_GATE_ROWS = 4000
"""`_Gate` looks for literals in the text of up to this many lines (on more, every regex just runs)."""


@cache
def _gate_literals(pattern: str) -> tuple[str, ...] | None:
    return required_literals(pattern)


@cache
def _groups_dtype(pattern: str) -> pl.DataType:
    return pl.Series([], dtype=pl.String).str.extract_groups(pattern).dtype


class _Gate:
    """`body.str.contains` / `extract` / `extract_groups` over a column of bodies (a few lines, no null),
    as a constant (False, null) when no line holds a literal every match of the regex needs
    (`required_literals`): an exact shortcut that spares polars compiling the regex (it keeps only 32)."""

    def __init__(self, bodies: pl.Series) -> None:
        small = len(bodies) <= _GATE_ROWS and not bodies.null_count()
        self.text = "\n".join(bodies.to_list()) if small else None

    def _may(self, pattern: str) -> bool:
        if self.text is None:
            return True
        lits = _gate_literals(pattern)
        return lits is None or any(x in self.text for x in lits)

    def contains(self, pattern: str) -> pl.Expr:
        return pl.col("body").str.contains(arx(pattern)) if self._may(pattern) else pl.lit(False)

    def groups(self, pattern: str) -> pl.Expr:
        if self._may(pattern):
            return pl.col("body").str.extract_groups(arx(pattern))
        return pl.lit(None, dtype=_groups_dtype(pattern))

    def gated(self, df: pl.DataFrame, literals: tuple[str, ...], pattern: str) -> pl.Series | pl.Expr:
        """`_gated(df, literals, pattern)` (`df`: the bodies' frame), False when no line holds a literal."""
        if self.text is not None and not any(x in self.text for x in literals):
            return pl.lit(False)
        return _gated(df, literals, pattern)

    def extract(self, pattern: str, group: int) -> pl.Expr:
        if self._may(pattern):
            return pl.col("body").str.extract(arx(pattern), group)
        return pl.lit(None, dtype=pl.String)


def torch_events(frame: pl.DataFrame, ctx: FileContext) -> tuple[pl.DataFrame, pl.Series]:
    """Extract PyTorch-distributed events from a prepared frame (see `parsers.nccl.prepare`).

    Args:
        frame: columns line, text, body, env_rank, env_rank_source, env_host, pre_ts, cont (continuation
            lines are already joined into `body` of the line they continue).
        ctx: the file context.

    Returns:
        (events frame with the events table's columns, boolean Series: line understood by this grammar).
    """
    body = pl.col("body")
    # the source line Python prints under a `File "…", line N` frame is part of the traceback
    after_file = body.shift(1).fill_null("").str.contains(arx(r'^\s+File "')) & body.str.contains(
        arx(r"^\s{4,}\S")
    )
    # NCCL-prefixed lines (`_nccl`, set by parsers.nccl) are none of this grammar's: skip them early
    other = frame.filter(~pl.col("_nccl")) if "_nccl" in frame.columns else frame
    ok = other.select(
        "line", _ok=(torch_understood(body) | block_lines(other) | after_file).fill_null(False) | pl.col("cont")
    )
    if other.height == frame.height:  # (no NCCL-prefixed line: `ok` is per line of `frame` already)
        understood = ok.get_column("_ok").fill_null(False)
    else:
        understood = (
            frame.select("line")
            .join(ok, on="line", how="left", maintain_order="left")
            .get_column("_ok")
            .fill_null(False)
        )
    year = ctx.year_hint or (ctx.collected_at.year if ctx.collected_at else None)
    cand = other.filter(
        # comments / annotations quoting log text are no events (one filter: the rows are gathered once)
        ~pl.col("cont")
        & ~body.str.starts_with("#")
        & body.str.contains_any(list(TORCH_LITERALS) + ["exitcode", "Sending process"])
    )
    parts = _line_events(cand, ctx, year) if cand.height else []  # (no candidate line: no rule can fire)

    events = [*parts, *_block_events(frame, ctx), *_frtrace_events(frame, ctx)]
    out = pl.concat(events, how="diagonal_relaxed") if events else pl.DataFrame()
    return out, understood


def _line_events(cand: pl.DataFrame, ctx: FileContext, year: int | None) -> list[pl.DataFrame]:
    """Events of the one-line rules (watchdog, work status, NCCL errors, store, worker failures, exceptions) from
    the candidate lines of `torch_events`; each line fires the first rule it matches."""
    body = pl.col("body")
    may = _Gate(cand.get_column("body"))
    base = cand.with_columns(
        # the line start holds every field read from C10_RE (its `msg` tail always matches): cheaper to extract
        c10=may.groups(C10_START),
        el=may.groups(ELASTIC_RE),
        pg=may.groups(PG_RE),
        rank_tag=may.extract(RANK_TAG_RE, 1).cast(pl.Int32, strict=False),
    )
    c10_ts = _mmdd_time(pl.col("c10").struct.field("mmdd"), pl.col("c10").struct.field("hms"), year)
    el_ts = (
        pl.col("el")
        .struct.field("date")
        .str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S,%3f", strict=False)
        .dt.replace_time_zone("UTC")
    )
    base = base.with_columns(
        ts=pl.coalesce(pl.col("pre_ts"), c10_ts, el_ts),
        pg_id=pl.col("pg").struct.field("pg").cast(pl.Int32, strict=False),
        pg_name=pl.col("pg").struct.field("pg_name"),
        pg_rank=pl.coalesce(pl.col("pg").struct.field("pg_rank").cast(pl.Int32, strict=False), pl.col("rank_tag")),
    ).with_columns(
        ts_quality=pl.when(pl.col("pre_ts").is_not_null())
        .then(pl.col("pre_ts_quality"))
        .when(pl.col("ts").is_not_null() & pl.col("el").struct.field("date").is_not_null())
        .then(pl.lit("local_assumed_utc"))
        .when(pl.col("ts").is_not_null())
        .then(pl.lit("year_inferred"))
        .otherwise(pl.lit("none")),
    )
    parts: list[pl.DataFrame] = []

    def emit(df: pl.DataFrame, kind: str | pl.Expr, severity: str | pl.Expr, code: pl.Expr, **detail: pl.Expr) -> None:
        if df.height == 0:
            return
        parts.append(
            df.select(
                "ts",
                "ts_quality",
                node=pl.coalesce(pl.col("env_host"), pl.lit(ctx.node)),
                rank=pl.coalesce(pl.col("env_global_rank"), pl.col("pg_rank"), pl.col("env_rank")),
                source=pl.lit("torch"),
                kind=kind if isinstance(kind, pl.Expr) else pl.lit(kind),
                code=code.cast(pl.String),
                severity=severity if isinstance(severity, pl.Expr) else pl.lit(severity),
                message=pl.col("text"),
                detail=pl.struct(
                    global_rank=pl.col("env_global_rank"),
                    launcher_rank=pl.col("env_rank"),
                    launcher=pl.col("env_rank_source"),
                    pg_rank=pl.col("pg_rank"),
                    pg=pl.col("pg_id"),
                    pg_name=pl.col("pg_name"),
                    **detail,
                ).struct.json_encode().pipe(_drop_nulls),
                file=pl.lit(ctx.path),
                line=pl.col("line"),
            )
        )

    # each rule's match is evaluated once over the candidates (the rules below test `~done & hit`)
    base = base.with_columns(
        _h_wd=may.contains(WATCHDOG_RE),
        _h_ws=may.contains(WORK_STATUS_RE),
        _h_term=may.gated(base, ("watchdog thread terminated with exception: ",), TERMINATED_RE),
        _h_hb=may.contains(HEARTBEAT_RE),
        _h_st=may.contains(STUCK_RE),
        _h_ca=may.contains(COMM_ABORTED_RE),
        _h_ab=body.str.contains(ABORT_TEXT, literal=True),
        _h_dr=may.contains(DESYNC_RANKS_RE),
        _h_ne=may.gated(base, ("NCCL error in: ", "nccl"), NCCL_ERROR_RE),
        _h_db=may.gated(base, ("DistBackendError", "DistError"), DIST_BACKEND_RE)
        & ~body.str.starts_with(TERMINATE_TEXT),
        _h_so=may.gated(base, ("DistStoreError", "DistNetworkError"), STORE_RE),
        _h_fa=may.contains(FAILED_RE),
        _h_sg=may.contains(SIGNAL_RE),
        _h_rs=may.contains(RESTART_RE),
        _h_ex=may.contains(EXCEPTION_RE),
    )
    # rules without a hit are skipped (their frames would be empty): most files hold few of these lines
    hits = base.select(pl.col(c).sum() for c in base.columns if c.startswith("_h_")).row(0, named=True)
    h = pl.col
    # watchdog timeout (also when wrapped in "watchdog thread terminated with exception: ...")
    w = (
        base.filter(h("_h_wd")).with_columns(g=body.str.extract_groups(arx(WATCHDOG_RE)))
        if hits["_h_wd"]
        else base.clear()
    )
    gf = pl.col("g").struct.field
    emit(
        w,
        "watchdog_timeout",
        "high",
        gf("op"),
        seq=gf("seq").cast(pl.Int64, strict=False),
        op=gf("op"),
        numel_in=gf("numel_in").cast(pl.Int64, strict=False),
        numel_out=gf("numel_out").cast(pl.Int64, strict=False),
        timeout_ms=gf("timeout_ms").cast(pl.Int64, strict=False),
        ran_ms=gf("ran_ms").cast(pl.Int64, strict=False),
        terminated=h("_h_term"),
    )
    done = h("_h_wd")
    ws = (
        base.filter(~done & h("_h_ws")).with_columns(g=body.str.extract_groups(arx(WORK_STATUS_RE)))
        if hits["_h_ws"]
        else base.clear()
    )
    emit(
        ws,
        "watchdog_work_status",
        "medium",
        gf("seq"),
        seq=gf("seq").cast(pl.Int64, strict=False),
        last_enqueued=gf("enq").cast(pl.Int64, strict=False),
        last_completed=gf("comp").cast(pl.Int64, strict=False),
        timeout=body.str.contains("Timeout at NCCL work", literal=True),
    )
    done = done | h("_h_ws")
    term = base.filter(~done & h("_h_term")) if hits["_h_term"] else base.clear()
    emit(term, "watchdog_terminated", "high", pl.lit(None), what=body.str.extract(arx(TERMINATED_RE), 1))
    done = done | h("_h_term")
    hb = base.filter(~done & h("_h_hb")) if hits["_h_hb"] else base.clear()
    emit(
        hb, "heartbeat_timeout", "high", pl.lit(None),
        work_items=body.str.extract(arx(HEARTBEAT_RE), 1).cast(pl.Int64, strict=False),
    )  # fmt: skip
    done = done | h("_h_hb")
    st = base.filter(~done & h("_h_st")) if hits["_h_st"] else base.clear()
    emit(
        st, "watchdog_stuck", "critical", pl.lit(None),
        stuck_s=body.str.extract(arx(STUCK_RE), 1).cast(pl.Int64, strict=False),
    )  # fmt: skip
    done = done | h("_h_st")
    ca = base.filter(~done & h("_h_ca")) if hits["_h_ca"] else base.clear()
    emit(
        ca, "nccl_comm_aborted", "high", pl.lit("comm_aborted"),
        aborted_rank=body.str.extract(arx(COMM_ABORTED_RE), 1).cast(pl.Int64, strict=False),
    )  # fmt: skip
    done = done | h("_h_ca")
    ab = base.filter(~done & h("_h_ab")) if hits["_h_ab"] else base.clear()
    emit(ab, "process_abort", "high", pl.lit("SIGABRT"))
    done = done | h("_h_ab")
    dr = (
        base.filter(~done & h("_h_dr")).with_columns(g=body.str.extract_groups(arx(DESYNC_RANKS_RE)))
        if hits["_h_dr"]
        else base.clear()
    )
    ranks = (
        pl.coalesce(gf("never"), gf("unfinished"), gf("unjoined"))
        .str.extract_all(arx(r"\d+"))
        .cast(pl.List(pl.Int64), strict=False)
    )
    emit(
        dr,
        "desync_report",
        "high",
        pl.when(gf("never").is_not_null())
        .then(pl.lit("never_joined"))
        .when(gf("unfinished").is_not_null())
        .then(pl.lit("joined_not_finished"))
        .otherwise(pl.lit("finished_not_joined_next")),
        lagging_ranks=ranks,
        seq=pl.coalesce(gf("useq"), gf("jseq")).cast(pl.Int64, strict=False),
    )
    done = done | h("_h_dr")
    ne = (
        base.filter(~done & h("_h_ne")).with_columns(g=body.str.extract_groups(arx(NCCL_ERROR_RE)))
        if hits["_h_ne"]
        else base.clear()
    )
    emit(
        ne,
        "nccl_error",
        "high",
        pl.coalesce(gf("code"), gf("reason").str.strip_chars()),
        exception=gf("exc"),
        where=gf("where"),
        reason=pl.coalesce(gf("reason"), gf("text")).str.strip_chars(),
        nccl_version=gf("ver"),
    )
    done = done | h("_h_ne")
    db = (
        base.filter(~done & h("_h_db")).with_columns(g=body.str.extract_groups(arx(DIST_BACKEND_RE)))
        if hits["_h_db"]
        else base.clear()
    )
    emit(db, "nccl_error", "high", gf("exc"), exception=gf("exc"), reason=gf("text"))
    done = done | h("_h_db")
    so = (
        base.filter(~done & h("_h_so")).with_columns(
            g=body.str.extract_groups(arx(STORE_RE)),
            w=body.str.extract_groups(arx(STORE_WAIT_RE)),
            c=body.str.extract_groups(arx(STORE_CONNECT_RE)),
        )
        if hits["_h_so"]
        else base.clear()
    )
    wf = pl.col("w").struct.field
    cf = pl.col("c").struct.field
    emit(
        so,
        "store_timeout",
        "high",
        gf("exc"),
        exception=gf("exc"),
        waited_s=wf("secs").cast(pl.Int64, strict=False),
        joined=wf("joined").cast(pl.Int64, strict=False),
        expected=wf("expected").cast(pl.Int64, strict=False),
        connect_timeout_ms=cf("ms").cast(pl.Int64, strict=False),
        store_host=cf("host"),
        store_port=cf("port").cast(pl.Int64, strict=False),
    )
    done = done | h("_h_so")
    fa = (
        base.filter(~done & h("_h_fa")).with_columns(g=body.str.extract_groups(arx(FAILED_RE)))
        if hits["_h_fa"]
        else base.clear()
    )
    exitcode = gf("exitcode").cast(pl.Int64, strict=False)
    emit(
        fa,
        "worker_failed",
        "high",
        gf("exitcode"),
        exitcode=exitcode,
        signal=(-exitcode).replace_strict(_SIGNALS, default=None, return_dtype=pl.String),
        local_rank=gf("local_rank").cast(pl.Int64, strict=False),
        pid=gf("pid").cast(pl.Int64, strict=False),
        binary=gf("binary"),
    )
    done = done | h("_h_fa")
    sg = (
        base.filter(~done & h("_h_sg")).with_columns(g=body.str.extract_groups(arx(SIGNAL_RE)))
        if hits["_h_sg"]
        else base.clear()
    )
    emit(
        sg, "worker_signal", "low", gf("signal"), pid=gf("pid").cast(pl.Int64, strict=False), signal=gf("signal")
    )
    done = done | h("_h_sg")
    rs = (
        base.filter(~done & h("_h_rs")).with_columns(g=body.str.extract_groups(arx(RESTART_RE)))
        if hits["_h_rs"]
        else base.clear()
    )
    emit(
        rs,
        "worker_group_restart",
        "medium",
        pl.lit(None),
        role=gf("role"),
        attempts_left=gf("left").cast(pl.Int64, strict=False),
        max_attempts=gf("max").cast(pl.Int64, strict=False),
    )
    done = done | h("_h_rs")
    ex = (
        base.filter(
            ~done
            & h("_h_ex")
            & ~body.str.starts_with("torch.distributed.elastic.multiprocessing.errors.ChildFailedError")
        ).with_columns(g=body.str.extract_groups(arx(EXCEPTION_RE)))
        if hits["_h_ex"]
        else base.clear()
    )
    emit(ex, "python_exception", "medium", gf("exc"), exception=gf("exc"), text=gf("text"))

    return parts


def block_lines(frame: pl.DataFrame) -> pl.Expr:
    """Boolean: indented `key=value` / `key : value` lines inside a torchrun `Result:`, launch-config or
    ChildFailedError block (the block's head must precede them)."""
    return pl.col("_in_block").fill_null(False) if "_in_block" in frame.columns else pl.lit(False)


def mark_blocks(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `_block` (id of the indented key/value block a line belongs to, null otherwise) and `_in_block`."""
    body = pl.col("body")
    head = (
        body.str.contains(RESULT_HEAD_TEXT, literal=True)
        | body.str.contains("launch configs:", literal=True)
        | body.str.contains(arx(ROOT_CAUSE_RE))
    )
    kv = body.str.contains(arx(KV_EQ_RE)) | body.str.contains(arx(KV_COLON_RE))
    # a block runs from its head over consecutive key/value lines
    return (
        frame.with_columns(_head=head, _kv=kv)
        .with_columns(_bid=pl.col("_head").cast(pl.Int32).cum_sum())
        .with_columns(_run=(~pl.col("_kv") & ~pl.col("_head")).cast(pl.Int32).cum_sum())
        .with_columns(
            _in_block=pl.col("_kv")
            & (pl.col("_bid") > 0)
            & (pl.col("_run") == pl.col("_run").filter(pl.col("_head")).last().over("_bid"))
        )
        .with_columns(
            _block=pl.when(pl.col("_in_block") | pl.col("_head")).then(pl.col("_bid")),
            # ChildFailedError: entries after "Root Cause (first observed failure):" vs after "Failures:"
            _root=pl.when(body.str.starts_with("Root Cause"))
            .then(True)
            .when(body.str.starts_with("Failures:") | body.str.contains(arx(r"^=+\s*$")))
            .then(False)
            .forward_fill()
            .over(pl.col("line") // FILE_SPAN)  # (within a file: a batch reads several as one frame)
            .fill_null(False),
        )
        .drop("_head", "_kv", "_run", "_bid")
    )


def _block_events(frame: pl.DataFrame, ctx: FileContext) -> list[pl.DataFrame]:
    """Events from key/value blocks: rendezvous `Result:` and ChildFailedError `Root Cause`/`[n]:` entries."""
    if "_block" not in frame.columns:
        return []
    body = pl.col("body")
    kv = (
        frame.filter(pl.col("_in_block"))
        .with_columns(
            e=body.str.extract_groups(arx(KV_EQ_RE)),
            c=body.str.extract_groups(arx(KV_COLON_RE)),
        )
        .select(
            "_block",
            "line",
            "text",
            key=pl.coalesce(pl.col("e").struct.field("key"), pl.col("c").struct.field("key")),
            value=pl.coalesce(pl.col("e").struct.field("value"), pl.col("c").struct.field("value")).str.strip_chars(),
        )
    )
    heads = frame.filter(pl.col("_block").is_not_null() & ~pl.col("_in_block")).select(
        "_block", "line", "text", "env_host", "env_rank", "pre_ts", "_root", head=body
    )
    # evidence of a failure entry is its `exitcode :` line
    ec_lines = kv.filter(pl.col("key") == "exitcode").group_by("_block").agg(
        ec_line=pl.col("line").last(), ec_text=pl.col("text").last()
    )
    kv = kv.drop("line", "text")
    out: list[pl.DataFrame] = []
    if kv.height == 0 or heads.height == 0:
        return out
    wide = kv.group_by("_block", "key", maintain_order=True).agg(pl.col("value").last()).pivot(
        on="key", index="_block", values="value"
    )
    joined = heads.join(wide, on="_block", how="inner").join(ec_lines, on="_block", how="left")

    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in joined.columns else pl.lit(None, dtype=pl.String)

    rdzv = joined.filter(pl.col("head").str.contains(RESULT_HEAD_TEXT, literal=True))
    if rdzv.height:
        out.append(
            rdzv.select(
                ts=pl.col("pre_ts"),
                ts_quality=pl.when(pl.col("pre_ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("none")),
                node=pl.coalesce(pl.col("env_host"), pl.lit(ctx.node)),
                rank=pl.col("env_rank"),
                source=pl.lit("torch"),
                kind=pl.lit("rendezvous"),
                code=col("restart_count"),
                severity=pl.lit("info"),
                message=pl.col("text"),
                detail=pl.struct(
                    restart_count=col("restart_count").cast(pl.Int64, strict=False),
                    master_addr=col("master_addr"),
                    master_port=col("master_port").cast(pl.Int64, strict=False),
                    group_rank=col("group_rank").cast(pl.Int64, strict=False),
                    group_world_size=col("group_world_size").cast(pl.Int64, strict=False),
                    local_ranks=col("local_ranks"),
                    global_ranks=col("global_ranks"),
                ).struct.json_encode().pipe(_drop_nulls),
                file=pl.lit(ctx.path),
                line=pl.col("line"),
            )
        )
    cause = joined.filter(pl.col("head").str.contains(arx(ROOT_CAUSE_RE)))
    if cause.height and "exitcode" in cause.columns:
        ec = col("exitcode").str.extract(arx(r"^(-?\d+)"), 1).cast(pl.Int64, strict=False)
        out.append(
            cause.filter(ec.is_not_null())
            .with_columns(
                _t=col("time").str.strptime(pl.Datetime("us"), "%Y-%m-%d_%H:%M:%S", strict=False).dt.replace_time_zone("UTC")
            )
            .select(
                ts=pl.col("_t"),
                ts_quality=pl.when(pl.col("_t").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
                node=pl.coalesce(col("host").str.split(".").list.first(), pl.col("env_host"), pl.lit(ctx.node)),
                rank=col("rank").str.extract(arx(r"^(\d+)"), 1).cast(pl.Int32, strict=False),
                source=pl.lit("torch"),
                kind=pl.lit("worker_failed"),
                code=col("exitcode").str.extract(arx(r"^(-?\d+)"), 1),
                severity=pl.lit("high"),
                message=pl.coalesce(pl.col("ec_text"), pl.col("text")),
                detail=pl.struct(
                    exitcode=ec,
                    signal=(-ec).replace_strict(_SIGNALS, default=None, return_dtype=pl.String),
                    local_rank=col("rank")
                    .str.extract(arx(r"local_rank: (\d+)"), 1)
                    .cast(pl.Int64, strict=False),
                    pid=col("exitcode").str.extract(arx(r"pid: (\d+)"), 1).cast(pl.Int64, strict=False),
                    time=col("time"),
                    host=col("host"),
                    root_cause=pl.col("_root") | pl.col("head").str.starts_with("Root Cause"),
                    error_file=col("error_file"),
                    traceback=col("traceback"),
                ).struct.json_encode().pipe(_drop_nulls),
                file=pl.lit(ctx.path),
                line=pl.coalesce(pl.col("ec_line"), pl.col("line")),
            )
        )
    return out


def _frtrace_events(frame: pl.DataFrame, ctx: FileContext) -> list[pl.DataFrame]:
    """torchfrtrace `Not all ranks joining collective S at entry E` reports → fr_missing_ranks events."""
    body = pl.col("body")
    if not frame.select(body.str.contains(arx(FRTRACE_RE)).any()).item():
        return []  # no report head in any line (continuation lines included: a superset)
    if isinstance(ctx, BatchContext):
        raise NotTogether  # (a report's key/value lines are read after its head, whatever file they are in)
    f = frame.filter(~pl.col("cont")).with_columns(
        head=body.str.contains(arx(FRTRACE_RE)),
        kv=body.str.extract_groups(arx(FRTRACE_KV_RE)),
    )
    if not f.get_column("head").any():
        return []
    f = f.with_columns(rep=pl.col("head").cast(pl.Int32).cum_sum())
    kv = (
        f.filter((pl.col("rep") > 0) & pl.col("kv").struct.field("key").is_not_null())
        .select("rep", key=pl.col("kv").struct.field("key").str.replace_all(" ", "_"), value=pl.col("kv").struct.field("value"))
        .group_by("rep", "key", maintain_order=True)
        .agg(pl.col("value").first())
        .pivot(on="key", index="rep", values="value")
    )
    heads = (
        f.filter(pl.col("head"))
        .with_columns(g=body.str.extract_groups(arx(FRTRACE_RE)))
        .join(kv, on="rep", how="left")
    )

    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in heads.columns else pl.lit(None, dtype=pl.String)

    return [
        heads.select(
            ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
            ts_quality=pl.lit("none"),
            node=pl.lit(ctx.node),
            rank=pl.lit(None, dtype=pl.Int32),
            source=pl.lit("torch"),
            kind=pl.lit("fr_missing_ranks"),
            code=pl.col("g").struct.field("seq"),
            severity=pl.lit("high"),
            message=pl.col("text"),
            detail=pl.struct(
                seq=pl.col("g").struct.field("seq").cast(pl.Int64, strict=False),
                entry=pl.col("g").struct.field("entry").cast(pl.Int64, strict=False),
                group=col("group_info"),
                op=col("collective"),
                missing_ranks=col("missing_ranks")
                .str.extract_all(arx(r"\d+"))
                .cast(pl.List(pl.Int64), strict=False),
                expected_ranks=col("expected_ranks").cast(pl.Int64, strict=False),
                state=col("collective_state"),
            ).struct.json_encode(),
            file=pl.lit(ctx.path),
            line=pl.col("line"),
        )
    ]


def after_last_error(frame: pl.DataFrame) -> pl.Expr:
    """Boolean: the line right after a PyTorch `Last error:` line (the NCCL WARN text it quotes, unprefixed)."""
    prev = pl.col("body").shift(1).fill_null("").str.strip_chars()
    cur = pl.col("body").fill_null("").str.strip_chars()
    return prev.str.ends_with(LAST_ERROR_TEXT) & (cur.str.len_bytes() > 0)


def last_error_events(frame: pl.DataFrame, ctx: FileContext) -> pl.DataFrame | None:
    """Events for the WARN text PyTorch quotes after `Last error:`, classified like an NCCL WARN
    (kind nccl_ib_error etc., source 'torch', detail.last_error = true): it names peers and error codes
    even when NCCL_DEBUG was off."""
    from parsers import nccl

    quoted = frame.filter(pl.col("_last_err") & ~pl.col("cont"))
    if quoted.height == 0:
        return None
    warns = nccl.headless_warns(quoted, ctx, msg=pl.col("body").str.strip_chars())
    return nccl.warn_events(warns, ctx, None, source="torch")


# ----------------------------------------------------------------------------- Flight Recorder


class RefusingUnpickler(pickle.Unpickler):
    """Unpickler that builds plain data only (dict, list, tuple, str, bytes, numbers, bool, None).

    Any global (class, function) is refused, so a crafted pickle cannot run code: `find_class` raises.
    """

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 - documented on the class
        raise pickle.UnpicklingError(f"refused to load global {module}.{name}: only plain data is allowed")


def load_pickle_safely(data: bytes) -> Any:
    """Unpickle `data` with `RefusingUnpickler`; raise pickle.UnpicklingError on anything but plain data."""
    return RefusingUnpickler(io.BytesIO(data)).load()


def _rank_from_path(path: str) -> int | None:
    m = re.search(r"rank[_-]?(\d+)", path.rsplit("/", 1)[-1]) or re.search(r"(\d+)(?:\.\w+)?$", path)
    return int(m.group(1)) if m else None


def _int(v: Any) -> int | None:
    """`v` when it is a plain int (not bool) within Int64, else None: dump values are untrusted."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 else None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


_US_2000, _US_2100 = 946_684_800 * 10**6, 4_102_444_800 * 10**6


def _ns_to_us(v: Any) -> int | None:
    """Epoch nanoseconds → microseconds when plausible (years 2000–2100), else None."""
    v = _int(v)
    return v // 1000 if v is not None and _US_2000 <= v // 1000 < _US_2100 else None


def flight_recorder_tables(dump: dict[str, Any], ctx: FileContext, line: int = 1) -> dict[str, pl.DataFrame]:
    """Turn one Flight Recorder dump (already loaded as plain data) into comms rows.

    One 'flight_recorder' row per entry, one 'flight_recorder_status' row per pg_status entry (see the
    module docstring). Unknown keys are ignored; missing ones become nulls.
    """
    rank = _int(dump.get("rank"))
    if rank is None:
        rank = _rank_from_path(ctx.path)
    if rank is not None and not -(2**31) <= rank < 2**31:  # (the rank column is Int32: a corrupt one is null)
        rank = None
    host = dump.get("hostname")
    node = host.split(".")[0] if isinstance(host, str) and host else ctx.node
    pg_config = dump.get("pg_config") if isinstance(dump.get("pg_config"), dict) else {}
    rows: list[dict[str, Any]] = []
    entries = dump.get("entries")
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group")
        pg_name, pg_desc = (pg[0], pg[1]) if isinstance(pg, (list, tuple)) and len(pg) >= 2 else (None, None)
        pg_id = e.get("pg_id")
        cfg = pg_config.get(str(pg_name)) or pg_config.get(str(pg_id)) or {}
        detail = {
            "seq": e.get("collective_seq_id"),
            "p2p_seq": e.get("p2p_seq_id"),
            "op": e.get("profiling_name"),
            "state": e.get("state"),
            "pg_id": pg_id,
            "pg_name": pg_name,
            "pg_desc": pg_desc,
            "pg_ranks": cfg.get("ranks") if isinstance(cfg, dict) else None,
            "record_id": e.get("record_id"),
            "time_started_ns": e.get("time_discovered_started_ns"),
            "time_completed_ns": e.get("time_discovered_completed_ns"),
            "timeout_ms": e.get("timeout_ms"),
            "is_p2p": e.get("is_p2p"),
            "retired": e.get("retired"),
            "input_sizes": e.get("input_sizes"),
            "version": dump.get("version"),
        }
        rows.append(
            {
                "record": "flight_recorder",
                "ts_us": _ns_to_us(e.get("time_created_ns")),
                "node": node,
                "comm_id": f"pg{pg_id}" if pg_id is not None else (f"pg:{pg_name}" if pg_name else None),
                "rank": rank,
                "pid": _int(dump.get("pid")),
                "op": _str(e.get("profiling_name")),
                "seq": _int(e.get("collective_seq_id")),
                "detail": to_json({k: v for k, v in detail.items() if v is not None}),
                "file": ctx.path,
                "line": line,
            }
        )
    status = dump.get("pg_status") if isinstance(dump.get("pg_status"), dict) else {}
    for pg_key, st in status.items():
        if not isinstance(st, dict):
            continue
        rows.append(
            {
                "record": "flight_recorder_status",
                "ts_us": None,
                "node": node,
                "comm_id": f"pg{pg_key}",
                "rank": rank,
                "pid": None,
                "op": None,
                "seq": _int(st.get("last_completed_collective")),
                "detail": to_json(
                    {
                        "pg_name": str(pg_key),
                        "last_enqueued": st.get("last_enqueued_collective"),
                        "last_started": st.get("last_started_collective"),
                        "last_completed": st.get("last_completed_collective"),
                        "version": dump.get("version"),
                    }
                ),
                "file": ctx.path,
                "line": line,
            }
        )
    if not rows:
        return {}
    df = pl.DataFrame(
        rows,
        schema={
            "record": pl.String,
            "ts_us": pl.Int64,
            "node": pl.String,
            "comm_id": pl.String,
            "rank": pl.Int32,
            "pid": pl.Int64,
            "op": pl.String,
            "seq": pl.Int64,
            "detail": pl.String,
            "file": pl.String,
            "line": pl.Int64,
        },
    )
    df = df.with_columns(ts=pl.from_epoch(pl.col("ts_us"), time_unit="us").dt.replace_time_zone("UTC")).drop("ts_us")
    return {"comms": df}


def parse_bytes(data: bytes, ctx: FileContext) -> ParseResult:
    """Parse a binary Flight Recorder dump (pickle) with the refusing unpickler; text goes to `parse`."""
    if not is_pickle(data[:2]):
        from parsers.base import lines_from_bytes

        return parse(lines_from_bytes(data), ctx)
    try:
        dump = load_pickle_safely(data)
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: any failure to load is a note, not a crash
        partial = isinstance(exc, EOFError)
        return ParseResult(
            tables={},
            parsed=0,
            unrecognized=1,
            unrecognized_examples=[(1, f"<pickle: {exc}>")],
            notes=[f"flight recorder pickle not loaded: {exc}"],
            partial=partial,
        )
    if not isinstance(dump, dict):
        return ParseResult(tables={}, parsed=0, unrecognized=1, notes=["pickle holds no Flight Recorder dict"])
    try:
        tables = flight_recorder_tables(dump, ctx)
    except Exception as exc:  # noqa: BLE001 - untrusted structure: a note, not a crash
        return ParseResult(tables={}, parsed=0, unrecognized=1, notes=[f"flight recorder dump not understood: {exc}"])
    n = sum(df.height for df in tables.values())
    return ParseResult(tables=tables, parsed=1, unrecognized=0, notes=[f"flight recorder pickle: {n} rows"])


_LITERALS = {"null": "None", "true": "True", "false": "False"}


def _load_dump_text(text: str) -> tuple[dict[str, Any] | None, bool]:
    """Load a Flight Recorder dump printed as JSON or as a Python repr; (dump, cut) where cut = truncated."""
    try:
        obj = json.loads(text)
        return (obj if isinstance(obj, dict) else None), False
    except ValueError:
        pass
    # Python repr (tuples) or JSON with the tutorial's `...` elisions: literal_eval only builds plain data.
    cleaned = re.sub(r"^\s*\.\.\.,?\s*$", "", text, flags=re.M)
    cleaned = re.sub(r"\b(null|true|false)\b", lambda m: _LITERALS[m.group(1)], cleaned)
    cleaned = re.sub(r",(\s*[\]}])", r"\1", cleaned)
    try:
        obj = ast.literal_eval(cleaned)
        return (obj if isinstance(obj, dict) else None), False
    except Exception:  # noqa: BLE001 - arbitrary text: ValueError, SyntaxError, TypeError (unhashable keys), …
        return None, True


def _dump_span(lines: pl.Series) -> tuple[int, int] | None:
    """(start, end) row indexes of the Flight Recorder `{ … }` block: one line (json.dumps without indent,
    as PyTorch writes the JSON form) or a pretty-printed block ending at a `}` line (or the file's end)."""
    starts = lines.str.contains(arx(r"^\s*\{")).arg_true()
    if len(starts) == 0:
        return None
    start = int(starts[0])
    first = (lines[start] or "").rstrip()
    if first.endswith("}") and _SNIFF_FR.search(first):
        return start, start
    ends = lines.str.contains(arx(r"^\}\s*$")).arg_true()
    ends = ends.filter(ends > start)
    end = int(ends[0]) if len(ends) else len(lines) - 1
    # only a block that carries Flight Recorder keys near its top is worth loading
    if not _SNIFF_FR.search("\n".join(s or "" for s in lines.slice(start, min(end - start + 1, 400)).to_list())):
        return None
    return start, end


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the files without a Flight Recorder dump read by the
    shared grammar together (`nccl.family_many`: one run for a batch where it keeps the files apart), the
    others one by one."""
    from parsers import nccl  # NOTE: nccl imports this module at import time; import lazily here

    items = list(items)
    plain = [i for i, (lines, _ctx) in enumerate(items) if _dump_span(lines) is None]
    out: list[ParseResult | None] = [None] * len(items)
    for i, result in zip(plain, nccl.family_many([items[i] for i in plain]), strict=True):
        out[i] = result
    return [r if r is not None else parse(*items[i]) for i, r in enumerate(out)]


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse PyTorch-distributed text: every line through the shared NCCL+torch grammar, plus a Flight
    Recorder dump printed as JSON/repr (one `{ … }` block), which becomes 'flight_recorder' comms rows."""
    from parsers import nccl  # NOTE: nccl imports this module at import time; import lazily here

    span = _dump_span(lines)
    if span is None:
        return nccl.parse_family(lines, ctx)
    start, end = span
    block = lines.slice(start, end - start + 1)
    dump, cut = _load_dump_text("\n".join(s for s in block.to_list() if s is not None))
    if dump is None or not any(k in dump for k in ("entries", "pg_status", "pg_config")):
        return nccl.parse_family(lines, ctx)
    blanked = pl.concat(
        [lines.slice(0, start), pl.Series([""] * block.len(), dtype=pl.String), lines.slice(end + 1)]
    )
    rest = nccl.parse_family(blanked, ctx)
    try:
        fr = flight_recorder_tables(dump, ctx, line=ctx.first_line + start)
    except Exception:  # noqa: BLE001 - untrusted structure: parse the lines as text instead
        return nccl.parse_family(lines, ctx)
    tables = dict(rest.tables)
    for name, df in fr.items():
        tables[name] = pl.concat([tables[name], df], how="diagonal_relaxed") if name in tables else df
    in_block = int((block.str.strip_chars().str.len_bytes() > 0).sum())
    return ParseResult(
        tables=tables,
        parsed=rest.parsed + in_block,
        unrecognized=rest.unrecognized,
        unrecognized_examples=rest.unrecognized_examples,
        notes=[*rest.notes, f"flight recorder dump at line {ctx.first_line + start}: {fr.get('comms', pl.DataFrame()).height} rows"],
        partial=rest.partial or cut,
        node=rest.node,
    )
