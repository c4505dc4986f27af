"""The vTrain measured A100 iterations as simtrain experiments.

``shared/reference/vtrain-measured-runs.csv`` holds 1,549 measured Megatron-DeepSpeed
iterations on A100 (see ``vtrain-measured-runs.md``). Each row becomes an ExperimentSpec
with what the data states (model shape, tp/pp/dp, micro and global batch, full activation
recomputation, 1F1B) and, where it is silent, one documented assumption for all rows:

- GPT-2-style model: learned positions, GELU, biases, LayerNorm, tied embeddings, vocabulary
  50,257 padded to a multiple of 128·tp as Megatron-DeepSpeed does;
- the ``deepspeed`` framework profile (Megatron-DeepSpeed trains through DeepSpeed's engine:
  its pipeline engine, its ZeRO/bf16-optimizer code paths and collective habits);
- fp16, unfused attention (Megatron-DeepSpeed without FlashAttention), gradient reduction
  after the backward (no bucketed overlap: the runs' vTrain configs set
  ``use_gradient_bucket: false``), no sequence parallelism;
- A100-80GB in 8-GPU NVSwitch nodes with 4 x HDR (800 Gb/s per node, the inter-node
  bandwidth vTrain itself assumed for these runs).
"""

from __future__ import annotations

import csv
from pathlib import Path

from reference import reference_dir

from simtrain.specs.experiment import ExperimentSpec
from simtrain.specs.loader import experiment_from_dict

CSV_PATH = reference_dir() / "vtrain-measured-runs.csv"


def padded_vocab(vocab: int, tp: int) -> int:
    """Megatron pads the vocabulary to a multiple of 128·tp."""
    multiple = 128 * tp
    return -(-vocab // multiple) * multiple


def load_rows(path: Path = CSV_PATH) -> list[dict[str, str]]:
    """The measured rows, as dicts of strings keyed by the CSV header."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def row_experiment(row: dict[str, str]) -> ExperimentSpec:
    """The experiment that reproduces one measured row."""
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    return experiment_from_dict(
        {
            "name": f"vtrain-{row['scope']}-{row['source_row']}",
            "model": {
                "name": f"gpt-{row['num_layers']}l-{row['hidden_size']}h",
                "num_layers": int(row["num_layers"]),
                "hidden_size": int(row["hidden_size"]),
                "num_heads": int(row["num_heads"]),
                "vocab_size": padded_vocab(int(row["vocab_size"]), tp),
                "seq_length": int(row["seq_len"]),
                "tied_embeddings": True,
            },
            "parallel": {
                "tp": tp,
                "pp": pp,
                "dp": dp,
                "micro_batch_size": int(row["micro_batch_size"]),
                "global_batch_size": int(row["global_batch_size"]),
                "recompute": "full",
                "pipeline_schedule": "1f1b",
                "overlap_grad_reduce": False,
            },
            "cluster": {
                "accelerator": "A100-80GB",
                "num_gpus": int(row["num_gpus"]),
                "gpus_per_node": 8,
                "scale_out_link": "ib-hdr",
                "nics_per_node": 4,
            },
            "training": {"framework": "deepspeed", "dtype": "fp16", "attention_kernel": "unfused"},
        },
        source=f"{CSV_PATH.name} row {row['source_file']}:{row['source_row']}",
    )
