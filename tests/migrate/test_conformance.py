"""Conformance: every registry name, call by call against the original library.

For each function, a generated corpus (``conformance_corpus``) of calls runs through the migrated
path (:class:`~codedag.migrate.execute.Executor`, device ``cpu``; ``cuda`` under ``pytest -m gpu``)
and through the library. Each call must be declared unsupported before its backend runs, or raise
the library's exception class, or return what the library returns within the tolerance table
(types, shapes, dtypes, layout, values; no output sharing memory with an input where the
library's does not; no input written). Hypothesis explores further combinations (CI runs a fixed
set; ``CONFORMANCE_EXAMPLES=200`` explores further). The counts are printed at the end of the
session:

    .venv/bin/python -m pytest tests/migrate/test_conformance.py -q
"""

from __future__ import annotations

import os

import pytest
from conformance_corpus import cases, covered, explore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migrate_support import TALLY, Case, conform

from codedag.migrate.registry import default_registry

NAMES = sorted(default_registry().names())
EXAMPLES = int(os.environ.get("CONFORMANCE_EXAMPLES", "6"))
"""Hypothesis draws per function (CI: 6, derandomized by the ``ci`` profile)."""
CORPUS_NAMES = sorted(covered() & set(NAMES))


def test_every_registry_name_has_a_corpus() -> None:
    missing = sorted(set(NAMES) - covered())
    assert not missing, f"no conformance corpus for {missing}"


def _run(name: str, label: str, case: Case, device: str) -> str | None:
    outcome, detail = conform(name, case, device)
    TALLY.add(name, label, outcome, detail)
    return f"[{label}] {detail}" if outcome == "failed" else None


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_corpus(name: str, device: str) -> None:
    failures = [f for label, case in cases(name) if (f := _run(name, label, case, device))]
    assert not failures, f"{name}: {len(failures)} cases differ:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize("name", CORPUS_NAMES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_explored(name: str, data: st.DataObject) -> None:
    label, case = data.draw(explore(name))
    failure = _run(name, label, case, "cpu")
    assert failure is None, f"{name}: {failure}"


def test_overlap_of_interleaved_views_is_answered_at_once() -> None:
    """Exact overlap of strided views is exponential in NumPy; the check bounds its work."""
    import numpy as np
    from migrate_support import call_within, shares_memory

    base = np.zeros((64, 64, 64), dtype=np.uint8)
    assert call_within(30, lambda: shares_memory(base[::3, 1::5, ::7], base[1::2, ::3, 2::4]))
    assert not shares_memory(base[:32], base[32:])
    assert shares_memory(base[5:9], base[8:])
    assert not shares_memory(base, np.zeros(4))
