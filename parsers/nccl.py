"""NCCL debug output (NCCL_DEBUG=WARN/INFO/TRACE, 2.7 to the newest), aws-ofi-nccl plugin lines and the
`ncclras` client's status report; PyTorch-distributed lines of the same file are read through
`parsers.torch_distributed`'s grammar (`family_rows`/`parse_family`), so a mixed training log loses
nothing. Other parsers of mixed logs (step logs) can call `family_rows(lines, ctx)` for the same rows plus
a per-line `understood` mask.

Line preparation (`prepare`, shared by both parsers): GitHub auto-links `[x](http://x/)` → `x`, markdown
`> ` quotes, a collector ISO timestamp (kept as `pre_ts`, quality 'exact' with an offset/Z, else
'local_assumed_utc') and launcher envelopes (`parsers._common.split_envelopes`: rank, host, pid kept; the
c10/Open MPI/Lightning ranks are global, torchrun `[defaultN]:` local) are stripped; hard-wrapped lines
(see `join_wrapped`) are joined onto the WARN/error record they continue and counted as parsed. A record
glued after other output (a progress bar without its newline) still reads.

Rows:
- inventory: per node `software/nccl_version`, `software/nccl_cuda_version` (from `+cudaA.B`),
  `software/cuda_driver_version` (`cudaDriverVersion 12020` → 12.2), `software/env.NCCL_*` (settings
  echoed by NCCL), `node/ip` (device = interface) from `Bootstrap : Using` and `NET/IB … OOB if:ip` (and,
  device = HCA, from the reporter's own IPv4-mapped RoCE GID in IB completion errors), and
  `nic/nccl_transport` (device mlx5_0, value IB|RoCE). The bare `NCCL version` line (≤ 2.21, rank 0,
  no host) is given the host of the nearest preceding NCCL line (rank 0 prints it right after its own
  init lines), else the file's node.
- comms record 'rank': one row per (node, pid, comm, rank) from `comm 0x… rank R nranks N cudaDev D
  [nvmlDev V] [busId B] [commId 0x…] - Init START|COMPLETE` (COMPLETE preferred) and from the 2.20+
  `comm 0x… rank R nRanks N nNodes M localRanks L localRank l` line; comm_id = commId when printed
  (shared by all ranks), else the process-local comm pointer; detail {comm, phase, nvml_dev, nnodes,
  local_rank, source}.
- comms record 'network': one row per `NET/IB : Using …`, `NET/Socket : Using …`, `Using network X`,
  `NET/OFI Selected Provider is P` line; device = comma-joined devices; detail {transport, devices,
  oob_if, oob_ip, relaxed_ordering, provider, nics}.
- comms record 'coll': NCCL_DEBUG_SUBSYS=COLL lines aggregated to one row per (node, pid, comm,
  collective): op, seq = last opCount (hex → int), count = element count of the last call, dtype, redop,
  value = number of calls, line = the last call's line, detail {calls, first_opcount, first_line,
  peers (Send/Recv roots)}; rank/comm_id/cuda_dev/nranks from the init map when (node, pid, comm) is in it.
- events (source 'nccl'): one per WARN line: kind nccl_ib_error (`Got completion … with error|status`:
  detail peer, peer_port, status, status_name, opcode, len, vendor_err, direction, local_gid, remote_gid,
  hca), nccl_ib_async_event, nccl_ibv_error, nccl_cuda_error, nccl_connection_error (peer kept),
  nccl_proxy_error, nccl_system_error, nccl_shm_error, nccl_timeout, else nccl_warn; code = status /
  ibv call / CUDA error. `rank` and `gpu_bus_id` = those of that (node, pid, cudaDev) in its largest
  communicator when the init map says so, else the launcher prefix's rank. RAS: nccl_ras_<status> per subject line
  (`Process p on node ip managing GPU g`, `Rank r -- GPU g …`, `The missing rank: r`, `N ranks have
  launched up to operation M`, `… considered dead`, `Encountered N communication timeouts`).
- Connection lines (rings, trees, channels) are counted (a note), no rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import EllipsisType
from functools import cache, cached_property

import polars as pl

from forensics.errors import CONTAINED
from parsers import _common, _nccl_small
from parsers import torch_distributed as td
from parsers._common import (
    _ANY_ENVELOPE,
    _ENVELOPE_FIELDS,
    ENVELOPES,
    arx,
    envelope_struct,
    format_str,
    nccl_bus_id,
    repeated,
)
from parsers._nccl_merge import _INVENTORY_UNIQUE
from parsers._nccl_merge import merge_chunks, shift_lines  # noqa: F401 - the ingest's hooks for a file read in pieces
from parsers._sniff import contains, guarded, head_text, may_match, required_literals
from parsers.base import (
    BLANK,
    EXAMPLE_CHARS,
    FILE_SPAN,
    MAX_EXAMPLES,
    BatchContext,
    FileContext,
    NotTogether,
    ParseResult,
    account,
    compiled,
    numbered,
)

NAME = "nccl"
DESCRIPTION = "NCCL debug output (NCCL_DEBUG=INFO/WARN/TRACE 2.7+), aws-ofi-nccl, ncclras status; torch lines too"
TABLES = ("events", "comms", "inventory")
FILENAME_HINTS = ("*nccl*.log", "*nccl*.txt", "*nccl_debug*", "*ncclras*", "*.nccl")
DETECTS = "lines 'host:pid:tid [dev] NCCL INFO|WARN|TRACE', bare 'NCCL version x+cudaY', ncclras reports"
PRIORITY = 25

# ----------------------------------------------------------------------------- grammar

NCCL_RE = (
    r"^(?:\[(?P<wts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] )?(?P<host>[^\s:\[\]]+):(?P<pid>\d+):"
    r"(?P<tid>\d+) \[(?P<dev>\d+)\] (?:(?P<ms>\d+\.\d+) )?(?:(?P<src>[\w./+-]+):(?P<srcline>\d+)"
    r"(?: \((?P<func>\w+)\))? )?NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)\s?(?P<msg>.*)$"
)
"""[ts] host:pid:tid [cudaDev] [<ms>] [file:line [(func)]] NCCL LEVEL msg (FORMATS.md §6)."""
BARE_VERSION_RE = r"^NCCL version (?P<ver>\d[\w.]*?)(?:\+cuda(?P<cuda>[\w.]+)| compiled with CUDA (?P<cuda2>[\w.]+))\s*$"
VERSION_RE = r"^NCCL version (?P<ver>\d[\w.]*?)\+cuda(?P<cuda>[\w.]+)"
INIT_RE = (
    r"(?:\w+ )?comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
    r"(?: nvmlDev (?P<nvml>\d+))?(?: busId (?P<bus>[0-9a-fA-F]+))?(?: commId (?P<commid>0x[0-9a-fA-F]+))?"
    r".*? - Init (?P<phase>START|COMPLETE)"
)
TOPO_RE = (
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks (?P<lranks>\d+) localRank (?P<lrank>\d+)"
)
BOOTSTRAP_RE = r"^Bootstrap ?: Using (?:\[\d+\])?(?P<ifname>[^:\s]+):(?P<ip>[^<\s]+)<\d+>"
NET_IB_RE = r"^NET/IB ?: Using (?P<devs>.*?)\s*;\s*OOB (?P<ifname>[^:\s]+):(?P<ip>[^<\s]+)<\d+>"
NET_IB_ITEM_RE = r"\[\d+\]([\w.-]+):(\d+)/(IB|RoCE)"
NET_SOCKET_RE = r"^NET/Socket ?: Using (?P<devs>.*)$"
NET_SOCKET_ITEM_RE = r"\[\d+\]([^:\s]+):([^<\s]+)<\d+>"
USING_NET_RE = r"^Using network (?P<net>\S+)"
OFI_RE = r"NET/OFI Selected [Pp]rovider is (?P<prov>\w+)(?: \(found (?P<nics>\d+) nics\))?"
CUDA_DRIVER_RE = r"^cudaDriverVersion (?P<v>\d+)"
ENV_RE = r"^(?P<var>NCCL_\w+) set (?:by environment )?to (?P<val>.*?)\.?\s*$"
CONN_RE = r"^(?:Channel \d+|Ring \d+|Tree \d+ :|Trees |Connected all (?:rings|trees)|\s*\d+ : )"
COLL_RE = (
    r"^(?P<op>AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll\w*|Gather|Scatter): "
    r"opCount (?P<opc>[0-9a-fA-F]+) sendbuff (?P<sb>\S+) recvbuff (?P<rb>\S+) count (?P<count>\d+) "
    r"datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-fA-F]+) "
    r"\[nranks=(?P<nranks>\d+)\]"
)
OFI_LEGACY_RE = r"^(?P<level>INFO|WARN|TRACE): Function: (?P<func>\w+) Line: (?P<srcline>\d+): (?P<msg>.*)$"

IB_COMPLETION_RE = (
    r"Got completion (?:from peer (?P<peer>[^<\s]+)<(?P<peer_port>\d+)> )?with (?:error |status=)"
    r"(?:(?P<status_name>[A-Z_]+)\()?(?P<status>\d+)\)?"
)
IB_FIELDS = {
    "opcode": r"opcode[ =](?:\w+\()?(\d+)",
    "len": r"len[ =]?(\d+)",
    "vendor_err": r"vendor[ _]err[ =](\d+)",
    "direction": r"\((Send|Recv)\)|req_type=(?:\w+_)?(Send|Recv)",
    "local_gid": r"localGid (\S+)",
    "remote_gid": r"remoteGids? ?(\S+)",
    "hca": r"\bhca (\S+)",
}
ASYNC_RE = r"NET/IB ?: \[?(?:(?P<hca>[\w.-]+):(?P<port>\d+) ?\]? ?)?Got async event ?: (?P<event>.+?)\s*$"
IBV_RE = r"Call to (?P<call>ibv_\w+) failed(?: with (?:error )?(?P<err>.+?))?\s*$"
CUDA_FAIL_RE = r"Cuda failure (?:(?P<code>\d+) )?'(?P<err>[^']*)'|Failed to CUDA calloc|cudaErr"
CONN_FAIL_RE = (
    r"Connection closed by|Broken pipe|Connection reset by peer|Call to (?:recv|send|connect)\b.*failed|"
    r"remote process exited|Connection refused|Connect to \S+ failed"
)
PEER_RE = r"(?:remote peer|from|to) (?P<peer>\d[\d.]+|[\w.-]+)<(?P<peer_port>\d+)>"
WARN_KINDS: tuple[tuple[str, str, str], ...] = (
    # (kind, regex on the message, severity); the first match wins
    ("nccl_ib_error", IB_COMPLETION_RE, "high"),
    ("nccl_ib_async_event", ASYNC_RE, "high"),
    ("nccl_ibv_error", IBV_RE, "high"),
    ("nccl_cuda_error", CUDA_FAIL_RE, "high"),
    ("nccl_connection_error", CONN_FAIL_RE, "high"),
    ("nccl_proxy_error", r"\[Proxy Service \d+\]|[Pp]roxy", "high"),
    ("nccl_system_error", r"unhandled system error|System call .* failed|ncclSystemError", "high"),
    ("nccl_shm_error", r"/dev/shm", "high"),
    ("nccl_timeout", r"(?i)time ?out|timed out", "high"),
)

RAS_LINE_RE = (
    r"^(?:NCCL version \S+ compiled with CUDA \S+|CUDA runtime version \d+, driver version \d+|Job summary|"
    r"Communicators\.\.\.(?: \([\d.]+s\))?|Errors|Warnings|=+|\s*Nodes\s+Processes\s+GPUs.*|\(total\)\s+per node.*|"
    r"Group\s+Comms\s+Nodes.*|\s*#\s+in group.*|\s*\d+(?:-\d+)?(?:\s+\d+(?:-\d+)?)+(?:\s+[A-Z]+\s+[A-Z,]+)?|"
    r"(?:INCOMPLETE|MISMATCH|TIMEOUT|DEAD|ABORT|NOCOMM|ERROR|INIT|FINALIZE|RUNNING|WARNING)|"
    r"#\d+-\d+ \([0-9a-f]+\) [A-Z]+|\s+.*(?:Missing communicator data|managed by process|managing GPU|"
    r"The missing rank|ranks? ha(?:ve|s) launched up to operation|operation counts|considered dead|"
    r"communication timeouts|The outlier node|not responding|unreachable).*)\s*$"
)
RAS_HEAD_RE = r"^(?:#(?P<grp>\d+-\d+) \((?P<hash>[0-9a-f]+)\) )?(?P<status>INCOMPLETE|MISMATCH|TIMEOUT|DEAD|ABORT|NOCOMM|ERROR)\s*$"
RAS_SUBJECT_RE = (
    r"(?:Process (?P<pid>\d+) on node (?P<ip>\S+) managing GPU (?P<gpu>\d+)|The missing rank: (?P<mrank>\d+)|"
    r"Rank (?P<rank>\d+) -- GPU (?P<rgpu>\d+) managed by process (?P<rpid>\d+) on node (?P<rip>\S+)|"
    r"(?P<nranks>\d+) ranks? ha(?:ve|s) launched up to operation (?P<opn>\d+)|"
    r"(?P<ndead>\d+) job process(?:es)? (?:is|are) considered dead|Encountered (?P<ntimeouts>\d+) communication timeouts|"
    r"The outlier node: (?P<outlier>\S+))"
)

_DTYPES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "float16", 7: "float32",
           8: "float64", 9: "bfloat16", 10: "fp8_e4m3", 11: "fp8_e5m2"}
_REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}

_SNIFF_LINE = re.compile(r"[^\s:\[\]]+:\d+:\d+ \[\d+\] .*?NCCL (?:INFO|WARN|TRACE)")
_SNIFF_BARE = re.compile(r"^(?:\S+\s)?NCCL version \d[\w.]*\+cuda", re.M)
_SNIFF_RAS = re.compile(r"^Communicators\.\.\.|^#\d+-\d+ \([0-9a-f]+\) [A-Z]+$|^Job summary$", re.M)
_SNIFF_NCCLTESTS = re.compile(r"^#\s*nThread \d|^#\s+size\s+count\s+type|^# Avg bus bandwidth", re.M)
_SNIFF_OFI = re.compile(r"(?:INFO|WARN): Function: \w+ Line: \d+: NET/OFI", re.M)
_SNIFF_LINE_START = re.compile(r"(?<![^\s:\[\]])" + _SNIFF_LINE.pattern)
"""`_SNIFF_LINE` tried only where a host name can start: linear on a long run of name characters, where
`_SNIFF_LINE` is quadratic. Same matches unless one is directly followed by a name character (checked)."""
_SNIFF_NAME_CHAR = re.compile(r"[^\s:\[\]]")
_SNIFF_BARE_LITS = required_literals(_SNIFF_BARE)
_SNIFF_NCCLTESTS_LITS = required_literals(_SNIFF_NCCLTESTS)
_SNIFF_OFI_LITS = required_literals(_SNIFF_OFI)
# the literals above (and the gate's), each behind a memchr of its two rarest characters (`parsers._sniff`)
_SNIFF_G_NCCL = guarded("NCCL ")
_SNIFF_G_COMMS = guarded("Communicators...")
_SNIFF_G_VERSION = guarded("NCCL version")
_SNIFF_G_BARE = tuple(map(guarded, _SNIFF_BARE_LITS or ()))
_SNIFF_G_NCCLTESTS = tuple(map(guarded, _SNIFF_NCCLTESTS_LITS or ()))
_SNIFF_G_OFI = tuple(map(guarded, _SNIFF_OFI_LITS or ()))


def _any_in(text: str, lits: tuple[tuple[str, str, str], ...], known: bool) -> bool:
    """`may_match` over `guarded` literals (`known`: the literals were named, else True)."""
    return not known or any(contains(text, lit) for lit in lits)


_SNIFF_LINE_ANCHOR = re.compile(r":(?<=[^\s:\[\]]:)" + _SNIFF_LINE.pattern.removeprefix(r"[^\s:\[\]]+:"))
r"""`_SNIFF_LINE` from the colon after its host name, the name's last character checked behind it: it opens
with a literal, which the regex engine finds by a fast scan. A `_SNIFF_LINE` match's name runs from its
start to the first ':' (a name character cannot be one), so each match has one anchor there, where this
matches and ends where it ends; the leftmost match from a position s is at the first anchor c > s (the name
needs a character at c - 1 >= s). So the two give the same matches unless one of these starts right where
the previous one ended (c = s, then counted the old way)."""
assert _SNIFF_LINE.pattern.startswith(r"[^\s:\[\]]+:")


def _sniff_hits(text: str, stop: int = 0) -> int:
    """`len(_SNIFF_LINE.findall(text))`, without its quadratic time on a long line. `stop` (> 0): the count
    may stop there (a value >= `stop` then says only that the count is at least `stop`): the anchored matches
    are `_SNIFF_LINE`'s one by one up to the first that starts where the previous one ended, so the first
    `stop` of them are matches of `_SNIFF_LINE`."""
    if "NCCL " not in text:
        return 0
    n, end = 0, -1
    for m in _SNIFF_LINE_ANCHOR.finditer(text):
        if m.start() == end:
            return _sniff_hits_by_start(text)
        n, end = n + 1, m.end()
        if n == stop:
            return n
    return n


def _sniff_hits_by_start(text: str) -> int:
    """`_sniff_hits` by `_SNIFF_LINE_START` (each name start tried)."""
    ends = [m.end() for m in _SNIFF_LINE_START.finditer(text)]
    # a leftmost _SNIFF_LINE match starts at a name start (else it would start one character earlier),
    # except right after a previous match that ends inside a name ("...NCCL INFOx"): then count the slow way
    if any(_SNIFF_NAME_CHAR.match(text, e) for e in ends):
        return len(_SNIFF_LINE.findall(text))
    return len(ends)


def sniff(head: bytes, name: str) -> float:
    """Score by the share of head lines carrying the NCCL `host:pid:tid [dev] NCCL` prefix (or RAS/OFI forms)."""
    text = head_text(head)
    nccl = contains(text, _SNIFF_G_NCCL)
    comms = contains(text, _SNIFF_G_COMMS)
    ofi = _any_in(text, _SNIFF_G_OFI, _SNIFF_OFI_LITS is not None)
    if not nccl and not comms and not ofi:
        return 0.0  # no NCCL line, bare version line, ncclras report or OFI line can match (each needs one)
    first = text[:200].splitlines()[:1]  # (a prefix of the first line, whole if it ends before 200)
    if not first or not first[0].strip() or first[0].startswith("#SOURCE"):
        return _sniff_lines(text, nccl, comms, ofi)
    # The first line counts, so `lines` is not empty; the checks before the share need `hits` only to be
    # non-zero, and where the NCCL lines alone are 40 % of an upper bound of `len(lines)` the share is
    # >= 0.4 whatever its exact value (a larger divisor gives a smaller or equal float quotient): the
    # lines are not split and the NCCL lines counted only up to there.
    score = _sniff_tiers(text, nccl, comms, ofi, _sniff_hits(text, 1) if nccl else 0)
    if score is not None:
        return score
    if nccl:
        most = _line_bound(text)
        need = _share_need(most)
        if _sniff_hits(text, need) >= need:
            return 0.95
    return _sniff_lines(text, nccl, comms, ofi, tiered=True)


_BREAKS_ASCII = "\r\x0b\x0c\x1c\x1d\x1e"
"""The line boundaries of `str.splitlines` in ASCII besides '\n' (non-ASCII text adds '\x85', U+2028,
U+2029)."""


def _line_bound(text: str) -> int:
    """At least `min(400, len(text.splitlines()))` (a line ends at a boundary character or at the end)."""
    n = text.count("\n") + 1
    for c in _BREAKS_ASCII if text.isascii() else _BREAKS_ASCII + "\x85\u2028\u2029":
        if c in text:
            n += text.count(c)
    return min(n, 400)


def _share_need(most: int) -> int:
    """The least k with `k / most >= 0.4` (float division, as `sniff` computes the share)."""
    k = int(0.4 * most)
    while k / most < 0.4:
        k += 1
    while k > 1 and (k - 1) / most >= 0.4:
        k -= 1
    return max(k, 1)


_SNIFF_G_JOB = guarded("Job summary")


def _sniff_tiers(text: str, nccl: bool, comms: bool, ofi: bool, hits: int) -> float | None:
    """`sniff`'s scores that do not depend on the share of NCCL lines (`hits`: non-zero when there is one);
    None where none applies. The nccl-tests patterns all open with '#'; without "Communicators..." a RAS
    match needs '#' or "Job summary"."""
    tests = "#" in text and _any_in(text, _SNIFF_G_NCCLTESTS, _SNIFF_NCCLTESTS_LITS is not None)
    if tests and _SNIFF_NCCLTESTS.search(text):
        return 0.4 if hits else 0.0  # nccl-tests output carries NCCL lines too; its parser should win
    ras = comms or (nccl and ("#" in text or contains(text, _SNIFF_G_JOB)) and contains(text, _SNIFF_G_VERSION))
    if ras and _SNIFF_RAS.search(text):
        return 0.9
    if ofi and _SNIFF_OFI.search(text):
        return 0.8
    return None


def _sniff_lines(text: str, nccl: bool, comms: bool, ofi: bool, tiered: bool = False) -> float:
    """`sniff` past its literal gate, the lines split and every NCCL line counted (`tiered`: the lines are
    not all blank and `_sniff_tiers` gave None)."""
    lines = [ln for ln in text.splitlines()[:400] if ln.strip() and not ln.startswith("#SOURCE")]
    if not lines:
        return 0.0
    hits = _sniff_hits(text) if nccl else 0  # (it is 0 without "NCCL ")
    if not tiered:
        score = _sniff_tiers(text, nccl, comms, ofi, hits)
        if score is not None:
            return score
    bare = len(_SNIFF_BARE.findall(text)) if _any_in(text, _SNIFF_G_BARE, _SNIFF_BARE_LITS is not None) else 0
    if not hits and not bare:
        return 0.0
    share = (hits + bare) / len(lines)
    if share >= 0.4:
        return 0.95
    if share >= 0.15:
        return 0.85
    return 0.6


def json_detail(**fields: pl.Expr) -> pl.Expr:
    """JSON object of the named expressions with null members left out (compact, key order as given)."""
    return drop_json_nulls(pl.struct(**fields).struct.json_encode())


def drop_json_nulls(js: pl.Expr) -> pl.Expr:
    """Remove `"key":null` members from flat-ish JSON object strings made by `struct.json_encode`."""
    return js.str.replace_all(r'"[^"]+":null,', "").str.replace_all(r',"[^"]+":null\}', "}").str.replace_all(
        r'\{"[^"]+":null\}', "{}"
    )


# ----------------------------------------------------------------------------- preparation (shared)

GLOBAL_RANK_ENVELOPES = ("c10", "openmpi", "lightning")
"""Envelopes whose rank is the global rank (FORMATS.md §1.1)."""
_AUTOLINK = r"\[([^\]]+)\]\(https?://[^)]*\)"
_COLLECTOR_TS = r"^(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<zone>Z|[+-]\d\d:?\d\d)?:? "


def prepare(lines: pl.Series, ctx: FileContext) -> pl.DataFrame:
    """Number the lines and strip paste artefacts, collector timestamps and launcher envelopes.

    Returns a frame with line, text (verbatim), body (what the grammars read), env_rank, env_rank_source,
    env_host, env_pid, pre_ts, pre_ts_quality, known (set later), cont (False until `join_wrapped`).
    """
    return _prepare_frame(numbered(lines, ctx))


def _prepare_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """`prepare` on a frame of line, text (a subset of a file's lines keeps its line numbers). Steps that
    cannot change any line (no link, quote or collector timestamp; no envelope host) are skipped."""
    t = pl.col("text").fill_null("")
    # the link and quote tests and the literal guards (`_may`) of the collector timestamp and the envelopes,
    # in one select: with no link and no quote, `_b` is the text (null: ""), what the guards were run on
    got = frame.select(
        link=t.str.contains("](http", literal=True).any(),
        quote=t.str.starts_with(">").any(),
        ts=_may_expr(frame.height, t, _COLLECTOR_TS),
        env=_may_expr(frame.height, t, _ANY_ENVELOPE),
    ).row(0, named=True)
    plain = not (got["link"] or got["quote"])
    if got["link"]:
        t = (
            pl.when(t.str.contains("](http", literal=True))
            .then(t.str.replace_all(arx(_AUTOLINK), "$1"))
            .otherwise(t)
        )
    frame = frame.with_columns(_b=t)
    if (got["quote"] or got["link"]) and frame.get_column("_b").str.starts_with(">").any():
        frame = frame.with_columns(_b=pl.col("_b").str.replace(arx(r"^> ?"), ""))
    ts = (got["ts"] if plain else _may(frame.get_column("_b"), _COLLECTOR_TS)) and bool(
        frame.select(pl.col("_b").str.contains(arx(_COLLECTOR_TS)).any()).item()
    )
    if ts:
        ts_raw = pl.col("_b").str.extract_groups(arx(_COLLECTOR_TS))
        frame = frame.with_columns(_tsg=ts_raw).with_columns(
            _b=pl.when(pl.col("_tsg").struct.field("ts").is_not_null())
            .then(pl.col("_b").str.replace(arx(_COLLECTOR_TS), ""))
            .otherwise(pl.col("_b"))
        )
    if not (got["env"] if plain and not ts else _may(frame.get_column("_b"), _ANY_ENVELOPE)):
        # no line can open with a launcher envelope: what `envelope_struct` gives for such lines
        frame = frame.with_columns(
            body=pl.col("_b"),
            env_rank=pl.lit(None, dtype=pl.Int32),
            env_rank_source=pl.lit(None, dtype=pl.String),
            env_host=pl.lit(None, dtype=pl.String),
            env_pid=pl.lit(None, dtype=pl.Int64),
            env_global_rank=pl.lit(None, dtype=pl.Int32),
        )
        if not ts:
            return frame.drop("_b").with_columns(
                pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
                pre_ts_quality=pl.lit(None, dtype=pl.String),
            )
        return _pre_ts(frame)
    frame = frame.with_columns(_env=_envelopes(frame.get_column("_b")))
    env = {name: pl.col("_env").struct.field(name) for name in ("rest", "rank", "rank_source", "host", "pid")}
    if frame.select(env["host"].is_not_null().any()).item():
        is_ip = env["host"].str.contains(arx(r"^(?:\d{1,3}\.){3}\d{1,3}$"))
        # short host names as NCCL prints them; IPs (pdsh) stay whole
        env_host = pl.when(is_ip).then(env["host"]).otherwise(env["host"].str.split(".").list.first())
    else:
        env_host = pl.lit(None, dtype=pl.String)
    frame = frame.with_columns(
        body=env["rest"],
        env_rank=env["rank"],
        env_rank_source=env["rank_source"],
        env_host=env_host,
        env_pid=env["pid"],
    ).drop("_env")
    # ranks that prefixes state globally (c10 `[rankN]:`, Open MPI, Lightning); torchrun `[defaultN]:` is local
    frame = frame.with_columns(
        env_global_rank=pl.when(pl.col("env_rank_source").is_in(list(GLOBAL_RANK_ENVELOPES))).then(
            pl.col("env_rank")
        )
    )
    if not ts:
        return frame.drop("_b").with_columns(
            pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")), pre_ts_quality=pl.lit(None, dtype=pl.String)
        )
    return _pre_ts(frame)


_PY_ENVELOPES = tuple(
    (name, re.compile(p.replace("(?<", "(?P<")), frozenset(re.findall(r"\(\?<(\w+)>", p)))
    for name, p in ENVELOPES
)
_PY_ENVELOPE_ROWS = 256
"""Up to this many lines (printable ASCII) are split by `_py_envelope`: `envelope_struct` costs ~30 regex
passes, each a compile once polars' per-thread regex cache is full (a big chunk's few non-fast-lane lines)."""
_UNSAFE = re.compile(r"[^\t\x20-\x7e]")
"""Characters outside printable ASCII: where Python's `re` and polars' engine may read a pattern otherwise."""


_ENV_KEY = _ANY_ENVELOPE + "*"
"""The longest run of envelopes opening a line, each the first of `ENVELOPES` that matches there (at most one
can: they open with different characters or literals): it holds every prefix `_py_envelope` strips (those
are envelopes in the same order, in at most three rounds), so a line's split is its key's split, followed
by the rest of the line (no envelope pattern reads past its match, nor has an anchor but `^`)."""
_PY_ENVELOPE_KEYS = 512
_ENVELOPE_META = {k: v for k, v in _ENVELOPE_FIELDS.items() if k != "rest"}
"""Up to this many distinct keys (`_ENV_KEY`: one per launcher rank or host, in practice) are split by
`_py_envelope` and mapped back to the lines."""


def _envelopes(texts: pl.Series) -> pl.Series:
    """`envelope_struct` of a column of strings (no nulls): in Python for a few printable-ASCII lines, or for
    the distinct envelope runs (`_ENV_KEY`) of many lines."""
    if len(texts) <= _PY_ENVELOPE_ROWS:
        values = texts.to_list()
        if None not in values and not any(_UNSAFE.search(t) for t in values):
            rows = [_py_envelope(t) for t in values]
            return pl.DataFrame(rows, schema=_ENVELOPE_FIELDS, orient="row").to_struct("_env")
    else:
        keyed = _keyed_envelopes(texts)
        if keyed is not None:
            return keyed
    return pl.select(_env=envelope_struct(pl.lit(texts))).to_series()


def _keyed_envelopes(texts: pl.Series) -> pl.Series | None:
    """`envelope_struct(texts)` worked out once per distinct `_ENV_KEY` run (in Python), or None when the runs
    are too many or not printable ASCII (or a line is null)."""
    keys = texts.str.extract(arx(_ENV_KEY), 0).alias("_key")
    if keys.null_count():
        return None
    uniq = keys.unique().to_list()
    if len(uniq) > _PY_ENVELOPE_KEYS or any(_UNSAFE.search(k) for k in uniq):
        return None
    rows = [_py_envelope(k) for k in uniq]
    table = pl.DataFrame(
        {
            "_key": uniq,
            "_cut": [len(k) - len(r[0]) for k, r in zip(uniq, rows, strict=True)],
            **{name: [r[i] for r in rows] for i, name in enumerate(_ENVELOPE_FIELDS) if i},
        },
        schema={"_key": pl.String, "_cut": pl.Int64, **_ENVELOPE_META},
    )
    got = keys.to_frame().join(table, on="_key", how="left", maintain_order="left")
    return (
        got.with_columns(texts.alias("_t"))
        .select(pl.col("_t").str.slice(pl.col("_cut")).alias("rest"), *_ENVELOPE_META)
        .to_struct("_env")
    )


def _py_envelope(text: str) -> tuple[str, int | None, str | None, str | None, int | None]:
    """`parsers._common._split_all` of one line: three rounds of every envelope, outermost first (rest, rank,
    rank_source, host, pid); a number too large for the column's type is null, as polars' cast makes it."""
    rest, rank, source, host, pid = text, None, None, None, None
    for _ in range(3):
        for name, rx, groups in _PY_ENVELOPES:
            m = rx.match(rest)
            if m is None:
                continue
            if "rank" in groups:
                v = int(m.group("rank"))
                rank, source = (v if v < 2**31 else None), name
            if "host" in groups:
                host = m.group("host")
            if "pid" in groups:
                v = int(m.group("pid"))
                pid = v if v < 2**63 else None
            rest = rest[m.end() :]
    return rest, rank, source, host, pid


def _pre_ts(frame: pl.DataFrame) -> pl.DataFrame:
    """pre_ts, pre_ts_quality from the collector timestamp groups `_tsg` (drops `_b`, `_tsg`)."""
    raw = pl.col("_tsg").struct.field("ts").str.replace(",", ".").str.replace("T", " ")
    zone = pl.col("_tsg").struct.field("zone")
    with_zone = (
        (raw + zone.str.replace("Z", "+00:00").str.replace(arx(r"^([+-]\d\d)(\d\d)$"), "$1:$2"))
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
    )
    local = raw.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.replace_time_zone(
        "UTC"
    )
    frame = frame.with_columns(
        pre_ts=pl.when(zone.is_not_null()).then(with_zone).otherwise(local),
        pre_ts_quality=pl.when(raw.is_null())
        .then(None)
        .when(zone.is_not_null())
        .then(pl.lit("exact"))
        .otherwise(pl.lit("local_assumed_utc")),
    ).drop("_b", "_tsg")
    return frame


_MAPPED_V4 = r"^::ffff:(\d+\.\d+\.\d+\.\d+)$"
"""An IPv4-mapped IPv6 address (a RoCE GID), its IPv4 part."""
_SMALL = 4000
"""Frames up to this many rows get literal guards (`_may`) before a regex; on bigger ones the regex just runs."""


def _may_expr(height: int, col: pl.Expr, rx: str) -> pl.Expr:
    """`_may` as an expression over a frame of `height` rows (one answer among others in a select)."""
    lits = _literals_rx(rx) if height <= _SMALL else None
    return col.str.contains(lits).any() if lits is not None else pl.lit(True)


def _may(col: pl.Series, rx: str) -> bool:
    """False only when no value of `col` (a small frame's column) holds a literal every match of `rx` needs."""
    if len(col) > _SMALL:
        return True
    lits = _literals_rx(rx)
    if lits is None:
        return True
    # (one regex pass of the literals: cheaper than joining the values' text for a search in Python)
    return bool(col.str.contains(lits).any())


@cache
def _literals_rx(rx: str) -> str | None:
    """A regex of `_literals(rx)` (escaped, in alternation), or None when none can be named."""
    lits = _literals(rx)
    return None if lits is None else "|".join(re.escape(x) for x in lits)


NCCL_START = NCCL_RE.split(r"\s?(?P<msg>")[0].replace("(?P<", "(?P<_")
"""`NCCL_RE` without the message: `contains` stops at the level word instead of scanning the whole line."""
_RAS_MARK = r"^(?:Communicators\.\.\.|Job summary\s*$|#\d+-\d+ \([0-9a-f]+\) [A-Z]+\s*$)"


def has_ras(frame: pl.DataFrame) -> bool:
    """True when the file holds an ncclras report (its section heads), so RAS lines are worth matching."""
    if frame.height == 0 or not _may(frame.get_column("body"), _RAS_MARK):
        return False
    return bool(frame.select(pl.col("body").str.contains(arx(_RAS_MARK)).any()).item())


def nccl_understood(body: pl.Expr, ras: bool = True) -> pl.Expr:
    """Boolean: the line belongs to the NCCL grammar (debug lines, bare version, OFI legacy, RAS report
    when `ras`)."""
    # one alternation (groups made non-capturing), one regex pass; BARE_VERSION_RE starts `^NCCL version`
    return body.str.contains(arx(_UNDERSTOOD_RAS if ras else _UNDERSTOOD))


def _alternation(*patterns: str) -> str:
    return "|".join(f"(?:{re.sub(r'[(][?]P<[A-Za-z_][A-Za-z_0-9]*>', '(?:', p)})" for p in patterns)


_UNDERSTOOD = _alternation(NCCL_START, BARE_VERSION_RE, r"^(?:INFO|WARN|TRACE): Function: \w+ Line: \d+: ")
_UNDERSTOOD_RAS = _alternation(NCCL_START, BARE_VERSION_RE, r"^(?:INFO|WARN|TRACE): Function: \w+ Line: \d+: ", RAS_LINE_RE)


_OWN_START = r"^(?:#|\s*\[|\s*\(|\s*\d{4}-\d\d-\d\d|\s*(?i:iteration|step|epoch)\b|\s+File \"|Traceback)"
"""Starts of lines that are records of their own (launcher/log prefixes, step lines), never continuations."""
_WRAPPABLE = r"NCCL (?:WARN|ERROR)|^\[?[EFW](?:\d{3,4} [\d:.]+(?: +\d+)?)? ?[\w./-]+\.(?:cpp|hpp|cc|h|py):\d+\]"


def join_wrapped(frame: pl.DataFrame, wrap_width: Callable[[], int | None] | None = None) -> pl.DataFrame:
    """Mark hard-wrapped continuation lines (`cont`) and append them to the body of the line they continue.

    A line is a continuation when no grammar knows it, it is not blank, it does not open like a record of
    its own (`[`, `(`, a date, a step line, a traceback), the previous line is at least 80 characters
    long, and the run it extends starts at a warning/error record (NCCL WARN, c10 E/F/W line): those are
    the records events come from, and INFO/COLL lines are never re-joined. Pieces are joined without a separator when
    the previous line has the file's wrap width (the most common length ≥ 80, seen ≥ 3 times), else with
    one space (soft wrap at a word). `wrap_width`, when given, says the wrap width (of the whole file when
    `frame` holds some of its lines only); it is asked only when some line is joined.
    """
    if WRAP_SPARSE and frame.height > _SMALL:
        known = frame.get_column("known")
        free = (known == False).fill_null(False).arg_true()  # noqa: E712  (only these can continue a line)
        if 2 * len(free) < frame.height:
            return _join_sparse(frame, free, wrap_width)
    return _join_rows(frame, wrap_width)


WRAP_SPARSE = True
"""`join_wrapped` reads a big frame's not-understood lines and the lines before them only (off: every line;
tests compare both)."""


def _join_sparse(
    frame: pl.DataFrame, free: pl.Series, wrap_width: Callable[[], int | None] | None
) -> pl.DataFrame:
    """`_join_rows(frame)` worked out on the rows `free` (positions of the lines known to be False, the only
    ones that can continue a line) and the row before each: a continuation's previous line and its run's head
    are among them, and every row left out heads a run of its own without a continuation (the row after it
    is no candidate), so the runs, tails and heads are those of the whole frame."""
    free = free.cast(pl.Int64)
    at = pl.concat([free, free - 1]).unique().sort()
    at = at.filter(at >= 0)
    if wrap_width is None:  # (the width of the whole frame's lines)
        texts, ascii = frame.get_column("text"), bool(_common._ascii)
        wrap_width = lambda: _wrap_width(texts, ascii)  # noqa: E731
    got = _join_rows(frame.select("body", "known")[at], wrap_width)
    cont = repeated(False, frame.height, pl.Boolean).scatter(at, got.get_column("cont"))
    body = frame.get_column("body").clone().scatter(at, got.get_column("body"))
    return frame.with_columns(body, cont.alias("cont"))


def _join_rows(frame: pl.DataFrame, wrap_width: Callable[[], int | None] | None = None) -> pl.DataFrame:
    """`join_wrapped` over every row of `frame`."""
    blank = pl.col("body").fill_null("").str.strip_chars().str.len_bytes() == 0
    plen = pl.col("body").fill_null("").str.len_chars().shift(1)
    own_start = pl.col("body").fill_null("").str.contains(arx(_OWN_START))
    cand = ~pl.col("known") & (plen >= 80) & ~blank & ~own_start
    # only warning/error records are re-joined (NCCL WARN, c10 E/F/W, the 1.x "[E ...]" form)
    head = pl.col("known") & pl.col("body").fill_null("").str.contains(arx(_WRAPPABLE))
    f = frame.with_columns(_cand=cand.fill_null(False))
    if not f.get_column("_cand").any():
        return f.drop("_cand").with_columns(cont=pl.lit(False))
    # a run is a non-candidate line (its head) and the candidates after it: the head's `_WRAPPABLE` test
    # carried down the run (a forward fill, not a window over ~every line); the candidates before the first
    # head (run 0) continue nothing
    cand_c = pl.col("_cand")
    f = f.with_columns(
        _run=(~cand_c).cast(pl.Int32).cum_sum(),
        cont=cand_c & pl.when(~cand_c).then(head.fill_null(False)).forward_fill().fill_null(False),
    )
    if not f.get_column("cont").any():
        return f.drop("_cand", "_run")
    ascii = bool(_common._ascii)
    width = wrap_width() if wrap_width is not None else _wrap_width(frame.get_column("text"), ascii)
    sep = (
        pl.when(plen == width).then(pl.lit("")).otherwise(pl.lit(" "))
        if width is not None
        else pl.lit(" ")
    )
    f = f.with_columns(_piece=pl.when(pl.col("cont")).then(sep + pl.col("body")))
    tails = f.filter(pl.col("cont")).group_by("_run").agg(_tail=pl.col("_piece").str.join(""))
    f = f.join(tails, on="_run", how="left", maintain_order="left")
    # (a run with a tail has a head: its first line, the one non-candidate of the run)
    first = ~pl.col("_cand")
    f = f.with_columns(
        body=pl.when(first & pl.col("_tail").is_not_null()).then(pl.col("body") + pl.col("_tail")).otherwise(pl.col("body")),
    )
    return f.drop("_cand", "_run", "_piece", "_tail")


def _wrap_width(texts: pl.Series, ascii: bool = False) -> int | None:
    """The wrap width of a file's lines: the most common length of 80 characters or more, seen 3+ times
    (`ascii`: no line holds a non-ASCII character, so its length is its number of bytes, a cheaper count)."""
    lengths = texts.fill_null("").str.len_bytes() if ascii else texts.fill_null("").str.len_chars()
    long = lengths.filter(lengths >= 80)
    if len(long):
        vc = long.value_counts(sort=True)
        if vc.height and int(vc.item(0, "count")) >= 3:
            return int(vc.item(0, long.name))
    return None


# ----------------------------------------------------------------------------- NCCL tables


NCCL_HEAD_RE = (
    r"(?:\[(?P<wts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] )?(?P<host>[^\s:\[\]|>]+):(?P<pid>\d+):"
    r"(?P<tid>\d+) \[(?P<dev>\d+)\](?: (?P<ms>\d+\.\d+))?(?: (?P<src>[\w./+-]+):(?P<srcline>\d+)"
    r"(?: \((?P<func>\w+)\))?)?$"
)
"""`NCCL_RE` up to ` NCCL `, matched on the short head only (a regex over whole lines is the slow part).
Not anchored at the start: a record glued after other output (a tqdm bar without its newline) still reads;
the host cannot contain `]`, `|` or `>`, so it starts after such junk."""
_LEVELS = ("INFO", "WARN", "TRACE", "ERROR", "ABORT")
_LEVEL_AFTER = [f" NCCL {lv}" for lv in _LEVELS]
"""What a line `split_nccl_lines` keeps holds (its first ` NCCL ` is followed by a level word)."""


_COLL_TOKENS = {1: "opCount", 3: "sendbuff", 5: "recvbuff", 7: "count", 9: "datatype", 11: "op", 13: "root", 15: "comm"}
_COLL_FIELDS = {"op": 0, "opc": 2, "sb": 4, "rb": 6, "count": 8, "dt": 10, "redop": 12, "root": 14, "comm": 16, "nranks": 17}


def coll_fields(df: pl.DataFrame, msg: str = "msg") -> pl.DataFrame:
    """Add struct column `c` with COLL_RE's fields, read by token position (the layout is fixed, and a regex
    over millions of COLL lines is the slow part). Rows whose keywords are not in place get nulls."""
    tok = df.select(_t=pl.col(msg).str.split_exact(" ", 18)).unnest("_t")
    f = [pl.col(f"field_{i}") for i in range(19)]
    ok = f[0].str.ends_with(":") & f[17].str.starts_with("[nranks=")
    for i, word in _COLL_TOKENS.items():
        ok = ok & (f[i] == word)
    ok = ok.fill_null(False)
    fields = {
        name: pl.when(ok).then(f[i].str.strip_suffix(":") if name == "op" else f[i]) for name, i in _COLL_FIELDS.items()
    }
    fields["nranks"] = fields["nranks"].str.extract(arx(r"(\d+)"), 1)
    return df.with_columns(tok.select(c=pl.struct(**fields)))


def split_nccl_lines(df: pl.DataFrame) -> pl.DataFrame:
    """Split `body` of candidate rows into NCCL_RE's fields (wts, host, pid, tid, dev, ms, src, srcline, func,
    level, msg) and keep the rows that match: cut at the first ` NCCL `, regex on the short head, literal
    checks for the level. Equivalent to `NCCL_RE`, several times faster on COLL-heavy logs."""
    body = pl.col("body")
    # NOTE: split, not find+slice: `str.find` counts bytes and `str.slice` characters (non-ASCII prefixes)
    parts = body.str.splitn(" NCCL ", 2)
    df = df.with_columns(_head=parts.struct.field("field_0"), _tail=parts.struct.field("field_1"))
    tail = pl.col("_tail")
    level = pl.lit(None, dtype=pl.String)
    for lv in reversed(_LEVELS):
        level = pl.when(tail.str.starts_with(lv)).then(pl.lit(lv)).otherwise(level)
    out = (
        df.with_columns(level=level)
        .filter(pl.col("level").is_not_null())
        .with_columns(
            msg=pl.col("_tail").str.slice(pl.col("level").str.len_chars()).str.strip_prefix(" "),
            g=pl.col("_head").str.extract_groups(arx(NCCL_HEAD_RE)),
        )
        .filter(pl.col("g").struct.field("host").is_not_null())
        .unnest("g")
        .drop("_head", "_tail")
    )
    return out


def head_columns(df: pl.DataFrame, ctx: FileContext) -> pl.DataFrame:
    """Add node, typed pid/tid/dev, ts and ts_quality to rows holding NCCL_HEAD_RE's fields (from
    `split_nccl_lines` or the fast lane's heads) and the prepared line's env_host, pre_ts, pre_ts_quality."""
    wts = (
        pl.col("wts")
        .str.replace(",", ".")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
        .dt.replace_time_zone("UTC")
        if df.get_column("wts").null_count() < df.height
        else pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    )
    ipv4 = r"^\d{1,3}(?:\.\d{1,3}){3}$"
    short = pl.col("host").str.split_exact(".", 1).struct.field("field_0")
    return df.with_columns(
        node=pl.coalesce(
            # NCCL cuts host names at the first '.'; an IPv4 "host" stays whole
            pl.when(pl.col("host").str.contains(arx(ipv4))).then(pl.col("host")).otherwise(short)
            if _may(df.get_column("host"), ipv4)
            else short,
            pl.col("env_host"),
            pl.lit(ctx.node),
        ),
        pid=pl.col("pid").cast(pl.Int64, strict=False),
        tid=pl.col("tid").cast(pl.Int64, strict=False),
        dev=pl.col("dev").cast(pl.Int32, strict=False),
        ts=pl.coalesce(wts, pl.col("pre_ts")),
        ts_quality=pl.when(pl.col("wts").is_not_null())
        .then(pl.lit("local_assumed_utc"))
        .otherwise(pl.col("pre_ts_quality"))
        .fill_null("none"),
    )


_HEAD_COLS = (
    "node",
    "host",
    "pid",
    "tid",
    "dev",
    "src",
    "srcline",
    "func",
    "ts",
    "ts_quality",
    "env_rank",
    "env_global_rank",
    "pre_ts",
    "pre_ts_quality",
)
"""What the NCCL tables read of a record's head (one row per distinct head in `Heads.table`)."""
_MSG_PREFIXES = ("NCCL", "cuda", "Boot", "NET/", "Usin")
_MSG_STARTS = (
    "NCCL version",
    "cudaDriverVersion",
    "NCCL_",
    "Bootstrap",
    "NET/IB",
    "NET/Socket",
    "Using network",
)
"""First 4 characters of the messages the inventory/network filters of `_nccl_rows` start with."""
_MSG_LITERALS = ("NET/OFI Selected", " - Init ", " nNodes ", " opCount ")
"""Literals the other message filters of `_nccl_rows` require."""
_MSG_LITERALS_RE = "|".join(re.escape(x) for x in _MSG_LITERALS)
"""One regex pass (a SIMD literal search) finds the rows holding any of them; `contains_any` is slower here."""
_CONN_PREFIXES = ("Chan", "Ring", "Tree", "Conn")
"""The first 4 characters of every `CONN_RE` match that starts with one of the words `_nccl_rows` filters on."""
_NS_SCHEMA = {
    "line": pl.Int64,
    "text": pl.String,
    "level": pl.String,
    "msg": pl.String,
    "node": pl.String,
    "host": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "dev": pl.Int32,
    "src": pl.String,
    "srcline": pl.String,
    "func": pl.String,
    "ts": pl.Datetime("us", "UTC"),
    "ts_quality": pl.String,
    "env_rank": pl.Int32,
    "env_global_rank": pl.Int32,
    "pre_ts": pl.Datetime("us", "UTC"),
    "pre_ts_quality": pl.String,
}


def _none(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


_N_SCHEMA = {"line": pl.Int64, "text": pl.String, "hc": pl.UInt32, "level": pl.String, "msg": pl.String}


def _nccl_rows(
    slow: pl.DataFrame, fast: FastLane, ctx: FileContext, ras: bool = True
) -> tuple[dict[str, list[pl.DataFrame]], list[str], list[str], pl.Series, _Keyed | None]:
    """Build NCCL events/comms/inventory parts; also return notes, the hosts seen and the numbers of the
    slow lines read as NCCL records; for a batch (`BatchContext`), each file's notes and hosts by its key
    (`line // FILE_SPAN`).

    `slow` is the prepared (and wrap-joined) frame of the lines the fast lane did not take; `fast` holds the
    NCCL records the fast lane read (rows `line, text, hc, level, msg`, heads by code `hc`). Every NCCL
    record is one row of `n` (line, text, hc, level, msg) whose head fields are `heads[hc]`; strictly-formed
    COLL lines of the fast lane are aggregated on their own (`_coll_partials`) and never enter `n`."""
    out: dict[str, list[pl.DataFrame]] = {"events": [], "comms": [], "inventory": []}
    notes: list[str] = []
    together = isinstance(ctx, BatchContext)
    keyed: _Keyed = {}  # (a batch's notes and hosts by file)
    body = pl.col("body")
    # (every regex step below is skipped when a literal check says it has nothing to read: polars compiles a
    # pattern on each use once more than ~32 are in use, ~0.3 ms each, the bulk of a small file's cost)
    ns = slow.filter(~pl.col("cont") & body.str.contains(" NCCL ", literal=True))
    if ns.height and not ns.select(body.str.contains_any(_LEVEL_AFTER).any()).item():
        ns = ns.clear()  # (no ` NCCL ` before a level word: no record, `split_nccl_lines` would keep no row)
    ns = split_nccl_lines(ns) if ns.height else ns
    # (no row is an NCCL record: no head to read; `" NCCL "` also opens `NCCL work`, `NCCL communicator`)
    ns = head_columns(ns, ctx) if ns.height else _none(_NS_SCHEMA)
    base = fast.heads.height
    heads = fast.heads.select(_HEAD_COLS)
    heads = pl.concat([heads, ns.select(_HEAD_COLS)], how="vertical") if ns.height else heads
    ns = ns.select("line", "text", hc=pl.int_range(base, base + pl.len(), dtype=pl.UInt32), level="level", msg="msg")
    if not (fast.n or ns.height or ras) and not _headless(slow):
        # no NCCL record, no ncclras report, no bare version or aws-ofi-nccl line: nothing below reads a row
        return out, notes, [], ns.get_column("line"), keyed if together else None
    # `n` is the fast lane's rows and the slow NCCL rows in line order; each filter below runs on both pieces
    # and merges what it keeps (merging all of `n` first would copy every row)
    pieces = [d for d in (fast.rest, ns) if d.height] or [fast.rest]

    def attach(df: pl.DataFrame, *cols: str) -> pl.DataFrame:
        """Rows of `n` (or a subset) with the named head fields added."""
        return df.hstack(heads.select(cols)[df.get_column("hc")])

    msg = pl.col("msg")
    # each message filter below is a prefix or a literal: one pass sorts out the rows any of them can take
    pieces = [d.with_columns(_p=msg.str.head(4)) for d in pieces]

    def keep(cond: pl.Expr) -> pl.DataFrame:
        """The rows of `n` where `cond` holds, in line order."""
        got = [d.filter(cond) for d in pieces]
        return got[0] if len(got) == 1 else got[0].merge_sorted(got[1], key="line")

    pre = keep(pl.col("_p").is_in(_MSG_PREFIXES))
    n_height = sum(d.height for d in pieces)
    if n_height > _SMALL:
        lit = keep(msg.str.contains(arx(_MSG_LITERALS_RE)))
    else:
        lit = keep(msg.str.contains_any(list(_MSG_LITERALS))) if n_height else pieces[0]
    has = dict.fromkeys(_MSG_STARTS + _MSG_LITERALS, False)
    if pre.height:
        has.update(pre.select(**{k: msg.str.starts_with(k).any() for k in _MSG_STARTS}).row(0, named=True))
    if lit.height:
        has.update(lit.select(**{k: msg.str.contains(k, literal=True).any() for k in _MSG_LITERALS}).row(0, named=True))

    def pick(df: pl.DataFrame, key: str, rx: str) -> pl.DataFrame:
        """Rows of `df` whose message starts with / holds `key` and matches `rx`."""
        if not has[key]:
            return df.clear()
        sel = msg.str.starts_with(key) if key in _MSG_STARTS else msg.str.contains(key, literal=True)
        df = df.filter(sel)
        return df.filter(msg.str.contains(arx(rx))) if df.height else df

    # ---- versions (prefixed ≥ 2.23, bare ≤ 2.21, RAS "compiled with")
    pv = pick(pre, "NCCL version", VERSION_RE)
    if pv.height:
        pv = attach(pv, "node", "pid").with_columns(v=msg.str.extract_groups(arx(VERSION_RE))).select(
            "node", "pid", "line", ver=pl.col("v").struct.field("ver"), cuda=pl.col("v").struct.field("cuda")
        )
    else:
        pv = _none({"node": pl.String, "pid": pl.Int64, "line": pl.Int64, "ver": pl.String, "cuda": pl.String})
    bare = slow.filter(~pl.col("cont") & body.str.starts_with("NCCL version"))
    if bare.height:
        bare = bare.filter(body.str.contains(arx(BARE_VERSION_RE)))
    if bare.height:
        # host of the last NCCL record before each bare version line (only worked out when there is one)
        every = pl.concat([_fast_before(fast, bare.get_column("line")), ns.select("line", "hc")]).sort("line")
        at = every.get_column("line").search_sorted(bare.get_column("line"), side="left").cast(pl.Int64) - 1
        if every.height:
            h = heads.get_column("node").gather(every.get_column("hc").gather(at.clip(0, None)))
            # (the record before must be in the same file: a batch's files follow one another)
            before = every.get_column("line").gather(at.clip(0, None))
            same = before // FILE_SPAN == bare.get_column("line") // FILE_SPAN
            bare = bare.with_columns(h=pl.when((at >= 0) & same).then(h))
        else:
            bare = bare.with_columns(h=pl.lit(None, dtype=pl.String))
        bare = (
            bare.with_columns(v=body.str.extract_groups(arx(BARE_VERSION_RE)))
            .select(
                node=pl.coalesce(pl.col("env_host"), pl.col("h"), pl.lit(ctx.node)),
                pid=pl.lit(None, dtype=pl.Int64),
                line=pl.col("line"),
                ver=pl.col("v").struct.field("ver"),
                cuda=pl.coalesce(pl.col("v").struct.field("cuda"), pl.col("v").struct.field("cuda2")),
            )
        )
        versions = pl.concat([pv, bare], how="vertical_relaxed")
    else:
        versions = pv
    inv = out["inventory"]

    def inventory(df: pl.DataFrame, component: str, attribute: str | pl.Expr, value: pl.Expr, device: pl.Expr | None = None) -> None:
        if df.height == 0:
            return
        inv.append(
            df.select(
                node=pl.col("node"),
                component=pl.lit(component),
                device=device if device is not None else pl.lit(None, dtype=pl.String),
                attribute=attribute if isinstance(attribute, pl.Expr) else pl.lit(attribute),
                value=value,
                source=pl.lit("nccl"),
                file=pl.lit(ctx.path),
                line=pl.col("line"),
            )
        )

    inventory(versions, "software", "nccl_version", pl.col("ver"))
    inventory(versions.filter(pl.col("cuda").is_not_null()), "software", "nccl_cuda_version", pl.col("cuda"))
    cd = pick(pre, "cudaDriverVersion", CUDA_DRIVER_RE)
    if cd.height:
        cd = attach(cd, "node").with_columns(
            v=msg.str.extract(arx(CUDA_DRIVER_RE), 1).cast(pl.Int64, strict=False)
        )
        cd = cd.filter(pl.col("v").is_not_null())  # (a version no Int64 holds, a corrupt line: no fact)
        inventory(cd, "software", "cuda_driver_version", format_str("{}.{}", pl.col("v") // 1000, (pl.col("v") % 1000) // 10))
    env = pick(pre, "NCCL_", ENV_RE)
    if env.height:
        env = attach(env, "node").with_columns(e=msg.str.extract_groups(arx(ENV_RE)))
        inventory(env, "software", pl.lit("env.") + pl.col("e").struct.field("var"), pl.col("e").struct.field("val"))

    # ---- node IPs and networks
    bs = pick(pre, "Bootstrap", BOOTSTRAP_RE)
    if bs.height:
        bs = attach(bs, "node", "pid").with_columns(b=msg.str.extract_groups(arx(BOOTSTRAP_RE)))
    ib = pick(pre, "NET/IB", NET_IB_RE)
    if ib.height:
        ib = attach(ib, "node", "pid").with_columns(b=msg.str.extract_groups(arx(NET_IB_RE)))
    ips = (
        pl.concat([x.select("node", "line", "b") for x in (bs, ib) if x.height], how="diagonal_relaxed")
        if (bs.height or ib.height)
        else None
    )
    if ips is not None:
        inventory(
            ips,
            "node",
            "ip",
            pl.col("b").struct.field("ip"),
            device=pl.col("b").struct.field("ifname"),
        )
    sock = pick(pre, "NET/Socket", NET_SOCKET_RE)
    sock = attach(sock, "node", "pid") if sock.height else sock
    using = pick(pre, "Using network", USING_NET_RE)
    using = attach(using, "node", "pid") if using.height else using
    ofi = pick(lit, "NET/OFI Selected", OFI_RE)
    if ofi.height:
        ofi = attach(ofi, "node", "pid").with_columns(o=msg.str.extract_groups(arx(OFI_RE)))
    net_parts = []
    if ib.height:
        items = pl.col("msg").str.extract_all(arx(NET_IB_ITEM_RE))
        ibx = ib.with_columns(items=items)
        net_parts.append(
            ibx.select(
                "node", "pid", "line",
                device=pl.col("items")
                .list.eval(pl.element().str.extract(arx(r"\]([\w.-]+):"), 1))
                .list.join(","),
                detail=json_detail(
                    transport=pl.when(pl.col("items").list.eval(pl.element().str.ends_with("/RoCE")).list.all())
                    .then(pl.lit("RoCE")).otherwise(pl.lit("IB")),
                    devices=pl.col("items").list.eval(pl.element().str.replace(arx(r"^\[\d+\]"), "")),
                    oob_if=pl.col("b").struct.field("ifname"),
                    oob_ip=pl.col("b").struct.field("ip"),
                    relaxed_ordering=pl.col("msg").str.contains("[RO]", literal=True),
                ),
            )
        )
        nics = ibx.select("node", "line", it=pl.col("items")).explode("it").filter(pl.col("it").is_not_null())
        nics = nics.with_columns(x=pl.col("it").str.extract_groups(arx(NET_IB_ITEM_RE)))
        inventory(nics, "nic", "nccl_transport", pl.col("x").struct.field("3"), device=pl.col("x").struct.field("1"))
    if sock.height:
        sx = sock.with_columns(items=pl.col("msg").str.extract_all(arx(NET_SOCKET_ITEM_RE)))
        net_parts.append(
            sx.select(
                "node", "pid", "line",
                device=pl.col("items")
                .list.eval(pl.element().str.extract(arx(r"\]([^:\s]+):"), 1))
                .list.join(","),
                detail=json_detail(transport=pl.lit("Socket"), devices=pl.col("items")),
            )
        )
        sip = sx.select("node", "line", it=pl.col("items")).explode("it").filter(pl.col("it").is_not_null())
        sip = sip.with_columns(x=pl.col("it").str.extract_groups(arx(NET_SOCKET_ITEM_RE)))
        inventory(sip, "node", "ip", pl.col("x").struct.field("2"), device=pl.col("x").struct.field("1"))
    if using.height:
        net_parts.append(
            using.select(
                "node", "pid", "line",
                device=pl.lit(None, dtype=pl.String),
                detail=json_detail(transport=msg.str.extract(arx(USING_NET_RE), 1), selected=pl.lit(True)),
            )
        )
    if ofi.height:
        net_parts.append(
            ofi.select(
                "node", "pid", "line",
                device=pl.lit(None, dtype=pl.String),
                detail=json_detail(
                    transport=pl.lit("OFI"),
                    provider=pl.col("o").struct.field("prov"),
                    nics=pl.col("o").struct.field("nics").cast(pl.Int64, strict=False),
                ),
            )
        )
    for p in net_parts:
        out["comms"].append(p.with_columns(record=pl.lit("network"), file=pl.lit(ctx.path)))

    # ---- rank map
    init = lit.filter(msg.str.contains(" - Init ", literal=True)) if has[" - Init "] else lit.clear()
    if init.height:
        init = _init_fields(attach(init, "node", "pid", "dev"))
    topo = pick(lit, " nNodes ", TOPO_RE)
    if topo.height:
        topo = attach(topo, "node", "pid", "dev").with_columns(i=msg.str.extract_groups(arx(TOPO_RE)))
    f = pl.col("i").struct.field
    rank_parts = []
    if init.height:
        rank_parts.append(
            init.select(
                "node", "pid", "line",
                comm=f("comm"),
                comm_id=pl.coalesce(f("commid"), f("comm")),
                rank=f("rank").cast(pl.Int32, strict=False),
                nranks=f("nranks").cast(pl.Int32, strict=False),
                cuda_dev=f("dev").cast(pl.Int32, strict=False),
                gpu_bus_id=_init_bus_ids(init.get_column("i").struct.field("bus")),
                phase=f("phase"),
                nvml_dev=f("nvml").cast(pl.Int32, strict=False),
                prio=pl.when(f("phase") == "COMPLETE").then(0).otherwise(1),
            )
        )
    if topo.height:
        rank_parts.append(
            topo.select(
                "node", "pid", "line",
                comm=f("comm"),
                comm_id=f("comm"),
                rank=f("rank").cast(pl.Int32, strict=False),
                nranks=f("nranks").cast(pl.Int32, strict=False),
                cuda_dev=pl.col("dev"),
                nnodes=f("nnodes").cast(pl.Int32, strict=False),
                local_rank=f("lrank").cast(pl.Int32, strict=False),
                phase=pl.lit("topology"),
                prio=pl.lit(2),
            )
        )
    rank_map = None
    allr = None
    if rank_parts:
        allr = pl.concat(rank_parts, how="diagonal_relaxed")
        if together:
            _apart(allr, pv)
        # commId (when some line printed it) wins for every row of the same process-local comm pointer
        cid = allr.filter(pl.col("comm_id") != pl.col("comm")).group_by("node", "pid", "comm").agg(cid=pl.col("comm_id").first())
        allr = allr.join(cid, on=["node", "pid", "comm"], how="left").with_columns(comm_id=pl.coalesce("cid", "comm_id"))
        # COMPLETE > START > topology, merged per (node, pid, comm, rank)
        merged = (
            allr.sort("prio", "line")
            .group_by("node", "pid", "comm", "rank", maintain_order=True)
            .agg(
                pl.col("line").first(),
                pl.col("comm_id").first(),
                pl.col("nranks").drop_nulls().first(),
                pl.col("cuda_dev").drop_nulls().first(),
                pl.col("gpu_bus_id").drop_nulls().first() if "gpu_bus_id" in allr.columns else pl.lit(None, dtype=pl.String).alias("gpu_bus_id"),
                pl.col("phase").first(),
                pl.col("nvml_dev").drop_nulls().first() if "nvml_dev" in allr.columns else pl.lit(None, dtype=pl.Int32).alias("nvml_dev"),
                pl.col("nnodes").drop_nulls().first() if "nnodes" in allr.columns else pl.lit(None, dtype=pl.Int32).alias("nnodes"),
                pl.col("local_rank").drop_nulls().first() if "local_rank" in allr.columns else pl.lit(None, dtype=pl.Int32).alias("local_rank"),
                phases=pl.col("phase").unique().sort(),
            )
        )
        # version per process where it printed one, else the file's single version
        pver = pv.group_by("node", "pid").agg(nccl_version=pl.col("ver").first())
        merged = merged.join(pver, on=["node", "pid"], how="left")
        if together:
            one = pl.when(pl.col("ver").n_unique() == 1).then(pl.col("ver").first())
            ones = versions.group_by(_f=pl.col("line") // FILE_SPAN).agg(_one=one)
            merged = (
                merged.with_columns(_f=pl.col("line") // FILE_SPAN)
                .join(ones, on="_f", how="left", maintain_order="left")
                .with_columns(nccl_version=pl.coalesce(pl.col("nccl_version"), pl.col("_one")))
                .drop("_f", "_one")
            )
        else:
            file_ver = versions.get_column("ver").unique()
            one_ver = file_ver[0] if len(file_ver) == 1 else None
            merged = merged.with_columns(
                nccl_version=pl.coalesce(pl.col("nccl_version"), pl.lit(one_ver, dtype=pl.String))
            )
        out["comms"].append(
            merged.select(
                record=pl.lit("rank"),
                node="node",
                comm_id="comm_id",
                rank="rank",
                nranks="nranks",
                cuda_dev="cuda_dev",
                gpu_bus_id="gpu_bus_id",
                pid="pid",
                nccl_version="nccl_version",
                detail=json_detail(
                    comm=pl.col("comm"),
                    phase=pl.col("phase"),
                    phases=pl.col("phases"),
                    nvml_dev=pl.col("nvml_dev"),
                    nnodes=pl.col("nnodes"),
                    local_rank=pl.col("local_rank"),
                ),
                file=pl.lit(ctx.path),
                line="line",
            )
        )
        rank_map = merged.select("node", "pid", "comm", "comm_id", "rank", "nranks", "cuda_dev", "gpu_bus_id")

    # ---- COLL aggregates: strict lines of the fast lane as partial aggregates, the others line by line
    coll = lit.filter(msg.str.contains(" opCount ", literal=True)) if has[" opCount "] else lit.clear()
    if coll.height:
        coll = coll_fields(attach(coll, "node", "pid", "dev")).filter(pl.col("c").struct.field("op").is_not_null())
    n_coll = coll.height + _coll_lines(fast)
    if n_coll and together:
        raise NotTogether  # (a COLL row's detail quotes its first line)
    if n_coll:
        cf = pl.col("c").struct.field
        c2 = None if coll.height == 0 else coll.select(
            "node", "pid", "line", "dev",
            comm=cf("comm"),
            op=cf("op"),
            opc=cf("opc").str.to_integer(base=16, strict=False),
            cnt=cf("count").cast(pl.Int64, strict=False),
            dt=cf("dt").cast(pl.Int64, strict=False),
            ro=cf("redop").cast(pl.Int64, strict=False),
            root=cf("root").cast(pl.Int64, strict=False),
            nranks=cf("nranks").cast(pl.Int32, strict=False),
        )
        if fast.coll.height:
            agg = _coll_merge(c2 if coll.height else None, _coll_partials(fast.coll, heads))
        else:
            agg = c2.group_by("node", "pid", "comm", "op", maintain_order=True).agg(
                calls=pl.len(),
                first_opcount=pl.col("opc").first(),
                seq=pl.col("opc").last(),
                count=pl.col("cnt").last(),
                dt=pl.col("dt").last(),
                ro=pl.col("ro").last(),
                nranks=pl.col("nranks").last(),
                cuda_dev=pl.col("dev").last(),
                first_line=pl.col("line").first(),
                line=pl.col("line").last(),
                peers=pl.col("root").unique().sort(),
            )
        if rank_map is not None:
            agg = agg.join(
                rank_map.select("node", "pid", "comm", "comm_id", "rank"), on=["node", "pid", "comm"], how="left"
            )
        else:
            agg = agg.with_columns(comm_id=pl.lit(None, dtype=pl.String), rank=pl.lit(None, dtype=pl.Int32))
        is_p2p = pl.col("op").is_in(["Send", "Recv"])
        out["comms"].append(
            agg.select(
                record=pl.lit("coll"),
                node="node",
                comm_id=pl.coalesce("comm_id", "comm"),
                rank="rank",
                nranks="nranks",
                cuda_dev="cuda_dev",
                pid="pid",
                op="op",
                seq="seq",
                count="count",
                dtype=pl.col("dt").replace_strict(_DTYPES, default=None, return_dtype=pl.String),
                redop=pl.when(~is_p2p).then(pl.col("ro").replace_strict(_REDOPS, default=None, return_dtype=pl.String)),
                value=pl.col("calls").cast(pl.Float64),
                detail=json_detail(
                    comm=pl.col("comm"),
                    calls=pl.col("calls"),
                    first_opcount=pl.col("first_opcount"),
                    first_line=pl.col("first_line"),
                    peers=pl.when(is_p2p).then(pl.col("peers")),
                ),
                file=pl.lit(ctx.path),
                line="line",
            )
        )
        notes.append(f"{n_coll} COLL lines aggregated into {agg.height} rows")

    # a CONN_RE match starting with Channel/Ring/Tree/Connected starts with one of _CONN_PREFIXES
    conn_p = pl.col("_p").is_in(_CONN_PREFIXES)
    warn_p = pl.col("level").is_in(["WARN", "ERROR", "ABORT"])
    got = [d.select(conn=conn_p.any(), warn=warn_p.any()).row(0, named=True) for d in pieces]
    flags = {k: any(g[k] for g in got) for k in ("conn", "warn")}
    conn_rx = arx(CONN_RE)
    if together and flags["conn"]:
        conns = pl.concat([d.filter(conn_p & msg.str.contains(conn_rx)).select("line") for d in pieces])
        for f, n in conns.group_by(_f=pl.col("line") // FILE_SPAN).len().iter_rows():
            keyed.setdefault(f, ([], []))[0].append(f"{n} ring/tree/channel lines")
    conn = 0
    if flags["conn"] and not together:
        conn = sum(int(d.select((conn_p & msg.str.contains(conn_rx)).sum()).item()) for d in pieces)
    if conn:
        notes.append(f"{conn} ring/tree/channel lines")

    # ---- WARN events
    legacy = slow.filter(~pl.col("cont") & body.str.contains(": Function: ", literal=True))
    legacy = (
        legacy
        if legacy.height == 0
        else (
            legacy.filter(body.str.contains(arx(OFI_LEGACY_RE)))
            .with_columns(o=body.str.extract_groups(arx(OFI_LEGACY_RE)))
            .filter(pl.col("o").struct.field("level") == "WARN")
            .pipe(
                headless_warns,
                ctx,
                src=pl.lit("aws-ofi-nccl"),
                srcline=pl.col("o").struct.field("srcline"),
                func=pl.col("o").struct.field("func"),
                msg=pl.col("o").struct.field("msg"),
            )
        )
    )
    nw = keep(warn_p) if flags["warn"] else pieces[0].clear()
    wparts = [] if not (nw.height or legacy.height) else [
        attach(nw, *_HEAD_COLS).select(
            "line",
            "text",
            "env_rank",
            "env_global_rank",
            "pre_ts",
            "pre_ts_quality",
            "node",
            "pid",
            "tid",
            "dev",
            "src",
            "srcline",
            "func",
            "msg",
            "ts",
            "ts_quality",
        )
    ]
    if legacy.height:
        wparts.append(legacy)
    warns = pl.concat(wparts, how="vertical_relaxed") if (nw.height or legacy.height) else nw
    if together and warns.height and allr is not None:
        _apart(allr, warns)
    if warns.height:
        ev = warn_events(warns, ctx, rank_map)
        out["events"].append(ev)
        # RoCE: the reporter's own GID is an IPv4-mapped address of its HCA; record it so peers named by
        # GID (remote_gid_ip) resolve to nodes like OOB/bootstrap IPs do
        gid = ev.filter(pl.col("kind") == "nccl_ib_error").select(
            "node",
            "line",
            d=pl.col("detail").str.json_decode(pl.Struct({"local_gid": pl.String, "hca": pl.String})),
        )
        gid = gid.with_columns(
            ip=pl.col("d").struct.field("local_gid").str.extract(arx(_MAPPED_V4), 1)
        )
        inventory(
            gid.filter(pl.col("ip").is_not_null()),
            "node",
            "ip",
            pl.col("ip"),
            device=pl.coalesce(pl.col("d").struct.field("hca"), pl.lit("gid")),
        )

    # ---- RAS report
    ras_ev = _ras_events(slow, ctx) if ras else None
    if ras_ev is not None:
        out["events"].append(ras_ev)
    if together and (fast.n or ns.height):
        used = pl.concat([fast.rows.select("line", "hc"), ns.select("line", "hc")])
        used = used.select(_f=pl.col("line") // FILE_SPAN, hc=pl.col("hc")).unique()
        named = used.with_columns(
            node=heads.get_column("node").gather(used.get_column("hc")),
            host=heads.get_column("host").gather(used.get_column("hc")),
        )
        by_file = (
            named.filter(pl.col("host").is_not_null()).group_by("_f").agg(pl.col("node").unique().sort())
        )
        for f, nodes in by_file.iter_rows():
            keyed.setdefault(f, ([], []))[1].extend(nodes)
        hosts = []
    elif fast.n or ns.height:
        used = pl.concat([fast.used_heads(), ns.get_column("hc")]).unique()
        hosts = heads[used].filter(pl.col("host").is_not_null()).get_column("node").unique().sort().to_list()
    else:
        hosts = []
    return out, notes, hosts, ns.get_column("line"), keyed if together else None


_Keyed = dict[int, tuple[list[str], list[str]]]
"""A batch's notes and hosts by file (`line // FILE_SPAN`): files with none are left out."""


def _apart(ranks: pl.DataFrame, other: pl.DataFrame) -> None:
    """Raise `NotTogether` where one process (node, pid) has rows in two files of a batch: the grammar merges
    a process's Init and topology rows, takes its version, and joins its warnings to its ranks, by (node, pid)
    (the same process's log twice, rotated or copied, or heads without a host)."""
    keys = pl.concat(
        [d.select("node", "pid", _f=pl.col("line") // FILE_SPAN) for d in (ranks, other) if d.height],
        how="vertical_relaxed",
    ).filter(pl.col("pid").is_not_null())
    if keys.height and keys.select(pl.col("_f").n_unique().over("node", "pid").max()).item() > 1:
        raise NotTogether


def _headless(slow: pl.DataFrame) -> bool:
    """Whether a line of `slow` may be a bare `NCCL version` line or an aws-ofi-nccl legacy line (`_nccl_rows`
    reads those without an NCCL record head): their literal tests."""
    body = pl.col("body")
    return bool(
        slow.select(
            (
                ~pl.col("cont")
                & (body.str.starts_with("NCCL version") | body.str.contains(": Function: ", literal=True))
            )
            .fill_null(False)
            .any()
        ).item()
    )


@cache
def _literals(rx: str) -> tuple[str, ...] | None:
    return required_literals(rx)


@cache
def _groups_dtype(rx: str) -> pl.DataType:
    return pl.Series([], dtype=pl.String).str.extract_groups(rx).dtype


class _Guarded:
    """`str.contains` / `extract` / `extract_groups` over column `msg` of a few rows, as a constant (False,
    null) when no row holds a literal the regex needs (`parsers._sniff.required_literals`): an exact shortcut
    that spares polars compiling the pattern again."""

    def __init__(self, msgs: pl.Series) -> None:
        self.text = "\n".join(msgs.drop_nulls().to_list())

    def has(self, literal: str) -> bool:
        return literal in self.text

    def _may(self, rx: str) -> bool:
        return may_match(_literals(rx), self.text)

    def contains(self, rx: str) -> pl.Expr:
        return pl.col("msg").str.contains(arx(rx)) if self._may(rx) else pl.lit(False)

    def groups(self, rx: str) -> pl.Expr:
        if self._may(rx):
            return pl.col("msg").str.extract_groups(arx(rx))
        return pl.lit(None, dtype=_groups_dtype(rx))

    def extract(self, rx: str, group: int) -> pl.Expr:
        return pl.col("msg").str.extract(arx(rx), group) if self._may(rx) else pl.lit(None, dtype=pl.String)


def headless_warns(
    df: pl.DataFrame,
    ctx: FileContext,
    *,
    msg: pl.Expr,
    src: pl.Expr | None = None,
    srcline: pl.Expr | None = None,
    func: pl.Expr | None = None,
) -> pl.DataFrame:
    """Rows for `warn_events` from WARN records without an NCCL `host:pid:tid [dev]` head (aws-ofi-nccl's
    legacy lines, the NCCL error text PyTorch quotes): no pid/tid/device; node from the launcher envelope
    or the file; time from a collector prefix. `df` is a prepared frame (line, text, env_*, pre_ts*)."""
    none = pl.lit(None, dtype=pl.String)
    return df.select(
        "line",
        "text",
        "env_rank",
        "env_global_rank",
        "pre_ts",
        "pre_ts_quality",
        node=pl.coalesce(pl.col("env_host"), pl.lit(ctx.node)),
        pid=pl.lit(None, dtype=pl.Int64),
        tid=pl.lit(None, dtype=pl.Int64),
        dev=pl.lit(None, dtype=pl.Int32),
        src=none if src is None else src,
        srcline=none if srcline is None else srcline,
        func=none if func is None else func,
        msg=msg,
        ts=pl.col("pre_ts"),
        ts_quality=pl.col("pre_ts_quality").fill_null("none"),
    )


def warn_events(warns: pl.DataFrame, ctx: FileContext, rank_map: pl.DataFrame | None, source: str = "nccl") -> pl.DataFrame:
    """Classify WARN messages (`msg` column) into events; keep peer, status, vendor error etc. in detail.

    Also used by torch_distributed for the WARN text PyTorch quotes after `Last error:`.
    """
    if PY_WARNS:
        py = _py_warn_events(warns, ctx, rank_map, source)
        if py is not None:
            return py
    if DISTINCT_WARNS and warns.height > _PY_WARN_ROWS:
        distinct = warns.select(_WARN_KEY).unique(maintain_order=True)
        if 2 * distinct.height <= warns.height:
            fields = _warn_fields(distinct)
            w = warns.join(fields, on=list(_WARN_KEY), how="left", nulls_equal=True, maintain_order="left")
            return _warn_rows(w, ctx, rank_map, source)
    return _warn_rows(_warn_fields(warns), ctx, rank_map, source)


DISTINCT_WARNS = True
"""`warn_events` of many rows reads each distinct (message, pid, tid, device, source line, function) once
when they are at most half the rows (a WARN flood: the real IB completion-error log repeats 2 messages 2,316
times; ~22 ms of its file's ~50); off: every row (the tests compare both)."""
_WARN_KEY = ("msg", "pid", "tid", "dev", "src", "srcline", "func")
"""What an event's kind, code, severity and detail are read from (`_warn_fields`)."""


def _warn_fields(warns: pl.DataFrame) -> pl.DataFrame:
    """`warns` with each row's `kind`, `code`, `severity` and `detail`, read from its `_WARN_KEY` columns."""
    columns = warns.columns
    msg = pl.col("msg")
    rx = _Guarded(warns.get_column("msg"))
    kind = pl.lit("nccl_warn")
    severity = pl.lit("medium")
    # each kind's regex evaluated once (as a column), not once for kind and again for severity
    warns = warns.with_columns(**{f"_wk{i}": rx.contains(k_rx) for i, (_k, k_rx, _s) in enumerate(WARN_KINDS)})
    for i, (k, _rx, sev) in reversed(list(enumerate(WARN_KINDS))):
        hit = pl.col(f"_wk{i}")
        kind = pl.when(hit).then(pl.lit(k)).otherwise(kind)
        severity = pl.when(hit).then(pl.lit(sev)).otherwise(severity)
    w = warns.with_columns(kind=kind, severity=severity, ib=rx.groups(IB_COMPLETION_RE),
                           asy=rx.groups(ASYNC_RE), ibv=rx.groups(IBV_RE),
                           cu=rx.groups(CUDA_FAIL_RE), peer=rx.groups(PEER_RE))
    ibf = pl.col("ib").struct.field
    status = ibf("status").cast(pl.Int64, strict=False)
    w = w.with_columns(
        # status 5 (WR_FLUSH_ERR) is a consequence of an earlier error on the QP
        severity=pl.when((pl.col("kind") == "nccl_ib_error") & (status == 5)).then(pl.lit("medium")).otherwise("severity"),
        code=pl.when(pl.col("kind") == "nccl_ib_error").then(ibf("status"))
        .when(pl.col("kind") == "nccl_ibv_error").then(pl.col("ibv").struct.field("call"))
        .when(pl.col("kind") == "nccl_cuda_error").then(pl.col("cu").struct.field("err"))
        .when(pl.col("kind") == "nccl_ib_async_event").then(pl.col("asy").struct.field("event")),
    )
    w = w.with_columns(
        **{f"_ib_{k}": rx.extract(f_rx, 1) for k, f_rx in IB_FIELDS.items() if k != "direction"},
        _ib_direction=pl.coalesce(rx.extract(IB_FIELDS["direction"], 1), rx.extract(IB_FIELDS["direction"], 2)),
    )
    ib_detail = {k: pl.col(f"_ib_{k}") for k in IB_FIELDS}
    is_ib = pl.col("kind") == "nccl_ib_error"
    return w.select(
        *columns,
        "kind",
        "code",
        "severity",
        detail=json_detail(
            pid=pl.col("pid"),
            tid=pl.col("tid"),
            cuda_dev=pl.col("dev"),
            src=pl.when(pl.col("src").is_not_null()).then(format_str("{}:{}", pl.col("src"), pl.col("srcline"))),
            func=pl.col("func"),
            text=msg,
            peer=pl.coalesce(ibf("peer"), pl.col("peer").struct.field("peer")),
            peer_port=pl.coalesce(ibf("peer_port"), pl.col("peer").struct.field("peer_port")).cast(pl.Int64, strict=False),
            status=pl.when(is_ib).then(status),
            status_name=ibf("status_name"),
            opcode=pl.when(is_ib).then(ib_detail["opcode"].cast(pl.Int64, strict=False)),
            len=pl.when(is_ib).then(ib_detail["len"].cast(pl.Int64, strict=False)),
            vendor_err=pl.when(is_ib).then(ib_detail["vendor_err"].cast(pl.Int64, strict=False)),
            direction=pl.when(is_ib).then(ib_detail["direction"]),
            local_gid=pl.when(is_ib).then(ib_detail["local_gid"]),
            remote_gid=pl.when(is_ib).then(ib_detail["remote_gid"]),
            remote_gid_ip=pl.when(is_ib).then(
                ib_detail["remote_gid"].str.extract(arx(_MAPPED_V4), 1)
                if rx.has("::ffff:")
                else pl.lit(None, dtype=pl.String)
            ),
            hca=pl.coalesce(pl.when(is_ib).then(ib_detail["hca"]), pl.col("asy").struct.field("hca")),
            port=pl.col("asy").struct.field("port").cast(pl.Int64, strict=False),
            ibv_call=pl.col("ibv").struct.field("call"),
            error=pl.coalesce(pl.col("ibv").struct.field("err"), pl.col("cu").struct.field("err")),
            peer_rank=rx.extract(r"from rank (\d+)", 1).cast(pl.Int64, strict=False),
            retcode=rx.extract(r"retcode (\d+)", 1).cast(pl.Int64, strict=False),
            local_rank=rx.extract(r"by localRank (\d+)", 1).cast(pl.Int64, strict=False),
        ),
    )


def _warn_rows(w: pl.DataFrame, ctx: FileContext, rank_map: pl.DataFrame | None, source: str) -> pl.DataFrame:
    """The events of `warn_events` from its rows with their `_warn_fields`."""
    if rank_map is not None and rank_map.height:
        # the rank of (node, pid, cudaDev) in its largest communicator, when unique
        rm = (
            rank_map.filter(pl.col("nranks") == pl.col("nranks").max().over("node", "pid", "cuda_dev"))
            .group_by("node", "pid", "cuda_dev")
            .agg(nccl_rank=pl.col("rank").first(), n=pl.col("rank").n_unique(), bus=pl.col("gpu_bus_id").first())
            .filter(pl.col("n") == 1)
            .select("node", "pid", pl.col("cuda_dev").alias("dev"), "nccl_rank", "bus")
        )
        w = w.join(rm, on=["node", "pid", "dev"], how="left", maintain_order="left")
    else:
        w = w.with_columns(nccl_rank=pl.lit(None, dtype=pl.Int32), bus=pl.lit(None, dtype=pl.String))
    return w.select(
        ts="ts",
        ts_quality="ts_quality",
        node="node",
        rank=pl.coalesce(
            pl.col("nccl_rank").cast(pl.Int32, strict=False), pl.col("env_global_rank"), pl.col("env_rank")
        ),
        gpu_bus_id="bus",
        source=pl.lit(source),
        kind="kind",
        code="code",
        severity="severity",
        message="text",
        detail="detail",
        file=pl.lit(ctx.path),
        line="line",
    )


PY_WARNS = True
"""Read a few WARN messages in Python (`_py_warn_events`; tests compare both readings)."""
_PY_WARN_ROWS = 200
_I64 = 2**63
_PY_RX: dict[str, re.Pattern[str]] = {}


def _py_rx(pattern: str) -> re.Pattern[str]:
    rx = _PY_RX.get(pattern)
    if rx is None:
        rx = _PY_RX[pattern] = re.compile(pattern, re.ASCII)
    return rx


def _py_i64(v: str | None) -> int | None:
    """`cast(pl.Int64, strict=False)` of a string of ASCII digits (a regex group of digits)."""
    if v is None:
        return None
    n = int(v)
    return n if -_I64 <= n < _I64 else None


_PY_JSON_NULLS = (
    (re.compile(r'"[^"]+":null,'), ""),
    (re.compile(r',"[^"]+":null\}'), "}"),
    (re.compile(r'\{"[^"]+":null\}'), "{}"),
)


def _py_json_detail(fields: dict[str, object]) -> str:
    """`json_detail` of one row: `struct.json_encode`'s text (json.dumps' escapes, compact), nulls dropped."""
    import json

    enc = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    for rx, rep in _PY_JSON_NULLS:
        enc = rx.sub(rep, enc)
    return enc


def _py_warn_events(
    warns: pl.DataFrame, ctx: FileContext, rank_map: pl.DataFrame | None, source: str
) -> pl.DataFrame | None:
    """`warn_events` of a few WARN messages in Python; None unless every message is ASCII without a newline
    (where Python's `re` with re.ASCII reads them as polars' engine does: `parsers._kernel_events._py_msgs`).

    The classification, groups and detail fields row by row as the expressions give them; the rank and bus
    of the (node, pid, cudaDev) from `rank_map` as the join gives them; the output columns in one select."""
    if warns.height == 0 or warns.height > _PY_WARN_ROWS:
        return None
    msgs = warns.get_column("msg").to_list()
    if any(m is not None and (not m.isascii() or "\n" in m) for m in msgs):
        return None
    rm: dict[tuple, tuple] = {}
    if rank_map is not None and rank_map.height:
        rmf = (
            rank_map.filter(pl.col("nranks") == pl.col("nranks").max().over("node", "pid", "cuda_dev"))
            .group_by("node", "pid", "cuda_dev")
            .agg(
                nccl_rank=pl.col("rank").first(),
                n=pl.col("rank").n_unique(),
                bus=pl.col("gpu_bus_id").first(),
            )
            .filter(pl.col("n") == 1)
        )
        rank_dtype = rmf.schema["nccl_rank"]
        for node, pid, dev, rank, bus in rmf.select("node", "pid", "cuda_dev", "nccl_rank", "bus").rows():
            if node is not None and pid is not None and dev is not None:
                rm[(node, pid, dev)] = (rank, bus)
    else:
        rank_dtype = pl.Int32
    kinds_rx = [(k, _py_rx(k_rx), sev) for k, k_rx, sev in WARN_KINDS]
    ib_rx, asy_rx, ibv_rx, cu_rx, peer_rx = (
        _py_rx(x) for x in (IB_COMPLETION_RE, ASYNC_RE, IBV_RE, CUDA_FAIL_RE, PEER_RE)
    )
    field_rx = {k: _py_rx(f_rx) for k, f_rx in IB_FIELDS.items()}
    gid_ip = _py_rx(_MAPPED_V4)
    peer_rank_rx, retcode_rx, local_rank_rx = (
        _py_rx(x) for x in (r"from rank (\d+)", r"retcode (\d+)", r"by localRank (\d+)")
    )

    def groups(rx: re.Pattern[str], m: str | None) -> dict[str, str | None]:
        mt = None if m is None else rx.search(m)
        return mt.groupdict() if mt is not None else dict.fromkeys(rx.groupindex)

    def extract(rx: re.Pattern[str], m: str | None, group: int = 1) -> str | None:
        mt = None if m is None else rx.search(m)
        return None if mt is None else mt.group(group)

    cols = {c: warns.get_column(c).to_list() for c in ("node", "pid", "tid", "dev", "src", "srcline", "func")}
    kinds: list[str] = []
    sevs: list[str] = []
    codes: list[str | None] = []
    ranks: list[int | None] = []
    buses: list[str | None] = []
    details: list[str] = []
    for i, m in enumerate(msgs):
        kind, sev = "nccl_warn", "medium"
        for k, krx, ksev in kinds_rx:
            if m is not None and krx.search(m):
                kind, sev = k, ksev
                break
        ib, asy, ibv, cu, peer = (groups(x, m) for x in (ib_rx, asy_rx, ibv_rx, cu_rx, peer_rx))
        status = _py_i64(ib["status"])
        is_ib = kind == "nccl_ib_error"
        if is_ib and status == 5:
            sev = "medium"
        code = {
            "nccl_ib_error": ib["status"],
            "nccl_ibv_error": ibv["call"],
            "nccl_cuda_error": cu["err"],
            "nccl_ib_async_event": asy["event"],
        }.get(kind)
        key = (cols["node"][i], cols["pid"][i], cols["dev"][i])
        rank, bus = rm.get(key, (None, None)) if None not in key else (None, None)
        ibd = {k: extract(frx, m) for k, frx in field_rx.items() if k != "direction"}
        d1 = extract(field_rx["direction"], m)
        ibd["direction"] = d1 if d1 is not None else extract(field_rx["direction"], m, 2)
        src, srcline = cols["src"][i], cols["srcline"][i]
        remote = ibd["remote_gid"] if is_ib else None
        detail = {
            "pid": cols["pid"][i],
            "tid": cols["tid"][i],
            "cuda_dev": cols["dev"][i],
            "src": None if src is None or srcline is None else f"{src}:{srcline}",
            "func": cols["func"][i],
            "text": m,
            "peer": ib["peer"] if ib["peer"] is not None else peer["peer"],
            "peer_port": _py_i64(ib["peer_port"] if ib["peer_port"] is not None else peer["peer_port"]),
            "status": status if is_ib else None,
            "status_name": ib["status_name"],
            "opcode": _py_i64(ibd["opcode"]) if is_ib else None,
            "len": _py_i64(ibd["len"]) if is_ib else None,
            "vendor_err": _py_i64(ibd["vendor_err"]) if is_ib else None,
            "direction": ibd["direction"] if is_ib else None,
            "local_gid": ibd["local_gid"] if is_ib else None,
            "remote_gid": remote,
            "remote_gid_ip": None if remote is None else extract(gid_ip, remote),
            "hca": ibd["hca"] if is_ib and ibd["hca"] is not None else asy["hca"],
            "port": _py_i64(asy["port"]),
            "ibv_call": ibv["call"],
            "error": ibv["err"] if ibv["err"] is not None else cu["err"],
            "peer_rank": _py_i64(extract(peer_rank_rx, m)),
            "retcode": _py_i64(extract(retcode_rx, m)),
            "local_rank": _py_i64(extract(local_rank_rx, m)),
        }
        kinds.append(kind)
        sevs.append(sev)
        codes.append(code)
        ranks.append(rank)
        buses.append(bus)
        details.append(_py_json_detail(detail))
    return warns.select(
        ts="ts",
        ts_quality="ts_quality",
        node="node",
        rank=pl.coalesce(
            pl.lit(pl.Series(ranks, dtype=rank_dtype)).cast(pl.Int32),
            pl.col("env_global_rank"),
            pl.col("env_rank"),
        ),
        gpu_bus_id=pl.lit(pl.Series(buses, dtype=pl.String)),
        source=pl.lit(source),
        kind=pl.lit(pl.Series(kinds, dtype=pl.String)),
        code=pl.lit(pl.Series(codes, dtype=pl.String)),
        severity=pl.lit(pl.Series(sevs, dtype=pl.String)),
        message="text",
        detail=pl.lit(pl.Series(details, dtype=pl.String)),
        file=pl.lit(ctx.path),
        line="line",
    )


def _ras_events(frame: pl.DataFrame, ctx: FileContext) -> pl.DataFrame | None:
    """ncclras status report: one event per subject line, kind from the enclosing block's status."""
    body = pl.col("body")
    if not has_ras(frame):
        return None
    r = frame.filter(
        ~pl.col("cont") & body.str.contains(arx(RAS_LINE_RE)) & ~body.str.contains(arx(NCCL_START))
    )
    if r.height == 0 or not r.get_column("body").str.contains(arx(RAS_SUBJECT_RE)).any():
        return None
    r = r.with_columns(
        h=body.str.extract_groups(arx(RAS_HEAD_RE)), s=body.str.extract_groups(arx(RAS_SUBJECT_RE))
    )
    hf = pl.col("h").struct.field
    sf = pl.col("s").struct.field
    r = r.with_columns(
        status=hf("status").forward_fill(),
        comm_hash=pl.when(hf("status").is_not_null()).then(pl.coalesce(hf("hash"), pl.lit(""))).forward_fill(),
        group=pl.when(hf("status").is_not_null()).then(pl.coalesce(hf("grp"), pl.lit(""))).forward_fill(),
        launched=pl.when(sf("opn").is_not_null()).then(
            format_str("{} ranks at operation {}", sf("nranks"), sf("opn"))
        ),
    ).with_columns(
        # the last "N ranks have launched up to operation M" line before a Rank list = the minority
        minority_op=pl.when(sf("opn").is_not_null()).then(sf("opn").cast(pl.Int64, strict=False)).forward_fill().over("comm_hash")
    )
    subj = r.filter(sf("pid").is_not_null() | sf("mrank").is_not_null() | sf("rank").is_not_null()
                    | sf("opn").is_not_null() | sf("ndead").is_not_null() | sf("ntimeouts").is_not_null()
                    | sf("outlier").is_not_null())
    status = subj.get_column("status")
    return subj.select(
        ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
        ts_quality=pl.lit("none"),
        node=pl.lit(ctx.node),
        rank=pl.coalesce(sf("rank"), sf("mrank")).cast(pl.Int32, strict=False),
        source=pl.lit("nccl"),
        kind=pl.lit("nccl_ras_") + pl.coalesce(pl.col("status"), pl.lit("report")).str.to_lowercase(),
        code=pl.col("status") if status is not None else pl.lit(None, dtype=pl.String),
        severity=pl.when(pl.col("status").is_in(["DEAD", "INCOMPLETE", "MISMATCH", "ABORT"])).then(pl.lit("high"))
        .otherwise(pl.lit("medium")),
        message="text",
        detail=json_detail(
            comm_hash=pl.when(pl.col("comm_hash") != "").then(pl.col("comm_hash")),
            group=pl.when(pl.col("group") != "").then(pl.col("group")),
            subject_ip=pl.coalesce(sf("ip"), sf("rip"), sf("outlier")),
            pid=pl.coalesce(sf("pid"), sf("rpid")).cast(pl.Int64, strict=False),
            gpu=pl.coalesce(sf("gpu"), sf("rgpu")).cast(pl.Int64, strict=False),
            ranks_count=sf("nranks").cast(pl.Int64, strict=False),
            operation=sf("opn").cast(pl.Int64, strict=False),
            minority_op=pl.when(sf("rank").is_not_null()).then(pl.col("minority_op")),
            dead=sf("ndead").cast(pl.Int64, strict=False),
            timeouts=sf("ntimeouts").cast(pl.Int64, strict=False),
        ),
        file=pl.lit(ctx.path),
        line="line",
    )


# ----------------------------------------------------------------------------- the fast lane

_FAST_HEAD = (
    r"^(?P<env>[ \t]*(?P<srank>[0-9]+): |\[[0-9]+,(?P<orank>[0-9]+)\]<(?:stdout|stderr)>: ?)?"
    r"(?P<head>[A-Za-z0-9_.-]+:[0-9]+:[0-9]+ \[[0-9]+\](?: [0-9]+\.[0-9]+)?"
    r"(?: [A-Za-z0-9_./+-]+:[0-9]+(?: \([A-Za-z0-9_]+\))?)?) NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)(?P<sp> ?)"
)
"""The start of an NCCL record whose reading is fixed by its start alone: no launcher envelope or one srun
`-l` / Open MPI `--tag-output` prefix, then the ASCII `host:pid:tid [dev] [ms] [src:line [(func)]]` head,
` NCCL `, the level. For such a line `prepare` strips just that envelope (no other envelope, collector
timestamp, quote or link can match: the head starts with a name character and has `:<digit>` after the
name), `NCCL_START` matches and `split_nccl_lines` cuts at this ` NCCL `; so every field follows from the
distinct line starts, which are few (ranks x threads x levels) and read once each."""
_FAST_KEY_CHARS = 12
"""A fast-lane key is a line's first characters up to 12 past its first ` NCCL ` (the level, its space)."""
_FAST_NOT_HEADS = ("collective:", "Communicators...")
"""Heads that other grammars' line-start patterns would read (torchfrtrace `collective:`, the RAS marker):
left to the full path."""
_FAST_LITERALS = (td.RESULT_HEAD_TEXT, "launch configs:", td.LAST_ERROR_TEXT)
"""Literals of whole-file checks (torchrun blocks, `Last error:`) that a fast-lane line may hold in its message."""
_LANE_LITERALS = ("](http", *_FAST_LITERALS)
_LANE_LITERALS_RE = "|".join(re.escape(x) for x in _LANE_LITERALS)
"""`_fast_lane`'s one literal pass (a regex of literals: one SIMD search on many lines)."""
_COLL_FAST = (
    r"^(?P<op>[A-Za-z]+): opCount [0-9a-fA-F]+ sendbuff (?:0x[0-9a-fA-F]+|\(nil\)) recvbuff (?:0x[0-9a-fA-F]+|\(nil\)) "
    r"count [0-9]+ datatype [0-9]+ op [0-9]+ root (?P<root>-?[0-9]+) comm (?P<comm>0x[0-9a-fA-F]+) \[nranks=[0-9]+\]"
    r"(?: stream (?:0x[0-9a-fA-F]+|\(nil\)))?$"
)
"""A COLL line of the usual form, whole: `coll_fields` reads it (every token in place), and it can match no
other message filter of `_nccl_rows` (none of their prefixes or literals), so it only counts for the COLL
aggregate, which needs its group key (op, comm; root for Send/Recv) and the fields of each group's first and
last line only."""
_COLL_MID = r"^[0-9a-fA-F]+ sendbuff (?:0x[0-9a-fA-F]+|\(nil\)) recvbuff (?:0x[0-9a-fA-F]+|\(nil\))$"
"""`_COLL_HEAD` after its op and `: opCount ` (opCount, buffers)."""
_COLL_HEAD = r"^[A-Za-z]+: opCount [0-9a-fA-F]+ sendbuff (?:0x[0-9a-fA-F]+|\(nil\)) recvbuff (?:0x[0-9a-fA-F]+|\(nil\))$"
_COLL_TAIL = (
    r"^count [0-9]+ datatype [0-9]+ op [0-9]+ root (?P<root>-?[0-9]+) comm (?P<comm>0x[0-9a-fA-F]+) \[nranks=[0-9]+\]"
    r"(?: stream (?:0x[0-9a-fA-F]+|\(nil\)))?$"
)
"""`_COLL_FAST` cut before ` count `: a line matches it exactly when its head and tail match these."""
_P2P = ("Send", "Recv")


@dataclass(frozen=True)
class FastLane:
    """NCCL records read by the fast lane (see `_FAST_HEAD`)."""

    mask: pl.Series
    """Boolean per line: taken by the fast lane."""
    first: int
    """Number of the first line (the mask's position 0)."""
    heads: pl.DataFrame
    """`_HEAD_COLS` (plus env_len, the launcher prefix length) per distinct head; rows refer to it by `hc`."""
    rest: pl.DataFrame
    """The records that are not strict COLL lines: line, text, hc, level, msg (`_N_SCHEMA`)."""
    coll: pl.DataFrame
    """Strict COLL lines (`_COLL_FAST`) aggregated per head, op and tail (`_COLL_GROUPS`, `_strict_coll`)."""
    hits: pl.DataFrame
    """line, text of the fast-lane records holding one of `_FAST_LITERALS` (for the whole-file checks)."""
    src: pl.DataFrame
    """The lines the lane read (line, text), by the mask's positions."""
    keys: pl.Series
    """The heads' keys (`_FAST_KEY_CHARS`) by `hc`: a record's head is the one of its key."""
    n: int
    """The number of fast-lane records."""
    used: pl.Series | None = None
    """The `hc` of the heads of the records (None: worked out from `rows`)."""

    @cached_property
    def texts(self) -> pl.DataFrame:
        """line, text of every fast-lane record (for whole-file literal checks), in line order."""
        if self.n == 0:
            return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
        return self.src.filter(self.mask)

    @cached_property
    def rows(self) -> pl.DataFrame:
        """Every fast-lane record: line, hc (made when asked: the strict COLL lines that `_coll_groups` read
        have no per-line head until then)."""
        return self.texts.select("line", hc=_key_codes(pl.col("text"), self.keys))

    def used_heads(self) -> pl.Series:
        """The `hc` of the heads of the records."""
        return self.used if self.used is not None else self.rows.get_column("hc").unique()


def _fast_key(text: pl.Expr) -> pl.Expr:
    """A line's fast-lane key: its first characters up to `_FAST_KEY_CHARS` past its first ` NCCL `."""
    return text.str.head(text.str.find(" NCCL ", literal=True) + _FAST_KEY_CHARS)


def _key_codes(text: pl.Expr, keys: pl.Series) -> pl.Expr:
    """Each line's head code: the position of its key among the heads' `keys` (null for no head's key)."""
    return _fast_key(text).cast(pl.Enum(keys), strict=False).to_physical().cast(pl.UInt32)


def _empty_lane(height: int, first: int, src: pl.DataFrame | None = None) -> FastLane:
    # a head's columns: those of an NCCL record after its line, text, level and message, then the envelope's
    head_cols = {k: v for k, v in _NS_SCHEMA.items() if k not in ("line", "text", "level", "msg")}
    heads = pl.DataFrame(
        schema={**head_cols, "env_len": pl.Int64, "env_rank_source": pl.String, "env_host": pl.String, "env_pid": pl.Int64}
    )
    lines = pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return FastLane(
        mask=repeated(False, height, pl.Boolean).alias("fast"),
        first=first,
        heads=heads,
        rest=pl.DataFrame(schema=_N_SCHEMA),
        coll=_empty_coll(),
        hits=lines,
        src=src.select("line", "text") if src is not None else lines,
        keys=pl.Series("_k", [], dtype=pl.String),
        n=0,
        used=pl.Series("hc", [], dtype=pl.UInt32),
    )


def _fast_lane(base: pl.DataFrame, ctx: FileContext, cg: _CollCands | None | EllipsisType = ...) -> FastLane:
    """Take the lines `_FAST_HEAD` reads from `base` (line, text): their heads are worked out once per distinct
    line start; the rest of `family_rows` sees them only as rows of `n` or as COLL groups (`_strict_coll`).

    When many lines hold `: opCount ` (a COLL-heavy log), those lines are grouped first by what they hold
    before it and after their first ` count ` (`_coll_groups`): a group of strict COLL lines is read once
    (`_coll_read`), with no per-line key, head or message; every other line takes the per-line reading
    (`_strict_coll` finds the strict COLL lines among them), as every line does otherwise. `cg`: the groups
    when the caller made them (None: no groups), else made here."""
    text = pl.col("text")
    base = base.select("line", "text")
    if cg is ...:
        cg = _coll_groups(base) if COLL_GROUPS else None
    others = base if cg is None else base.filter(~cg.cand)
    keyed = others.select("line", "text", _k=_fast_key(text))
    keys = keyed.get_column("_k").drop_nulls()
    if cg is not None:
        # (every line of a group has the group's key)
        keys = pl.concat([keys, cg.groups.get_column("_k").drop_nulls()])
    keys = keys.unique()
    if len(keys) == 0:
        return _empty_lane(base.height, ctx.first_line, base)
    g = pl.col("g").struct.field
    u = (
        keys.to_frame("_k")
        .with_columns(g=pl.col("_k").str.extract_groups(arx(_FAST_HEAD)))
        .filter(
            g("head").is_not_null()
            & ~g("head").str.starts_with(_FAST_NOT_HEADS[0])
            & ~g("head").str.starts_with(_FAST_NOT_HEADS[1])
        )
    )
    if u.select((pl.col("_k").str.slice(4, 1) == "-").any()).item():
        # a collector timestamp (4 digits and '-' first) would be stripped by `prepare`: full path
        u = u.filter(~pl.col("_k").str.contains(arx(_COLLECTOR_TS)))
    if u.height == 0:
        return _empty_lane(base.height, ctx.first_line, base)
    env_len = g("env").str.len_chars().fill_null(0)
    rank = pl.coalesce(g("srank"), g("orank")).cast(pl.Int32, strict=False)
    u = u.select(
        "_k",
        env_len=env_len,
        msg_off=env_len
        + g("head").str.len_chars()
        + 6
        + g("level").str.len_chars()
        + g("sp").str.len_chars(),
        level=g("level"),
        env_rank=rank,
        env_rank_source=pl.when(g("srank").is_not_null())
        .then(pl.lit("srun"))
        .when(g("orank").is_not_null())
        .then(pl.lit("openmpi")),
        env_pid=pl.lit(None, dtype=pl.Int64),
        env_global_rank=pl.when(g("orank").is_not_null()).then(rank),  # Open MPI ranks are global
        env_host=pl.lit(None, dtype=pl.String),
        pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
        pre_ts_quality=pl.lit(None, dtype=pl.String),
        h=g("head").str.extract_groups(arx(NCCL_HEAD_RE)),
    ).unnest("h")
    u = head_columns(u.filter(pl.col("host").is_not_null()), ctx).with_row_index("hc")
    ukeys = u.get_column("_k")
    coll = _empty_coll()
    taken = None
    if cg is not None:
        coll, taken = _coll_read(cg, base, u)
        if taken is not None:
            # lines of the groups not read as strict ones: the per-line reading (in line order)
            others = base.filter(~taken)
            keyed = others.select("line", "text", _k=_fast_key(text))
    if ENUM_KEYS:
        # each line's head code: its key's position among the heads' keys (an Enum cast, cheaper than a join)
        hc = keyed.get_column("_k").cast(pl.Enum(ukeys), strict=False).to_physical()
        hc = hc.cast(pl.UInt32).alias("hc")
        rows = keyed.with_columns(
            hc, msg_off=u.get_column("msg_off").gather(hc), level=u.get_column("level").gather(hc)
        )
    else:
        heads_by_key = u.select("_k", "hc", "msg_off", "level")
        rows = keyed.join(heads_by_key, on="_k", how="left", maintain_order="left")
    mask = rows.get_column("hc").is_not_null()
    # one literal pass: markdown auto-links and the whole-file checks' literals (`_FAST_LITERALS`; a strict
    # COLL line holds none of them)
    texts = others.get_column("text")
    if others.height > _SMALL:
        hit = texts.str.contains(arx(_LANE_LITERALS_RE))
    else:
        hit = texts.str.contains_any(list(_LANE_LITERALS))
    at = hit.fill_null(False).arg_true()
    hits = others[at]
    if len(at) and hits.select(text.str.contains("](http", literal=True).any()).item():
        # a markdown auto-link anywhere in the line is rewritten by `prepare`: full path
        link = hits.get_column("text").str.contains("](http", literal=True)
        mask = mask.scatter(at.filter(link), False)
    n_coll = int(coll.get_column("calls").sum()) if coll.height else 0
    if not (n_coll or mask.any()):
        return _empty_lane(base.height, ctx.first_line, base)
    hits = hits.filter(mask.gather(at)) if len(at) else hits
    if hits.height:
        hits = hits.filter(text.str.contains_any(list(_FAST_LITERALS)))
    rows = rows.filter(mask).select("line", "text", "hc", "level", "msg_off")
    if cg is None:
        more, strict = _strict_coll(rows)
        rest = rows.filter(~strict) if more.height else rows
    else:
        # (no strict COLL line is left to the per-line reading: every one holds `: opCount ` and ` count ` 10+
        # bytes after it, and an ASCII head and op before it, so its group has a key, and a group that
        # `_coll_read` did not take fails a check `_strict_coll` makes of each of its lines)
        more, rest = _empty_coll(), rows
    heads = u.select(*_HEAD_COLS, "env_len", "env_rank_source", "env_host", "env_pid")
    used = rows.get_column("hc")
    if n_coll:
        # the lane's lines: those of the strict groups and those the per-line reading took
        assert cg is not None
        taken = cg.cand if taken is None else taken
        mask = taken.clone().scatter((~taken).arg_true().filter(mask), True)
        used = pl.concat([used, coll.get_column("hc")])
    if more.height:
        coll = pl.concat([coll, more], how="vertical") if coll.height else more
    return FastLane(
        mask=mask.alias("fast"),
        first=ctx.first_line,
        heads=heads,
        rest=rest.select("line", "text", "hc", "level", msg=text.str.slice(pl.col("msg_off"))),
        coll=coll,
        hits=hits,
        src=base,
        keys=ukeys,
        n=rows.height + n_coll,
        used=used.unique(),
    )


COLL_GROUPS = True
"""`_fast_lane` reads the strict COLL lines of a COLL-heavy chunk by groups (`_coll_groups`, `_coll_read`)
before any per-line head (off: every line's head first, then `_strict_coll`; tests compare both)."""
_COLL_GROUPS_MIN = 2000
"""Lines holding `: opCount ` from which `_fast_lane` groups them first."""


@dataclass(frozen=True)
class _CollCands:
    """A chunk's lines holding `: opCount `, grouped (`_coll_groups`)."""

    cand: pl.Series
    """Boolean per line of the chunk: read through the groups (its group has a key)."""
    lines: pl.DataFrame | None
    """Per line holding `: opCount ` (and ` count ` 10+ bytes after it): _i (position), ho, tail, ok (None
    where the compiled module grouped them: `codes` says the same)."""
    groups: pl.DataFrame
    """Per (ho, tail, ok): calls, first_line, line, _if, _il (first/last position), _k (the lines' fast-lane
    key, when every line of the group has this one); where the compiled module grouped them, _g (the group's
    number in `codes`) too."""
    codes: pl.Series | None = None
    """Per line of the chunk: its group's `_g` (null: in no group); None where polars grouped them."""

    def positions(self, groups: pl.DataFrame) -> pl.Series:
        """The positions (`_i`) of the lines of `groups` (some of `self.groups`' rows)."""
        if self.codes is not None:
            return self.codes.is_in(groups.get_column("_g").implode()).fill_null(False).arg_true()
        assert self.lines is not None
        lines = self.lines.join(groups.select("ho", "tail", "ok"), on=["ho", "tail", "ok"], how="semi")
        return lines.get_column("_i")


def _coll_groups(base: pl.DataFrame) -> _CollCands | None:
    """`_polars_coll_groups(base)`, by the compiled module where it is built (`_compiled_coll_groups`: the
    same groups, with the lines' group numbers instead of their pieces)."""
    got = _compiled_coll_groups(base)
    return _polars_coll_groups(base) if got is ... else got


def _group_key(ho: pl.Expr) -> pl.Expr:
    """A COLL group's fast-lane key, that of each of its lines (`_fast_key`: its first ` NCCL ` lies in `ho`,
    the bytes before `: opCount `, or nowhere), where `ho` is ASCII (null otherwise: no key)."""
    return pl.when(ho.str.len_bytes() == ho.str.len_chars()).then(_fast_key(ho + pl.lit(": opCount ")))


def _compiled_coll_groups(base: pl.DataFrame) -> _CollCands | None | EllipsisType:
    """`_coll_groups(base)` grouped by `parsers._fastscan.coll_groups` (a hash table over each line's head and
    tail bytes: a 16 MB NCCL debug log range's 80k COLL lines ~27 -> ~8 ms); `...` where it is not built or
    does not take the lines (a null), for `_polars_coll_groups`. Groups come in order of appearance."""
    scan = compiled("coll_groups")
    texts = base.get_column("text")
    if scan is None or texts.dtype != pl.String:
        return ...
    import numpy as np  # (here: only a COLL-heavy chunk's worker gets here with the module built)

    n = len(texts)
    codes = np.empty(n, dtype=np.int32)
    got = scan(texts.__arrow_c_stream__(), n, codes)
    if got is None:
        return ...
    n_oc, found = got
    calls = sum(g[3] for g in found)
    if n_oc < _COLL_GROUPS_MIN or calls < _COLL_GROUPS_MIN:
        return None
    g = pl.DataFrame(
        found,
        schema={"o": pl.Int64, "d": pl.Int64, "ok": pl.Boolean, "calls": pl.UInt32}
        | {"_if": pl.UInt32, "_il": pl.UInt32},
        orient="row",
    )
    first = texts.gather(g.get_column("_if")).cast(pl.Binary)
    line = base.get_column("line")
    ho = pl.col("ho").cast(pl.String)
    groups = g.select(
        ho=first.bin.slice(0, g.get_column("o")),
        tail=first.bin.slice(g.get_column("d") + 1),
        ok="ok",
        calls="calls",
        first_line=line.gather(g.get_column("_if")),
        line=line.gather(g.get_column("_il")),
        _if="_if",
        _il="_il",
        _g=pl.int_range(pl.len(), dtype=pl.Int32),
    ).with_columns(_k=_group_key(ho))
    code = pl.Series("_g", codes).replace(-1, None)
    keyed = groups.get_column("_k").is_not_null()
    if keyed.all() and calls == n_oc:
        cand = code.is_not_null()
    else:
        cand = code.is_in(groups.get_column("_g").filter(keyed).implode()).fill_null(False)
    return _CollCands(cand=cand.alias("cand"), lines=None, groups=groups, codes=code)


def _polars_coll_groups(base: pl.DataFrame) -> _CollCands | None:
    """The lines of `base` (line, text) that hold `: opCount ` and ` count ` 10+ bytes after it, grouped by
    what is before the first (`ho`: the head and the op for a COLL record), what is after the first ` count `
    (`tail`) and whether what lies between is `_COLL_MID` (`ok`); None when they are fewer than
    `_COLL_GROUPS_MIN`.

    Cut by bytes, at ASCII bytes (the two literals), so every piece is text. A group whose `ho` is ASCII and
    holds ` NCCL ` gives all its lines the same fast-lane key, `(ho + ": opCount ")[:at + _FAST_KEY_CHARS]`
    (`at` its first ` NCCL `, the key's end within the literal); the other groups' lines (non-ASCII or
    without ` NCCL ` before `: opCount `) take the per-line reading (`cand` false)."""
    texts = base.get_column("text")
    oc = texts.str.find(": opCount ", literal=True)
    if oc.len() - oc.null_count() < _COLL_GROUPS_MIN:
        return None
    text, o, d = pl.col("text"), pl.col("oc"), pl.col("d")
    b = text.cast(pl.Binary)
    cf = (
        base.with_columns(oc=oc, _i=pl.int_range(pl.len(), dtype=pl.UInt32))
        .filter(o.is_not_null())
        .with_columns(d=text.str.find(" count ", literal=True))
        .filter((d > o + 9).fill_null(False))
    )
    if cf.height < _COLL_GROUPS_MIN:
        return None
    cf = cf.select(
        "_i",
        "line",
        ho=b.bin.slice(0, o),
        tail=b.bin.slice(d + 1),
        ok=b.bin.slice(o + 10, d - o - 10).cast(pl.String).str.contains(arx(_COLL_MID)),
    )
    groups = (
        cf.group_by("ho", "tail", "ok")
        .agg(
            calls=pl.len(),
            first_line=pl.col("line").first(),
            line=pl.col("line").last(),
            _if=pl.col("_i").first(),
            _il=pl.col("_i").last(),
        )
        .with_columns(_k=_group_key(pl.col("ho").cast(pl.String)))
    )
    keyless = groups.get_column("_k").null_count()
    if keyless == 0 and cf.height == oc.len() - oc.null_count():
        cand = oc.is_not_null()
    else:
        keyed = cf.join(groups.filter(pl.col("_k").is_not_null()), on=["ho", "tail", "ok"], how="semi")
        cand = repeated(False, base.height, pl.Boolean)
        cand = cand.scatter(keyed.get_column("_i"), True)
    return _CollCands(cand=cand.alias("cand"), lines=cf, groups=groups)


def _coll_read(cg: _CollCands, base: pl.DataFrame, u: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series | None]:
    """The strict COLL groups of `cg` (`_COLL_GROUPS`: those `_strict_coll` would make of their lines) and the
    per-line mask (over `base`) of the lines they hold, None when that is `cg.cand`; `u` the heads by key (_k,
    hc, msg_off, level).

    A group is strict when its key is a head's, of level INFO, `ho` past the head is an op of letters, `ok`,
    and the tail is `_COLL_TAIL`: the checks `_strict_coll` makes of each of its lines (`ho` is the line up
    to its first `: opCount `, ASCII: bytes are characters)."""
    ho = pl.col("ho").cast(pl.String)
    good = (
        pl.col("ok")
        & (pl.col("level") == "INFO")
        & (ho.str.len_bytes() >= pl.col("msg_off"))
        & pl.col("op").str.contains(arx(r"^[A-Za-z]+$"))
        & pl.col("g").struct.field("comm").is_not_null()
    ).fill_null(False)
    gr = (
        cg.groups.lazy()
        .filter(pl.col("_k").is_not_null())
        .join(u.lazy().select("_k", "hc", "msg_off", "level"), on="_k", how="left")
        .with_columns(
            op=ho.str.slice(pl.col("msg_off")),
            g=pl.col("tail").cast(pl.String).str.extract_groups(arx(_COLL_TAIL)),
        )
        .with_columns(good=good)
        .collect()
    )
    ok = gr.filter(pl.col("good"))
    taken = None
    if ok.height < gr.height:
        taken = repeated(False, base.height, pl.Boolean)
        taken = taken.scatter(cg.positions(ok), True)
    texts = base.get_column("text")
    coll = ok.select(
        "hc",
        op="op",
        comm=pl.col("g").struct.field("comm"),
        root=pl.col("g").struct.field("root"),
        calls=pl.col("calls").cast(pl.UInt32),
        first_line="first_line",
        line="line",
        first_msg=pl.lit(texts.gather(ok.get_column("_if"))).str.slice(pl.col("msg_off")),
        last_msg=pl.lit(texts.gather(ok.get_column("_il"))).str.slice(pl.col("msg_off")),
    )
    return coll, taken


ENUM_KEYS = True
"""`_fast_lane` finds each line's head by an Enum cast of its key (off: a join on the key; tests compare
both). Measured on a 16 MB NCCL debug log range (88k lines, ~450 keys): `_fast_lane` 32.4 -> 31.6 ms (median
of 30 interleaved runs); the range's CPU as a whole moves less than its noise."""


def _strict_coll(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The `_COLL_FAST` lines among fast-lane `rows` (line, text, hc, level, msg_off), aggregated per (head,
    op, tail `count … [nranks=N] [stream S]`), and the per-row mask of those lines.

    A message is cut at its first `: opCount ` and its first ` count `: the op before (letters only: checked
    once per group), the middle (opCount, buffers: `_COLL_MID`, checked per line) and the tail after (few
    distinct ones: `_COLL_TAIL` once per group); the message matches `_COLL_FAST` exactly when all three do.
    Offsets and cuts are bytes (binary slices, cheaper than character slices): every cut falls at an ASCII
    byte (the message start after the ASCII head of `_FAST_HEAD`, the two literals), so each piece is text.
    Groups: hc, op, comm, root, calls, first_line, line, first_msg, last_msg (`_COLL_GROUPS`)."""
    text = pl.col("text")
    off = pl.col("msg_off")
    info = rows.get_column("level") == "INFO"
    c = rows.select(
        oc=pl.when(pl.lit(info)).then(text.str.find(": opCount ", literal=True))
    ).get_column("oc")
    cand = (c >= rows.get_column("msg_off")).fill_null(False)
    if not cand.any():
        return _empty_coll(), cand
    oc, d = pl.col("oc"), pl.col("d")
    # (one filter: the lines with `: opCount ` in the message and ` count ` 10+ characters after it)
    b = text.cast(pl.Binary)
    cf = (
        rows.with_columns(
            oc=c, _i=pl.int_range(pl.len(), dtype=pl.UInt32), d=text.str.find(" count ", literal=True)
        )
        .filter(pl.lit(cand) & (d > oc + 9).fill_null(False))
        .select(
            "_i",
            "line",
            "hc",
            "msg_off",
            # (cut by bytes: every cut is at an ASCII byte, so the pieces are text; see the docstring)
            op=b.bin.slice(off, oc - off),
            tail=b.bin.slice(d + 1),
            ok=b.bin.slice(oc + 10, d - oc - 10).cast(pl.String).str.contains(arx(_COLL_MID)),
        )
    )
    groups = (
        cf.group_by("hc", "op", "tail", "ok")
        .agg(
            calls=pl.len(),
            first_line=pl.col("line").first(),
            line=pl.col("line").last(),
            _if=pl.col("_i").first(),
            _il=pl.col("_i").last(),
            msg_off=pl.col("msg_off").first(),
        )
        .with_columns(g=pl.col("tail").cast(pl.String).str.extract_groups(arx(_COLL_TAIL)))
        .with_columns(
            good=pl.col("ok")
            & pl.col("op").cast(pl.String).str.contains(arx(r"^[A-Za-z]+$"))
            & pl.col("g").struct.field("comm").is_not_null()
        )
    )
    good = groups.get_column("good")
    if not good.any():
        return _empty_coll(), repeated(False, rows.height, pl.Boolean).alias("strict")
    if good.all():
        pos = cf.get_column("_i")
    else:
        bad = groups.filter(~pl.col("good")).select("hc", "op", "tail", "ok")
        pos = cf.join(bad, on=["hc", "op", "tail", "ok"], how="anti").get_column("_i")
    strict = repeated(False, rows.height, pl.Boolean).alias("strict").scatter(pos, True)
    groups = groups.filter(pl.col("good"))
    texts = rows.get_column("text")
    ends = pl.DataFrame(
        {"_f": texts.gather(groups.get_column("_if")), "_l": texts.gather(groups.get_column("_il"))}
    )
    coll = groups.hstack(ends).select(
        "hc",
        op=pl.col("op").cast(pl.String),
        comm=pl.col("g").struct.field("comm"),
        root=pl.col("g").struct.field("root"),
        calls=pl.col("calls").cast(pl.UInt32),
        first_line="first_line",
        line="line",
        first_msg=pl.col("_f").str.slice(pl.col("msg_off")),
        last_msg=pl.col("_l").str.slice(pl.col("msg_off")),
    )
    return coll, strict


_COLL_GROUPS = {
    "hc": pl.UInt32,
    "op": pl.String,
    "comm": pl.String,
    "root": pl.String,
    "calls": pl.UInt32,
    "first_line": pl.Int64,
    "line": pl.Int64,
    "first_msg": pl.String,
    "last_msg": pl.String,
}


def _empty_coll() -> pl.DataFrame:
    return pl.DataFrame(schema=_COLL_GROUPS)


def _coll_lines(fast: FastLane) -> int:
    """The number of strict COLL lines the fast lane aggregated."""
    return int(fast.coll.get_column("calls").sum()) if fast.coll.height else 0


def _fast_before(fast: FastLane, lines: pl.Series) -> pl.DataFrame:
    """line, hc of the last fast-lane record before each of `lines` (sorted), where there is one: all that a
    look for the record before a line needs of the lane (`rows` whole would read every line's head)."""
    if fast.n == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "hc": pl.UInt32})
    at = fast.src.get_column("line").filter(fast.mask).search_sorted(lines, side="left").cast(pl.Int64) - 1
    at = fast.mask.arg_true().gather(at.filter(at >= 0).unique().sort())
    return fast.src[at].select("line", hc=_key_codes(pl.col("text"), fast.keys))


_INIT_BUS_ID = pl.when(pl.col("i").struct.field("bus").is_not_null()).then(
    nccl_bus_id(pl.col("i").struct.field("bus"))
)
"""The Init line's busId as a PCI address (the expression built once: it is ~50 expression nodes)."""


_BUS_ID = nccl_bus_id(pl.col("bus"))
"""A column `bus` of busId tokens as PCI addresses (built once: ~50 expression nodes)."""


_HEX_TOKEN = re.compile(r"[0-9a-fA-F]{1,15}\Z")


def _py_bus_id(v: int) -> str:
    """`nccl_bus_id` of a busId token's value `v` (0 <= v < 16**15)."""
    return f"{(v >> 20) & 0xFFFF:04x}:{(v >> 12) & 0xFF:02x}:{(v >> 4) & 0xFF:02x}.{v & 7}"


def _init_bus_ids(bus: pl.Series) -> pl.Series:
    """`_INIT_BUS_ID` of the Init lines whose busId tokens are `bus`: worked out once per distinct token (a
    job's processes print the same few; the expression costs ~0.6 us a row), then joined back."""
    u = bus.drop_nulls().unique().to_frame("bus")
    tokens = u.get_column("bus").to_list()
    if all(_HEX_TOKEN.match(x) for x in tokens):
        # (plain hex tokens, at most 15 digits: what the expression gives, worked out in Python)
        ids = u.with_columns(_g=pl.Series([_py_bus_id(int(x, 16)) for x in tokens], dtype=pl.String))
    else:
        ids = u.select("bus", _g=_BUS_ID)
    got = bus.to_frame("bus").join(ids, on="bus", how="left", maintain_order="left")
    return got.get_column("_g").alias("gpu_bus_id")


_INIT_FN = r"ncclComm[A-Za-z]* "
_INIT_CORE = r"comm 0x[0-9a-fA-F]+ rank [0-9]+ nranks [0-9]+ cudaDev [0-9]+"
_INIT_NVML = r" nvmlDev [0-9]+"
_INIT_BUS = r" busId [0-9a-fA-F]+"
_INIT_COMMID = r" commId 0x[0-9a-fA-F]+"
_INIT_END = r" - Init (?:START|COMPLETE)$"
"""The pieces of an Init line: `_INIT_FULL` makes the function name, `nvmlDev` and `commId` optional, `_init_form`
puts each in or leaves it out."""
_INIT_FULL = (
    f"^(?:{_INIT_FN})?{_INIT_CORE}(?:{_INIT_NVML})?{_INIT_BUS}(?:{_INIT_COMMID})?{_INIT_END}"
)
"""An Init line whole, in each of its usual forms: 2.18+ (`nvmlDev`, `commId`), before 2.18 (neither), with one
of them only, after a function name or not. Each is a run of `key value` tokens in INIT_RE's order, so INIT_RE's
groups are the tokens after their keys (`_init_tokens`)."""


_INIT_GROUPS = ("comm", "rank", "nranks", "dev", "nvml", "bus", "commid", "phase")


def _init_at(fn: int, nvml: int, commid: int) -> dict[str, int | None]:
    """The token numbers of INIT_RE's groups in an `_INIT_FULL` line `comm 0x.. rank R nranks N cudaDev D
    [nvmlDev V] busId B [commId C] - Init P`, after a function name when `fn` (`nvml`, `commid`: those parts
    there)."""
    return {
        "comm": fn + 1, "rank": fn + 3, "nranks": fn + 5, "dev": fn + 7,
        "nvml": fn + 9 if nvml else None,
        "bus": fn + 9 + 2 * nvml,
        "commid": fn + 11 + 2 * nvml if commid else None,
        "phase": fn + 12 + 2 * nvml + 2 * commid,
    }  # fmt: skip


def _init_form(fn: int, nvml: int, commid: int) -> str:
    """The `_INIT_FULL` lines of one form: after a function name when `fn`, with `nvmlDev` and `commId` when
    `nvml`, `commid`."""
    return (
        "^" + (_INIT_FN if fn else "") + _INIT_CORE + (_INIT_NVML if nvml else "") + _INIT_BUS
        + (_INIT_COMMID if commid else "") + _INIT_END
    )


def _form_of(msg: str) -> tuple[int, int, int]:
    """The form (`_init_at`'s arguments) an `_INIT_FULL` line `msg` has."""
    return int(not msg.startswith("comm ")), int(" nvmlDev " in msg), int(" commId " in msg)


def _init_tokens(init: pl.DataFrame, form: tuple[int, int, int] | None = None) -> pl.DataFrame:
    """`init` (lines `_INIT_FULL` matches; all of the one `form` when given) with INIT_RE's groups as struct
    column `i`, picked by position among the lines' tokens (`_init_at`), each form of line on its own."""
    msg = pl.col("msg")
    if form is not None:
        tok = init.with_columns(_t=msg.str.split_exact(" ", 17)).unnest("_t")
        forms = [form]
    else:
        tok = init.with_columns(
            _t=msg.str.split_exact(" ", 17),
            _form=(~msg.str.starts_with("comm ")).cast(pl.Int8) * 4
            + msg.str.contains(" nvmlDev ", literal=True).cast(pl.Int8) * 2
            + msg.str.contains(" commId ", literal=True).cast(pl.Int8),
        ).unnest("_t")
        forms = [(f >> 2, (f >> 1) & 1, f & 1) for f in tok.get_column("_form").unique().to_list()]
    parts = []
    no = pl.lit(None, dtype=pl.String)
    for fn, nvml, commid in forms:
        at = _init_at(fn, nvml, commid)
        part = tok if len(forms) == 1 else tok.filter(pl.col("_form") == fn * 4 + nvml * 2 + commid)
        parts.append(
            part.select(
                *init.columns,
                i=pl.struct(**{k: no if at[k] is None else pl.col(f"field_{at[k]}") for k in _INIT_GROUPS}),
            )
        )
    return parts[0] if len(parts) == 1 else pl.concat(parts).sort("line")


def _init_fields(init: pl.DataFrame) -> pl.DataFrame:
    """The lines of `init` (holding ` - Init `) that INIT_RE matches, with struct column `i` =
    `msg.str.extract_groups(INIT_RE)`: lines of the usual forms read by token position (a capture regex over
    every Init line of a communicator-heavy log is the slow part), the others by INIT_RE. Where every line
    has the first line's form (most logs: one NCCL version), one regex of that form says so."""
    msg = pl.col("msg")
    msgs = init.get_column("msg")
    if init.height and msgs[0] is not None:
        form = _form_of(msgs[0])
        if msgs.str.contains(arx(_init_form(*form))).fill_null(False).all():
            return _init_tokens(init, form)
    full = msgs.str.contains(arx(_INIT_FULL)).fill_null(False)
    if not full.all():
        # the others: those INIT_RE matches (every full-form line does)
        init = init.filter(full | msg.str.contains(arx(INIT_RE)).fill_null(False))
        full = init.get_column("msg").str.contains(arx(_INIT_FULL)).fill_null(False)
    if init.height == 0:
        return init.with_columns(i=pl.lit(None, dtype=_groups_dtype(INIT_RE)))
    if not full.any():
        return init.with_columns(i=msg.str.extract_groups(arx(INIT_RE)))
    a = _init_tokens(init.filter(full))
    if full.all():
        return a
    b = init.filter(~full).with_columns(i=msg.str.extract_groups(arx(INIT_RE)))
    return pl.concat([a, b], how="vertical").sort("line")


def _coll_partials(groups: pl.DataFrame, heads: pl.DataFrame) -> pl.DataFrame:
    """The fast lane's COLL groups (`_COLL_GROUPS`) as partial aggregates: calls, first/last line and the
    first/last line's fields (read by `coll_fields` like every other COLL line), the root; keyed by node,
    pid, comm."""
    n = groups.height
    msgs = pl.concat([groups.get_column("first_msg"), groups.get_column("last_msg")]).to_frame("msg")
    # every message matches `_COLL_FAST` whole: `coll_fields` would find each keyword in place, so its fields
    # are read by position without the checks
    f = pl.col("_t").struct.field
    vals = msgs.select(_t=pl.col("msg").str.split_exact(" ", 18)).select(
        opc=f("field_2").str.to_integer(base=16, strict=False),
        cnt=f("field_8").cast(pl.Int64, strict=False),
        dt=f("field_10").cast(pl.Int64, strict=False),
        ro=f("field_12").cast(pl.Int64, strict=False),
        nranks=f("field_17").str.extract(arx(r"(\d+)"), 1).cast(pl.Int32, strict=False),
    )
    part = groups.hstack(vals.slice(n)).with_columns(first_opcount=vals.get_column("opc").head(n))
    return part.hstack(heads.select("node", "pid", "dev")[part.get_column("hc")]).select(
        "node",
        "pid",
        "comm",
        "op",
        "calls",
        "first_line",
        "line",
        "first_opcount",
        "opc",
        "cnt",
        "dt",
        "ro",
        "nranks",
        "dev",
        roots=pl.concat_list(pl.col("root").cast(pl.Int64, strict=False)),
    )


def _coll_merge(c2: pl.DataFrame | None, part: pl.DataFrame) -> pl.DataFrame:
    """The COLL aggregate (`_nccl_rows`' group_by over every COLL line) from per-line rows `c2` and partial
    aggregates `part`: groups in order of their first line, values of the first/last line of each."""
    allp = part.with_columns(calls=pl.col("calls").cast(pl.UInt32))
    if c2 is not None:
        one = c2.select(
            "node",
            "pid",
            "comm",
            "op",
            calls=pl.lit(1, dtype=pl.UInt32),
            first_line="line",
            line="line",
            first_opcount="opc",
            opc="opc",
            cnt="cnt",
            dt="dt",
            ro="ro",
            nranks="nranks",
            dev="dev",
            roots=pl.concat_list("root"),
        )
        allp = pl.concat([allp, one], how="vertical")
    by_last = pl.col("line")
    return (
        allp.group_by("node", "pid", "comm", "op")
        .agg(
            calls=pl.col("calls").sum(),
            first_opcount=pl.col("first_opcount").sort_by("first_line").first(),
            seq=pl.col("opc").sort_by(by_last).last(),
            count=pl.col("cnt").sort_by(by_last).last(),
            dt=pl.col("dt").sort_by(by_last).last(),
            ro=pl.col("ro").sort_by(by_last).last(),
            nranks=pl.col("nranks").sort_by(by_last).last(),
            cuda_dev=pl.col("dev").sort_by(by_last).last(),
            first_line=pl.col("first_line").min(),
            line=pl.col("line").max(),
            peers=pl.col("roots").list.explode(keep_nulls=False, empty_as_null=False).unique().sort(),
        )
        .sort("first_line")
    )


# ----------------------------------------------------------------------------- the family parse


@dataclass(frozen=True)
class FamilyRows:
    """What the NCCL + PyTorch-distributed grammar reads from a column of lines (see `family_rows`)."""

    tables: dict[str, pl.DataFrame]
    understood: pl.Series
    """Boolean per input line: the line belongs to this grammar (for the caller's line accounting)."""
    notes: list[str]
    hosts: list[str]
    """NCCL hosts seen (short names)."""
    fast: pl.Series | None = None
    """Boolean per input line: read by the fast lane (an understood, non-blank NCCL record), when known."""
    whole: bool = False
    """The lines hold an ncclras report, read across all lines (`family_rows_frame` callers that passed some
    lines only must read the whole file instead)."""
    continued: pl.Series | None = None
    """Numbers of the lines joined onto the record before them (hard-wrapped tails), when any may be."""
    files: _Keyed | None = None
    """For a batch (`BatchContext`): each file's notes and hosts by its key, in place of `notes` and
    `hosts`."""
    parts: dict[str, list[pl.DataFrame]] | None = None
    """For a batch: the parts of each table, rows of all files, in place of `tables` (`_tables` of a file's
    rows of each part is its tables: a table's columns are those of the parts a file has rows in)."""


def family_rows(lines: pl.Series, ctx: FileContext) -> FamilyRows:
    """Read the NCCL and PyTorch-distributed lines of a column of lines, whatever else the file holds.

    This is the shared core of both parsers, and the hook for other parsers of mixed training logs (e.g.
    step logs with NCCL WARNs and watchdog timeouts): call it on the file's lines, keep the tables, and
    count a line as parsed when `understood` is true for it or your own grammar knows it.

    The plain NCCL records (most of a debug log) go through `_fast_lane`; every other line through the full
    path (`prepare`, the grammars' line-start patterns, wrap joining, torchrun blocks, PyTorch events). The
    steps that look across lines (wrap joining, torchrun blocks, `Last error:` quotes) run over every line as
    before whenever the file holds what they look for, and a fast-lane line a wrap is joined onto goes back to
    the full path.
    """
    return family_rows_frame(numbered(lines, ctx), ctx)


def family_rows_frame(
    base: pl.DataFrame, ctx: FileContext, wrap_width: Callable[[], int | None] | None = None
) -> FamilyRows:
    """`family_rows` over a frame of `line`, `text` in line order whose numbers need not follow one another:
    some of a file's lines, those in between left out (the caller makes sure that what the grammar reads
    across lines sees the same neighbours; `wrap_width` gives the whole file's wrap width).

    Lines without a non-ASCII character are read with ASCII-class regexes (`_common.arx`: the same matches,
    compiled 5-15x faster). A COLL-heavy chunk's lines holding `: opCount ` are grouped first (`_coll_groups`,
    whose regexes have no class that `arx` rewrites), which says which of them are ASCII (`_ascii_lines`)."""
    cg = _coll_groups(base) if FAST_LANE and COLL_GROUPS else None
    with _common.ascii_scope(_common._ascii or _ascii_lines(base, cg)):
        try:
            return _family_rows_frame(base, ctx, wrap_width, FAST_LANE, cg)
        except _CollJoinedError:
            return _family_rows_frame(base, ctx, wrap_width, False)


def _ascii_lines(base: pl.DataFrame, cg: _CollCands | None) -> bool:
    """`_common.is_ascii` of the lines of `base`, the lines of `cg`'s groups with a key looked at by group:
    such a line is its group's `ho` (ASCII: the key's test), `: opCount `, a middle that is ASCII when `ok`
    (`_COLL_MID` holds ASCII characters only), ` ` and its group's tail."""
    texts = base.get_column("text")
    if cg is None:
        return _common.is_ascii(texts)
    tail = pl.col("tail").cast(pl.String)
    plain = cg.groups.filter(pl.col("_k").is_not_null()).select(
        (pl.col("ok") & (tail.str.len_bytes() == tail.str.len_chars())).all()
    )
    if not plain.item():
        return _common.is_ascii(texts)
    return _common.is_ascii(texts.filter(~cg.cand))


def _family_rows_frame(
    base: pl.DataFrame,
    ctx: FileContext,
    wrap_width: Callable[[], int | None] | None,
    lane: bool,
    cg: _CollCands | None = None,
) -> FamilyRows:
    fast = _fast_lane(base, ctx, cg) if lane else _empty_lane(base.height, ctx.first_line)
    nfast = fast.n
    slow = _prepare_frame(base.filter(~fast.mask) if nfast else base)
    # a line that is nothing but a paste artefact (`> ` quote) is understood as such
    artefact = (pl.col("body").str.strip_chars() == "") & (pl.col("text").str.strip_chars() != "")
    # `has_ras(slow)`, its literal guard and that of `NCCL_START` in one select
    b = pl.col("body")
    may = slow.select(ras=_may_expr(slow.height, b, _RAS_MARK), nccl=_may_expr(slow.height, b, NCCL_START)).row(0)
    ras = bool(slow.height and may[0]) and bool(slow.select(b.str.contains(arx(_RAS_MARK)).any()).item())
    # NCCL lines (the bulk of a debug log) are known by their prefix; the other grammars only run on the rest
    slow = slow.with_columns(
        _nccl=b.str.contains(arx(NCCL_START)).fill_null(False) if may[1] else pl.lit(False)
    )
    rest = slow.filter(~pl.col("_nccl"))
    if rest.height:
        understood = _UNDERSTOOD_RAS if ras else _UNDERSTOOD
        k = td.torch_understood(pl.col("body")) | artefact
        if _may(rest.get_column("body"), understood):
            k = nccl_understood(pl.col("body"), ras) | k
        if ALIGNED and rest.height == slow.height:
            # (no NCCL-prefixed line: the rest is every line, in order; nothing to join back)
            slow = slow.with_columns(known=pl.col("_nccl") | k.fill_null(False))
        else:
            rest = rest.select("line", _k=k.fill_null(False))
            slow = (
                slow.join(rest, on="line", how="left", maintain_order="left")
                .with_columns(known=pl.col("_nccl") | pl.col("_k").fill_null(False))
                .drop("_k")
            )
    else:
        slow = slow.with_columns(known=pl.col("_nccl"))
    full: pl.DataFrame | None = None
    continued = None
    if _may_wrap(slow, fast):
        full = join_wrapped(_full_frame(slow, fast), wrap_width)
        if nfast:
            # a fast-lane record a wrapped tail was joined onto is read by the full path
            joined = full.filter(fast.mask & (pl.col("body") != pl.col("_fbody"))).get_column("line")
            if len(joined):
                fast = _drop_fast(fast, joined, base.get_column("line"))
        full = full.drop("_fbody")
        slow = full.filter(~fast.mask) if nfast else full
        continued = slow.filter(pl.col("cont")).get_column("line")
    else:
        slow = slow.with_columns(cont=pl.lit(False))
    fast_hits = fast.hits
    blocks, last_err = _whole_file_checks(slow, fast_hits)
    td_frame = slow
    last_rows = None
    if blocks or last_err:
        if full is None:
            full = _full_frame(slow, fast).drop("_fbody").with_columns(cont=pl.lit(False))
        if blocks:
            # torchrun/ChildFailedError blocks: runs over every line (an NCCL line ends a run)
            full = td.mark_blocks(full)
        if last_err:
            full = full.with_columns(_last_err=td.after_last_error(full))
            last_rows = full.filter(pl.col("_last_err"))
        keep = ~fast.mask
        if blocks:
            keep = keep | full.get_column("_block").is_not_null()
        td_frame = full.filter(keep) if nfast else full
        slow = full.filter(~fast.mask) if nfast else full
    if not last_err:
        slow = slow.with_columns(_last_err=pl.lit(False))
    together = isinstance(ctx, BatchContext)
    parts, notes, hosts, nccl_lines, keyed = _nccl_rows(slow, fast, ctx, ras)
    if _torch_may_hold(td_frame, blocks):
        torch_ev, torch_ok = td.torch_events(td_frame, ctx)
        if torch_ev.height:
            parts["events"].append(torch_ev)
    else:
        torch_ok = repeated(False, td_frame.height, pl.Boolean).alias("_ok")
    if last_rows is not None:
        last = td.last_error_events(last_rows, ctx)
        if last is not None:
            parts["events"].append(last)
    if ALIGNED and (nfast == 0 or not (blocks or last_err)):
        # (the PyTorch grammar read the lines of `slow`, in order: its result is per line of `slow`)
        with_ok = slow.with_columns(_ok=torch_ok)
    else:
        ok = td_frame.select("line", _ok=torch_ok)
        with_ok = slow.join(ok, on="line", how="left", maintain_order="left")
    slow_ok = (
        with_ok.select(
            pl.col("known")
            | pl.col("cont")
            | pl.col("_ok").fill_null(False)
            | pl.col("_last_err")
            | pl.col("line").is_in(nccl_lines.implode())
        )
        .to_series()
    )
    if nfast:
        understood = repeated(True, base.height, pl.Boolean).alias("known")
        understood = understood.scatter((~fast.mask).arg_true(), slow_ok) if len(slow_ok) else understood
    else:
        understood = slow_ok
    return FamilyRows(
        tables={} if together else _tables(parts),
        understood=understood.fill_null(False).alias("known"),
        notes=notes,
        hosts=hosts,
        fast=fast.mask if fast.n else None,
        whole=ras,
        continued=continued,
        files=keyed,
        parts=parts if together else None,
    )


def _tables(parts: dict[str, list[pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """The tables of a file from the grammar's parts of each (a part's columns are those it gives)."""
    tables: dict[str, pl.DataFrame] = {}
    for name, dfs in parts.items():
        dfs = [d for d in dfs if d.height]
        if not dfs:
            continue
        df = pl.concat(dfs, how="diagonal_relaxed")
        if name == "inventory":
            df = df.unique(subset=list(_INVENTORY_UNIQUE), keep="first", maintain_order=True)
        tables[name] = df
    return tables


def _block_heads(text: pl.Expr) -> pl.Expr:
    """Per line: holds the head literal of a torchrun `Result:` or launch-config block."""
    head = text.str.contains(td.RESULT_HEAD_TEXT, literal=True)
    return head | text.str.contains("launch configs:", literal=True)


def _whole_file_checks(slow: pl.DataFrame, fast_hits: pl.DataFrame) -> tuple[bool, bool]:
    """(whether the lines hold a torchrun/ChildFailedError block head, whether they hold `Last error:`):
    over the bodies of `slow` (a block head: `_block_heads` or a `td.ROOT_CAUSE_RE` match) and the texts
    of the fast lane's `fast_hits` (a block head: `_block_heads`).

    One select over `slow` answers the literal tests and the root-cause regex's literal guard (`_may`:
    true for a frame of more than `_SMALL` rows or a regex without one), the regex runs only when the
    guard holds and no literal test did (`(a | b).any()` is `a.any() or b.any()`, nulls ignored either
    way), and the fast lane's lines are looked at, in one select, only when one answer is still no."""
    body = pl.col("body")
    got = slow.select(
        heads=_block_heads(body).any(),
        last=body.str.contains(td.LAST_ERROR_TEXT, literal=True).any(),
        rc=_may_expr(slow.height, body, td.ROOT_CAUSE_RE),
    ).row(0)
    blocks, last_err = bool(got[0]), bool(got[1])
    if not blocks and got[2]:
        blocks = bool(slow.select(body.str.contains(arx(td.ROOT_CAUSE_RE)).any()).item())
    if not (blocks and last_err) and fast_hits.height:
        text = pl.col("text")
        got = fast_hits.select(
            heads=_block_heads(text).any(), last=text.str.contains(td.LAST_ERROR_TEXT, literal=True).any()
        ).row(0)
        blocks, last_err = blocks or bool(got[0]), last_err or bool(got[1])
    return blocks, last_err


_TORCH_HINTS = (*td.TORCH_LITERALS, "exitcode", "Sending process", 'File "')
"""Literals one of which a non-NCCL line needs for `td.torch_events` to make an event of it (its candidate
filter) or to read it as a traceback source line (after a `File "` line)."""


def _torch_may_hold(frame: pl.DataFrame, blocks: bool) -> bool:
    """False when `td.torch_events` would return no event and understand no line of `frame`: no torchrun block,
    no continuation line, and no non-NCCL line that its grammar knows or that holds one of `_TORCH_HINTS`, no
    torchfrtrace report head (checked against torch_events itself in tests/parsers/test_nccl_fast.py)."""
    if frame.height == 0:
        return False
    if blocks:
        return True
    body = pl.col("body")
    other = ~pl.col("_nccl")
    # the literal tests first: when one holds on some line, so does the whole test (no PyTorch regex run)
    cheap = frame.select(
        (
            pl.col("cont")
            | (other & body.str.contains_any(list(_TORCH_HINTS)))
            | body.str.contains("Not all ranks joining collective", literal=True)
        )
        .fill_null(False)
        .any()
    ).item()
    if cheap:
        return True
    hit = frame.select(
        (
            pl.col("cont")
            | (other & (td.torch_understood(body) | body.str.contains_any(list(_TORCH_HINTS))))
            | body.str.contains("Not all ranks joining collective", literal=True)
        )
        .fill_null(False)
        .any()
    ).item()
    return bool(hit)


ALIGNED = True
"""`_family_rows_frame` puts per-line results of frames that hold the same lines in the same order side by side
instead of joining them on line numbers (off: always joined; tests compare both)."""
FAST_LANE = True
"""Read plain NCCL records through `_fast_lane` (off: every line takes the full path; tests compare both)."""
_FRAME_COLS = (
    "line",
    "text",
    "body",
    "env_rank",
    "env_rank_source",
    "env_host",
    "env_pid",
    "env_global_rank",
    "pre_ts",
    "pre_ts_quality",
    "_nccl",
    "known",
)


def _full_frame(slow: pl.DataFrame, fast: FastLane) -> pl.DataFrame:
    """Every line prepared (fast-lane lines rebuilt from their heads: body = the line less its launcher
    prefix), in line order, plus `_fbody` (the body before any wrap joining)."""
    slow = slow.select(*_FRAME_COLS)
    if fast.n == 0:
        return slow.with_columns(_fbody=pl.col("body"))
    env = fast.heads.select(
        "env_len",
        "env_rank",
        "env_rank_source",
        "env_host",
        "env_pid",
        "env_global_rank",
        "pre_ts",
        "pre_ts_quality",
    )[fast.rows.get_column("hc")]
    fr = fast.texts.hstack(env).select(
        "line",
        "text",
        body=pl.col("text").str.slice(pl.col("env_len")),
        env_rank="env_rank",
        env_rank_source="env_rank_source",
        env_host="env_host",
        env_pid="env_pid",
        env_global_rank="env_global_rank",
        pre_ts="pre_ts",
        pre_ts_quality="pre_ts_quality",
        _nccl=pl.lit(True),
        known=pl.lit(True),
    )
    return pl.concat([slow, fr], how="vertical").sort("line").with_columns(_fbody=pl.col("body"))


def _drop_fast(fast: FastLane, lines: pl.Series, numbers: pl.Series) -> FastLane:
    """The fast lane without the records of `lines` (they go back to the full path); `numbers` are the line
    numbers of the mask's positions."""
    drop = pl.col("line").is_in(lines.implode())
    rest = fast.rest.filter(~drop)
    if fast.rest.height - rest.height != lines.n_unique():
        # a strict COLL line among them (a wrap is only joined onto a WARN/error record, which none is)
        raise _CollJoinedError
    pos = numbers.search_sorted(lines, side="left").cast(pl.UInt32)
    mask = fast.mask.clone().scatter(pos, False)
    return FastLane(
        mask=mask,
        first=fast.first,
        heads=fast.heads,
        rest=rest,
        coll=fast.coll,
        hits=fast.hits.filter(~drop),
        src=fast.src,
        keys=fast.keys,
        n=fast.n - (fast.rest.height - rest.height),
    )


class _CollJoinedError(Exception):
    """A wrap was joined onto a COLL line the fast lane aggregated: the chunk is read without the lane."""


def _may_wrap(slow: pl.DataFrame, fast: FastLane) -> bool:
    """False when `join_wrapped` would join nothing: no candidate continuation (an unknown, non-blank line not
    opening like a record of its own, right after a line of at least 80 characters) whose run starts at a
    known warning/error record (`_WRAPPABLE`)."""
    b = pl.col("body").fill_null("")
    c = slow.filter(~pl.col("known") & (b.str.strip_chars().str.len_bytes() != 0))
    if c.height:
        c = c.filter(~b.str.contains(arx(_OWN_START)))
    if c.height == 0:
        return False
    # bodies of the lines before the candidates, and of the run heads found below, from either lane
    slow_b = slow.select("line", "known", _b=b)

    def bodies(want: pl.Series) -> pl.DataFrame:
        got = want.to_frame("line").join(slow_b, on="line", how="inner")
        if fast.n:
            fl = fast.texts.get_column("line")
            at = fl.search_sorted(want, side="left")
            at = at.filter(at < len(fl))
            at = at.filter(fl.gather(at).is_in(want.implode()))
            if len(at):
                env = fast.heads.get_column("env_len").gather(fast.rows.get_column("hc").gather(at))
                f = fast.texts[at].select("line", known=pl.lit(True), _b=pl.col("text").str.slice(env))
                got = pl.concat([got, f], how="vertical")
        return got

    prev = bodies(c.get_column("line") - 1).filter(pl.col("_b").str.len_chars() >= 80)
    if prev.height == 0:
        return False
    cand = set((prev.get_column("line") + 1).to_list())
    # a run is a non-candidate line and the candidates after it; the first line of the frame has no run head
    first = fast.first
    heads = set()
    for line in sorted(cand):
        h = line - 1
        while h in cand:
            h -= 1
        if h >= first:
            heads.add(h)
    if not heads:
        return False
    hb = bodies(pl.Series("line", sorted(heads), dtype=pl.Int64))
    wrappable = pl.col("known") & pl.col("_b").str.contains(arx(_WRAPPABLE))
    return bool(hb.select(wrappable.fill_null(False).any()).item())

def parse_family(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse NCCL and PyTorch-distributed lines of one file into a ParseResult (both parsers' `parse`)."""
    rows = family_rows(lines, ctx)
    frame = numbered(lines, ctx).with_columns(ok=rows.understood)
    n_fast = 0
    if rows.fast is not None:
        # fast-lane lines are understood NCCL records (never blank): counted without a look
        n_fast = int(rows.fast.sum())
        frame = frame.filter(~rows.fast)
    parsed, unrecognized, examples = account(frame, pl.col("ok"))
    parsed += n_fast
    return ParseResult(
        tables=rows.tables,
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        notes=rows.notes,
        node=rows.hosts[0] if len(rows.hosts) == 1 else None,
    )


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse NCCL debug output (and the PyTorch-distributed lines mixed into it)."""
    if SMALL_PATH and FAST_LANE and len(lines) <= _nccl_small.MAX_LINES:
        small = _nccl_small.parse(lines, ctx)
        if small is not None:
            return small
    return parse_family(lines, ctx)


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the small chunks of plain INFO records read together
    (`parsers._nccl_small.parse_many`: each table built once for them all), the others of one year by one run
    of the grammar over all their lines where it keeps them apart (`_read_together`), else one by one."""
    items = list(items)
    out: list[ParseResult | None] = [None] * len(items)
    if SMALL_PATH and FAST_LANE:
        small = [i for i, (lines, _ctx) in enumerate(items) if len(lines) <= _nccl_small.MAX_LINES]
        for i, result in zip(small, _nccl_small.parse_many([items[i] for i in small]), strict=True):
            out[i] = result
    rest = [i for i, r in enumerate(out) if r is None]
    for i, result in zip(rest, family_many([items[i] for i in rest]), strict=True):
        out[i] = result
    return out  # type: ignore[return-value]


def family_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse_family(lines, ctx) for lines, ctx in items]`: the files of one year read by one run of the
    grammar where it keeps them apart (`_read_together`), else one by one."""
    items = list(items)
    out: list[ParseResult | None] = [None] * len(items)
    if TOGETHER:
        groups: dict[tuple[object, ...], list[int]] = {}
        for i, (lines, ctx) in enumerate(items):
            # (COLL lines send a batch to be read file by file: such a file is not tried)
            if not lines.str.contains(" opCount ", literal=True).any():
                groups.setdefault((ctx.year_hint, ctx.collected_at), []).append(i)
        for ks in groups.values():
            got = _read_together([items[i] for i in ks]) if len(ks) > 1 else None
            for i, result in zip(ks, got or (), strict=False):
                out[i] = result
    return [r if r is not None else parse_family(*items[i]) for i, r in enumerate(out)]


TOGETHER = True
"""`parse_many` reads the NCCL logs of a batch by one run of the grammar where it can (tests compare both)."""
_NO_PATH = "\x00batch"
_NO_NODE = "\x00batch"
"""The `BatchContext`'s path and node: no file's (a file's own go in its rows after the run)."""


def _read_together(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult] | None:
    """`[parse_family(lines, ctx) for lines, ctx in items]` (files of one year) from one run of the grammar
    over all their lines, or None where the run cannot keep the files apart (`NotTogether`) or fails.

    The grammar's cost is mostly its hundreds of polars calls, whatever a file's size (~35 ms for a 286-line
    rank log of a hang: NCCL records, watchdog timeouts, a C++ abort and torchrun's failure block), and one
    run pays them once for the batch. Each file's lines are numbered from k * `FILE_SPAN` up, after one blank
    line (which the grammar sees as the start of a file: it starts no wrap, block or traceback). The steps
    that look across lines or rows keep the files apart by `line // FILE_SPAN`: the inventory's distinct
    facts, each file's single NCCL version, its ring/tree count and hosts, the host of a bare version line,
    a failure block's root-cause state. What cannot be kept apart sends every file to be read alone: one
    process (host, pid) in two files, COLL lines, an ncclras report, a torchfrtrace report, a wrap joined or
    whose width is needed (each file has its own)."""
    batch, _starts = batch_frame([numbered(lines, ctx) for lines, ctx in items], [c.first_line for _l, c in items])
    first = items[0][1]
    ctx = BatchContext(
        path=_NO_PATH,
        node=_NO_NODE,
        first_line=first.first_line,
        year_hint=first.year_hint,
        collected_at=first.collected_at,
    )
    try:
        fam = family_rows_frame(batch, ctx, wrap_width=no_wrap)
        if fam.whole or (fam.continued is not None and len(fam.continued)):
            return None
        if fam.files is None or fam.parts is None:
            return None
        tables = _cut_tables(fam.parts, [c for _l, c in items])
        counts = _accounts(batch, fam.understood, fam.fast, len(items))
    except CONTAINED:  # noqa: BLE001 - (`NotTogether`, or a file that fails, and fails again alone)
        return None
    out = []
    for k, (own, (parsed, unrecognized, examples)) in enumerate(zip(tables, counts, strict=True)):
        notes, hosts = fam.files.get(k, ([], []))
        out.append(
            ParseResult(
                tables=own,
                parsed=parsed,
                unrecognized=unrecognized,
                unrecognized_examples=examples,
                notes=notes,
                node=hosts[0] if len(hosts) == 1 else None,
            )
        )
    return out


def batch_frame(frames: Sequence[pl.DataFrame], firsts: Sequence[int]) -> tuple[pl.DataFrame, list[int]]:
    """Frames of line, text (the k-th numbered from `firsts[k]`) as one frame for one run of the grammar: the
    k-th's lines numbered up by k * `FILE_SPAN`, after one blank line (which the grammar sees as it sees the
    start of a file); and where each frame starts in it."""
    gap = {"line": pl.Int64, "text": pl.String}
    parts: list[pl.DataFrame] = []
    starts: list[int] = []
    at = 0
    for k, (frame, first) in enumerate(zip(frames, firsts, strict=True)):
        if k:
            parts.append(pl.DataFrame({"line": [k * FILE_SPAN + first - 1], "text": [""]}, schema=gap))
            at += 1
        parts.append(frame.select(pl.col("line") + k * FILE_SPAN, "text"))
        starts.append(at)
        at += frame.height
    return pl.concat(parts), starts


def no_wrap() -> int | None:
    """The wrap width of a batch read as one frame: each file has its own, so the run cannot go on."""
    raise NotTogether


def _cut_tables(parts: dict[str, list[pl.DataFrame]], ctxs: list[FileContext]) -> list[dict[str, pl.DataFrame]]:
    """Each file's tables (`_tables` of its rows of each part) from a batch's parts (`_read_together`), with
    the file's own line numbers, path and node.

    A file's table has the columns of the parts it has rows in, so the files are cut in groups of the same
    parts: a group's rows of those parts concatenated (each file's rows in part order, as alone), its
    distinct inventory facts kept per file, and the rows partitioned by file."""
    out: list[dict[str, pl.DataFrame]] = [{} for _ in ctxs]
    ks = list(range(len(ctxs)))
    for name, dfs in parts.items():
        keyed = [d.with_columns(_f=pl.col("line") // FILE_SPAN) for d in dfs if d.height]
        present = [set(d.get_column("_f").unique().to_list()) for d in keyed]
        groups: dict[tuple[int, ...], list[int]] = {}
        for k in ks:
            has = tuple(i for i, p in enumerate(present) if k in p)
            if has:
                groups.setdefault(has, []).append(k)
        for has, files in groups.items():
            pieces = [keyed[i] for i in has]
            if len(groups) > 1:
                pieces = [d.filter(pl.col("_f").is_in(files)) for d in pieces]
            df = pl.concat(pieces, how="diagonal_relaxed")
            if name == "inventory":  # (`_tables`' distinct facts, of each file)
                df = df.unique(subset=[*_INVENTORY_UNIQUE, "_f"], keep="first", maintain_order=True)
            f = pl.col("_f")
            fixes = [pl.col("line") - f * FILE_SPAN]
            if "file" in df.columns:
                paths = [ctxs[k].path for k in files]
                fixes.append(f.replace_strict(files, paths, return_dtype=df.schema["file"]).alias("file"))
            if "node" in df.columns:
                nodes = f.replace_strict(files, [ctxs[k].node for k in files], return_dtype=pl.String)
                node = pl.when(pl.col("node") == _NO_NODE).then(nodes).otherwise(pl.col("node"))
                fixes.append(node.cast(df.schema["node"]).alias("node"))
            df = df.with_columns(fixes)
            for key, own in df.partition_by("_f", as_dict=True, include_key=False).items():
                out[int(key[0])][name] = own  # type: ignore[call-overload]
    return out


def _accounts(
    batch: pl.DataFrame, understood: pl.Series, fast: pl.Series | None, n: int
) -> list[tuple[int, int, list[tuple[int, str]]]]:
    """`account` of each file of a batch read as one frame (`batch`: line, text; the separating blank lines
    count nowhere), as `parse_family` counts a file: its fast-lane lines parsed without a look."""
    fl = pl.lit(False) if fast is None else pl.lit(fast)
    flagged = batch.select(
        _f=pl.col("line") // FILE_SPAN,
        line=pl.col("line") % FILE_SPAN,
        text=pl.col("text"),
        blank=BLANK,
        ok=pl.lit(understood).fill_null(False),
        fast=fl,
    )
    looked = ~pl.col("fast") & ~pl.col("blank")
    per = flagged.group_by("_f").agg(
        parsed=(pl.col("ok") & looked).sum() + pl.col("fast").sum(),
        unrecognized=(~pl.col("ok") & looked).sum(),
    )
    got = {int(f): (int(p), int(u)) for f, p, u in per.iter_rows()}
    bad = flagged.filter(~pl.col("ok") & looked).group_by("_f", maintain_order=True).head(MAX_EXAMPLES)
    examples: dict[int, list[tuple[int, str]]] = {}
    for f, line, text in bad.select("_f", "line", "text").iter_rows():
        examples.setdefault(int(f), []).append((int(line), str(text)[:EXAMPLE_CHARS]))
    return [(*got.get(k, (0, 0)), examples.get(k, [])) for k in range(n)]


SMALL_PATH = True
"""Read a small chunk of plain INFO records in Python (`parsers._nccl_small`; tests compare both readings)."""
