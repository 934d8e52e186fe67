"""The suite's hypothesis profiles: CI draws a fixed set of examples and replays no saved failure,
whatever a test's own settings; nightly draws many more."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from hypothesis_profiles import NIGHTLY_FACTOR, chosen, examples, nondeterminism

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def profile() -> Iterator[None]:
    """Lets a test load another profile; the run's own is loaded again afterwards."""
    previous = settings.get_current_profile_name()
    yield
    settings.load_profile(previous)


@pytest.mark.parametrize(
    ("environ", "name"),
    [
        ({}, "default"),
        ({"CI": "true"}, "ci"),
        ({"CI": ""}, "default"),
        ({"CI": "1", "HYPOTHESIS_PROFILE": "nightly"}, "nightly"),
        ({"HYPOTHESIS_PROFILE": "nightly"}, "nightly"),
    ],
)
def test_the_profile_follows_ci_and_hypothesis_profile(environ: dict, name: str) -> None:
    assert chosen(environ) == name


def test_own_settings_keep_the_ci_profiles_determinism(profile: None) -> None:
    """A settings object created under the ci profile that names neither field inherits
    ``derandomize=True`` and no database."""
    settings.load_profile("ci")
    assert settings.default.derandomize
    assert settings.default.database is None
    own = settings(max_examples=examples(7), deadline=None)
    assert own.max_examples == 7
    assert own.derandomize
    assert own.database is None


def test_nightly_draws_more_random_examples(profile: None) -> None:
    settings.load_profile("nightly")
    assert examples(10) == 10 * NIGHTLY_FACTOR
    assert settings.default.max_examples == 100 * NIGHTLY_FACTOR
    assert not settings.default.derandomize


def test_tests_that_would_draw_differently_are_named(profile: None) -> None:
    settings.load_profile("ci")

    @settings(max_examples=2)
    @given(st.integers())
    def fixed(x: int) -> None: ...

    @settings(max_examples=2, derandomize=False)
    @given(st.integers())
    def random(x: int) -> None: ...

    @settings(max_examples=2, database=InMemoryExampleDatabase())
    @given(st.integers())
    def replays(x: int) -> None: ...

    assert nondeterminism(fixed) is None
    assert nondeterminism(random) == "derandomize=False"
    assert nondeterminism(replays) == "an example database (InMemoryExampleDatabase)"
    assert nondeterminism(test_nightly_draws_more_random_examples) is None


def test_ci_profile_is_active_and_derandomized_when_ci_is_set(
    request: pytest.FixtureRequest,
) -> None:
    """Where CI is set (in CI, or in the pytest this test starts with CI=1 outside it): the ci
    profile is loaded, the shared settings objects inherited it, every collected hypothesis test
    is deterministic."""
    if not os.environ.get("CI") or os.environ.get("HYPOTHESIS_PROFILE"):
        env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
        env["CI"] = "1"
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k",
             "ci_profile_is_active"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
        assert "1 passed" in run.stdout
        return
    from migrate_support import FEW, PROPS, SETTINGS

    assert settings.get_current_profile_name() == "ci"
    for shared in (settings.default, PROPS, FEW, SETTINGS):
        assert shared.derandomize
        assert shared.database is None
    undetermined = [
        f"{item.nodeid}: {reason}"
        for item in request.session.items
        if (reason := nondeterminism(getattr(item, "obj", None)))
    ]
    assert not undetermined
