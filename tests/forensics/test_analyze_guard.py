"""A failing analysis step costs its own evidence, not the analysis (`forensics.analyze._Guard`): the other
steps' findings are written, the failed step is named in `coverage.analysis_errors`, and the CLI and the
report say the analysis is incomplete instead of calling the job healthy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from polars.exceptions import PanicException
from typer.testing import CliRunner

from forensics import analyze as an
from forensics import drift, telemetry
from forensics.cli import app
from forensics.ingest import ingest
from reports.render import write_report

SAMPLES = Path(__file__).parent.parent.parent / "samples"


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("xid79") / "out"
    ingest(SAMPLES / "incident-xid79", out, jobs=1)
    return out


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("healthy") / "out"
    ingest(SAMPLES / "healthy", out, jobs=1)
    return out


def _boom(*_args: object, **_kwargs: object) -> None:
    raise PanicException("assertion failed: i < self.len()")


@pytest.fixture
def lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(an.STRICT_ENV, raising=False)


def test_a_panic_in_one_step_keeps_the_other_findings(incident: Path, lenient: None, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = an.analyze(incident)
    monkeypatch.setattr(drift, "candidates", _boom)
    doc = an.analyze(incident)
    assert doc["coverage"]["analysis_errors"] == [
        {"step": "configuration drift", "error": "PanicException: assertion failed: i < self.len()"}
    ]
    assert doc["findings"][0]["title"] == whole["findings"][0]["title"]
    assert "Xid 79" in doc["findings"][0]["title"] or "79" in doc["findings"][0]["title"]
    assert json.loads((incident / "findings.json").read_text())["coverage"]["analysis_errors"]
    html = write_report(incident).read_text()
    assert "Analysis steps that failed" in html and "configuration drift" in html
    assert "The analysis is incomplete" in html


def test_strict_lets_the_failure_through(incident: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(an.STRICT_ENV, "1")
    monkeypatch.setattr(drift, "candidates", _boom)
    with pytest.raises(PanicException):
        an.analyze(incident)


def test_a_healthy_looking_bundle_with_a_failed_step_is_not_called_healthy(
    healthy: Path, lenient: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert an.analyze(healthy)["coverage"]["analysis_errors"] == []
    assert "No fault found." in write_report(healthy).read_text()
    monkeypatch.setattr(telemetry, "candidates", _boom)
    doc = an.analyze(healthy)
    assert [e["step"] for e in doc["coverage"]["analysis_errors"]] == ["telemetry"]
    html = write_report(healthy).read_text()
    assert "the analysis is incomplete" in html and "No fault found." not in html
    got = CliRunner().invoke(app, ["analyze", str(healthy)])
    assert got.exit_code == 0
    assert "Warning: the analysis is incomplete: 1 step(s) failed" in got.output
    assert "telemetry: PanicException" in got.output
    assert "by the steps that ran" in got.output


def test_every_step_has_a_default_that_the_rest_accepts(incident: Path, lenient: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each guarded step failing alone: the analysis completes and names just that step."""
    from forensics import clocks, network, stragglers, timing

    targets = [
        (an, "resolve_rank_nodes"), (clocks, "estimate_offsets"), (clocks, "correct"), (timing, "timeline"),
        (an, "candidates_from_events"), (telemetry, "hot_clock_candidates"), (network, "counter_growth"),
        (network, "peer_candidates"), (an, "merge"), (an, "_slow_nodes"), (an, "attribute_hang"),
        (an, "attribute_slowdowns"), (an, "attribute_stragglers"), (telemetry, "outliers"),
        (an, "rank_candidates"), (an, "gpu_identity"),
    ]
    for mod, name in targets:
        with monkeypatch.context() as m:
            m.setattr(mod, name, _boom)
            doc = an.analyze(incident)
        steps = {e["step"] for e in doc["coverage"]["analysis_errors"]}
        assert steps, name
        assert all("PanicException" in e["error"] for e in doc["coverage"]["analysis_errors"]), name
