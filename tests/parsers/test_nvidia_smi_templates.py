"""`nvidia_smi.parse_many`'s shape templates (a file of a shape seen before is read into the kept walk of that
shape, not walked): every result equals per-file `parse`, for files of one shape with their values changed
(numbers, N/A, blank or whitespace values, error markers, failure literals, tabs, the banner literal, the
separators Python strips and polars does not, non-ASCII), pdsh banners, CRLF, and seeded random mutations.
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import nvidia_smi
from parsers.base import FileContext
from tests.conftest import check_many, fixture_lines

FIXTURES = fixture_lines("nvidia-smi", raw=False)
NAMES = [name for name, _ in FIXTURES]

VALUES = (
    "0", "1", "17", "523.73 W", "N/A", "[N/A]", "", " ", "\r", "Yes", "No", "Active", "Not Active", "Pending",
    "Unknown Error", "[GPU requires reset]", "ERR!", "GPU is lost", "Unable to determine the device handle",
    "a\tb", "NVSMI LOG", "x\x1c", "\x1fy", "é 5 C", "P0", "P8", "16x", "8x", "Enabled", "Disabled", "a: b",
    "\x01", "Not Supported", "\xa0 7 \u3000", "\u2003", "5\x85", "\u200b 3",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_templates() -> None:
    nvidia_smi._CANDIDATES.clear()


def items_of(files: list[list[str | None]], first_line: int = 1) -> list[tuple[pl.Series, FileContext]]:
    return [
        (
            pl.Series("line", lines, dtype=pl.String),
            FileContext(path=f"d/f{k}.txt", node=f"n{k % 3}", year_hint=2025, first_line=first_line),
        )
        for k, lines in enumerate(files)
    ]


def mutate(lines: list[str], rng: random.Random, n: int) -> list[str | None]:
    """`n` lines of `lines` with the value behind their first ': ' replaced (the shape kept, mostly)."""
    out: list[str | None] = list(lines)
    kv = [i for i, t in enumerate(lines) if ": " in t]
    for i in rng.sample(kv, min(n, len(kv))):
        head, _sep, _rest = lines[i].partition(": ")
        out[i] = f"{head}: {rng.choice(VALUES)}"
    return out


def used_templates() -> int:
    return sum(1 for t in nvidia_smi._CANDIDATES.values() if t.valid)


@pytest.mark.parametrize("name", NAMES)
def test_same_file_again_takes_a_template(name: str) -> None:
    lines = dict(FIXTURES)[name]
    check_many(nvidia_smi, items_of([lines, lines, lines]))
    check_many(nvidia_smi, items_of([lines]))  # (a template kept across batches)


def test_common_dump_is_templated() -> None:
    lines = dict(FIXTURES)["q_h100_535_hw_power_brake_active.txt"]
    check_many(nvidia_smi, items_of([lines, lines]))
    assert used_templates() == 1


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(3))
def test_values_changed_under_a_template(name: str, seed: int) -> None:
    rng = random.Random(f"{name}-{seed}")
    lines = dict(FIXTURES)[name]
    files = [lines, lines] + [mutate(lines, rng, n) for n in (1, 1, 2, 5, 40)]
    check_many(nvidia_smi, items_of(files))
    check_many(nvidia_smi, items_of(files[::-1]))


@pytest.mark.parametrize("name", NAMES)
def test_each_value_in_each_place(name: str) -> None:
    """Every kind of value once in a batch of files of the template's shape (one line changed each)."""
    rng = random.Random(name)
    lines = dict(FIXTURES)[name]
    kv = [i for i, t in enumerate(lines) if ": " in t]
    files: list[list[str | None]] = [lines, lines]
    for v in VALUES:
        for i in rng.sample(kv, min(4, len(kv))):
            f: list[str | None] = list(lines)
            f[i] = lines[i].partition(": ")[0] + ": " + v
            files.append(f)
    for k in range(0, len(files), 48):
        check_many(nvidia_smi, items_of(files[k : k + 48]))


def test_pdsh_banner_and_crlf_and_blank_lines() -> None:
    lines = dict(FIXTURES)["q_h100_535_hw_power_brake_active.txt"]
    banner = next(i for i, t in enumerate(lines) if "NVSMI LOG" in t)
    pdsh = list(lines)
    pdsh[banner] = "node01: " + lines[banner]
    crlf = [t + "\r" for t in lines]
    spaced = [t + "  " for t in lines]
    nulls: list[str | None] = [None if i % 5 == 2 else t for i, t in enumerate(lines)]
    blanks = ["   " if t == "" else t for t in lines]
    files = [lines, lines, pdsh, pdsh, crlf, crlf, spaced, spaced, nulls, nulls, blanks, blanks]
    files += [[], [""], [], [""]]
    check_many(nvidia_smi, items_of(files))
    check_many(nvidia_smi, items_of(files, first_line=5))


