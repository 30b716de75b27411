"""`parse_many` of the nvidia-smi parsers equals per-file `parse` (every table, dtype and accounting field).

Batches are built from the fixtures of each format, variants of them (CRLF kept in the lines, pdsh-style
prefixes, a cut last line, an empty file, a file of unknown lines, other nodes and paths) and seeded random
mixes of fixture lines.
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import dcgm, nvidia_smi, nvidia_smi_csv, nvidia_smi_dmon, nvidia_smi_table, nvidia_smi_xml
from parsers.base import FileContext, ParseResult
from tests.conftest import assert_same_result, fixture_lines
from tests.conftest import variants as shared_variants

ALL = (nvidia_smi, nvidia_smi_dmon, nvidia_smi_xml, nvidia_smi_csv, nvidia_smi_table, dcgm)
MODULES = {m.NAME: m for m in ALL if hasattr(m, "parse_many")}




def variants(name: str, lines: list[str]) -> dict[str, list[str | None]]:
    """Other shapes of one fixture's lines."""
    return {
        **shared_variants(lines),
        "tabs": [t.replace("    ", "\t") for t in lines],
        "colons": [t + ": x" if i % 2 else t for i, t in enumerate(lines)],
        "some prefixed": [f"node7: {t}" if i % 3 == 0 else t for i, t in enumerate(lines)],
    }




def check(module, files: list[tuple[str, str, list[str]]], first_lines: bool = False) -> None:  # noqa: ANN001
    """parse_many over (path, node, lines) files == parse of each (`first_lines`: the files' lines numbered
    from other lines than 1, their columns named differently)."""
    items = [
        (
            pl.Series(f"l{k}" if first_lines else "line", lines, dtype=pl.String),
            FileContext(path=path, node=node, year_hint=2025, first_line=1 + 7 * k if first_lines else 1),
        )
        for k, (path, node, lines) in enumerate(files)
    ]
    many = module.parse_many(items)
    assert len(many) == len(items)
    for (lines, ctx), got in zip(items, many, strict=True):
        assert_same_result(module.parse(lines, ctx), got)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_fixture_alone_and_together(name: str) -> None:
    module = MODULES[name]
    fx = fixture_lines(name, raw=False)
    for fname, lines in fx:
        check(module, [(f"{name}/{fname}", "n1", lines)])
    check(module, [(f"{name}/{fname}", f"n{i % 3}", lines) for i, (fname, lines) in enumerate(fx)])
    # the same file twice, same node and path: rows must not merge across files
    check(module, [(f"{name}/{fname}", "n1", lines) for fname, lines in fx for _ in range(2)])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_variants_mixed_in_batches(name: str) -> None:
    module = MODULES[name]
    files = [
        (f"{fname}:{v}", f"node-{i % 4}", vl)
        for i, (fname, lines) in enumerate(fixture_lines(name, raw=False))
        for v, vl in variants(name, lines).items()
    ]
    check(module, files)
    check(module, files[::-1], first_lines=True)


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("seed", range(6))
def test_random_batches_of_fixture_lines(name: str, seed: int) -> None:
    module = MODULES[name]
    rng = random.Random(seed)
    fx = fixture_lines(name, raw=False)
    pool = [t for _, lines in fx for t in lines]
    files = []
    for k in range(rng.randint(2, 9)):
        how = rng.random()
        if how < 0.4:  # a whole fixture, maybe cut
            lines = rng.choice(fx)[1]
            if rng.random() < 0.5:
                a = rng.randrange(len(lines) + 1)
                lines = lines[a : a + rng.randint(0, len(lines))]
        elif how < 0.7:  # two fixtures' slices one after the other
            a, b = rng.choice(fx)[1], rng.choice(fx)[1]
            lines = a[: rng.randint(0, len(a))] + b[rng.randint(0, len(b)) :]
        else:  # random lines of the format
            lines = [rng.choice(pool) for _ in range(rng.randint(0, 60))]
        files.append((f"f{k % 3}.txt", rng.choice(["a", "b", "c"]), lines))
    check(module, files)


def tied_dmon(rows: int) -> list[str]:
    """dmon rows of one GPU where every other row raises both an ECC and a gpu_error event (same line)."""
    head = ["# gpu    pwr     sm  dbecc    enc", "# Idx      W      %      -      %"]
    return head + [f"    0  {'ERR!' if i % 2 == 0 else '100'}     50  {i + 1}  0" for i in range(rows)]


def test_dmon_events_sharing_a_line_keep_the_per_file_order() -> None:
    if "nvidia-smi-dmon" not in MODULES:
        pytest.skip("no parse_many")
    files = [("a.txt", "n1", tied_dmon(80)), ("b.txt", "n1", tied_dmon(6)), ("c.txt", "n2", tied_dmon(200))]
    check(nvidia_smi_dmon, files)
    r = nvidia_smi_dmon.parse_many([(pl.Series(f[2]), FileContext(path=f[0], node=f[1])) for f in files])
    assert r[0].tables["events"].height > 40


