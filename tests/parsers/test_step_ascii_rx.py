"""`_step_grammars.ascii_classes`: on ASCII text a regex with ASCII classes matches where the original does, with
the same groups (the step-log parser and `_mixed` run those on ASCII lines, `step_log.ascii_scope`)."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from parsers import _mixed, step_log
from parsers import _step_grammars as g
from parsers.base import FileContext
from tests.parsers._regexes import CLASSY, classy_regexes

FIX = Path(__file__).parent.parent / "fixtures"


def _patterns() -> list[str]:
    found = classy_regexes((g, step_log, _mixed))
    # the templated ones
    for stat in ("Mn", "Mx"):
        for metric in g.STRAGGLER_METRICS:
            found.add(g.STRAGGLER_ITEM_RE.format(metric=stat + metric, num=g.NUM))
    return sorted(found)


PATTERNS = _patterns()


def _corpus() -> list[str]:
    lines: list[str] = []
    for p in sorted(FIX.rglob("*")):
        if p.is_file() and p.stat().st_size < 2_000_000:
            text = p.read_bytes().decode("utf-8", "replace")
            lines += [x for x in text.splitlines() if x.isascii()][:400]
    rnd = random.Random(7)
    alphabet = "ab Z9_0.:-|()[]{}/\\\t\x0b\x0c\r\x1c\x1f\x7f\"',=+eE^$*#>"
    for _ in range(3000):
        lines.append("".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))))
    # lines with whitespace and word characters at the edges of the classes: mutations of real ones
    for x in list(lines[:2000]):
        if x:
            i = rnd.randrange(len(x))
            lines.append(x[:i] + rnd.choice("\t\x0b\x0c\r\x1c\x1d\x1e\x1f _-9") + x[i + 1 :])
    return lines


CORPUS = pl.Series("t", _corpus(), dtype=pl.String)


def test_corpus_is_ascii() -> None:
    assert step_log.is_ascii(CORPUS)
    assert not step_log.is_ascii(pl.Series(["abc", "é"]))
    assert step_log.is_ascii(pl.Series([None, "x"], dtype=pl.String))


def test_patterns_found() -> None:
    assert len(PATTERNS) > 100
    assert g.TS_RE in PATTERNS and _mixed._EDGES in PATTERNS


@pytest.mark.parametrize("i", range(len(PATTERNS)))
def test_same_matches_on_ascii(i: int) -> None:
    p = PATTERNS[i]
    a = g.ascii_classes(p)
    assert not CLASSY.search(a.replace(r"(?-u:\b)", "").replace(r"(?-u:\B)", "").replace("\\\\", ""))
    assert CORPUS.str.contains(p).equals(CORPUS.str.contains(a))
    old, new = CORPUS.str.extract_groups(p), CORPUS.str.extract_groups(a)
    if old.dtype != pl.Struct({}):  # (a regex with groups)
        assert old.struct.unnest().equals(new.struct.unnest(), null_equal=True)
    assert CORPUS.str.replace_all(p, "<>").equals(CORPUS.str.replace_all(a, "<>"))


def test_rewrite_shapes() -> None:
    assert g.ascii_classes(r"^\s*\d+[^\s(]\w\\d\x{41}\p{Nd}\pL\b") == (
        r"^[\t\n\x0B\f\r\x20]*[0-9]+[^[\t\n\x0B\f\r\x20](][0-9A-Za-z_]\\d\x{41}\p{Nd}\pL(?-u:\b)"
    )


def test_scope_nests_and_restores() -> None:
    assert not step_log._ascii
    with step_log.ascii_scope(True):
        assert step_log._rx(r"\d") == "[0-9]"
        with step_log.ascii_scope(False):
            assert step_log._rx(r"\d") == r"\d"
        assert step_log._ascii
    assert not step_log._ascii and step_log._rx(r"\d") == r"\d"
    with pytest.raises(ValueError), step_log.ascii_scope(True):
        raise ValueError
    assert not step_log._ascii


@pytest.mark.parametrize("module", ["step_log", "_common"])
def test_scope_is_each_threads_own(module: str) -> None:
    """A thread reading ASCII lines does not switch the regexes of another thread reading other lines (a Dask
    worker runs its tasks in threads of one process)."""
    import threading

    from parsers import _common

    mod = {"step_log": step_log, "_common": _common}[module]
    rx = step_log._rx if module == "step_log" else _common.arx
    inside, checked = threading.Event(), threading.Event()
    seen: list[object] = []

    def ascii_reader() -> None:
        with mod.ascii_scope(True):
            seen.append(rx(r"\d"))
            inside.set()
            checked.wait(10)
            seen.append(rx(r"\d"))

    t = threading.Thread(target=ascii_reader)
    t.start()
    assert inside.wait(10)
    other = (bool(mod._ascii), rx(r"\d"))
    with mod.ascii_scope(False):
        checked.set()
        t.join(10)
    assert other == (False, r"\d")
    assert seen == ["[0-9]", "[0-9]"] and not mod._ascii


def _same(a: object, b: object) -> bool:
    if set(a.tables) != set(b.tables):
        return False
    for name, df in a.tables.items():
        if df.schema != b.tables[name].schema or not df.equals(b.tables[name], null_equal=True):
            return False
    return (a.parsed, a.unrecognized, a.unrecognized_examples, a.notes) == (
        b.parsed,
        b.unrecognized,
        b.unrecognized_examples,
        b.notes,
    )


def test_parse_same_with_and_without_ascii_classes() -> None:
    """The general reading and the mixed reading of the ASCII step-log and torch-distributed fixtures give
    the same result with ASCII classes as with Unicode ones."""
    ctx = FileContext(path="x", node="n", first_line=1)
    n = 0
    for p in sorted([*(FIX / "step-log").iterdir(), *(FIX / "torch-distributed").iterdir()]):
        if not p.is_file() or p.name.endswith(".jsonl"):
            continue
        lines = pl.Series(p.read_bytes().decode("utf-8", "replace").splitlines(), dtype=pl.String)
        if not step_log.is_ascii(lines):
            continue
        n += 1
        with step_log.ascii_scope(True):
            got = step_log._parse(lines, ctx)
        ref = step_log._parse(lines, ctx)
        assert _same(got, ref), p
        fam, k = _mixed._family(lines, ctx, ascii=True)
        fam_ref, k_ref = _mixed._family(lines, ctx)
        assert k == k_ref and fam.understood.equals(fam_ref.understood), p
    assert n > 20
