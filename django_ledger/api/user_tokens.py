"""Users' API tokens (``rest_framework.authtoken``): what ``/api/token/`` and ``ledger_token`` hand out.

A user has at most one token; asking again answers the same one until it is reset.
The token model is imported only when a token is asked for, so the API's URLs load
(and ``manage.py check`` can say what is missing, ``django_ledger.E041``) in a project
that left ``rest_framework.authtoken`` out of ``INSTALLED_APPS``.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

__all__ = ["UnknownUser", "token_for_username", "user_token"]


class UnknownUser(LookupError):
    """No user has the username asked for."""


def user_token(user: Any, *, reset: bool = False) -> tuple[str, bool]:
    """Return ``user``'s token key and whether it was made now; ``reset`` replaces it."""
    if not apps.is_installed("rest_framework.authtoken"):
        raise ImproperlyConfigured(
            "API tokens need 'rest_framework.authtoken' in INSTALLED_APPS (and its migrations)"
        )
    from rest_framework.authtoken.models import Token

    with transaction.atomic():
        if reset:
            Token.objects.filter(user=user).delete()
        token, created = Token.objects.get_or_create(user=user)
    return str(token.key), created


def token_for_username(username: str, *, reset: bool = False) -> tuple[Any, str, bool]:
    """Return the user named ``username``, its token key and whether the key is new."""
    model = get_user_model()
    try:
        user = model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise UnknownUser(username) from None
    key, created = user_token(user, reset=reset)
    return user, key, created
