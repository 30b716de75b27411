"""The HTML report and the ticket texts: self-contained, escaped, complete, redacted, bounded in size."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from markupsafe import escape

from forensics.outputs import write_json, write_table
from forensics.schema import empty
from reports.render import build_context, mask_templates, render, write_report

XSS_RAW = "<script>alert('xss')</script>"


class _Collector(HTMLParser):
    """Collects tags, attributes and text; html.parser raises nothing, so structure is checked by hand."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []
        self.scripts = 0

    VOID = frozenset({"meta", "input", "br", "hr", "img", "link", "wbr", "col", "source"})

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self.scripts += 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Collector:
    p = _Collector()
    p.feed(html)
    p.close()
    assert p.stack == [], f"unclosed: {p.stack}"  # every element we open is closed, in order
    return p


def test_report_parses_is_self_contained_and_shows_everything(synth_out) -> None:
    s = synth_out(nodes=8)
    path = write_report(s["out"])
    html = path.read_text(encoding="utf-8")
    p = _parse(html)
    names = [t for t, _ in p.tags]
    assert names[:1] == ["html"] and "svg" in names and "table" in names
    # no network at view time: nothing loaded from http(s), no external scripts or styles at all
    for tag, attrs in p.tags:
        for k in ("src", "href", "xlink:href", "action", "data"):
            v = attrs.get(k) or ""
            assert not re.match(r"\s*(https?:)?//", v), (tag, k, v)
        assert tag != "link" and not (tag == "script" and "src" in attrs)
    assert not re.search(r"url\(\s*['\"]?\s*(https?:)?//", html)
    assert "@import" not in html and "@font-face" not in html
    assert p.scripts == 1  # only our own table script; every `<script>` from a log is text
    text = "".join(p.text)
    # verdict first, with node, GPU, since when, cost and action
    verdict = html.index('id="verdict"')
    assert verdict < html.index('id="pictures"') < html.index('id="findings"') < html.index('id="tickets"')
    for needle in (s["bad"], f"GPU {s['bad_gpu']}", "since 2026-03-01T10:02:00Z", "18.0 % slower", "12.5 GPU-hours",
                   "Drain the node and RMA the GPU"):
        assert needle in text, needle
    # the step chart marks anomalies and the incident; the heatmap and timeline name the suspect
    assert html.count('class="span"') == 2 and "F1 first seen" in text
    assert 'class="rowlabel sus"' in html and "F1 cause" in text
    # alternatives and the clock-quality counts
    assert "Application bug <in kernel>" in text
    assert "inherited" in text and "exact" in text
    assert "What was read, by format" in text and "kernel-log" in text


def test_every_evidence_line_is_present_and_escaped(synth_out) -> None:
    s = synth_out(nodes=4)
    html = write_report(s["out"]).read_text(encoding="utf-8")
    doc = json.loads((s["out"] / "findings.json").read_text())
    text = "".join(_parse(html).text)
    lines = [e["text"] for f in doc["findings"] for e in f["evidence"]]
    assert lines and any(XSS_RAW in t for t in lines)
    for t in lines:
        assert str(escape(t)) in html  # escaped in the markup
        assert t in text  # and shown verbatim as text
    assert XSS_RAW not in html
    assert "</script><img" not in html  # the unrecognised line that tries to close the script
    assert "weird line </script><img src=x onerror=alert(1)>" in text
    assert "onerror=alert(1)>" not in html.replace("&gt;", ">").split("<body>")[0]


