"""The lowest dependency versions CI tests are the floors pyproject.toml declares.

``requirements/lowest.txt`` pins each direct dependency (and the ``tasks`` extra) at its
floor, and tox's ``lowest`` environment installs the project under those pins. A floor
raised or added in pyproject.toml without its pin, or a pin left behind, fails here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def floors() -> dict[str, Version]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = {}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["tasks"]]:
        floor = re.search(r">=\s*([\w.]+)", requirement)
        assert floor, f"{requirement!r} has no lower bound, so no lowest version to test"
        found[_name(requirement)] = Version(floor.group(1))
    return found


def pins() -> dict[str, Version]:
    found = {}
    for line in (ROOT / "requirements" / "lowest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[_name(name)] = Version(version)
    return found


def test_every_direct_dependency_is_pinned_at_its_floor_for_the_lowest_run() -> None:
    assert pins() == floors()


def test_the_lowest_run_installs_under_the_pins() -> None:
    tox = (ROOT / "tox.ini").read_text()
    section = tox.split("[testenv:lowest]", 1)[1].split("\n[", 1)[0]
    assert "PIP_CONSTRAINT = {toxinidir}/requirements/lowest.txt" in section
