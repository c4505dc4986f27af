"""Record the Kineto fixture of tests/trace: one training step of a small MLP on 2 CPU ranks.

Two processes train a 3-layer MLP with DistributedDataParallel over gloo; rank r profiles
its third step with ``torch.profiler`` (CPU activity, shapes recorded) and writes the Chrome
trace to ``tests/trace/fixtures/kineto/kineto.<r>.json``. The files are the PyTorch
profiler's own output, only re-indented compactly to stay under 1 MB. Run once with
``pip install torch`` (CPU wheel)::

    python experiments/traces/record_kineto.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile

OUT = Path(__file__).resolve().parents[2] / "tests" / "trace" / "fixtures" / "kineto"
WORLD_SIZE = 2


def train(rank: int, init_file: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD_SIZE
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)
    )
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    batch = torch.randn(64, 256)

    def step() -> None:
        optimizer.zero_grad()
        ddp(batch).square().mean().backward()
        optimizer.step()

    for _ in range(2):  # warm-up steps, not recorded
        step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    raw = Path(init_file).with_suffix(f".{rank}.json")
    prof.export_chrome_trace(str(raw))
    OUT.mkdir(parents=True, exist_ok=True)
    trace = json.loads(raw.read_text())
    (OUT / f"kineto.{rank}.json").write_text(json.dumps(trace, separators=(",", ":")))
    dist.destroy_process_group()


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        mp.spawn(train, args=(init_file,), nprocs=WORLD_SIZE, join=True)
    for path in sorted(OUT.glob("*.json")):
        print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
