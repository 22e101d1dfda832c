"""The admin's tests start from the fixtures of ``tests/support/admin_fixtures.py``."""

from tests.support.admin_fixtures import admin_ledger, admin_user, login_as

__all__ = ["admin_ledger", "admin_user", "login_as"]
