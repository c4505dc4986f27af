"""Hypothesis fuzzing of the YAML front door: any text gives data or one SpecError, never more."""

from __future__ import annotations

import math
import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simtrain.errors import SpecError
from simtrain.specs.loader import apply_overrides, experiment_from_dict, load_experiment
from simtrain.specs.safe_yaml import MAX_ALIASES, MAX_DEPTH, MAX_NODES, load_yaml_text
from tests.hostile.corpus import TINY, dump

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

YAML_ALPHABET = string.ascii_letters + string.digits + " \n\t:-[]{},&*!|>'\"#%@`?.<=\\"


def _load(text: str):
    """The front door's answer: ("ok", data) or ("error", message); anything else escapes."""
    try:
        return "ok", load_yaml_text(text, "fuzz.yaml")
    except SpecError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert message.startswith("'fuzz.yaml' "), message
        return "error", message


@FAST
@given(st.text(alphabet=YAML_ALPHABET, max_size=300))
def test_any_text_is_data_or_one_spec_error(text):
    _load(text)


@FAST
@given(st.binary(max_size=200))
def test_any_bytes_decoded_are_data_or_one_spec_error(raw):
    _load(raw.decode("utf-8", errors="replace"))


scalars = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.text(alphabet=string.ascii_letters + " _-", max_size=12),
    st.none(),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(
            st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6), inner, max_size=5
        ),
    ),
    max_leaves=40,
)


@FAST
@given(documents)
def test_ordinary_documents_load_like_pyyaml(data):
    text = yaml.safe_dump(data)
    status, loaded = _load(text)
    assert status == "ok"
    assert loaded == yaml.safe_load(text)


@FAST
@given(st.integers(1, 12), st.integers(1, 12))
def test_alias_fan_out_is_refused_exactly_when_it_expands_past_the_limit(levels, fan_out):
    lines = ["a0: &a0 x"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan_out) + "]")
    status, _ = _load("\n".join(lines))
    aliases = levels * fan_out
    # nodes with every alias expanded: the root mapping, its keys, and each level's tree
    expanded = (
        1 + (levels + 1) + sum(sum(fan_out**j for j in range(i + 1)) for i in range(levels + 1))
    )
    assert status == ("error" if aliases > MAX_ALIASES or expanded > MAX_NODES else "ok")


@FAST
@given(st.integers(1, 2 * MAX_DEPTH), st.sampled_from(["[", "{a: "]))
def test_nesting_is_refused_exactly_past_the_depth_limit(depth, opener):
    closer = "]" if opener == "[" else "}"
    inner = "1" if opener == "{a: " else ""
    status, _ = _load(opener * depth + inner + closer * depth)
    nodes_on_the_deepest_path = depth + (1 if inner else 0)
    assert status == ("error" if nodes_on_the_deepest_path > MAX_DEPTH else "ok")


@FAST
@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=2), min_size=1, max_size=8))
def test_duplicate_keys_are_always_refused(keys):
    text = "\n".join(f"{k}: {i}" for i, k in enumerate(keys))
    status, message = _load(text)
    assert status == ("error" if len(set(keys)) < len(keys) else "ok")
    if status == "error":
        assert "must not repeat the key" in message


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**100), 2**100),
)
FIELDS = [
    "model.num_layers", "model.hidden_size", "model.vocab_size", "model.seq_length",
    "parallel.tp", "parallel.pp", "parallel.global_batch_size", "parallel.micro_batch_size",
    "cluster.num_gpus", "cluster.gpus_per_node", "training.total_tokens", "seed",
    "cluster.topology.switch_radix", "cluster.topology.oversubscription",
]  # fmt: skip


@FAST
@given(st.sampled_from(FIELDS), numbers)
def test_any_number_in_any_field_validates_or_names_the_field(field, value):
    try:
        spec = experiment_from_dict(apply_overrides(TINY, [f"{field}={dump(value).strip()}"]))
    except SpecError as exc:
        assert field in str(exc) or "must" in str(exc)
        return
    current = spec
    for part in field.split("."):
        current = getattr(current, part)
    assert math.isfinite(current)


@settings(max_examples=30, deadline=None)
@given(data=documents)
def test_any_document_as_an_experiment_file_is_a_spec_or_one_line(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_experiment(path)
    except SpecError as exc:
        assert "\n" not in str(exc)
