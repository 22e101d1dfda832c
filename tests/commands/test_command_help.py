"""Every ledger command answers ``--help``, in English and in each shipped language."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest
from django.core.management import load_command_class
from django.utils import translation

import django_ledger

COMMANDS = sorted(
    module.name
    for module in pkgutil.iter_modules(
        [str(Path(django_ledger.__file__).parent / "management" / "commands")]
    )
    if module.name.startswith("ledger_")
)


def help_text(name: str, language: str) -> str:
    with translation.override(language):
        command = load_command_class("django_ledger", name)
        return command.create_parser("manage.py", name).format_help()


def test_every_command_is_found() -> None:
    assert {"ledger_worker", "ledger_scheduler", "ledger_status"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_is_formatted_in_english(name: str) -> None:
    text = help_text(name, "en")
    command = load_command_class("django_ledger", name)
    with translation.override("en"):
        first_words = " ".join(str(command.help).split()[:3])
    assert text.startswith(f"usage: manage.py {name}")
    assert first_words in " ".join(text.split())


@pytest.mark.parametrize("language", ["fr", "de", "es"])
@pytest.mark.parametrize("name", COMMANDS)
def test_help_speaks_the_active_language(name: str, language: str) -> None:
    english, translated = help_text(name, "en"), help_text(name, language)
    command = load_command_class("django_ledger", name)
    with translation.override(language):
        description = " ".join(str(command.help).split()[:3])
    assert translated != english
    assert description in " ".join(translated.split())
