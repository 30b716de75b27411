"""Round 13 (b): the nccl_tests and nvidia_smi_csv sniffers and registry.detect against their previous
versions (kept verbatim in `_sniff13b_ref`) on the fixtures' heads and on generated heads: cut at random
bytes, lines shuffled and duplicated, the literals the new shortcuts look at inserted at random places, CRLF,
vertical tabs, non-ASCII; detect also with fake parsers (ties, NaN, out-of-range and raising sniffers)."""

from __future__ import annotations

import math
import random
import types
from pathlib import Path

import pytest

from parsers import nccl_tests, nvidia_smi_csv, registry
from tests.parsers import _sniff13b_ref as ref
from tests.parsers._heads import FILES, POOL, check, fixture_heads

HEADS = fixture_heads()

INSERTS = [
    # nccl_tests row hints and rows
    "half", "double", "float", "fp8", "int8", " half  sum ", "  1024  256  half  sum  -1 ",
    "  8  2  double  none ",
    "# nThread 1 nGpus 8", "#       size         count      type   redop    root", "r1:1:2 [0] NCCL INFO x",
    "#SOURCE x", "Rank  0 Group  0 Pid  1 on host device  0 [", " 4096 1024 float sum -1 ",
    # line breaks
    "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\r\n", "\n\n", "# comment",
    # nvidia_smi_csv rows and headers
    "2024/01/02 03:04:05.678, ", ", GPU-0123abcd-", ", 00000000:1A:00.0", "1234/", "timestamp, index, name",
    "node01: ", "10.0.0.1: ", ",,", ", ", "1,2,3", "é", "\u00e9, ", "ü/",
]  # fmt: skip

SNIFFERS = [
    (nccl_tests.sniff, ref.nccl_tests_sniff),
    (nvidia_smi_csv.sniff, ref.nvidia_smi_csv_sniff),
]


def _generated(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lines = rng.sample(POOL, rng.randint(1, 120))
        if rng.random() < 0.3:
            lines += rng.choices(lines, k=rng.randint(1, 60))  # duplicated lines
            rng.shuffle(lines)
        for _k in range(rng.randint(0, 6)):
            i = rng.randrange(len(lines))
            ln = lines[i]
            j = rng.randint(0, len(ln))
            lit = rng.choice(INSERTS)
            lines[i] = ln[:j] + lit + ln[j:] if rng.random() < 0.7 else lit + ln
        if rng.random() < 0.2:  # long lines: few line ends in the first 8 KiB
            lines = [ln * rng.randint(1, 40) for ln in lines]
        sep = rng.choice(["\n", "\n", "\r\n", "\x0b", "\n\n"])
        data = sep.join(lines).encode("utf-8", "replace")
        if rng.random() < 0.5:
            data = data[: rng.randint(0, len(data))]  # cut at a random byte (maybe inside a character)
        out.append(data[:16384])
    return out


@pytest.mark.parametrize(("new", "old"), SNIFFERS, ids=lambda f: getattr(f, "__module__", "x"))
def test_fixture_heads(new, old) -> None:
    check(new, old, HEADS)


@pytest.mark.parametrize(("new", "old"), SNIFFERS, ids=lambda f: getattr(f, "__module__", "x"))
def test_generated_heads(new, old) -> None:
    check(new, old, _generated(13, 500))


NAMES = [
    "x.log", "worker.log", "train_rank0.log", "nvidia-smi-q.start.txt", "gpu.csv", "r1/nvidia-smi-dmon.log",
    "a/b/dcgm-diag.json", "ibstat.end.txt", "perfquery.txt", "NCCL_TESTS.OUT", "dmesg.log", "x.pkl",
]  # fmt: skip


def test_detect_real_parsers() -> None:
    """`registry.detect` gives the same Detection as before on every fixture head, under many names."""
    rng = random.Random(7)
    heads = fixture_heads()[::2] + _generated(14, 150)
    names = NAMES + [str(p.relative_to(p.parents[1])) for p in FILES]
    cases = [(h, name) for h in heads for name in rng.sample(names, 3)]
    bad = [(h[:100], n, o, d) for h, n in cases if (o := ref.detect(h, n)) != (d := registry.detect(h, n))]
    assert not bad, bad[:3]


def _fake(name: str, score: object, priority: int, hints: object) -> types.ModuleType:
    m = types.ModuleType(name)
    m.NAME = name
    m.PRIORITY = priority
    m.FILENAME_HINTS = hints

    def sniff(head: bytes, fname: str) -> float:
        if isinstance(score, Exception):
            raise score
        return score(head) if callable(score) else score  # type: ignore[return-value]

    m.sniff = sniff
    return m


def test_detect_ties_clamps_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ties (PRIORITY, then table order), NaN, out-of-range and raising sniffers, the name bonus and its
    clamp, hints as a list and hints replaced between calls: the same Detection as the old detect."""
    rng = random.Random(8)
    scores = [0.0, 0.0, 0.2, 0.3, 0.5, 0.5, 0.9, 0.95, 1.0, 1.5, -1.0, math.nan, "0.6", ValueError(), None]
    hint_sets = [("*.log",), ("worker*", "*.txt"), ["*.csv"], (), ("*",), ("train_*",)]
    for _ in range(300):
        parsers = tuple(
            _fake(f"p{i}", rng.choice(scores), rng.choice([0, 5, 5, 10]), rng.choice(hint_sets))
            for i in range(rng.randint(2, 7))
        )
        monkeypatch.setattr(registry, "PARSERS", parsers)
        monkeypatch.setattr(ref, "PARSERS", parsers)
        for name in rng.sample(NAMES, 4):
            assert ref.detect(b"head", name) == registry.detect(b"head", name)
        p = rng.choice(parsers)
        p.FILENAME_HINTS = rng.choice(hint_sets)  # (replaced: the compiled hints follow)
        for name in NAMES:
            assert ref.name_matches(p, name) == registry.name_matches(p, name)
            assert ref.detect(b"head", name) == registry.detect(b"head", name)


def test_name_matches_real_hints() -> None:
    names = NAMES + [p.name for p in FILES] + [Path(n).name.upper() for n in NAMES]
    for p in registry.PARSERS:
        for name in names:
            assert ref.name_matches(p, name) == registry.name_matches(p, name), (p.NAME, name)
