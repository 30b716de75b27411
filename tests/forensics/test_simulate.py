"""`forensics simulate`: determinism, fault grammar, and ground truth matching what was written."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from forensics.errors import UsageError
from forensics.simulate import FAULT_KINDS, FaultSpec, parse_fault, simulate
from forensics.simulate.job import build_sim


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _files(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.rglob(pattern) if p.is_file())


# -- grammar ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gpu_lost", FaultSpec("gpu_lost")),
        ("gpu_lost@3:5+0.6", FaultSpec("gpu_lost", 3, 5, 0.6)),
        ("thermal@2", FaultSpec("thermal", 2)),
        ("ib_flap@node-017:3", FaultSpec("ib_flap", "node-017", 3)),
        ("slow_node+2.5h", FaultSpec("slow_node", None, None, 9000.0, "s")),
        ("pcie_degraded@0:1+40m", FaultSpec("pcie_degraded", 0, 1, 2400.0, "s")),
        ("none", FaultSpec("none")),
    ],
)
def test_parse_fault(spec: str, expected: FaultSpec) -> None:
    assert parse_fault(spec) == expected


def test_parse_fault_unknown_kind_lists_known() -> None:
    with pytest.raises(UsageError, match=r"^unknown fault kind 'x'; known: none, gpu_lost, "):
        parse_fault("x@1")


@pytest.mark.parametrize("spec", ["gpu_lost@", "gpu_lost@1:", "gpu_lost+2", "thermal+abc", "gpu_lost@1:2:3"])
def test_parse_fault_bad_syntax(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_fault(spec)


def test_out_of_range_node_and_gpu(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="node 9 out of range"):
        simulate(tmp_path, nodes=2, hours=0.25, faults=[parse_fault("thermal@9")])
    with pytest.raises(UsageError, match="gpu 8 out of range"):
        simulate(tmp_path, nodes=2, hours=0.25, faults=[parse_fault("thermal@1:8")])


# -- determinism ----------------------------------------------------------------------------------


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    faults = [parse_fault("gpu_lost@1:5+0.6"), parse_fault("thermal@0:2+0.3")]
    t1 = simulate(tmp_path / "a", nodes=3, hours=0.3, faults=faults, seed=11)
    t2 = simulate(tmp_path / "b", nodes=3, hours=0.3, faults=faults, seed=11)
    assert t1 == t2
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_parallel_workers_same_bytes(tmp_path: Path) -> None:
    simulate(tmp_path / "a", nodes=5, hours=0.2, faults=[parse_fault("ib_flap")], seed=4, workers=1)
    simulate(tmp_path / "b", nodes=5, hours=0.2, faults=[parse_fault("ib_flap")], seed=4, workers=2)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_other_seed_other_bundle(tmp_path: Path) -> None:
    simulate(tmp_path / "a", nodes=2, hours=0.2, seed=1)
    simulate(tmp_path / "b", nodes=2, hours=0.2, seed=2)
    assert _digest(tmp_path / "a") != _digest(tmp_path / "b")


# -- every kind, healthy ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_kind_generates(tmp_path: Path, kind: str) -> None:
    truth = simulate(tmp_path, nodes=2, gpus_per_node=4, hours=0.25, faults=[parse_fault(kind)], seed=3)
    assert json.loads((tmp_path / "truth.json").read_text()) == truth
    assert truth["schema_version"] == 1
    assert len(truth["nodes"]) == 2
    if kind == "none":
        assert truth["faults"] == []
        return
    (f,) = truth["faults"]
    assert f["kind"] == kind
    assert f["category"] in {"gpu_hardware", "gpu_memory", "nvlink", "pcie", "network", "thermal_power",
                             "config_drift", "software", "straggler", "hang"}
    assert truth["start"] <= f["start"] <= truth["end"]
    assert (f["node"] is None) == (kind == "app_bug")


def test_healthy_job_has_only_old_benign_xids(tmp_path: Path) -> None:
    truth = simulate(tmp_path, nodes=4, hours=0.3, seed=5)
    sim = build_sim(5, 4, 8, 0.3, ())
    for i in range(4):
        node = sim.node(i)
        text = (tmp_path / node.paths["kernel"]).read_text()
        assert " 79, " not in text and " 48, " not in text
    assert truth["faults"] == []
    # the job is still running at collection: the end snapshot shows loaded GPUs
    n0 = sim.node(0)
    end = (tmp_path / n0.paths["smi_end"]).read_text()
    assert re.search(r"Gpu\s+: (9\d|100) %|<gpu_util>(9\d|100) %</gpu_util>", end)


# -- truth matches what was written ---------------------------------------------------------------


def test_gpu_lost_traces(tmp_path: Path) -> None:
    seed = 7
    truth = simulate(tmp_path, nodes=4, hours=0.5, faults=[parse_fault("gpu_lost@1:5+0.5")], seed=seed)
    sim = build_sim(seed, 4, 8, 0.5, [parse_fault("gpu_lost@1:5+0.5")])
    (f,) = truth["faults"]
    culprit = sim.node(1)
    assert f["node"] == culprit.host and f["gpu_index"] == 5 and f["category"] == "gpu_hardware"
    gpu = culprit.gpus[5]
    xid = f"NVRM: Xid (PCI:{gpu.xid_bus}): 79, "
    for i in range(4):
        kern = (tmp_path / sim.node(i).paths["kernel"]).read_text()
        assert (xid in kern) == (i == 1)
        assert (" 79, " in kern) == (i == 1)
    # the bus id in the kernel log is the one nvidia-smi reports for GPU index 5 of that node
    start = (tmp_path / culprit.paths["smi_start"]).read_text()
    assert gpu.smi_bus in start
    # every rank but the dead one times out on one SeqNum; peers' NCCL WARNs name the lost node's IP
    seqs: set[str] = set()
    reporters: set[int] = set()
    warned_ip = False
    for i in range(4):
        text = (tmp_path / sim.node(i).paths["worker"]).read_text()
        for m in re.finditer(r"\[Rank (\d+)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+)", text):
            reporters.add(int(m.group(1)))
            seqs.add(m.group(2))
        warned_ip |= f"Got completion from peer {culprit.ip}<" in text
    assert len(seqs) == 1
    assert reporters == set(range(32)) - {1 * 8 + 5}
    assert warned_ip
    # consequences after the cause: XID 45 clean-ups on the culprit's other GPUs, after the XID 79
    kern = (tmp_path / culprit.paths["kernel"]).read_text().splitlines()
    i79 = next(k for k, line in enumerate(kern) if " 79, " in line)
    i45 = [k for k, line in enumerate(kern) if " 45, " in line]
    assert i45 and min(i45) > i79


def test_ecc_dbe_remap_pending_on_the_right_gpu(tmp_path: Path) -> None:
    faults = [parse_fault("ecc_dbe@0:2+0.4")]
    simulate(tmp_path, nodes=2, hours=0.3, faults=faults, seed=2)
    sim = build_sim(2, 2, 8, 0.3, faults)
    n = sim.node(0)
    kern = (tmp_path / n.paths["kernel"]).read_text()
    assert f"NVRM: Xid (PCI:{n.gpus[2].xid_bus}): 48, " in kern
    assert f"NVRM: Xid (PCI:{n.gpus[2].xid_bus}): 63, " in kern
    end = (tmp_path / n.paths["smi_end"]).read_text()
    if n.smi_xml:
        block = end.split(f'<gpu id="{n.gpus[2].smi_bus}">')[1].split("</gpu>")[0]
        assert "<remapped_row_pending>Yes</remapped_row_pending>" in block
    else:
        block = end.split(f"GPU {n.gpus[2].smi_bus}")[1].split("\nGPU ")[0]
        assert re.search(r"Pending\s+: Yes", block)


def test_ib_flap_counters_and_peer_warns(tmp_path: Path) -> None:
    faults = [parse_fault("ib_flap@2:3+0.3")]
    simulate(tmp_path, nodes=4, hours=0.5, faults=faults, seed=9)
    sim = build_sim(9, 4, 8, 0.5, faults)
    n = sim.node(2)
    kern = (tmp_path / n.paths["kernel"]).read_text()
    assert "mlx5_3: Port: 1 Link DOWN" in kern
    def counter(path: str, name: str, lid: int) -> int:
        block = (tmp_path / path).read_text().split(f"Lid {lid} port 1")[1].split("# Port")[0]
        return int(re.search(rf"{name}:\.+(\d+)", block).group(1))
    lid = n.hcas[3].lid
    assert counter(n.paths["perf_end"], "LinkDownedCounter", lid) > counter(n.paths["perf_start"], "LinkDownedCounter", lid)
    assert counter(n.paths["perf_end"], "SymbolErrorCounter", lid) > counter(n.paths["perf_start"], "SymbolErrorCounter", lid)
    peers = [(tmp_path / sim.node(i).paths["worker"]).read_text() for i in (1, 3)]
    assert all(f"Got completion from peer {n.ip}<" in p for p in peers)


def test_app_bug_everywhere(tmp_path: Path) -> None:
    faults = [parse_fault("app_bug+0.5")]
    truth = simulate(tmp_path, nodes=3, hours=0.3, faults=faults, seed=1)
    assert truth["faults"][0]["node"] is None and truth["faults"][0]["category"] == "software"
    sim = build_sim(1, 3, 8, 0.3, faults)
    for i in range(3):
        n = sim.node(i)
        kern = (tmp_path / n.paths["kernel"]).read_text()
        for g in n.gpus:
            assert f"NVRM: Xid (PCI:{g.xid_bus}): 13, " in kern
            assert f"NVRM: Xid (PCI:{g.xid_bus}): 43, " in kern


def test_thermal_shows_in_telemetry_and_snapshot(tmp_path: Path) -> None:
    faults = [parse_fault("thermal@1:6+0.3")]
    simulate(tmp_path, nodes=2, hours=0.3, faults=faults, seed=12)
    sim = build_sim(12, 2, 8, 0.3, faults)
    n = sim.node(1)
    end = (tmp_path / n.paths["smi_end"]).read_text()
    if n.smi_xml:
        block = end.split(f'<gpu id="{n.gpus[6].smi_bus}">')[1]
        assert "hw_thermal_slowdown>Active<" in block.split("</gpu>")[0]
    else:
        block = end.split(f"GPU {n.gpus[6].smi_bus}")[1].split("\nGPU ")[0]
        assert re.search(r"HW Thermal Slowdown\s+: Active", block)
    tel = (tmp_path / n.paths["telemetry"]).read_text()
    if sim.style.telemetry == "csv":
        assert "0x0000000000000048" in tel


def test_a_load_bound_fault_after_the_job_left_no_trace_and_says_so(tmp_path: Path) -> None:
    """A thermal fault begun after an ECC crash ended the job shows on idle GPUs nowhere: truth.json marks it
    unobservable with the reason (scoring does not count it missed); faults during the job are not marked."""
    faults = [parse_fault("ecc_dbe@0:1+0.2"), parse_fault("thermal@1:6+0.9"), parse_fault("power_brake@1:2+0.1")]
    truth = simulate(tmp_path, nodes=2, hours=0.5, faults=faults, seed=12)
    by_kind = {f["kind"]: f for f in truth["faults"]}
    assert by_kind["thermal"]["observable"] is False
    assert "after the training processes were gone" in by_kind["thermal"]["why"]
    assert by_kind["thermal"]["start"] > truth["job_end"]
    assert "observable" not in by_kind["ecc_dbe"] and "observable" not in by_kind["power_brake"]
    sim = build_sim(12, 2, 8, 0.5, faults)
    n = sim.node(1)
    tel = (tmp_path / n.paths["telemetry"]).read_text().splitlines()
    late = [ln for ln in tel if n.gpus[6].smi_bus.lower() in ln.lower() and ln[:19].replace("/", "-") > truth["job_end"][:19].replace("T", " ")]
    assert late and not any("0x0000000000000048" in ln or "0x0000000000000040" in ln for ln in late)


def test_drift_shows_the_other_version(tmp_path: Path) -> None:
    faults = [parse_fault("drift_nccl@1")]
    truth = simulate(tmp_path, nodes=3, hours=0.2, faults=faults, seed=6)
    sim = build_sim(6, 3, 8, 0.2, faults)
    f = sim.faults[0]
    assert truth["faults"][0]["start"] == truth["start"]
    texts = [(tmp_path / sim.node(i).paths["worker"]).read_text() for i in range(3)]
    assert f"NCCL version {f.extra['version']}+cuda" in texts[1] or f.extra["version"] in texts[1]
    assert all(f.extra["version"] not in t for k, t in enumerate(texts) if k != 1)


def test_sizes_stay_small_at_small_scale(tmp_path: Path) -> None:
    simulate(tmp_path, nodes=4, hours=1.0, seed=0)
    total = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert total < 8_000_000


def test_gzip_snapshots_are_deterministic(tmp_path: Path) -> None:
    simulate(tmp_path / "a", nodes=2, hours=0.1, seed=8, gzip_snapshots=True)
    simulate(tmp_path / "b", nodes=2, hours=0.1, seed=8, gzip_snapshots=True)
    gz = _files(tmp_path / "a", "*.gz")
    assert len(gz) == 4
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


@pytest.mark.slow
def test_ingest_recognises_every_written_file(tmp_path: Path) -> None:
    """Every file the simulator writes is claimed by a parser (the formats are real ones)."""
    from typer.testing import CliRunner

    from forensics.cli import app

    bundle = tmp_path / "bundle"
    simulate(bundle, nodes=3, hours=0.3, faults=[parse_fault("gpu_lost@1:2+0.5"), parse_fault("ib_flap@0")],
             seed=21)
    res = CliRunner().invoke(app, ["ingest", str(bundle), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    unclaimed = [f["path"] for f in manifest["files"] if f["format"] is None and f["path"] != "truth.json"]
    assert unclaimed == []


def test_layouts_and_styles_vary_with_seed() -> None:
    from forensics.simulate.fleet import fleet_style

    styles = [fleet_style(s, 4) for s in range(40)]
    assert {s.kernel_style for s in styles} == {"dmesg_T", "dmesg_raw", "dmesg_iso", "dmesg_decode_iso",
                                                "journal_iso", "kern_log"}
    assert {s.layout for s in styles} == {0, 1, 2}
    assert {s.framework for s in styles} == {"megatron", "deepspeed", "torchtitan"}
    assert {s.telemetry for s in styles} == {"csv", "dmon"}
    assert {s.launcher_prefix for s in styles} == {"none", "tee", "srun"}


def test_raw_dmesg_carries_its_boot_anchor(tmp_path: Path) -> None:
    seed = next(s for s in range(100) if build_sim(s, 2, 8, 0.1, ()).style.kernel_style == "dmesg_raw")
    simulate(tmp_path, nodes=2, hours=0.1, seed=seed)
    sim = build_sim(seed, 2, 8, 0.1, ())
    n = sim.node(0)
    if n.kernel_style != "dmesg_raw":
        n = sim.node(1)
    text = (tmp_path / n.paths["kernel"]).read_text()
    m = re.search(r"^\[\s*(\d+\.\d+)\] rtc_cmos 00:02: setting system clock to \S+ UTC \((\d+)\)$", text, re.M)
    assert m is not None
    boot = int(m.group(2)) - float(m.group(1))
    assert abs(boot - n.boot) < 1.0


def test_mixed_logs_put_framework_lines_in_the_worker_log(tmp_path: Path) -> None:
    seed = next(s for s in range(100) if build_sim(s, 2, 8, 0.1, ()).style.framework != "megatron")
    simulate(tmp_path / "split", nodes=2, hours=0.2, seed=seed)
    simulate(tmp_path / "mixed", nodes=2, hours=0.2, seed=seed, mixed_logs=True)
    sim = build_sim(seed, 2, 8, 0.2, ())
    n = sim.node(1)
    rank_file = n.paths["ranklog"].format(rank=8)
    assert (tmp_path / "split" / rank_file).exists() and not (tmp_path / "mixed" / rank_file).exists()
    mixed = (tmp_path / "mixed" / n.paths["worker"]).read_text()
    framework = (tmp_path / "split" / rank_file).read_text().splitlines()
    assert framework and all(line in mixed for line in framework[:5])
    assert "NCCL INFO" in mixed
