"""`nccl.parse_many` gives exactly `[nccl.parse(lines, ctx) for lines, ctx in items]`.

Small files of plain INFO records are read together (`parsers._nccl_small.parse_many`: the line starts and
network lines read once for the batch, each table built once and cut per file); every other file is parsed
on its own. Checked on every fixture, on simulated per-node logs, on batches mixing them with variants
(CRLF, launcher prefixes, a cut last line, empty files, unknown lines, WARN records, other nodes and paths,
chunks not starting at line 1) and on seeded random batches of fixture and simulated lines.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import _nccl_small, nccl
from parsers.base import FileContext
from tests.conftest import assert_same_result, check_many, harness_blanked, mixed_lines, simulated_files

FIX = Path(__file__).parent.parent / "fixtures"
FIXTURES = sorted(
    p
    for d in ("nccl", "torch-distributed")
    for p in (FIX / d).glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)


def _ctx(i: int, node: str = "unknown", first_line: int = 1) -> FileContext:
    return FileContext(path=f"n{i}/worker.log", node=node, first_line=first_line, year_hint=2025)


def check(items: list[tuple[pl.Series, FileContext]]) -> list:
    return check_many(nccl, items)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The NCCL logs of two simulated bundles (the two fleet styles' file shapes; faults on some nodes)."""
    runs = ((1, ("drift_nccl", "gpu_lost")), (3, ("ib_flap",)))
    out = simulated_files(tmp_path_factory.mktemp("sim"), nccl, runs)
    assert len(out) >= 8
    return out


def test_fixtures_one_by_one_and_all_together() -> None:
    items = [
        (harness_blanked(p.read_bytes()), _ctx(i, first_line=1 + 5 * (i % 2))) for i, p in enumerate(FIXTURES)
    ]
    for item in items:
        check([item, item])
    check(items)


def test_simulated_logs_take_the_batched_small_path(simulated: list[bytes]) -> None:
    items = [(harness_blanked(b), _ctx(i)) for i, b in enumerate(simulated)]
    small = [r for r in _nccl_small.parse_many(items) if r is not None]
    assert len(small) >= 4  # (the logs with an IB flap's WARNs take the vectorised path)
    check(items)


