"""`kernel_log.parse_many` gives exactly `[kernel_log.parse(lines, ctx) for lines, ctx in items]`.

Small files of the same style plan are stamped and read as one frame (line numbers moved apart per file),
then cut per file; files or groups that need per-file state beyond row-by-row rules are parsed one by one.
Checked on every fixture, on simulated dmesg files, on batches mixing them with variants (CRLF, prefixed and
unknown lines, a cut last line, empty files, other nodes, paths and first lines, styles that infer a year or
inherit clocks) and on seeded random batches of fixture and simulated lines.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import kernel_log
from parsers.base import FileContext
from tests.conftest import check_many, harness_blanked, mixed_lines, simulated_files

FIX = Path(__file__).parent.parent / "fixtures"
FIXTURES = sorted(
    p
    for p in (FIX / "kernel-log").glob("*")
    if p.is_file() and not p.name.endswith((".jsonl", ".golden", ".json")) and "golden" not in p.name
)


def _ctx(i: int, node: str = "unknown", first_line: int = 1) -> FileContext:
    return FileContext(path=f"n{i}/dmesg.log", node=node, first_line=first_line, year_hint=2025)


def check(items: list[tuple[pl.Series, FileContext]]) -> list:
    return check_many(kernel_log, items)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The kernel logs of two simulated bundles (the two fleet styles' dmesg forms; an XID on one node)."""
    runs = ((1, ("gpu_lost", "pcie_degraded")), (3, ("ecc_dbe", "nvlink")))
    out = simulated_files(tmp_path_factory.mktemp("sim"), kernel_log, runs)
    assert len(out) >= 8
    return out


def test_fixtures_one_by_one_and_all_together() -> None:
    items = [
        (harness_blanked(p.read_bytes()), _ctx(i, first_line=1 + 5 * (i % 2))) for i, p in enumerate(FIXTURES)
    ]
    for item in items:
        check([item, item])
    check(items)


@pytest.mark.parametrize("small_rows", [1000, 100])
def test_simulated_logs_are_read_in_groups(
    simulated: list[bytes], monkeypatch: pytest.MonkeyPatch, small_rows: int
) -> None:
    """(`small_rows` 100: a file alone is read by the small paths' Python branches, a group of them by the
    vectorised ones.)"""
    from parsers import _kernel_events as kev

    monkeypatch.setattr(kev, "SMALL_ROWS", small_rows)
    items = [(harness_blanked(b), _ctx(i, node=f"n{i % 3}")) for i, b in enumerate(simulated)]
    calls = []
    group = kernel_log._parse_group

    def spy(files, plan):  # noqa: ANN001, ANN202
        got = group(files, plan)
        calls.append((len(files), isinstance(got, list)))
        return got

    monkeypatch.setattr(kernel_log, "_parse_group", spy)
    check(items)
    assert sum(n for n, ok in calls if ok) == len(items)