def test_ticket_appendix_and_text_file(synth_out) -> None:
    s = synth_out(nodes=6)
    html = write_report(s["out"]).read_text(encoding="utf-8")
    start = html.index('id="tickets"')
    section = html[start : html.index('id="coverage"')]
    for v in (s["serial"], s["uuid"], s["bus"], "NVIDIA H100 80GB HBM3", "96.00.74.00.01", "535.183.01", "12.2",
              "28.39.1002", "DEGRADED", "hw thermal slowdown", "row remapping failure"):
        assert v in section, v
    ticket = s["out"] / f"ticket-{s['bad']}-gpu{s['bad_gpu']}.txt"
    t = ticket.read_text(encoding="utf-8")
    for v in (s["serial"], s["uuid"], s["bus"], "96.00.74.00.01", XSS_RAW, "2026-03-01T10:02:00Z  XID 79",
              f"[{s['bad']}/dmesg.log:812]", "row remap FAILURE:", "Gen4 x16 / Gen5 x16 — DEGRADED",
              "| Memory                    | Fail - GPU 5: row remapping failure        |"):
        assert v in t, v
    import hashlib

    assert hashlib.sha256(f"{s['bad']}/dmesg.log".encode()).hexdigest() in t
    assert [p.name for p in s["out"].glob("ticket-*.txt")] == [ticket.name]
    assert "&lt;" not in t  # plain text is not HTML-escaped


def test_redaction_is_consistent_and_keeps_serials(synth_out) -> None:
    s = synth_out(nodes=5)
    html = write_report(s["out"], redact=True).read_text(encoding="utf-8")
    tickets = list(s["out"].glob("ticket-*.txt"))
    assert len(tickets) == 1
    t = tickets[0].read_text(encoding="utf-8")
    for doc in (html, t):
        assert "gpu-node-" not in doc
        assert "alice" not in doc and "192.168." not in doc and "10.0.0." not in doc
        assert s["serial"] in doc and s["uuid"] in doc and s["bus"] in doc
        assert "96.00.74.00.01" in doc  # a VBIOS is not an IP address
    # the suspect keeps one placeholder everywhere: verdict, heatmap row, ticket file name and text
    ctx = build_context(s["out"])
    from reports.redact import redact_context

    r = redact_context(ctx)
    placeholder = r.suspects[0].node
    assert re.fullmatch(r"host-\d\d", placeholder)
    assert tickets[0].name == f"ticket-{placeholder}-gpu{s['bad_gpu']}.txt"
    assert f"host:                        {placeholder}" in t
    assert placeholder in r.verdict["text"]
    assert any(row["label"] == placeholder and row["kind"] == "suspect" for row in r.heatmap["rows"])  # type: ignore[index]
    # distinct hosts get distinct placeholders
    labels = [row["label"] for row in r.heatmap["rows"] if row["kind"] != "band"]  # type: ignore[index]
    assert len(set(labels)) == len(labels)
    assert "user-01" in html and "ip-01" in html


def test_size_budget_on_a_1000_node_out(synth_out) -> None:
    s = synth_out(nodes=1000, samples=8, steps=60, incident_step=40, minor_findings=5000)
    t = time.perf_counter()
    path = write_report(s["out"])
    took = time.perf_counter() - t
    size = path.stat().st_size
    assert size < 5 * 1024 * 1024, size
    assert took < 10, took
    html = path.read_text(encoding="utf-8")
    assert html.count('class="rowlabel') <= 20 + 2 + 14 + 1  # top-N heatmap rows, band, timeline rows
    assert s["bad"] in html
    assert "The first 200 of 5001 shown" in html  # thousands of low/info findings stay in findings.json


