"""Fixtures of the REST API tests: users with ledger permissions, clients, a ledger.

Test modules register them with ``pytest_plugins = ["tests.support.api_fixtures"]``. Plugin
fixtures are visible to the whole session, so every name here starts with ``api_``
and none is autouse. Each one points ``LEDGER`` at the test's own namespace (ledger
and dispatch registry), whose keys the ``namespace`` fixture deletes afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from rest_framework.test import APIClient

from django_ledger import Ledger, get_ledger
from django_ledger.permissions import ACTIONS
from tests.support.api_helpers import token_client


def permission(action: str) -> Permission:
    """Return the model permission of a ledger action, creating it if migrations did not."""
    codename = ACTIONS[action]
    model = codename.split("_", 1)[1]
    content_type, _ = ContentType.objects.get_or_create(app_label="django_ledger", model=model)
    found = Permission.objects.filter(
        content_type__app_label="django_ledger", codename=codename
    ).first()
    if found is not None:
        return found
    return Permission.objects.create(
        content_type=content_type, codename=codename, name=f"Can {action} ({codename})"
    )


@pytest.fixture
def api_namespace(settings: Any, namespace: str) -> str:
    """Point LEDGER (and its dispatch registry) at the test's own namespace.

    Every client fixture below depends on it, so API calls never touch another
    test's keys, and the ``namespace`` fixture deletes them afterwards.
    """
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
    }
    return namespace


@pytest.fixture
def api_ledger(api_namespace: str) -> Ledger:
    """The ``default`` queue's ledger, as the API sees it."""
    return get_ledger("default")


@pytest.fixture
def api_make_user(db: None, api_namespace: str) -> Callable[..., User]:
    """Build an active user holding the permissions of the given ledger actions."""
    counter = iter(range(1, 1_000_000))

    def build(
        *actions: str, superuser: bool = False, groups: tuple[str, ...] = (), **extra: Any
    ) -> User:
        name = f"user{next(counter)}"
        # No password (no hashing: fast); session tests log in with force_login.
        if superuser:
            user = User.objects.create_superuser(name, f"{name}@example.com", None, **extra)
        else:
            user = User.objects.create_user(name, f"{name}@example.com", None, **extra)
        user.user_permissions.add(*(permission(action) for action in actions))
        for group in groups:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
        return user

    return build


@pytest.fixture
def api_client_for(api_make_user: Callable[..., User]) -> Callable[..., APIClient]:
    """Build a token-authenticated client of a new user holding ``actions``."""

    def build(*actions: str, **kwargs: Any) -> APIClient:
        return token_client(api_make_user(*actions, **kwargs))

    return build


@pytest.fixture
def api_root(api_make_user: Callable[..., User]) -> APIClient:
    """A client of a superuser: every action on every queue."""
    return token_client(api_make_user(superuser=True))


@pytest.fixture
def api_anonymous(db: None, api_namespace: str) -> Iterator[APIClient]:
    yield APIClient()
