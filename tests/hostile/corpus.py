"""The hostile-input corpus: bad files, flags and traces that simtrain must refuse cleanly.

Every case is plain data (files to lay out, a command line, the field its error must name),
so the same corpus runs against any checkout (``tests/hostile/runner.py --repo``). Each case
must end with exit code 2 and one ``error:`` line on stderr that names ``field``, without a
traceback, within the runner's time and memory limits, and without writing a file outside the
case's output folder.

Placeholders in ``argv`` and in file contents: ``{in}`` (the case's input folder), ``{out}``
(its output folder, which a command may create) and ``{case}`` (the case folder).

The numeric cases are generated from the spec classes themselves (every numeric field gets a
non-finite value and a value far beyond any physical range), so a field added later is in the
corpus without anyone listing it. Run ``python -m tests.hostile.corpus`` for the counts by kind.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import typing
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

KINDS = ("yaml", "experiment", "sweep", "topology", "reliability", "trace", "store", "cli")
"""Input kinds; each runs in its own child process."""

FIFO = object()
"""File content marker: create a named pipe instead of a file."""


@dataclass(frozen=True)
class Case:
    """One hostile input and what its error must name."""

    kind: str
    name: str
    argv: tuple[str, ...]
    field: str
    """A fragment the one error line must contain (the field or flag at fault)."""
    files: dict[str, Any] = field(default_factory=dict)
    """Relative path -> bytes, str, ``{"symlink": target}``, ``{"sparse": size}``, ``{"repeat":
    bytes, "times": n, "prefix": bytes, "suffix": bytes}`` (a large file written by the
    runner), None (a directory) or :data:`FIFO`."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the runner's child process (no import of this module there)."""
        files = {k: ("__fifo__" if v is FIFO else v) for k, v in self.files.items()}
        return {
            "kind": self.kind,
            "name": self.name,
            "argv": list(self.argv),
            "field": self.field,
            "files": files,
        }


TINY_MODEL: dict[str, Any] = {
    "name": "tiny",
    "num_layers": 2,
    "hidden_size": 256,
    "num_heads": 8,
    "vocab_size": 1024,
    "seq_length": 128,
}
TINY: dict[str, Any] = {
    "name": "tiny",
    "model": TINY_MODEL,
    "parallel": {"tp": 2, "global_batch_size": 16},
    "cluster": {"accelerator": "H100-SXM", "num_gpus": 16, "gpus_per_node": 8},
}
"""A small valid experiment (2 layers on 16 H100): every experiment case starts from it."""
RELIABLE: dict[str, Any] = {
    **TINY,
    "training": {"total_tokens": 1e9},
    "reliability": {"failure_preset": "llama3-405b", "num_runs": 2},
}
"""TINY with a short whole run and two Monte Carlo runs."""


def dump(data: Any) -> str:
    """YAML text of ``data`` in flow style (fast for long lists; floats as YAML 1.1 reads them).

    Examples:
        >>> dump({"a": [1, 2.0, float("inf"), 1e300, None, True, "x"]})
        '{"a": [1, 2.0, .inf, 1.0e+300, null, true, "x"]}\\n'
    """
    return _flow(data) + "\n"


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        if value and all(v is value[0] for v in value):  # one element repeated: render it once
            return "[" + ", ".join([_flow(value[0])] * len(value)) + "]"
        if all(type(v) is int for v in value):
            return json.dumps(list(value))
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = (
                f"{mantissa}.0e{'+' if not exponent.startswith('-') else ''}{exponent.lstrip('+')}"
            )
        return text
    return json.dumps(value)


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``patch`` deep-merged on top."""
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def dotted(path: str, value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` from ``"a.b"``."""
    patch: Any = value
    for part in reversed(path.split(".")):
        patch = {part: patch}
    return patch


# ---------------------------------------------------------------------------------------------
# yaml: the loader itself (bombs, depth, duplicates, extends chains, odd files)


def _yaml_cases() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, files: dict[str, Any], fld: str, argv: tuple[str, ...] = ()) -> None:
        cases.append(Case("yaml", name, argv or ("run", "{in}/exp.yaml"), fld, files))

    base = yaml.safe_dump(TINY, sort_keys=False)  # block style: cases append and replace lines
    laughs = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        laughs.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    add("billion_laughs_top", {"exp.yaml": "\n".join(laughs) + "\n"}, "exp.yaml")
    add(
        "billion_laughs_in_name",
        {"exp.yaml": "\n".join(["x: " + laughs[0][4:], *laughs[1:]]).replace("x:", "a0:") + "\n"},
        "exp.yaml",
    )
    add(
        "billion_laughs_under_model",
        {"exp.yaml": base + "description: &d " + "[*a9]\n" + "\n".join(laughs) + "\n"},
        "exp.yaml",
    )
    many_alias = "x: &x 1\ny: [" + ", ".join(["*x"] * 5000) + "]\n"
    add("five_thousand_aliases", {"exp.yaml": base + many_alias}, "exp.yaml")
    wide = "w: &w [" + ", ".join(["1"] * 2000) + "]\nv: [" + ", ".join(["*w"] * 200) + "]\n"
    add("wide_alias_expansion", {"exp.yaml": base + wide}, "exp.yaml")
    add("alias_cycle_like", {"exp.yaml": "a: &a [*a]\n"}, "exp.yaml")
    add("alias_to_unknown_anchor", {"exp.yaml": base + "b: *nothere\n"}, "exp.yaml")
    add(
        "nested_flow_lists_100k",
        {"exp.yaml": "model: " + "[" * 100_000 + "]" * 100_000 + "\n"},
        "exp.yaml",
    )
    add(
        "nested_flow_maps_20k",
        {"exp.yaml": "model: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n"},
        "exp.yaml",
    )
    block = "".join(" " * i + "a:\n" for i in range(3000)) + " " * 3000 + "b: 1\n"
    add("nested_block_maps_3000", {"exp.yaml": block}, "exp.yaml")
    add(
        "nested_block_lists_3000",
        {"exp.yaml": "model:\n" + "".join(" " * (i + 1) + "-\n" for i in range(3000))},
        "exp.yaml",
    )
    add(
        "duplicate_section",
        {"exp.yaml": base + "parallel:\n  tp: 4\n  global_batch_size: 16\n"},
        "parallel",
    )
    add(
        "duplicate_nested_key",
        {"exp.yaml": base.replace("  tp: 2\n", "  tp: 2\n  tp: 8\n")},
        "tp",
    )
    add("duplicate_name_key", {"exp.yaml": "name: a\nname: b\n" + base.split("\n", 1)[1]}, "name")
    add(
        "duplicate_key_in_base",
        {
            "base.yaml": base + "cluster: {accelerator: A100-80GB, num_gpus: 8}\n",
            "exp.yaml": "extends: base.yaml\n",
        },
        "cluster",
    )
    chain = {f"c{i}.yaml": f"extends: c{i + 1}.yaml\n" for i in range(3000)}
    chain["c3000.yaml"] = base
    chain["exp.yaml"] = "extends: c0.yaml\n"
    add("extends_chain_3000", chain, "extends")
    chain40 = {f"c{i}.yaml": f"extends: c{i + 1}.yaml\n" for i in range(40)}
    chain40["c40.yaml"] = base
    chain40["exp.yaml"] = "extends: c0.yaml\n"
    add("extends_chain_40", chain40, "extends")
    add("extends_self", {"exp.yaml": "extends: exp.yaml\n" + base}, "extends")
    add(
        "extends_two_cycle",
        {"exp.yaml": "extends: b.yaml\n", "b.yaml": "extends: exp.yaml\n" + base},
        "extends",
    )
    add(
        "extends_symlink_loop",
        {"exp.yaml": "extends: loop.yaml\n", "loop.yaml": {"symlink": "loop.yaml"}},
        "loop.yaml",
    )
    add(
        "extends_symlink_pair_loop",
        {
            "exp.yaml": "extends: l1.yaml\n",
            "l1.yaml": {"symlink": "l2.yaml"},
            "l2.yaml": {"symlink": "l1.yaml"},
        },
        "l1.yaml",
    )
    add(
        "extends_symlink_to_self_file",
        {"exp.yaml": "extends: me.yaml\n" + base, "me.yaml": {"symlink": "exp.yaml"}},
        "extends",
    )
    add("extends_directory", {"exp.yaml": "extends: sub\n" + base, "sub": None}, "sub")
    add("extends_dev_zero", {"exp.yaml": "extends: /dev/zero\n" + base}, "/dev/zero")
    add("extends_fifo", {"exp.yaml": "extends: pipe.yaml\n" + base, "pipe.yaml": FIFO}, "pipe.yaml")
    add("extends_missing", {"exp.yaml": "extends: nothere.yaml\n" + base}, "nothere.yaml")
    add("extends_number", {"exp.yaml": "extends: 42\n" + base}, "extends")
    add("extends_mapping", {"exp.yaml": "extends: {a: 1}\n" + base}, "extends")
    add("extends_empty_string", {"exp.yaml": "extends: ''\n" + base}, "extends")
    add(
        "extends_ten_thousand",
        {"exp.yaml": "extends: [" + ", ".join(["b.yaml"] * 10_000) + "]\n", "b.yaml": base},
        "extends",
    )
    add("extends_nul_byte", {"exp.yaml": 'extends: "a\\0b.yaml"\n' + base}, "extends")
    add(
        "extends_to_list_file",
        {"exp.yaml": "extends: l.yaml\n" + base, "l.yaml": "[1, 2]\n"},
        "l.yaml",
    )
    add("fifo_experiment", {"exp.yaml": FIFO}, "exp.yaml")
    add("directory_experiment", {"exp.yaml": None}, "exp.yaml")
    add("missing_experiment", {}, "exp.yaml")
    add("empty_experiment", {"exp.yaml": ""}, "model")
    add("binary_garbage", {"exp.yaml": bytes(range(256)) * 4}, "exp.yaml")
    add("utf16_file", {"exp.yaml": base.encode("utf-16")}, "exp.yaml")
    add("top_level_list", {"exp.yaml": "- 1\n- 2\n"}, "exp.yaml")
    add("top_level_scalar", {"exp.yaml": "42\n"}, "exp.yaml")
    add("tabs_indentation", {"exp.yaml": "model:\n\tnum_layers: 2\n"}, "exp.yaml")
    add(
        "python_object_tag",
        {"exp.yaml": "name: !!python/object/apply:os.system ['true']\n"},
        "exp.yaml",
    )
    add("unknown_tag", {"exp.yaml": base + "x: !custom 1\n"}, "exp.yaml")
    add("unhashable_key", {"exp.yaml": base + "? [a, b]\n: 1\n"}, "exp.yaml")
    add("integer_key", {"exp.yaml": base + "1: 2\n"}, "1")
    add(
        "huge_integer_literal",
        {"exp.yaml": base.replace("num_layers: 2", "num_layers: " + "9" * 6000)},
        "digits",
    )
    add(
        "huge_float_literal",
        {"exp.yaml": base.replace("num_layers: 2", "num_layers: 1" + "0" * 6000 + ".5")},
        "num_layers",
    )
    add(
        "timestamp_as_name", {"exp.yaml": base.replace("name: tiny", "name: 2001-12-14", 1)}, "name"
    )
    add(
        "two_megabytes_of_comments",
        {"exp.yaml": base + ("#" * 1023 + "\n") * 2000},
        "exp.yaml",
    )
    add(
        "two_megabyte_name",
        {"exp.yaml": base.replace("name: tiny", "name: " + "x" * 2_000_000, 1)},
        "exp.yaml",
    )
    add("merge_key_bomb", {"exp.yaml": "\n".join(laughs) + "\n<<: *a9\n"}, "exp.yaml")
    add("sparse_two_gigabyte_file", {"exp.yaml": {"sparse": 2 << 30}}, "exp.yaml")

    # --set values go through the same front door
    def add_set(name: str, override: str, fld: str) -> None:
        cases.append(
            Case("yaml", name, ("run", "{in}/exp.yaml", "--set", override), fld, {"exp.yaml": base})
        )

    add_set("set_deep_list", "model.name=" + "[" * 50_000 + "]" * 50_000, "model.name")
    add_set(
        "set_alias_bomb", "model.name=" + "[" * 3 + "&a [1]" + ", *a" * 2000 + "]" * 3, "model.name"
    )
    add_set("set_deep_key", "model." + ".".join(["a"] * 5000) + "=1", "--set")
    add_set("set_no_equals", "parallel.tp", "--set")
    add_set("set_empty_key", "=3", "--set")
    add_set("set_duplicate_flow_keys", "parallel={tp: 2, tp: 4, global_batch_size: 16}", "tp")
    add_set("set_python_tag", "parallel.tp=!!python/name:os.system", "parallel.tp")
    add_set("set_huge_int", "parallel.tp=" + "9" * 6000, "parallel.tp")
    add_set("set_extends", "extends=/etc/passwd", "extends")
    return cases


