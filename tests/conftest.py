"""Hypothesis profiles for the test suite.

``--hypothesis-profile=crosshair`` runs the property tests with the CrossHair backend
(hypothesis-crosshair): inputs are found by symbolic execution instead of random
generation. ``make proofs`` runs the core's property tests that way.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("crosshair", backend="crosshair", deadline=None, max_examples=60)
