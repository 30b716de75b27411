"""The XID/SXid catalog: data complete for the codes the analysis relies on, values within the vocabularies."""

from __future__ import annotations

import pytest

from forensics.catalog import BLAMES, CATEGORIES, SEVERITIES, describe, entries, find_entry

REQUIRED_XIDS = [8, 13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120, 121, 140, *range(144, 151), 154]
REQUIRED_SXIDS = [20034, 12028, 20009, 20012, 22003, 26006, 28003]


@pytest.mark.parametrize("code", REQUIRED_XIDS)
def test_required_xids_present(code: int) -> None:
    e = find_entry("xid", code)
    assert e is not None and e.name and e.meaning and e.action and e.source


@pytest.mark.parametrize("code", REQUIRED_SXIDS)
def test_key_sxids_present(code: int) -> None:
    assert find_entry("sxid", code) is not None


@pytest.mark.parametrize("kind", ["xid", "sxid"])
def test_vocabularies(kind: str) -> None:
    for e in entries(kind):
        assert e.category in CATEGORIES, e
        assert e.severity in SEVERITIES, e
        assert e.blame in BLAMES, e
    codes = [e.code for e in entries(kind)]
    assert codes == sorted(set(codes))


def test_expected_judgements() -> None:
    assert find_entry("xid", 79).severity == "critical" and find_entry("xid", 79).category == "gpu_hardware"
    assert find_entry("xid", 48).category == "gpu_memory" and find_entry("xid", 64).severity == "critical"
    assert find_entry("xid", 13).blame == "application" and find_entry("xid", 45).blame == "consequence"
    assert find_entry("xid", 74).category == "nvlink" and find_entry("xid", 119).blame == "firmware"


def test_describe() -> None:
    text = describe("xid", 79)
    assert text is not None and text.startswith("XID 79: GPU has fallen off the bus (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)")
    assert "action:" in text and "source:" in text
    assert describe("xid", 99999) is None and describe("nope", 79) is None
    assert describe("sxid", 20034).startswith("SXID 20034: LTSSM Fault Up")
