"""Every fact the package cites lives in the repository under docs/references/.

The package may not point at files outside the repository (``shared/reference``); each
``docs/references/<file>.md §<section>`` citation must name a file that exists and a heading
of it that starts with that section number, and every catalog entry's ``source`` must carry at
least one such citation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from simtrain.catalog import power, prices
from simtrain.catalog.accelerators import ACCELERATORS
from simtrain.catalog.links import LINKS
from simtrain.catalog.node_wirings import NODE_WIRINGS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "simtrain"
REFERENCES = ROOT / "docs" / "references"
CITATION = re.compile(r"docs/references/([\w.-]+\.md)`{0,2}((?:(?!docs/references/)[^\n\"])*)")
SECTION = re.compile(r"§\s*([^§]*)")


def _headings(md_file: Path) -> list[str]:
    """Headings of ``md_file``, the dot after a leading number dropped ("9. X" -> "9 X")."""
    headings = []
    for line in md_file.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            number, _, rest = line.lstrip("#").strip().partition(" ")
            headings.append(f"{number.rstrip('.')} {rest}".strip())
    return headings


def _resolves(reference: str, headings: list[str]) -> bool:
    """Whether ``§reference`` names a heading: by its number (``7.1``) or its text."""
    reference = reference.strip()
    first = reference.split(" ", 1)[0].rstrip(".,;:)")
    if re.fullmatch(r"\d+(\.\d+)*-\d+(\.\d+)*", first):  # a range, §1.2-1.4: both ends
        return all(_resolves(end, headings) for end in first.split("-"))
    for heading in headings:
        if heading.split(" ", 1)[0] == first and first[:1].isdigit():
            return True
        rest = reference[len(heading) :]
        if reference.startswith(heading) and not rest[:1].isalnum():
            return True
    return False


def unresolved(text: str) -> list[str]:
    """The citations in ``text`` whose file or section does not exist (empty when all do).

    A citation is ``docs/references/<file>.md`` followed on its line by any number of
    ``§<section>``, each a heading's number (``§7.1``) or its text (``§PyTorch FSDP1 defaults``).
    """
    bad = []
    for match in CITATION.finditer(text):
        md_file = REFERENCES / match.group(1)
        if not md_file.is_file():
            bad.append(f"docs/references/{match.group(1)} (no such file)")
            continue
        headings = _headings(md_file)
        for section in SECTION.findall(match.group(2)):
            if section.startswith("<"):  # a placeholder in a docstring: §<section>
                continue
            if not _resolves(section, headings):
                bad.append(f"docs/references/{match.group(1)} §{section.strip()} (no such heading)")
    return bad


def _package_files() -> list[Path]:
    return [p for p in PACKAGE.rglob("*") if p.suffix in {".py", ".yaml", ".yml", ".json", ".md"}]


def _catalog_sources() -> dict[str, str]:
    """Every catalog entry's source string, keyed by what the entry is."""
    sources = {f"accelerator {n}": a.source for n, a in ACCELERATORS.items()}
    sources |= {f"link {n}": link.source for n, link in LINKS.items()}
    sources |= {f"price {n}": p.source for n, p in prices.PRESET_PRICES.items()}
    for name, offers in prices.OTHER_OFFERS.items():
        sources |= {f"offer {name} {o.offer}": o.source for o in offers}
    for attr in dir(power):
        if isinstance(getattr(power, attr), power.Preset):
            sources[f"power {attr}"] = getattr(power, attr).source
    sources |= {f"grid {n}": p.source for n, p in power.GRID_GCO2_PER_KWH.items()}
    sources |= {f"node wiring {n}": w.source for n, w in NODE_WIRINGS.items()}
    # Data files of the catalog (reliability presets, framework profiles, calibrations): every
    # mapping with a 'source' key, at any depth.
    for path in PACKAGE.rglob("*.yaml"):
        stack = [yaml.safe_load(path.read_text(encoding="utf-8"))]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if isinstance(node.get("source"), str):
                    sources[f"{path.relative_to(ROOT)} {node.get('name', '')}"] = node["source"]
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return sources


def test_package_never_cites_files_outside_the_repository():
    offenders = {
        str(p.relative_to(ROOT))
        for p in _package_files()
        if "shared/reference" in p.read_text(encoding="utf-8")
    }
    assert offenders == set()


def test_every_citation_in_the_package_resolves_to_a_heading():
    bad = {
        str(p.relative_to(ROOT)): problems
        for p in _package_files()
        if (problems := unresolved(p.read_text(encoding="utf-8")))
    }
    assert bad == {}


@pytest.mark.parametrize("entry, source", sorted(_catalog_sources().items()))
def test_every_catalog_entry_cites_a_section_in_the_repository(entry, source):
    assert CITATION.search(source) and SECTION.search(source), (
        f"{entry}: source {source!r} names no docs/references/<file>.md §<section>"
    )
    assert unresolved(source) == []


def test_unresolved_catches_a_missing_section_and_file():
    assert unresolved("see docs/references/hardware.md §7.1") == []
    assert unresolved("see docs/references/hardware.md §7.2 and §7.3") == []
    assert unresolved("docs/references/hardware.md §99.9") != []
    assert unresolved("docs/references/hardware.md §Accelerators") != []  # 7.1's text has a number
    assert unresolved("docs/references/frameworks.md §PyTorch FSDP1 defaults (NO_SHARD)") == []
    assert unresolved("docs/references/frameworks.md §PyTorch FSDP3 defaults") != []
    assert unresolved("docs/references/nowhere.md §1") != []
