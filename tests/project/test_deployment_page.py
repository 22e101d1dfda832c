"""The Deployment page's units, image and manifests: they parse, and say what the code does.

Every ```ini block is a systemd unit, every ```yaml block Kubernetes manifests, the
```dockerfile block the image. Each ``manage.py`` command line in them (a unit's
``ExecStart``, the image's entrypoint and command, a container's ``args`` after that
entrypoint) is parsed by the command's own parser, so an option the command lacks, or a
value it refuses, fails here. The stop each gives a worker outlasts its drain.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.management import get_commands, load_command_class
from django.core.management.base import CommandError
from django.urls import resolve
from rest_framework.authentication import TokenAuthentication

from django_ledger.api.serializers import StatsSerializer
from django_ledger.core.probes import ProbeServer, Verdict
from tests.support.settings_reference_loader import ROOT

yaml = pytest.importorskip("yaml")

PAGE = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")


def blocks(language: str, text: str = PAGE) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


UNITS = blocks("ini")
MANIFESTS = [doc for block in blocks("yaml") for doc in yaml.safe_load_all(block) if doc]
(DOCKERFILE,) = blocks("dockerfile")


def unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def instruction(name: str) -> list[str]:
    """An exec-form instruction of the image (``ENTRYPOINT ["python", ...]``)."""
    (line,) = re.findall(rf"^{name} (\[.*\])$", DOCKERFILE, re.M)
    value: list[str] = json.loads(line)
    return value


ENTRYPOINT = instruction("ENTRYPOINT")


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """The options ``manage.py NAME ...`` gets, as its own parser reads them."""
    name, *rest = argv[argv.index("manage.py") + 1 :]
    command = load_command_class(get_commands()[name], name)
    options = vars(command.create_parser("manage.py", name).parse_args(rest))
    return name, options


def containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(manifest, container) for every container of the page's manifests."""
    found: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for manifest in MANIFESTS:
        if "template" not in manifest.get("spec", {}):
            continue  # a Secret or one of KEDA's objects: no pods
        spec = manifest["spec"]["template"]["spec"]
        found.extend((manifest, container) for container in spec["containers"])
    return found


def test_the_page_has_units_an_image_and_manifests() -> None:
    assert len(UNITS) == 2 and len(MANIFESTS) == 6
    kinds = {"Deployment", "Job", "Secret", "TriggerAuthentication", "ScaledObject"}
    assert {m["kind"] for m in MANIFESTS} == kinds
    assert ENTRYPOINT == ["python", "manage.py"]


@pytest.mark.parametrize("text", UNITS, ids=["worker", "scheduler"])
def test_each_unit_restarts_and_stops_with_sigterm_after_the_drain(text: str) -> None:
    service = unit(text)["Service"]
    name, options = parse(shlex.split(service["ExecStart"]))
    assert service["KillSignal"] == "SIGTERM" and service["Restart"] == "always"
    assert name in {"ledger_worker", "ledger_scheduler"}
    if name == "ledger_worker":
        assert service["KillMode"] == "mixed"
        assert float(service["TimeoutStopSec"]) > options["shutdown_timeout"]
        # The worker feeds systemd's watchdog (core/worker/health.py), children included.
        assert (service["Type"], service["NotifyAccess"]) == ("notify", "all")
        assert float(service["WatchdogSec"]) >= 10


def test_the_image_runs_a_worker_by_default() -> None:
    name, options = parse(ENTRYPOINT + instruction("CMD"))
    assert name == "ledger_worker" and options["shutdown_timeout"] == 30


def test_every_container_runs_a_command_that_takes_its_options() -> None:
    names = []
    for manifest, container in containers():
        name, options = parse(ENTRYPOINT + container["args"])
        names.append(name)
        spec = manifest["spec"]["template"]["spec"]
        if name == "ledger_worker":
            # SIGKILL comes after the grace period: the drain must fit in it.
            assert spec["terminationGracePeriodSeconds"] > options["shutdown_timeout"]
            assert manifest["spec"]["replicas"] >= 2
        if name == "ledger_scheduler":
            # No singleton: several schedulers admit each fire once.
            assert manifest["spec"]["replicas"] >= 2
        if name in ("ledger_worker", "ledger_scheduler"):
            assert_probes(container, options)
    assert sorted(names) == ["ledger_scheduler", "ledger_worker", "migrate"]


