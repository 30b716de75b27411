"""End to end on the shipped samples: ingest, analyze and report each, and score it against its truth.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.analyze import analyze
from forensics.ingest import ingest
from forensics.scoring import score
from reports.render import write_report

SAMPLES = sorted(p for p in (Path(__file__).parent.parent / "samples").iterdir() if (p / "truth.json").is_file())


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_verdict(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = ingest(sample, out, jobs=1)
    assert manifest["totals"]["unrecognized_lines"] == 0, "the simulator's formats are fully known"
    assert all(not f["status"].startswith("error") for f in manifest["files"])
    doc = analyze(out)
    truth = json.loads((sample / "truth.json").read_text())
    s = score(doc, truth)
    assert s.misses == [], s.misses
    assert s.false == [], s.false
    if truth["faults"]:
        assert s.top1_right, doc["findings"][0]["title"]
        top = doc["findings"][0]
        fault = truth["faults"][0]
        if fault.get("gpu_index") is not None and fault["category"] != "straggler":
            # the ticket details of the suspect GPU come from the bundle's own inventory
            assert top["gpu_serial"] and top["gpu_uuid"] and top["gpu_bus_id"]
    else:
        assert s.healthy_ok
    report = write_report(out)
    assert report.stat().st_size > 10_000
