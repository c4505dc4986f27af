"""A tiny sweep (2-layer, hidden-256 model on 16 H100) that simulates in milliseconds."""

from __future__ import annotations

from pathlib import Path

import yaml

TINY_BASE = {
    "model": {
        "name": "tiny",
        "num_layers": 2,
        "hidden_size": 256,
        "num_heads": 8,
        "vocab_size": 1024,
        "seq_length": 512,
    },
    "parallel": {"global_batch_size": 16},
    "cluster": {"accelerator": "H100-SXM", "num_gpus": 16, "gpus_per_node": 8},
}


def tiny_sweep(**changes) -> dict:
    """A sweep of 3 x 2 x 2 = 12 configurations, 5 invalid (tp=16; mbs 2 at dp 16)."""
    data = {
        "name": "tiny",
        "base": TINY_BASE,
        "axes": {
            "parallel.tp": [1, 2, 16],
            "parallel.pp": {"divisors_of": "model.num_layers"},
            "parallel.micro_batch_size": {"range": [1, 2]},
        },
        "metric": "tokens_per_s",
    }
    data.update(changes)
    return data


def write_sweep(folder: Path, **changes) -> Path:
    path = folder / "tiny-sweep.yaml"
    path.write_text(yaml.safe_dump(tiny_sweep(**changes), sort_keys=False))
    return path


def die_on_two(x: int) -> dict:
    """A task whose worker process dies on payload 2 (as if killed or out of host memory)."""
    import os

    if x == 2:
        os._exit(1)
    return {"status": "ok", "error": "", "x": x}


def imported(name: str) -> dict:
    """A task saying whether module ``name`` was imported in its worker before it ran."""
    import sys

    return {"status": "ok", "error": "", "imported": name in sys.modules}


def process_id(x: int) -> dict:
    """A task saying which process ran it."""
    import os

    return {"status": "ok", "error": "", "x": x, "pid": os.getpid()}
