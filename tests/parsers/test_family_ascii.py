"""The NCCL/PyTorch-distributed grammar on ASCII lines: ASCII-class regexes (`_common.arx`), literal gates of
`torch_distributed._line_events` (`_Gate`) and the early end of `_common._split_all`'s rounds read exactly as
the code they replace (Unicode classes; every regex run; three full rounds, kept here verbatim)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import _common, _mixed, nccl
from parsers import _step_grammars as g
from parsers import torch_distributed as td
from parsers._common import ENVELOPES
from parsers.base import FileContext
from tests.parsers._regexes import classy_regexes

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")
CTX = FileContext(path="x/y.log", node="n1", first_line=1, year_hint=2025)


def _patterns() -> list[str]:
    return sorted(classy_regexes((nccl, td, _common), lambda s: (s, s.replace("(?<", "(?P<"))))


PATTERNS = _patterns()


def _files() -> list[Path]:
    out = []
    for d in ("nccl", "torch-distributed", "step-log"):
        out += [p for p in sorted((FIX / d).rglob("*")) if p.is_file() and p.stat().st_size < 3_000_000]
    if REAL.exists():
        out += [p for p in sorted(REAL.rglob("*")) if p.is_file() and p.stat().st_size < 3_000_000]
    return out


def _lines(p: Path) -> pl.Series:
    return pl.Series(p.read_bytes().decode("utf-8", "replace").splitlines(), dtype=pl.String)


def _corpus() -> list[str]:
    lines: list[str] = []
    for p in _files():
        lines += [x for x in _lines(p).to_list() if x.isascii()][:300]
    rnd = random.Random(11)
    for x in list(lines[:3000]):
        if x:
            i = rnd.randrange(len(x))
            lines.append(x[:i] + rnd.choice("\t\x0b\x0c\r\x1c\x1d\x1e\x1f _-9:[]") + x[i + 1 :])
    return lines


CORPUS = pl.Series("t", _corpus(), dtype=pl.String)


def test_patterns_found() -> None:
    assert len(PATTERNS) > 60
    assert len(CORPUS) > 3000 and _common.is_ascii(CORPUS)


@pytest.mark.parametrize("p", PATTERNS)
def test_same_matches_and_groups(p: str) -> None:
    a = g.ascii_classes(p)
    assert CORPUS.str.contains(a).equals(CORPUS.str.contains(p))
    if re.compile(p.replace("(?<", "(?P<")).groups:
        assert CORPUS.str.extract_groups(a).equals(CORPUS.str.extract_groups(p))


def test_arx_only_in_scope() -> None:
    p = r"^\d+\s\w"
    assert _common.arx(p) == p
    with _common.ascii_scope(True):
        assert _common.arx(p) == g.ascii_classes(p)
        assert _common.arx(pl.col("x")) is not None
        with _common.ascii_scope(False):
            assert _common.arx(p) == p
        assert _common.arx(p) != p
    assert _common.arx(p) == p


def _rows_key(rows: nccl.FamilyRows) -> tuple:
    return (
        {k: v.to_dicts() for k, v in rows.tables.items()},
        {k: v.schema for k, v in rows.tables.items()},
        rows.understood.to_list(),
        rows.notes,
        rows.hosts,
        None if rows.fast is None else rows.fast.to_list(),
        rows.whole,
        None if rows.continued is None else rows.continued.to_list(),
    )


def _reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code replaced: Unicode classes, every regex of the PyTorch rules run."""
    monkeypatch.setattr(_common, "is_ascii", lambda text: False)
    monkeypatch.setattr(td, "_GATE_ROWS", -1)


def _both_ways(lines: pl.Series, monkeypatch: pytest.MonkeyPatch) -> None:
    got = _rows_key(nccl.family_rows(lines, CTX))
    fam, k = _mixed._family(lines, CTX, ascii=_common.is_ascii(lines))
    got_mixed = (_rows_key(fam), k)
    with monkeypatch.context() as m:
        _reference(m)
        ref = _rows_key(nccl.family_rows(lines, CTX))
        fam, k = _mixed._family(lines, CTX)
        ref_mixed = (_rows_key(fam), k)
    assert got == ref
    assert got_mixed == ref_mixed


def test_family_rows_same_on_fixtures_and_real_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 0
    for p in _files():
        lines = _lines(p)
        marked = lines.str.contains_any(["NCCL", "torch", "Error", "rank"]).any()
        if not _common.is_ascii(lines) or not marked:
            continue
        n += 1
        _both_ways(lines, monkeypatch)
    assert n > 30


