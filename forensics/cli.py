"""The `forensics` command line: the single place that turns library errors into one line and an exit code."""

from __future__ import annotations

import functools
import signal
import sys
import threading
import time
from collections.abc import Callable
from enum import Enum, IntEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from forensics import __version__
from forensics.errors import ForensicsError, UsageError

app = typer.Typer(
    name="forensics",
    help="Offline log forensics and root-cause analysis for GPU training clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
explain_app = typer.Typer(help="Explain a catalogued code (XID, SXid).", no_args_is_help=True)
app.add_typer(explain_app, name="explain")

err = Console(stderr=True)
_state = {"traceback": False}


class ExitCode(IntEnum):
    """Exit statuses of every command."""

    OK = 0
    FINDINGS = 1
    """--fail-on threshold reached."""
    USAGE = 2
    """Usage error, unreadable bundle or output folder."""


class FailOn(str, Enum):
    """Severity threshold for --fail-on."""

    critical = "critical"
    high = "high"
    medium = "medium"


PROGRESS_EVERY_S = 0.05
"""The ingest progress bar is updated at most this often (and at the last file)."""

F = TypeVar("F", bound=Callable[..., Any])


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def boundary(fn: F) -> F:
    """Turn ForensicsError into `Error: …` on stderr and exit status 2 (or re-raise with --traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # SIGTERM (a scheduler's or `kill`'s) takes the Ctrl-C path, which stops the worker processes
        # and leaves no half-written output; only in the main thread, where signals can be set
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _terminate)
        try:
            return fn(*args, **kwargs)
        except ForensicsError as exc:
            if _state["traceback"]:
                raise
            err.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(ExitCode.USAGE) from None
        except KeyboardInterrupt:
            err.print("Interrupted; nothing half-written was left looking complete.", markup=False)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpu-forensics {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    traceback: Annotated[bool, typer.Option("--traceback", hidden=True, help="Re-raise errors (developers).")] = False,
) -> None:
    """Offline log forensics and root-cause analysis for GPU training clusters."""
    _state["traceback"] = traceback


def _parse_size(text: str) -> int:
    units = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3,
             "t": 1024**4, "tb": 1024**4}
    t = text.strip().lower().replace("i", "")
    num = t.rstrip("kmgtb")
    unit = t[len(num):]
    try:
        value = float(num)
    except ValueError:
        raise typer.BadParameter(f"'{text}' is not a size like 500M or 4G") from None
    if unit not in units or value < 0:
        raise typer.BadParameter(f"'{text}' is not a size like 500M or 4G")
    return int(value * units[unit])


OutOpt = Annotated[
    str,
    typer.Option(
        "-o",
        "--out",
        metavar="PATH|URL",
        help="Output folder (tables, manifest, findings, report), or a URL such as s3://bucket/incident "
        "(any fsspec URL; needs gpu-forensics\\[dask] and the protocol's package, e.g. s3fs).",
    ),
]
BundleArg = Annotated[Path, typer.Argument(help="Bundle: a folder, or a .tar/.tar.gz/.tgz/.tar.zst/.zip archive.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace a previous ingest in OUT.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
MaxFileOpt = Annotated[str, typer.Option("--max-file-size", help="Skip files larger than this (after decompression).")]
MaxExpandOpt = Annotated[str, typer.Option("--max-expand", help="Most bytes archive extraction may write in all.")]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", help="Worker processes (default: CPU count).")]
DaskOpt = Annotated[
    str,
    typer.Option(
        "--dask",
        metavar="SCHEDULER",
        help="Run the per-file work on a Dask cluster (e.g. tcp://host:8786; needs gpu-forensics\\[dask] and "
        "the bundle on a file system the workers share; the tables come back here, so OUT may be a URL).",
    ),
]
YearOpt = Annotated[int, typer.Option("--year", help="Year for year-less syslog times (default: from the bundle).")]
FailOnOpt = Annotated[
    FailOn | None, typer.Option("--fail-on", help="Exit 1 when a finding of this severity or worse exists.")
]


def _do_ingest(
    bundle: Path,
    out: Path,
    force: bool,
    quiet: bool,
    max_file_size: str,
    max_expand: str,
    jobs: int,
    year: int,
    dask: str = "",
) -> dict[str, Any]:
    from forensics.bundle import Limits
    from forensics.ingest import ingest

    limits = Limits(max_file_bytes=_parse_size(max_file_size), max_expand_bytes=_parse_size(max_expand))
    show = not quiet and sys.stderr.isatty()
    with Progress(
        TextColumn("ingesting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
        disable=not show,
    ) as bar:
        task = bar.add_task("", total=None)
        shown = 0.0

        def progress(path: str, done: int, total: int) -> None:
            # (at most every PROGRESS_EVERY_S and at the last file: the bar redraws ten times a second, and an
            # update per file of a bundle of thousands cost the parent ~0.2 s of CPU)
            nonlocal shown
            now = time.monotonic()
            if now - shown >= PROGRESS_EVERY_S or done == total:
                shown = now
                bar.update(task, completed=done, total=total, description=path[-60:])

        return ingest(
            bundle,
            out,
            limits=limits,
            jobs=jobs or None,
            force=force,
            year=year or None,
            progress=progress if show else None,
            dask=dask or None,
        )


def _ingest_summary(manifest: dict[str, Any], out: str) -> str:
    t = manifest["totals"]
    statuses = [f["status"] for f in manifest["files"]]
    skipped = sum(s.startswith("skipped") for s in statuses)
    errors = sum(s.startswith("error") for s in statuses)
    return (
        f"Ingested {t['files']} file(s), {t['lines']} line(s): {t['parsed_lines']} parsed, "
        f"{t['unrecognized_lines']} not understood; {skipped} skipped, {errors} with errors "
        f"(details in {_in_out(out, 'manifest.json')})."
    )


def _in_out(out: str, name: str) -> str:
    """How to show a file of OUT: a path joined as before, or the URL with the name appended."""
    from forensics.remote import is_url, local_path

    return f"{out.rstrip('/')}/{name}" if is_url(out) else str(local_path(out) / name)


@app.command("ingest")
@boundary
def ingest_cmd(
    bundle: BundleArg,
    out: OutOpt = "out",
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    max_file_size: MaxFileOpt = "32G",
    max_expand: MaxExpandOpt = "64G",
    jobs: JobsOpt = 0,
    year: YearOpt = 0,
    dask: DaskOpt = "",
) -> None:
    """Read every file of BUNDLE into Parquet tables under OUT/tables and OUT/manifest.json."""
    from forensics.remote import local_out

    with local_out(out, fetch=False, force=force) as local:
        manifest = _do_ingest(bundle, local, force, quiet, max_file_size, max_expand, jobs, year, dask)
    typer.echo(_ingest_summary(manifest, out))


def _check_fail_on(doc: dict[str, Any], fail_on: FailOn | None) -> None:
    from forensics.findings import Severity

    if fail_on is None:
        return
    threshold = Severity(fail_on.value)
    if any(Severity(f["severity"]).at_least(threshold) for f in doc["findings"]):
        raise typer.Exit(ExitCode.FINDINGS)


def _findings_summary(doc: dict[str, Any], limit: int = 5) -> str:
    found = [f for f in doc["findings"] if f["severity"] != "info"]
    failed = (doc.get("coverage") or {}).get("analysis_errors") or []
    lines = []
    if failed:
        lines.append(f"Warning: the analysis is incomplete: {len(failed)} step(s) failed, their evidence is missing:")
        lines += [f"  {e['step']}: {e['error']}" for e in failed]
    if not found:
        lines.append("No problem found (no finding above 'info')" + (" by the steps that ran." if failed else "."))
        return "\n".join(lines)
    lines.append(f"{len(found)} finding(s):")
    for f in found[:limit]:
        lines.append(f"  {f['id']} [{f['severity']}] {f['title']}")
    if len(found) > limit:
        lines.append(f"  … and {len(found) - limit} more")
    return "\n".join(lines)


@app.command("analyze")
@boundary
def analyze_cmd(
    out: Annotated[str, typer.Argument(help="An OUT folder (or URL) written by 'forensics ingest'.")],
    fail_on: FailOnOpt = None,
) -> None:
    """Find and rank root causes from OUT's tables; write OUT/findings.json."""
    from forensics.analyze import analyze
    from forensics.remote import local_out

    with local_out(out, fetch=True) as local:
        doc = analyze(local)
    typer.echo(_findings_summary(doc))
    _check_fail_on(doc, fail_on)


@app.command("report")
@boundary
def report_cmd(
    out: Annotated[str, typer.Argument(help="An OUT folder (or URL) with findings.json (run 'forensics analyze').")],
    redact: Annotated[bool, typer.Option("--redact", help="Replace host names, user names and IPs.")] = False,
) -> None:
    """Render OUT/report.html (one self-contained file) and the per-GPU ticket texts."""
    from forensics.remote import is_url, local_out
    from reports.render import write_report

    with local_out(out, fetch=True) as local:
        path = write_report(local, redact=redact)
    typer.echo(f"Report: {_in_out(out, path.name) if is_url(out) else path}")


@app.command("run")
@boundary
def run_cmd(
    bundle: BundleArg,
    out: OutOpt = "out",
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    max_file_size: MaxFileOpt = "32G",
    max_expand: MaxExpandOpt = "64G",
    jobs: JobsOpt = 0,
    year: YearOpt = 0,
    dask: DaskOpt = "",
    redact: Annotated[bool, typer.Option("--redact", help="Replace host names, user names and IPs.")] = False,
    fail_on: FailOnOpt = None,
) -> None:
    """Ingest BUNDLE, analyze it and write the report: the whole job in one command."""
    from forensics.analyze import analyze
    from forensics.remote import is_url, local_out
    from reports.render import write_report

    with local_out(out, fetch=False, force=force) as local:
        manifest = _do_ingest(bundle, local, force, quiet, max_file_size, max_expand, jobs, year, dask)
        typer.echo(_ingest_summary(manifest, out))
        doc = analyze(local)
        typer.echo(_findings_summary(doc))
        path = write_report(local, redact=redact)
    typer.echo(f"Report: {_in_out(out, path.name) if is_url(out) else path}")
    _check_fail_on(doc, fail_on)


@app.command("formats")
def formats_cmd() -> None:
    """List the formats the parsers recognise and how each is detected."""
    from parsers.registry import PARSERS

    for p in PARSERS:
        typer.echo(f"{p.NAME:<20} {p.DESCRIPTION}")
        typer.echo(f"{'':<20}   detects: {p.DETECTS}")
        if p.FILENAME_HINTS:
            typer.echo(f"{'':<20}   name hints: {', '.join(p.FILENAME_HINTS)}")


def _explain(kind: str, code: int) -> None:
    from forensics.catalog import describe

    text = describe(kind, code)
    if text is None:
        raise UsageError(f"{kind.upper()} {code} is not in the catalog; see 'forensics explain {kind} --help'")
    typer.echo(text)


@explain_app.command("xid")
@boundary
def explain_xid(code: Annotated[int, typer.Argument(help="XID number, e.g. 79.")]) -> None:
    """Explain an NVIDIA XID code: meaning, likely cause, severity and the action a vendor expects."""
    _explain("xid", code)


@explain_app.command("sxid")
@boundary
def explain_sxid(code: Annotated[int, typer.Argument(help="NVSwitch SXid number.")]) -> None:
    """Explain an NVSwitch SXid code."""
    _explain("sxid", code)


@app.command("simulate")
@boundary
def simulate_cmd(
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder to write the bundle to.")] = Path("bundle"),
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="Number of nodes.")] = 4,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", min=1, help="GPUs per node.")] = 8,
    hours: Annotated[float, typer.Option("--hours", min=0.05, help="Job duration in hours (at least 0.05).")] = 1.0,
    fault: Annotated[
        list[str] | None,
        typer.Option("--fault", help="KIND[@node[:gpu]][+start]; repeat for several; 'none' for a healthy job."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same bundle).")] = 0,
) -> None:
    """Write a realistic incident bundle with injected faults and its ground truth (truth.json)."""
    from forensics import simulate as sim

    specs = [sim.parse_fault(f) for f in (fault or []) if f != "none"]
    truth = sim.simulate(out, nodes=nodes, gpus_per_node=gpus_per_node, hours=hours, faults=specs, seed=seed)
    typer.echo(f"Wrote {out} ({nodes} nodes, {len(truth.get('faults', []))} fault(s)); truth in {out / 'truth.json'}")
    for f in truth.get("faults", []):
        if f.get("observable") is False:
            typer.echo(f"Note: {f['kind']} on {f['node']} left no trace: it {f['why']}.", err=True)


if __name__ == "__main__":  # pragma: no cover
    app()
