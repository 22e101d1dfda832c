"""The OpenAPI schema: valid, no warnings, and documenting the whole contract."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from django_ledger import (
    Admission,
    AdmissionStatus,
    Record,
    Settlement,
    SettlementStatus,
    State,
)
from django_ledger.api.representations import admission_data, record_data, settlement_data
from django_ledger.api.serializers import (
    AdmissionSerializer,
    RecordSerializer,
    SettlementSerializer,
)
from django_ledger.api.urls import urlpatterns

pytest_plugins = ["tests.support.api_fixtures"]


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The schema as ``spectacular --validate --fail-on-warn`` writes it."""
    path = Path(tmp_path_factory.mktemp("schema")) / "schema.json"
    stderr = StringIO()
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--format",
        "openapi-json",
        "--file",
        str(path),
        stderr=stderr,
    )
    assert "warning" not in stderr.getvalue().lower(), stderr.getvalue()
    assert "error" not in stderr.getvalue().lower(), stderr.getvalue()
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        if path.startswith("/api/")
        for method, operation in item.items()
    ]


def test_the_schema_validates_with_no_warnings(schema: dict[str, Any]) -> None:
    assert schema["openapi"].startswith("3.")


def test_every_api_url_is_documented_once(schema: dict[str, Any]) -> None:
    documented = operations(schema)
    ids = [operation["operationId"] for _, _, operation in documented]
    assert len(ids) == len(set(ids))
    # A ViewSet's URL holds one operation per method it maps (schedules: GET, PUT, DELETE);
    # DRF adds "head" to a GET's map at the first request, which the schema leaves out.
    methods = [
        len(set(getattr(p.callback, "actions", None) or {"": ""}) - {"head"}) for p in urlpatterns
    ]
    named = [p.name not in ("schema", "docs") for p in urlpatterns]
    assert len(documented) == sum(n for n, keep in zip(methods, named, strict=True) if keep)


