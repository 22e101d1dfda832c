"""docs/checks.md documents every system check id the code emits, and no other."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.settings_reference_loader import ROOT, settings_reference

PAGE = ROOT / "docs" / "checks.md"


def documented() -> set[str]:
    """The ids in the first column of the page's tables."""
    text = PAGE.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(django_ledger\.[EWI]\d{3})` \|", text, flags=re.MULTILINE))


def test_every_emitted_id_is_documented() -> None:
    emitted = settings_reference().emitted_check_ids()
    assert emitted - documented() == set()


def test_every_documented_id_is_emitted() -> None:
    emitted = settings_reference().emitted_check_ids()
    assert documented() - emitted == set()


def test_the_scan_finds_ids_in_each_form(tmp_path: Path) -> None:
    """Written whole, made by error() or _error(), or a schedule's Problem: all found."""
    (tmp_path / "a.py").write_text(
        "from django.core import checks\n"
        "checks.Warning('m', id='django_ledger.W001')\n"
        "_error(7, 'm', 'h', 'o')\n"
        "error(30, 'm', 'h', 'o')\n"
        "Problem(73, 'm', 'h', 'o')\n"
        "other(99, 'm')\n",
        encoding="utf-8",
    )
    found = settings_reference().emitted_check_ids(tmp_path)
    assert found == {
        "django_ledger.W001",
        "django_ledger.E007",
        "django_ledger.E030",
        "django_ledger.E073",
    }


def test_the_scan_sees_every_family_of_the_package() -> None:
    emitted = settings_reference().emitted_check_ids()
    for family in ("E001", "E030", "E060", "E073", "E090", "E100", "W001", "W065", "I001"):
        assert f"django_ledger.{family}" in emitted