def test_report_without_findings_or_tables(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for t in ("events", "steps", "gpu_samples", "inventory", "comms", "anomalies", "files"):
        write_table(empty(t), t, out / "tables")
    write_json(out / "manifest.json", {"schema_version": 1, "bundle": "b", "files": []})
    write_json(out / "findings.json", {
        "schema_version": 1, "bundle": "b", "job": {"nodes": 0, "gpus": 0, "start": None, "end": None,
                                                    "step_time_baseline_s": None},
        "findings": [], "coverage": {"files": 0, "parsed_lines": 0, "unrecognized_lines": 0, "skipped_files": 0,
                                     "error_files": 0, "by_format": {}}})
    html = write_report(out).read_text(encoding="utf-8")
    assert "No fault found." in html and 'id="tickets"' not in html
    _parse(html)


def test_estimated_impact_when_findings_carry_none(synth_out) -> None:
    s = synth_out(nodes=4, with_impact=False)
    ctx = build_context(s["out"])
    assert ctx.verdict["estimated"] is True
    assert "% slower" in ctx.verdict["cost"] and "estimated" in ctx.verdict["cost"]
    assert "Most likely root cause" in render(ctx)


def test_mask_templates_groups_like_lines() -> None:
    lines = pl.Series([
        "node17:123:456 [0] NCCL WARN Call to ibv_reg_mr failed: 12",
        "node18:9:10 [3] NCCL WARN Call to ibv_reg_mr failed: 14",
        "open /var/log/x/y.log failed at 0x7f3a for 0000:3b:00.0 from 10.1.2.3:5000",
    ])
    m = mask_templates(lines).to_list()
    assert m[0] == m[1] == "node<*> [<*>] NCCL WARN Call to ibv_reg_mr failed: <*>"
    assert m[2] == "open <*> failed at <*> for <*> from <*>"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on this machine")
def test_opens_in_headless_chromium_without_errors_or_network(synth_out, tmp_path: Path) -> None:
    s = synth_out(nodes=6)
    path = write_report(s["out"]).resolve()
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
        "--proxy-server=http://127.0.0.1:9",  # any network request fails loudly
        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--log-level=0",
        "--virtual-time-budget=2000", "--dump-dom", path.as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], console
    assert not re.search(r"net::ERR_|Refused to load|violates the following Content Security Policy", r.stderr)
    assert 'data-js="ready"' in r.stdout  # our script ran
    assert "alert('xss')" in r.stdout and "<script>alert" not in r.stdout  # still text after parsing


def test_any_log_text_stays_text(synth_out) -> None:
    """Property: whatever a log line holds, it renders as text, never as markup (one script tag only)."""
    import dataclasses

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    ctx = build_context(synth_out(nodes=3)["out"])

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.text(min_size=1, max_size=80) | st.sampled_from(["</script>", "<!--", "]]>", "<svg onload=x>", "{{ 7*7 }}"]))
    def check(line: str) -> None:
        f0 = dict(ctx.findings[0])
        f0["evidence"] = [{**f0["evidence"][0], "text": line}]
        html = render(dataclasses.replace(ctx, findings=[f0, *ctx.findings[1:]]))
        p = _parse(html)
        assert p.scripts == 1
        assert str(escape(line)) in html

    check()


def test_a_message_noted_of_many_files_is_one_line_of_the_report() -> None:
    """A thousand rank logs noted alike make one line (with how many and the first paths), where the first
    was; a note of one file, or of no file of the manifest, stays as it is, in its place."""
    from reports.render import _grouped_notes

    files = [{"path": f"node-{i:04d}/train_rank{i}.log"} for i in range(1000)] + [{"path": "a: b.log"}]
    msg = "one-line timer lines with no step line above them"
    notes = ["common top-level folder 'x' taken as the bundle's wrapper"]
    notes += [f"node-{i:04d}/train_rank{i}.log: {msg}" for i in range(1000)]
    notes.insert(2, "node-0007/train_rank7.log: 64 ring/tree/channel lines")
    notes.append("a: b.log: cut short")
    got = _grouped_notes(notes, files)
    assert got == [
        "common top-level folder 'x' taken as the bundle's wrapper",
        f"1000 files: {msg} (node-0000/train_rank0.log, node-0001/train_rank1.log, "
        "node-0002/train_rank2.log, …)",
        "node-0007/train_rank7.log: 64 ring/tree/channel lines",
        "a: b.log: cut short",
    ]
    one = f"node-0001/train_rank1.log: {msg}"
    assert _grouped_notes([one], files) == [one]


