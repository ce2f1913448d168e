"""``python -m inr_enc.cli`` (torchrun runs it so): inr-fit."""

import sys

from . import main

sys.exit(main())