_WORDS = sorted(
    {w for x in CORPUS.to_list()[:4000] for w in re.split(r"(\s+)", x) if w}
    | {"NCCL", "INFO", "WARN", "[0]", "gpu-1:12:34", "[rank3]:", "3: ", "[default0]:", "Watchdog", "Error:"}
)


@st.composite
def _mixed_lines(draw: st.DrawFn) -> list[str]:
    """Real lines, lines mutated at one character, and lines of real words in a new order."""
    base = CORPUS.to_list()
    out = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            out.append(base[draw(st.integers(0, len(base) - 1))])
        elif kind == 1:
            x = base[draw(st.integers(0, len(base) - 1))]
            i = draw(st.integers(0, max(0, len(x) - 1)))
            c = draw(st.sampled_from(list("\t\x0b\x0c\r _-9:[]()#=>^")))
            out.append(x[:i] + c + x[i + 1 :])
        else:
            out.append("".join(draw(st.lists(st.sampled_from(_WORDS), min_size=0, max_size=12))))
    return out


@settings(max_examples=75, deadline=None, suppress_health_check=list(HealthCheck))
@given(_mixed_lines())
def test_family_rows_same_on_mutated_lines(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    _both_ways(pl.Series(lines, dtype=pl.String), monkeypatch)


def _split_all_ref(text: pl.Series) -> pl.Series:
    """`_common._split_all` before its rounds could end early (verbatim, ASCII classes aside)."""
    df = pl.DataFrame({"rest": text.cast(pl.String)}).with_columns(
        rank=pl.lit(None, dtype=pl.Int32),
        rank_source=pl.lit(None, dtype=pl.String),
        host=pl.lit(None, dtype=pl.String),
        pid=pl.lit(None, dtype=pl.Int64),
    )
    for _ in range(3):
        for name, pattern in ENVELOPES:
            py = pattern.replace("(?<", "(?P<")
            groups = re.findall(r"\(\?P<(\w+)>", py)
            df = df.with_columns(_hit=pl.col("rest").str.contains(py))
            if not df.get_column("_hit").any():
                continue
            hit = pl.col("_hit")
            upd: dict[str, pl.Expr] = {}
            if "rank" in groups:
                got = pl.col("rest").str.extract(py, groups.index("rank") + 1).cast(pl.Int32, strict=False)
                upd["rank"] = pl.when(hit).then(got).otherwise(pl.col("rank"))
                upd["rank_source"] = pl.when(hit).then(pl.lit(name)).otherwise(pl.col("rank_source"))
            if "host" in groups:
                got_host = pl.col("rest").str.extract(py, groups.index("host") + 1)
                upd["host"] = pl.when(hit).then(got_host).otherwise(pl.col("host"))
            if "pid" in groups:
                got_pid = pl.col("rest").str.extract(py, groups.index("pid") + 1).cast(pl.Int64, strict=False)
                upd["pid"] = pl.when(hit).then(got_pid).otherwise(pl.col("pid"))
            upd["rest"] = pl.when(hit).then(pl.col("rest").str.replace(py, "")).otherwise(pl.col("rest"))
            df = df.with_columns(**upd)
    return df.drop("_hit", strict=False).to_struct("envelope")


_PREFIXES = [
    "3: ", " 12: ", "[default0]:", "[default1]: ", "[rank7]:", "[rank: 2] ", "[1,5]<stdout>:",
    "[1,5]<stderr>: ", "stdout: ", "stderr F ", "(RayWorker pid=123, ip=10.0.0.1) ", "(W pid=9) ",
    "[host-1:3]", "[h.a:0] ", "gpu-node-01: ", "10.0.0.2: ", "RuntimeError: ", "", "  ", "x",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PREFIXES), max_size=5), min_size=1, max_size=30), st.booleans())
def test_split_all_same_as_three_full_rounds(stacks: list[list[str]], ascii: bool) -> None:
    text = pl.Series([("".join(s) + "NCCL INFO x") if s else None for s in stacks], dtype=pl.String)
    with _common.ascii_scope(ascii):
        got = _common._split_all(text)
    assert got.equals(_split_all_ref(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([79, 80, 81, 100, 120, 0, 3]), max_size=30), st.integers(0, 5))
def test_wrap_width_by_bytes_on_ascii(lengths: list[int], take: int) -> None:
    texts = pl.Series([("x" * k) for k in lengths] + CORPUS.to_list()[: take * 50], dtype=pl.String)
    assert nccl._wrap_width(texts, True) == nccl._wrap_width(texts)
