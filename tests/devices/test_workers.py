"""Whether this process may use CUDA: DataLoader workers and forked children run CUDA plans on the
CPU; spawned children (DDP ranks) and the main process may use CUDA."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator

import pytest
import torch

import codedag.devices.workers as workers


@pytest.fixture
def fresh_process() -> Iterator[None]:
    """Forget this process's device decisions before and after (as a forked child does)."""
    workers._reset_after_fork()
    yield
    workers._reset_after_fork()


def test_simulated_worker_runs_cuda_plans_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert workers.must_avoid_cuda()
    assert workers.effective_device("cuda:0") == "cpu"
    assert workers.final_effective_device("cuda:0") == "cpu"  # a worker's answer is final
    assert workers.effective_device("cpu") == "cpu"
    workers._reset_after_fork()
    monkeypatch.undo()
    assert workers.effective_device("cuda:1") == "cuda:1"


def test_a_forked_child_that_is_no_worker_decides_on_every_call(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.delitem(sys.modules, "__mp_main__", raising=False)
    assert workers.effective_device("cuda:0") == "cpu"
    assert workers.final_effective_device("cuda:0") is None  # it may still become a worker


def test_spawned_children_may_use_cuda_forked_ones_not(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.delitem(sys.modules, "__mp_main__", raising=False)
    assert workers.must_avoid_cuda()  # forked child
    workers._reset_after_fork()
    monkeypatch.setitem(sys.modules, "__mp_main__", sys.modules["__main__"])
    assert not workers.must_avoid_cuda()  # spawned child, e.g. a DDP rank


def test_a_worker_that_initialized_cuda_itself_may_use_it(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: False, raising=False)
    assert not workers.must_avoid_cuda()
    assert workers.effective_device("cuda:0") == "cuda:0"


def test_cuda_inherited_from_a_fork_is_never_used(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True, raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert workers.effective_device("cuda:0") == "cpu"
    assert workers.final_effective_device("cuda:0") == "cpu"  # the main process decides once


def test_the_fork_hook_forgets_decisions_in_a_forked_child(fresh_process: None) -> None:
    import os

    workers.install_fork_hook()
    workers.install_fork_hook()  # a second call adds no second hook
    assert workers.effective_device("cuda:0") in ("cuda:0", "cpu")
    assert workers.final_effective_device("cuda:0") is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: decisions of the parent are forgotten
        os.write(write, b"1" if workers.final_effective_device("cuda:0") is None else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
