from pathlib import Path

import pytest

from simtrain.specs.loader import load_yaml_tree
from simtrain.specs.model import ModelSpec
from simtrain.workload.counts import (
    count_parameters,
    model_flops_per_sequence,
    recompute_flops_per_sequence,
)

WORKLOADS = Path(__file__).parents[2] / "workloads"
# docs/references/training-runs.md §1.1, Table 1: (params in B, heads, hidden, layers)
MEGATRON_TABLE1 = [
    (1.7, 24, 2304, 24),
    (3.6, 32, 3072, 30),
    (7.5, 32, 4096, 36),
    (18.4, 48, 6144, 40),
    (39.1, 64, 8192, 48),
    (76.1, 80, 10240, 60),
    (145.6, 96, 12288, 80),
    (310.1, 128, 16384, 96),
    (529.6, 128, 20480, 105),
    (1008.0, 160, 25600, 128),
]


def workload(name: str) -> ModelSpec:
    return ModelSpec(**load_yaml_tree(WORKLOADS / f"{name}.yaml")["model"])


def megatron_eq2(layers: int, h: int, vocab: int = 51200, s: int = 2048) -> float:
    """Narayanan et al. 2021, Eq. 2."""
    return 12 * layers * h**2 * (1 + 13 / (12 * h) + (vocab + s) / (12 * layers * h))


@pytest.mark.parametrize(("published_b", "heads", "hidden", "layers"), MEGATRON_TABLE1)
def test_megatron_workloads_match_eq2_and_the_table(published_b, heads, hidden, layers):
    model = workload(f"megatron-gpt-{published_b:g}b")
    assert (model.num_heads, model.hidden_size, model.num_layers) == (heads, hidden, layers)
    total = count_parameters(model).total
    final_norm = 2 * hidden  # Eq. 2 leaves out the final LayerNorm
    assert total - final_norm == pytest.approx(megatron_eq2(layers, hidden), rel=1e-12)
    # Table 1 prints Eq. 2 rounded to 0.1B (the 1.7B row rounds 1.65B up).
    assert total / 1e9 == pytest.approx(published_b, abs=0.051 if published_b < 10 else 0.06)


def test_llama3_and_mixtral_published_counts():
    assert count_parameters(workload("llama3-405b")).total / 1e9 == pytest.approx(405, rel=0.005)
    assert count_parameters(workload("llama3-70b")).total / 1e9 == pytest.approx(70.6, rel=0.005)
    assert count_parameters(workload("llama3-8b")).total / 1e9 == pytest.approx(8.03, rel=0.005)
    mixtral = count_parameters(workload("mixtral-8x7b"))
    assert mixtral.total / 1e9 == pytest.approx(46.7, rel=0.005)
    assert mixtral.active / 1e9 == pytest.approx(12.9, rel=0.005)


@pytest.mark.parametrize(("published_b", "heads", "hidden", "layers"), MEGATRON_TABLE1)
def test_model_flops_equal_megatron_closed_form(published_b, heads, hidden, layers):
    model = workload(f"megatron-gpt-{published_b:g}b")
    s, vocab = 2048, 51200
    eq7 = 72 * s * layers * hidden**2 * (1 + s / (6 * hidden) + vocab / (12 * layers * hidden))
    assert model_flops_per_sequence(model) == pytest.approx(eq7, rel=1e-12)
    eq3 = 96 * s * layers * hidden**2 * (1 + s / (6 * hidden) + vocab / (16 * layers * hidden))
    hardware = model_flops_per_sequence(model) + recompute_flops_per_sequence(model, "full")
    assert hardware == pytest.approx(eq3, rel=1e-12)


def test_selective_recompute_reruns_the_attention_forward_once():
    # QK^T and AV forward: 4*s^2*h per layer per sequence (Narayanan et al. §5.1 breakdown).
    # Korthikanti's Eq. 8 (s/(3h)) counts twice that; simtrain counts the work actually re-run.
    model = workload("megatron-gpt-18.4b")
    s, layers, h = 2048, 40, 6144
    assert recompute_flops_per_sequence(model, "selective") == 4 * s * s * h * layers
