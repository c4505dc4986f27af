import types
from collections import Counter

import pytest

from simtrain.errors import SpecError
from simtrain.specs.sweep import sweep_from_dict
from simtrain.sweep.enumerate import candidates, config_key
from tests.sweep.helpers import TINY_BASE, tiny_sweep


def test_candidates_are_lazy_and_pruned_cheaply():
    spec = sweep_from_dict(tiny_sweep())
    stream = candidates(spec, TINY_BASE, "v")
    assert isinstance(stream, types.GeneratorType)
    cands = list(stream)
    assert [c.index for c in cands] == list(range(12))
    statuses = Counter(c.status for c in cands)
    # tp=16 does not divide 8 heads (4 configs); mbs 2 at dp 16 does not split 16 sequences
    assert statuses == {"pending": 7, "invalid": 5}
    invalid = next(c for c in cands if c.point["parallel.tp"] == 16)
    assert "parallel.tp=16 must divide model.num_heads=8" in invalid.reason


def test_constraints_prune_and_can_read_derived_properties():
    spec = sweep_from_dict(
        tiny_sweep(constraints=["parallel.num_microbatches >= 2 and not parallel.tp > 1"])
    )
    cands = list(candidates(spec, TINY_BASE, "v"))
    kept = [c.point for c in cands if c.status == "pending"]
    assert kept == [
        {"parallel.tp": 1, "parallel.pp": 2, "parallel.micro_batch_size": 1},
    ]
    assert Counter(c.status for c in cands)["constraint"] == 6


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("parallel.tp <", "must be an expression"),
        ("__import__('os')", "may use only fields"),
        ("parallel.tpx == 1", "unknown experiment field 'parallel.tpx'"),
    ],
)
def test_bad_constraints_are_spec_errors(text, match):
    with pytest.raises(SpecError, match=match):
        candidates(sweep_from_dict(tiny_sweep(constraints=[text])), TINY_BASE, "v")


def test_key_depends_on_the_resolved_spec_and_the_version():
    spec = sweep_from_dict(tiny_sweep())
    a = next(c for c in candidates(spec, TINY_BASE, "v1") if c.status == "pending")
    b = next(c for c in candidates(spec, TINY_BASE, "v1") if c.status == "pending")
    assert a.key == b.key == config_key(a.spec, "v1")
    assert config_key(a.spec, "v2") != a.key


def test_a_swept_value_no_configuration_accepts_is_named_with_its_reason():
    from simtrain.sweep.enumerate import never_valid

    spec = sweep_from_dict(tiny_sweep())
    # tp=16 never divides 8 heads; tp=1 and 2 are valid somewhere, as are both mbs
    assert never_valid(candidates(spec, TINY_BASE, "v")) == [
        "no valid configuration has parallel.tp=16 (the first reason: "
        + next(c.reason for c in candidates(spec, TINY_BASE, "v") if c.point["parallel.tp"] == 16)
        + ")"
    ]
    typo = tiny_sweep(axes={"training.framework": ["megatron-core", "megatron-2030"]})
    (message,) = never_valid(candidates(sweep_from_dict(typo), TINY_BASE, "v"))
    assert message.startswith("no valid configuration has training.framework=megatron-2030")
    assert "must be a known framework" in message
