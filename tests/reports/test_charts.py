"""Chart geometry: what each picture shows for a known story (reports/charts.py)."""

from __future__ import annotations

import json

import polars as pl

from forensics.outputs import read_tables
from reports import charts


def _tables(synth_out, **kw):
    s = synth_out(**kw)
    doc = json.loads((s["out"] / "findings.json").read_text())
    return s, read_tables(s["out"]), doc


def test_step_chart_marks_incident_and_anomalies(synth_out) -> None:
    s, t, doc = _tables(synth_out, nodes=6)
    from reports.render import _parse_iso

    inc = {"node": s["bad"], "ts": _parse_iso(doc["findings"][0]["first_seen"]), "label": "F1 first seen"}
    c = charts.step_chart(t["steps"], t["anomalies"], inc)
    assert c is not None and c["n_steps"] == 200 and c["n_nodes"] == 6
    assert [m["label"] for m in c["marks"]] == ["F1 first seen"]
    assert "at step 120" in c["marks"][0]["title"]
    assert {sp["label"].split(" ")[0] for sp in c["spans"]} == {"step_regression", "straggler"}
    assert c["suspect"]  # the suspect node's own curve
    # no step after the incident: marked at the last step
    early = t["steps"].filter(pl.col("step") < 120)
    c2 = charts.step_chart(early, t["anomalies"].head(0), inc)
    assert c2 is not None and c2["marks"][0]["label"].endswith("(no step after it)")


def test_heatmap_puts_the_suspect_first_and_bounds_rows(synth_out) -> None:
    s, t, _ = _tables(synth_out, nodes=40)
    h = charts.heatmap(t["steps"], t["gpu_samples"], [s["bad"]])
    assert h is not None
    rows = [r for r in h["rows"] if r["kind"] != "band"]
    assert rows[0]["label"] == s["bad"] and rows[0]["kind"] == "suspect"
    assert len(rows) == charts.TOP_N and h["n_nodes"] == 40
    # the suspect's GPU clock fell by 30 %: with SM clock as the metric it is the top row too
    assert h["metric"].startswith(("step time", "SM clock"))


def test_heatmap_marks_a_silent_gpu(synth_out) -> None:
    s, t, _ = _tables(synth_out, nodes=8)
    samples = t["gpu_samples"]
    cut = samples.get_column("ts").sort()[samples.height // 2]
    silent = samples.filter(~((pl.col("node") == s["bad"]) & (pl.col("gpu_index") == 1) & (pl.col("ts") > cut)))
    flat = t["steps"].with_columns(step_time_s=pl.lit(1.0))  # synchronous: step time cannot tell nodes apart
    h = charts.heatmap(flat, silent, [s["bad"]])
    assert h is not None and h["has_missing"] and not h["metric"].startswith("step")
    top = next(r for r in h["rows"] if r["kind"] != "band")
    assert top["label"] == s["bad"]
    assert any(c["fill"] == charts.MISSING_FILL and "silent" in c["title"] for c in top["cells"])


def test_timeline_links_cause_to_each_nodes_first_consequence(synth_out) -> None:
    s, t, doc = _tables(synth_out, nodes=6)
    tl = charts.timeline(t["events"], doc["findings"])
    assert tl is not None
    assert tl["rows"][0]["label"] == s["bad"] and tl["rows"][0]["suspect"]
    assert tl["cause"]["label"] == "F1 cause"
    assert len(tl["links"]) == 5  # one per other node
    roles = {m["role"] for m in tl["marks"]}
    assert {"cause", "consequence"} <= roles


def test_telemetry_against_the_fleet_band(synth_out) -> None:
    s, t, _ = _tables(synth_out, nodes=4)
    tel = charts.telemetry(t["gpu_samples"], s["bad"], s["bad_gpu"])
    assert tel is not None and [c["title"] for c in tel["charts"]][:1] == ["SM clock (MHz)"]
    assert tel["n_fleet"] == 4 * 8 - 1
    one = t["gpu_samples"].filter(pl.col("ts") == pl.col("ts").min())
    snap = charts.telemetry(one, s["bad"], s["bad_gpu"])
    assert snap is not None and snap["charts"] == [] and snap["table"][0]["metric"] == "SM clock (MHz)"
