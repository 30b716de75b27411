"""The verdict on simulated incidents: every fault kind found on the right node/GPU/category and ranked
first, healthy jobs quiet, two simultaneous faults both found. A small, fast slice of what
`scripts/score_analysis.py` measures over many seeds and sizes (docs/ACCURACY.md)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from forensics.analyze import analyze
from forensics.ingest import ingest
from forensics.scoring import Score, score
from forensics.simulate import FAULT_KINDS, parse_fault, simulate

CASES = [[k] for k in FAULT_KINDS if k != "none"] + [[], ["gpu_lost@1", "thermal@4"], ["ib_flap@2", "drift_driver@5"]]



def _diagnose(tmp_path: Path, faults: list[str], nodes: int, hours: float, seed: int, **kw: bool) -> tuple[dict, dict, Score]:
    """Simulate `faults`, ingest and analyze the bundle: (findings.json's document, the truth, its score)."""
    bundle = tmp_path / "bundle"
    truth = simulate(bundle, nodes=nodes, gpus_per_node=8, hours=hours, faults=[parse_fault(f) for f in faults], seed=seed, **kw)
    ingest(bundle, tmp_path / "out", jobs=1)
    doc = analyze(tmp_path / "out")
    return doc, truth, score(doc, truth)

@pytest.mark.parametrize("faults", CASES, ids=["+".join(c) or "healthy" for c in CASES])
def test_simulated_incident_is_diagnosed(faults: list[str], tmp_path: Path) -> None:
    doc, _, s = _diagnose(tmp_path, faults, nodes=8, hours=0.3, seed=11)
    titles = [f"[{f['severity']}] {f['title']}" for f in doc["findings"][:5]]
    assert s.misses == [], (s.misses, titles)
    assert s.false == [], (s.false, titles)
    if faults:
        assert s.top1_right, titles
    else:
        assert s.healthy_ok, titles


THINNED = [["thermal@3"], ["slow_node@2"], ["gpu_lost@1", "nvlink@5"], []]


@pytest.mark.parametrize("faults", THINNED, ids=["+".join(c) or "healthy" for c in THINNED])
def test_diagnosis_holds_when_steps_and_samples_are_thinned(
    faults: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analysis of a bundle too large to hold reads steps and samples thinned (forensics.outputs):
    forced here on a small bundle (k of 3 to 5), the verdict is the same."""
    from forensics import outputs

    bundle = tmp_path / "bundle"
    truth = simulate(bundle, nodes=12, gpus_per_node=8, hours=0.5, faults=[parse_fault(f) for f in faults], seed=7)
    ingest(bundle, tmp_path / "out", jobs=1)
    monkeypatch.setattr(outputs, "ANALYSIS_ROWS", 300)
    doc = analyze(tmp_path / "out")
    assert len(doc["coverage"]["thinned"]) == 2, doc["coverage"]["thinned"]
    s = score(doc, truth)
    titles = [f"[{f['severity']}] {f['title']}" for f in doc["findings"][:5]]
    assert s.misses == [] and s.false == [], (s.misses, s.false, titles)
    assert s.top1_right if faults else s.healthy_ok, titles


def test_idle_gpus_after_a_crash_make_no_stragglers_nor_cost(tmp_path: Path) -> None:
    """A crash early in a one-hour window: the job is torn down and every GPU idles for the rest of it,
    while the nodes' samplers keep writing (started a few samples apart). Telemetry compared
    across nodes to find the one the job waits for comes from while the job made progress only; over
    the whole window a node's medians tip between busy and idle and healthy nodes were named stragglers.
    Nor does the hang's cost run on through that idle time (it was ~50 min of 96 GPUs, not the ~10 until the
    watchdogs tore the job down)."""
    doc, truth, s = _diagnose(tmp_path, ["ecc_dbe@5:3"], nodes=12, hours=1.0, seed=5)
    titles = [f"[{f['severity']}] {f['title']}" for f in doc["findings"][:5]]
    assert s.misses == [] and s.false == [] and s.top1_right, (s.misses, s.false, titles)
    assert not [f for f in doc["findings"] if f["category"] == "straggler"], titles
    # the hang's cost runs to the watchdogs' teardown, not on through the idle telemetry to the collection
    crash, teardown, end = (_ts(truth["faults"][0]["start"]), _ts(truth["job_end"]), _ts(truth["end"]))
    lost = doc["findings"][0]["impact"]["lost_gpu_hours"]
    assert (end - teardown).total_seconds() > 1200, (teardown, end)
    assert 0 < lost <= (teardown - crash).total_seconds() * 96 / 3600 * 1.1, lost


def test_what_follows_a_hang_is_listed_under_its_cause_only(tmp_path: Path) -> None:
    """An ECC crash hangs the job; a GPU of another node throttles on heat while the others wait. The watchdog
    timeouts and clean-ups that follow are the crash's consequences, not the thermal finding's (it began
    after the job had stopped), though both are found."""
    doc, _, s = _diagnose(tmp_path, ["ecc_dbe@5:3+0.3", "thermal@2:7+0.4"], nodes=8, hours=1.0, seed=3)
    assert s.misses == [] and s.false == [] and s.top1_right, (s.misses, s.false)
    ecc, thermal = (next(f for f in doc["findings"] if f["category"] == c) for c in ("gpu_memory", "thermal_power"))
    assert any("watchdog timeout" in c for c in ecc["consequences"]), ecc["consequences"]
    assert not any("watchdog" in c or "XID 45" in c for c in thermal["consequences"]), thermal["consequences"]


def test_a_fault_that_left_no_trace_is_not_counted_missed() -> None:
    seen = {"kind": "ecc_dbe", "node": "n1", "gpu_index": 3, "category": "gpu_memory"}
    gone = {"kind": "thermal", "node": "n2", "gpu_index": 6, "category": "thermal_power", "observable": False}
    ecc = {"severity": "critical", "category": "gpu_memory", "node": "n1", "gpu_index": 3, "title": "XID 48"}
    hot = {"severity": "high", "category": "thermal_power", "node": "n2", "gpu_index": 6, "title": "thermal"}
    s = score({"findings": [ecc]}, {"faults": [seen, gone]})
    assert (s.faults, s.found, s.misses, s.top1_right) == (1, 1, [], True)
    s = score({"findings": [ecc, hot]}, {"faults": [seen, gone]})
    assert (s.real_strict, s.false) == (2, [])  # a finding of it is still real
    s = score({"findings": [hot]}, {"faults": [gone]})  # nothing to find: judged as a healthy bundle
    assert (s.faults, s.misses, s.top1_right, s.healthy_ok) == (0, [], None, False)


def test_a_node_turned_slow_when_the_job_was_already_held_back_is_found(tmp_path: Path) -> None:
    """node-002's older driver holds the job back by ~8 % from the start; at 80 % of the run node-011 turns
    14 % slower, which moves the job's step time by only ~6 % (no slow regime), and the bundle has one rank's
    step log only: node-011 is found from its GPUs' telemetry over the stretch it stood apart, with when."""
    doc, truth, s = _diagnose(tmp_path, ["drift_driver@1+0.6", "slow_node@10+0.8"], nodes=12, hours=1.5, seed=448, mixed_logs=True)
    assert s.misses == [] and s.false == [], (s.misses, s.false)
    slow = next(f for f in doc["findings"] if f["category"] == "straggler")
    onset = next(f["start"] for f in truth["faults"] if f["kind"] == "slow_node")
    assert slow["node"] == "node-011" and "turned slow at" in slow["summary"], slow["summary"]
    assert abs((_ts(slow["first_seen"]) - _ts(onset)).total_seconds()) <= 300, (slow["first_seen"], onset)


def _ts(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def test_a_gpu_hot_with_its_clocks_down_is_a_thermal_slowdown_where_dmon_names_no_reason(tmp_path: Path) -> None:
    """A GPU of node 2 throttles on heat at 30 % of the run and a GPU of node 6 falls off the bus at 70 %: the end
    snapshot sees an idle GPU, and the telemetry is `nvidia-smi dmon` (clocks and temperatures, no throttle
    reasons). The hot GPU with its clocks down is found as a thermal slowdown and explains the slowdown; the
    XID 79 at its end stopped the job, it did not slow it."""
    doc, _, s = _diagnose(tmp_path, ["thermal@2:5+0.3", "gpu_lost@6+0.7"], nodes=8, hours=1.0, seed=1)
    assert any(p.name.endswith("dmon.log") for p in (tmp_path / "bundle").rglob("*"))
    assert s.misses == [] and s.false == [] and s.top1_right, (s.misses, s.false)
    hot = next(f for f in doc["findings"] if f["category"] == "thermal_power")
    assert hot["gpu_index"] == 5 and "SM clock down at" in hot["title"], hot["title"]
    assert (hot["impact"]["step_time_slowdown_pct"] or 0) > 10, hot["impact"]
    xid = next(f for f in doc["findings"] if f["category"] == "gpu_hardware")
    assert xid["impact"]["step_time_slowdown_pct"] is None, xid["impact"]


def test_a_crash_at_the_end_of_a_straggler_s_slowdown_does_not_take_it(tmp_path: Path) -> None:
    """Node 3 turns 19 % slower at 30 % of the run (no hardware trace); a GPU of node 6 falls off the bus at 70 %,
    within the slowdown's half-hour reach. The slowdown is the straggler's, with its cost; the XID 79 is the
    hang's cause only."""
    doc, truth, s = _diagnose(tmp_path, ["slow_node@3+0.3", "gpu_lost@6+0.7"], nodes=8, hours=1.0, seed=3)
    assert s.misses == [] and s.false == [], (s.misses, s.false)
    slow = next(f for f in doc["findings"] if f["category"] == "straggler")
    xid = next(f for f in doc["findings"] if f["category"] == "gpu_hardware")
    assert slow["node"] == truth["faults"][0]["node"] and (slow["impact"]["step_time_slowdown_pct"] or 0) > 10, slow
    assert xid["impact"]["step_time_slowdown_pct"] is None, xid["impact"]
