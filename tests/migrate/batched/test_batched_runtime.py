"""The batched runtime's life cycle: patches in and out, the stop switch, its statistics."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import torch

import codedag.migrate.batched.runtime as runtime
from codedag.migrate.batched.settings import BatchedSettings, ChainSet, chains_from_plan


def _chains(functions: list[str]) -> ChainSet:
    chains = [{"id": "chain0", "functions": functions, "entry_functions": functions[:1]}]
    chains[0]["batched"] = True
    return chains_from_plan({"mode": "always", "device": "cpu", "chains": chains})


def test_without_chains_nothing_is_patched() -> None:
    batched = runtime.BatchedRuntime(chains_from_plan({"chains": []}), "cpu")
    assert not batched.active
    assert batched.apply() == {"patched": 0, "failed": 0}
    assert batched.patched_names() == []
    assert batched.restore() == 0


def test_apply_patches_the_chain_and_the_loader_hooks_and_restore_undoes_it() -> None:
    original_flip = cv2.flip
    batched = runtime.BatchedRuntime(_chains(["cv2.flip"]), "cpu")
    counts = batched.apply()
    try:
        assert counts["failed"] == 0 and counts["patched"] >= 3
        names = batched.patched_names()
        assert runtime.FETCH in names and runtime.NEXT in names
        assert any(n.endswith("flip") for n in names)
        assert cv2.flip is not original_flip
        assert batched.apply() == {"patched": 0, "failed": 0}  # once only
    finally:
        removed = batched.restore()
    assert removed >= counts["patched"]
    assert cv2.flip is original_flip
    assert batched.patched_names() == []


def test_stop_turns_deferring_off_for_good() -> None:
    batched = runtime.BatchedRuntime(_chains(["cv2.flip"]), "cpu")
    assert batched.stats()["deferring"] is True
    batched.stop("a reason")
    batched.stop("another reason")
    assert batched.stats()["deferring"] is False
    assert not batched._deferring()


def test_batches_run_ahead_only_on_cuda_with_workers_unless_set() -> None:
    batched = runtime.BatchedRuntime(_chains(["cv2.flip"]), "cpu")
    assert batched._ahead(SimpleNamespace(_num_workers=2)) == 0
    batched.device = torch.device("cuda")
    assert batched._ahead(SimpleNamespace(_num_workers=2)) == 1
    assert batched._ahead(SimpleNamespace(_num_workers=0)) == 0
    fixed = runtime.BatchedRuntime(_chains(["cv2.flip"]), "cpu", BatchedSettings(ahead=0))
    fixed.device = torch.device("cuda")
    assert fixed._ahead(SimpleNamespace(_num_workers=2)) == 0


def test_stats_start_from_zero_and_name_the_chains() -> None:
    batched = runtime.BatchedRuntime(
        _chains(["cv2.flip"]), "cpu", BatchedSettings(deliver="device")
    )
    stats = batched.stats()
    assert stats["enabled"] is True
    assert (stats["device"], stats["deliver"], stats["chains"]) == ("cpu", "device", ["chain0"])
    assert stats["batches"] == stats["samples"] == stats["backend_calls"] == 0
    assert stats["backend_calls_per_batch_max"] == 0
    assert stats["verify"] == {"batches": 0, "mismatches": [], "max_abs_diff": 0.0}