# ---------------------------------------------------------------------------------------------
# experiment: every numeric field out of range, plus cross-field semantics and work limits


def _spec_numeric_fields() -> list[tuple[str, Any, dict[str, Any]]]:
    """(dotted path, annotation, extra patch that selects a union member) of numeric fields."""
    from pydantic import BaseModel

    from simtrain.specs.experiment import ExperimentSpec

    out: list[tuple[str, Any, dict[str, Any]]] = []

    def leaf_types(annotation: Any) -> list[Any]:
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is typing.Annotated:
            return leaf_types(args[0])
        if not args:
            return [annotation]
        return [t for a in args for t in leaf_types(a)]

    def walk(model: type[BaseModel], prefix: str, patch: dict[str, Any], depth: int) -> None:
        if depth > 4:
            return
        for name, info in model.model_fields.items():
            path = f"{prefix}{name}"
            types = leaf_types(info.annotation)
            specs = [t for t in types if isinstance(t, type) and issubclass(t, BaseModel)]
            origin = typing.get_origin(info.annotation)
            if specs and origin in (tuple, list):
                continue  # list members are covered by hand below
            for sub in specs:
                kind_field = sub.model_fields.get("kind")
                sub_patch = dict(patch)
                if kind_field is not None and kind_field.default is not None:
                    sub_patch = merged(sub_patch, dotted(f"{path}.kind", kind_field.default))
                required = {
                    n: 1.0
                    for n, f in sub.model_fields.items()
                    if f.is_required() and set(leaf_types(f.annotation)) <= {int, float}
                }
                for n, v in required.items():
                    sub_patch = merged(sub_patch, dotted(f"{path}.{n}", v))
                walk(sub, f"{path}.", sub_patch, depth + 1)
            if specs:
                continue
            if any(t in (int, float) for t in types) and bool not in types:
                out.append((path, info.annotation, patch))

    walk(ExperimentSpec, "", {}, 0)
    return out


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _experiment_cases() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, data: dict[str, Any], fld: str, extra: tuple[str, ...] = ()) -> None:
        cases.append(
            Case(
                "experiment", name, ("run", "{in}/exp.yaml", *extra), fld, {"exp.yaml": dump(data)}
            )
        )

    for path, _annotation, patch in _spec_numeric_fields():
        start = RELIABLE if path.startswith(("reliability.", "cost.")) else TINY
        start = merged(start, patch)
        if path.startswith("expected."):
            start = merged(start, {"expected": {"metric": "mfu", "value": 0.5, "source": "x"}})
        for label, value in (("inf", float("inf")), ("nan", float("nan")), ("huge", 1e300)):
            kinds = [v for k, v in _flat(patch).items() if k.endswith(".kind")]
            tag = "".join(f"[{k}]" for k in kinds)
            add(f"{path}{tag}={label}", merged(start, dotted(path, value)), path)

    # cross-field semantics
    add(
        "scale_out_link_nvlink4",
        merged(TINY, {"cluster": {"scale_out_link": "nvlink4"}}),
        "cluster.scale_out_link",
    )
    add(
        "scale_up_link_ib_ndr",
        merged(TINY, {"cluster": {"scale_up_link": "ib-ndr"}}),
        "cluster.scale_up_link",
    )
    add(
        "scale_up_link_unknown",
        merged(TINY, {"cluster": {"scale_up_link": "warp-drive"}}),
        "cluster.scale_up_link",
    )
    add(
        "accelerator_unknown",
        merged(TINY, {"cluster": {"accelerator": "H900"}}),
        "cluster.accelerator",
    )
    add("accelerator_empty", merged(TINY, {"cluster": {"accelerator": ""}}), "cluster.accelerator")
    add(
        "radix_2_thousands_of_gpus",
        merged(
            TINY,
            {
                "cluster": {"num_gpus": 4096, "topology": {"switch_radix": 2}},
                "parallel": {"global_batch_size": 4096},
                "simulation": {"network_model": "flow"},
            },
        ),
        "switch_radix",
    )
    add(
        "radix_4_two_tiers_forced",
        merged(
            TINY,
            {
                "cluster": {"num_gpus": 4096, "topology": {"switch_radix": 4, "num_tiers": 3}},
                "parallel": {"global_batch_size": 4096},
                "simulation": {"network_model": "flow"},
            },
        ),
        "switch_radix",
    )
    add(
        "leaf_down_ports_above_radix",
        merged(TINY, {"cluster": {"topology": {"switch_radix": 8, "leaf_down_ports": 64}}}),
        "leaf_down_ports",
    )
    add(
        "spines_per_pod_above_radix",
        merged(TINY, {"cluster": {"topology": {"switch_radix": 8, "spines_per_pod": 64}}}),
        "spines_per_pod",
    )
    add(
        "torus_product_mismatch",
        merged(
            TINY,
            {
                "cluster": {
                    "accelerator": "TPUv4",
                    "gpus_per_node": 4,
                    "topology": {"kind": "torus_3d", "torus_shape": [4, 4, 4]},
                }
            },
        ),
        "torus_shape",
    )
    add(
        "torus_huge_dimension",
        merged(
            TINY,
            {
                "cluster": {
                    "accelerator": "TPUv4",
                    "gpus_per_node": 4,
                    "topology": {"kind": "torus_3d", "torus_shape": [1 << 40, 1, 1]},
                }
            },
        ),
        "torus_shape",
    )
    add(
        "torus_zero_dimension",
        merged(TINY, {"cluster": {"topology": {"kind": "torus_3d", "torus_shape": [0, 4, 4]}}}),
        "torus_shape",
    )
    add(
        "torus_shape_two_dims",
        merged(TINY, {"cluster": {"topology": {"kind": "torus_3d", "torus_shape": [4, 4]}}}),
        "torus_shape",
    )
    add(
        "collective_algorithm_magic",
        merged(TINY, {"simulation": {"collective_algorithm": "magic"}}),
        "simulation.collective_algorithm",
    )
    add(
        "collective_algorithm_magic_flow",
        merged(TINY, {"simulation": {"collective_algorithm": "magic", "network_model": "flow"}}),
        "simulation.collective_algorithm",
    )
    add(
        "network_model_magic",
        merged(TINY, {"simulation": {"network_model": "magic"}}),
        "simulation.network_model",
    )
    add(
        "gpus_per_node_1e9",
        merged(TINY, {"cluster": {"gpus_per_node": 1_000_000_000}}),
        "cluster.gpus_per_node",
    )
    add(
        "num_gpus_2_31",
        merged(
            TINY, {"cluster": {"num_gpus": 1 << 31}, "parallel": {"global_batch_size": 1 << 31}}
        ),
        "cluster.num_gpus",
    )
    add("num_gpus_string", merged(TINY, {"cluster": {"num_gpus": "sixteen"}}), "cluster.num_gpus")
    add("num_gpus_negative", merged(TINY, {"cluster": {"num_gpus": -16}}), "cluster.num_gpus")
    add("num_gpus_list", merged(TINY, {"cluster": {"num_gpus": [16]}}), "cluster.num_gpus")
    add("tp_float", merged(TINY, {"parallel": {"tp": 2.5}}), "parallel.tp")
    add("tp_does_not_divide_heads", merged(TINY, {"parallel": {"tp": 3}}), "parallel.tp")
    add("seed_2_80", merged(TINY, {"seed": 1 << 80}), "seed")
    add("seed_negative", merged(TINY, {"seed": -1}), "seed")
    add("vocab_size_1e15", merged(TINY, {"model": {"vocab_size": 10**15}}), "model.vocab_size")
    add(
        "total_tokens_1e300",
        merged(TINY, {"training": {"total_tokens": 1e300}}),
        "training.total_tokens",
    )
    add(
        "usd_per_gpu_hour_inf",
        merged(TINY, {"cost": {"usd_per_gpu_hour": float("inf")}}),
        "cost.usd_per_gpu_hour",
    )
    add("dtype_unknown", merged(TINY, {"training": {"dtype": "fp4"}}), "training.dtype")
    add(
        "dtype_fp8_on_a100",
        merged(TINY, {"cluster": {"accelerator": "A100-80GB"}, "training": {"dtype": "fp8"}}),
        "fp8",
    )
    add("unknown_section", merged(TINY, {"modle": {"num_layers": 2}}), "modle")
    add(
        "unknown_field",
        merged(TINY, {"parallel": {"tensor_parallel": 2}}),
        "parallel.tensor_parallel",
    )
    add("section_is_list", {**TINY, "parallel": [1, 2]}, "parallel")
    add("section_is_string", {**TINY, "cluster": "dgx"}, "cluster")
    add("missing_model", {k: v for k, v in TINY.items() if k != "model"}, "model")
    add(
        "rank_order_garbage",
        merged(TINY, {"parallel": {"rank_order": "tp-xx-yy"}}),
        "parallel.rank_order",
    )
    add(
        "rank_order_duplicate_axis",
        merged(TINY, {"parallel": {"rank_order": "tp-tp-dp-pp"}}),
        "parallel.rank_order",
    )
    add(
        "rank_order_huge",
        merged(TINY, {"parallel": {"rank_order": "tp-" * 100_000 + "dp"}}),
        "parallel.rank_order",
    )
    add("name_one_megabyte", merged(TINY, {"name": "n" * 1_000_000}), "name")
    add(
        "nics_per_node_huge",
        merged(TINY, {"cluster": {"nics_per_node": 1 << 40}}),
        "cluster.nics_per_node",
    )
    add(
        "moe_experts_million",
        merged(TINY, {"model": {"num_experts": 1_000_000, "moe_top_k": 2}}),
        "model.num_experts",
    )

    # framework profiles (training.framework) and what each stack can run
    llama = merged(
        TINY,
        {
            "model": {"activation": "swiglu", "ffn_hidden_size": 688, "num_kv_heads": 2},
            "parallel": {"sp": True},
        },
    )
    titan = merged(llama, {"training": {"framework": "torchtitan-2025"}})
    fw, tp_comm, recompute = "training.framework", "parallel.tp_comm_overlap", "parallel.recompute"
    per_op = {recompute: "per_op"}
    frameworks: list[tuple[str, str, dict[str, Any]]] = [
        ("framework_unknown", fw, {fw: "torchtitan-2026"}),
        ("framework_wrong_case", fw, {fw: "TorchTitan-2025"}),
        ("framework_empty", fw, {fw: ""}),
        ("framework_number", fw, {fw: 2025}),
        ("framework_list", fw, {fw: ["torchtitan"]}),
        ("framework_null", fw, {fw: None}),
        ("titan2025_zero1", "parallel.zero_stage", {"parallel.zero_stage": 1}),
        ("titan2025_dtype_mxfp8", "training.dtype", {"training.dtype": "mxfp8"}),
        ("titan2025_flash1", "training.attention_kernel", {"training.attention_kernel": "flash1"}),
        (
            "titan2025_dualpipe",
            "parallel.pipeline_schedule",
            {
                "parallel.pp": 2,
                "parallel.pipeline_schedule": "dualpipe",
                "parallel.global_batch_size": 32,
                "cluster.num_gpus": 32,
            },
        ),
        ("titan2025_tp_comm_wgrad", tp_comm, {tp_comm: "wgrad"}),
        ("titan2025_tp_comm_gemm_no_sp", tp_comm, {tp_comm: "gemm", "parallel.sp": False}),
        ("titan2025_tp_comm_magic", tp_comm, {tp_comm: "magic"}),
        ("titan2025_per_op_gelu", recompute, {**per_op, "model.activation": "gelu"}),
        (
            "titan2025_per_op_moe",
            recompute,
            {**per_op, "model.num_experts": 8, "model.moe_top_k": 2},
        ),
        ("titan2025_per_op_parallel_block", recompute, {**per_op, "model.block": "parallel"}),
        (
            "titan2025_per_op_with_modules",
            "parallel.recompute_modules",
            {**per_op, "parallel.recompute_modules": ["mlp"]},
        ),
        ("titan2025_recompute_magic", recompute, {recompute: "per_layer"}),
        ("titan2025_execution_jit", "training.execution_mode", {"training.execution_mode": "jit"}),
        ("fsdp1_tp_comm_gemm", tp_comm, {fw: "pytorch-fsdp1", tp_comm: "gemm"}),
        ("llm_foundry_tp_comm_wgrad", tp_comm, {fw: "llm-foundry", tp_comm: "wgrad"}),
        (
            "megatron2021_tp_comm_gemm",
            tp_comm,
            {fw: "megatron-lm-2021", "training.dtype": "fp16", tp_comm: "gemm"},
        ),
    ]
    for name, fld, values in frameworks:
        data = titan
        for path, value in values.items():
            data = merged(data, dotted(path, value))
        add(name, data, fld)

    # work that explodes: refused up front with the number and the flag that raises the limit
    add("num_layers_1e6", merged(TINY, {"model": {"num_layers": 1_000_000}}), "model.num_layers")
    add(
        "layers_times_microbatches",
        merged(TINY, {"model": {"num_layers": 1000}, "parallel": {"global_batch_size": 800_000}}),
        "--max-tasks",
    )
    add(
        "global_batch_1e12",
        merged(TINY, {"parallel": {"global_batch_size": 10**12}}),
        "parallel.global_batch_size",
    )
    add(
        "global_batch_many_microbatches",
        merged(TINY, {"parallel": {"global_batch_size": 8 << 20}}),
        "--max-tasks",
    )
    add(
        "full_on_65536_ranks",
        merged(
            TINY, {"cluster": {"num_gpus": 65536}, "parallel": {"global_batch_size": 65536 * 4}}
        ),
        "--max-tasks",
        ("--full",),
    )
    add(
        "full_in_spec_65536",
        merged(
            TINY,
            {
                "cluster": {"num_gpus": 65536},
                "parallel": {"global_batch_size": 65536 * 4},
                "simulation": {"full": True},
            },
        ),
        "--max-tasks",
    )
    add(
        "flow_on_a_million_gpus",
        merged(
            TINY,
            {
                "cluster": {"num_gpus": 1 << 20},
                "parallel": {"global_batch_size": 1 << 21},
                "simulation": {"network_model": "flow"},
            },
        ),
        "--max-topology-elements",
    )
    add("pp_1e6_stages", merged(TINY, {"parallel": {"pp": 1_000_000}}), "parallel.pp")
    add(
        "vpp_huge",
        merged(TINY, {"parallel": {"vpp": 1 << 30, "pipeline_schedule": "interleaved"}}),
        "parallel.vpp",
    )
    add("seq_length_1e9", merged(TINY, {"model": {"seq_length": 10**9}}), "model.seq_length")
    add(
        "hidden_size_1e9",
        merged(TINY, {"model": {"hidden_size": 1 << 30, "num_heads": 8}}),
        "model.hidden_size",
    )
    return cases


