"""Power and carbon presets: device power by state, host overhead, PUE, grid carbon intensity.

Board power limits (TDP) are in the accelerator catalog (``docs/references/hardware.md``
§7.1). The reference set has no facility or grid figures, so every other number here is
either a published figure cited from its paper (marked UNVERIFIED) or an ASSUMPTION stated as
such; ``docs/references/energy.md`` lists them all with their reasoning. All of them can be
overridden in an experiment's ``cost:`` section.
"""

from __future__ import annotations

from dataclasses import dataclass

from simtrain.errors import SpecError
from simtrain.specs.cost import GridPreset


@dataclass(frozen=True)
class Preset:
    """A number with the reason to believe it.

    Attributes:
        value: the figure, in the unit its name states.
        source: a citation, or ``ASSUMPTION: ...`` with the reasoning.
    """

    value: float
    source: str


COMPUTE_POWER_FRACTION_OF_TDP = Preset(
    1.0,
    "ASSUMPTION: large GEMMs hold a training GPU at its power limit (TDP), which is also the "
    "cap of the model (docs/references/energy.md §1.1)",
)
COMM_POWER_FRACTION_OF_TDP = Preset(
    0.5,
    "ASSUMPTION: a GPU waiting on NCCL runs copy/reduction kernels and moves HBM data but no "
    "GEMMs; half of TDP (docs/references/energy.md §1.1)",
)
IDLE_POWER_FRACTION_OF_TDP = Preset(
    0.2,
    "ASSUMPTION: a GPU idle inside a step (pipeline bubble) keeps clocks and HBM up; a fifth "
    "of TDP (docs/references/energy.md §1.1)",
)
HOST_POWER_WATTS_PER_NODE = Preset(
    4600.0,
    "UNVERIFIED: NVIDIA DGX H100 datasheet maximum system power 10.2 kW minus 8 x 700 W of "
    "GPUs = 4.6 kW for CPUs, NICs, NVSwitches, fans and power conversion (a maximum, so host "
    "energy is an upper estimate; docs/references/energy.md §1.2)",
)
PUE = Preset(
    1.2,
    "ASSUMPTION: power usage effectiveness of a modern AI facility; Luccioni et al. 2022 "
    "(arXiv:2211.02001) use 1.2 for BLOOM on Jean Zay (UNVERIFIED; docs/references/energy.md §2.1)",
)

GRID_GCO2_PER_KWH: dict[GridPreset, Preset] = {
    "us-average": Preset(
        429.0,
        "UNVERIFIED: Patterson et al. 2021 (arXiv:2104.10350), Table 4, GPT-3 in a Microsoft "
        "data centre at the US average 0.429 kgCO2e/kWh (docs/references/energy.md §2.2)",
    ),
    "france": Preset(
        57.0,
        "UNVERIFIED: Luccioni et al. 2022 (arXiv:2211.02001), BLOOM on Jean Zay: 24.7 t CO2eq "
        "for 433,196 kWh = 57 gCO2eq/kWh (docs/references/energy.md §2.2)",
    ),
    "zero": Preset(
        0.0,
        "a carbon-free supply (on-site renewables or full hourly matching; "
        "docs/references/energy.md §2.2)",
    ),
}
"""Grid carbon intensity presets in grams of CO2-equivalent per kWh drawn."""

DEFAULT_GRID: GridPreset = "us-average"
"""Grid preset used when an experiment names none."""


def grid_intensity(name: str) -> Preset:
    """The grid carbon intensity preset ``name``.

    Raises:
        SpecError: unknown preset name (listing the known ones).

    Examples:
        >>> grid_intensity("france").value
        57.0
    """
    if name in GRID_GCO2_PER_KWH:
        return GRID_GCO2_PER_KWH[name]
    known = ", ".join(GRID_GCO2_PER_KWH)
    raise SpecError(f"'cost.grid' must be a known grid preset (got {name!r}; known: {known})")
