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