# ---------------------------------------------------------------------------------------------
# sweep: axes, constraints, names, base


def _sweep(data: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    sweep = {"name": "s", "base": "base.yaml", "axes": {"parallel.tp": [1, 2]}}
    sweep.update(data)
    return {"sweep.yaml": dump(sweep), "base.yaml": dump(base or TINY)}


def _sweep_cases() -> list[Case]:
    cases: list[Case] = []

    def add(
        name: str,
        data: dict[str, Any],
        fld: str,
        extra: tuple[str, ...] = (),
        base: dict[str, Any] | None = None,
    ) -> None:
        argv = ("sweep", "{in}/sweep.yaml", "--store", "{out}/s.sqlite", "--workers", "1", *extra)
        cases.append(Case("sweep", name, argv, fld, _sweep(data, base)))

    constraints = {
        "string_times_1e9": ("'x' * 1000000000", "constraints.0"),
        "list_times_1e9": ("[0] * 1000000000", "constraints.0"),
        "list_times_list_nested": ("[[0] * 100000] * 100000", "constraints.0"),
        "string_doubling_chain": ("'x' * 60000 * 60000", "constraints.0"),
        "divide_by_zero": ("parallel.tp / 0 > 1", "constraints.0"),
        "divide_by_zero_literal": ("1 / 0", "constraints.0"),
        "modulo_zero": ("1 % 0 == 0", "constraints.0"),
        "floor_divide_zero": ("parallel.tp // 0 == 1", "constraints.0"),
        "modulo_field_zero": ("parallel.tp % (parallel.pp - 1) == 0", "constraints.0"),
        "string_lt_number": ("parallel.tp < 'a'", "constraints.0"),
        "string_plus_number": ("'a' + 1 == 2", "constraints.0"),
        "negate_string": ("-'a' == 1", "constraints.0"),
        "in_number": ("parallel.tp in 3", "constraints.0"),
        "list_times_float": ("[1] * 1.5 == [1]", "constraints.0"),
        "string_times_negative_huge": ("'ab' * -99999999999999999999 == ''", "constraints.0"),
        "huge_product_of_literals": (
            " * ".join(["99999999999999999999"] * 2000) + " > 0",
            "constraints.0",
        ),
        "float_overflow": ("1e308 * 10 > 0", "constraints.0"),
        "deep_parentheses": ("(" * 5000 + "1" + ")" * 5000, "constraints.0"),
        "deep_not_chain": ("not " * 50_000 + "True", "constraints.0"),
        "deep_unary_minus": ("-" * 100_000 + "1 < 0", "constraints.0"),
        "long_expression": (" + ".join(["1"] * 200_000) + " > 0", "constraints.0"),
        "power_operator": ("2 ** 1000000000 > 0", "constraints.0"),
        "call": ("len('x') > 0", "constraints.0"),
        "lambda": ("(lambda: 1)() == 1", "constraints.0"),
        "attribute_dunder": ("parallel.__class__ == 1", "constraints.0"),
        "unknown_field": ("parallel.tpp <= 8", "constraints.0"),
        "syntax_error": ("parallel.tp <=", "constraints.0"),
        "walrus": ("(x := 1) == 1", "constraints.0"),
        "subscript": ("[1, 2][5] == 1", "constraints.0"),
        "comparison_chain_str_num": ("1 < 'a' < 2", "constraints.0"),
        "compare_list_and_number": ("[1] < 1", "constraints.0"),
        "empty": ("", "constraints.0"),
        "not_a_string": (12, "constraints.0"),
    }
    for name, (text, fld) in constraints.items():
        add(f"constraint_{name}", {"constraints": [text]}, fld)

    add(
        "axis_range_1e9",
        {"axes": {"parallel.micro_batch_size": {"range": [1, 1_000_000_000]}}},
        "--max-configs",
    )
    add(
        "axis_range_1e18",
        {"axes": {"parallel.micro_batch_size": {"range": [1, 10**18]}}},
        "--max-configs",
    )
    add(
        "product_1e9",
        {
            "axes": {
                "parallel.tp": {"range": [1, 1000]},
                "parallel.pp": {"range": [1, 1000]},
                "parallel.cp": {"range": [1, 1000]},
            }
        },
        "--max-configs",
    )
    add("axis_range_step_zero", {"axes": {"parallel.tp": {"range": [1, 8, 0]}}}, "range")
    add("axis_range_step_negative", {"axes": {"parallel.tp": {"range": [8, 1, -1]}}}, "range")
    add("axis_range_inf", {"axes": {"parallel.tp": {"range": [1, float("inf")]}}}, "range")
    add("axis_range_strings", {"axes": {"parallel.tp": {"range": ["a", "b"]}}}, "range")
    add("axis_range_one_value", {"axes": {"parallel.tp": {"range": [1]}}}, "range")
    add("axis_empty_list", {"axes": {"parallel.tp": []}}, "axes.parallel.tp")
    add("axis_unknown_field", {"axes": {"parallel.tpp": [1, 2]}}, "parallel.tpp")
    add("axis_not_a_list", {"axes": {"parallel.tp": 4}}, "axes.parallel.tp")
    add("axis_values_inf", {"axes": {"parallel.tp": [1, float("inf")]}}, "parallel.tp")
    add(
        "axis_hundred_thousand_values",
        {"axes": {"parallel.micro_batch_size": list(range(1, 200_001))}},
        "sweep.yaml",
    )
    add("divisors_of_1e18", {"axes": {"parallel.tp": {"divisors_of": 10**18}}}, "divisors_of")
    add("divisors_of_2_62", {"axes": {"parallel.tp": {"divisors_of": 1 << 62}}}, "divisors_of")
    add("divisors_of_zero", {"axes": {"parallel.tp": {"divisors_of": 0}}}, "divisors_of")
    add("divisors_of_negative", {"axes": {"parallel.tp": {"divisors_of": -12}}}, "divisors_of")
    add(
        "divisors_of_unknown_field",
        {"axes": {"parallel.tp": {"divisors_of": "model.nothing"}}},
        "divisors_of",
    )
    add(
        "divisors_of_string_field",
        {"axes": {"parallel.tp": {"divisors_of": "model.name"}}},
        "divisors_of",
    )
    add("zip_unequal", {"axes": {}, "zip": [{"parallel.tp": [1, 2], "parallel.pp": [1]}]}, "zip.0")
    add("zip_empty_group", {"zip": [{}]}, "zip.0")
    add("field_twice", {"zip": [{"parallel.tp": [1, 2]}]}, "parallel.tp")
    add("empty_sweep", {"axes": {}}, "axes")
    add("metric_unknown", {"metric": "happiness"}, "metric")
    add("top_k_huge", {"top_k": 10**12}, "top_k")
    add("top_k_zero", {"top_k": 0}, "top_k")
    add("name_dotdot", {"name": "../../escaped"}, "name", ())
    add("name_absolute", {"name": "/tmp/simtrain-hostile-escape"}, "name")
    add("name_empty", {"name": ""}, "name")
    add("name_nul", {"name": "a\0b"}, "name")
    add("name_ten_thousand_chars", {"name": "n" * 10_000}, "name")
    add("name_newline", {"name": "a\nb"}, "name")
    add("base_missing", {"base": "nothere.yaml"}, "nothere.yaml")
    add("base_is_list", {"base": [1, 2]}, "base")
    add("base_inline_bad", {"base": {"model": 3}}, "model")
    add("base_inline_extends_cycle", {"base": {"extends": "sweep.yaml"}}, "valid experiment")
    add("set_unknown_field", {"set": {"cluster.nothing": 1}}, "cluster.nothing")
    add("set_inf", {"set": {"cluster.num_gpus": float("inf")}}, "cluster.num_gpus")
    add("unknown_key", {"axis": {"parallel.tp": [1]}}, "axis")
    add("executor_magic", {}, "--executor", ("--executor", "magic"))
    add("workers_zero", {}, "--workers", ("--workers", "0"))
    add("workers_huge", {}, "--workers", ("--workers", "100000"))
    add("top_zero", {}, "--top", ("--top", "0"))
    add("usd_inf", {}, "--usd-per-gpu-hour", ("--usd-per-gpu-hour", "inf"))
    add("usd_nan", {}, "--usd-per-gpu-hour", ("--usd-per-gpu-hour", "nan"))
    add("plot_unknown_format", {}, "--plot", ("--plot", "{out}/fig.xyz"))
    add("plot_empty", {}, "--plot", ("--plot", ""))
    add("plot_no_suffix", {}, "--plot", ("--plot", "{out}/fig"))
    add("out_unknown_suffix", {}, "--out", ("--out", "{out}/rows.txt"))
    add("out_empty", {}, "--out", ("--out", ""))
    add("out_dev_null_csv", {}, "--out", ("--out", "/dev/null"))
    add("out_is_directory", {}, "--out", ("--out", "{in}"))
    add("sweep_file_missing", {}, "nothere", ())
    cases.append(
        Case("sweep", "sweep_file_missing2", ("sweep", "{in}/nothere.yaml"), "nothere.yaml", {})
    )
    cases.append(Case("sweep", "sweep_file_is_dir", ("sweep", "{in}"), "in", {}))
    cases.append(
        Case(
            "sweep",
            "sweep_default_store_name_escape",
            ("sweep", "{in}/sweep.yaml", "--workers", "1"),
            "name",
            _sweep({"name": "../../../escaped", "axes": {"parallel.tp": [3]}}),
        )
    )
    return [c for c in cases if c.name != "sweep_file_missing"]


# ---------------------------------------------------------------------------------------------
# topology and collective


def _cluster_file(cluster: dict[str, Any]) -> dict[str, str]:
    return {"topo.yaml": dump({"cluster": cluster})}


def _topology_cases() -> list[Case]:
    cases: list[Case] = []
    good = {"accelerator": "H100-SXM", "num_gpus": 16, "gpus_per_node": 8}

    def add(name: str, cluster: Any, fld: str, extra: tuple[str, ...] = ()) -> None:
        files = _cluster_file(cluster) if cluster is not None else {}
        cases.append(Case("topology", name, ("topology", "{in}/topo.yaml", *extra), fld, files))

    def coll(
        name: str, extra: tuple[str, ...], fld: str, cluster: dict[str, Any] | None = None
    ) -> None:
        argv = ("collective", "--topology", "{in}/topo.yaml", *extra)
        cases.append(Case("topology", name, argv, fld, _cluster_file(cluster or good)))

    add("no_cluster_section", None, "topo.yaml")
    cases.append(
        Case(
            "topology",
            "cluster_is_list",
            ("topology", "{in}/topo.yaml"),
            "cluster",
            {"topo.yaml": "cluster: [1]\n"},
        )
    )
    add(
        "radix_2_for_4096",
        {**good, "num_gpus": 4096, "topology": {"switch_radix": 2}},
        "switch_radix",
    )
    add("radix_3_odd", {**good, "topology": {"switch_radix": 3}}, "switch_radix")
    add("radix_1e9", {**good, "topology": {"switch_radix": 10**9}}, "switch_radix")
    add("radix_inf", {**good, "topology": {"switch_radix": float("inf")}}, "switch_radix")
    add(
        "oversubscription_inf",
        {**good, "topology": {"oversubscription": float("inf")}},
        "oversubscription",
    )
    add(
        "oversubscription_1e300",
        {**good, "topology": {"oversubscription": 1e300}},
        "oversubscription",
    )
    add(
        "torus_product",
        {
            **good,
            "accelerator": "TPUv4",
            "gpus_per_node": 4,
            "topology": {"kind": "torus_3d", "torus_shape": [2, 2, 2]},
        },
        "torus_shape",
    )
    add(
        "torus_2_31",
        {
            **good,
            "accelerator": "TPUv4",
            "num_gpus": 1 << 31,
            "gpus_per_node": 4,
            "topology": {"kind": "torus_3d", "torus_shape": [2048, 1024, 1024]},
        },
        "num_gpus",
    )
    add(
        "torus_negative",
        {**good, "topology": {"kind": "torus_3d", "torus_shape": [-4, -2, 2]}},
        "torus_shape",
    )
    add("devices_2_31", {**good, "num_gpus": 1 << 31}, "num_gpus")
    add("devices_million", {**good, "num_gpus": 1 << 20}, "--max-topology-elements")
    add("gpus_per_node_1e9", {**good, "gpus_per_node": 10**9}, "gpus_per_node")
    add("gpus_per_node_zero", {**good, "gpus_per_node": 0}, "gpus_per_node")
    # a partial last node is valid (256 GPUs on 72-GPU NVL72 racks); a node larger than
    # its NVLink fabric can join is not
    add("node_beyond_domain", {**good, "num_gpus": 600, "gpus_per_node": 300}, "gpus_per_node")
    add("scale_out_nvlink", {**good, "scale_out_link": "nvlink4"}, "scale_out_link")
    add("scale_up_roce", {**good, "scale_up_link": "roce-400g"}, "scale_up_link")
    add("scale_up_ib", {**good, "scale_up_link": "ib-ndr"}, "scale_up_link")
    add("link_unknown", {**good, "scale_out_link": "carrier-pigeon"}, "scale_out_link")
    add("kind_unknown", {**good, "topology": {"kind": "hypercube"}}, "kind")
    add("node_fabric_unknown", {**good, "topology": {"node_fabric": "wires"}}, "node_fabric")
    add(
        "leaf_down_ports_huge",
        {**good, "topology": {"leaf_down_ports": 1 << 40}},
        "leaf_down_ports",
    )
    add("leaves_per_pod_huge", {**good, "topology": {"leaves_per_pod": 1 << 40}}, "leaves_per_pod")
    add(
        "spines_per_pod_huge",
        {**good, "num_gpus": 1024, "topology": {"spines_per_pod": 1 << 30}},
        "spines_per_pod",
    )
    add("nics_per_node_huge", {**good, "nics_per_node": 1 << 30}, "nics_per_node")
    add("single_node_with_many", {**good, "topology": {"kind": "single_node"}}, "num_gpus")
    add("accelerator_unknown", {**good, "accelerator": "Z80"}, "accelerator")
    add("png_unknown_format", good, "--png", ("--png", "{out}/t.xyz"))
    add("png_empty", good, "--png", ("--png", ""))
    add("png_directory", good, "--png", ("--png", "{in}"))
    add("png_dev_null_suffix", good, "--png", ("--png", "/dev/null"))
    cases.append(
        Case("topology", "preset_unknown", ("topology", "no-such-preset"), "no-such-preset", {})
    )
    cases.append(
        Case("topology", "file_missing", ("topology", "{in}/missing.yaml"), "missing.yaml", {})
    )
    coll("sizes_1e400", ("--sizes", "1e400"), "--sizes")
    coll("sizes_inf", ("--sizes", "inf"), "--sizes")
    coll("sizes_nan", ("--sizes", "nan:1G"), "--sizes")
    coll("sizes_zero", ("--sizes", "0"), "--sizes")
    coll("sizes_negative", ("--sizes", "-5M"), "--sizes")
    coll("sizes_empty", ("--sizes", ""), "--sizes")
    coll("sizes_reversed", ("--sizes", "4G:1M"), "--sizes")
    coll("sizes_three_parts", ("--sizes", "1M:4M:8M"), "--sizes")
    coll("sizes_1_to_1e30", ("--sizes", "1:" + "9" * 30), "--sizes")
    coll("sizes_petabyte", ("--sizes", "1P"), "--sizes")
    coll("sizes_thousand_digits", ("--sizes", "9" * 1000), "--sizes")
    coll("sizes_many_terabytes", ("--sizes", "100000T"), "--sizes")
    coll("ranks_zero", ("--ranks", "0"), "--ranks")
    coll("ranks_huge", ("--ranks", "1000000000"), "--ranks")
    coll("ranks_negative", ("--ranks", "-3"), "--ranks")
    coll("ranks_float", ("--ranks", "2.5"), "--ranks")
    coll("ranks_2_80", ("--ranks", str(1 << 80)), "--ranks")
    coll("op_magic", ("--op", "magic"), "--op")
    coll("algo_magic", ("--algo", "magic"), "--algo")
    coll("protocol_magic", ("--protocol", "magic"), "--protocol")
    coll("algo_torus_on_clos", ("--algo", "torus"), "--algo")
    coll("topology_unknown_preset", ("--topology", "nope"), "nope")
    return cases


# ---------------------------------------------------------------------------------------------
# reliability: spec fields, Monte Carlo limits and the command's flags


def _reliability_cases() -> list[Case]:
    cases: list[Case] = []

    def add(
        name: str,
        patch: dict[str, Any],
        fld: str,
        extra: tuple[str, ...] = (),
        command: str = "reliability",
    ) -> None:
        data = merged(RELIABLE, patch)
        argv = (command, "{in}/exp.yaml", *extra)
        if command == "reliability" and "--policies" not in extra:
            argv = (*argv, "--policies", "spec")
        cases.append(Case("reliability", name, argv, fld, {"exp.yaml": dump(data)}))

    def failure(**kw: Any) -> dict[str, Any]:
        return {
            "reliability": {"failures": [{"component": "gpu", "rate_per_device_hour": 1e-5, **kw}]}
        }

    add("runs_1e9_text", {}, "--runs", ("--runs", "1e9"))
    add("runs_1e9", {}, "--runs", ("--runs", "1000000000"))
    add("runs_zero", {}, "--runs", ("--runs", "0"))
    add("runs_negative", {}, "--runs", ("--runs", "-4"))
    add("seed_negative", {}, "--seed", ("--seed", "-1"))
    add("seed_2_80", {}, "--seed", ("--seed", str(1 << 80)))
    add("policies_empty", {}, "--policies", ("--policies", ","))
    add("policies_unknown", {}, "--policies", ("--policies", "spec,magic"))
    add("policies_ten_thousand", {}, "--policies", ("--policies", ",".join(["spec"] * 10_000)))
    add("no_reliability_section", {"reliability": None}, "reliability")
    add("rate_1e30", failure(rate_per_device_hour=1e30), "rate_per_device_hour")
    add("rate_inf", failure(rate_per_device_hour=float("inf")), "rate_per_device_hour")
    add("rate_nan", failure(rate_per_device_hour=float("nan")), "rate_per_device_hour")
    add("rate_negative", failure(rate_per_device_hour=-1), "rate_per_device_hour")
    add("rate_string", failure(rate_per_device_hour="often"), "rate_per_device_hour")
    add("component_unknown", failure(component="gremlins"), "component")
    add("weibull_shape_tiny", failure(inter_arrival={"kind": "weibull", "shape": 1e-300}), "shape")
    add("weibull_shape_huge", failure(inter_arrival={"kind": "weibull", "shape": 1e300}), "shape")
    add("inter_arrival_unknown", failure(inter_arrival={"kind": "cauchy"}), "inter_arrival")
    add(
        "hundred_thousand_failures",
        {
            "reliability": {
                "failures": [{"component": "gpu", "rate_per_device_hour": 1e-6}] * 100_000
            }
        },
        "exp.yaml",
    )
    add(
        "straggler_slowdown_inf",
        {
            "reliability": {
                "stragglers": [
                    {"rate_per_gpu_hour": 1e-4, "slowdown_factor": float("inf"), "duration_s": 60}
                ]
            }
        },
        "slowdown_factor",
    )
    add(
        "straggler_duration_1e300",
        {
            "reliability": {
                "stragglers": [
                    {"rate_per_gpu_hour": 1e-4, "slowdown_factor": 2, "duration_s": 1e300}
                ]
            }
        },
        "duration_s",
    )
    add(
        "straggler_rate_1e30",
        {
            "reliability": {
                "stragglers": [{"rate_per_gpu_hour": 1e30, "slowdown_factor": 2, "duration_s": 60}]
            }
        },
        "rate_per_gpu_hour",
    )
    add(
        "maintenance_every_microsecond",
        {"reliability": {"maintenance": {"interval_hours": 1e-10}}},
        "interval_hours",
    )
    add(
        "checkpoint_interval_nanosecond",
        {"reliability": {"checkpoint": {"kind": "sync", "interval_s": 1e-9}}},
        "interval_s",
    )
    add(
        "checkpoint_interval_inf",
        {"reliability": {"checkpoint": {"kind": "sync", "interval_s": float("inf")}}},
        "interval_s",
    )
    add(
        "checkpoint_interval_nan",
        {"reliability": {"checkpoint": {"kind": "sync", "interval_s": float("nan")}}},
        "interval_s",
    )
    add(
        "checkpoint_interval_word",
        {"reliability": {"checkpoint": {"kind": "sync", "interval_s": "hourly"}}},
        "interval_s",
    )
    add(
        "checkpoint_kind_unknown",
        {"reliability": {"checkpoint": {"kind": "telepathy"}}},
        "checkpoint",
    )
    add("recovery_kind_unknown", {"reliability": {"recovery": {"kind": "prayer"}}}, "recovery")
    add("preset_unknown", {"reliability": {"failure_preset": "apollo-13"}}, "failure_preset")
    add("num_runs_1e9", {"reliability": {"num_runs": 10**9}}, "num_runs")
    add("num_runs_float", {"reliability": {"num_runs": 2.5}}, "num_runs")
    add("rate_scale_1e30", {"reliability": {"failure_rate_scale": 1e30}}, "failure_rate_scale")
    add("horizon_1e300", {"reliability": {"horizon_days": 1e300}}, "horizon_days")
    add("repair_1e300", {"reliability": {"repair_time_hours": 1e300}}, "repair_time_hours")
    add("total_tokens_1e300", {"training": {"total_tokens": 1e300}}, "training.total_tokens")
    add("total_tokens_zero", {"training": {"total_tokens": 0}}, "total_tokens")
    add(
        "spares_1e12",
        {"reliability": {"recovery": {"kind": "restart", "num_spare_nodes": 10**12}}},
        "num_spare_nodes",
    )
    add(
        "storage_bandwidth_tiny",
        {"reliability": {"storage": {"write_bandwidth_bytes_per_s": 1e-300}}},
        "write_bandwidth_bytes_per_s",
    )
    add(
        "many_failures_long_run",
        {
            "training": {"total_tokens": 1e15},
            "reliability": {
                "failure_preset": "llama3-405b",
                "failure_rate_scale": 1000,
                "num_runs": 100,
            },
        },
        "--max-events",
    )
    add(
        "many_failures_long_run_via_run",
        {
            "training": {"total_tokens": 1e15},
            "reliability": {
                "failure_preset": "llama3-405b",
                "failure_rate_scale": 1000,
                "num_runs": 100,
            },
        },
        "--max-events",
        (),
        "run",
    )
    add(
        "gpu_hour_price_inf",
        {"reliability": {"gpu_hour_price_usd": float("inf")}},
        "gpu_hour_price_usd",
    )
    return cases


# ---------------------------------------------------------------------------------------------
# traces: Chakra (.et protobuf and JSON) and Kineto


def _add_chakra_protobuf_cases(add: typing.Callable[..., None]) -> None:
    """Malformed Chakra ``.et`` protobuf traces (building them needs the chakra extra)."""
    from chakra.schema.protobuf import et_def_pb2 as pb

    from simtrain.traceio.chakra_export import _encode

    def node(
        node_id: int,
        type_: int = pb.COMP_NODE,
        deps: tuple[int, ...] = (),
        duration: int = 10,
        **attrs: Any,
    ) -> Any:
        n = pb.Node(id=node_id, name=f"n{node_id}", type=type_, ctrl_deps=list(deps))
        n.duration_micros = duration
        for key, value in attrs.items():
            if isinstance(value, str):
                n.attr.append(pb.AttributeProto(name=key, string_val=value))
            elif isinstance(value, list):
                n.attr.append(pb.AttributeProto(name=key, int64_list=pb.Int64List(values=value)))
            else:
                n.attr.append(pb.AttributeProto(name=key, int64_val=value))
        return n

    def et(nodes: list[Any], **meta: int) -> bytes:
        header = pb.GlobalMetadata(version="0.0.4")
        for key, value in meta.items():
            header.attr.append(pb.AttributeProto(name=key, int64_val=value))
        return _encode(header) + b"".join(_encode(n) for n in nodes)

    good = [node(0), node(1, deps=(1 - 1,))]
    coll = pb.COMM_COLL_NODE
    add("et_truncated", {"t.0.et": et(good)[:-3]}, "t.0.et")
    add("et_garbage", {"t.0.et": b"\x05\xff\xff\xff\xff\xff"}, "t.0.et")
    add("et_corrupt_gzip", {"t.0.et": gzip.compress(et(good))[:20]}, "t.0.et")
    add("et_gzip_bomb", {"t.0.et": gzip.compress(b"\x00" * (1 << 20)) * 300}, "t.0.et")
    add("et_cycle", {"t.0.et": et([node(0, deps=(1,)), node(1, deps=(0,))])}, "node 0")
    add("et_self_dep", {"t.0.et": et([node(0, deps=(0,))])}, "node 0")
    add("et_dangling_dep", {"t.0.et": et([node(0), node(1, deps=(7,))])}, "node 1")
    add("et_duplicate_id", {"t.0.et": et([node(3), node(3)])}, "node 3")
    add("et_unknown_type", {"t.0.et": et([node(5, type_=42)])}, "node 5")
    add("et_comm_type_99", {"t.0.et": et([node(2, coll, comm_type=99)])}, "comm_type")
    add("et_comm_type_missing", {"t.0.et": et([node(2, coll)])}, "comm_type")
    add(
        "et_comm_size_negative",
        {"t.0.et": et([node(2, coll, comm_type=0, comm_size=-5)])},
        "comm_size",
    )
    add(
        "et_comm_size_2_62",
        {"t.0.et": et([node(2, coll, comm_type=0, comm_size=1 << 62)])},
        "comm_size",
    )
    add("et_duration_2_62", {"t.0.et": et([node(0, duration=1 << 62)])}, "duration")
    add("et_duration_year", {"t.0.et": et([node(0, duration=365 * 86400 * 10**6)])}, "duration")
    add("et_num_ops_2_62", {"t.0.et": et([node(0, duration=0, num_ops=1 << 62)])}, "num_ops")
    add(
        "et_tensor_size_2_62",
        {"t.0.et": et([node(0, duration=0, tensor_size=1 << 62)])},
        "tensor_size",
    )
    add(
        "et_send_huge_rank",
        {"t.0.et": et([node(4, pb.COMM_SEND_NODE, comm_src=0, comm_dst=1 << 40)])},
        "comm_dst",
    )
    add(
        "et_send_size_2_62",
        {
            "t.0.et": et([node(4, pb.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=1 << 62)]),
            "t.1.et": et([node(4, pb.COMM_RECV_NODE, comm_src=0, comm_dst=1, comm_size=1 << 62)]),
        },
        "comm_size",
    )
    add(
        "et_pg_ranks_huge",
        {"t.0.et": et([node(6, coll, comm_type=0, comm_size=8, pg_ranks=[0, 1 << 40])])},
        "pg_ranks",
    )
    add(
        "et_pg_ranks_million",
        {"t.0.et": et([node(6, coll, comm_type=0, comm_size=8, pg_ranks=list(range(1 << 20)))])},
        "pg_ranks",
    )
    add("et_world_size_2_50", {"t.0.et": et(good, world_size=1 << 50)}, "world_size")
    add("et_weight_zero", {"t.0.et": et(good, weight=0)}, "weight")
    add("et_weight_2_50", {"t.0.et": et(good, weight=1 << 50)}, "weight")
    add("et_rank_in_name_huge", {"t.99999999999.et": et(good)}, "rank")
    add("et_two_files_one_rank", {"a.0.et": et(good), "b.0.et": et(good)}, "rank 0")
    add("et_no_rank_files", {"readme.txt": "hello"}, "no rank files")
    add("et_ten_thousand_rank_files", {f"t.{i}.et": b"" for i in range(5000)}, "rank files")
    add(
        "et_many_nodes",
        {"t.0.et": et([node(i) for i in range(2000)])},
        "--max-trace-nodes",
        ("--max-trace-nodes", "1000"),
    )
    add("et_sparse_huge", {"t.0.et": {"sparse": 3 << 30}}, "t.0.et")
    add(
        "et_deps_chain_200k",
        {
            "t.0.et": et(
                [node(i, deps=(i - 1,) if i else ()) for i in range(1)]
                + [node(1, deps=tuple(range(1, 200_001)))]
            )
        },
        "node 1",
    )


def _trace_cases() -> list[Case]:
    """Malformed traces; the Chakra protobuf cases only where the chakra extra is installed."""
    cases: list[Case] = []
    replay = ("replay", "{in}/t", "--topology", "{in}/topo.yaml", "--accelerator", "H100-SXM")
    topo = _cluster_file({"accelerator": "H100-SXM", "num_gpus": 16, "gpus_per_node": 8})

    def add(name: str, files: dict[str, Any], fld: str, extra: tuple[str, ...] = ()) -> None:
        laid = {f"t/{k}": v for k, v in files.items()}
        cases.append(Case("trace", name, (*replay, *extra), fld, {**topo, **laid}))

    if importlib.util.find_spec("chakra") is not None:
        _add_chakra_protobuf_cases(add)

    add(
        "et_gemm_dims_2_40",
        {
            "t.0.json": json.dumps(
                [
                    {
                        "id": 1,
                        "name": "aten::mm",
                        "type": "COMP_NODE",
                        "inputs": {
                            "values": "[]",
                            "shapes": f"[[{1 << 40}, {1 << 40}], [{1 << 40}, {1 << 40}]]",
                            "types": "['Tensor(c10::BFloat16)', 'Tensor(c10::BFloat16)']",
                        },
                    }
                ]
            )
        },
        "node 1",
        ("--retarget", "--source-accelerator", "A100-80GB"),
    )
    add("json_truncated", {"t.0.json": '{"id": 1, "name": "a", "type": "COMP_'}, "t.0.json")
    add("json_nested_deep", {"t.0.json": "[" * 200_000 + "]" * 200_000}, "t.0.json")
    add("json_not_object", {"t.0.json": "[42]"}, "t.0.json")
    add("json_unknown_field", {"t.0.json": json.dumps([{"id": 1, "colour": "red"}])}, "t.0.json")
    add("json_id_huge", {"t.0.json": json.dumps([{"id": 10**40, "type": "COMP_NODE"}])}, "t.0.json")
    add(
        "json_duration_1e400",
        {"t.0.json": '[{"id": 1, "type": "COMP_NODE", "durationMicros": 1e400}]'},
        "t.0.json",
    )
    add(
        "json_duration_nan",
        {"t.0.json": '[{"id": 1, "type": "COMP_NODE", "durationMicros": NaN}]'},
        "t.0.json",
    )
    add("json_big_int_literal", {"t.0.json": '[{"id": ' + "9" * 5000 + "}]"}, "t.0.json")
    add(
        "json_op_flops_inf",
        {
            "t.0.json": json.dumps(
                [
                    {
                        "id": 1,
                        "type": "COMP_NODE",
                        "attr": [
                            {"name": "op.kind", "stringList": {"values": ["gemm"]}},
                            {"name": "op.flops", "doubleList": {"values": [1e308 * 10]}},
                        ],
                    }
                ]
            ).replace("Infinity", "1e400")
        },
        "node 1",
    )

    def kineto(events: list[Any], **top: Any) -> str:
        return json.dumps({"traceEvents": events, **top})

    def kernel(name: str = "gemm", ts: float = 0, dur: float = 5, **args: Any) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "ts": ts,
            "dur": dur,
            "pid": 0,
            "tid": 7,
            "args": args,
        }

    nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    add(
        "kineto_nelems_1e400",
        {
            "k.0.json": kineto([kernel(), kernel(nccl, 10, 5)]).replace(
                '"args": {}}]', '"args": {"In msg nelems": 1e400, "dtype": "BFloat16"}}]'
            )
        },
        "In msg nelems",
    )
    add(
        "kineto_nelems_10_30",
        {
            "k.0.json": kineto(
                [kernel(), kernel(nccl, 10, 5, **{"In msg nelems": 10**30, "dtype": "BFloat16"})]
            )
        },
        "In msg nelems",
    )
    add(
        "kineto_nelems_negative",
        {
            "k.0.json": kineto(
                [kernel(), kernel(nccl, 10, 5, **{"In msg nelems": -10, "dtype": "BFloat16"})]
            )
        },
        "In msg nelems",
    )
    add(
        "kineto_dims_1e400",
        {
            "k.0.json": kineto(
                [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::mm",
                        "ts": 0,
                        "dur": 5,
                        "pid": 0,
                        "tid": 1,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "gloo:all_reduce",
                        "ts": 10,
                        "dur": 5,
                        "pid": 0,
                        "tid": 1,
                        "args": {"Input Dims": [[7, 7]], "Input type": ["float"]},
                    },
                ]
            ).replace("[[7, 7]]", "[[1e400, 1e400]]")
        },
        "Input Dims",
    )
    add(
        "kineto_dims_2_62",
        {
            "k.0.json": kineto(
                [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::mm",
                        "ts": 0,
                        "dur": 5,
                        "pid": 0,
                        "tid": 1,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "gloo:all_reduce",
                        "ts": 10,
                        "dur": 5,
                        "pid": 0,
                        "tid": 1,
                        "args": {"Input Dims": [[1 << 62, 1 << 62]], "Input type": ["float"]},
                    },
                ]
            )
        },
        "Input Dims",
    )
    add(
        "kineto_dur_1e400",
        {"k.0.json": kineto([kernel(dur=7)]).replace('"dur": 7', '"dur": 1e400')},
        "dur",
    )
    add(
        "kineto_dur_nan",
        {"k.0.json": kineto([kernel(dur=7)]).replace('"dur": 7', '"dur": NaN')},
        "dur",
    )
    add("kineto_dur_year", {"k.0.json": kineto([kernel(dur=365 * 86400 * 1e6)])}, "dur")
    add("kineto_dur_negative", {"k.0.json": kineto([kernel(dur=-5)])}, "dur")
    add("kineto_ts_1e300", {"k.0.json": kineto([kernel(ts=1e300)])}, "ts")
    add("kineto_ts_string", {"k.0.json": kineto([kernel(ts="soon")])}, "ts")
    add(
        "kineto_events_not_list", {"k.0.json": json.dumps({"traceEvents": {"a": 1}})}, "traceEvents"
    )
    add("kineto_event_not_object", {"k.0.json": kineto([1, 2, 3])}, "k.0.json")
    add(
        "kineto_rank_huge",
        {"k.0.json": kineto([kernel()], distributedInfo={"rank": 1 << 40})},
        "rank",
    )
    add(
        "kineto_rank_string",
        {"k.0.json": kineto([kernel()], distributedInfo={"rank": "zero"})},
        "rank",
    )
    add(
        "kineto_pg_ranks_huge",
        {
            "k.0.json": kineto(
                [kernel(), kernel(nccl, 10, 5, **{"Process Group Ranks": [0, 1 << 40]})]
            )
        },
        "Process Group Ranks",
    )
    add(
        "kineto_many_events",
        {"k.0.json": kineto([kernel(ts=i) for i in range(3000)])},
        "--max-trace-nodes",
        ("--max-trace-nodes", "1000"),
    )
    event = b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1},'
    events = {
        "repeat": event,
        "times": 1_200_000,
        "prefix": b'{"traceEvents": [',
        "suffix": b"{}]}",
    }
    add("kineto_1_2_million_events", {"k.0.json": events}, "--max-trace-nodes")
    add("kineto_sparse_huge", {"k.0.json": {"sparse": 3 << 30}}, "k.0.json")
    add(
        "kineto_comm_size_absurd",
        {
            "k.0.json": kineto(
                [kernel(), kernel(nccl, 10, 5, **{"In msg nelems": 1 << 50, "dtype": "float"})]
            )
        },
        "In msg nelems",
    )
    cases.append(
        Case(
            "trace",
            "replay_not_a_directory",
            (
                "replay",
                "{in}/topo.yaml",
                "--topology",
                "{in}/topo.yaml",
                "--accelerator",
                "H100-SXM",
            ),
            "topo.yaml",
            topo,
        )
    )
    cases.append(Case("trace", "replay_no_target", ("replay", "{in}"), "--experiment", {}))
    cases.append(
        Case(
            "trace",
            "replay_source_accelerator_unknown",
            (*replay, "--retarget", "--source-accelerator", "Z80"),
            "Z80",
            {**topo, "t/t.0.json": json.dumps([{"id": 1, "type": "COMP_NODE"}])},
        )
    )
    cases.append(
        Case(
            "trace",
            "replay_accelerator_unknown",
            ("replay", "{in}/t", "--topology", "{in}/topo.yaml", "--accelerator", "Z80"),
            "Z80",
            {**topo, "t/t.0.json": json.dumps([{"id": 1, "type": "COMP_NODE"}])},
        )
    )
    cases.append(
        Case(
            "trace",
            "trace_out_empty",
            ("trace", "{in}/exp.yaml", "--out", ""),
            "--out",
            {"exp.yaml": dump(TINY)},
        )
    )
    cases.append(
        Case(
            "trace",
            "trace_format_magic",
            ("trace", "{in}/exp.yaml", "--out", "{out}/t.json", "--format", "magic"),
            "--format",
            {"exp.yaml": dump(TINY)},
        )
    )
    cases.append(
        Case(
            "trace",
            "trace_out_is_directory",
            ("trace", "{in}/exp.yaml", "--out", "{in}"),
            "--out",
            {"exp.yaml": dump(TINY)},
        )
    )
    cases.append(
        Case(
            "trace",
            "trace_chakra_out_is_file",
            ("trace", "{in}/exp.yaml", "--out", "{in}/exp.yaml", "--format", "chakra"),
            "--out",
            {"exp.yaml": dump(TINY)},
        )
    )
    cases.append(
        Case(
            "trace",
            "trace_full_65536",
            ("trace", "{in}/exp.yaml", "--out", "{out}/t.json", "--full"),
            "--max-tasks",
            {
                "exp.yaml": dump(
                    merged(
                        TINY,
                        {
                            "cluster": {"num_gpus": 65536},
                            "parallel": {"global_batch_size": 65536 * 4},
                        },
                    )
                )
            },
        )
    )
    if importlib.util.find_spec("chakra") is None:
        # Without the chakra extra, these reach the Chakra JSON reader (or, for the sparse
        # file, cannot be told from Chakra JSON), which needs mlc-chakra: the one clear line
        # names the missing extra instead of the field.
        cases = [
            dataclasses.replace(case, field="simtrain[chakra]")
            if case.name in _READ_AS_CHAKRA_JSON
            else case
            for case in cases
        ]
    return cases


