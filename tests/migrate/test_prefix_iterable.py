"""The prefix cache of an iterable data set: its ``__iter__`` generator's samples are cached like a
map-style data set's, and a batch that fails with cached values gives the program its error."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from prefix_support import STREAM_CALLER, FileStream, runtime, write_images
from torch.utils.data import DataLoader


def _epochs(dataset: FileStream, workers: int, epochs: int = 2) -> list[list[torch.Tensor]]:
    loader = DataLoader(dataset, batch_size=4, num_workers=workers)
    return [[torch.cat([x.flatten(), i]) for x, i in loader] for _ in range(epochs)]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_second_epoch_of_an_iterable_data_set_hits_with_its_own_batches(
    tmp_path: Path, workers: int
) -> None:
    dataset = FileStream(write_images(tmp_path / "images", 8))
    reference = _epochs(dataset, workers)
    rt = runtime(tmp_path / "cache", caller=STREAM_CALLER)
    rt.apply()
    try:
        got = _epochs(dataset, workers)
    finally:
        rt.restore()
    assert all(torch.equal(a, b) for want, have in zip(reference, got) for a, b in zip(want, have))
    stats = rt.stats()
    assert stats["misses"] == {"new": 8} and stats["hits"] == 8 and stats["stored"] == 8
    if workers == 0:  # the fetch is this process's: a cold first epoch looks nothing up, and
        # each batch starts its chains afresh
        assert rt.session.cold_skips == 8 and len(rt.session.local.lineages) <= 4


def test_a_batch_failing_with_cached_values_gives_the_program_its_error_and_stops_the_chain(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An iterable data set's samples cannot be fetched again: the program gets the error it
    would get without the cache, one warning says the chain is no longer cached here."""
    paths = write_images(tmp_path / "images", 8)
    with pytest.raises(ValueError, match="sample 5 is broken") as own:
        _epochs(FileStream(paths, fail_at=5), 0, epochs=1)
    rt = runtime(tmp_path / "cache", caller=STREAM_CALLER)
    rt.apply()
    try:
        _epochs(FileStream(paths), 0, epochs=1)  # every value stored
        with caplog.at_level(logging.WARNING), pytest.raises(ValueError) as cached:
            _epochs(FileStream(paths, fail_at=5), 0, epochs=1)
        assert str(cached.value) == str(own.value)
        assert "prefix0" in rt.session.given_up
        again = _epochs(FileStream(paths), 0, epochs=1)  # runs as written, nothing cached
    finally:
        rt.restore()
    warnings = [r for r in caplog.records if "iterable data set failed" in r.getMessage()]
    assert len(warnings) == 1 and "ValueError: sample 5 is broken" in warnings[0].getMessage()
    assert all(
        torch.equal(a, b) for a, b in zip(again[0], _epochs(FileStream(paths), 0, epochs=1)[0])
    )
    assert rt.stats()["hits"] == 6  # samples 0-5 of the failing epoch; none after giving up
