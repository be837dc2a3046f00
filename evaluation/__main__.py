"""Command line: ``python -m evaluation run|...``. See ``python -m evaluation --help``."""

from evaluation.cli.main import main

raise SystemExit(main())
