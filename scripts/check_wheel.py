"""Check a built wheel before it is published: every file a user's install needs is in it.

    python scripts/check_wheel.py dist/django_task_ledger-*.whl

Compares the wheel with the source tree: every template, static file, Lua script,
migration, message catalog and ``py.typed`` under ``django_ledger/`` must be in the wheel,
and its metadata must name the distribution and the licence and carry the LICENSE file;
nothing of the test project's (the demo's command and seeding, the tests) may be in it.
Exits 1, naming what is wrong, otherwise 0. ``scripts/test.sh`` runs it (with
``twine check --strict``) on the wheel every CI run installs.
"""

from __future__ import annotations

import sys
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_ledger"
#: Data files the package needs at run time, by where they live under the package.
DATA = ("templates", "static", "core/lua", "migrations", "locale")
#: The distribution's name on PyPI (its import package is django_ledger).
NAME = "django-task-ledger"
#: What only the repository's test project and tests need: never in a user's install.
UNWANTED = ("django_ledger/management/commands/ledger_demo.py", "django_ledger/services/demo.py")
UNWANTED_TOP = ("testproject/", "tests/")


def expected() -> set[str]:
    found = {"django_ledger/py.typed"}
    for folder in DATA:
        for path in (PACKAGE / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found.add(path.relative_to(ROOT).as_posix())
    return found


def problems(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    found = [f"missing from the wheel: {name}" for name in sorted(expected() - names)]
    found += [
        f"in the wheel, but only the test project needs it: {name}"
        for name in sorted(names)
        if name in UNWANTED or name.startswith(UNWANTED_TOP)
    ]
    if metadata.get("Name") != NAME:
        found.append(f"the distribution is named {metadata.get('Name')!r}, not {NAME!r}")
    if "test" in metadata.get_all("Provides-Extra", []):
        found.append("the wheel offers an extra named test (the test tools are a dependency group)")
    if metadata.get("License-Expression") != "BSD-3-Clause":
        found.append(f"License-Expression is {metadata.get('License-Expression')!r}")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        found.append("the LICENSE file is not in the wheel")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    found = problems(Path(argv[0]))
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"{argv[0]}: every data file, the licence and its metadata are there, nothing more")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
