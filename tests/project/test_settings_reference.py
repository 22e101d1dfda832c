"""docs/settings.md is what scripts/settings_reference.py writes, and names every key."""

from __future__ import annotations

import re
from typing import Any

import pytest

from django_ledger import defaults
from django_ledger.api.conf import API_DEFAULTS
from django_ledger.outbox.options import TRANSACTION_OPTION_DEFAULTS
from django_ledger.tasks.options import BACKEND_OPTION_DEFAULTS
from tests.support.settings_reference_loader import ROOT, settings_reference

PAGE = ROOT / "docs" / "settings.md"


def test_the_page_is_what_the_script_writes_now() -> None:
    written = settings_reference().render()
    assert PAGE.read_text(encoding="utf-8") == written, (
        "docs/settings.md is out of date: run python scripts/settings_reference.py"
    )


def _sections() -> dict[str, str]:
    """The page's sections by title, each the text up to the next title."""
    parts = re.split(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _keys(text: str) -> set[str]:
    return set(re.findall(r"^\| `([A-Z_]+)` \|", text, flags=re.MULTILINE))


# Each section of the page, and the keys the code defines for it.
EXPECTED: dict[str, Any] = {
    "The `LEDGER` setting": defaults.TOP_KEYS | set(defaults.TOP_DEFAULTS),
    "DEFAULTS": set(defaults.DEFAULTS) | set(defaults.LIMITS) - {"TTL"},
    "A queue's entry": defaults.QUEUE_KEYS,
    "RATE": defaults.RATE_KEYS,
    "DISPATCH": defaults.DISPATCH_KEYS | set(defaults.DISPATCH_DEFAULTS),
    "TIMEOUTS": defaults.TIMEOUT_KEYS | set(defaults.TIMEOUT_DEFAULTS),
    "DURABILITY": defaults.DURABILITY_KEYS | set(defaults.DURABILITY_LIMITS),
    "SCHEDULES": defaults.SCHEDULE_KEYS | set(defaults.SCHEDULE_DEFAULTS),
    "API": set(API_DEFAULTS),
    "TASKS OPTIONS": set(BACKEND_OPTION_DEFAULTS) | set(TRANSACTION_OPTION_DEFAULTS),
}


@pytest.mark.parametrize("title", sorted(EXPECTED))
def test_every_key_the_code_defines_is_on_the_page(title: str) -> None:
    sections = _sections()
    assert title in sections
    assert _keys(sections[title]) == EXPECTED[title]


def test_every_defaults_dict_of_defaults_py_has_its_section() -> None:
    """A new ``*_DEFAULTS`` dict or ``*_KEYS`` set in defaults.py needs a section here."""
    covered = {
        "DEFAULTS",
        "DISPATCH_DEFAULTS",
        "DISPATCH_KEYS",
        "DURABILITY_DEFAULTS",
        "DURABILITY_KEYS",
        "QUEUE_KEYS",
        "RATE_KEYS",
        "SCHEDULE_DEFAULTS",
        "SCHEDULE_KEYS",
        "TIMEOUT_DEFAULTS",
        "TIMEOUT_KEYS",
        "TOP_DEFAULTS",
        "TOP_KEYS",
    }
    defined = {name for name in defaults.__all__ if name.endswith(("DEFAULTS", "_KEYS"))}
    assert defined == covered


def test_a_default_and_a_bound_come_from_the_code() -> None:
    sections = _sections()
    row = next(
        line for line in sections["DEFAULTS"].splitlines() if line.startswith("| `MAX_ATTEMPTS`")
    )
    assert f"`{defaults.DEFAULTS['MAX_ATTEMPTS']}`" in row
    assert defaults.LIMITS["MAX_ATTEMPTS"].describe() in row


def test_the_script_refuses_a_key_it_does_not_describe(monkeypatch: pytest.MonkeyPatch) -> None:
    script = settings_reference()
    monkeypatch.setattr(script.setting, "RATE_KEYS", script.setting.RATE_KEYS | {"JITTER"})
    with pytest.raises(SystemExit, match="JITTER"):
        script.render()


def test_the_script_refuses_a_check_id_no_check_emits(monkeypatch: pytest.MonkeyPatch) -> None:
    script = settings_reference()
    monkeypatch.setitem(script.RATE, "LIMIT", ("int", "Claims per period.", "", ("E999",)))
    with pytest.raises(SystemExit, match="E999"):
        script.render()
