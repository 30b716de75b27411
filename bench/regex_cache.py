"""What polars' regex cache costs the ingest of a bundle's small files (a script, not a test).

polars compiles a regex pattern each time it meets one that is not among the last 32 it used (its
`RegexCache`: a least-recently-used cache of 32 per thread, with no setting). A sequence of patterns that
cycles through more than 32 keeps nothing: every use of each compiles it again, 0.05-3 ms a pattern. This
script records the patterns the parsers hand polars' string namespaces (`contains`, `extract`, ... not the
literal ones), over the bundle's whole files in the workers' batches, as `bench/per_format.py` runs them, and
prints: the calls, the distinct patterns, the misses of one 32-entry LRU over that sequence (an upper bound:
each polars thread has its own cache) and their compile time (each pattern timed once after 40 others), the
patterns that cost most; then the cost of a compile measured as this machine pays it.

    python bench/regex_cache.py BUNDLE [--name train.log] [--top 15]
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import polars as pl
from polars.expr.string import ExprStringNameSpace
from polars.series.string import StringNameSpace

from forensics import bundle, ingest

CAPACITY = 32
"""polars' regex cache, entries per thread (`polars-utils` `RegexCache::new`)."""
METHODS = ("contains", "extract", "extract_groups", "extract_all", "replace", "replace_all", "count_matches", "find")


def _record(seq: list[str], where: dict[str, str]) -> None:
    """Wrap the string namespaces' regex methods to append each pattern used to `seq` (and where it was first
    used, a parser's frames, to `where`)."""

    def wrap(cls: Any, name: str) -> None:
        f = getattr(cls, name)

        def g(self: Any, *a: Any, **k: Any) -> Any:
            pat = a[0] if a else k.get("pattern")
            if isinstance(pat, str) and not k.get("literal", False):
                seq.append(pat)
                if pat not in where:
                    frames = [x for x in traceback.extract_stack()[:-1] if "/parsers/" in x.filename]
                    where[pat] = " < ".join(f"{Path(x.filename).stem}.{x.name}" for x in frames[-2:][::-1])
            return f(self, *a, **k)

        setattr(cls, name, g)

    for cls in (ExprStringNameSpace, StringNameSpace):
        for name in METHODS:
            if hasattr(cls, name):
                wrap(cls, name)


def compile_seconds(pattern: str) -> float:
    """One compile of `pattern` as polars pays it: used after `CAPACITY` + 8 others."""
    s = pl.Series(["x"])
    for i in range(CAPACITY + 8):
        s.str.contains(f"flush{i}")
    t = time.perf_counter()
    try:
        s.str.contains(pattern)
    except Exception:  # noqa: BLE001 - (a pattern polars refuses costs its failed compile)
        pass
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--name", help="only the files whose path ends with this")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    seq: list[str] = []
    where: dict[str, str] = {}
    _record(seq, where)
    b = bundle.open_bundle(a.bundle, Path(tempfile.mkdtemp()))
    files = sorted((f for f in b.files if not a.name or f.path.endswith(a.name)), key=lambda f: f.size, reverse=True)
    tasks = ingest._batched(ingest._tasks(files, {}), ingest.BATCH_FILES)

    def run() -> float:
        t = time.process_time()
        for f, k in tasks:
            group = f if k == ingest.BATCH else (f,)
            ingest.ingest_files(group, bundle.Limits(), None, None, [None] * len(group))
        return time.process_time() - t

    run()  # (imports, first compiles)
    seq.clear()
    cpu = run()
    lru: collections.OrderedDict[str, None] = collections.OrderedDict()
    misses: collections.Counter[str] = collections.Counter()
    for p in seq:
        if p in lru:
            lru.move_to_end(p)
        else:
            misses[p] += 1
            lru[p] = None
            if len(lru) > CAPACITY:
                lru.popitem(last=False)
    costs = sorted(((compile_seconds(p) * m, m, p) for p, m in misses.items()), reverse=True)
    total = sum(c for c, _, _ in costs)
    print(f"{len(files)} files in {len(tasks)} tasks, {cpu:.2f} s of CPU; {len(seq)} regex calls, "
          f"{len(set(seq))} distinct patterns, {sum(misses.values())} misses of one {CAPACITY}-entry LRU, "
          f"~{total:.3f} s of compiling ({100 * total / cpu:.1f} % of the CPU)")
    for c, m, p in costs[: a.top]:
        print(f"  {1000 * c:7.2f} ms  x{m:<4d} {where[p]:60.60s} {p[:60]!r}")


if __name__ == "__main__":
    main()
