"""`bench/regex_cache.py`, what polars' cache of 32 compiled regexes costs an ingest: it records the patterns
the parsers use over a bundle's batches and counts the misses of a 32-entry LRU."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import make_bundle

ROOT = Path(__file__).resolve().parents[1]
MEGATRON = ROOT / "tests" / "fixtures" / "step-log" / "megatron_lm_2023_gpt345m_dp4_tp2pp2.log"


def test_counts_the_patterns_and_misses_of_a_batch(tmp_path: Path) -> None:
    # four training logs holding both grammars (NCCL warnings, validation rules): a batch read in two rounds,
    # each pattern compiled about once a batch, not once a file
    text = "".join(x + "\n" for x in MEGATRON.read_text().splitlines() if not x.startswith("#SOURCE")) * 60
    bundle = make_bundle(tmp_path / "bundle", {f"node-{i:03d}/train.log": text for i in range(4)})
    got = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "regex_cache.py"), str(bundle), "--name", "train.log", "--top", "3"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout
    m = re.search(r"4 files in (\d+) tasks, .* (\d+) regex calls, (\d+) distinct patterns, (\d+) misses", got)
    assert m, got
    tasks, calls, distinct, misses = (int(x) for x in m.groups())
    assert tasks == 1 and calls > distinct > 32
    assert misses < 2 * distinct  # (file by file: ~4 misses a pattern)
    assert len(got.splitlines()) == 4  # (the summary and the three costliest patterns)
