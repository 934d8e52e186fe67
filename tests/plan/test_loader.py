"""The loader section's rules on random draws: what a setting would change, what is kept, and
the gain forgone in measured figures."""

from __future__ import annotations

from codedag.plan import LoaderSection, LoaderSettings
from codedag.plan.loader import LoaderConfirmation, LoaderTrial

YOURS = LoaderSettings(num_workers=2)
CHOSEN = LoaderSettings(num_workers=4, threads=1, persistent_workers=True)


def _section(draws: list[str] | None, **extra: object) -> LoaderSection:
    return LoaderSection(
        chosen=CHOSEN,
        yours=YOURS,
        changed=list(CHOSEN.differences(YOURS)),
        draws=draws,
        trials=[
            LoaderTrial(settings=YOURS, batches=8, batches_per_s=10.0),
            LoaderTrial(settings=CHOSEN, batches=8, batches_per_s=25.0),
        ],
        confirmation=LoaderConfirmation(rounds=3, yours_batches_per_s=11.0, ratio=2.2),
        **extra,  # type: ignore[arg-type]
    )


def test_a_plan_without_the_new_fields_loads_and_keeps_what_could_change_the_draws() -> None:
    data = _section(None).model_dump(mode="json")
    data.pop("draws")
    data.pop("allow_changed_draws")
    section = LoaderSection.model_validate(data)
    assert section.draws is None and not section.allow_changed_draws
    assert set(section.kept_for_draws()) == {"num_workers", "persistent_workers"}


def test_threads_prefetch_and_pinned_memory_never_change_the_draws() -> None:
    section = _section(["random"])
    for key, value in (("threads", 4), ("prefetch_factor", 8), ("pin_memory", True)):
        assert section.draw_blocker(key, value) is None


def test_global_draws_keep_the_worker_count_but_take_persistent_workers() -> None:
    section = _section(["random", "numpy.random"])
    assert list(section.kept_for_draws()) == ["num_workers"]
    assert "another worker count" in section.kept_for_draws()["num_workers"]
    assert not section.settles_explicit


def test_a_generator_the_data_set_holds_keeps_persistent_workers_off() -> None:
    kept = _section(["Crops.rng"]).kept_for_draws()
    assert "Crops.rng" in kept["persistent_workers"]


def test_workers_made_fresh_where_yours_persist_change_the_draws() -> None:
    section = _section([])
    assert section.draw_blocker("persistent_workers", False) is not None
    assert section.draw_blocker("persistent_workers", True) is None


def test_no_draws_or_the_allow_flag_apply_everything_explicit_ones_too() -> None:
    for section in (_section([]), _section(["torch"], allow_changed_draws=True)):
        assert section.kept({"num_workers"}) == {}
        assert section.settles_explicit


def test_the_kept_line_gives_the_gain_forgone_in_measured_figures() -> None:
    line = _section(["random"]).kept_line({"num_workers", "persistent_workers"})
    assert line is not None
    assert line.startswith("not applied: num_workers, persistent_workers stay")
    assert "tuned 4 workers x 1 thread, persistent: 25.0 batches/s" in line
    # the combination kept was not timed: your own settings' figure is given
    assert "kept 2 workers x 1 thread (not measured; yours, 2 workers x default threads: " in line
    assert "10.0 batches/s)" in line
    assert _section([]).kept_line({"num_workers"}) is None
