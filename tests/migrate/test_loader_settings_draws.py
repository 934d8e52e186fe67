"""Loader settings never change a batch: random pipelines under every setting the tuner can
choose, three epochs each, against the program's own loader; what would change the draws is
kept, with a warning."""

from __future__ import annotations

import itertools
import logging
import random
from typing import Any

import numpy as np
import pytest
import torch
from loader_support import HeldGenerator, PlainSamples, RandomSamples
from torch.utils.data import DataLoader, Dataset

from codedag.migrate.loader_settings import LoaderSettingsPatch
from codedag.plan import LoaderSection, LoaderSettings
from codedag.tune.draws import probe_draws

EPOCHS = 3
# Every setting the tuner can choose: workers 0/2/4, persistent on/off, threads and prefetch
# (threads and prefetch never touch the draws: varied together to keep the test short).
CHOICES = [LoaderSettings()] + [
    LoaderSettings(
        num_workers=workers, persistent_workers=persistent, threads=threads, prefetch_factor=pf
    )
    for workers, persistent, (threads, pf) in itertools.product(
        (2, 4), (False, True), ((None, None), (2, 4))
    )
]


def _seed_everything() -> None:
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)


def _epochs(dataset: Dataset, user: dict[str, Any]) -> list[list[torch.Tensor]]:
    """The program's loader, made as it makes it, run for three epochs."""
    _seed_everything()
    loader = DataLoader(
        dataset, batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(0), **user
    )
    return [[batch.clone() for batch in loader] for _ in range(EPOCHS)]


def _section(chosen: LoaderSettings, yours: LoaderSettings, dataset: Dataset) -> LoaderSection:
    return LoaderSection(
        chosen=chosen,
        yours=yours,
        changed=list(chosen.differences(yours)),
        draws=probe_draws(DataLoader(dataset)),
    )


def _run(
    dataset: Dataset, user: dict[str, Any], chosen: LoaderSettings, caplog: Any
) -> tuple[list[list[torch.Tensor]], dict[str, Any], list[str], LoaderSection]:
    section = _section(chosen, LoaderSettings(num_workers=user.get("num_workers", 0)), dataset)
    patch = LoaderSettingsPatch(section, cuda_available=False, cpus=4)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="codedag.migrate.loader_settings"):
        patch.apply()
        try:
            batches = _epochs(dataset, user)
        finally:
            patch.restore()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return batches, patch.stats(), warnings, section


def _effective(stats: dict[str, Any], user: dict[str, Any], key: str) -> Any:
    """What the loader ran with: the plan's value where applied, else the program's."""
    kept = key in stats["kept_explicit"] or key in stats["kept_for_draws"]
    if kept or key not in stats["changed"]:
        return user.get(key, LoaderSettings().model_dump()[key])
    return stats["settings"][key]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize(
    ("dataset", "user"),
    [
        (RandomSamples(), {"num_workers": 2}),  # YOLO-like: the worker count passed explicitly
        (RandomSamples(), {}),  # no workers: samples draw in the training process
        (PlainSamples(), {"num_workers": 2}),
    ],
    ids=["random-explicit-2-workers", "random-in-process", "plain-explicit-2-workers"],
)
def test_every_setting_gives_the_batches_of_your_loader_or_is_kept_with_a_warning(
    dataset: Dataset, user: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    reference = _epochs(dataset, user)
    draws = probe_draws(DataLoader(dataset))
    for chosen in CHOICES:
        batches, stats, warnings, _section_used = _run(dataset, user, chosen, caplog)
        label = chosen.label()
        for epoch, (mine, theirs) in enumerate(zip(batches, reference, strict=True)):
            assert len(mine) == len(theirs)
            for got, want in zip(mine, theirs, strict=True):
                assert torch.equal(got, want), f"{label}: epoch {epoch + 1} changed"
        for key in ("num_workers", "persistent_workers"):
            wanted = getattr(chosen, key)
            if key == "persistent_workers" and not _effective(stats, user, "num_workers"):
                continue  # no workers: nothing to keep across epochs
            if _effective(stats, user, key) != wanted:
                assert any(key in w and "the gain forgone" in w for w in warnings), (
                    f"{label}: {key} kept without a warning: {warnings}"
                )
        if not draws:  # nothing drawn: every measured setting applies, explicit ones too
            assert not stats["kept_explicit"] and not stats["kept_for_draws"], label
        workers = _effective(stats, user, "num_workers")
        if (
            chosen.persistent_workers
            and workers
            and "persistent_workers" not in (stats["kept_for_draws"])
        ):
            assert stats["reseeded_each_epoch"] == 1, label  # the plan's persistent workers


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_random_samples_keep_an_explicit_worker_count_and_plain_ones_take_the_tuned_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chosen = LoaderSettings(num_workers=4, persistent_workers=True)
    for dataset, workers in ((RandomSamples(), 2), (PlainSamples(), 4)):
        section = _section(chosen, LoaderSettings(num_workers=2), dataset)
        patch = LoaderSettingsPatch(section, cuda_available=False, cpus=4)
        patch.apply()
        try:
            loader = DataLoader(dataset, batch_size=3, num_workers=2)
        finally:
            patch.restore()
        assert loader.num_workers == workers
        assert loader.persistent_workers  # re-seeded each epoch: the draws stay


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_plan_allowing_changed_draws_applies_every_setting() -> None:
    chosen = LoaderSettings(num_workers=4)
    section = _section(chosen, LoaderSettings(num_workers=2), RandomSamples())
    section.allow_changed_draws = True
    patch = LoaderSettingsPatch(section, cuda_available=False, cpus=4)
    patch.apply()
    try:
        loader = DataLoader(RandomSamples(), batch_size=3, num_workers=2)
    finally:
        patch.restore()
    assert loader.num_workers == 4


def test_persistent_workers_stay_off_for_a_generator_the_data_set_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dataset = HeldGenerator()
    section = _section(
        LoaderSettings(num_workers=2, persistent_workers=True), LoaderSettings(), dataset
    )
    assert section.draws == ["HeldGenerator.rng"]
    patch = LoaderSettingsPatch(section, cuda_available=False, cpus=4)
    with caplog.at_level(logging.WARNING, logger="codedag.migrate.loader_settings"):
        patch.apply()
        try:
            loader = DataLoader(dataset, batch_size=3)
        finally:
            patch.restore()
    assert loader.num_workers == 0 and not loader.persistent_workers
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "num_workers, persistent_workers kept" in warning
    assert "HeldGenerator.rng" in warning and "--allow-changed-draws" in warning
