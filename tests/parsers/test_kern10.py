"""Round 10 (kernel logs): the fast paths against the code they replace.

- `kernel_log._syslog_times_by_run` works out its runs' first rows in Python (`_py_syslog_times`, up to
  `RUN_ROWS` runs): compared with `_syslog_times_rows` over every row (the reference the runs stand for) and
  with the polars runs (RUN_ROWS = 0), on seeded random frames with month wraps, unknown and non-ASCII month
  names, invalid dates and times, missing values and other styles.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import polars as pl
import pytest

from parsers import kernel_log
from parsers.base import FileContext

UTC_US = pl.Datetime("us", "UTC")

_MONTHS = ["Jan", "Feb", "Mar", "Nov", "Dec", "dec", "Sept", "Foo", "Mär", None]
_HMS = ["00:00:00", "12:34:56", "23:59:59", "24:00:00", "12:00:60", "1:2:3", "99:99:99", "ab:cd:ef", None]
_STYLES = ["syslog", "syslog", "syslog", "dmesg_reltime", "dmesg_raw", None]


def _frame(
    rng: random.Random, n_runs: int, odd: float, ascii_only: bool, styles: list[str | None]
) -> pl.DataFrame:
    """Rows in runs of 1-11 alike; `odd`: the share of runs whose time of day is not a plain one."""
    names = [m for m in _MONTHS if m is None or m.isascii()] if ascii_only else _MONTHS
    rows = []
    month = rng.randrange(12)
    for _ in range(n_runs):
        style = rng.choice(styles)
        if rng.random() < 0.7:
            mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][month]
            if rng.random() < 0.05:
                month = (month + rng.choice([1, 1, 1, 11])) % 12  # (forward, or a wrap backwards)
        else:
            mon = rng.choice(names)
        day = rng.choice([1, 2, 15, 28, 29, 30, 31, None])
        hms = f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
        if rng.random() < odd:
            hms = rng.choice(_HMS)
        rows += [(style, mon, day, hms)] * rng.randrange(1, 12)
    n = len(rows)
    return pl.DataFrame(
        [
            pl.Series("line", range(1, n + 1), dtype=pl.Int64),
            pl.Series("style", [r[0] for r in rows], dtype=pl.String),
            pl.Series("ts", [None] * n, dtype=UTC_US),
            pl.Series("ts_quality", ["none" if r[0] else None for r in rows], dtype=pl.String),
            pl.Series("uptime_s", [None] * n, dtype=pl.Float64),
            pl.Series("mon_raw", [r[1] for r in rows], dtype=pl.String),
            pl.Series("day", [r[2] for r in rows], dtype=pl.Int32),
            pl.Series("hms", [r[3] for r in rows], dtype=pl.String),
        ]
    )


_CTXS = [
    FileContext(path="n/syslog", node="n", year_hint=2026),
    FileContext(path="n/syslog", node="n", year_hint=None, collected_at=datetime(2026, 3, 2, tzinfo=UTC)),
    FileContext(path="n/syslog", node="n", year_hint=2025, collected_at=datetime(2026, 3, 2, tzinfo=UTC)),
    FileContext(path="n/syslog", node="n"),
    FileContext(path="n/syslog", node="n", year_hint=9999),
]


@pytest.mark.parametrize("seed", range(40))
def test_syslog_times_by_run_equals_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    odd = [0.0, 0.0, 0.002, 0.2][seed % 4]
    styles = _STYLES if seed % 6 != 1 else ["syslog", "syslog", "dmesg_reltime"]  # (all syslog: no when)
    out = _frame(rng, rng.choice([300, 1200, 1600, 2500]), odd, seed % 3 != 2, styles)
    if seed % 5 == 0:  # (every row a known month: the calendar path)
        known = pl.col("mon_raw").fill_null("Jan").replace({"Foo": "Feb", "Mär": "Mar"})
        out = out.with_columns(mon_raw=known)
    ctx = _CTXS[seed % len(_CTXS)]
    ref = kernel_log._syslog_times_rows(out, ctx)
    got = kernel_log._syslog_times_by_run(out, ctx)
    monkeypatch.setattr(kernel_log, "RUN_ROWS", 0)
    polars_runs = kernel_log._syslog_times_by_run(out, ctx)
    if got is None:
        assert polars_runs is None
        return
    for other in (got, polars_runs):
        assert other[1] == ref[1]
        assert other[0].equals(ref[0]), seed


# ----------------------------------------------------------------------------- _embedded_printk


def _ref_embedded_printk(out: pl.DataFrame) -> pl.DataFrame:
    """`kernel_log._embedded_printk` before round 10, verbatim (its polars branch)."""
    kl = kernel_log
    emb = out.select("msg", "style", _i=pl.int_range(pl.len(), dtype=pl.UInt32)).filter(
        (pl.col("msg").str.slice(0, 1) == "[") & (pl.col("style") != "dmesg_raw")  # (= starts_with, cheaper)
    )
    if emb.height == 0:
        return out
    emb = emb.select("_i", msg=pl.col("msg") + "")
    strict = emb.get_column("msg").str.contains(kl._EMB_STRICT)
    fast = emb.filter(strict)
    other = emb.filter(~strict) if fast.height else emb
    got = []
    if fast.height:
        fast = fast.with_columns(_c=pl.col("msg").str.find("]", literal=True))
        close = pl.col("_c")
        got.append(
            fast.select(
                "_i",
                uptime_s=pl.col("msg")
                .str.slice(1, close - 1)
                .str.strip_chars_start(" ")
                .cast(pl.Float64, strict=False),
                # = len(msg) - len(msg.str.slice(close + 1).str.strip_prefix(" ")), in characters
                _off=(close + 1).cast(pl.Int64)
                + (pl.col("msg").str.slice(close + 1, 1) == " ").cast(pl.Int64),
            )
        )
    if other.height:
        got.append(
            other.select(
                "_i",
                uptime_s=pl.col("msg").str.extract(kl._EMB_RX, 1).cast(pl.Float64, strict=False),
                # the prefix `str.replace(_EMB_RX, "")` removes
                _off=pl.col("msg").str.extract(kl._EMB_MATCH, 1).str.len_chars().cast(pl.Int64),
            )
        )
    part = (got[0] if len(got) == 1 else pl.concat(got)).filter(pl.col("uptime_s").is_not_null())
    if part.height == 0:
        return out
    idx = part.get_column("_i")
    off = pl.repeat(0, out.height, dtype=pl.Int64, eager=True).scatter(idx, part.get_column("_off"))
    uptime = out.get_column("uptime_s").clone().scatter(idx, part.get_column("uptime_s"))
    return out.with_columns(uptime_s=uptime, msg=pl.col("msg").str.slice(off))


_BRACKETS = [
    "[ 3964.764713] NVRM: Xid (PCI:0000:18:00): 79",
    "[3964.764713] x",
    "[    0.000000]",
    "[ 12.5]x",
    "[ 12.5]  two spaces",
    "[ 12.5]\ttab",
    "[ 12.5]\u00e9t\u00e9",
    "[\t12.5] tab inside",
    "[\u3000 12.5] ideographic space",
    "[ \u0661\u0662.\u0663] arabic digits",
    "[\u0661.\u0662]x",
    "[ 12.] no fraction digits",
    "[ 1e5.5] letters",
    "[UFW BLOCK] IN=eth0 OUT=",
    "[ 12.5 ] space before",
    "[ 12.5]] twice",
    "[ 12.5] [ 13.5] two stamps",
    "[",
    "]",
    "",
    "no bracket",
    " [ 1.5] leading space",
    "[ 99999999999999999999.5] big",
    "[ 1.5]\u00a0nbsp",
    "[ 1.5]\n newline",
]


@pytest.mark.parametrize("seed", range(12))
def test_embedded_printk_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1001, 1500, 3000])
    plain = ["plain message", None, "x"]
    msgs = [rng.choice(_BRACKETS) if rng.random() < 0.6 else rng.choice(plain) for _ in range(n)]
    if seed % 3 == 0:
        msgs = [m if m is None or m.isascii() else "[ 1.0] ascii" for m in msgs]
    styles = [rng.choice(["syslog", "syslog", "dmesg_raw", "journal_iso", None]) for _ in range(n)]
    ups = [rng.choice([None, None, 5.0]) for _ in range(n)]
    out = pl.DataFrame(
        [
            pl.Series("line", range(n), dtype=pl.Int64),
            pl.Series("style", styles, dtype=pl.String),
            pl.Series("uptime_s", ups, dtype=pl.Float64),
            pl.Series("msg", msgs, dtype=pl.String),
            pl.Series("host", ["h"] * n, dtype=pl.String),
        ]
    )
    got = kernel_log._embedded_printk(out)
    ref = _ref_embedded_printk(out)
    assert got.equals(ref), seed
    assert got.schema == ref.schema


def test_embedded_printk_on_fixtures_and_real_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel-log fixture and real log (repeated past SMALL_ROWS so the polars branch runs): the
    frames `stamp` hands `_embedded_printk` give the same rows by both."""
    from pathlib import Path

    from parsers.base import lines_from_bytes

    seen: list[pl.DataFrame] = []
    real = kernel_log._embedded_printk

    def grab(out: pl.DataFrame) -> pl.DataFrame:
        seen.append(out)
        return real(out)

    monkeypatch.setattr(kernel_log, "_embedded_printk", grab)
    root = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-log"
    paths = sorted(p for p in root.iterdir() if not p.name.endswith(".jsonl"))
    real_logs = Path("/work/shared/real-logs")
    paths += sorted(p for p in real_logs.rglob("*") if p.is_file() and p.stat().st_size < 5_000_000)
    ctx = FileContext(path="n/kern.log", node="n", year_hint=2026)
    for p in paths:
        data = p.read_bytes()
        lines = lines_from_bytes(data * max(1, 1200 // max(1, data.count(b"\n"))))
        if len(lines) <= 1000:
            continue
        try:
            kernel_log.stamp(kernel_log.numbered(lines, ctx), ctx)
        except Exception:  # noqa: BLE001 - (not every real log is a kernel log)
            continue
    assert seen
    for out in seen:
        assert real(out).equals(_ref_embedded_printk(out))


# ----------------------------------------------------------------------------- _aer_blocks


def _aer_inputs() -> list[tuple[pl.DataFrame, FileContext, pl.DataFrame]]:
    """The (candidates, ctx, APEI blocks) `extract` hands `_aer_blocks` on the AER fixtures, as they are and
    with their lines shuffled, dropped, repeated and spread apart (seeded)."""
    from pathlib import Path

    from parsers import _kernel_events as kev
    from parsers.base import lines_from_bytes

    root = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-log"
    paths = sorted(p for p in root.iterdir() if not p.name.endswith(".jsonl") and "aer" in p.name)
    texts = [p.read_text() for p in paths]
    rng = random.Random(10)
    variants = []
    for text in texts:
        lines = text.splitlines()
        variants.append(lines)
        for _ in range(12):
            v = [ln for ln in lines if rng.random() < 0.85]
            v = [ln for ln in v for _ in range(rng.choice([1, 1, 1, 2]))]
            if rng.random() < 0.5:
                k = rng.randrange(len(v) + 1)
                v = v[:k] + ["filler line"] * rng.choice([5, 10, 11, 12, 41]) + v[k:]
            if rng.random() < 0.3:
                rng.shuffle(v)
            variants.append(v)
    got: list[tuple[pl.DataFrame, FileContext, pl.DataFrame]] = []
    real = kev._aer_blocks

    def grab(m: pl.DataFrame, ctx: FileContext, apei: pl.DataFrame):  # noqa: ANN202
        got.append((m, ctx, apei))
        return real(m, ctx, apei)

    ctx = FileContext(path="n/kern.log", node="n", year_hint=2026)
    kev._aer_blocks = grab
    try:
        for v in variants:
            kernel_log.parse(lines_from_bytes(("\n".join(v) + "\n").encode()), ctx)
    finally:
        kev._aer_blocks = real
    return got


def test_aer_blocks_equal_reference() -> None:
    from parsers import _kernel_blocks as kb
    from tests.parsers._kern10_ref import ref_aer_blocks

    inputs = _aer_inputs()
    assert len(inputs) > 20
    for m, ctx, apei in inputs:
        for py in (True, False):
            kb.PY_AER_EVENTS = py
            try:
                got = kb._aer_blocks(m, ctx, apei)
            finally:
                kb.PY_AER_EVENTS = True
            ref = ref_aer_blocks(m, ctx, apei, py)
            assert got[0].equals(ref[0]) and got[1].equals(ref[1]) and got[2].equals(ref[2])


# ----------------------------------------------------------------------------- boot segments, K8b boot time

_BOOT_MSGS = [
    "Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP",
    "Linux version ",
    "Linux versio",
    " Linux version 6.8",
    "linux version 6.8",
    "Linux version\u00e9 6.8",
    "L\u00efnux version 6.8",
    "ordinary message",
    "",
    None,
]


@pytest.mark.parametrize("seed", range(16))
def test_boot_segments_and_k8b_equal_reference(seed: int) -> None:
    from parsers import _kernel_events as kev
    from tests.parsers._kern10_ref import ref_boot_segments_by_host, ref_k8b_boot

    rng = random.Random(seed)
    n = rng.choice([50, 1200, 3000])
    hosts = [rng.choice(["a", "b", "c", None]) for _ in range(n)]
    ups: list[float | None] = []
    clock = dict.fromkeys(("a", "b", "c", None), 0.0)
    for h in hosts:
        r = rng.random()
        if r < 0.3:
            ups.append(None)
            continue
        clock[h] = rng.uniform(0, 3) if r > 0.97 else clock[h] + rng.uniform(0, 2)  # (a reboot now and then)
        ups.append(clock[h])
    p_linux = [0.0, 0.01, 0.2][seed % 3]
    msgs = [rng.choice(_BOOT_MSGS) if rng.random() < p_linux else "msg" for _ in range(n)]
    t0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1e6
    ts = [None if rng.random() < 0.2 else t0 + i * 1e6 for i in range(n)]
    out = pl.DataFrame(
        [
            pl.Series("line", range(1, n + 1), dtype=pl.Int64),
            pl.Series("text", ["t"] * n, dtype=pl.String),
            pl.Series("ts", ts, dtype=pl.Float64).cast(pl.Int64).cast(UTC_US),
            pl.Series("ts_quality", ["exact"] * n, dtype=pl.String),
            pl.Series("uptime_s", ups, dtype=pl.Float64),
            pl.Series("host", hosts, dtype=pl.String),
            pl.Series("msg", msgs, dtype=pl.String),
        ]
    )
    got = kernel_log._boot_segments_by_host(out)
    assert got.equals(ref_boot_segments_by_host(out))
    m = out.with_columns(boot_seg=got)
    ctx = FileContext(path="n/kern.log", node="n")
    for frame in (m, m.lazy()):
        new = kev._k8b_boot(frame, ctx)
        ref = ref_k8b_boot(frame, ctx)
        if isinstance(new, pl.LazyFrame):
            new, ref = new.collect(), ref.collect()  # type: ignore[union-attr]
        assert new.sort("line").equals(ref.sort("line"))


# ----------------------------------------------------------------------------- the literal mask shared


def _assert_same_result(a, b) -> None:  # noqa: ANN001
    assert set(a.tables) == set(b.tables)
    for t in a.tables:
        assert a.tables[t].equals(b.tables[t]), t
    assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.notes, a.partial, a.node) == (
        b.parsed,
        b.unrecognized,
        b.unrecognized_examples,
        b.notes,
        b.partial,
        b.node,
    )


def _reference_parse(monkeypatch: pytest.MonkeyPatch, lines: pl.Series, ctx: FileContext):  # noqa: ANN202
    """`kernel_log.parse` as before round 10's shared mask: stamp's boot segments read every message (the
    single-host expression as it was), `extract` runs its own literal pass."""
    from parsers import _kernel_events as kev
    from tests.parsers._kern10_ref import ref_boot_segments_by_host

    with monkeypatch.context() as mp:
        mp.setattr(kernel_log, "_linux_version_lines", lambda out, rows: None)
        mp.setattr(kernel_log, "_boot_segments_by_host", ref_boot_segments_by_host)
        real_extract = kev.extract
        mp.setattr(kev, "extract", lambda stamped, ctx, rows=None: real_extract(stamped, ctx))
        return kernel_log.parse(lines, ctx)


def _with_boots(lines: list[str], rng: random.Random, share: float) -> list[str]:
    """`lines` with 'Linux version' lines put after some kernel lines (same prefix, printk time 0 or none)."""
    out: list[str] = []
    for ln in lines:
        out.append(ln)
        if rng.random() >= share:
            continue
        text = rng.choice(["Linux version 6.8.0-45-generic #45 SMP", "Linux version", "Linux versio x"])
        if " kernel: " in ln:
            head = ln[: ln.index(" kernel: ") + 9]
            rest = ln[len(head) :]
            # (the line's own printk time: no fall back of the clock, the 'Linux version' alone starts a boot)
            same = rest[: rest.index("] ") + 2] if rest.startswith("[") and "] " in rest else ""
            out.append(head + rng.choice(["[    0.000000] ", "", same]) + text)
        elif ln.startswith("[") and "] " in ln:
            out.append(rng.choice(["[    0.000000] ", ln[: ln.index("] ") + 2]]) + text)
    return out


@pytest.mark.parametrize("style", ["syslog", "dmesg_raw", "journal_iso", "dmesg_ctime"])
@pytest.mark.parametrize("share", [0.0, 0.002, 0.02])
def test_shared_literal_mask_equals_reference(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path,  # noqa: ANN001
    style: str,
    share: float,
) -> None:
    from parsers.base import lines_from_bytes
    from tests.conftest import load_script

    mod = load_script("bench/big_kernel.py")
    path = tmp_path / "k.log"
    mod.write(path, 0.6, 3, style)
    rng = random.Random(hash((style, share)) & 0xFFFF)
    texts = _with_boots(path.read_text().splitlines(), rng, share)
    if style == "dmesg_raw":  # (one host: the single-host expression)
        texts = [t for t in texts if t.startswith("[")]
    ctx = FileContext(path="n/k.log", node="n", year_hint=2026)
    lines = lines_from_bytes(("\n".join(texts) + "\n").encode())
    _assert_same_result(kernel_log.parse(lines, ctx), _reference_parse(monkeypatch, lines, ctx))


def test_shared_literal_mask_on_fixtures_and_real_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from parsers.base import lines_from_bytes

    root = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-log"
    paths = sorted(p for p in root.iterdir() if not p.name.endswith(".jsonl"))
    real_logs = Path("/work/shared/real-logs")
    paths += sorted(p for p in real_logs.rglob("*") if p.is_file() and p.stat().st_size < 5_000_000)
    ctx = FileContext(path="n/kern.log", node="n", year_hint=2026)
    n = 0
    for p in paths:
        data = p.read_bytes()
        lines = lines_from_bytes(data * max(1, 1200 // max(1, data.count(b"\n"))))
        try:
            got = kernel_log.parse(lines, ctx)
        except Exception:  # noqa: BLE001 - (not every real log is a kernel log)
            continue
        _assert_same_result(got, _reference_parse(monkeypatch, lines, ctx))
        n += 1
    assert n > 20


_DRV = ["pcieport", "nvidia", "mlx5_core", "nvme"]
_BDF = ["0000:00:01.0", "0000:3a:00.0", "10000:e1:00.7", "0000:17:01.0"]


def _aer_line(rng: random.Random) -> str:
    c = rng.choice
    head = f"{c(_DRV)} {c(_BDF)}:{c([' ', '  ', ' AER: ', ' AER:'])}"
    sev = c(["Corrected", "Uncorrected", "Fatal", "Correctable", "Uncorrectable", "Non-Fatal"])
    header = (
        f"{c(['', 'Multiple '])}{sev}{c(['', ' (Non-Fatal)', ' (Fatal)'])} error "
        f"{c(['', 'message '])}received"
        f"{c([': ', ' from ', ':'])}{c(['id=00e8', c(_BDF), '', 'id=0a1f'])}"
    )
    severity = c(["Corrected", "Uncorrected (Non-Fatal)", "Uncorrected (Fatal)", "Odd"])
    buserr = (
        f"PCIe Bus Error: severity={severity}, type={c(['Physical Layer', 'Transaction Layer'])}, "
        f"{c(['id=00e8', ''])}{c(['(Receiver ID)', '(Requester ID)', ''])}"
    )
    device = f"  device [{c(['10de', '15b3'])}:{c(['2330', '1021'])}] error status/mask=00000001/0000e000"
    name = c(["RxErr", "Timeout", "BadTLP", "Bad_DLLP"])
    bit = f"   [{c([' 0', '12', ' 6'])}] {name}{c(['', '  ', '   (First)'])}"
    agent = c(["Receiver ID", "Requester ID"])
    layer = f"aer_layer={c(['Physical Layer', 'Transaction Layer'])}, aer_agent={agent}"
    rest = c(
        [
            header,
            buserr,
            device,
            bit,
            "  TLP Header: 40000001 0000000f 9a000000 00000000",
            f"aer_status: 0x0000000{c('14')}, aer_mask: 0x0000e000",
            layer,
            c(["device recovery successful", "device recovery failed", "Root Port link has been reset (0)"]),
            c(["broadcast error_detected message", "Error of this Agent is reported first", "enabled"]),
        ]
    )
    return head + rest


@pytest.mark.parametrize("seed", range(25))
def test_py_aer_blocks_on_random_reports(seed: int) -> None:
    from parsers import _kernel_blocks as kb
    from parsers import _kernel_events as kev
    from parsers.base import lines_from_bytes
    from tests.parsers._kern10_ref import ref_aer_blocks

    rng = random.Random(seed)
    texts = []
    t = 100.0
    for _ in range(rng.choice([20, 120, 400])):
        t += rng.uniform(0, 0.01)
        if rng.random() < 0.25:
            texts += [f"[{t:12.6f}] filler line"] * rng.choice([1, 5, 11, 12, 13])
        texts.append(f"[{t:12.6f}] {_aer_line(rng)}")
    got: list[tuple[pl.DataFrame, FileContext, pl.DataFrame]] = []
    real = kev._aer_blocks

    def grab(m: pl.DataFrame, ctx: FileContext, apei: pl.DataFrame):  # noqa: ANN202
        got.append((m, ctx, apei))
        return real(m, ctx, apei)

    ctx = FileContext(path="n/kern.log", node="n", year_hint=2026)
    kev._aer_blocks = grab
    try:
        kernel_log.parse(lines_from_bytes(("\n".join(texts) + "\n").encode()), ctx)
    finally:
        kev._aer_blocks = real
    assert got
    for m, c, apei in got:
        ref = ref_aer_blocks(m, c, apei)
        for py in (True, False):
            kb.PY_AER_BLOCKS = py
            try:
                new = kb._aer_blocks(m, c, apei)
            finally:
                kb.PY_AER_BLOCKS = True
            assert new[0].equals(ref[0]), (seed, py)
            assert new[1].equals(ref[1]) and new[2].equals(ref[2]), (seed, py)


@pytest.mark.parametrize("n", [40, 1500])
@pytest.mark.parametrize(
    "hosts",
    [
        ["gpu-1"],
        ["gpu-1.cluster.local"],
        ["gpu-1.cluster.local", "gpu-1"],
        ["gpu-1", "gpu-2"],
        ["localhost"],
        ["10.0.0.5"],
        ["localhost", "gpu-3.example.org"],
    ],
)
def test_parse_node_equals_distinct_hosts_of_stamp(n: int, hosts: list[str]) -> None:
    """`_parse` takes the hosts `_stamp` worked out: the node it reports is the one the distinct hosts of
    the stamped frame give (as `_parse` computed them before)."""
    from parsers.base import lines_from_bytes

    rng = random.Random(n + len(hosts))
    texts = [f"Nov 28 23:50:{i % 60:02d} {rng.choice(hosts)} kernel: [ {i}.5] message {i}" for i in range(n)]
    lines = lines_from_bytes(("\n".join(texts) + "\n").encode())
    ctx = FileContext(path="n/syslog", node="n", year_hint=2026)
    stamped, _ = kernel_log.stamp(kernel_log.numbered(lines, ctx), ctx)
    distinct = kernel_log._distinct_hosts(stamped)
    assert kernel_log.parse(lines, ctx).node == (distinct[0] if len(distinct) == 1 else None)
