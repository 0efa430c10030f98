"""``python -m commsim``: the same as the ``commsim`` command."""

from commsim.cli import main

raise SystemExit(main())
