"""What a user installs: its name, licence, extras and version, read without building.

The distribution is ``django-task-ledger`` (PyPI's ``django-ledger`` is an unrelated
project with the same import package), its version is stated once, in pyproject.toml,
and the test tools are a dependency group, not an extra a user could install. The wheel
itself is checked by ``scripts/check_wheel.py`` (CI runs it on the wheel every run
installs); here, that it refuses what only the test project needs.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
import zipfile
from importlib.metadata import metadata, version
from pathlib import Path
from types import ModuleType

import pytest
from django.core.management import get_commands

import django_ledger
from django_ledger.api.views.schema import package_version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
NAME = "django-task-ledger"


def check_wheel() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_wheel", ROOT / "scripts/check_wheel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_distribution_is_named_django_task_ledger() -> None:
    assert PROJECT["name"] == NAME
    assert metadata(NAME)["Name"] == NAME
    assert django_ledger.DISTRIBUTION == NAME


def test_the_licence_is_an_spdx_expression_with_its_file() -> None:
    assert PROJECT["license"] == "BSD-3-Clause"
    assert PROJECT["license-files"] == ["LICENSE"]
    assert metadata(NAME)["License-Expression"] == "BSD-3-Clause"


def test_no_extra_is_named_test_the_tools_are_a_dependency_group() -> None:
    assert "test" not in PROJECT["optional-dependencies"]
    assert "test" not in (metadata(NAME).get_all("Provides-Extra") or [])
    assert "pytest>=9" in PYPROJECT["dependency-groups"]["test"]
    tox = (ROOT / "tox.ini").read_text()
    assert "dependency_groups = test" in tox
    assert not re.search(r"^extras\s*=.*\btest\b|^\s+test$", tox, re.M)
    assert "requires = tox>=4.22" in tox  # the first tox that reads dependency groups


def test_the_version_is_stated_once_and_read_from_the_installed_metadata() -> None:
    stated = PROJECT["version"]
    assert version(NAME) == stated
    assert django_ledger.__version__ == stated
    assert package_version() == stated  # the API schema's info.version
    # No module of the package states a version of its own.
    for path in (ROOT / "django_ledger").rglob("*.py"):
        text = path.read_text()
        assert f'"{stated}"' not in text, path
        assert not re.search(r"^__version__\s*=\s*[\"']", text, re.M), path


def test_the_readme_installs_the_distribution_and_warns_of_the_other_one() -> None:
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install in your project", 1)[1].split("\n## ", 1)[0]
    assert f"pip install {NAME} " in install
    assert f"pip install '{NAME}[tasks]'" in install
    assert "unrelated accounting app" in install and "cannot be installed" in install
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        assert not re.search(r"pip install '?django-ledger\b", path.read_text()), path


def test_the_demo_command_is_the_test_projects() -> None:
    assert get_commands()["ledger_demo"] == "testproject"
    assert not (ROOT / "django_ledger/management/commands/ledger_demo.py").exists()
    assert importlib.util.find_spec("django_ledger.services.demo") is None


def test_the_sdist_leaves_the_tests_out() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert "prune tests" in manifest and "prune testproject" in manifest


def _wheel(tmp_path: Path, name: str, extra: str, *files: str) -> Path:
    wheel = tmp_path / "django_task_ledger-0-py3-none-any.whl"
    meta = f"Metadata-Version: 2.4\nName: {name}\nLicense-Expression: BSD-3-Clause\n{extra}"
    expected = check_wheel().expected()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("django_task_ledger-0.dist-info/METADATA", meta)
        archive.writestr("django_task_ledger-0.dist-info/licenses/LICENSE", "")
        for member in [*expected, *files]:
            archive.writestr(member, "")
    return wheel


def test_the_wheel_check_passes_a_wheel_that_holds_the_package_and_nothing_more(
    tmp_path: Path,
) -> None:
    assert check_wheel().problems(_wheel(tmp_path, NAME, "Provides-Extra: tasks\n")) == []


@pytest.mark.parametrize(
    ("name", "extra", "files", "problem"),
    [
        (NAME, "", ["django_ledger/management/commands/ledger_demo.py"], "test project"),
        (NAME, "", ["django_ledger/services/demo.py"], "test project"),
        (NAME, "", ["testproject/settings.py"], "test project"),
        (NAME, "", ["tests/core/test_admit.py"], "test project"),
        ("django-ledger", "", [], "not 'django-task-ledger'"),
        (NAME, "Provides-Extra: test\n", [], "extra named test"),
    ],
)
def test_the_wheel_check_refuses(
    tmp_path: Path, name: str, extra: str, files: list[str], problem: str
) -> None:
    found = check_wheel().problems(_wheel(tmp_path, name, extra, *files))
    assert len(found) == 1 and problem in found[0], found
