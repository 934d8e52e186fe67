"""The suite's hypothesis profiles, which one a run uses, and what makes a test deterministic.

* ``ci``: a fixed set of examples (derandomized: seeded from each test's source) and no example
  database, so a run is repeatable and cannot replay a failure found elsewhere. Loaded when the
  ``CI`` environment variable is set.
* ``nightly``: random examples, :data:`NIGHTLY_FACTOR` times as many (``HYPOTHESIS_PROFILE=nightly
  bin/test tests/backends``), for contributors and scheduled jobs hunting rare differences.
* ``default``: hypothesis's own, random examples; local failures are replayed from
  ``.hypothesis/``.

``HYPOTHESIS_PROFILE`` names the profile and wins over ``CI``. A test's own ``@settings(...)``
inherits every field it does not name from the profile loaded when the settings object is
created (tests/conftest.py loads it before any test module is imported), so explicit settings
must not name ``derandomize`` or ``database``; their example counts go through :func:`examples`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import settings

PROFILE_ENV = "HYPOTHESIS_PROFILE"
NIGHTLY_FACTOR = 20
"""How many times the examples of the other profiles a nightly run draws."""


def register() -> None:
    """Register ``ci`` and ``nightly`` (idempotent)."""
    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    settings.register_profile(
        "nightly",
        derandomize=False,
        max_examples=100 * NIGHTLY_FACTOR,
        deadline=None,
        print_blob=True,
    )


def chosen(environ: Mapping[str, str]) -> str:
    """The profile a run with these environment variables uses."""
    named = environ.get(PROFILE_ENV, "").strip()
    if named:
        return named
    return "ci" if environ.get("CI") else "default"


def examples(count: int) -> int:
    """A test's own example count under the loaded profile (scaled up for ``nightly``)."""
    if settings.get_current_profile_name() == "nightly":
        return count * NIGHTLY_FACTOR
    return count


def nondeterminism(test: Any) -> str | None:
    """Why a collected test function would not draw the same examples on every run (a
    hypothesis test that is not derandomized, or that reads an example database: a failure saved
    by an earlier run would be replayed); ``None`` for a deterministic one (an explicit ``@seed``
    is) and for tests that are not hypothesis tests."""
    if not getattr(test, "is_hypothesis_test", False):
        return None
    if getattr(test, "_hypothesis_internal_use_seed", None) is not None:
        return None
    used = getattr(test, "_hypothesis_internal_use_settings", None) or settings.default
    if not used.derandomize:
        return "derandomize=False"
    if used.database is not None:
        return f"an example database ({type(used.database).__name__})"
    return None
