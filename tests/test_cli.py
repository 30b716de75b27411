"""The CLI as a user sees it: exit codes, the exact one-line errors, stdout free of decoration."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from forensics import __version__
from forensics.cli import app
from parsers.registry import PARSERS
from tests.conftest import make_bundle

runner = CliRunner()

XID79 = (
    "[Sun Nov 29 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, "
    "GPU has fallen off the bus.\n"
)


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.stdout == f"gpu-forensics {__version__}\n"


def test_every_command_has_help() -> None:
    for cmd in ("ingest", "analyze", "report", "run", "formats", "simulate", "explain"):
        r = runner.invoke(app, [cmd, "--help"])
        assert r.exit_code == 0, cmd
        assert "Usage" in r.stdout


def test_formats_lists_every_parser() -> None:
    r = runner.invoke(app, ["formats"])
    assert r.exit_code == 0
    for p in PARSERS:
        assert p.NAME in r.stdout
        assert p.DETECTS in r.stdout


def test_missing_bundle_is_exit_2_with_one_line(tmp_path: Path) -> None:
    r = runner.invoke(app, ["ingest", str(tmp_path / "missing.tgz"), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert r.stderr.startswith(f"Error: cannot open bundle '{tmp_path / 'missing.tgz'}': no such file or directory")
    assert r.stderr.count("\n") == 1


def test_out_is_a_file(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, {"node-01/dmesg.log": XID79})
    out = tmp_path / "out"
    out.write_text("x")
    r = runner.invoke(app, ["ingest", str(bundle), "-o", str(out)])
    assert r.exit_code == 2
    assert r.stderr.startswith(f"Error: output '{out}' is a file, not a folder")
    assert r.stderr.count("\n") == 1


def test_analyze_without_ingest(tmp_path: Path) -> None:
    r = runner.invoke(app, ["analyze", str(tmp_path)])
    assert r.exit_code == 2
    assert r.stderr == (
        f"Error: '{tmp_path}' holds no ingested bundle (no manifest.json); "
        f"run 'forensics ingest BUNDLE -o {tmp_path}' first\n"
    )


def test_explain_unknown_code() -> None:
    r = runner.invoke(app, ["explain", "xid", "99999"])
    assert r.exit_code == 2
    assert r.stderr.startswith("Error: XID 99999 is not in the catalog")


def test_explain_79() -> None:
    r = runner.invoke(app, ["explain", "xid", "79"])
    assert r.exit_code == 0
    assert "fallen off the bus" in r.stdout.lower()


def test_run_refuses_existing_out_without_force(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, {"node-01/dmesg.log": XID79})
    out = tmp_path / "out"
    assert runner.invoke(app, ["run", str(bundle), "-o", str(out)]).exit_code == 0
    r = runner.invoke(app, ["run", str(bundle), "-o", str(out)])
    assert r.exit_code == 2
    assert r.stderr.startswith(f"Error: output folder '{out}' already holds a previous ingest")
    assert "--force" in r.stderr and r.stderr.count("\n") == 1
    assert runner.invoke(app, ["run", str(bundle), "-o", str(out), "--force"]).exit_code == 0


def test_run_names_the_gpu_and_fail_on(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, {"node-01/dmesg.log": XID79, "node-02/dmesg.log": "[    1.000000] Linux version 6.5\n"})
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", str(bundle), "-o", str(out), "--fail-on", "critical"])
    assert r.exit_code == 1, r.output
    doc = json.loads((out / "findings.json").read_text())
    top = doc["findings"][0]
    assert (top["node"], top["gpu_bus_id"], top["category"], top["severity"]) == (
        "node-01",
        "0000:3b:00.0",
        "gpu_hardware",
        "critical",
    )
    assert top["evidence"][0]["file"] == "node-01/dmesg.log"
    assert top["evidence"][0]["line"] == 1
    assert "\x1b[" not in r.stdout
    assert (out / "report.html").is_file() and (out / "manifest.json").is_file()
    assert any((out / "tables" / "events").glob("*.parquet"))
