"""What the admin's tests start from: the ``default`` ledger, a superuser, staff users.

``pytest_plugins = ["tests.support.admin_fixtures"]`` in a test module gives it
``admin_ledger``, ``admin_user`` and ``login_as``; a module's own fixture of the same name
(another ``LEDGER`` setting) takes their place there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client

from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger


@pytest.fixture
def admin_ledger(namespace: str, settings: Any) -> Ledger:
    """The ``default`` queue's ledger in the test's namespace.

    Passwords hash fast (the default hasher is slow on purpose): a browser test's one
    log-in takes no time.
    """
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return get_ledger("default")


@pytest.fixture
def admin_user(django_user_model: Any) -> Any:
    """A superuser without a password to hash (hashing is slow on purpose)."""
    user = django_user_model(username="admin", is_staff=True, is_superuser=True)
    user.set_unusable_password()
    user.save()
    return user


@pytest.fixture
def login_as(django_user_model: Any) -> Callable[..., Client]:
    """Return a client logged in as a new user with the given permission codenames.

    ``staff`` (default true), ``superuser`` (default false) and the names of ``groups``
    to put the user in; a codename the models do not declare fails the test.
    """
    made = 0

    def build(
        *codenames: str, staff: bool = True, superuser: bool = False, groups: tuple[str, ...] = ()
    ) -> Client:
        nonlocal made
        made += 1
        user = django_user_model(username=f"user{made}", is_staff=staff, is_superuser=superuser)
        user.set_unusable_password()
        user.save()
        perms = Permission.objects.filter(
            content_type__app_label="django_ledger", codename__in=codenames
        )
        assert perms.count() == len(codenames), "a codename the models do not declare"
        user.user_permissions.add(*perms)
        for name in groups:
            user.groups.add(Group.objects.get_or_create(name=name)[0])
        client = Client()
        client.force_login(user)
        return client

    return build
