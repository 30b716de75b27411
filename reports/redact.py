"""Consistent redaction of host names, user names and IP addresses in the report (serials/UUIDs kept).

The same real value always maps to the same placeholder (host-01, ip-01, user-01) across the whole
context — findings, charts, tickets, file paths — so the report still reads coherently. Serials, UUIDs,
bus ids, versions and sha256 are left alone: a vendor needs them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from reports.render import ReportContext

# An IPv4 address not embedded in a longer dotted number (a VBIOS like 96.00.74.00.01 is not an IP).
IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?!\.?\d)")
USER = re.compile(r"(/home/|/Users/|\buser[= :]|\bUSER=|\busername[= :])([A-Za-z_][\w.-]*)")
# A host name is not part of a longer name ("node-1" inside "node-10"), but may touch "_", "/" or "."
# as in "logs/node-1_dmesg.log" or "node-1.cluster.local".
_EDGE_L = r"(?<![A-Za-z0-9-])"
_EDGE_R = r"(?![A-Za-z0-9-])"


class Redactor:
    """Maps each distinct host / IP / user to a stable placeholder (host-01, ip-01, user-01)."""

    def __init__(self, hosts: list[str]) -> None:
        uniq = sorted({h for h in hosts if h and h != "unknown"})
        self.hosts = {h: f"host-{i:02d}" for i, h in enumerate(uniq, 1)}
        self.ips: dict[str, str] = {}
        self.users: dict[str, str] = {}
        names = sorted(self.hosts, key=len, reverse=True)
        self._host_re = re.compile(_EDGE_L + "(?:" + "|".join(re.escape(h) for h in names) + ")" + _EDGE_R) if names else None

    def text(self, s: str) -> str:
        if self._host_re is not None:
            s = self._host_re.sub(lambda m: self.hosts[m.group(0)], s)
        s = IPV4.sub(lambda m: self.ips.setdefault(m.group(0), f"ip-{len(self.ips) + 1:02d}"), s)
        return USER.sub(lambda m: m.group(1) + self.users.setdefault(m.group(2), f"user-{len(self.users) + 1:02d}"), s)

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        if isinstance(v, dict):
            return {self.value(k) if isinstance(k, str) else k: self.value(x) for k, x in v.items()}
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.replace(v, **{f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)})
        return v


def hosts_of(ctx: ReportContext) -> list[str]:
    """Every host name the context knows: files' nodes, suspects, findings, chart rows."""
    hosts = list(ctx.nodes) + [f["node"] for f in ctx.files if f.get("node")]
    hosts += [s.node for s in ctx.suspects]
    hosts += [f["node"] for f in ctx.findings if f.get("node")]
    hosts += [c["node"] for f in ctx.findings for c in f.get("context", []) if c.get("node")]
    for chart in (ctx.heatmap, ctx.timeline):
        if chart:
            hosts += [r["label"] for r in chart["rows"] if r.get("kind", "node") in ("node", "suspect")]
    return hosts


def redact_context(ctx: ReportContext, extra_hosts: list[str] | None = None) -> ReportContext:
    """Return a copy of the context with hosts, IPs and user names replaced consistently."""
    return Redactor(hosts_of(ctx) + list(extra_hosts or [])).value(ctx)
