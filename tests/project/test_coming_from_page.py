"""The Coming from page's comparison table: every row, every peer, and a source for each.

A cell is a fact checked in the peer's own documentation or says "not checked"; each peer
with a checked cell has its pages listed under the table; the features still being built
here say "planned", never more.
"""

from __future__ import annotations

import re

from tests.support.settings_reference_loader import ROOT

PAGE = (ROOT / "docs" / "coming-from.md").read_text(encoding="utf-8")
COMPARED = PAGE.split("## Capabilities compared", 1)[1]
PEERS = ["Celery", "RQ", "huey", "Oban", "BullMQ"]
ROWS = [
    "admission once by id",
    "lease / visibility",
    "fenced writes",
    "transactional enqueue",
    "scheduler without a singleton",
    "cron monitors (check-ins)",
    "workflows",
    "rate / concurrency limits",
    "cancel a running task",
    "task progress",
    "unique until start / end / a period",
    "debounce a repeated enqueue",
    "retry at a time the task names",
    "typed task signatures",
    "trace carried from the enqueue to the run",
    "bulk actions over a filter",
    "testing helpers",
    "admin UI",
    "REST API",
]
PLANNED: set[str] = set()


def table() -> dict[str, dict[str, str]]:
    lines = [line for line in COMPARED.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(header), line
        rows[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return rows


def test_the_table_has_every_row_and_every_system() -> None:
    rows = table()
    assert list(rows) == ROWS
    for row in rows.values():
        assert list(row) == ["django-ledger", *PEERS]
        assert all(row.values())


def test_what_is_being_built_here_says_planned() -> None:
    for name, row in table().items():
        assert (row["django-ledger"] == "planned") is (name in PLANNED), name


def test_the_testing_helpers_point_at_the_testing_page() -> None:
    assert "[Testing](testing.md)" in table()["testing helpers"]["django-ledger"]
    assert "testing helpers: planned" not in PAGE


def test_every_peer_with_a_checked_cell_names_its_pages() -> None:
    sources = COMPARED.split("Pages checked:", 1)[1]
    rows = table().values()
    for peer in PEERS:
        checked = [row[peer] for row in rows if row[peer] != "not checked"]
        listed = re.search(rf"^- {peer}: (.+?)(?=^- |\Z)", sources, re.M | re.S)
        if checked:
            assert listed is not None, peer
            assert re.search(r"\]\(https://", listed.group(1)), peer
