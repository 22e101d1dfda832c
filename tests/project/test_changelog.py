"""CHANGELOG.md speaks to users: Keep a Changelog's shape, the version being built, and no
names of the work that made it (an issue, a session, an audit)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
#: Words that name how the work was organised, not what a user gets.
WORK_WORDS = ("issue", "session", "audit")
#: The kinds of change Keep a Changelog names, and the upgrade notes a version may open with.
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
UPGRADE_NOTES = re.compile(r"Upgrading from .+")
VERSION_HEADING = re.compile(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$")


def package_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def work_words(text: str) -> list[str]:
    """Each line that names one of ``WORK_WORDS`` (any case, inside a longer word too)."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if any(word in line.lower() for word in WORK_WORDS)
    ]


def versions(text: str) -> list[str]:
    """The ``## [...]`` headings' names, in order."""
    return [match.group(1) for line in text.splitlines() if (match := VERSION_HEADING.match(line))]


def odd_headings(text: str) -> list[str]:
    """``###`` headings that are neither a kind of change nor upgrade notes."""
    return [
        line
        for line in text.splitlines()
        if line.startswith("### ")
        and line[4:] not in KINDS
        and not UPGRADE_NOTES.fullmatch(line[4:])
    ]


def test_the_changelog_names_no_issue_session_or_audit() -> None:
    assert work_words(CHANGELOG.read_text(encoding="utf-8")) == []


def test_the_changelog_has_the_version_pyproject_names_under_unreleased() -> None:
    found = versions(CHANGELOG.read_text(encoding="utf-8"))
    assert found[:2] == ["Unreleased", package_version()]
    assert len(found) == len(set(found)), f"a version appears twice: {found}"


def test_every_section_is_a_kind_of_change_or_upgrade_notes() -> None:
    assert odd_headings(CHANGELOG.read_text(encoding="utf-8")) == []


def test_the_checks_catch_a_changelog_written_by_work_item() -> None:
    text = (
        "## [Unreleased]\n\n### Fixed (issue 21, fourth session)\n\n"
        "- Tests the mutation Audit asked for.\n\n## [0.1.0]\n"
    )
    assert work_words(text) == [
        "3: ### Fixed (issue 21, fourth session)",
        "5: - Tests the mutation Audit asked for.",
    ]
    assert versions(text) == ["Unreleased", "0.1.0"]
    assert package_version() not in versions(text)
    assert odd_headings(text) == ["### Fixed (issue 21, fourth session)"]
