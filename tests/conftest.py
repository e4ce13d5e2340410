"""Test setup: Qt runs offscreen (no screen needed) and hypothesis stays quick on 2 cores.

``HYPOTHESIS_PROFILE=thorough python -m pytest`` runs the property tests with many more examples.
"""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import HealthCheck, settings

import app  # noqa: F401  (before any Qt import: guards None/True/False refcounts, PySide6 6.12)

_quiet = [HealthCheck.too_slow]
settings.register_profile("gradblocks", max_examples=40, deadline=None,
                          suppress_health_check=_quiet)
settings.register_profile("thorough", max_examples=600, deadline=None,
                          suppress_health_check=_quiet)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gradblocks"))
