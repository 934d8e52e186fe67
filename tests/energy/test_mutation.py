"""Mutation: ranges, distributions, zero probability, no duplicates, reproducibility."""

from __future__ import annotations

import math
import random

import pytest

from codedag.energy.config import HyperparamSpec, load_models_config
from codedag.energy.jobs import plan_jobs, settings_from_flags
from codedag.energy.mutation import Mutator, draw_value, resolve_rule
from codedag.errors import ConfigError, ExperimentError


def test_seed_strategy_is_relative_to_the_default() -> None:
    lr = resolve_rule("learning_rate", HyperparamSpec(flag="--lr", type="float", default=0.1), 0.1)
    assert (lr.low, lr.high, lr.distribution) == (
        pytest.approx(0.025),
        pytest.approx(0.4),
        "log_uniform",
    )
    epochs = resolve_rule("epochs", HyperparamSpec(flag="-e", type="int", default=10), 10)
    assert (epochs.low, epochs.high) == (5, 15)
    wd = resolve_rule("weight_decay", HyperparamSpec(flag="--wd", type="float", default=0.0), 0.0)
    assert wd.zero_probability == 0.3 and wd.low > 0
    with pytest.raises(ConfigError, match="no 'range'"):
        resolve_rule("momentum", HyperparamSpec(flag="--m", type="float", default=0.9), 0.9)


def test_draws_stay_in_range_with_the_right_type_and_distribution() -> None:
    rng = random.Random(0)
    spec = HyperparamSpec(
        flag="--lr", type="float", default=0.01, range=[1e-4, 1.0], distribution="log_uniform"
    )
    rule = resolve_rule("lr", spec, 0.01)
    values = [draw_value(rule, rng) for _ in range(2000)]
    assert all(1e-4 <= v <= 1.0 and isinstance(v, float) for v in values)
    # log-uniform: about half the draws fall below the geometric middle (1e-2)
    below = sum(v < 1e-2 for v in values) / len(values)
    assert 0.45 < below < 0.55
    ints = resolve_rule("n", HyperparamSpec(flag="-n", type="int", default=5, range=[1, 9]), 5)
    drawn = {draw_value(ints, rng) for _ in range(500)}
    assert drawn == set(range(1, 10)) and all(isinstance(v, int) for v in drawn)
    zero = resolve_rule(
        "wd",
        HyperparamSpec(
            flag="--wd", type="float", default=0.1, range=[0.01, 1], zero_probability=0.5
        ),
        0.1,
    )
    zeros = sum(draw_value(zero, rng) == 0.0 for _ in range(2000)) / 2000
    assert 0.45 < zeros < 0.55
    assert not math.isnan(zeros)


def test_no_duplicates_and_exhaustion_is_an_error() -> None:
    config = load_models_config()
    mutator = Mutator(config, "examples", "mnist_cnn", seed=3)
    seen = {tuple(sorted(mutator.draw(["epochs"]).items())) for _ in range(3)}
    assert len(seen) == 3  # epochs range [1, 4] minus the default 2: exactly three configs
    with pytest.raises(ExperimentError, match="no new configuration"):
        mutator.draw(["epochs"])


def test_reproducible_with_seed_and_avoids_previous_sessions() -> None:
    config = load_models_config()
    flags = settings_from_flags("examples", "mnist_cnn", "all", runs=3)
    first = plan_jobs(config, flags, seed=42)
    again = plan_jobs(config, flags, seed=42)
    other = plan_jobs(config, flags, seed=43)
    assert [j.hyperparameters for j in first] == [j.hyperparameters for j in again]
    assert [j.hyperparameters for j in first] != [j.hyperparameters for j in other]
    previous = [first[0].hyperparameters]
    avoided = plan_jobs(config, flags, seed=42, previous=lambda repo, model: previous)
    assert first[0].hyperparameters not in [j.hyperparameters for j in avoided]
    with pytest.raises(ConfigError, match=r"mutate: expected \[.all.\] or names from"):
        plan_jobs(config, settings_from_flags("examples", "mnist_cnn", "epochs,lrate"), seed=1)
