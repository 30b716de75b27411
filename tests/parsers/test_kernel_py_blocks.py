"""The kernel-log parser's Python readings of a few candidate lines give what the polars paths give.

`parsers._kernel_events._py_sxids` (SXid records and their Severity/Data continuation lines) and
`parsers._kernel_blocks._py_aer_events` (the events of a few AER blocks) are compared with the polars
readings they replace: the whole parse, both ways, on seeded random mixes (SXid: primary and continuation
lines, switches, codes, Fatal/Non-fatal words, short texts, gaps, other kernel lines in between; AER: the
fixtures' AER and APEI lines reshuffled, cut and spaced) and on the fixtures.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from parsers import _kernel_blocks as kbl
from parsers import _kernel_events as kev
from parsers import kernel_log
from parsers.base import FileContext
from tests.conftest import assert_same_result, fixture_lines

CTX = FileContext(
    path="x/kern.log", node="n1", year_hint=2025, collected_at=datetime(2025, 11, 30, tzinfo=UTC)
)

_FATALITY = ["Fatal, ", "Non-fatal, ", "Nonfatal, ", "fatal, ", "NON-FATAL, ", "", "Fatal,", "Non-fatal,\t"]
_TEXTS = [
    "Link 12 LTSSM Fault Up",
    "Link 32 egress non-posted PRIV error (First)",
    "Minion Link DLREQ interrupt",
    "short",
    "exactly12chr",
    "",
    "Severity 1 Engine instance 12 Sub-engine instance 00",
    "Severity 0 Engine instance 3 Sub-engine instance 00",
    "Severity x Engine instance",
    "Data {0x00000000, 0x00000080}",
    "Data {",
    "Data",
    "\"quoted\" \\ back",
]
_CODES = ["20034", "12028", "22013", "019027", "99999", "0", "99999999999999999999999", "11004"]
_OTHER = [
    "mlx5_core 0000:1a:00.0 mlx5_0: Port: 1 Link DOWN",
    "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "nvidia-nvswitch1: SXid (PCI:0000:87:00.0) 12028 malformed",
    "usb 1-1: new high-speed USB device",
]


def _lines(rng: random.Random, n: int, style: str) -> list[str]:
    out = []
    t = 1000.0
    for _ in range(n):
        t += rng.choice([0.0, 0.000001, 0.01, 1.5])
        if rng.random() < 0.15:
            msg = rng.choice(_OTHER)
        else:
            sw = rng.choice(["1", "2", "3"])
            bus = rng.choice(["PCI:0000:87:00.0", "0000:86:00.0", "PCI:0000:04:00"])
            code = rng.choice(_CODES)
            fat = rng.choice(_FATALITY) if rng.random() < 0.5 else ""
            link = f"Link {rng.randrange(64)} " if rng.random() < 0.3 else ""
            msg = f"nvidia-nvswitch{sw}: SXid ({bus}): {code}, {fat}{link}{rng.choice(_TEXTS)}"
        if style == "dmesg":
            out.append(f"[{t:.6f}] {msg}")
        else:
            day = rng.choice(["29", " 3"])
            out.append(f"Nov {day} 00:05:31 gpu-07 kernel: [{t:12.6f}] {msg}")
    return out


def _both(lines: list[str]) -> None:
    import polars as pl

    s = pl.Series("line", lines, dtype=pl.String)
    kev.PY_SXIDS = kbl.PY_AER_EVENTS = False
    try:
        slow = kernel_log.parse(s, CTX)
    finally:
        kev.PY_SXIDS = kbl.PY_AER_EVENTS = True
    fast = kernel_log.parse(s, CTX)
    assert_same_result(fast, slow)


@pytest.mark.parametrize("seed", range(40))
def test_py_sxids_match_the_polars_reading(seed: int) -> None:
    rng = random.Random(seed)
    _both(_lines(rng, rng.choice([3, 12, 60, 400]), rng.choice(["dmesg", "syslog"])))


def test_py_sxids_non_ascii_and_many_rows_fall_back() -> None:
    rng = random.Random(7)
    lines = _lines(rng, 40, "dmesg")
    lines[3] = "[1.0] nvidia-nvswitch1: SXid (PCI:0000:87:00.0): 12028, Fatal, Link 3 erreur réseau"
    _both(lines)
    _both(_lines(rng, 1500, "dmesg"))


@pytest.mark.parametrize("folder", ["kernel-log"])
def test_py_sxids_on_the_fixtures(folder: str) -> None:
    for _name, lines in fixture_lines(folder):
        _both(lines)


_AER_WORDS = ("AER", "PCIe Bus Error", "error status/mask", "TLP Header", "  [", "Hardware Error")


def _aer_messages() -> list[str]:
    """The messages of the dmesg-raw fixture lines of AER reports and APEI records (after `[ time] `)."""
    out = []
    for name, lines in fixture_lines("kernel-log", harness=False):
        if "dmesg_raw" not in name:
            continue
        for line in lines:
            if line.startswith("[") and "] " in line:
                msg = line.split("] ", 1)[1]
                if any(k in msg for k in _AER_WORDS):
                    out.append(msg)
    return out


_AER_EXTRA = [
    "pcieport 0000:00:03.0: AER: Corrected error received: 0000:3b:00.0",
    "pcieport 10000:e0:01.0: AER: Uncorrected (Fatal) error message received from 10000:e1:00.0",
    "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible, "
    "(Unregistered Agent ID)",
    "pcieport 0000:3a:00.0: AER: device recovery failed",
    "pcieport 0000:3a:00.0: AER: Root Port link has been reset (0)",
    "nvidia 0000:3b:00.0: AER:   TLP Header: 4a000001 0100000f 3b000000 00000000",
    "nvidia 0000:3b:00.0:    [21] ACSViol                (First)",
    'nvidia 0000:3b:00.0:    [ 7] BadDLLP "quoted" \\ back',
    "pcieport 0000:3a:00.0: AER: Multiple Corrected error received: id=3a00",
    "pcieport 0000:3a:00.0: AER: can't find device of ID3a00",
]


@pytest.mark.parametrize("seed", range(40))
def test_py_aer_events_match_the_polars_reading(seed: int) -> None:
    rng = random.Random(1000 + seed)
    msgs = _aer_messages() + _AER_EXTRA
    t = 100.0
    lines = []
    for _ in range(rng.choice([5, 20, 80, 300])):
        t += rng.choice([0.000003, 0.0001, 2.0, 500.0])
        if rng.random() < 0.1:
            lines.append(f"[{t:12.6f}] usb 1-1: new high-speed USB device")
        elif rng.random() < 0.05:
            lines.append("")
        else:
            lines.append(f"[{t:12.6f}] {rng.choice(msgs)}")
    if rng.random() < 0.5:
        # a run of one report in order, as the kernel prints it
        start = rng.randrange(len(msgs))
        lines.extend(f"[{t + k * 0.00001:12.6f}] {msg}" for k, msg in enumerate(msgs[start : start + 12]))
    _both(lines)
