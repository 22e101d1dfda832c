"""The shipped message catalogs are complete: what the code marks, every catalog translates.

``makemessages`` runs on a copy of the package, and its messages must be exactly those
of each committed ``django.po``: a string marked and not in a catalog, or a catalog
entry whose string is gone, fails. Every entry is translated and none is fuzzy
(``msgfmt --check --statistics``), and each committed ``django.mo`` is the compiled
``django.po``. Needs GNU gettext (``apt-get install gettext``), as ``makemessages``
and ``compilemessages`` do.
"""

from __future__ import annotations

import gettext
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "django_ledger"
LANGUAGES = ("fr", "de", "es")


def catalog(language: str) -> Path:
    return PACKAGE / "locale" / language / "LC_MESSAGES" / "django.po"


def require_gettext() -> None:
    missing = [tool for tool in ("xgettext", "msgmerge", "msgfmt") if shutil.which(tool) is None]
    assert not missing, f"GNU gettext is needed ({', '.join(missing)}): apt-get install gettext"


_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_KEYWORD = re.compile(r"^(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?) ")


def entries(path: Path) -> list[dict[str, str]]:
    """Read a PO file's entries (obsolete ones left out): keyword -> text, and flags."""
    found: list[dict[str, str]] = []
    entry: dict[str, str] = {}
    key = ""
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip():
            if entry:
                found.append(entry)
            entry, key = {}, ""
        elif line.startswith("#,"):
            entry["flags"] = line[2:].strip()
        elif line.startswith("#"):
            continue
        elif match := _KEYWORD.match(line):
            key = match.group(1)
            entry[key] = "".join(_STRING.findall(line[match.end() :]))
        elif line.startswith('"') and key:
            entry[key] += "".join(_STRING.findall(line))
    return [e for e in found if e.get("msgid")]


def msgids(path: Path) -> set[tuple[str, str, str]]:
    """Each entry's context, message and plural: what makes it one entry."""
    return {(e.get("msgctxt", ""), e["msgid"], e.get("msgid_plural", "")) for e in entries(path)}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package whose catalogs ``makemessages`` has just brought up to date."""
    require_gettext()
    copy = tmp_path_factory.mktemp("catalogs") / "django_ledger"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:1/0"),  # never connected
    }
    languages = [arg for language in LANGUAGES for arg in ("-l", language)]
    run = subprocess.run(
        [sys.executable, "-m", "django", "makemessages", *languages, "--no-obsolete"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return copy


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_marked_string_is_in_the_catalog_and_nothing_else(language: str, made: Path) -> None:
    marked = msgids(made / "locale" / language / "LC_MESSAGES" / "django.po")
    shipped = msgids(catalog(language))
    assert len(marked) > 600  # the admin, the API's errors, the checks, the commands
    missing = sorted(marked - shipped)
    stale = sorted(shipped - marked)
    assert not missing, f"marked but not in the {language} catalog (run makemessages): {missing}"
    assert not stale, f"in the {language} catalog but no longer marked: {stale}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_entry_is_translated_and_none_is_fuzzy(language: str) -> None:
    require_gettext()
    run = subprocess.run(
        ["msgfmt", "--check", "--statistics", "-o", os.devnull, str(catalog(language))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"\d+ translated messages\.\n", run.stderr), run.stderr
    for entry in entries(catalog(language)):
        assert "fuzzy" not in entry.get("flags", ""), entry
        strings = [value for key, value in entry.items() if key.startswith("msgstr")]
        assert strings and all(strings), f"untranslated in {language}: {entry['msgid']!r}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_compiled_catalog_is_the_catalog(language: str, tmp_path: Path) -> None:
    require_gettext()
    fresh = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "-o", str(fresh), str(catalog(language))], check=True)
    shipped = catalog(language).with_suffix(".mo")
    assert shipped.exists(), f"{shipped} is missing: run compilemessages"
    with fresh.open("rb") as a, shipped.open("rb") as b:
        assert gettext.GNUTranslations(a)._catalog == gettext.GNUTranslations(b)._catalog, (  # type: ignore[attr-defined]
            f"{shipped} is older than its django.po: run compilemessages"
        )
