"""`parsers.base.lines_from_bytes`: the one place bytes become numbered lines, so its rules are pinned here."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from parsers.base import lines_from_bytes


def _reference(data: bytes) -> list[str]:
    """The rules, written plainly: UTF-8 with invalid bytes replaced; `\\n` or `\\r\\n` end lines (a file with
    `\\r` and no `\\n` is split on `\\r`); a final line end adds no empty line."""
    text = data.decode("utf-8", errors="replace")
    if "\n" not in text and "\r" in text:
        text = text.replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    if not text:
        return []
    return [t[:-1] if t.endswith("\r") else t for t in text.split("\n")]


@given(st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b"a", b" ", b"\xff", "é".encode(), b"\t"]), max_size=40))
def test_lines_follow_the_rules(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert lines_from_bytes(data).to_list() == _reference(data)


def test_edge_cases() -> None:
    assert lines_from_bytes(b"").to_list() == []
    assert lines_from_bytes(b"\n").to_list() == []
    assert lines_from_bytes(b"\n\n").to_list() == ["", ""]
    assert lines_from_bytes(b"a\r\nb\r\n").to_list() == ["a", "b"]
    assert lines_from_bytes(b"a\rb\r").to_list() == ["a", "b"]
    assert lines_from_bytes(b"a\r\r\nb").to_list() == ["a\r", "b"]
    assert lines_from_bytes(b"a\nb").to_list() == ["a", "b"]
