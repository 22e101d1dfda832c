"""The test project's management commands: ``ledger_demo``."""
