"""Golden-file tests: every fixture under tests/fixtures/<parser NAME>/ is detected as that parser and
parsed to exactly the rows in `<fixture>.expected.jsonl`. Refresh with `pytest --update-goldens`
and review the diff by hand.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from forensics.schema import conform
from parsers import registry
from parsers.base import HARNESS_LINE, FileContext, ParseResult, check_accounting, lines_from_bytes

FIXTURES = Path(__file__).parent.parent / "fixtures"
PARSER_DIRS = {p.NAME for p in registry.PARSERS}
CASES = sorted(
    p
    for p in FIXTURES.glob("*/*")
    if p.is_file() and p.parent.name in PARSER_DIRS and not p.name.endswith(".expected.jsonl")
)
YEAR_HINT = 2025  # fixtures with year-less times are read as if collected in 2025


def parse_fixture(path: Path, node: str = "node-fixture") -> tuple[ParseResult, pl.Series]:
    """Parse a fixture as ingest would, with harness annotation lines blanked (numbers kept)."""
    lines = lines_from_bytes(path.read_bytes())
    lines = pl.select(pl.when(lines.str.contains(HARNESS_LINE)).then(pl.lit("")).otherwise(lines)).to_series()
    parser = registry.get_parser(path.parent.name)
    ctx = FileContext(path=f"{path.parent.name}/{path.name}", node=node, year_hint=YEAR_HINT)
    return parser.parse(lines, ctx), lines


def _jsonable(v: object) -> object:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, float):
        return round(v, 6)
    return v


def render(result: ParseResult) -> str:
    """Text form of a ParseResult: a header line of counts, then one JSON row per table row (nulls left out)."""
    out = [
        json.dumps(
            {"parsed": result.parsed, "unrecognized": result.unrecognized, "partial": result.partial},
            sort_keys=True,
        )
    ]
    for table in sorted(result.tables):
        df = conform(result.tables[table], table)
        sort_cols = [c for c in ("file", "line", "record", "gpu_index", "attribute") if c in df.columns]
        df = df.sort(sort_cols, nulls_last=True, maintain_order=True)
        for row in df.iter_rows(named=True):
            kept = {k: _jsonable(v) for k, v in row.items() if v is not None and k != "file"}
            out.append(json.dumps({"table": table, **kept}, sort_keys=True, ensure_ascii=False))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_golden(path: Path, update_goldens: bool) -> None:
    head = path.read_bytes()[:65536]
    detected = registry.detect(head, path.name)
    assert detected.parser is not None and detected.parser.NAME == path.parent.name, (
        f"{path} detected as {detected.parser and detected.parser.NAME} (score {detected.score:.2f})"
    )
    result, lines = parse_fixture(path)
    assert check_accounting(result, lines), f"{path}: parsed + unrecognized + blank != lines"
    golden = path.with_name(path.name + ".expected.jsonl")
    text = render(result)
    if update_goldens or not golden.exists():
        golden.write_text(text, encoding="utf-8")
        if not update_goldens:
            pytest.fail(f"wrote new golden {golden}; review it and re-run")
        return
    assert text == golden.read_text(encoding="utf-8"), (
        f"{path} parses differently from {golden.name}; if the change is right, run: pytest --update-goldens"
    )
