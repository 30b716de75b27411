"""`bench/ab.py`, the alternating comparison of two source trees' ingests: it measures the trees it is given
(not the checkout it is started from) and tells when their outputs differ."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from forensics.ingest import ingest
from tests.conftest import load_script, make_bundle

ROOT = Path(__file__).resolve().parents[1]

XID = "[{t:>6}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid={t}, GPU has fallen off the bus.\n"


def _ab() -> ModuleType:
    return load_script("bench/ab.py")


def _bundle(tmp_path: Path) -> Path:
    files = {f"node-{i:03d}/dmesg.log": "".join(XID.format(t=t) for t in range(3 + i)) for i in range(3)}
    return make_bundle(tmp_path / "bundle", files)


def test_a_tree_against_itself_runs_in_alternation_and_gives_the_same_outputs(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    got = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ab.py"), "--bundle", str(bundle), "--base", str(ROOT),
         "--pairs", "2", "--warmup", "0", "--check-tables"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    lines = got.stdout.splitlines()
    order = [ln.split()[2] for ln in lines if ln.startswith("pair ")]
    assert order == ["base", "head", "head", "base"]  # (ABBA)
    assert any(ln.startswith("wall median base") for ln in lines)
    assert any(ln.startswith("cpu  median base") for ln in lines)
    assert lines[-1] == "outputs: identical"


def test_differences_name_what_differs_between_two_outputs(tmp_path: Path) -> None:
    ab = _ab()
    bundle = _bundle(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    ingest(bundle, a)
    ingest(bundle, b)
    assert ab._differences(a, b) == []
    part = next((b / "tables" / "events").glob("*.parquet"))
    events = pl.read_parquet(part)
    events.head(events.height - 1).write_parquet(part)
    assert ab._differences(a, b) == [f"table events: rows differ ({events.height} / {events.height - 1})"]


def test_a_tree_the_runs_would_not_import_from_is_refused(tmp_path: Path) -> None:
    """A folder without the tool on PYTHONPATH: the runs would import the installed checkout instead, and
    measure it twice."""
    ab = _ab()
    (tmp_path / "empty").mkdir()
    (tmp_path / "cwd").mkdir()
    with pytest.raises(SystemExit, match="its tree is not the one measured"):
        ab._imports_from((tmp_path / "empty").resolve(), tmp_path / "cwd")


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_base_that_is_neither_a_folder_nor_a_revision_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--base no-such-rev: no such folder, nor a revision git can check"):
        _ab()._tree("no-such-rev", ROOT, tmp_path)
