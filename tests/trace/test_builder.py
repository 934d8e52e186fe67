"""DAG building details: argument summaries."""

from __future__ import annotations

import random

import pytest

from codedag.trace.builder import short_text
from codedag.trace.value_nodes import short_repr


@pytest.mark.parametrize("kind", [str, bytes])
def test_long_texts_are_summarized_as_their_full_repr_would_be(kind: type) -> None:
    rng = random.Random(0)
    alphabet = "ab'\"\\\n\x00é" if kind is str else "ab'\"\\\n\x00"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 300)))
        obj = text if kind is str else text.encode("latin-1")
        assert short_text(obj) == short_repr(obj), obj
    assert short_text(3.5) == "3.5" and short_text(None) == "None"