@pytest.mark.parametrize("seed", range(4))
def test_random_line_mixes(seed: int) -> None:
    """Files of random fixture lines, each sent twice or more (templates of odd shapes)."""
    rng = random.Random(seed)
    pool = [t for _, lines in FIXTURES for t in lines]
    files: list[list[str | None]] = []
    for _ in range(6):
        f: list[str | None] = [rng.choice(pool) for _ in range(rng.randrange(1, 300))]
        files += [f, f, mutate([t or "" for t in f], rng, 3)]
    rng.shuffle(files)
    check_many(nvidia_smi, items_of(files))


def test_heads_that_could_read_a_banner_value() -> None:
    """A key starting with '=' or with a host name and ':' (a banner literal in its value would make the line
    a banner, or the file a pdsh capture): such files are walked, whatever their values."""
    lines = dict(FIXTURES)["q_h100_535_hw_power_brake_active.txt"]
    kv = [i for i, t in enumerate(lines) if ": " in t]
    files: list[list[str | None]] = []
    for head in ("==== x", "  =y", "node01", "10.0.0.1", "gpu7node"):
        for value in ("1", "NVSMI LOG", "==NVSMI LOG==", " NVSMI LOG x"):
            for i in kv[:3] + kv[-2:]:
                f: list[str | None] = list(lines)
                f[i] = f"{head}: {value}"
                files.append(f)
    banner = next(i for i, t in enumerate(lines) if "NVSMI LOG" in t)
    prefixed = [f"node01: {t}" if t else t for i, t in enumerate(lines) if i != banner]
    files += [[*prefixed, f"node01: {v}"] for v in ("x", "NVSMI LOG")]  # (the banner gone, hosts' lines)
    for k in range(0, len(files), 40):
        check_many(nvidia_smi, items_of(files[k : k + 40]))


def test_shapes_of_one_length_alternating() -> None:
    """Files of one length and two shapes (a key renamed, a value moved to its own line), in and across
    batches: each checked against the last template of its length, walked when it is not of its shape."""
    lines = dict(FIXTURES)["q_rtx4090_535_idle_pcie_gen1.txt"]
    kv = [i for i, t in enumerate(lines) if ": " in t]
    renamed: list[str | None] = list(lines)
    renamed[kv[5]] = lines[kv[5]].replace(":", " X:", 1)
    split: list[str | None] = list(lines)
    split[kv[7]] = lines[kv[7]].partition(": ")[0]
    rng = random.Random(5)
    files = [rng.choice((lines, renamed, split)) for _ in range(40)]
    for k in range(0, len(files), 7):
        check_many(nvidia_smi, items_of(files[k : k + 7]))


def test_long_files_are_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = dict(FIXTURES)["q_h100_535_hw_power_brake_active.txt"]
    monkeypatch.setattr(nvidia_smi, "_TEMPLATE_LINES_MAX", len(lines) - 1)
    check_many(nvidia_smi, items_of([lines, lines, lines[:-2], lines[:-2]]))
    assert used_templates() == 1  # (the shorter file's)


@pytest.mark.parametrize("seed", range(3))
def test_probes_and_templates_over_many_batches(seed: int) -> None:
    """Several fixtures, each in a few shapes (a key renamed, a line indented, CRLF), their values mutated,
    sent in small random batches: probes, templates made from them, replaced, and walks all agree with
    `parse`."""
    rng = random.Random(100 + seed)
    names = rng.sample(NAMES, 4)
    shapes: list[list[str]] = []
    for name in names:
        lines = dict(FIXTURES)[name]
        kv = [i for i, t in enumerate(lines) if ": " in t]
        renamed = list(lines)
        i = rng.choice(kv)
        renamed[i] = "  " + lines[i]
        shapes += [lines, renamed, [t + "\r" for t in lines]]
    files = [mutate(rng.choice(shapes), rng, rng.choice((0, 1, 3, 10))) for _ in range(60)]
    k = 0
    while k < len(files):
        n = rng.randint(1, 9)
        check_many(nvidia_smi, items_of(files[k : k + n]))
        k += n
