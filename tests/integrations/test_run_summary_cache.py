"""The summary's prefix cache line says what was stored and what was left for a later epoch."""

from __future__ import annotations

from codedag.integrations.run_results import AcceleratedRun
from codedag.integrations.run_summary import summary_lines
from codedag.integrations.watch import cache_figures


def _cache_line(cache: dict[str, object]) -> str:
    results = AcceleratedRun(loader_index=0, dataset="Photos", plan_status="applied", cache=cache)
    (line,) = [x for x in summary_lines(results) if x.startswith("prefix cache")]
    return line


def test_values_left_for_a_later_epoch_are_said_with_why() -> None:
    stats = {"enabled": True, "hits": 40, "stored": 30, "not_stored_later": 10, "hit_rate": 0.5}
    stats |= {"hit_bytes": 1000, "tiers": [], "read_ms": 1.0}
    line = _cache_line(cache_figures(stats))
    assert line.startswith("prefix cache: 40 hits (50 %), 1,000 bytes read back, 30 values")
    assert "10 left for a later epoch" in line and "storing share" in line


def test_values_the_sample_wrote_into_before_they_were_stored_are_said() -> None:
    # ``x[:, f:f + 8] = 0`` on the value a hit hands out: its first values changed under the
    # writer, and the next epoch computes them again
    stats = {"enabled": True, "hits": 153, "stored": 80, "not_stored_changed": 7}
    line = _cache_line(cache_figures(stats | {"hit_rate": 0.64, "misses": {"new": 87}}))
    assert "80 values stored (7 written into by the sample before the writer stored them" in line


def test_nothing_left_says_nothing_of_it() -> None:
    stats = {"enabled": True, "hits": 4, "stored": 8, "not_stored_later": 0, "hit_rate": 0.5}
    assert "later" not in _cache_line(cache_figures(stats))
    assert _cache_line({"enabled": False}) == "prefix cache: not used"


def test_epochs_compare_with_the_first_whole_one() -> None:
    # a look at one batch before training (next(iter(loader))) is a partial first epoch
    from codedag.integrations.run_results import EpochFigures

    epochs = [
        EpochFigures(epoch=1, batches=1, samples=16, epoch_s=2.0, complete=False),
        EpochFigures(epoch=2, batches=6, samples=96, epoch_s=0.4, complete=True),
        EpochFigures(epoch=3, batches=6, samples=96, epoch_s=0.1, complete=True),
    ]
    results = AcceleratedRun(loader_index=0, dataset="Photos", epochs=epochs)
    lines = summary_lines(results)
    (header,) = [x for x in lines if x.strip().startswith("epoch")]
    assert "vs epoch 2" in header
    rows = [x.split() for x in lines if x.strip()[:1].isdigit()]
    assert [row[5] for row in rows] == ["0.03x", "1.00x", "4.00x"]


def test_samples_computed_without_the_cache_say_why() -> None:
    stats = {"enabled": True, "hits": 0, "stored": 0, "hit_rate": 0.0}
    line = _cache_line(cache_figures(stats) | {"misses": {"arguments": 288, "new": 4}})
    assert line.endswith("; computed without it: 288 (an argument without a stable value)")
    line = _cache_line(cache_figures(stats) | {"misses": {"diverged": 2}, "diverged": {}})
    assert line.endswith("; computed without it: 2 (diverged)")
    line = _cache_line(cache_figures(stats) | {"misses": {"not_stored": 72}})
    assert "72 (not in the store: evicted, left unstored, or new arguments" in line
    assert "computed" not in _cache_line(cache_figures(stats) | {"misses": {"new": 4}})
    stats |= {"misses": {"diverged": 288}}
    stats |= {"diverged": {"prefix0: conversion to an array": 280, "prefix0: error": 8}}
    line = _cache_line(cache_figures(stats))
    assert line.endswith("288 (diverged: most often prefix0: conversion to an array)")


def test_library_calls_kept_are_named_before_the_code_that_frames_them() -> None:
    from codedag.integrations.run_results import Decision

    names = [
        "torch.utils.data.dataloader._BaseDataLoaderIter.__next__",
        "__main__.Clips.__getitem__",
        "cv2.imread",
        "numpy.apply_along_axis",
        "__main__.load_audio",
        "soundfile.read",
    ]
    kept = [Decision(section="calls", what=n, reason=f"no torch backend for {n}") for n in names]
    results = AcceleratedRun(loader_index=0, dataset="Clips", plan_status="applied", kept=kept)
    (line,) = [x for x in summary_lines(results) if "no torch backend" in x]
    assert line == (
        "kept: 6 function(s) with no torch backend: cv2.imread, numpy.apply_along_axis, "
        "soundfile.read, torch.utils.data.dataloader._BaseDataLoaderIter.__next__ and 2 more"
    )