_READ_AS_CHAKRA_JSON = frozenset(
    {
        "et_gemm_dims_2_40",
        "json_truncated",
        "json_nested_deep",
        "json_not_object",
        "json_unknown_field",
        "json_id_huge",
        "json_duration_1e400",
        "json_duration_nan",
        "json_big_int_literal",
        "json_op_flops_inf",
        "kineto_sparse_huge",
        "replay_source_accelerator_unknown",
    }
)


# ---------------------------------------------------------------------------------------------
# store: the sweep's (and the planner's) SQLite file


def _store_cases() -> list[Case]:
    cases: list[Case] = []
    files = _sweep({})

    def add(
        name: str,
        store: str,
        fld: str,
        extra_files: dict[str, Any] | None = None,
        command: str = "sweep",
    ) -> None:
        if command == "sweep":
            argv: tuple[str, ...] = ("sweep", "{in}/sweep.yaml", "--workers", "1", "--store", store)
        else:
            argv = (
                "plan",
                "--model",
                "llama3-8b",
                "--tokens",
                "1e9",
                "--deadline-days",
                "30",
                "--accelerator",
                "H100-SXM",
                "--max-gpus",
                "16",
                "--workers",
                "1",
                "--store",
                store,
            )
        cases.append(Case("store", name, argv, fld, {**files, **(extra_files or {})}))

    sqlite_header = b"SQLite format 3\x00"
    for command in ("sweep", "plan"):
        add(f"{command}_dev_null", "/dev/null", "--store", command=command)
        add(f"{command}_directory", "{in}", "--store", command=command)
        add(
            f"{command}_text_file",
            "{in}/notes.txt",
            "--store",
            {"notes.txt": "hello, not a database\n"},
            command,
        )
        add(f"{command}_yaml_file", "{in}/sweep.yaml", "--store", command=command)
        add(f"{command}_empty_path", "", "--store", command=command)
        add(
            f"{command}_truncated_sqlite",
            "{in}/bad.sqlite",
            "--store",
            {"bad.sqlite": sqlite_header + b"\x10\x00" + b"\xff" * 90},
            command,
        )
        add(
            f"{command}_parent_is_file",
            "{in}/notes.txt/s.sqlite",
            "--store",
            {"notes.txt": "x"},
            command,
        )
        add(
            f"{command}_zero_filled_pages",
            "{in}/z.sqlite",
            "--store",
            {"z.sqlite": sqlite_header + b"\x00" * 4080},
            command,
        )
        add(f"{command}_fifo", "{in}/pipe.sqlite", "--store", {"pipe.sqlite": FIFO}, command)
        add(f"{command}_dev_zero", "/dev/zero", "--store", command=command)
        add(f"{command}_nul_in_name", "{out}/a\x00b.sqlite", "--store", command=command)

    import sqlite3
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other.sqlite"
        db = sqlite3.connect(other)
        db.execute("CREATE TABLE results (a INTEGER)")
        db.execute("INSERT INTO results VALUES (1)")
        db.commit()
        db.close()
        wrong_schema = other.read_bytes()
        other.unlink()
        db = sqlite3.connect(other)
        db.execute(
            "CREATE TABLE results (key TEXT PRIMARY KEY, version TEXT, status TEXT, error TEXT, "
            "row_json TEXT, spec_json TEXT, finished_unix_s REAL)"
        )
        db.execute("INSERT INTO results VALUES ('k', 'v', 'ok', '', '{not json', '{}', 0)")
        db.commit()
        db.close()
        bad_rows = other.read_bytes()
    add("sweep_wrong_schema", "{in}/w.sqlite", "--store", {"w.sqlite": wrong_schema})
    add("sweep_wrong_schema_resume", "{in}/w.sqlite", "--store", {"w.sqlite": wrong_schema})
    cases[-1] = Case(
        "store",
        "sweep_wrong_schema_resume",
        (*cases[-1].argv, "--resume"),
        "--store",
        cases[-1].files,
    )
    add("sweep_corrupt_row_resume", "{in}/r.sqlite", "--store", {"r.sqlite": bad_rows})
    cases[-1] = Case(
        "store",
        "sweep_corrupt_row_resume",
        (*cases[-1].argv, "--resume"),
        "--store",
        cases[-1].files,
    )
    add("plan_wrong_schema_resume", "{in}/w.sqlite", "--store", {"w.sqlite": wrong_schema}, "plan")
    cases[-1] = Case(
        "store",
        "plan_wrong_schema_resume",
        (*cases[-1].argv, "--resume"),
        "--store",
        cases[-1].files,
    )
    return cases


