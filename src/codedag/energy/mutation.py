"""Hyperparameter mutation: reproducible draws around a model's defaults, without duplicates.

Each hyperparameter is drawn from its range (absolute ``range``, ``range_relative`` factors of
the default, or a built-in strategy for well-known names), uniformly or log-uniformly, as an int
or a float, and set to exactly zero with its ``zero_probability``. Floats are rounded to 6
significant digits so that the recorded value is the one passed on the command line.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from codedag.energy.config import SEED_STRATEGY, HyperparamSpec, ModelsConfig
from codedag.errors import ConfigError, ExperimentError

log = logging.getLogger(__name__)

MAX_ATTEMPTS_PER_CONFIG = 1000


@dataclass(frozen=True)
class DrawRule:
    """The resolved rule for one hyperparameter: bounds, distribution, zero probability."""

    kind: str
    low: float
    high: float
    distribution: str
    zero_probability: float


def resolve_rule(name: str, spec: HyperparamSpec, default: float) -> DrawRule:
    """Resolve the drawing rule of ``name`` from its spec, else the built-in strategy for its name.

    Raises:
        ConfigError: no range is given and the name has no strategy, or a log-uniform range
            includes zero or negatives.
    """
    strategy = SEED_STRATEGY.get(name)
    distribution = spec.distribution or (strategy[3] if strategy else "uniform")
    zero_p = spec.zero_probability
    if zero_p is None:
        zero_p = strategy[4] if strategy else 0.0
    if spec.range is not None:
        low, high = spec.range
    elif spec.range_relative is not None:
        low, high = default * spec.range_relative[0], default * spec.range_relative[1]
    elif strategy is not None:
        kind, a, b = strategy[0], strategy[1], strategy[2]
        if kind == "factor":
            low, high = default * a, default * b
        elif kind == "offset":
            low, high = max(0.0, default + a), min(0.95, default + b)
        else:
            low, high = a, b
        if kind == "factor" and default == 0:
            # Relative ranges around a zero default are empty; use a generic positive range.
            low, high = 1e-5, 1e-2
    else:
        raise ConfigError(
            f"hyperparameter {name!r} has no 'range' or 'range_relative' and no built-in "
            f"strategy (built-in: {sorted(SEED_STRATEGY)})"
        )
    low, high = min(low, high), max(low, high)
    if spec.type == "int":
        low, high = math.ceil(low), math.floor(high)
        if low > high:
            low = high = round(default)
        low = max(low, 1) if name == "epochs" else low
        high = max(high, low)
    if distribution == "log_uniform" and low <= 0:
        raise ConfigError(
            f"hyperparameter {name!r}: log_uniform needs a range above zero, got [{low}, {high}]"
        )
    return DrawRule(spec.type, float(low), float(high), distribution, float(zero_p))


def draw_value(rule: DrawRule, rng: random.Random) -> float:
    """Draw one value following ``rule``."""
    if rule.zero_probability > 0 and rng.random() < rule.zero_probability:
        return 0 if rule.kind == "int" else 0.0
    if rule.distribution == "log_uniform":
        value = math.exp(rng.uniform(math.log(rule.low), math.log(rule.high)))
    else:
        value = rng.uniform(rule.low, rule.high)
    if rule.kind == "int":
        return int(min(max(round(value), rule.low), rule.high))
    return float(f"{value:.6g}")


def config_key(hyperparams: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """A hashable identity of a configuration (floats compared at 6 significant digits)."""
    return tuple(sorted((k, float(f"{float(v):.6g}")) for k, v in hyperparams.items()))


class Mutator:
    """Draws mutated configurations for one model, never repeating one it has seen.

    Args:
        config: the models config.
        repo: repository name.
        model: model name.
        seed: random seed; the same seed gives the same sequence.
        seen: configurations to avoid (e.g. from earlier sessions), as full hyperparameter dicts.
    """

    def __init__(
        self,
        config: ModelsConfig,
        repo: str,
        model: str,
        seed: int | None = None,
        seen: Iterable[Mapping[str, float]] = (),
    ) -> None:
        self.repo, self.model = repo, model
        self.defaults = config.defaults(repo, model)
        self.specs = config.repo(repo).supported_hyperparams
        self.rng = random.Random(seed)
        self.seen = {config_key(s) for s in seen}

    def names(self, mutate: Sequence[str] | str) -> list[str]:
        """Expand ``all`` or a comma list into validated hyperparameter names."""
        items = mutate.split(",") if isinstance(mutate, str) else list(mutate)
        items = [i.strip() for i in items if i.strip()]
        if items == ["all"]:
            return list(self.specs)
        unknown = [i for i in items if i not in self.specs]
        if unknown or not items:
            raise ConfigError(
                f"cannot mutate {unknown or items!r} of {self.repo}/{self.model}; "
                f"expected 'all' or a comma list of {sorted(self.specs)}"
            )
        return items

    def draw(self, mutate: Sequence[str] | str) -> dict[str, float]:
        """One new configuration: defaults with the named hyperparameters mutated.

        Raises:
            ExperimentError: no unseen configuration found in ``MAX_ATTEMPTS_PER_CONFIG`` draws
                (the ranges are too narrow for the number of runs asked).
        """
        names = self.names(mutate)
        rules = {n: resolve_rule(n, self.specs[n], self.defaults[n]) for n in names}
        for _ in range(MAX_ATTEMPTS_PER_CONFIG):
            values = dict(self.defaults)
            for name in names:
                values[name] = draw_value(rules[name], self.rng)
            key = config_key(values)
            if key not in self.seen and values != self.defaults:
                self.seen.add(key)
                return values
        raise ExperimentError(
            f"found no new configuration of {names} for {self.repo}/{self.model} after "
            f"{MAX_ATTEMPTS_PER_CONFIG} draws ({len(self.seen)} already used); widen the ranges "
            "or ask for fewer runs"
        )

    def mark_seen(self, hyperparams: Mapping[str, float]) -> None:
        """Record a configuration (e.g. a default run) so it is not drawn again."""
        self.seen.add(config_key(hyperparams))
