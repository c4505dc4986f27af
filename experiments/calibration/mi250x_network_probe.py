"""Probe whether a slower Slingshot stack explains the MI250X suite's FORGE misses (no fit).

The FORGE runs (GPT-NeoX + DeepSpeed 0.7.3 on ROCm 5.x, early 2023, docs/references/amd.md
§2.1) used the aws-ofi-rccl plugin and libfabric 1.15; the Slingshot link constants are
calibrated on LUMI-G's 2025-26 stack (RCCL 2-node busbw and osu_bw, networks.md §1.2-1.3).
If the older stack reached only a fraction of that bandwidth, the FORGE rows that move data
across nodes would be slower than simulated. This script scales the link's efficiency for the
FORGE rows only (the LUMI-G rows keep it), at each factor given, and prints every row's
throughput error (measured step time / simulated - 1: positive means simulated too fast).
It fits nothing and changes no constant: it tests a mechanism against the whole suite.

Usage (from the repository root):
  PYTHONPATH=. python experiments/calibration/mi250x_network_probe.py 1 0.3 0.1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fit_vendor import load_runs

from simtrain.catalog.links import LINKS
from simtrain.compute import calibration_for

LINK = "slingshot-11"
FORGE_PREFIXES = ("forge-", "gpt-175b-")
"""Rows run on Frontier's 2023 stack (the LUMI-G rows are the 2025 one)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("factors", type=float, nargs="+", help="efficiency multipliers, e.g. 0.3")
    args = parser.parse_args()
    runs = load_runs("mi250x")
    cal = calibration_for("MI250X")
    original = LINKS[LINK]
    print("factor  " + "  ".join(r.name for r in runs))
    for factor in args.factors:
        cells = []
        for run in runs:
            if run.name.startswith(FORGE_PREFIXES):
                LINKS[LINK] = original.model_copy(
                    update={"efficiency": original.efficiency * factor}
                )
            try:
                cells.append(f"{run.measured_s / run.simulate(cal) - 1:+.0%}")
            finally:
                LINKS[LINK] = original
        print(f"{factor:6.2f}  " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
