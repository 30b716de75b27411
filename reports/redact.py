"""Consistent redaction of host names, user names and IP addresses in the report (serials/UUIDs kept)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from reports.render import ReportContext, Suspect

IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
USER = re.compile(r"(/home/|/Users/|user[= ]|USER=)([A-Za-z_][\w.-]*)")


class Redactor:
    """Maps each distinct host / IP / user to a stable placeholder (host-01, ip-01, user-01)."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = {h: f"host-{i:02d}" for i, h in enumerate(sorted(set(hosts), key=lambda h: (-len(h), h)), 1)}
        self.ips: dict[str, str] = {}
        self.users: dict[str, str] = {}
        self._host_re = (
            re.compile("|".join(re.escape(h) for h in sorted(self.hosts, key=len, reverse=True))) if self.hosts else None
        )

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
        if isinstance(v, Suspect):
            return dataclasses.replace(v, **{f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)})
        return v


def redact_context(ctx: ReportContext) -> ReportContext:
    """Return a copy of the context with hosts, IPs and user names replaced consistently (CSS left alone)."""
    hosts = [f["node"] for f in ctx.files if f.get("node") and f["node"] != "unknown"]
    hosts += [s.node for s in ctx.suspects]
    r = Redactor(hosts)
    return dataclasses.replace(
        ctx, **{f.name: r.value(getattr(ctx, f.name)) for f in dataclasses.fields(ctx) if f.name != "css"}
    )
