"""Model FLOPs under the named conventions, and validation against a source's convention."""

import pytest
import yaml

from simtrain.metrics.flops import FLOPS_CONVENTIONS, model_flops_per_token
from simtrain.specs.model import ModelSpec
from simtrain.validation import validate_case
from simtrain.workload.counts import count_parameters, model_flops_per_sequence
from tests.conftest import GPT_TINY, LLAMA_TINY, experiment_dict

GPT = ModelSpec(num_layers=24, hidden_size=2304, num_heads=24, vocab_size=51200, seq_length=2048)


def test_megatron_convention_is_eq3():
    s, layers, h, vocab = 2048, 24, 2304, 51200
    eq3 = 96 * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
    assert model_flops_per_token(GPT, "megatron") * s == pytest.approx(eq3, rel=1e-12)


def test_simtrain_convention_is_the_model_flops():
    assert model_flops_per_token(GPT, "simtrain") == model_flops_per_sequence(GPT) / 2048


def test_causal_convention_halves_the_attention_term():
    s, layers, h = 2048, 24, 2304
    attention = 12 * s * layers * h  # per token, non-causal
    simtrain, causal = (model_flops_per_token(GPT, c) for c in ("simtrain", "causal"))
    assert simtrain - causal == pytest.approx(attention / 2)


def test_causal_convention_with_a_window_halves_the_window():
    # MaxText counts a local layer's queries against min(s, w) keys, then halves (causal).
    model = ModelSpec(**{**LLAMA_TINY, "sliding_window": 32})
    full = ModelSpec(**LLAMA_TINY)
    s, w, layers, heads, d = 128, 32, 2, 8, 32
    delta = model_flops_per_token(full, "causal") - model_flops_per_token(model, "causal")
    assert delta == pytest.approx((s - w) / 2 * 12 * layers * heads * d)


def test_palm_and_noncausal_count_all_parameters():
    model = ModelSpec(**LLAMA_TINY)  # untied embeddings
    n, s, layers = count_parameters(model).active, 128, 2
    assert model_flops_per_token(model, "palm") == 6 * n + 12 * layers * 8 * 32 * s
    lookup = 1024 * 256  # LLM Foundry leaves out an untied input embedding
    assert model_flops_per_token(model, "noncausal") == 6 * (n - lookup) + 12 * layers * 256 * s


def test_every_convention_is_reported():
    report = {c: model_flops_per_token(GPT, c) for c in FLOPS_CONVENTIONS}
    assert report["causal"] < report["simtrain"] < report["megatron"]
    with pytest.raises(ValueError, match="flops convention must be one of"):
        model_flops_per_token(GPT, "chinchilla")


def test_validation_compares_in_the_source_convention(tmp_path):
    data = experiment_dict(GPT_TINY)
    case = tmp_path / "case.yaml"
    data["expected"] = {"metric": "model_tflops_per_gpu", "value": 1.0, "source": "test"}
    case.write_text(yaml.safe_dump(data))
    own = validate_case(case).predicted
    data["expected"]["flops_convention"] = "megatron"
    case.write_text(yaml.safe_dump(data))
    model = ModelSpec(**GPT_TINY)
    ratio = model_flops_per_token(model, "megatron") / model_flops_per_token(model, "simtrain")
    assert validate_case(case).predicted == pytest.approx(own * ratio)


def test_a_convention_needs_a_model_flops_metric():
    from simtrain.errors import SpecError
    from simtrain.specs.loader import experiment_from_dict

    data = experiment_dict(GPT_TINY)
    data["expected"] = {
        "metric": "step_time_s",
        "value": 1.0,
        "source": "test",
        "flops_convention": "palm",
    }
    with pytest.raises(SpecError, match=r"flops_convention=palm needs expected\.metric"):
        experiment_from_dict(data)
