import pytest

from simtrain.errors import SpecError
from simtrain.specs.sweep import SweepSpec, check_field, load_sweep, sweep_from_dict
from simtrain.sweep.enumerate import candidates, count_points, iter_points, sweep_groups
from tests.sweep.helpers import TINY_BASE, tiny_sweep, write_sweep


def test_axis_forms_expand_as_documented():
    spec = sweep_from_dict(
        tiny_sweep(
            axes={
                "parallel.tp": [1, 2],
                "parallel.pp": {"divisors_of": 12, "min": 2, "max": 6},
                "parallel.micro_batch_size": {"range": [1, 7, 3]},
            }
        )
    )
    groups = sweep_groups(spec, TINY_BASE)
    assert [len(g) for g in groups] == [2, 4, 3]  # pp 2,3,4,6; mbs 1,4,7
    assert [a["parallel.micro_batch_size"] for a in groups[2]] == [1, 4, 7]
    assert count_points(groups) == 24


def test_divisors_of_reads_the_base_experiment():
    spec = sweep_from_dict(tiny_sweep())
    assert [a["parallel.pp"] for a in sweep_groups(spec, TINY_BASE)[1]] == [1, 2]


def test_zip_moves_fields_together_and_multiplies_the_product():
    spec = sweep_from_dict(
        tiny_sweep(
            axes={"parallel.tp": [1, 2]},
            zip=[{"parallel.recompute": ["none", "full"], "parallel.zero_stage": [1, 3]}],
        )
    )
    points = list(iter_points(sweep_groups(spec, TINY_BASE)))
    assert len(points) == 4
    assert {(p["parallel.recompute"], p["parallel.zero_stage"]) for p in points} == {
        ("none", 1),
        ("full", 3),
    }
    assert spec.swept_fields == ["parallel.tp", "parallel.recompute", "parallel.zero_stage"]


def test_zip_lists_of_different_lengths_are_an_error():
    spec = sweep_from_dict(
        tiny_sweep(zip=[{"parallel.recompute": ["none", "full"], "parallel.zero_stage": [1]}])
    )
    with pytest.raises(SpecError, match=r"'zip.0' value lists must have equal lengths"):
        sweep_groups(spec, TINY_BASE)


def test_unknown_axis_field_names_the_field_and_the_valid_ones():
    with pytest.raises(SpecError) as err:
        sweep_from_dict(tiny_sweep(axes={"parallel.tpp": [1, 2]}))
    message = str(err.value)
    assert "'axes.parallel.tpp'" in message and "'parallel.tpp'" in message
    assert "parallel.tp," in message and "parallel.zero_stage" in message


def test_unknown_section_lists_every_field():
    with pytest.raises(SpecError, match=r"valid: .*model\.hidden_size.*parallel\.tp"):
        check_field("paralel.tp", "axes.paralel.tp")


def test_empty_sweep_and_empty_axis_are_errors():
    with pytest.raises(SpecError, match="the sweep is empty"):
        candidates(sweep_from_dict(tiny_sweep(axes={})), TINY_BASE, "v")
    with pytest.raises(SpecError, match=r"'axes.parallel.tp' must have at least one value"):
        candidates(sweep_from_dict(tiny_sweep(axes={"parallel.tp": []})), TINY_BASE, "v")


def test_a_field_swept_twice_is_an_error():
    with pytest.raises(SpecError, match="must be swept once"):
        sweep_from_dict(tiny_sweep(zip=[{"parallel.tp": [1]}]))


def test_metric_goal_defaults_to_its_nature():
    assert SweepSpec(base={}, metric="step_time_s").ascending
    assert not SweepSpec(base={}, metric="mfu").ascending
    assert SweepSpec(base={}, metric="mfu", goal="min").ascending


def test_load_sweep_resolves_the_base_path_relative_to_the_file(tmp_path):
    (tmp_path / "exp.yaml").write_text("name: from-file\n")
    path = write_sweep(tmp_path, base="exp.yaml", set={"model.num_layers": 4})
    _, base = load_sweep(path)
    assert base == {"name": "from-file", "model": {"num_layers": 4}}
