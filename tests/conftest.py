"""Hypothesis profiles for the test suite.

``--hypothesis-profile=crosshair`` runs the property tests with the CrossHair backend
(hypothesis-crosshair): inputs are found by symbolic execution instead of random
generation. ``make proofs`` runs the core's property tests that way.
"""

from __future__ import annotations

import os

from hypothesis import settings

# The core's icontract postconditions are off by default and read at import: the whole
# suite runs with them on (before any test module imports the package), and so do the
# interpreters it starts, unless a test sets the variable itself.
os.environ["TOOL_CHECKPOINT_CONTRACTS"] = "1"

settings.register_profile("crosshair", backend="crosshair", deadline=None, max_examples=60)
