"""The app's configuration: registers the system checks when Django is ready."""

from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "django_ledger"
    label = "django_ledger"
    verbose_name = "Ledger"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from .checks import register_checks

        register_checks()