CSV_FIELDS = [
    "timestamp",
    "index",
    "name",
    "pci.bus_id",
    "uuid",
    "serial",
    "utilization.gpu [%]",
    "memory.used [MiB]",
    "temperature.gpu",
    "power.draw [W]",
    "clocks.sm [MHz]",
    "clocks_event_reasons.active",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "pstate",
    "driver_version",
    "remapped_rows.pending",
    "fan.speed [%]",
    "vbios_version",
]


def csv_cell(field: str, gpu: int, t: int, rng: random.Random) -> str:
    if rng.random() < 0.05:
        return rng.choice(["[N/A]", "[Not Supported]", "[GPU requires reset]", "[Unknown Error]", ""])
    f = field.split(" [")[0]
    return {
        "timestamp": f"2025/08/15 18:{t // 60 % 60:02d}:{t % 60:02d}.{t % 1000:03d}",
        "index": str(gpu),
        "name": "NVIDIA H100 80GB HBM3",
        "pci.bus_id": rng.choice(["00000000", "0000"]) + f":{0x18 + gpu:02X}:00.0",
        "uuid": f"GPU-{gpu:08x}-0000-0000-0000-000000000000",
        "serial": str(1650000000 + gpu),
        "clocks_event_reasons.active": rng.choice(
            ["0x0000000000000001", "0x0000000000000008", "0x0000000000000040"]
        ),
        "pstate": rng.choice(["P0", "P2", "P8"]),
        "driver_version": "535.104.05",
        "vbios_version": "96.00.5E.00.01",
    }.get(f, rng.choice(["0", "1", "2", "16", "8", "Active", "Not Active", "Yes", "No", "35 %", "700.1 W"]))


def random_csv(rng: random.Random) -> list[str]:
    """A --query-gpu file: one to three runs of random field lists, rows of a few GPUs, and now and then
    a header-less row, a failure line, a blank line, a per-process query or an unknown line."""
    out: list[str] = []
    t = rng.randrange(10_000)
    for _run in range(rng.randint(1, 3)):
        if rng.random() < 0.15:
            out.append("pid, process_name, used_gpu_memory [MiB]")
            out += [f"{1000 + i}, python, 100 MiB" for i in range(rng.randint(0, 3))]
            continue
        fields = rng.sample(CSV_FIELDS, rng.randint(2, 10))
        if rng.random() < 0.2 and out:
            out.append(", ".join(rng.sample(CSV_FIELDS, 3)))  # a header with no rows
        out.append(", ".join(fields))
        for _ in range(rng.randint(0, 12)):
            t += 1
            for gpu in range(rng.randint(1, 3)):
                out.append(", ".join(csv_cell(f, gpu, t, rng) for f in fields))
            r = rng.random()
            if r < 0.05:
                out.append("Unable to determine the device handle for GPU 0000:18:00.0: Unknown Error")
            elif r < 0.1:
                out.append("")
            elif r < 0.13:
                out.append("something else entirely")
    if rng.random() < 0.2:
        out.insert(0, "0, NVIDIA H100, 00000000:18:00.0")  # a row before any header
    return out


@pytest.mark.parametrize("seed", range(12))
def test_csv_random_files(seed: int) -> None:
    if "nvidia-smi-csv" not in MODULES:
        pytest.skip("no parse_many")
    rng = random.Random(seed)
    files = [(f"q{k}.csv", rng.choice(["n1", "n2"]), random_csv(rng)) for k in range(rng.randint(2, 8))]
    check(nvidia_smi_csv, files)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_common_shapes_take_the_batched_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No fixture is parsed alone by parse_many but a pdsh capture (CSV), a CSV file of `_MANY` lines or more or
    a dmon file of `_BATCH_LINES` or more (dmon files of `_MANY` lines are read with the batch)."""
    module = MODULES[name]
    alone: list[str] = []
    real = module.parse

    def spy(lines: pl.Series, ctx: FileContext) -> ParseResult:
        alone.append(ctx.path)
        return real(lines, ctx)

    monkeypatch.setattr(module, "parse", spy)
    fx = fixture_lines(name, raw=False)
    files = [(f, lines) for f, lines in fx] + [(f + ":head", lines[:5]) for f, lines in fx]
    module.parse_many([(pl.Series(t, dtype=pl.String), FileContext(path=f, node="n")) for f, t in files])
    assert [p for p in alone if "pdsh" not in p] == []
    if name == "nvidia-smi-csv":
        pdsh = "csv_pdsh_two_hosts_interleaved.csv"
        assert sorted(alone) == [pdsh, pdsh + ":head"]
    if name == "nvidia-smi-dmon":
        big = [(pl.Series(tied_dmon(module._BATCH_LINES)), FileContext(path="big", node="n"))] * 2
        long = [(pl.Series(tied_dmon(module._MANY + 800)), FileContext(path="long", node="n"))] * 2
        module.parse_many(big + long + [(pl.Series(tied_dmon(9)), FileContext(path="small", node="n"))] * 2)
        assert alone == ["big", "big"]


def long_csv(files: int = 18) -> list[list[str]]:
    """Query files of one field list whose cells repeat (pstate, flags, link state): together (or as one
    file) a group of more than _MANY rows, whose repetitive columns are converted per distinct cell."""
    rng = random.Random(7)
    fields = ["timestamp", "index", "pci.bus_id", "name", "utilization.gpu [%]", "temperature.gpu"]
    fields += ["clocks_event_reasons.active", "clocks_event_reasons.hw_slowdown", "pstate", "power.draw [W]"]
    fields += ["ecc.errors.uncorrected.volatile.total", "pcie.link.width.current", "pcie.link.width.max"]
    fixed = {gpu: [csv_cell(f, gpu, 0, random.Random(gpu)) for f in fields] for gpu in range(8)}
    out = []
    for k in range(files):
        rows = [", ".join(fields)]
        for t in range(60):
            for gpu in range(8):
                cells = [csv_cell(f, gpu, 1000 * k + t, rng) if rng.random() < 0.3 else "" for f in fields]
                rows.append(", ".join(c or d for c, d in zip(cells, fixed[gpu], strict=True)))
        out.append(rows)
    return out


def test_csv_long_group_converted_per_distinct_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long group parses (polars 2.1 panicked on its query with common-subexpression elimination) to the
    rows the elementwise conversions give."""
    lines = pl.Series([t for i, rows in enumerate(long_csv()) for t in (rows if i == 0 else rows[1:])])
    assert len(lines) > nvidia_smi_csv._MANY
    ctx = FileContext(path="q.csv", node="n")
    per_value = nvidia_smi_csv.parse(lines, ctx)
    monkeypatch.setattr(nvidia_smi_csv, "_MANY", 10**9)
    assert_same_result(per_value, nvidia_smi_csv.parse(lines, ctx))


