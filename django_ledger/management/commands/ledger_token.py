"""``manage.py ledger_token USERNAME``: print a user's API token, creating it."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.api.user_tokens import UnknownUser, token_for_username

from ..base import LedgerCommand


class Command(LedgerCommand):
    help = gettext_lazy(
        "Print the API token of a user (for 'Authorization: Token <token>'), creating "
        "it if the user has none. --reset replaces it: the old token stops working."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help=gettext("the user whose token to print"))
        parser.add_argument(
            "--reset", action="store_true", help=gettext("make a new token, revoking the old one")
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        try:
            user, key, _ = token_for_username(username, reset=options["reset"])
        except UnknownUser:
            raise CommandError(
                gettext("no user is named %(username)r") % {"username": username}
            ) from None
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        if not user.is_active:
            self.stderr.write(
                gettext("warning: %(username)r is inactive; the API refuses its token")
                % {"username": username}
            )
        # The key alone on standard output, so that scripts can take it as it is.
        self.stdout.write(key)
