"""`nccl.warn_events` of a WARN flood reads each distinct (message, pid, tid, device, source line, function)
once (`DISTINCT_WARNS`) and gives the events it gives reading every row: floods made of the real WARN lines of
the fixtures (every kind the catalogue has there), with their heads' pids, threads and devices varied, after
real init lines (the ranks and bus ids of `rank_map`), and PyTorch's quoted WARN text (no head: nulls in
the key)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nccl
from parsers.base import FileContext, lines_from_bytes
from tests.conftest import assert_same_result

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl"
WARNS = sorted(
    {
        line
        for p in FIXTURES.glob("*.log")
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
        if " NCCL WARN " in line and not line.startswith("#")
    }
)
INIT_LOG = FIXTURES / "nccl_2.19_srun_label_init_start_complete_commid_ib_error_peer.log"
INIT = [x for x in INIT_LOG.read_text().splitlines() if not x.startswith("#") and " NCCL WARN " not in x]
_HEAD = re.compile(r"^(.*?[\w.-]+):(\d+):(\d+) \[(\d+)\]")
CTX = FileContext(path="node-1/nccl.log", node="node-1")


def _varied(line: str, rng: random.Random) -> str:
    """The line with its head's pid, thread or device changed, now and then (a flood from a few processes)."""
    m = _HEAD.match(line)
    if m is None or rng.random() < 0.6:
        return line
    pid, tid, dev = int(m.group(2)), int(m.group(3)), int(m.group(4))
    pick = rng.randrange(3)
    pid, tid, dev = pid + (pick == 0), tid + (pick == 1), (dev + 1) % 8 if pick == 2 else dev
    return f"{m.group(1)}:{pid}:{tid} [{dev}]" + line[m.end() :]


def _flood(seed: int, kinds: int, rows: int) -> list[str]:
    rng = random.Random(seed)
    pool = rng.sample(WARNS, min(kinds, len(WARNS)))
    out = list(INIT) if rng.random() < 0.7 else []
    for _ in range(rows):
        out.append(_varied(rng.choice(pool), rng))
        if rng.random() < 0.3:
            out.append(rng.choice(INIT))
    return out


def _both(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], object, object]:
    """The parse with `DISTINCT_WARNS` and without; the rows `_warn_fields` read with it."""
    s = pl.Series("literal", lines, dtype=pl.String)
    read: list[int] = []
    fields = nccl._warn_fields

    def counted(w: pl.DataFrame) -> pl.DataFrame:
        read.append(w.height)
        return fields(w)

    monkeypatch.setattr(nccl, "_warn_fields", counted)
    got = nccl.parse(s, CTX)
    monkeypatch.setattr(nccl, "DISTINCT_WARNS", False)
    want = nccl.parse(s, CTX)
    monkeypatch.setattr(nccl, "DISTINCT_WARNS", True)
    return read, got, want


def test_the_fixtures_hold_warns_of_many_kinds() -> None:
    kinds = nccl.warn_events(
        nccl.headless_warns(
            pl.DataFrame({"line": range(len(WARNS)), "text": WARNS}).with_columns(
                env_rank=pl.lit(None, dtype=pl.Int32),
                env_global_rank=pl.lit(None, dtype=pl.Int32),
                pre_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
                pre_ts_quality=pl.lit(None, dtype=pl.String),
                env_host=pl.lit(None, dtype=pl.String),
            ),
            CTX,
            msg=pl.col("text").str.replace(r"^.*? NCCL WARN ", ""),
        ),
        CTX,
        None,
    ).get_column("kind")
    assert kinds.n_unique() >= 5


@given(st.integers(0, 10**6), st.integers(1, 12), st.integers(150, 900))
@settings(max_examples=25, deadline=None)
def test_a_flood_gives_the_events_of_every_row(seed: int, kinds: int, rows: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        read, got, want = _both(_flood(seed, kinds, rows), m)
    assert_same_result(got, want)  # type: ignore[arg-type]
    assert "events" in want.tables  # type: ignore[attr-defined]


def test_the_real_flood_reads_each_distinct_warning_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real IB completion-error log of the real-log bundle's flooding nodes, repeated: 2 distinct WARN
    # messages from one thread
    real_log = FIXTURES / "nccl_2.2x_net_ib_status12_recv_hca_nccltests.log"
    real = [x for x in lines_from_bytes(real_log.read_bytes()).to_list() if not x.startswith("#SOURCE")]
    flood = real * 200
    n_warn = sum(" NCCL WARN " in x for x in flood)
    read, got, want = _both(flood, monkeypatch)
    assert_same_result(got, want)  # type: ignore[arg-type]
    assert n_warn > 300 and read[0] <= 4 and read[1:] == [n_warn]
    events = got.tables["events"]  # type: ignore[attr-defined]
    assert events.filter(pl.col("kind") == "nccl_ib_error").height == n_warn


def test_distinct_warnings_are_read_row_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # more than half the rows distinct: every row read, as before
    rng = random.Random(5)
    lines = [
        f"node-1:{4000 + i}:{4100 + i} [0] misc/socket.cc:{i} NCCL WARN Net : Connection closed by peer"
        for i in range(400)
    ]
    rng.shuffle(lines)
    read, got, want = _both(lines, monkeypatch)
    assert_same_result(got, want)  # type: ignore[arg-type]
    assert read == [400, 400]
