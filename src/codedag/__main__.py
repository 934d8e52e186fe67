"""``python -m codedag`` runs the CLI."""

from codedag.cli.main import main

raise SystemExit(main())
