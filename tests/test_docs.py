"""The README stays true: every parser is in its formats table, every command in its usage block."""

from __future__ import annotations

import re
from pathlib import Path

from parsers.registry import PARSERS

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_every_parser_is_in_the_readme_formats_table() -> None:
    block = re.search(r"<!-- formats:start.*?-->(.*)<!-- formats:end -->", README, re.S)
    assert block is not None, "README.md lost its formats block"
    for p in PARSERS:
        assert f"| `{p.NAME}` | {p.DESCRIPTION} |" in block.group(1), (
            f"parser {p.NAME} missing or described differently in README.md's formats table"
        )


def test_every_command_is_in_the_readme_usage() -> None:
    for cmd in ("run", "ingest", "analyze", "report", "formats", "explain", "simulate"):
        assert f"forensics {cmd}" in README, cmd


def test_readme_setup_commands_are_the_ci_commands() -> None:
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[test,dask]' && python -m pytest" in ci
    assert "pip install -e '.[test,dask]' && python -m pytest" in README
    assert "forensics run samples/incident-xid79 -o out" in README