# ---------------------------------------------------------------------------------------------
# cli: flags of run, trace, schedule, plan, list, validate


def _cli_cases() -> list[Case]:
    cases: list[Case] = []
    exp = {"exp.yaml": dump(TINY)}

    def add(
        name: str, argv: tuple[str, ...], fld: str, files: dict[str, Any] | None = None
    ) -> None:
        cases.append(Case("cli", name, argv, fld, exp if files is None else files))

    add("run_out_empty", ("run", "{in}/exp.yaml", "--out", ""), "--out")
    add("run_out_dev_null", ("run", "{in}/exp.yaml", "--out", "/dev/null"), "--out")
    add("run_out_is_file", ("run", "{in}/exp.yaml", "--out", "{in}/exp.yaml"), "--out")
    add("run_out_parent_is_file", ("run", "{in}/exp.yaml", "--out", "{in}/exp.yaml/sub"), "--out")
    add("run_out_nul", ("run", "{in}/exp.yaml", "--out", "{out}/a\x00b"), "--out")
    add("run_set_malformed", ("run", "{in}/exp.yaml", "--set", "parallel.tp"), "--set")
    add("run_set_unknown", ("run", "{in}/exp.yaml", "--set", "parallel.tpp=2"), "parallel.tpp")
    add(
        "run_set_inf",
        ("run", "{in}/exp.yaml", "--set", "cluster.num_gpus=.inf"),
        "cluster.num_gpus",
    )
    add(
        "run_set_1e400",
        ("run", "{in}/exp.yaml", "--set", "training.total_tokens=1e400"),
        "training.total_tokens",
    )
    add("run_unknown_option", ("run", "{in}/exp.yaml", "--turbo"), "--turbo")
    add("run_missing_argument", ("run",), "EXPERIMENT")
    add("run_max_tasks_zero", ("run", "{in}/exp.yaml", "--max-tasks", "0"), "--max-tasks")
    add("run_max_tasks_negative", ("run", "{in}/exp.yaml", "--max-tasks", "-1"), "--max-tasks")
    add("run_max_tasks_exceeded", ("run", "{in}/exp.yaml", "--max-tasks", "5"), "--max-tasks")
    add("unknown_command", ("frobnicate",), "frobnicate")
    add("list_unknown", ("list", "gpus"), "WHAT")
    add("validate_not_a_directory", ("validate", "{in}/exp.yaml"), "exp.yaml")
    add("validate_empty_directory", ("validate", "{in}/sub"), "sub", {"sub": None})
    add(
        "validate_bad_case",
        ("validate", "{in}"),
        "model",
        {
            "bad.yaml": dump(
                {**TINY, "model": 3, "expected": {"metric": "mfu", "value": 0.5, "source": "x"}}
            )
        },
    )
    sched = ("schedule", "--schedule", "1f1b")
    add("schedule_pp_1e6", (*sched, "--pp", "1000000", "--microbatches", "8"), "--pp")
    add("schedule_pp_zero", (*sched, "--pp", "0", "--microbatches", "8"), "--pp")
    add("schedule_pp_negative", (*sched, "--pp", "-2", "--microbatches", "8"), "--pp")
    add("schedule_pp_text", (*sched, "--pp", "four", "--microbatches", "8"), "--pp")
    add("schedule_pp_1e6_text", (*sched, "--pp", "1e6", "--microbatches", "8"), "--pp")
    add(
        "schedule_microbatches_1e9",
        (*sched, "--pp", "4", "--microbatches", "1000000000"),
        "--microbatches",
    )
    add(
        "schedule_microbatches_zero", (*sched, "--pp", "4", "--microbatches", "0"), "--microbatches"
    )
    add("schedule_tasks_limit", (*sched, "--pp", "512", "--microbatches", "100000"), "--max-tasks")
    add(
        "schedule_vpp_huge",
        (
            "schedule",
            "--schedule",
            "interleaved",
            "--pp",
            "4",
            "--microbatches",
            "8",
            "--vpp",
            "1000000",
        ),
        "--vpp",
    )
    add(
        "schedule_vpp_without_interleaved",
        (*sched, "--pp", "4", "--microbatches", "8", "--vpp", "2"),
        "--vpp",
    )
    add(
        "schedule_unknown",
        ("schedule", "--schedule", "magic", "--pp", "4", "--microbatches", "8"),
        "--schedule",
    )
    for flag in ("--t-f", "--t-b", "--t-w", "--t-p2p"):
        for label, value in (("inf", "inf"), ("nan", "nan"), ("huge", "1e300"), ("negative", "-1")):
            add(
                f"schedule_{flag[2:]}_{label}",
                (*sched, "--pp", "4", "--microbatches", "8", flag, value),
                flag,
            )
    add(
        "schedule_out_unknown_format",
        (*sched, "--pp", "4", "--microbatches", "8", "--out", "{out}/g.xyz"),
        "--out",
    )
    add("schedule_out_empty", (*sched, "--pp", "4", "--microbatches", "8", "--out", ""), "--out")
    add(
        "schedule_out_directory",
        (*sched, "--pp", "4", "--microbatches", "8", "--out", "{in}"),
        "--out",
    )
    add(
        "schedule_out_no_suffix",
        (*sched, "--pp", "4", "--microbatches", "8", "--out", "{out}/gantt"),
        "--out",
    )
    plan = ("plan", "--model", "llama3-8b", "--accelerator", "H100-SXM", "--workers", "1")
    add("plan_tokens_inf", (*plan, "--tokens", "inf", "--deadline-days", "30"), "--tokens")
    add("plan_tokens_nan", (*plan, "--tokens", "nan", "--deadline-days", "30"), "--tokens")
    add("plan_tokens_1e300", (*plan, "--tokens", "1e300", "--deadline-days", "30"), "--tokens")
    add("plan_tokens_negative", (*plan, "--tokens", "-1", "--deadline-days", "30"), "--tokens")
    add("plan_tokens_zero", (*plan, "--tokens", "0", "--deadline-days", "30"), "--tokens")
    add(
        "plan_deadline_zero", (*plan, "--tokens", "1e12", "--deadline-days", "0"), "--deadline-days"
    )
    add(
        "plan_deadline_nan",
        (*plan, "--tokens", "1e12", "--deadline-days", "nan"),
        "--deadline-days",
    )
    add(
        "plan_deadline_inf",
        (*plan, "--tokens", "1e12", "--deadline-days", "inf"),
        "--deadline-days",
    )
    add(
        "plan_deadline_1e300",
        (*plan, "--tokens", "1e12", "--deadline-days", "1e300"),
        "--deadline-days",
    )
    add(
        "plan_budget_negative",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--budget-usd", "-5"),
        "--budget-usd",
    )
    add(
        "plan_budget_nan",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--budget-usd", "nan"),
        "--budget-usd",
    )
    add(
        "plan_max_gpus_1e9",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--max-gpus", "1000000000"),
        "--max-gpus",
    )
    add(
        "plan_batch_tokens_inf",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--batch-tokens", "inf"),
        "--batch-tokens",
    )
    add(
        "plan_batch_tokens_zero",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--batch-tokens", "0"),
        "--batch-tokens",
    )
    add(
        "plan_batch_tokens_1e300",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--batch-tokens", "1e300"),
        "--batch-tokens",
    )
    add(
        "plan_usd_inf",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--usd-per-gpu-hour", "inf"),
        "--usd-per-gpu-hour",
    )
    add(
        "plan_model_unknown",
        (
            "plan",
            "--model",
            "gpt-9",
            "--accelerator",
            "H100-SXM",
            "--tokens",
            "1e12",
            "--deadline-days",
            "30",
        ),
        "--model",
    )
    add(
        "plan_accelerator_unknown",
        (
            "plan",
            "--model",
            "llama3-8b",
            "--accelerator",
            "Z80",
            "--tokens",
            "1e12",
            "--deadline-days",
            "30",
        ),
        "Z80",
    )
    add(
        "plan_topology_unknown",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--topology", "nope"),
        "nope",
    )
    for label, value in (("all_in_a_list", "all,bogus"), ("unknown", "megatron-2030")):
        add(
            f"plan_frameworks_{label}",
            (*plan, "--tokens", "1e12", "--deadline-days", "30", "--frameworks", value),
            "--frameworks",
        )
    add(
        "plan_executor_magic",
        (*plan, "--tokens", "1e12", "--deadline-days", "30", "--executor", "magic"),
        "--executor",
    )
    add(
        "plan_model_file_bomb",
        (
            "plan",
            "--model",
            "{in}/m.yaml",
            "--accelerator",
            "H100-SXM",
            "--tokens",
            "1e12",
            "--deadline-days",
            "30",
        ),
        "m.yaml",
        {
            "m.yaml": "a: &a [1,1,1,1,1,1,1,1,1,1]\n"
            + "".join(
                f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i > 1 else "*a"] * 10) + "]\n"
                for i in range(1, 9)
            )
        },
    )
    return cases


def all_cases() -> list[Case]:
    """Every case of the corpus, grouped by kind, in a stable order."""
    cases = [
        *_yaml_cases(),
        *_experiment_cases(),
        *_sweep_cases(),
        *_topology_cases(),
        *_reliability_cases(),
        *_trace_cases(),
        *_store_cases(),
        *_cli_cases(),
    ]
    names = Counter((c.kind, c.name) for c in cases)
    duplicated = [n for n, k in names.items() if k > 1]
    if duplicated:
        raise ValueError(f"duplicate case names: {duplicated}")
    return cases


if __name__ == "__main__":
    counts = Counter(c.kind for c in all_cases())
    for kind in KINDS:
        print(f"{kind:12s} {counts[kind]:5d}")
    print(f"{'total':12s} {sum(counts.values()):5d}")
