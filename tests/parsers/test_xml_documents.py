"""`nvidia_smi_xml._documents` (where each document of a file starts) against the code it replaced, which
counted every match's newlines from the start of the text again (a 16 MB `-q -x` loop: 6 s a chunk)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nvidia_smi_xml
from tests.conftest import FIXTURES


def _documents_before(texts: list[str]) -> list[tuple[int, int]]:
    """The replaced `_documents`, verbatim."""
    joined = "\n".join(texts)
    if joined.count("\n") == len(texts) - 1:
        # (the lines holding the literals found in the joined text: a line holds it iff the text does there)
        starts = [
            i
            for i in dict.fromkeys(joined.count("\n", 0, m.start()) for m in re.finditer(r"<\?xml", joined))
            if texts[i].lstrip("\ufeff \t").startswith("<?xml")
        ]
        if not starts:
            at = joined.find("<nvidia_smi_log")
            starts = [joined.count("\n", 0, at)] if at >= 0 else [0]
    else:  # (a line holding a newline itself)
        starts = [i for i, t in enumerate(texts) if t.lstrip("\ufeff \t").startswith("<?xml")]
        if not starts:
            starts = [i for i, t in enumerate(texts) if "<nvidia_smi_log" in t][:1] or [0]
    starts = sorted(set(starts))
    ends = [*starts[1:], len(texts)]
    return list(zip(starts, ends, strict=True))


def test_documents_of_a_loop_of_real_dumps() -> None:
    for path in sorted((FIXTURES / "nvidia-smi-xml").glob("*.xml")):
        texts = path.read_text().splitlines() * 7
        got = nvidia_smi_xml._documents(texts)
        assert got == _documents_before(texts) and len(got) >= 7, path.name


@given(
    st.lists(
        st.sampled_from(
            ['<?xml version="1.0" ?>', " <?xml x", "a <?xml", "<nvidia_smi_log>", "x", "", "\ufeff<?xml"]
            + ["<?xml\n<?xml", "\t<?xml y <?xml"]
        ),
        max_size=60,
    )
)
@settings(max_examples=300, deadline=None)
def test_documents_as_before(texts: list[str]) -> None:
    assert nvidia_smi_xml._documents(texts) == _documents_before(texts)
