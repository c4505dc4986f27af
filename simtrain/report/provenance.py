"""Where an accelerator's compute constants come from, said in every report.

A prediction is only as good as the efficiency fractions behind it. Accelerators fitted on
measured runs (A100, H100) are ``fitted``; those that borrow another part's fit are
``inherited`` (H200 uses H100's, same die and clocks); those with no measured runs at all are
``assumed``, and the report says so instead of letting a B200 figure look as trustworthy as an
H100 one. A calibration that declares its own ``provenance`` (data-file calibrations) is taken
at its word.

Examples:
    >>> compute_provenance("H100-SXM")[0], compute_provenance("H200")[0]
    ('fitted', 'inherited')
    >>> compute_provenance("B200")[0]
    'assumed'
"""

from __future__ import annotations

from typing import Any

from simtrain.compute import calibration as calibrations


def compute_provenance(accelerator: str, report: dict[str, Any] | None = None) -> tuple[str, str]:
    """``(fitted | inherited | assumed, one line saying from what)`` for ``accelerator``.

    A report that records its calibration (``compute_calibration``) is read as it is.
    """
    recorded = (report or {}).get("compute_calibration")
    if recorded:
        return str(recorded["provenance"]), str(recorded.get("source", ""))
    calibration = calibrations.calibration_for(accelerator)
    declared = getattr(calibration, "provenance", None)
    if declared:
        return str(declared), calibration.source
    # Parts that share a calibration table: the first listed is the one it was fitted on;
    # another part of the same family (A100 40GB and 80GB) is fitted too, any other inherits.
    table = getattr(calibrations, "CALIBRATIONS", {})
    sharing = [name for name, c in table.items() if c is calibration] or ["A100"]
    if accelerator not in table:
        donor = sharing[0].split("-")[0]
        return (
            "assumed",
            f"no measured runs for {accelerator}: {donor}'s efficiency fractions, not calibrated",
        )
    if accelerator.split("-")[0] == sharing[0].split("-")[0]:
        return "fitted", calibration.source
    return "inherited", f"{sharing[0]}'s fit: {calibration.source}"


def provenance_line(accelerator: str, report: dict[str, Any] | None = None) -> str:
    """The report line, e.g. ``assumed (no measured runs for B200: ...)``."""
    kind, origin = compute_provenance(accelerator, report)
    return f"{kind} ({origin})"


def provenance_short(accelerator: str, report: dict[str, Any] | None = None) -> str:
    """A table cell: ``fitted``, ``inherited (H100-SXM's fit)`` or ``assumed (not calibrated)``.

    Examples:
        >>> provenance_short("B200"), provenance_short("H200")
        ('assumed (not calibrated)', "inherited (H100-SXM's fit)")
    """
    kind, origin = compute_provenance(accelerator, report)
    if kind == "inherited":
        return f"inherited ({origin.split(':', 1)[0]})" if "'s fit:" in origin else kind
    return "assumed (not calibrated)" if kind == "assumed" else kind
