"""Planning a session: settings (or CLI flags) to the list of experiments to run."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from codedag.energy.config import ModelsConfig, load_models_config
from codedag.energy.mutation import Mutator
from codedag.energy.settings import BackgroundSpec, BatchSettings, ExperimentSpec
from codedag.errors import ConfigError


@dataclass(frozen=True)
class Job:
    """One planned experiment: a model, its hyperparameters and how to run it."""

    repo: str
    model: str
    mode: str
    hyperparameters: dict[str, float]
    mutated: list[str] = field(default_factory=list)
    background: BackgroundSpec | None = None
    timeout_s: float | None = None
    description: str = ""


def settings_from_flags(
    repo: str,
    model: str,
    mutate: str | None,
    runs: int = 1,
    max_retries: int = 2,
    governor: str | None = None,
) -> BatchSettings:
    """The settings equivalent to ``-r REPO -m MODEL -mt LIST -n RUNS`` (no ``-mt``: defaults)."""
    names = [m.strip() for m in (mutate or "").split(",") if m.strip()]
    if mutate is not None and not names:
        raise ConfigError(f"--mutate expects 'all' or a comma list of names, got {mutate!r}")
    experiment = ExperimentSpec(
        repo=repo,
        model=model,
        mode="mutation" if names else "default",
        mutate=names or ["all"],
    )
    return BatchSettings(
        experiment_name=f"{repo}_{model}",
        governor=governor,
        runs_per_config=runs,
        max_retries=max_retries,
        mode="mutation" if names else "default",
        experiments=[experiment],
    )


def plan_jobs(
    config: ModelsConfig,
    settings: BatchSettings,
    seed: int,
    previous: Callable[[str, str], Sequence[Mapping[str, float]]] | None = None,
) -> list[Job]:
    """Expand settings into jobs, drawing mutations reproducibly from ``seed``.

    Mutated configurations never repeat within the session (one mutator per model, shared by
    every experiment line of that model) nor, with ``previous``, the configurations it returns.

    Raises:
        ConfigError: unknown repository, model or hyperparameter.
        ExperimentError: the ranges cannot yield as many distinct configurations as asked.
    """
    settings.check_against(config)
    for exp in settings.experiments:
        pairs = [(exp.repo, exp.model)]
        if exp.background is not None:
            pairs.append((exp.background.repo, exp.background.model))
        for repo, model in pairs:
            script = config.script_path(repo, model)
            if not script.is_file():
                raise ConfigError(f"training script of {repo}/{model} not found: {script}")
    mutators: dict[tuple[str, str], Mutator] = {}
    jobs: list[Job] = []
    for exp in settings.experiments:
        mode = exp.mode or settings.mode
        runs = exp.runs or settings.runs_per_config
        key = (exp.repo, exp.model)
        if key not in mutators:
            seen = list(previous(*key)) if previous is not None else []
            rng_seed = random.Random(f"{seed}:{exp.repo}:{exp.model}").randrange(2**63)
            mutators[key] = Mutator(config, exp.repo, exp.model, rng_seed, seen)
        mutator = mutators[key]
        base = config.defaults(exp.repo, exp.model)
        base.update(_typed(config, exp.repo, exp.hyperparameters))
        names = [n for n in mutator.names(exp.mutate) if n not in exp.hyperparameters]
        for _ in range(runs):
            if mode == "default" or not names:
                values = dict(base)
                mutator.mark_seen(values)
                mutated: list[str] = []
            else:
                drawn = mutator.draw(names)
                values = {**base, **{n: drawn[n] for n in names}}
                mutated = names
            jobs.append(
                Job(
                    exp.repo,
                    exp.model,
                    mode,
                    values,
                    mutated,
                    exp.background if mode == "parallel" else None,
                    exp.timeout_s,
                    exp.description,
                )
            )
    return jobs


def _typed(config: ModelsConfig, repo: str, values: Mapping[str, float]) -> dict[str, float]:
    specs = config.repo(repo).supported_hyperparams
    out: dict[str, float] = {}
    for name, value in values.items():
        if specs[name].type == "int":
            if value != int(value):
                raise ConfigError(f"hyperparameter {name!r} is an int, got {value!r}")
            out[name] = int(value)
        else:
            out[name] = float(value)
    return out


@dataclass(frozen=True)
class RunSpec:
    """What to run and how, for one experiment (plain data: it travels to Ray nodes).

    ``bundled_config`` says the models config is codedag's own: a node then loads its own copy,
    whose repository paths point into the node's installation.
    """

    job: Job
    config: ModelsConfig
    max_retries: int = 2
    timeout_s: float | None = None
    retry_pause_s: float = 5.0
    cooldown_s: float = 60.0
    gpu_interval_s: float = 0.1
    kill_grace_s: float = 5.0
    bundled_config: bool = False

    def models_config(self) -> ModelsConfig:
        """The models config to use here (the local copy of a bundled config)."""
        return load_models_config() if self.bundled_config else self.config
