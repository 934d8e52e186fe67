"""Fixtures of the migration tests: the shared helpers live in ``migrate_support`` (this folder is
on ``sys.path`` for every test below it)."""