def _variants(data: bytes) -> list[bytes]:
    text = data.decode()
    lines = text.splitlines()
    return [
        data,
        text.replace("\n", "\r\n").encode(),  # CRLF
        "".join(f"{line}\n" if i % 5 else f"garbage {i}\n" for i, line in enumerate(lines)).encode(),
        data[: len(data) * 2 // 3],  # cut inside a line
        b"",
        b"\n\n  \n",
        b"some unknown line\nanother one\n",
        "\n".join([*lines[:5], "  continued line", *lines[5:9]]).encode(),  # an inherited clock
        b"Jan 12 10:00:01 host1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n",
        b"[   12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n[    1.0] reboot\n",
        "\n".join(lines[:3]).encode(),
        ("\n".join(lines[:4]) + "\n2025-03-23T19:19:26,99").encode(),  # a cut stamp: partial
    ]


@pytest.mark.parametrize("small_rows", [1000, 100])
def test_variants_in_mixed_batches(
    simulated: list[bytes], monkeypatch: pytest.MonkeyPatch, small_rows: int
) -> None:
    from parsers import _kernel_events as kev

    monkeypatch.setattr(kev, "SMALL_ROWS", small_rows)
    items = []
    for i, data in enumerate(simulated[:4]):
        for j, v in enumerate(_variants(data)):
            items.append((harness_blanked(v), _ctx(20 * i + j, node=f"n{i}", first_line=1 + (j % 3) * 100)))
    check(items)
    rng = random.Random(5)
    for _ in range(4):
        check(rng.sample(items, 9))


@pytest.mark.parametrize("seed", range(6))
def test_random_batches_of_fixture_and_simulated_lines(simulated: list[bytes], seed: int) -> None:
    rng = random.Random(seed)
    pool = [line for p in FIXTURES[::2] for line in p.read_text(errors="replace").splitlines()]
    sim = [b.decode().splitlines() for b in simulated]
    items = []
    for i in range(rng.randint(2, 12)):
        take = mixed_lines(rng, sim, pool, [1, 5, 30, 200])
        node = rng.choice(["a", "b", "unknown"])
        ctx = _ctx(i, node=node, first_line=rng.choice([1, 1, 77]))
        items.append((pl.Series("line", take, dtype=pl.String), ctx))
    check(items)


RAW = [
    "[    0.000000] Linux version 5.15.0-119-generic (buildd@lcy02) #129-Ubuntu SMP",
    "[    1.250000] rtc_cmos 00:02: setting system clock to 2025-03-02T14:29:44 UTC (1740925784)",
    "[    2.000000] mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
    "[   12.500000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
    "  continued message of the line before",
    "[    0.500000] Linux version 5.15.0-119-generic (buildd@lcy02) #129-Ubuntu SMP",
    "[    1.750000] rtc_cmos 00:02: setting system clock to 2025-03-03T10:00:00 UTC (1740996000)",
    "[    3.000000] mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
]
KMSG = [
    "5,0,0,-;Linux version 5.15.0-119-generic (buildd@lcy02) #129-Ubuntu SMP",
    "6,1,1250000,-;rtc_cmos 00:02: setting system clock to 2025-03-02T14:29:44 UTC (1740925784)",
    "6,1,1250000,-;rtc_cmos 00:02: setting system clock to 2025-03-02T14:29:44 UTC (1740925784)",
    "4,2,12500000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
]
JOURNAL = [
    "2025-03-02T14:29:44+0000 gpu-node-7 kernel: mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
    "2025-03-02T14:29:45+0000 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off",
    "2025-03-02T14:29:46+0000 gpu-node-8.example.com kernel: [   12.5] Linux version 5.15.0-119-generic #1",
]


@pytest.mark.parametrize("small_rows", [1000, 3])
def test_per_file_state_in_groups(monkeypatch: pytest.MonkeyPatch, small_rows: int) -> None:
    """Boot segments, the first RTC boot time, /dev/kmsg duplicates, inherited clocks and hosts stay per file
    (also through the vectorised paths: `small_rows` 3)."""
    from parsers import _kernel_events as kev

    monkeypatch.setattr(kev, "SMALL_ROWS", small_rows)
    variants = [RAW, RAW[3:], RAW[4:], KMSG, KMSG[1:], JOURNAL, JOURNAL[::-1], [JOURNAL[0], "  x"], RAW[:2]]
    n = len(variants) * 2
    ctxs = [_ctx(i, node="same" if i % 2 else f"n{i}", first_line=i % 3 + 1) for i in range(n)]
    items = [(pl.Series("line", v, dtype=pl.String), ctx) for v, ctx in zip(variants * 2, ctxs, strict=True)]
    check(items)
    rng = random.Random(small_rows)
    for _ in range(3):
        check(rng.sample(items, 6))


def test_head_counts_are_what_plan_counts(simulated: list[bytes]) -> None:
    """`_head_counts` (one polars query for a batch) gives the plan `_plan` works out with Python's `re`."""
    odd = ["x  12 10:00:01 h kernel: a", "<6>[ 1.5] b", "Jan  1 00:00:00 h k[1]: \t c", " ", ""]
    files = [harness_blanked(b) for b in simulated] + [harness_blanked(p.read_bytes()) for p in FIXTURES]
    files.append(pl.Series("line", odd, dtype=pl.String))
    texts = {}
    for k, lines in enumerate(files):
        got = kernel_log._groupable(lines)
        if got is not None and got[1]:
            texts[k] = got[0]
    assert len(texts) > 30
    counts = kernel_log._head_counts(list(texts.items()))
    for k, t in texts.items():
        assert kernel_log._plan(t[:300], counts.get(k)) == kernel_log._plan(t[:300])


def test_head_plan_is_plan(simulated: list[bytes]) -> None:
    """`_head_plan` (the head counted by polars where it is plain ASCII) is `_plan` for every head, the long
    files' (read alone) and those with control characters, colour codes, pdsh prefixes or nulls among them;
    and `parse_many` hands a long file the plan `_stamp` would make."""
    pdsh = [f"node-{i}: [ {i}.5] NVRM: Xid (PCI:0000:3b:00): 79" for i in range(9)]
    colour = ["\x1b[32m[    1.000000] \x1b[0mhello", "[    2.000000] x"] * 3
    odd = [pdsh, colour, ["[ 1.0] a\rb", "[ 2.0] c"], ["[ 1.0] a", None, "<6>[ 2.0] b"], ["", " "], []]
    heads = [harness_blanked(b).head(300).to_list() for b in simulated]
    heads += [harness_blanked(p.read_bytes()).head(300).to_list() for p in FIXTURES]
    heads += odd
    assert sum(kernel_log._plain_ascii(h) for h in heads) > 30
    assert not any(kernel_log._plain_ascii(h) for h in odd[1:4])
    for head in heads:
        assert kernel_log._head_plan(head) == kernel_log._plan(head)
    assert kernel_log._head_plan(pdsh)[0] and kernel_log._head_plan(colour)[1]
    seen: list[object] = []
    real = kernel_log._parse

    def spy(lines: pl.Series, ctx: FileContext, plan: object = None) -> object:
        seen.append(plan)
        return real(lines, ctx, plan)  # type: ignore[arg-type]

    long = pl.Series("line", [f"[{i:6d}.000000] line {i}" for i in range(kernel_log.FILE_ROWS + 1)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernel_log, "_parse", spy)
        kernel_log.parse_many([(long, _ctx(0)), (long.head(10), _ctx(1))])
    assert seen == [kernel_log._plan(long.head(300).to_list()), kernel_log._plan(long.head(10).to_list())]


@pytest.mark.parametrize(
    "style", ["dmesg_raw", "dmesg_iso", "journal_iso", "rfc5424", "dmesg_ctime", "syslog", "journal_precise"]
)
def test_longer_files_in_groups(tmp_path: Path, style: str) -> None:
    """Files of a few hundred to a few thousand lines (read alone by the small paths' Python branches or the
    vectorised ones) in groups: `bench/big_kernel.py` logs, events of every family included."""
    from bench import big_kernel

    items = []
    for i, mb in enumerate((0.03, 0.15, 0.3, 0.05)):
        path = tmp_path / f"{i}.log"
        big_kernel.write(path, mb, seed=i, style=style)
        items.append((harness_blanked(path.read_bytes()), _ctx(i, node=f"n{i % 2}")))
    assert max(len(lines) for lines, _c in items) > 1000
    check(items)


SYSLOG = [
    "Dec 31 23:59:58 node-a kernel: [ 100.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off",
    "Jan  1 00:00:01 node-a kernel: mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
    "Jan  1 00:00:02 node-a kernel: [   1.0] Linux version 5.15.0-119-generic (b) #1",
]


@pytest.mark.parametrize("collected", [None, "2026-01-02"])
def test_syslog_years_and_notes_per_file(collected: str | None) -> None:
    """Each file of a group infers its syslog years (month wraps) and gets its notes from its own lines."""
    from datetime import UTC, datetime

    at = None if collected is None else datetime.fromisoformat(collected).replace(tzinfo=UTC)
    variants = [SYSLOG, SYSLOG[1:], SYSLOG[:1], [s.replace("Jan", "Foo") for s in SYSLOG[1:]], SYSLOG[::-1]]
    ctxs = [FileContext(path=f"{i}/kern.log", node="n", year_hint=2026, collected_at=at) for i in range(10)]
    items = [(pl.Series("line", v, dtype=pl.String), ctx) for v, ctx in zip(variants * 2, ctxs, strict=True)]
    results = check(items)
    wrap = "syslog months wrap 1 time(s) in the file: year advanced at each wrap"
    assert wrap in results[0].notes and wrap not in results[1].notes


def test_a_group_that_fails_is_read_file_by_file(
    simulated: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    stamp = kernel_log.stamp

    def failing(frame, ctx, plan=None, bounds=None, file_notes=None):  # noqa: ANN001, ANN202
        if bounds is not None:
            raise ValueError("group")
        return stamp(frame, ctx, plan)

    monkeypatch.setattr(kernel_log, "stamp", failing)
    check([(harness_blanked(b), _ctx(i)) for i, b in enumerate(simulated[:4])])
