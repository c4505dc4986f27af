"""Shared fixtures: tiny models and experiments that simulate in milliseconds."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from simtrain.specs.loader import apply_overrides, experiment_from_dict

ROOT = Path(__file__).resolve().parents[1]

GPT_TINY: dict[str, Any] = {
    "name": "gpt-tiny",
    "num_layers": 2,
    "hidden_size": 256,
    "num_heads": 8,
    "vocab_size": 1024,
    "seq_length": 128,
    "tied_embeddings": True,
}

LLAMA_TINY: dict[str, Any] = {
    "name": "llama-tiny",
    "num_layers": 2,
    "hidden_size": 256,
    "num_heads": 8,
    "num_kv_heads": 2,
    "ffn_hidden_size": 688,
    "vocab_size": 1024,
    "seq_length": 128,
    "activation": "swiglu",
    "norm": "rmsnorm",
    "use_bias": False,
    "position_embedding": "rope",
}


NO_VARIABILITY: dict[str, float] = {"rank_speed_cv": 0.0, "straggler_probability": 0.0}
"""``simulation.variability`` with every rank at its nominal speed."""


def experiment_dict(model: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    """A small valid experiment (2 x 8 H100 unless overridden) as a plain dict."""
    data: dict[str, Any] = {
        "name": "tiny",
        "model": dict(model or GPT_TINY),
        "parallel": {"global_batch_size": 16, "micro_batch_size": 1},
        "cluster": {"accelerator": "H100-SXM", "num_gpus": 16, "gpus_per_node": 8},
        # Rank speeds fixed, so mechanisms can be checked exactly; tests of variability
        # set it (tests/engine/test_variability.py).
        "simulation": {"variability": dict(NO_VARIABILITY)},
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def make_experiment(*overrides: str, model: dict[str, Any] | None = None, **sections: Any):
    """A validated tiny experiment with optional ``section.field=value`` overrides."""
    return experiment_from_dict(apply_overrides(experiment_dict(model, **sections), overrides))


@pytest.fixture
def tiny_experiment():
    """A 2-layer GPT on 2 x 8 H100, pure data parallel."""
    return make_experiment()


EXTRA_MODULES = {"chakra": "chakra", "ray": "ray", "parquet": "pyarrow", "perfetto": "perfetto"}
"""Optional extra of pyproject.toml -> the module whose presence means it is installed."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip, with the install command as the reason, a test whose optional extra is absent.

    README's test command installs only ``simtrain[test]``; ``.ci/run`` then installs every
    extra and runs the tests marked ``needs_extra`` as well.
    """
    for mark in item.iter_markers("needs_extra"):
        (extra,) = mark.args
        if importlib.util.find_spec(EXTRA_MODULES[extra]) is None:
            pytest.skip(f"needs the optional extra simtrain[{extra}]: pip install -e '.[{extra}]'")
