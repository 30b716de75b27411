"""A 1,000-node bundle made from the verbatim public logs of `shared/real-logs`, not by the simulator.

Every node folder (`gpu0000`, `gpu0001`, ...) holds a real log of each kind, its host name replaced by the
folder's: a boot dmesg, an NCCL INFO log and a Megatron training log, each repeated to about `--mb` MB, and an
`nvidia-smi -q` of 8 H100s (once). On every `--flood-every`-th node (1: every node) the dmesg is an Xid 13/43
flood and the NCCL log NCCL IB completion errors. Measure it as any bundle:
`python bench/run.py --bundle OUT`.

    python bench/real_bundle.py OUT [--nodes 1000] [--mb 1] [--flood-every 10]
                                    [--real-logs ../shared/real-logs]

The repeated logs repeat their timestamps and step numbers: a flood that restarts every copy, a training log
whose iterations repeat (the analysis thins such steps by blocks of lines, `forensics.outputs._thin_steps`).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

FILES = {
    # file in the node folder: (healthy node's log, flooding node's log, host name in it or None)
    "dmesg.log": (
        "hw/dmesg_decode_iso_h100_boot_mlx5_nvswitch.log",
        "hw/dmesg_decode_iso_xid13_xid43_flood.log",
        None,
    ),
    "nccl.log": (
        "nccl/nccl_2.18_info_tree_ring_dgxh100_then_modify_qp.log",
        "nccl/nccl_2.2x_net_ib_status12_recv_hca_nccltests.log",
        (b"dgxh100-3", b"mycl-g2"),
    ),
    "nvidia-smi-q.txt": ("hw/nvidia_smi_q_h100x8_535_183_mixed_throttle.txt",) * 2 + (None,),
    "train.log": ("steps/megatron_lm_2023_gpt345m_dp4_tp2pp2.log",) * 2 + (None,),
}


def body(real: Path, rel: str) -> bytes:
    """The log without its `#SOURCE:` lines."""
    return b"".join(x for x in (real / rel).read_bytes().splitlines(True) if not x.startswith(b"#SOURCE"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--mb", type=float, default=1.0, help="size of each log but the -q dump")
    ap.add_argument("--flood-every", type=int, default=10, help="every n-th node floods (0: none)")
    shared = Path(__file__).resolve().parents[2] / "shared" / "real-logs"
    ap.add_argument("--real-logs", type=Path, default=shared, help="the folder of the real logs")
    a = ap.parse_args()
    logs = {name: tuple(body(a.real_logs, rel) for rel in pair[:2]) for name, pair in FILES.items()}

    def repeated(b: bytes) -> bytes:
        return b * max(1, int(a.mb * 1e6 / len(b)))

    shutil.rmtree(a.out, ignore_errors=True)
    for i in range(a.nodes):
        node = f"gpu{i:04d}"
        d = a.out / node
        d.mkdir(parents=True)
        bad = a.flood_every > 0 and i % a.flood_every == 3 % a.flood_every
        for name, pair in logs.items():
            text = pair[1] if bad else pair[0]
            for h in FILES[name][2] or ():
                text = text.replace(h, node.encode())
            (d / name).write_bytes(text if name == "nvidia-smi-q.txt" else repeated(text))


if __name__ == "__main__":
    main()
