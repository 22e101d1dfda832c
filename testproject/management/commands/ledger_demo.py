"""``manage.py ledger_demo``: migrate, an admin user, seeded queues, and a dev server.

The test project's (``scripts/demo.sh`` runs it), not the installed app's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_ledger.conf import get_ledger, ledger_settings
from django_ledger.core.errors import LedgerError
from testproject.demo import ensure_admin, kept_password, seed_demo

STATS = ("pending_due", "pending_later", "claimed", "completed", "failed", "dead", "quarantined")


class Command(BaseCommand):
    help = (
        "Run the demo: migrate the database, create (or reset) the superuser 'admin' with a "
        "new random password (or the one kept in --password-file), seed every configured queue once with records in every state "
        "(touching no other record), print each queue's counters and the demo's records, "
        "then serve the admin on 127.0.0.1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--port", type=int, default=8000, help="port to serve on (default 8000)"
        )
        parser.add_argument(
            "--no-serve", action="store_true", help="seed and print, without starting the server"
        )
        parser.add_argument(
            "--password-file",
            metavar="PATH",
            help="keep the admin's password in this file: the first run writes a new one "
            "there, later runs set and print the same one (default: a new one every run)",
        )
        parser.add_argument(
            "--skip",
            action="append",
            default=[],
            metavar="QUEUE",
            help="leave this queue unseeded (a task queue a worker serves); repeatable",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        port = options["port"]
        if not 1 <= port <= 65535:
            raise CommandError(f"--port must be from 1 to 65535, got {port}")
        call_command("migrate", interactive=False, verbosity=0)
        kept = ""
        if options["password_file"]:
            path = Path(options["password_file"])
            try:
                password, made = kept_password(path)
            except (OSError, UnicodeError) as exc:
                raise CommandError(f"could not use --password-file {path}: {exc}") from exc
            kept = f" ({'new, kept' if made else 'kept'} in {path}: delete it for a new one)"
            ensure_admin("admin", password)
        else:
            password = ensure_admin("admin")
        try:
            for name in ledger_settings.queue_names:
                if name in options["skip"]:
                    self.stdout.write(f"queue {name}: not seeded (its worker runs tasks there)")
                    continue
                ledger = get_ledger(name)
                seed = seed_demo(ledger)
                counts = ledger.stats().as_dict()
                figures = " ".join(f"{key}={counts[key]}" for key in STATS)
                done = "seeded" if seed.seeded else "seeded before, left as it is"
                self.stdout.write(f"queue {name}: {done}: {figures}")
                # Each of the demo's records as the queue holds it now; nothing else.
                for item in seed.records:
                    line = f"  {item.request_id}: {item.state}"
                    if item.record is not None:
                        line += f", attempts {item.record.attempts}, fence {item.record.fence}"
                        if item.record.owner:
                            line += f", owner {item.record.owner}"
                    self.stdout.write(line)
        except (ImproperlyConfigured, LedgerError, RuntimeError) as exc:
            raise CommandError(f"could not seed the demo: {exc}") from exc
        url = f"http://127.0.0.1:{port}/admin/"
        self.stdout.write(f"admin login: user admin, password {password}{kept}")
        self._print_api_line(port)
        if options["no_serve"]:
            self.stdout.write(
                f"seeded; serve it with: manage.py runserver 127.0.0.1:{port}, then open {url}"
            )
            return
        self.stdout.write(f"serving {url} (Ctrl-C to stop)")
        # No autoreloader: it would run this command, and seed again, in a child process.
        call_command("runserver", f"127.0.0.1:{port}", use_reloader=False)

    def _print_api_line(self, port: int) -> None:
        """Print a working ``curl`` line with the admin's API token (when the API is on)."""
        try:
            from django_ledger.api.user_tokens import token_for_username

            _, key, _ = token_for_username("admin")
        except (ImportError, ImproperlyConfigured, LookupError):
            return
        self.stdout.write(
            f'api: curl -H "Authorization: Token {key}" http://127.0.0.1:{port}/api/queues/'
            "  (more: manage.py ledger_token admin; 'The REST API' in the django-ledger docs)"
        )
