"""Batch experiment settings (``settings/*.json``), validated like the models config.

A settings file names the experiments of a session: which repository and model, whether to mutate
(which hyperparameters), run defaults, or run with a background training load (parallel), how many
runs, retries, which CPU governor, and where the experiments run (``"executor": "ray"`` or
``{"kind": "ray", "address": "auto"}``). Unknown keys are errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from codedag.energy.config import ModelsConfig, bundled_path, read_model
from codedag.errors import ConfigError

Mode = Literal["mutation", "default", "parallel"]
BUNDLED_SETTINGS = ("default", "all", "boundary_test")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class BackgroundSpec(_Strict):
    """The training load that runs behind the foreground experiment in parallel mode."""

    repo: str
    model: str
    hyperparameters: dict[str, float] = Field(default_factory=dict)


class ExperimentSpec(_Strict):
    """One line of ``experiments[]``."""

    repo: str
    model: str
    mode: Mode | None = None
    mutate: list[str] = Field(default_factory=lambda: ["all"])
    runs: int | None = Field(default=None, ge=1)
    hyperparameters: dict[str, float] = Field(default_factory=dict)
    background: BackgroundSpec | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    description: str = ""


class ExecutorSettings(_Strict):
    """Where the experiments run: ``local`` (this machine) or ``ray`` (a Ray cluster)."""

    kind: Literal["local", "ray"] = "local"
    address: str | None = None
    node_retries: int = Field(default=3, ge=0)
    cpus_per_experiment: float = Field(default=1.0, gt=0)


class BatchSettings(_Strict):
    """A settings file."""

    experiment_name: str = Field(min_length=1)
    description: str = ""
    governor: str | None = None
    runs_per_config: int = Field(default=1, ge=1)
    max_retries: int = Field(default=2, ge=0)
    mode: Mode = "mutation"
    cooldown_s: float | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    experiments: list[ExperimentSpec] = Field(min_length=1)

    @field_validator("executor", mode="before")
    @classmethod
    def _executor_name(cls, value: object) -> object:
        return {"kind": value} if isinstance(value, str) else value

    def check_against(self, config: ModelsConfig, source: str = "settings") -> None:
        """Check that every repository, model and hyperparameter exists in ``config``.

        Raises:
            ConfigError: the first unknown name, with its position in ``experiments``.
        """
        for i, exp in enumerate(self.experiments):
            where = f"{source}: experiments.{i}"
            jobs = [(exp.repo, exp.model, exp.hyperparameters, "")]
            if exp.background is not None:
                bg = exp.background
                jobs.append((bg.repo, bg.model, bg.hyperparameters, ".background"))
            for repo, model, values, suffix in jobs:
                try:
                    config.model(repo, model)
                except ConfigError as error:
                    raise ConfigError(f"{where}{suffix}: {error}") from error
                supported = config.repo(repo).supported_hyperparams
                unknown = sorted(set(values) - set(supported))
                if unknown:
                    raise ConfigError(
                        f"{where}{suffix}.hyperparameters: unknown {unknown} for {repo}/{model}; "
                        f"supported: {sorted(supported)}"
                    )
            names = [m for m in exp.mutate if m != "all"]
            bad = sorted(set(names) - set(config.repo(exp.repo).supported_hyperparams))
            if bad or (names and len(names) != len(exp.mutate)):
                raise ConfigError(
                    f"{where}.mutate: expected ['all'] or names from "
                    f"{sorted(config.repo(exp.repo).supported_hyperparams)}, got {exp.mutate}"
                )
            if (exp.mode or self.mode) == "parallel" and exp.background is None:
                raise ConfigError(f"{where}: mode 'parallel' needs a 'background' training load")


def resolve_settings_path(path: str | Path) -> Path:
    """A file path, or the name of a bundled settings file (``default``, ``all``, ...)."""
    candidate = Path(path)
    if candidate.exists():
        return candidate
    name = str(path).removesuffix(".json")
    if name in BUNDLED_SETTINGS:
        return bundled_path(f"settings/{name}.json")
    raise ConfigError(
        f"settings file {path} does not exist (bundled settings: {', '.join(BUNDLED_SETTINGS)})"
    )


def load_settings(path: str | Path, config: ModelsConfig | None = None) -> BatchSettings:
    """Load and validate a settings file; with ``config``, also check names against it.

    Raises:
        ConfigError: unreadable file, invalid JSON, or a schema violation naming the field.
    """
    file = resolve_settings_path(path)
    settings = read_model(file, "settings file", BatchSettings)
    if config is not None:
        settings.check_against(config, str(file))
    return settings
