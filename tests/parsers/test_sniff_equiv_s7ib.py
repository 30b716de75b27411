"""Round 7's cheaper rejections of other formats' heads in the sniffers of perftest, torch-distributed,
dcgm, bug-report, infiniband and nccl-tests: the scores stay those of the sniffers as they were (kept here
verbatim as references, their requirements rebuilt as they were built), on every fixture and real-log head,
their cut, CRLF and vertical-tab variants, and on heads mixed from fixture lines and lines made to hold the
literals the sniffers look for, whole or in part."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import bug_report as brm
from parsers import dcgm as dcm
from parsers import infiniband as ibm
from parsers import nccl_tests as ntm
from parsers import perftest as ptm
from parsers import torch_distributed as tdm
from parsers._sniff import cheap_requirements, head_text, holds, probed
from tests.parsers._heads import POOL, check, fixture_heads

# ----------------------------------------------------------------------------- references (verbatim)

_OLD_PT_BANNER_REQS = (
    *cheap_requirements(ptm._SNIFF_BANNER),
    tuple(map(probed, ptm._SNIFF_BANNER_LITS)),
)
_OLD_PT_PAIR_REQS = cheap_requirements(ptm._SNIFF_PAIR)
_OLD_PT_HDR_REQS = cheap_requirements(ptm._SNIFF_HDR)


def old_perftest_sniff(head: bytes, name: str) -> float:
    text = head_text(head)
    banner, pairs, hdr = (
        holds(_OLD_PT_BANNER_REQS, text) and bool(ptm._SNIFF_BANNER.search(text)),
        len(ptm._SNIFF_PAIR.findall(text)) if holds(_OLD_PT_PAIR_REQS, text) else 0,
        holds(_OLD_PT_HDR_REQS, text) and bool(ptm._SNIFF_HDR.search(text)),
    )
    if (banner and pairs >= 2) or hdr:
        return 0.95
    if banner or pairs >= 3:
        return 0.7
    return 0.0


_OLD_TD_FR_REQS = cheap_requirements(tdm._SNIFF_FR)
_OLD_TD_STRONG_REQS = cheap_requirements(tdm._SNIFF_STRONG)


def old_td_sniff(head: bytes, name: str) -> float:
    if tdm.is_pickle(head):
        return 0.9 if b"entries" in head[:65536] or b"pg_config" in head[:65536] else 0.5
    text = head_text(head)
    if holds(_OLD_TD_FR_REQS, text) and tdm._SNIFF_FR.search(text):
        return 0.95
    strong = len(tdm._SNIFF_STRONG.findall(text)) if holds(_OLD_TD_STRONG_REQS, text) else 0
    if not strong:
        return 0.0
    nccl_lines = len(tdm._NCCL_LINE.findall(text))
    if nccl_lines > 3 * strong:
        return 0.5
    lines = [ln for ln in text.splitlines()[:400] if ln.strip() and not ln.startswith("#SOURCE")]
    if lines and strong / len(lines) < 0.1:
        return 0.6
    return 0.9 if strong >= 2 else 0.75


def old_dcgm_sniff(head: bytes, name: str) -> float:
    text = head_text(head)
    _has = dcm._has
    if _has(text, "Diagnostic") and re.search(r"^\|\s*Diagnostic\s+\|\s*Result\s+\|", text, re.M):
        return 1.0
    if _has(text, "Successfully ran diagnostic"):
        return 1.0
    if _has(text, "Health Monitor Report"):
        return 1.0
    if _has(text, "GPUs found.") and _has(text, "Device Information"):
        return 1.0
    if _has(text, '"DCGM ') and re.search(r'"DCGM (?:GPU )?Diagnostic"\s*:', text):
        return 1.0
    if not holds(dcm._SNIFF_HOSTENGINE_REQS, text):
        return 0.0
    raw = text[:8192].splitlines()[:-1] if len(text) > 8192 else []
    raw = raw[:50] if len(raw) >= 50 else text.splitlines()[:50]
    lines = [ln for ln in raw if ln.strip() and not ln.startswith("#")]
    digit = dcm._SNIFF_HOSTENGINE_DIGIT
    hits = sum(1 for ln in lines if (not digit or ln[:1].isdecimal()) and dcm._SNIFF_HOSTENGINE.match(ln))
    if lines and hits / len(lines) >= 0.5 and re.search(r"dcgm|hostengine|nvvs", text, re.I):
        return 0.8
    return 0.0


def old_bug_report_sniff(head: bytes, name: str) -> float:
    text = head.decode("utf-8", "replace")
    if "Start of NVIDIA bug report log file" in text or "nvidia-bug-report.sh Version" in text:
        return 1.0
    return 0.0


_OLD_IB_REQS = tuple(
    (cheap_requirements(a), cheap_requirements(b) if b is not None else None) for a, b, _ in ibm._SNIFF
)


def old_ib_sniff(head: bytes, name: str) -> float:
    text = head_text(head)
    best = 0.0
    for (first, second, score), (reqs1, reqs2) in zip(ibm._SNIFF, _OLD_IB_REQS, strict=True):
        if score <= best or not holds(reqs1, text) or (reqs2 is not None and not holds(reqs2, text)):
            continue
        if first.search(text) and (second is None or second.search(text)):
            best = max(best, score)
    return best


_OLD_NT_ROW_HINTS = tuple(
    re.compile(p)
    for p in (
        r"float(?:16)?\s+\w+\s", r"half\s+\w+\s", r"double\s+\w+\s", r"int(?:8|32|64)\s+\w+\s",
        r"fp8\w*\s+\w+\s",
    )
)


def old_nccl_tests_sniff(head: bytes, name: str) -> float:
    text = head_text(head)
    if '"' in text and ('"minimum_bytes"' in text or '"results"' in text) and holds(
        ntm._SNIFF_JSON_REQS, text
    ):
        if ntm._SNIFF_JSON_FILE.search(text) and any(
            ln.strip() and not ln.startswith("#SOURCE") for ln in text.splitlines()
        ):
            return 0.95
    strong = any(holds(reqs, text) and r.search(text) for r, reqs in ntm._SNIFF_STRONG_REQS)
    devices = rows = 0
    if not strong:
        devices = ntm._two(ntm._SNIFF_DEVICE, text) if holds(ntm._SNIFF_DEVICE_REQS, text) else 0
        if devices < 2:
            rows = ntm._two(ntm._SNIFF_ROW, text) if any(h.search(text) for h in _OLD_NT_ROW_HINTS) else 0
    if not (strong or devices or rows):
        return 0.0
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#SOURCE")]
    if not lines:
        return 0.0
    nccl_share = (len(ntm._SNIFF_NCCL_FAST.findall(text)) if "] NCCL " in text else 0) / len(lines)
    if strong or devices >= 2 or rows >= 2:
        return 0.95 if nccl_share < 0.5 else 0.45
    if devices == 1 or rows == 1:
        return 0.6 if nccl_share < 0.5 else 0.2
    return 0.0


PAIRS = [
    (ptm.sniff, old_perftest_sniff),
    (tdm.sniff, old_td_sniff),
    (dcm.sniff, old_dcgm_sniff),
    (brm.sniff, old_bug_report_sniff),
    (ibm.sniff, old_ib_sniff),
    (ntm.sniff, old_nccl_tests_sniff),
]
IDS = ["perftest", "torch-distributed", "dcgm", "bug-report", "infiniband", "nccl-tests"]


# ----------------------------------------------------------------------------- heads


LITERALS = [
    # perftest
    " RDMA_Write BW Test", "   Send Lat Test", " Latency Test", " Dual-port       : OFF",
    " Number of qps   : 1",
    " Connection type : RC", " TX depth        : 128", " Link type       : IB", "Link type", "type", "qps",
    "Number", " Test", "Test", "BW", "Lat", " #bytes     #iterations    BW peak[MB/sec]",
    "#bytes #iterations t_min",
    # torch-distributed
    "torch.distributed.run", "torch.distributed.elastic.agent", "elastic_operator",
    "c10d_rendezvous_backend", "local_elastic_agent", "api: [default] ", "[default]",
    "Watchdog caught collective operation timeout",
    "ProcessGroupNCCL.cpp:1234] x", "ProcessGroupNCCL.cpp:", "Heartbeat monitor timed out",
    "Rendezvous complete for workers", "failed (exitcode: -6) local_rank", "local_rank",
    "Not all ranks joining collective", "last enqueued NCCL work", "enqueued", "elastic", "endezvous",
    "ollective", "'pg_status': 1", '"pg_config": {', '"collective_seq_id" :', "pg_status", '"', "'",
    "a:1:2 [0] NCCL INFO x",
    # dcgm
    "| Diagnostic | Result |", "Diagnostic", "Successfully ran diagnostic", "iagnostic",
    "Health Monitor Report", "GPUs found.", "Device Information", '"DCGM Diagnostic" :', '"DCGM ',
    "2024-01-02 03:04:05.123 ERROR [123:456] dcgm x", "hostengine",
    # bug-report
    "Start of NVIDIA bug report log file", "nvidia-bug-report.sh Version", "report", "nvidia-bug-report.sh",
    # infiniband
    "CA 'mlx5_0'", "\tCA type: MT4129", "Infiniband device 'mlx5_0' port 1 status:", "hca_id:\tmlx5_0",
    "\ttransport:", "/sys/class/infiniband/mlx5_0/ports/1/state", "mlx5_0/ports/1/counters/x: 1",
    "# Port counters: Lid 1 port 1", "SymbolErrorCounter:....0", "PortXmitData:.......1", "Counter:.",
    "Data:.", "Errors:.", "ibpanic: x", "mlx5_0 port 1 ==> ib0 (Up)", "==> /sys/class/infiniband/x <==",
    "Operational Info", "Physical state  : LinkUp",
    # nccl-tests
    "     8388608       2097152     float     sum      -1    321.3", "1024 256 bfloat16 sum",
    "8 2 fp8e4m3 max ", "16 4 half prod x", "32 8 double min ", "64 16 int8 sum ", "64 16 uint32 sum ",
    "8 8 int64 x ", "fp8", "float",
    "#  Rank  0 Group  0 Pid 3460055 on     r01n03 device  0 [0x18] NVIDIA H100", "nThread 1 nGpus 8",
    "# Avg bus bandwidth    : 12.3", "nccl-tests version 2.13.9", "Collective test starting: all_reduce_perf",
    "size count type", '{"minimum_bytes": 8, "results": [], "nccl_version": 21805}',
]  # fmt: skip


def _mixed_heads(seed: int, count: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        n = rnd.choice([1, 2, 3, 5, 8, 13, 30, 80, 200])
        share = rnd.random() * 0.6
        lines = []
        for _i in range(n):
            if rnd.random() < share:
                lit = rnd.choice(LITERALS)
                if rnd.random() < 0.3:  # a piece of it
                    a = rnd.randrange(len(lit) + 1)
                    lit = lit[a : rnd.randrange(a, len(lit) + 1)]
                lines.append(rnd.choice(["", " ", "  ", "x ", "host1: "]) + lit + rnd.choice(["", " ", " x"]))
            else:
                lines.append(rnd.choice(POOL))
        sep = rnd.choice(["\n", "\n", "\n", "\r\n", "\x0c"])
        out.append(sep.join(lines).encode("utf-8", "replace")[: rnd.choice([16384, 16384, 2000, 300])])
    return out


@pytest.mark.parametrize(("new", "old"), PAIRS, ids=IDS)
def test_same_on_fixture_heads(new, old) -> None:  # type: ignore[no-untyped-def]
    check(new, old, fixture_heads())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("new", "old"), PAIRS, ids=IDS)
def test_same_on_mixed_heads(new, old, seed: int) -> None:  # type: ignore[no-untyped-def]
    heads = _mixed_heads(seed, 300)
    check(new, old, heads)
    # the literals do reach the scoring paths (not only rejections are compared)
    assert sum(old(h, "x") > 0 for h in heads) > 5


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([*LITERALS, "", "x", " : ", "\t", "1"]), max_size=12), st.sampled_from("\n "))
def test_same_on_random_heads(parts: list[str], sep: str) -> None:
    head = sep.join(parts).encode()
    for new, old in PAIRS:
        assert new(head, "x") == old(head, "x")
