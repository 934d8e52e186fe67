"""Measuring with the thread count the call will run with, and giving the old one back."""

from __future__ import annotations

import pytest
import torch

from codedag.errors import ConfigError
from codedag.measure import torch_threads


def test_the_thread_count_is_set_for_the_block_and_restored() -> None:
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    with torch_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="boom"), torch_threads(other):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before  # restored after an exception too
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ConfigError, match="at least 1"), torch_threads(0):
        pass