def test_a_ticket_lists_a_flood_first_and_last_with_each_code_and_counts_the_rest() -> None:
    """5,000 Xid 13 lines and one Xid 79 among them: the ticket lists the first 40, the Xid 79, the last 10,
    and says how many it left out between them; a short list is listed whole."""
    from datetime import UTC, datetime, timedelta

    from reports.render import TICKET_FIRST, TICKET_LAST, _ticket_rows

    t0 = datetime(2026, 11, 29, tzinfo=UTC)
    codes = ["13"] * 5000
    codes[3000] = "79"
    ev = pl.DataFrame(
        {
            "ts": [t0 + timedelta(seconds=i) for i in range(5000)],
            "kind": ["xid"] * 5000,
            "code": codes,
            "source": ["kernel"] * 5000,
            "file": ["n1/dmesg.log"] * 5000,
            "line": list(range(1, 5001)),
            "message": [f"NVRM: Xid (PCI:0000:3b:00): {c}, line {i + 1}" for i, c in enumerate(codes)],
        }
    )
    rows = _ticket_rows(ev, "XID/SXid")
    listed = [r["line"] for r in rows if r["kind"] != "…"]
    assert listed == [*range(1, TICKET_FIRST + 1), 3001, *range(5001 - TICKET_LAST, 5001)]
    gaps = [r["message"] for r in rows if r["kind"] == "…"]
    assert gaps[0].startswith(f"{3000 - TICKET_FIRST} more XID/SXid event(s)")
    assert gaps[1].startswith(f"{5000 - TICKET_LAST - 3001} more XID/SXid event(s)") and len(gaps) == 2
    assert [r["line"] for r in _ticket_rows(ev.head(50), "XID/SXid")] == list(range(1, 51))


def test_a_ticket_counts_the_rows_a_thinned_flood_left_out() -> None:
    """Events the analysis read thinned (`weight`: the rows a row stands for): the ticket's positions and
    its counts of left-out events are those of every row, and a short but thinned list says what it lacks."""
    from datetime import UTC, datetime, timedelta

    from reports.render import TICKET_FIRST, TICKET_LAST, _ticket_rows

    t0 = datetime(2026, 11, 29, tzinfo=UTC)
    # 50 first rows, then one row in 100 of 9,900 rows, then the last 50: 10,000 Xid 13 lines in 199 rows
    lines = [*range(1, 51), *range(51, 9951, 100), *range(9951, 10001)]
    weight = [1] * 50 + [100] * 99 + [1] * 50
    ev = pl.DataFrame(
        {
            "ts": [t0 + timedelta(seconds=x) for x in lines],
            "kind": ["xid"] * len(lines),
            "code": ["13"] * len(lines),
            "source": ["kernel"] * len(lines),
            "file": ["n1/dmesg.log"] * len(lines),
            "line": lines,
            "message": [f"NVRM: Xid (PCI:0000:3b:00): 13, line {x}" for x in lines],
            "weight": pl.Series(weight, dtype=pl.UInt32),
        }
    )
    rows = _ticket_rows(ev, "XID/SXid")
    listed = [r["line"] for r in rows if r["kind"] != "…"]
    assert listed == [*range(1, TICKET_FIRST + 1), *range(10001 - TICKET_LAST, 10001)]
    gaps = [r["message"] for r in rows if r["kind"] == "…"]
    assert gaps == [f"{10000 - TICKET_FIRST - TICKET_LAST} more XID/SXid event(s) here, left out of the ticket "
                    "(all are in OUT/tables/events and the report's timeline)"]
    # 3 rows standing for 201 events: positions 0, 1 and 101 of 201, the last within the middle left out; the
    # count at the end is of the 199 events after the second
    rows = _ticket_rows(ev.slice(49, 3), "XID/SXid")
    assert [r["line"] for r in rows] == [50, 51, ""] and rows[2]["message"].startswith("199 more XID/SXid")
