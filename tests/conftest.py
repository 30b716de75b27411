"""Shared test options and builders."""

from __future__ import annotations

import compileall
import gzip
import importlib.util
import io
import os
import random
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest
from hypothesis import HealthCheck, settings

from parsers.base import HARNESS_LINE, FileContext, ParseResult, lines_from_bytes

FIXTURES = Path(__file__).parent / "fixtures"

# Hypothesis profiles: "ci" (default) keeps property tests to seconds on a shared 2-core machine;
# "long" is the developers' deeper run: `HYPOTHESIS_PROFILE=long pytest tests/forensics/test_robustness.py`.
# Tests that pin max_examples themselves keep it; the profile sets the default for the rest.
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "long", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A failing analysis step fails the tests (`forensics.analyze.STRICT_ENV`), as it would without the guard
# that keeps a user's analysis going; tests/forensics/test_analyze_guard.py unsets it.
os.environ["FORENSICS_STRICT"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    """The tool's sources compiled to bytecode once, where the environment says not to write it
    (PYTHONDONTWRITEBYTECODE, as on the CI machines): every ingest worker the tests start (hundreds of pools)
    otherwise compiles every module it imports again, ~0.45 s a worker (tests/forensics/test_ingest.py:
    86 -> 70 s of CPU). A worker started with `-B` still reads the bytecode it finds."""
    if sys.dont_write_bytecode:
        root = Path(__file__).resolve().parent.parent
        for package in ("forensics", "parsers"):
            compileall.compile_dir(root / package, quiet=1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite tests/fixtures/**/*.expected.jsonl from the current parsers",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture
def dask_scheduler():  # type: ignore[no-untyped-def]
    """Address of a Dask LocalCluster (threads, one worker); skips when the `dask` extra is absent."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        distributed = pytest.importorskip("distributed")
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cluster.close()


REPO = Path(__file__).resolve().parents[1]


def load_script(relpath: str) -> ModuleType:
    """A script of the repository (`bench/ab.py`, `scripts/sweep_analysis.py`) imported by its path: `bench` and
    `scripts` are no packages, and the test run need not have the repository root on sys.path."""
    path = REPO / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_bundle(root: Path, files: dict[str, str | bytes], archive: str | None = None) -> Path:
    """Write `files` (path inside the bundle -> content) as a folder, or as an archive of that kind.

    archive: None (folder), 'tar', 'tar.gz', 'tgz', 'tar.zst' or 'zip'. Members ending in .gz are gzipped.
    """
    root.mkdir(parents=True, exist_ok=True)
    blobs: dict[str, bytes] = {}
    for rel, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        if rel.endswith(".gz"):
            data = gzip.compress(data)
        blobs[rel] = data
    if archive is None:
        base = root / "bundle"
        for rel, data in blobs.items():
            p = base / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return base
    target = root / f"bundle.{archive}"
    if archive == "zip":
        with zipfile.ZipFile(target, "w") as zf:
            for rel, data in blobs.items():
                zf.writestr(f"bundle/{rel}", data)
        return target
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for rel, data in blobs.items():
            info = tarfile.TarInfo(f"bundle/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    if archive in ("tar.gz", "tgz"):
        raw = gzip.compress(raw)
    elif archive == "tar.zst":
        import zstandard

        raw = zstandard.ZstdCompressor().compress(raw)
    target.write_bytes(raw)
    return target


def assert_same_result(a: ParseResult, b: ParseResult) -> None:
    """Two parses of the same lines agree in everything: counts, examples, notes, node, the tables (same
    names in the same order, same schemas, same rows). For fast paths checked against the general path."""
    assert (a.parsed, a.unrecognized, a.unrecognized_examples, a.notes, a.partial, a.node) == (
        b.parsed,
        b.unrecognized,
        b.unrecognized_examples,
        b.notes,
        b.partial,
        b.node,
    )
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        x, y = a.tables[name], b.tables[name]
        assert x.schema == y.schema, name
        assert x.equals(y, null_equal=True), (name, x, y)


def assert_family_as_whole(lines: pl.Series, ctx: FileContext) -> None:
    """`_mixed._family` (the family grammar on a training log's candidate lines and what is read with them)
    agrees with `_mixed._whole` (the grammar on every line): count, understood lines, notes, hosts, tables."""
    from parsers import _mixed

    sub, n_sub = _mixed._family(lines, ctx)
    whole, n_whole = _mixed._whole(lines, ctx)
    assert n_sub == n_whole
    assert sub.understood.to_list() == whole.understood.to_list()
    assert (sub.notes, sub.hosts) == (whole.notes, whole.hosts)
    assert list(sub.tables) == list(whole.tables)
    for name in sub.tables:
        assert sub.tables[name].schema == whole.tables[name].schema
        assert sub.tables[name].equals(whole.tables[name], null_equal=True), name


def mutated(rnd: random.Random, s: str, alphabet: str, edits: int, span: int) -> str:
    """`s` with up to `edits` random edits: at a random place, up to `span` characters replaced by up to `span`
    drawn from `alphabet` (fast paths checked against their regex on lines that almost match)."""
    for _ in range(rnd.randint(0, edits)):
        at = rnd.randrange(len(s) + 1)
        put = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, span)))
        s = s[:at] + put + s[at + rnd.randint(0, span) :]
    return s


FIXTURES = Path(__file__).parent / "fixtures"


def fixture_lines(folder: str, *, harness: bool = True, raw: bool = True) -> list[tuple[str, list[str]]]:
    """(file name, lines) of every fixture in `tests/fixtures/<folder>`: as is (`raw`) and, as `NAME:harness`,
    with the harness annotations blanked (`harness`; under the plain name when it is the only form)."""
    out = []
    for p in sorted((FIXTURES / folder).iterdir()):
        if p.name.endswith(".expected.jsonl"):
            continue
        data = p.read_bytes()
        if raw:
            out.append((p.name, lines_from_bytes(data).to_list()))
        if harness:
            out.append((p.name + ":harness" if raw else p.name, harness_blanked(data).to_list()))
    return out


def harness_blanked(data: bytes) -> pl.Series:
    """A fixture's lines with its harness annotations (`#SOURCE:` ...) blanked, line numbers kept."""
    lines = lines_from_bytes(data)
    return pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()


def variants(lines: list[str]) -> dict[str, list[str | None]]:
    """Other shapes of one file's lines, for checking a batched or fast path against the general one."""
    cut = lines[:-1] + [lines[-1][: len(lines[-1]) // 2]] if lines else []
    return {
        "as is": lines,
        "crlf kept": [t + "\r" for t in lines],
        "prefixed": [f"node{7 if i % 3 else 8}: {t}" for i, t in enumerate(lines)],
        "cut last line": cut,
        "first half": lines[: len(lines) // 2],
        "second half": lines[len(lines) // 2 :],
        "empty": [],
        "unknown": ["hello world", "", "  something: else", "# gpu but no units"],
        "doubled": lines + lines,
        "nulls": [None if i % 7 == 3 else t for i, t in enumerate(lines)],
    }


def check_many(parser: object, items: list) -> list[ParseResult]:
    """`parser.parse_many(items)` equals `parser.parse` of each item (`assert_same_result`); its results."""
    many = parser.parse_many(items)  # type: ignore[attr-defined]
    assert len(many) == len(items)
    for (lines, ctx), got in zip(items, many, strict=True):
        assert_same_result(got, parser.parse(lines, ctx))  # type: ignore[attr-defined]
    return many


def simulated_files(root: Path, parser: object, runs: tuple[tuple[int, tuple[str, ...]], ...]) -> list[bytes]:
    """The files of `parser`'s format in small simulated bundles (4 nodes, 3 minutes), one per (seed, fault
    kinds) of `runs`, made under `root`."""
    from forensics.simulate import FaultSpec
    from forensics.simulate.job import simulate
    from parsers import registry

    out = []
    for seed, kinds in runs:
        where = root / f"sim{seed}"
        simulate(where, nodes=4, gpus_per_node=8, hours=0.05, faults=[FaultSpec(k) for k in kinds], seed=seed)
        files = [p for p in sorted(where.rglob("*")) if p.is_file()]
        out += [b for p in files if registry.detect((b := p.read_bytes())[:16384], p.name).parser is parser]
    return out


def mixed_lines(rng: random.Random, sources: list[list[str]], pool: list[str], spans: list[int]) -> list[str]:
    """A random file for batch tests: a slice (of a length from `spans`) of one of `sources`, with three lines
    of `pool` added now and then and its lines shuffled now and then."""
    base = rng.choice(sources)
    k = rng.randint(0, len(base))
    take = base[k : k + rng.choice(spans)]
    if rng.random() < 0.3:
        take = [*take, *rng.sample(pool, 3)]
    if rng.random() < 0.3:
        take = sorted(take, key=lambda _: rng.random())
    return take