def test_csv_files_whose_rows_together_make_a_long_group() -> None:
    """Small files of one field list, _MANY rows or more together: repetitive columns are converted per
    distinct cell or run in the batch (as parse does for a long file), with the same values."""
    if "nvidia-smi-csv" not in MODULES:
        pytest.skip("no parse_many")
    files = [(f"q{k}.csv", f"n{k % 5}", rows) for k, rows in enumerate(long_csv())]
    assert sum(len(f[2]) for f in files) > nvidia_smi_csv._MANY
    check(nvidia_smi_csv, files)


XML_SMALL = [
    '<?xml version="1.0" ?>',
    '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
    "<nvidia_smi_log>",
    "\t<timestamp>Fri Jun 21 02:03:08 2024</timestamp>",
    "\t<driver_version>535.104.05</driver_version>",
    '\t<gpu id="00000000:18:00.0">',
    "\t\t<product_name>NVIDIA H100 80GB HBM3</product_name>",
    "\t\t<fb_memory_usage><total>81559 MiB</total><used>3 MiB</used></fb_memory_usage>",
    "\t\t<remapped_rows><remapped_row_pending>Yes</remapped_row_pending></remapped_rows>",
    "\t\t<temperature>",
    "\t\t\t<gpu_temp>35 C</gpu_temp>",
    "\t\t</temperature>",
    "\t\t<clocks_event_reasons><clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>",
    "\t\t</clocks_event_reasons>",
    "\t\t<ecc_errors><volatile><dram_uncorrectable>2</dram_uncorrectable></volatile></ecc_errors>",
    "\t\t<gpu_recovery_action>GPU requires reset</gpu_recovery_action>",
    "\t</gpu>",
    "</nvidia_smi_log>",
]


def xml_shapes() -> dict[str, list[str]]:
    """Documents that end, break or carry on in the ways the pull parser's events and errors tell apart."""
    d = XML_SMALL
    return {
        "whole": d,
        "junk after the root on its line": [*d[:-1], "</nvidia_smi_log>$ nvidia-smi -q -x"],
        "junk on the next line": [*d, "$ exit"],
        "error after elements on a line": [*d[:8], "\t\t<a><b>1</b></c>", *d[8:]],
        "cut inside a tag": [*d[:10], "\t\t\t<gpu_te"],
        "cut between elements": d[:12],
        "two documents": [*d, *d],
        "two roots no declaration": [*d[2:], *d[2:]],
        "prompt before": ["$ nvidia-smi -q -x", *d],
        "other root": ['<?xml version="1.0" ?>', "<other>", "<x>1</x>", "</other>"],
        "entity declared": [d[0], '<!DOCTYPE nvidia_smi_log [<!ENTITY e "x">]>', *d[2:4], "<a>&e;</a>"],
        "bom": ["\ufeff" + d[0], *d[1:]],
        "multi-line start tag": [*d[:5], "\t<gpu", '\t id="00000000:2A:00.0">', *d[6:]],
        "empty": [],
    }


def test_xml_shapes_in_one_batch() -> None:
    if "nvidia-smi-xml" not in MODULES:
        pytest.skip("no parse_many")
    shapes = xml_shapes()
    files = [(f"{k}.xml", f"n{i % 2}", v) for i, (k, v) in enumerate(shapes.items())]
    check(nvidia_smi_xml, files)
    check(nvidia_smi_xml, files[::-1], first_lines=True)
