"""nvidia_smi_dmon.parse_many: the rows of one field list in all files of a batch read as columns of bytes
(`_fixed_width`) give what `parse` of each file gives with the row regex only.

Batches of small files cut from generated monitoring loops and seeded mutations of their rows (see
test_nvsmi_long), with or without their header carried, of other nodes and first lines.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import nvidia_smi_dmon
from parsers.base import FileContext
from tests.conftest import assert_same_result
from tests.parsers.test_nvsmi_long import bytes_counted, generated, mutate, mutated, regex_only


def _files(lines: list[str], rng: random.Random) -> list[tuple[pl.Series, FileContext]]:
    items = []
    at = 0
    k = 0
    while at < len(lines):
        n = rng.choice([1, 40, 300, 700, 2000, nvidia_smi_dmon._MANY - 1])
        part = lines[at : at + n]
        if rng.random() < 0.7:
            part = nvidia_smi_dmon.carry(pl.Series(lines[:at], dtype=pl.String)) + part
        items.append(
            (
                pl.Series("line", part, dtype=pl.String),
                FileContext(path=f"n{k % 5}/dmon{k}.log", node=f"n{k % 5}", first_line=1 + 3 * (k % 4)),
            )
        )
        at += n
        k += 1
    return items


def _check(items: list[tuple[pl.Series, FileContext]], monkeypatch: pytest.MonkeyPatch) -> int:
    """parse_many (bytes where it can) == parse of each file with the regex only; rows read as bytes."""
    with bytes_counted(monkeypatch) as seen:
        many = nvidia_smi_dmon.parse_many(items)
    with regex_only(monkeypatch):
        for (lines, ctx), got in zip(items, many, strict=True):
            assert_same_result(nvidia_smi_dmon.parse(lines, ctx), got)
    return seen[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batch_bytes_equal_regex_on_small_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    base = generated(tmp_path, "dmon", 0.3, seed)
    rng = random.Random(seed)
    total = 0
    for variant in range(5):
        if variant == 0:
            lines = base
        elif variant == 1:  # (one field list: rows the bytes cannot read among those they read)
            lines = [mutate(t, rng) if rng.random() < 0.05 else t for t in base]
        else:
            lines = mutated(base, seed * 10 + variant)
        total += _check(_files(lines, rng), monkeypatch)
    assert total > 5000


def test_batch_of_fixtures_and_small_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import fixture_lines

    rng = random.Random(7)
    items = _files(generated(tmp_path, "dmon", 0.2, 9), rng)
    for k, (_name, lines) in enumerate(fixture_lines("nvidia-smi-dmon")):
        items.insert(rng.randrange(len(items) + 1), (pl.Series("line", lines, dtype=pl.String), FileContext(
            path=f"fx/{k}", node="fx"
        )))
    assert _check(items, monkeypatch)


def test_batch_of_long_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of more lines than `parse` reads a chunk's `extra` per distinct value from (`_MANY`) are read in
    a batch too (below `_BATCH_LINES`): the rows of each file as `parse` of it with the regex only gives them,
    the mutated rows too."""
    lines = generated(tmp_path, "dmon", 3.5, 5)
    rng = random.Random(5)
    lines = [mutate(x, rng) if rng.random() < 0.001 else x for x in lines]
    cut = [0, nvidia_smi_dmon._MANY + 17, 2 * nvidia_smi_dmon._MANY + 900, len(lines)]
    items = []
    for k, (a, b) in enumerate(zip(cut, cut[1:])):
        part = nvidia_smi_dmon.carry(pl.Series(lines[:a], dtype=pl.String)) + lines[a:b]
        ctx = FileContext(path=f"n{k}/dmon.log", node=f"n{k}", first_line=1 + k)
        items.append((pl.Series("line", part, dtype=pl.String), ctx))
    assert all(nvidia_smi_dmon._MANY < len(x) < nvidia_smi_dmon._BATCH_LINES for x, _ in items)
    batched = [0]
    real = nvidia_smi_dmon._parse_batch

    def counting(its: list) -> list:  # type: ignore[type-arg]
        batched[0] += len(its)
        return real(its)

    monkeypatch.setattr(nvidia_smi_dmon, "_parse_batch", counting)
    assert _check(items, monkeypatch) > 0.9 * sum(len(x) for x, _ in items)
    assert batched[0] == len(items)