def _variants(data: bytes) -> list[bytes]:
    text = data.decode()
    lines = text.splitlines()
    return [
        data,
        text.replace("\n", "\r\n").encode(),  # CRLF
        "".join(f"{i % 4}: {line}\n" for i, line in enumerate(lines)).encode(),  # srun -l prefixes
        data[: len(data) * 2 // 3],  # cut inside a line
        b"",
        b"\n\n  \n",
        b"some unknown line\nanother one\n",
        "\n".join([*lines[:5], "h9:1:1 [0] NCCL WARN NET/IB : error 12", *lines[5:9]]).encode(),
        "\n".join(x.replace("INFO", "TRACE", 1) if i % 3 else x for i, x in enumerate(lines)).encode(),
        "\n".join(x.replace("NCCL INFO", "NCCL TRACE", 1) for x in lines[:40]).encode(),
        "\n".join(["NCCL version 2.18.5+cuda12.2", *lines[:20]]).encode(),
        "\n".join(line.replace(":", ".example.com:", 1) for line in lines[:30]).encode(),  # FQDN hosts
    ]


def test_variants_in_mixed_batches(simulated: list[bytes]) -> None:
    items = []
    for i, data in enumerate(simulated[:3]):
        for j, v in enumerate(_variants(data)):
            items.append((harness_blanked(v), _ctx(10 * i + j, node=f"n{i}", first_line=1 + (j % 3) * 100)))
    check(items)
    rng = random.Random(5)
    for _ in range(4):
        check(rng.sample(items, 7))


@pytest.mark.parametrize("seed", range(6))
def test_random_batches_of_fixture_and_simulated_lines(simulated: list[bytes], seed: int) -> None:
    rng = random.Random(seed)
    pool = [line for p in FIXTURES[::3] for line in p.read_text(errors="replace").splitlines()]
    sim = [b.decode().splitlines() for b in simulated]
    items = []
    for i in range(rng.randint(2, 9)):
        take = mixed_lines(rng, sim, pool, [1, 10, 60, 400])
        items.append((pl.Series("line", take, dtype=pl.String), _ctx(i, first_line=rng.choice([1, 1, 77]))))
    check(items)


def test_without_the_small_path(simulated: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl, "SMALL_PATH", False)
    check([(harness_blanked(b), _ctx(i)) for i, b in enumerate(simulated[:3])])


def test_json_and_safety_shortcuts_are_the_plain_ones() -> None:
    import json
    import re

    for v in ("plain", "with space", 'q"uote', "back\\slash", "tab\there", "\x7f", "é", "", "a:null,"):
        assert _nccl_small._dumps(v) == json.dumps(v)
    for text in ("abc\tdef\nghi", "abc\x00", "é", "a\rb", "\x7f", "~ !"):
        assert _nccl_small._safe(text) == (not re.search(r"[^\t\x20-\x7e]", text.replace("\n", " ")))
    rng = random.Random(1)
    values = [None, None, True, 0, -3, 2.5, "x", "0x5f", 'q"', "a\\b", "k\":null,", ":null", "null", "é"]
    values += [["a", 'b"'], ["a", "b"], []]
    keys = ["a", "bb", "c_d", "e", "nnodes"]
    for _ in range(3000):
        fields = {k: rng.choice(values) for k in rng.sample(keys, rng.randint(1, 5))}
        assert _nccl_small._json(**fields) == _nccl_small._json_nulls(fields), fields


def test_torch_prefixed_records_read_as_the_vectorised_path(simulated: list[bytes]) -> None:
    """The small path reads records after a PyTorch `[rankN]:` or `[defaultN]:` prefix (fleet styles of the
    simulator, torchrun logs) as `nccl.parse` without it does; other prefixes after that one go to the
    vectorised path."""
    from tests.parsers.test_nccl_fast import info_records, small_and_vectorised

    rng = random.Random(2)
    bad = ("[rank1]:[rank1]:", "[rank2]:3: ", "[rank5]:  ",
           "[default1]:[rank1]:", "[default0]:[1,0]<stderr>:")
    kinds = ["rank", "default"]
    sources = [info_records(p) for p in FIXTURES[::2]]
    sources += [b.decode().splitlines()[:80] for b in simulated[:3]]
    taken = 0
    for recs in sources:
        if not any(x.strip() for x in recs):
            continue
        for pref in ("[rank0]:", "[rank12]: ", "[rank3]:\t", "[default0]:", "[default7]: ", *bad, "mix"):
            if pref == "mix":
                pre = [rng.choice([f"[{rng.choice(kinds)}{rng.randrange(9)}]:", ""]) for _x in recs]
                lines = [p + x for p, x in zip(pre, recs, strict=True)]
            else:
                lines = [pref + x if x.strip() else x for x in recs]
            small, vec = small_and_vectorised(pl.Series("line", lines, dtype=pl.String), first_line=3)
            if small is not None:
                taken += 1
                assert_same_result(small, vec)
            assert small is None or pref not in bad
    assert taken >= 20


BARE = [
    "NCCL version 2.18.5+cuda12.2",
    "0: NCCL version 2.21.5+cuda12.4",
    " 12: NCCL version 2.21.5+cuda12.4",
    "[rank0]:NCCL version 2.20.5+cuda12.4",
    "NCCL version 2.19.3 compiled with CUDA 12.3",
    "NCCL version 2.18.5+cuda12.2  ",
    "NCCL version x+cuda1",
    "[rank0]:0: NCCL version 2.1+cuda1",
    "0: [rank0]:NCCL version 2.1+cuda1",
]


def test_bare_version_lines_read_as_the_vectorised_path(simulated: list[bytes]) -> None:
    """Rank 0's bare `NCCL version` line (NCCL <= 2.21; plain, after srun's or PyTorch's prefix) is read
    by the small path as `nccl.parse` without it reads it (node of the record before it); other forms go
    to the vectorised path."""
    from tests.parsers.test_nccl_fast import info_records, small_and_vectorised

    sources = [info_records(p) for p in FIXTURES[::4]]
    sources += [b.decode().splitlines()[:40] for b in simulated[:2]]
    taken = 0
    for k, recs in enumerate(sources):
        if not any(x.strip() for x in recs):
            continue
        for pos in (k % 2, len(recs) // (2 + k % 2)):
            for bare in BARE:
                lines = [*recs[:pos], bare, *recs[pos:]]
                small, vec = small_and_vectorised(pl.Series("line", lines, dtype=pl.String), first_line=2)
                if small is not None:
                    taken += 1
                    assert_same_result(small, vec)
    assert taken >= 30