def test_every_operation_needs_credentials_and_documents_refusals(schema: dict[str, Any]) -> None:
    assert set(schema["components"]["securitySchemes"]) == {"tokenAuth", "cookieAuth"}
    for path, method, operation in operations(schema):
        if path == "/api/token/":
            continue  # open to anyone: see the next test
        assert operation["security"] == [{"tokenAuth": []}, {"cookieAuth": []}], path
        for status in ("401", "403", "429", "503"):
            response = operation["responses"][status]
            ref = response["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/Error", (path, method, status)
        assert "Retry-After" in operation["responses"]["503"]["headers"]
        if "{queue}" in path:
            assert "404" in operation["responses"], (path, method)


def test_the_token_endpoint_needs_no_credentials_and_documents_its_refusals(
    schema: dict[str, Any],
) -> None:
    operation = schema["paths"]["/api/token/"]["post"]
    assert operation["security"] == [{}]
    assert set(operation["responses"]) == {"200", "400", "406", "413", "415", "429"}
    for status in ("400", "406", "413", "415", "429"):
        ref = operation["responses"][status]["content"]["application/json"]["schema"]["$ref"]
        assert ref == "#/components/schemas/Error"
    content = operation["requestBody"]["content"]
    assert set(content) == {"application/json", "application/x-www-form-urlencoded"}
    body = content["application/json"]["schema"]["$ref"]
    assert content["application/x-www-form-urlencoded"]["schema"]["$ref"] == body
    assert set(schema["components"]["schemas"][body.rsplit("/", 1)[1]]["required"]) == {
        "username",
        "password",
    }


def test_every_operation_documents_406_and_every_body_413_and_415(
    schema: dict[str, Any],
) -> None:
    bodies = 0
    for path, method, operation in operations(schema):
        statuses = {"406"} | ({"413", "415"} if "requestBody" in operation else set())
        bodies += "requestBody" in operation
        for status in statuses:
            response = operation["responses"].get(status)
            assert response is not None, (path, method, status)
            ref = response["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/Error", (path, method, status)
    # every POST, the token's, limits', a record's cancel and bulk included, and a schedule's PUT
    assert bodies == 17


def request_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The JSON request body's component of the POST at ``path``."""
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    found: dict[str, Any] = schema["components"]["schemas"][body["schema"]["$ref"].rsplit("/")[-1]]
    return found


def component(schema: dict[str, Any], ref: str) -> dict[str, Any]:
    found: dict[str, Any] = schema["components"]["schemas"][ref.rsplit("/")[-1]]
    return found


def test_what_the_server_refuses_blank_or_empty_is_documented_so(schema: dict[str, Any]) -> None:
    q = "/api/queues/{queue}/"
    admit = request_schema(schema, q + "admit/")["properties"]
    assert admit["request_id"]["minLength"] == 1
    assert "minLength" not in admit["payload"]  # an empty payload is a payload
    batch = request_schema(schema, q + "admit/batch/")["properties"]["items"]
    assert batch["minItems"] == 1
    assert component(schema, batch["items"]["$ref"])["properties"]["request_id"]["minLength"] == 1
    assert request_schema(schema, q + "claims/")["properties"]["owner"]["minLength"] == 1
    assert request_schema(schema, q + "claims/renew/")["properties"]["token"]["minLength"] == 1
    for batch_path in ("claims/renew/batch/", "claims/settle/batch/"):
        assert request_schema(schema, q + batch_path)["properties"]["items"]["minItems"] == 1
    token = request_schema(schema, "/api/token/")["properties"]
    assert token["username"]["minLength"] == token["password"]["minLength"] == 1
    assert request_schema(schema, "/api/dispatch/log/")["properties"]["key"]["minLength"] == 1
    ids = next(
        p for p in schema["paths"][q + "resolve/"]["get"]["parameters"] if p["name"] == "ids"
    )
    assert ids["schema"]["minItems"] == 1
    assert ids["schema"]["items"]["minLength"] == 1


def test_the_served_schema_names_the_api_and_its_version(api_root: Any, settings: Any) -> None:
    from importlib.metadata import version

    settings.SPECTACULAR_SETTINGS = {}  # a project that configures nothing
    info = api_root.get("/api/schema/", {"format": "json"}).json()["info"]
    assert info["title"] == "django-ledger API"
    assert info["version"] == version("django-task-ledger") != "0+unknown"


def test_the_task_result_path_ends_in_a_slash(schema: dict[str, Any]) -> None:
    assert "/api/queues/{queue}/results/{request_id}/" in schema["paths"]


def test_the_error_shape_is_one_object_with_a_stable_code(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    assert components["Error"]["required"] == ["error"]
    assert set(components["ErrorDetail"]["required"]) == {"code", "message", "details"}


def test_admission_documents_each_answer(schema: dict[str, Any]) -> None:
    admit = schema["paths"]["/api/queues/{queue}/admit/"]["post"]
    assert {"200", "201", "400", "409", "413", "503"} <= set(admit["responses"])
    headers = [p["name"] for p in admit["parameters"] if p["in"] == "header"]
    assert headers == ["Idempotency-Key"]


def test_listings_document_their_cursor(schema: dict[str, Any]) -> None:
    for path in ("/api/queues/{queue}/records/", "/api/queues/{queue}/quarantine/"):
        operation = schema["paths"][path]["get"]
        names = {p["name"] for p in operation["parameters"]}
        assert {"cursor", "limit"} <= names
        ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        page = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert set(page["properties"]) == {"next", "results"}


@pytest.mark.parametrize(
    "record",
    [
        Record("r1", "payload", State.PENDING, 1_000, created_at=900, updated_at=900),
        Record(
            "r2",
            "p\x00",
            State.CLAIMED,
            1_000,
            owner="w",
            attempts=2,
            fence=7,
            lease_until=5_000,
            created_at=900,
            updated_at=1_200,
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ),
    ],
)
def test_the_fast_representations_match_their_serializers(record: Record) -> None:
    assert record_data(record) == RecordSerializer(record).data
    for admission in (
        Admission(record.request_id, AdmissionStatus.DUPLICATE, None, record),
        Admission(record.request_id, AdmissionStatus.CONFLICT, "payload_differs"),
    ):
        assert admission_data(admission) == AdmissionSerializer(admission).data
    for settlement in (
        Settlement(SettlementStatus.SETTLED, record),
        Settlement(SettlementStatus.LOST, None, "superseded"),
    ):
        assert settlement_data(settlement) == SettlementSerializer(settlement).data


ROOT = Path(__file__).resolve().parents[2]
#: A project on another schema generator: DRF's own default schema class.
OTHER_SCHEMA_SETTINGS = """
from testproject.settings import *  # noqa: F403

REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
}
"""


def manage(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py`` under ``other_schema_settings`` (a process of its own: the
    schema classes are chosen when the views are imported)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "other_schema_settings",
        "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_view_annotates_with_the_ledgers_extend_schema() -> None:
    api = ROOT / "django_ledger" / "api"
    direct = [
        str(path.relative_to(api))
        for path in sorted(api.rglob("*.py"))
        if path.name != "schema.py" or path.parent != api
        if re.search(
            r"^from drf_spectacular\.utils import (\([^)]*|[^\n]*)\bextend_schema\b",
            path.read_text(),
            re.M,
        )
    ]
    assert direct == []


def test_the_projects_own_schema_class_is_left_alone(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    (tmp_path / "other_schema_settings.py").write_text(OTHER_SCHEMA_SETTINGS)
    check = manage(tmp_path, "check", "--tag", "django_ledger")
    assert check.returncode == 0, check.stderr
    assert "E042" not in check.stdout + check.stderr
    out = tmp_path / "schema.json"
    args = ("--validate", "--fail-on-warn", "--format", "openapi-json", "--file", str(out))
    spectacular = manage(tmp_path, "spectacular", *args)
    assert spectacular.returncode == 0, spectacular.stderr
    assert "warning" not in spectacular.stderr.lower(), spectacular.stderr
    # The ledger's views document themselves as they do on drf-spectacular's class.
    assert json.loads(out.read_text()) == schema
