"""Batched-execution tests run torch with one intra-op thread in the test process.

GNU OpenMP cannot be used again in a child forked after its thread pool started: a later test
forking a plain ``multiprocessing.Process`` that runs a parallel torch op would hang. The batched
executor runs in the main process (where the pool would start); DataLoader workers use one thread
anyway.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
