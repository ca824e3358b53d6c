"""``python -m loo_adapt.cli``: the ``loo-adapt`` tool."""

import sys

from loo_adapt.cli import main

sys.exit(main())
