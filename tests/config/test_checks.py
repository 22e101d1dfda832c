"""System checks: each id, with its hint, and ``manage.py check`` failing on each error."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import Error, run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import modify_settings, override_settings

from django_ledger.checks import check_rangefilter, check_redis, check_settings
from django_ledger.conf import reset_connections
from tests.support.cluster_server import redis_cluster
from tests.support.redis_server import RedisServer, find_binary, free_port

MEMORY = "django_ledger.core.dispatch.MemoryDispatchRegistry"
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "redis": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    },
}


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def run_check(**options: Any) -> str:
    out = io.StringIO()
    call_command("check", stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


ERRORS: list[tuple[str, Any]] = [
    ("E001", ["not", "a", "dict"]),
    ("E002", {"QUEUE": {"default": {}}}),
    ("E002", {"DEFAULTS": {"max_attempts": 3}}),
    ("E002", {"QUEUES": {"default": {"RETRIES": 3}}}),
    ("E002", {"DEFAULTS": {"GROUPS": ["ops"]}}),
    ("E002", {"DISPATCH": {"BACKEND": MEMORY, "URL": "redis://"}}),
    ("E003", {"QUEUES": ["default"]}),
    ("E003", {"QUEUES": {}}),
    ("E003", {"QUEUES": {"default": 3}}),
    ("E003", {"DEFAULTS": 3}),
    ("E003", {"DISPATCH": "memory"}),
    ("E003", {"API": ["PAGE_SIZE"]}),
    ("E004", {"QUEUES": {"my queue": {}}}),
    ("E004", {"QUEUES": {"a{b}": {}}}),
    ("E005", {"NAMESPACE": "ledger prod"}),
    ("E005", {"DISPATCH": {"BACKEND": MEMORY, "NAMESPACE": ""}}),
    ("E006", {"QUEUES": {"default": {"GROUPS": "operators"}}}),
    ("E006", {"QUEUES": {"default": {"GROUPS": ["operators", 7]}}}),
    ("E010", {"CONNECTION": 6379}),
    ("E010", {"CONNECTION": {"HOST": "localhost"}}),
    ("E011", {"CONNECTION": "ledger-cache"}),
    ("E012", {"CONNECTION": "default"}),
    ("E013", {"CONNECTION": "http://127.0.0.1:6380/0"}),
    ("E013", {"CONNECTION": "redis://127.0.0.1:port/0"}),
    ("E013", {"CONNECTION": "redis://127.0.0.1:6391/abc"}),
    ("E013", {"CONNECTION": "redis", "DISPATCH": {"BACKEND": MEMORY, "CONNECTION": "redis://h/x"}}),
    ("E013", {"CONNECTION": "redis", "DISPATCH": {"CONNECTION": "tcp://127.0.0.1:1"}}),
    ("E014", {"CONNECTION": {"CLUSTER": []}}),
    ("E014", {"CONNECTION": {"CLUSTER": ["10.0.0.1"]}}),
    ("E014", {"CONNECTION": {"CLUSTER": "10.0.0.1:7000"}}),
    ("E015", {"TIMEOUTS": {"CONNECT": 0}}),
    ("E015", {"TIMEOUTS": {"SOCKET": -1}}),
    ("E015", {"TIMEOUTS": {"SOCKET": 3601}}),
    ("E015", {"TIMEOUTS": {"SOCKET": timedelta(hours=2)}}),
    ("E015", {"TIMEOUTS": {"CONNECT": "5s"}}),
    ("E015", {"TIMEOUTS": {"CONNECT": None}}),
    ("E015", {"TIMEOUTS": {"SOCKET": float("nan")}}),
    ("E015", {"TIMEOUTS": {"SOCKET": True}}),
    ("E002", {"TIMEOUTS": {"READ": 5}}),
    ("E003", {"TIMEOUTS": 5}),
    ("E020", {"DISPATCH": {"BACKEND": "django_ledger.core.dispatch.Nope"}}),
    ("E020", {"DISPATCH": {"BACKEND": None}}),
    ("E021", {"DISPATCH": {"BACKEND": "django_ledger.core.Ledger"}}),
    ("E022", {"DISPATCH": {"BACKEND": MEMORY, "NODE_ID": " "}}),
    ("E030", {"DEFAULTS": {"MAX_PAYLOAD_BYTES": 0}}),
    ("E030", {"DEFAULTS": {"MAX_PAYLOAD_BYTES": 1024**3}}),
    ("E030", {"QUEUES": {"default": {"MAX_RECORDS": -1}}}),
    ("E030", {"QUEUES": {"default": {"MAX_ATTEMPTS": 0}}}),
    ("E030", {"QUEUES": {"default": {"MAX_ATTEMPTS": "3"}}}),
    ("E030", {"QUEUES": {"default": {"RETENTION": timedelta(seconds=-1)}}}),
    ("E030", {"QUEUES": {"default": {"LEASE": 0}}}),
    ("E030", {"QUEUES": {"default": {"LEASE": "30s"}}}),
    ("E030", {"QUEUES": {"default": {"OPTIMIZED": "yes"}}}),
    ("E030", {"QUEUES": {"default": {"SHARDS": 0}}}),
    ("E030", {"QUEUES": {"default": {"SHARDS": 65}}}),
    ("E030", {"QUEUES": {"default": {"SHARDS": "3"}}}),
    ("E030", {"DISPATCH": {"BACKEND": MEMORY, "TTL": 0}}),
    ("E030", {"DISPATCH": {"BACKEND": MEMORY, "TTL": 1.5}}),
]


def base(**config: Any) -> dict[str, Any]:
    """A valid LEDGER (no Redis needed) with ``config`` over it."""
    return {"CONNECTION": "redis", "DISPATCH": {"BACKEND": MEMORY}, **config}


@pytest.mark.parametrize(
    ("id_", "ledger"), ERRORS, ids=[f"{i}-{n}" for n, (i, _) in enumerate(ERRORS)]
)
def test_each_error_has_its_id_and_a_hint_and_fails_check(id_: str, ledger: Any) -> None:
    config = base(**ledger) if isinstance(ledger, dict) else ledger
    with override_settings(LEDGER=config, CACHES=CACHES):
        messages = check_settings()
        assert ids(messages) == [f"django_ledger.{id_}"], messages
        error = messages[0]
        assert isinstance(error, Error) and error.hint
        assert error.obj and str(error.obj).startswith("LEDGER")
        with pytest.raises(SystemCheckError, match=f"django_ledger.{id_}"):
            run_check()


def test_a_valid_setting_passes() -> None:
    config = base(
        NAMESPACE="prod",
        DEFAULTS={"MAX_ATTEMPTS": 5, "LEASE": timedelta(minutes=2), "RETENTION": 0},
        QUEUES={"default": None, "emails": {"GROUPS": ["mailers"], "OPTIMIZED": False}},
        API={"PAGE_SIZE": 50},
        TIMEOUTS={"CONNECT": 0.5, "SOCKET": timedelta(minutes=1)},
    )
    config["DISPATCH"] = {"BACKEND": MEMORY, "TTL": 3600, "NODE_ID": "web-1", "NAMESPACE": "cron"}
    with override_settings(LEDGER=config, CACHES=CACHES):
        assert check_settings() == []
        assert "no issues" in run_check()
    for connection in ("redis://h:6379/0", "rediss://u:p@h:6380/1", "unix:///run/redis.sock"):
        with override_settings(LEDGER=base(CONNECTION=connection), CACHES=CACHES):
            assert check_settings() == []
    with override_settings(LEDGER=base(CONNECTION={"CLUSTER": ["10.0.0.1:7000", "10.0.0.2:7000"]})):
        assert check_settings() == []


def test_the_test_project_passes() -> None:
    assert "no issues" in run_check()
    assert "no issues" in run_check(tags=["django_ledger"])


def test_several_problems_are_all_reported() -> None:
    config = base(
        QUEUES={"default": {"MAX_ATTEMPTS": 0, "LEASE": -5}, "bad name": {}},
        CONNECTION="ftp://x",
    )
    with override_settings(LEDGER=config, CACHES=CACHES):
        assert sorted(ids(check_settings())) == [
            "django_ledger.E004",
            "django_ledger.E013",
            "django_ledger.E030",
            "django_ledger.E030",
        ]


def test_each_bad_timeout_names_its_key_and_the_range() -> None:
    with override_settings(LEDGER=base(TIMEOUTS={"SOCKET": "10", "CONNECT": 0}), CACHES=CACHES):
        messages = check_settings()
    assert [(m.id, m.obj, m.msg) for m in messages] == [
        (
            "django_ledger.E015",
            "LEDGER['TIMEOUTS']['CONNECT']",
            "CONNECT must be more than 0 and at most 3,600 seconds, got 0.",
        ),
        (
            "django_ledger.E015",
            "LEDGER['TIMEOUTS']['SOCKET']",
            "SOCKET must be a timedelta or a number of seconds, got '10'.",
        ),
    ]
    assert "default 5" in str(messages[0].hint) and "default 10" in str(messages[1].hint)


@modify_settings(INSTALLED_APPS={"remove": "rangefilter"})
def test_rangefilter_missing() -> None:
    messages = check_rangefilter()
    assert ids(messages) == ["django_ledger.E040"]
    assert "rangefilter" in messages[0].hint
    with pytest.raises(SystemCheckError, match=r"django_ledger\.E040"):
        run_check()


def test_rangefilter_present() -> None:
    assert check_rangefilter() == []


# -- deployment: Redis itself ---------------------------------------------------------


def deploy_ids(url: str, **dispatch: Any) -> list[Any]:
    with override_settings(LEDGER={"CONNECTION": url, "DISPATCH": dispatch or {"BACKEND": MEMORY}}):
        return check_redis()


def test_deploy_reports_the_server_and_its_version(redis_server: RedisServer) -> None:
    messages = deploy_ids(redis_server.url)
    info = [m for m in messages if m.id == "django_ledger.I001"]
    # What the binary says of itself: "Redis server v=7.0.15 ..." or "Valkey server v=8.1.8 ...".
    banner = subprocess.run(
        [find_binary(), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()
    name, version = banner[0], banner[2].removeprefix("v=")
    assert len(info) == 1 and info[0].msg.startswith(f"{name} {version} answers at ")


def test_deploy_warns_when_nothing_persists(
    redis_server: RedisServer, fresh_redis: RedisServer
) -> None:
    # The suite's Redis runs with no AOF and no RDB save points.
    assert "django_ledger.W002" in ids(deploy_ids(redis_server.url))
    # AOF on: fine.
    assert "django_ledger.W002" not in ids(deploy_ids(fresh_redis.url))
    # AOF off but RDB snapshots: fine too.
    with fresh_redis.client() as client:
        client.config_set("appendonly", "no")
        client.config_set("save", "900 1")
    assert "django_ledger.W002" not in ids(deploy_ids(fresh_redis.url))


def test_deploy_warns_on_an_evicting_redis(fresh_redis: RedisServer) -> None:
    assert "django_ledger.W001" not in ids(deploy_ids(fresh_redis.url))
    with fresh_redis.client() as client:
        client.config_set("maxmemory-policy", "allkeys-lru")
    messages = deploy_ids(fresh_redis.url)
    warning = next(m for m in messages if m.id == "django_ledger.W001")
    assert "allkeys-lru" in warning.msg and "noeviction" in warning.hint


def test_deploy_warns_about_a_memory_dispatch_registry(redis_server: RedisServer) -> None:
    assert "django_ledger.W003" in ids(deploy_ids(redis_server.url))
    default = deploy_ids(redis_server.url, NAMESPACE="kaal")
    assert "django_ledger.W003" not in ids(default)


def test_deploy_checks_a_separate_dispatch_connection(
    redis_server: RedisServer, fresh_redis: RedisServer
) -> None:
    messages = deploy_ids(redis_server.url, CONNECTION=fresh_redis.url)
    where = [m.obj for m in messages if m.id == "django_ledger.I001"]
    assert where == ["LEDGER['CONNECTION']", "LEDGER['DISPATCH']['CONNECTION']"]


def test_deploy_fails_when_redis_is_unreachable(redis_server: RedisServer) -> None:
    url = f"redis://user:secret@127.0.0.1:{free_port()}/0"
    messages = deploy_ids(url)
    assert ids(messages) == ["django_ledger.W003", "django_ledger.E050"]
    assert "unreachable" in messages[1].msg and "secret" not in messages[1].msg
    config = {"CONNECTION": url, "DISPATCH": {"BACKEND": MEMORY}}
    with (
        override_settings(LEDGER=config),
        pytest.raises(SystemCheckError, match=r"django_ledger\.E050"),
    ):
        run_check(deploy=True)
    # Without --deploy, Redis is not contacted.
    with override_settings(LEDGER=config):
        assert "no issues" in run_check()


def test_deploy_skips_redis_when_the_setting_is_wrong() -> None:
    with override_settings(LEDGER={"CONNECTION": 5}):
        assert check_redis() == []


def test_deploy_fails_when_a_cluster_is_unreachable() -> None:
    config = {
        "CONNECTION": {"CLUSTER": [f"127.0.0.1:{free_port()}"]},
        "TIMEOUTS": {"CONNECT": 0.5, "SOCKET": 0.5},
        "DISPATCH": {"BACKEND": MEMORY},
    }
    with override_settings(LEDGER=config):
        messages = check_redis()
    assert ids(messages) == ["django_ledger.W003", "django_ledger.E050"]
    assert "unreachable" in messages[1].msg


def test_deploy_reaches_every_node_of_a_cluster() -> None:
    with redis_cluster(2) as nodes:
        config = {
            "CONNECTION": {"CLUSTER": [f"127.0.0.1:{nodes[0].port}"]},
            "DISPATCH": {"BACKEND": MEMORY},
        }
        with override_settings(LEDGER=config):
            messages = check_redis()
    answers = sorted(
        m.msg.split(" answers at ")[1].split(" ")[0]
        for m in messages
        if m.id == "django_ledger.I001"
    )
    assert answers == sorted(f"127.0.0.1:{node.port}" for node in nodes)


@pytest.mark.parametrize(
    ("id_", "ledger"),
    [
        ("E020", base(DISPATCH={"BACKEND": "checks_broken_module.Registry"})),
        ("E080", base(QUEUES={"raw": {"HANDLER": "checks_broken_module.handle"}})),
    ],
)
def test_a_module_that_raises_at_import_is_reported_not_raised(
    id_: str, ledger: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "checks_broken_module.py").write_text("raise KeyError('NEEDS_A_SETTING')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "checks_broken_module", raising=False)

    with override_settings(LEDGER=ledger, CACHES=CACHES):
        found = [m for m in run_checks(tags=["django_ledger"]) if m.id == f"django_ledger.{id_}"]
        with pytest.raises(SystemCheckError, match=f"django_ledger.{id_}"):
            run_check()

    [message] = found
    assert "KeyError: 'NEEDS_A_SETTING'" in message.msg and message.hint


@pytest.mark.parametrize("name", ["ledger_worker", "ledger_scheduler", "ledger_relay"])
def test_the_ledgers_commands_check_the_ledger_and_not_the_projects_urls(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker starts on the ledger's checks; a broken URLconf is the web server's to find."""
    from django.core.management import load_command_class

    (tmp_path / "checks_broken_urls.py").write_text("raise KeyError('A_VIEW_SETTING')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "checks_broken_urls", raising=False)
    command = load_command_class("django_ledger", name)
    # As BaseCommand.execute runs them: every check for "__all__", else these tags'.
    tags = None if command.requires_system_checks == "__all__" else command.requires_system_checks
    with override_settings(ROOT_URLCONF="checks_broken_urls"):
        with pytest.raises(KeyError, match="A_VIEW_SETTING"):
            run_check()  # manage.py check imports the URLconf
        command.check(tags=tags, display_num_errors=False)  # the command does not
    with (
        override_settings(LEDGER=base(QUEUES=["default"]), CACHES=CACHES),
        pytest.raises(SystemCheckError, match=r"django_ledger\.E003"),
    ):
        command.check(tags=tags)
