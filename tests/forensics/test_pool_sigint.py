"""A worker pool's processes are born ignoring SIGINT, wherever the pool is started (the early pool starts
during the bundle's walk): a terminal's Ctrl-C goes to the whole process group, and a worker still importing
printed a KeyboardInterrupt traceback (seen on a slow host in `test_killed_ingest_never_leaves_a_complete_
looking_output`). Only the parent handles Ctrl-C."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from forensics import ingest


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_new_pool_workers_ignore_sigint_from_birth() -> None:
    before = signal.getsignal(signal.SIGINT)
    pool = ingest._new_pool(2)
    try:
        pids = list(pool._processes)  # type: ignore[attr-defined]
        assert len(pids) == 2
        for pid in pids:
            status = Path(f"/proc/{pid}/status").read_text()
            ignored = int(next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
            assert ignored & (1 << (signal.SIGINT - 1)), pid
    finally:
        ingest._kill_pool(pool)
    assert signal.getsignal(signal.SIGINT) is before  # (the parent's own handler is back)


def test_new_pool_workers_do_not_run_the_parents_main_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's main script (the `forensics` console script, which imports the CLI: typer, rich) is not
    run again in each worker, as spawn does for a `__main__` with a file and no module name: the workers'
    tasks are functions of modules they import by name."""
    import sys
    import types

    marker = tmp_path / "ran"
    script = tmp_path / "main_script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    fake = types.ModuleType("__main__")
    fake.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake)
    pool = ingest._new_pool(1)
    try:
        assert pool.submit(eval, "1 + 1").result(timeout=300) == 2
    finally:
        ingest._kill_pool(pool)
    assert sys.modules["__main__"] is fake
    assert not marker.exists()


def test_a_script_without_a_main_guard_still_ingests_in_parallel(tmp_path: Path) -> None:
    """A script that calls `ingest` at its top level (no `if __name__ == "__main__"`) gets working workers:
    spawn no longer runs it again in each of them."""
    import json
    import os
    import subprocess
    import sys

    bundle = tmp_path / "bundle"
    for i in range(40):
        node = bundle / f"node-{i:03d}"
        node.mkdir(parents=True)
        xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
        (node / "dmesg.log").write_text("".join(f"[{t}.000000] {xid}\n" for t in range(3)))
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\nfrom pathlib import Path\nfrom forensics import ingest\n"
        "ingest._small = lambda files, size: False\n"  # (a pool even for this small bundle)
        "calls = []\nreal = ingest._run_parallel\n"
        "ingest._run_parallel = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
        f"ingest.ingest(Path({str(bundle)!r}), Path({str(tmp_path / 'out')!r}), jobs=2)\n"
        "print(len(calls))\n"
    )
    root = Path(__file__).resolve().parents[2]
    got = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip().splitlines()[-1] == "1"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {f["status"] for f in manifest["files"]} == {"ok"}
    assert "Traceback" not in got.stderr
