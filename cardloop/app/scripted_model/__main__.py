"""Run the scripted model alone (see cli.py)."""

from cardloop.app.scripted_model.cli import main

raise SystemExit(main())
