"""A chain's functions are patched under every public spelling user code may call."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from batched_support import plan
from torch.utils.data import DataLoader, Dataset

from codedag.migrate.api import PipelineMigrator

librosa = pytest.importorskip("librosa")

MEL = "librosa.feature.spectral.melspectrogram"


class Clips(Dataset):
    """Calls the short public name, as user code does (``librosa.feature.melspectrogram``)."""

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.clips = [rng.standard_normal(4096).astype(np.float32) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        mel = librosa.feature.melspectrogram(y=self.clips[i], sr=16000, n_fft=512, n_mels=32)
        return mel, i


def test_a_chain_given_by_its_canonical_name_defers_calls_of_its_public_alias() -> None:
    loader = DataLoader(Clips(6), batch_size=3)
    reference = list(loader)
    migrator = PipelineMigrator.from_plan(plan([MEL]), default_device="cpu")
    with migrator:
        batches = list(loader)
    stats = migrator.get_stats()["batched"]
    assert stats["batches"] == 2 and stats["samples"] == 6  # deferred, not run eagerly
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert torch.equal(y, ref_y)
        torch.testing.assert_close(x, ref_x, rtol=1e-4, atol=1e-4)
