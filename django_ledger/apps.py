"""The app's configuration: registers the system checks when Django is ready."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class LedgerConfig(AppConfig):
    name = "django_ledger"
    label = "django_ledger"
    verbose_name = gettext_lazy("Ledger")
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from .checks import register_checks

        register_checks()
