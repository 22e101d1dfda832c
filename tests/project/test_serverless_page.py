"""The Serverless page's examples say what the code does.

The URL they call resolves to the runner once mounted as the page mounts it; the bodies
they send are ones the endpoint accepts, with a budget under the default lease; the
answer shown has the fields the endpoint answers; the time-outs nest (budget < lease <
gunicorn's < Cloud Run's); the curl lines are well-formed commands.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

from django.urls import resolve

from django_ledger.api.views.runner import (
    RanSerializer,
    RunCountsSerializer,
    RunReportSerializer,
    RunRequestSerializer,
)
from django_ledger.conf import ledger_settings
from tests.support.settings_reference_loader import ROOT

PAGE = (ROOT / "docs" / "serverless.md").read_text(encoding="utf-8")
MOUNT = 'path("ledger-runner/", include("django_ledger.api.runner_urls"))'


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE, re.M | re.S)


def commands() -> list[list[str]]:
    """Each ``$ ...`` command of the console blocks (continuation lines joined)."""
    found = []
    for block in blocks("console"):
        joined = block.replace("\\\n", " ")
        found += [shlex.split(line[2:]) for line in joined.splitlines() if line.startswith("$ ")]
    crontab = [line for line in PAGE.splitlines() if line.startswith("* * * * * ")]
    found += [shlex.split(line.split(" ", 5)[5].split(" > ")[0]) for line in crontab]
    return found


def option(argv: list[str], *names: str) -> list[str]:
    values = []
    for index, arg in enumerate(argv):
        name, _, value = arg.partition("=")
        if name in names:
            values.append(value or argv[index + 1])
    return values


def test_the_mount_is_the_test_projects_and_every_url_resolves_to_the_runner() -> None:
    assert MOUNT in PAGE
    mounted = (ROOT / "tests" / "support" / "runner_urls.py").read_text(encoding="utf-8")
    assert MOUNT in mounted
    urls = re.findall(r"https://[^\s\"']+/ledger-runner/[^\s\"']+", PAGE)
    assert len(urls) >= 3
    for url in urls:
        match = resolve(urlsplit(url).path, urlconf="tests.support.runner_urls")
        assert (match.namespace, match.url_name) == ("django_ledger_runner", "run")


def test_every_body_is_accepted_with_a_budget_under_the_lease_and_the_time_outs_nest() -> None:
    lease = ledger_settings.defaults["LEASE"].total_seconds()
    runs = [argv for argv in commands() if argv[0] in ("curl", "gcloud")]
    bodies = [body for argv in runs for body in option(argv, "-d", "--message-body")]
    assert len(bodies) == 3
    for body in bodies:
        serializer = RunRequestSerializer(data=json.loads(body))
        assert serializer.is_valid(), serializer.errors
        assert 0 < serializer.validated_data["budget"] < lease
    curls = [argv for argv in runs if argv[0] == "curl"]
    assert all("-f" in "".join(argv) and argv[2:4] == ["-X", "POST"] for argv in curls)
    (deploy,) = [argv for argv in runs if argv[:3] == ["gcloud", "run", "deploy"]]
    gunicorn = float(option(option(deploy, "--args")[0].split(","), "--timeout")[0])
    cloud_run = float(option(deploy, "--timeout")[0])
    assert lease < gunicorn < cloud_run


def test_the_answer_shown_has_the_fields_the_endpoint_answers() -> None:
    (answer,) = [json.loads(block) for block in blocks("json")]
    assert set(answer) == set(RunReportSerializer().fields)
    assert set(answer["counts"]) == set(RunCountsSerializer().fields)
    assert all(set(entry) == set(RanSerializer().fields) for entry in answer["ran"])
    assert answer["counts"]["claimed"] == len(answer["ran"])


def test_the_page_is_in_the_navigation() -> None:
    assert "serverless.md" in Path(ROOT / "mkdocs.yml").read_text(encoding="utf-8")
