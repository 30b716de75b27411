"""Round 13 (helper a): the sniffers changed give the very score of their old forms (kept verbatim in
`_sniff13a_ref.py`) on the fixtures' heads and on seeded mutations of them: cut at random bytes, lines
shuffled and duplicated, the literals their gates look for inserted at random places, CRLF, non-ASCII."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from parsers import kernel_log, step_log
from parsers._sniff import head_text
from tests.parsers import _sniff13a_ref as ref

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

PAIRS = [(step_log.sniff, ref.step_log_sniff), (kernel_log.sniff, ref.kernel_log_sniff)]


def _fixture_heads() -> list[bytes]:
    return [
        p.read_bytes()[:16384]
        for p in sorted(FIXTURES.rglob("*"))
        if p.is_file() and not p.name.endswith(".expected.jsonl")
    ]


def _plan_literals(plan: object) -> set[str]:
    """Every anchor string of a `gate_plan` (with `_by_in`'s finders or not)."""
    if plan is None:
        return set()
    _guards, _masks, probes = plan  # type: ignore[misc]
    return {a for reqs in probes if reqs for req in reqs for _m, anchors in req for a, _f in anchors}


LITERALS = sorted(
    _plan_literals(step_log._SNIFF_GATE)
    | _plan_literals(step_log._OTHER_GATE[0] if step_log._OTHER_GATE else None)
    | {
        " NCCL INFO ",
        "NCCL version 2.18.5+cuda12.2",
        "Communicators...",
        "Job summary",
        "kernel: ",
        "NVRM: ",
        "[    1.000000] ",
        "Thu Mar 27 02:56:48 2025 ",
        "step: 5  loss: 1.0  memory: 3GiB",
        "[rank0]:",
        "é",
        "\u2028",
        "\x85",
        "\x1b[1m",
        "2025-03-23T19:19:26,995220+00:00 ",
        "<6>[    2.5] ",
        "6,123,4567,-;",
        "Mar 27 02:56:48 node1 kernel: ",
        "node1: ",
        "btime 1700000000",
        "Time zone: UTC",
        "mlx5_core: ",
    }
)

FIXTURE_HEADS = _fixture_heads()


def _mutations(heads: list[bytes], seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    texts = [head_text(h) for h in heads]
    all_lines = [ln for t in texts for ln in t.splitlines()[:300]]
    out: list[bytes] = []
    for _ in range(n):
        h = rnd.choice(heads)
        t = head_text(h)
        lines = t.splitlines()
        op = rnd.randrange(7)
        if op == 0:  # cut at a random byte (maybe inside a UTF-8 sequence)
            out.append(h[: rnd.randrange(len(h) + 1)])
        elif op == 1 and lines:  # lines shuffled, some duplicated
            got = lines[:400] + [rnd.choice(lines) for _ in range(rnd.randrange(5))]
            rnd.shuffle(got)
            out.append("\n".join(got).encode())
        elif op == 2:  # gate literals inserted at random places
            s = t
            for _ in range(rnd.randrange(1, 6)):
                at = rnd.randrange(len(s) + 1)
                s = s[:at] + rnd.choice(LITERALS) + s[at:]
            out.append(s.encode()[:16384])
        elif op == 3 and lines:  # a line of a literal added among the lines
            got = lines[:400]
            for _ in range(rnd.randrange(1, 4)):
                got.insert(rnd.randrange(len(got) + 1), rnd.choice(LITERALS) + rnd.choice(all_lines))
            out.append("\n".join(got).encode())
        elif op == 4:  # CRLF
            out.append(t.replace("\n", "\r\n").encode()[:16384])
        elif op == 5:  # non-ASCII characters
            s = t
            for _ in range(rnd.randrange(1, 4)):
                at = rnd.randrange(len(s) + 1)
                s = s[:at] + rnd.choice(["é", "\u2028", "\x85", "日本", "\ufffd"]) + s[at:]
            out.append(s.encode())
        else:  # lines of other heads mixed in
            got = lines[:300]
            for _ in range(rnd.randrange(1, 10)):
                got.insert(rnd.randrange(len(got) + 1), rnd.choice(all_lines))
            out.append("\n".join(got).encode())
    return out


MUTATED_HEADS = _mutations(FIXTURE_HEADS, seed=13, n=3000)

EDGE_HEADS = [
    b"",
    b"\n",
    b"step: 5  loss: 1.0  memory: 3GiB\n",
    b"step: 5  loss: 1.0  memory: 3GiB\n[    1.000] x\n",
    b"step: 5  loss: 1.0  memory: 3GiB\nhost: kernel: y\n",
    b"step: 5  loss: 1.0  memory: 3GiB\nThu Mar 27 02:56:48 2025\n",
    b"step: 5  loss: 1.0  memory: 3GiB\nx torch.distributed.elastic y\n",
    b"step: 5  loss: 1.0  memory: 3GiB\nx ProcessGroupNCCL y\n",
    b"---------- arguments ----------\n",
    b"Trainer is initialized with x\n",
    b"> building GPT model\n",
    b"x STRAGGLER DETECTION WARNING: y\n",
    b"DeepSpeed info: version=0.1\n",
    b"performance: x\n",
    # kernel lines of several styles in one head (`kernel_log._strong_hits` tries the last one's style first)
    b"[    1.000000] a\n2025-03-23T19:19:26,995220+00:00 b\n[    2.000000] c\nMar 27 02:56:48 n kernel: d\n",
    b"<6>1 2024-01-01T00:00:00Z h k - - - x\n[    1.0] a\n[    1.1] b\nx\ny\n[    1.2] c\n",
    b"node1: [    1.000000] a\nnode1: 2025-03-23T19:19:26,995220+00:00 b\nnode2: x\n",
    b"kernel: NVRM: Xid 79\nkernel: NVRM: Xid 79\n",
]


@pytest.mark.parametrize("kind", ["fixtures", "mutated", "edges"])
def test_sniffers_equal_their_old_forms(kind: str) -> None:
    heads = {"fixtures": FIXTURE_HEADS, "mutated": MUTATED_HEADS, "edges": EDGE_HEADS}[kind]
    for new, old in PAIRS:
        for head in heads:
            for name in ("x.log", "worker.log"):
                assert new(head, name) == old(head, name), (new.__module__, head[:300])


def test_by_in_finds_as_the_regex() -> None:
    """`step_log._by_in`'s finders: None exactly where the anchor is absent."""
    rnd = random.Random(5)
    texts = [head_text(h) for h in FIXTURE_HEADS[:40]] + ["", "a", "tep", "performance:x"]
    for a in LITERALS:
        f = step_log._in_finder(a)
        for t in texts + [t[: rnd.randrange(len(t) + 1)] + a for t in texts[:10]]:
            assert (f(t) is None) == (a not in t)


def test_paired_search_tells_both_absent() -> None:
    """`step_log._PAIRED_SEARCH` finds nothing exactly where none of `_PAIRED` is in the text."""
    assert step_log._PAIRED == ("tep", "tim")
    texts = [head_text(h) for h in FIXTURE_HEADS + MUTATED_HEADS[:300] + EDGE_HEADS]
    texts += ["", "t", "te", "ti", "tep", "tim", "xtimex", "stepx", "t e p t i m"]
    for t in texts:
        assert (step_log._PAIRED_SEARCH(t) is None) == all(a not in t for a in step_log._PAIRED)
