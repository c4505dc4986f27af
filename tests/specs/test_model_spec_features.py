"""Model-feature fields: one clear line and exit 2 for bad values; the DualPipe regression."""

import pytest

from simtrain.cli.app import run_app
from simtrain.errors import SpecError
from simtrain.parallel.builder import build_program
from tests.conftest import LLAMA_TINY, ROOT, make_experiment

QUICKSTART = str(ROOT / "experiments" / "quickstart.yaml")
MLA_OK = [
    "model.num_kv_heads=null",
    "model.mla.q_lora_rank=1536",
    "model.mla.kv_lora_rank=512",
    "model.mla.qk_nope_head_dim=128",
    "model.mla.qk_rope_head_dim=64",
    "model.mla.v_head_dim=128",
]


def one_line_error(capsys, *overrides: str) -> str:
    argv = ["run", QUICKSTART]
    for override in overrides:
        argv += ["--set", override]
    code = run_app(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("fraction", ["0", "-0.5", "1.5"])
def test_rotary_fraction_outside_zero_one(capsys, fraction):
    err = one_line_error(capsys, f"model.rotary_fraction={fraction}")
    assert "'model.rotary_fraction'" in err and fraction in err


def test_rotary_fraction_must_rotate_whole_pairs(capsys):
    err = one_line_error(capsys, "model.rotary_fraction=0.3")
    assert "model.rotary_fraction=0.3" in err and "even number" in err


def test_sliding_window_larger_than_the_sequence(capsys):
    err = one_line_error(capsys, "model.sliding_window=16384")
    assert "model.sliding_window=16384 must be at most model.seq_length=8192" in err


def test_sliding_window_with_ring_context_parallelism(capsys):
    err = one_line_error(capsys, "model.sliding_window=4096", "parallel.cp=2")
    assert "cp_algorithm=ring" in err and "all_gather or ulysses" in err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.mla.kv_lora_rank=8192", "kv_lora_rank=8192 must be below the key/value width"),
        ("model.mla.q_lora_rank=8192", "q_lora_rank=8192 must be below the query width"),
        ("model.mla.qk_rope_head_dim=63", "qk_rope_head_dim=63 must be even"),
        ("model.num_kv_heads=8", "num_kv_heads=8 must be omitted or equal model.num_heads=32"),
        ("model.head_dim=128", "head_dim=128 must be omitted with model.mla"),
    ],
)
def test_mla_dimensions_that_do_not_fit_the_heads(capsys, override, message):
    overrides = [o for o in MLA_OK if o.split("=")[0] != override.split("=")[0]]
    err = one_line_error(capsys, *overrides, override)
    assert message in err


def test_mla_heads_must_split_over_tensor_parallelism(capsys):
    err = one_line_error(capsys, *MLA_OK, "parallel.tp=3")
    assert "parallel.tp=3 must divide model.num_heads=32" in err


def test_valid_mla_runs(capsys):
    code = run_app(["run", QUICKSTART, *[a for o in MLA_OK for a in ("--set", o)], "--json"])
    assert code == 0, capsys.readouterr().err


def test_unused_settings_warn():
    with pytest.warns(UserWarning, match="model.rotary_fraction has no effect"):
        make_experiment(model={**LLAMA_TINY, "position_embedding": "alibi", "rotary_fraction": 0.5})
    with pytest.warns(UserWarning, match="training.fp8_recipe has no effect"):
        make_experiment("training.fp8_recipe=current", model=LLAMA_TINY)


MOE = {**LLAMA_TINY, "num_experts": 8, "moe_top_k": 2}


@pytest.mark.parametrize(
    "layout",
    [
        ("parallel.ep=2",),
        ("parallel.cp=2",),
        ("parallel.ep=2", "parallel.cp=2"),
    ],
    ids=["ep", "cp", "ep-cp"],
)
def test_dualpipe_with_expert_or_context_parallelism(layout):
    # Regression: the cross-field check reused the name of the model for the microbatch
    # count, so these raised AttributeError: 'int' object has no attribute 'is_moe'.
    spec = make_experiment(
        "parallel.pp=2",
        "parallel.pipeline_schedule=dualpipe",
        "parallel.global_batch_size=32",
        *layout,
        model=MOE,
    )
    assert spec.model.is_moe and spec.model.seq_length == 128
    assert build_program(spec).tasks


def test_dualpipe_microbatch_rule_still_names_the_fields():
    with pytest.raises(SpecError, match=r"even number of microbatches of at least 2\*pp=4"):
        make_experiment(
            "parallel.pp=2",
            "parallel.pipeline_schedule=dualpipe",
            "parallel.ep=2",
            "parallel.global_batch_size=8",
            model=MOE,
        )
