"""The regexes a parser module holds with Unicode-aware classes (`\\d \\s \\w \\b` and their negations): the
patterns the ASCII-class rewrite (`_step_grammars.ascii_classes`) is checked on."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from types import ModuleType

import polars as pl

CLASSY = re.compile(r"\\[dswDSWbB]")


def _strings(x: object) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for v in x.values() for s in _strings(v)]
    if isinstance(x, (list, tuple, frozenset, set)):
        return [s for v in x for s in _strings(v)]
    return []


def classy_regexes(
    modules: Iterable[ModuleType], forms: Callable[[str], Iterable[str]] = lambda s: (s,)
) -> set[str]:
    """Every string held by the modules' globals (in dicts, lists, tuples and sets too) with a class escape,
    in each of its `forms`, that polars compiles as a regex."""
    found = set()
    for mod in modules:
        for name, value in vars(mod).items():
            if name.startswith("__"):
                continue
            for s in _strings(value):
                if not CLASSY.search(s):
                    continue
                for p in forms(s):
                    try:
                        pl.Series(["x"]).str.contains(p)
                    except Exception:  # (not a regex)
                        continue
                    found.add(p)
    return found
