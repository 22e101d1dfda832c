"""The REST result of a task carries what it reported: ``progress`` and ``metadata``."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.support.api_helpers import url
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.api_fixtures", "tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db


def test_a_result_shows_the_last_progress_and_the_metadata(api_root: APIClient) -> None:
    result = tasks.report_progress.enqueue(40)
    quiet = tasks.add.enqueue(1, 2)
    run_until_settled()
    body = api_root.get(url("default", f"results/{result.id}")).json()
    progress = body["progress"]
    assert (progress["done"], progress["total"], progress["note"]) == (40, 40, "step 40")
    assert progress["fraction"] == 1.0 and progress["at"] >= body["started_at"]
    assert body["metadata"] == {"steps": 40}
    assert tasks.report_progress.get_result(result.id).progress.fence == progress["fence"]
    silent = api_root.get(url("default", f"results/{quiet.id}")).json()
    assert (silent["progress"], silent["metadata"]) == (None, {})
