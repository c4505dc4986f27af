"""The topology drawing: every preset draws, tiers are labelled, large clusters aggregate."""

import pytest

from simtrain.cli.commands_network import load_cluster
from simtrain.paths import data_dir
from simtrain.report.topology_plot import MAX_GLYPHS_PER_TIER, topology_figure
from simtrain.specs import ClusterSpec
from simtrain.topology import build_topology

PRESETS = sorted(p.stem for p in data_dir("topologies").glob("*.yaml"))


def texts(fig) -> str:
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    return "\n".join([ax.get_title(), *(t.get_text() for t in ax.texts), *legend])


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_draws_with_labelled_tiers_and_a_legend(preset):
    topo = build_topology(load_cluster(preset))
    fig = topology_figure(topo, preset)
    ax = fig.axes[0]
    words = texts(fig)
    assert preset in words and "per link" in words
    if topo.torus_shape is None:
        for kind in {"leaf", "spine", "core"} & set(topo.node_kinds):
            assert f"{kind} switches" in words
        assert f"GPUs: {topo.num_devices:,}" in words
    else:
        assert "ICI" in words and "chips" in words
    # aggregated: no tier holds more glyphs than the limit (a torus face is X x Y)
    glyphs = sum(len(c.get_offsets()) for c in ax.collections)
    limit = MAX_GLYPHS_PER_TIER * 5 if topo.torus_shape is None else 16 * 16
    assert glyphs <= limit


def test_small_cluster_is_drawn_device_by_device_with_spines_sized_to_it():
    cluster = ClusterSpec.model_validate(
        {"accelerator": "H100-SXM", "num_gpus": 32, "nics_per_node": 8,
         "topology": {"kind": "rail_optimized", "leaf_down_ports": 32}}
    )  # fmt: skip
    topo = build_topology(cluster)
    assert topo.count_nodes()["spine"] == 4  # 4 cabled ports per rail leaf: 4 uplinks
    fig = topology_figure(topo, "small")
    glyphs = sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    assert glyphs == 32 + 4 + 8 + 4  # GPUs, NVSwitches, leaves, spines
    assert "NVSwitch" in texts(fig)


def test_spines_grow_with_the_cluster_up_to_a_full_fat_tree():
    def spines(num_gpus):
        cluster = ClusterSpec.model_validate(
            {"accelerator": "H100-SXM", "num_gpus": num_gpus, "nics_per_node": 8,
             "topology": {"kind": "rail_optimized", "leaf_down_ports": 32}}
        )  # fmt: skip
        return build_topology(cluster).count_nodes().get("spine", 0)

    # one spine per cabled port of a rail leaf, up to a full fat tree (radix / 2 = 32)
    assert [spines(n) for n in (32, 128, 256, 1024)] == [4, 16, 32, 32]
