"""`parsers.base.lines_from_bytes`: the one place bytes become numbered lines, so its rules are pinned here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsers import base
from parsers.base import lines_from_bytes, lines_of_many


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


@given(
    st.lists(
        st.sampled_from([b"\n", b"\r\n", b"\r", b"abcdefghijklmno", b"x" * 31, "é".encode(), b"\xff", b"\t"]),
        max_size=300,
    )
)
def test_long_inputs_follow_the_rules(parts: list[bytes]) -> None:
    """Inputs of many 16-byte blocks (the compiled cut reads 16 bytes at a time, the tail byte by byte): line
    ends at every place in a block, non-ASCII bytes in a block or in the tail."""
    data = b"".join(parts)
    assert lines_from_bytes(data).to_list() == _reference(data)


def test_the_compiled_cut_of_many_short_lines() -> None:
    """Many more lines than the compiled cut first makes room for (one per 64 bytes): the same lines; ASCII
    and UTF-8 ones, one cut short at the end."""
    for data in (b"\n" * 100_000 + b"a\r\n" * 5_000 + b"tail", ("é\n" * 50_001).encode() + b"z" * 17):
        got = base._compiled_lines(data)
        if base.compiled("lines") is not None:
            assert got is not None
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


@given(st.lists(st.lists(st.sampled_from([*_PIECES, b"line\n"]), max_size=20), max_size=8))
def test_many_inputs_cut_together_give_each_its_own_lines(datas: list[list[bytes]]) -> None:
    """`lines_of_many` (a batch of small files cut in one call) makes each input's lines as `lines_from_bytes`
    does alone: empty inputs, `\\r`-only ones and inputs with and without `\\r` side by side."""
    inputs = [b"".join(parts) for parts in datas]
    got = lines_of_many(inputs)
    assert len(got) == len(inputs)
    for data, lines in zip(inputs, got, strict=True):
        alone = lines_from_bytes(data)
        assert lines.name == alone.name and lines.dtype == alone.dtype and lines.to_list() == _reference(data)


def test_many_inputs_with_a_large_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "READER_SPLIT_MIN", 8)  # the long input goes the reader's way, alone
    inputs = [b"a\nb\n", b"a long line\r\nend", b"", b"\n", b"x\ry"]
    assert [s.to_list() for s in lines_of_many(inputs)] == [_reference(d) for d in inputs]
