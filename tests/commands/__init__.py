"""The management commands: export, import, repair, reshard, tokens and the demo."""
