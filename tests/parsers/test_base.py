"""`parsers.base.lines_from_bytes`: the one place bytes become numbered lines, so its rules are pinned here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsers import base
from parsers.base import lines_from_bytes


@pytest.fixture(scope="module")
def monkeypatch_reader() -> Iterator[None]:
    """Every input of two bytes or more takes the CSV-reader path of `lines_from_bytes`."""
    mp = pytest.MonkeyPatch()
    mp.setattr(base, "READER_SPLIT_MIN", 2)
    yield
    mp.undo()


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


_PIECES = [b"\n", b"\r", b"\r\n", b"a", b" ", b"\xff", "é".encode(), b"\t", b'"', b",", b"\x00"]
_PIECES += [b"\xef\xbb\xbf", b"\x1f", b"\xf0\x9f"]


@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_the_reader_path_follows_the_same_rules(monkeypatch_reader: None, parts: list[bytes]) -> None:
    """Large inputs are cut by polars' CSV reader: the same lines as the reference, whatever the bytes."""
    data = b"".join(parts)
    assert lines_from_bytes(data).to_list() == _reference(data)


def test_the_reader_path_on_a_large_chunk() -> None:
    rows = [f"{i}: NCCL INFO \"quoted\", comma\tand tab é \xff" if i % 7 else "" for i in range(200_000)]
    data = "\r\n".join(rows).encode("utf-8", errors="surrogatepass") + b"\n\xff\xfe broken\nlast\r"
    assert len(data) >= base.READER_SPLIT_MIN
    assert lines_from_bytes(data).to_list() == _reference(data)
    one_line = b"x" * (base.READER_SPLIT_MIN * 3) + b"\n"
    assert lines_from_bytes(one_line).to_list() == _reference(one_line)
