"""``manage.py ledger_token USERNAME``: print a user's API token, creating it."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import modify_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def ledger_token(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ledger_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def authenticates(key: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/queues/").status_code == 200


@pytest.fixture
def user() -> User:
    return User.objects.create_user("ada", "ada@example.com", None)


def test_it_prints_the_users_token_alone_making_it_once(user: User) -> None:
    out, err = ledger_token("ada")
    key = out.strip()
    assert out == key + "\n"
    assert err == ""
    assert Token.objects.get(user=user).key == key
    assert authenticates(key)
    assert ledger_token("ada")[0] == out
    assert Token.objects.filter(user=user).count() == 1


def test_it_prints_an_existing_token(user: User) -> None:
    token = Token.objects.create(user=user)
    assert ledger_token("ada")[0].strip() == token.key


def test_reset_makes_a_new_token_and_revokes_the_old(user: User) -> None:
    old = ledger_token("ada")[0].strip()
    new = ledger_token("ada", "--reset")[0].strip()
    assert new != old
    assert Token.objects.get(user=user).key == new
    assert authenticates(new)
    assert not authenticates(old)


def test_reset_of_a_user_without_a_token_makes_one(user: User) -> None:
    key = ledger_token("ada", "--reset")[0].strip()
    assert Token.objects.get(user=user).key == key


def test_an_unknown_user_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="no user is named 'nobody'"):
        ledger_token("nobody")
    assert not Token.objects.exists()


def test_an_inactive_user_gets_its_token_and_a_warning(user: User) -> None:
    user.is_active = False
    user.save()
    out, err = ledger_token("ada")
    assert Token.objects.get(user=user).key == out.strip()
    assert "inactive" in err
    assert not authenticates(out.strip())


@modify_settings(INSTALLED_APPS={"remove": "rest_framework.authtoken"})
def test_without_the_token_app_it_says_what_is_missing(user: User) -> None:
    with pytest.raises(CommandError, match=r"rest_framework\.authtoken"):
        ledger_token("ada")
