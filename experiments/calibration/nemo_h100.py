"""NVIDIA NeMo's published H100 throughputs as simtrain experiments (H100 calibration set).

``shared/reference/training-runs.md`` §5.3 lists NeMo 24.12 reference runs on H100 (FP8):
GPUs, global and micro batch, sequence, TP/PP/CP/VP and tokens/s per GPU. The rows whose
model architecture is public and expressible in simtrain are used (GPT-3 5B/20B/175B, Llama 2
7B/13B/70B, Llama 3 8B/70B); the Nemotron rows are left out (squared-ReLU MLP and a 256K
vocabulary, which simtrain does not model).

Architectures (public model cards / NeMo configs): GPT-3 as NeMo trains it (learned positions,
GELU, LayerNorm, biases, vocabulary 50,304 = GPT-2's padded to 128·k); Llama 2 7B/13B with
multi-head attention, SwiGLU FFN 11,008 / 13,824, vocabulary 32,000; Llama 2 70B with GQA
(8 KV heads) and FFN 28,672; Llama 3 as in ``workloads/``. Llama models train without
dropout; NeMo's GPT-3 configs keep it.

Assumptions, the same for every row: NeMo's performance-recipe behaviour (the ``nemo``
framework profile: TP communication overlapped with the GEMMs, overlapped parameter gathers
and pipeline transfers), FP8 linear layers with BF16 flash attention, sequence parallelism
when tp > 1, ring context parallelism, the distributed optimizer (ZeRO-1) with overlapped
gradient reduction, no activation recomputation, nodes of 8 H100 with 8 NDR NICs.
"""

from __future__ import annotations

from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import experiment_from_dict

GPT3 = {"vocab_size": 50304, "tied_embeddings": True}
LLAMA2 = {
    "dropout": False,
    "vocab_size": 32000,
    "activation": "swiglu",
    "norm": "rmsnorm",
    "use_bias": False,
    "position_embedding": "rope",
}
LLAMA3 = {
    "dropout": False,
    "vocab_size": 128256,
    "activation": "swiglu",
    "norm": "rmsnorm",
    "use_bias": False,
    "position_embedding": "rope",
    "num_kv_heads": 8,
}
MODELS = {
    "GPT3-5B": {**GPT3, "num_layers": 24, "hidden_size": 4096, "num_heads": 32},
    "GPT3-20B": {**GPT3, "num_layers": 44, "hidden_size": 6144, "num_heads": 48},
    "GPT3-175B": {**GPT3, "num_layers": 96, "hidden_size": 12288, "num_heads": 96},
    "LLAMA2-7B": {
        **LLAMA2,
        "num_layers": 32,
        "hidden_size": 4096,
        "num_heads": 32,
        "ffn_hidden_size": 11008,
    },
    "LLAMA2-13B": {
        **LLAMA2,
        "num_layers": 40,
        "hidden_size": 5120,
        "num_heads": 40,
        "ffn_hidden_size": 13824,
    },
    "LLAMA2-70B": {
        **LLAMA2,
        "num_layers": 80,
        "hidden_size": 8192,
        "num_heads": 64,
        "num_kv_heads": 8,
        "ffn_hidden_size": 28672,
    },
    "LLAMA3-8B": {
        **LLAMA3,
        "num_layers": 32,
        "hidden_size": 4096,
        "num_heads": 32,
        "ffn_hidden_size": 14336,
    },
    "LLAMA3-70B": {
        **LLAMA3,
        "num_layers": 80,
        "hidden_size": 8192,
        "num_heads": 64,
        "ffn_hidden_size": 28672,
    },
}
# training-runs.md §5.3: model, GPUs, GBS, MBS, seq, TP, PP, CP, VP, tokens/s/GPU
ROWS = [
    ("GPT3-5B", 64, 2048, 4, 2048, 1, 1, 1, 1, 23406),
    ("GPT3-20B", 64, 256, 2, 2048, 2, 1, 1, 1, 5851),
    ("GPT3-175B", 128, 256, 1, 2048, 4, 8, 1, 6, 716),
    ("GPT3-175B", 512, 2048, 2, 2048, 4, 8, 1, 6, 825),
    ("LLAMA2-7B", 8, 128, 1, 4096, 1, 1, 1, 1, 16934),
    ("LLAMA2-13B", 16, 128, 1, 4096, 1, 4, 1, 10, 8715),
    ("LLAMA2-70B", 64, 128, 1, 4096, 4, 4, 1, 20, 1728),
    ("LLAMA3-8B", 8, 128, 1, 8192, 1, 1, 2, 1, 12273),
    ("LLAMA3-70B", 64, 128, 1, 8192, 4, 4, 2, 5, 1524),
]


def row_experiment(row: tuple) -> tuple[ExperimentSpec, float]:
    """The experiment of one NeMo row and its published tokens/s per GPU."""
    name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tokens_per_s_per_gpu = row
    spec = experiment_from_dict(
        {
            "name": f"nemo-{name.lower()}-{gpus}",
            "model": {"name": name.lower(), "seq_length": seq, **MODELS[name]},
            "parallel": {
                "tp": tp,
                "sp": tp > 1,
                "pp": pp,
                "cp": cp,
                "vpp": vp,
                "pipeline_schedule": "interleaved" if vp > 1 else "1f1b",
                "micro_batch_size": mbs,
                "global_batch_size": gbs,
                "zero_stage": 1,
            },
            "cluster": {"accelerator": "H100-SXM", "num_gpus": gpus, "gpus_per_node": 8},
            "training": {"framework": "nemo", "dtype": "fp8", "grad_reduce_dtype": "bf16"},
        },
        source=f"training-runs.md §5.3 {name} {gpus} GPUs",
    )
    return spec, float(tokens_per_s_per_gpu)