def assert_probes(container: dict[str, Any], options: dict[str, Any]) -> None:
    """Liveness on ``/healthz`` and readiness on ``/readyz``, on the metrics port it serves."""
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for kind, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        probe = container[kind]["httpGet"]
        assert probe["path"] == path and path in PROBE_PATHS
        assert options["metrics_port"] == ports[probe["port"]]
    # Reachable by the kubelet: not the loopback address the port listens on by default.
    assert options["metrics_address"] == "0.0.0.0"


#: The paths the probes' server answers (``core/probes.py``).
PROBE_PATHS = ("/healthz", "/readyz", "/metrics")


def test_the_probes_answer_on_the_paths_the_manifests_probe() -> None:
    """The paths above are the ones a real server answers (a free port, no Redis)."""

    server = ProbeServer("127.0.0.1", 0, lambda: Verdict(True), lambda: Verdict(False, "stopping"))
    try:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(base + "/healthz", timeout=5) as answer:
            assert (answer.status, answer.read()) == (200, b"ok\n")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert refused.value.code == 503 and refused.value.read() == b"stopping\n"
    finally:
        server.close()


def test_an_option_the_command_lacks_is_refused() -> None:
    with pytest.raises(CommandError, match="--drain-timeout"):
        parse(["python", "manage.py", "ledger_worker", "--drain-timeout", "30"])
    with pytest.raises(CommandError):
        parse(["python", "manage.py", "ledger_worker", "--concurrency", "eight"])


def test_every_option_the_prose_names_belongs_to_a_command() -> None:
    """An ``--option`` in the page's text is one of the commands' (or docker's)."""
    commands = ("ledger_worker", "ledger_scheduler", "ledger_relay", "ledger_repair")
    commands += ("ledger_status", "ledger_token")
    known = {"--time", "--init", "--deploy"}  # docker stop, docker run; manage.py check
    for name in commands:
        parser = load_command_class("django_ledger", name).create_parser("manage.py", name)
        known.update(flag for action in parser._actions for flag in action.option_strings)
    prose = re.sub(r"^```.*?^```$", "", PAGE, flags=re.M | re.S)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", prose))
    assert named and named - known == set()


def named(kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in MANIFESTS if m["kind"] == kind}


def test_keda_scales_the_workers_on_the_demand_the_api_answers() -> None:
    """The ScaledObject reads the stats' ``demand`` with a token the API accepts."""
    (scaled,) = named("ScaledObject").values()
    worker = named("Deployment")[scaled["spec"]["scaleTargetRef"]["name"]]
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    _, options = parse(ENTRYPOINT + container["args"])
    assert scaled["spec"]["minReplicaCount"] == 0 < scaled["spec"]["maxReplicaCount"]
    # Down to zero only after the grace a stopping worker has to finish its tasks.
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert scaled["spec"]["cooldownPeriod"] > grace
    (trigger,) = scaled["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "metrics-api"
    # One worker per --concurrency tasks of demand; the first as soon as there is any.
    assert float(meta["targetValue"]) == options["concurrency"]
    assert float(meta["activationTargetValue"]) == 0
    match = resolve(urlsplit(meta["url"]).path)
    assert match.url_name == "stats" and match.namespace == "django_ledger_api"
    assert meta["valueLocation"] in StatsSerializer().fields
    assert meta["valueLocation"] == "demand"
    # apiKey in the Authorization header, "Token <key>": what TokenAuthentication reads.
    assert (meta["authMode"], meta["method"]) == ("apiKey", "header")
    assert meta["keyParamName"] == "Authorization"
    auth = named("TriggerAuthentication")[trigger["authenticationRef"]["name"]]
    (ref,) = auth["spec"]["secretTargetRef"]
    assert ref["parameter"] == "apiKey"
    value = named("Secret")[ref["name"]]["stringData"][ref["key"]]
    keyword, key = value.split(" ")
    assert keyword == TokenAuthentication.keyword and len(key) == 40


def test_the_page_is_in_the_navigation() -> None:
    assert "deployment.md" in Path(ROOT / "mkdocs.yml").read_text(encoding="utf-8")
