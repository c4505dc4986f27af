"""Fit / held-out splits of the vendor validation suites, declared before any fit runs.

Committed before the MI250X and TPU compute constants were fitted; never changed to improve a
held-out number. Each suite is a folder of experiments under ``experiments/validation/``;
a row is one file (without ``.yaml``).

- ``mi250x``: fit on the smallest run of each model series (one per model, so every model
  shape and both stacks are seen once); hold out every larger run of the same models.
- ``tpu``: fit on single-slice rows only (compute, not DCN): v5e 16B and 64B, v5p 32B and the
  128B on 128 chips; hold out every other single-slice row and every multi-slice row (their
  DCN term is fitted separately by ``tpu_dcn.py`` on the 16B and 64B series).
"""

from __future__ import annotations

SPLITS: dict[str, dict[str, tuple[str, ...]]] = {
    "mi250x": {
        "fit": ("forge-s-128", "forge-m-8", "forge-l-512", "gpt-175b-384", "lumi-llama2-7b-16"),
        "held_out": (
            "forge-s-256",
            "forge-s-512",
            "forge-m-512",
            "forge-m-672",
            "forge-l-1024",
            "gpt-175b-1024",
            "lumi-llama2-7b-64",
            "lumi-llama2-7b-128",
        ),
    },
    "tpu": {
        "fit": ("v5e-16b-x1", "v5e-64b-x1", "v5p-32b-64x1", "v5p-128b-128x1"),
        "held_out": (
            "v5e-32b-x1",
            "v5e-128b-x1",
            *(f"v5e-{m}-x{s}" for m in ("16b", "32b", "64b", "128b") for s in (2, 4, 8, 16, 32)),
            "v5p-64b-64x1",
            "v5p-128b-256x1",
            "v5p-256b-512x1",
            "v5p-512b-512x1",
            "v5p-1024b-1024x1",
            "v5p-1024b-2048x1",
            *(
                f"v5p-{r}x2"
                for r in (
                    "32b-64",
                    "64b-64",
                    "128b-128",
                    "128b-256",
                    "256b-512",
                    "512b-512",
                    "1024b-1024",
                    "1024b-2048",
                )
            ),
        ),
    },
}
"""suite -> {"fit": rows, "held_out": rows}."""
