"""Test setup: Qt runs offscreen (no screen needed) and hypothesis stays quick on 2 cores."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "gradblocks", max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("gradblocks")
