"""The models config: which repositories, training scripts, models and hyperparameters exist.

A repository entry says where the training script lives, how a model is chosen, which
hyperparameters it accepts (flag, type, default, range, distribution, zero probability) and which
regexes pull the performance metrics and the success or failure out of its log. Every level forbids
unknown keys: a misspelled key is an error naming the field, never silently ignored.
"""

from __future__ import annotations

import re
import sys
import warnings
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from codedag.errors import ConfigError

_Model = TypeVar("_Model", bound=BaseModel)

SCHEMA_VERSION = 1

# The built-in mutation strategy: ranges relative to the default value, by hyperparameter name.
# (kind, low, high, distribution, zero_probability); kind "factor" multiplies the default,
# "offset" adds to it, "absolute" is used as is.
SEED_STRATEGY: dict[str, tuple[str, float, float, str, float]] = {
    "epochs": ("factor", 0.5, 1.5, "uniform", 0.0),
    "learning_rate": ("factor", 0.25, 4.0, "log_uniform", 0.0),
    "weight_decay": ("factor", 0.1, 10.0, "log_uniform", 0.3),
    "dropout": ("offset", -0.2, 0.2, "uniform", 0.0),
    "seed": ("absolute", 0, 9999, "uniform", 0.0),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: object) -> Any:
        # Paths, flags and arguments end up in a command line, where a NUL byte cannot go.
        if isinstance(data, dict):
            for key, value in data.items():
                texts = value if isinstance(value, list) else [value]
                if any(isinstance(t, str) and "\x00" in t for t in texts):
                    raise ValueError(f"{key}: contains a NUL byte")
        return data


class HyperparamSpec(_Strict):
    """One tunable hyperparameter of a training script."""

    flag: str = Field(min_length=1)
    type: Literal["int", "float"]
    default: float
    range: tuple[float, float] | None = None
    range_relative: tuple[float, float] | None = None
    distribution: Literal["uniform", "log_uniform"] | None = None
    zero_probability: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check(self) -> HyperparamSpec:
        if self.range is not None and self.range_relative is not None:
            raise ValueError("give either 'range' or 'range_relative', not both")
        for name in ("range", "range_relative"):
            bounds = getattr(self, name)
            if bounds is not None and bounds[0] > bounds[1]:
                raise ValueError(
                    f"'{name}' must be [low, high] with low <= high, got {list(bounds)}"
                )
        if self.type == "int" and self.default != int(self.default):
            raise ValueError(f"default of an int hyperparameter must be whole, got {self.default}")
        return self


class ModelEntry(_Strict):
    """Per-model overrides inside a repository."""

    train_script: str | None = None
    args: list[str] = Field(default_factory=list)
    defaults: dict[str, float] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0)


class PerformanceSpec(_Strict):
    """Regexes over the training log; each needs one group that captures a number."""

    log_patterns: dict[str, str] = Field(default_factory=dict)

    @field_validator("log_patterns")
    @classmethod
    def _compile(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            _compile_regex(pattern, f"log_patterns.{name}")
            if re.compile(pattern).groups < 1:
                raise ValueError(f"log_patterns.{name} needs a capture group for the number")
        return value


class RepoConfig(_Strict):
    """A repository with a training script and its models."""

    path: str
    train_script: str
    interpreter: list[str] | None = None
    model_flag: str | None = None
    required_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    models: dict[str, ModelEntry]
    supported_hyperparams: dict[str, HyperparamSpec]
    performance_metrics: PerformanceSpec = Field(default_factory=PerformanceSpec)
    success_patterns: list[str] = Field(default_factory=list)
    error_patterns: list[str] = Field(default_factory=list)
    timeout_s: float | None = Field(default=None, gt=0)

    @field_validator("success_patterns", "error_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            _compile_regex(pattern, "pattern")
        return value

    @model_validator(mode="after")
    def _check(self) -> RepoConfig:
        if not self.models:
            raise ValueError("'models' must name at least one model")
        for model in self.models:
            _check_name(model, "model")
        for model, entry in self.models.items():
            unknown = sorted(set(entry.defaults) - set(self.supported_hyperparams))
            if unknown:
                raise ValueError(
                    f"models.{model}.defaults names unknown hyperparameters {unknown}; "
                    f"supported: {sorted(self.supported_hyperparams)}"
                )
        return self


class ModelsConfig(_Strict):
    """The whole models config file."""

    schema_version: Literal[1] = 1
    repositories: dict[str, RepoConfig]
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("repositories")
    @classmethod
    def _names(cls, value: dict[str, RepoConfig]) -> dict[str, RepoConfig]:
        for name in value:
            _check_name(name, "repository")
        return value

    @property
    def base_dir(self) -> Path:
        """The folder relative repository paths start from (the config file's folder)."""
        return self._base_dir

    def repo(self, name: str) -> RepoConfig:
        """Return a repository's entry or raise ConfigError listing the known ones."""
        if name not in self.repositories:
            raise ConfigError(f"unknown repository {name!r}; known: {sorted(self.repositories)}")
        return self.repositories[name]

    def model(self, repo: str, model: str) -> ModelEntry:
        """Return a model's entry or raise ConfigError listing the repository's models."""
        entry = self.repo(repo)
        if model not in entry.models:
            raise ConfigError(
                f"unknown model {model!r} in repository {repo!r}; known: {sorted(entry.models)}"
            )
        return entry.models[model]

    def defaults(self, repo: str, model: str) -> dict[str, float]:
        """Default hyperparameter values of a model (model overrides over repository defaults)."""
        entry = self.repo(repo)
        values = {name: spec.default for name, spec in entry.supported_hyperparams.items()}
        values.update(self.model(repo, model).defaults)
        return {
            name: int(v) if entry.supported_hyperparams[name].type == "int" else float(v)
            for name, v in values.items()
        }

    def command(self, repo: str, model: str, hyperparams: dict[str, float]) -> list[str]:
        """Build the training command as an argument list (never a shell string)."""
        entry = self.repo(repo)
        model_entry = self.model(repo, model)
        script = model_entry.train_script or entry.train_script
        script_path = self.script_path(repo, model)
        interpreter = entry.interpreter
        if interpreter is None:
            interpreter = [sys.executable] if script.endswith(".py") else []
        argv = [*[sys.executable if p == "{python}" else p for p in interpreter], str(script_path)]
        argv += entry.required_args + model_entry.args
        if entry.model_flag:
            argv += [entry.model_flag, model]
        for name, value in hyperparams.items():
            spec = entry.supported_hyperparams.get(name)
            if spec is None:
                raise ConfigError(
                    f"hyperparameter {name!r} is not supported by {repo}/{model}; "
                    f"supported: {sorted(entry.supported_hyperparams)}"
                )
            argv += [spec.flag, format_value(value, spec.type)]
        return argv

    def script_path(self, repo: str, model: str) -> Path:
        """The training script of a model (model entry over repository)."""
        script = self.model(repo, model).train_script or self.repo(repo).train_script
        return self.repo_dir(repo) / script

    def repo_dir(self, repo: str) -> Path:
        """The repository folder: ``path`` relative to the config file's folder unless absolute."""
        path = Path(self.repo(repo).path).expanduser()
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    def timeout_s(self, repo: str, model: str) -> float | None:
        """The per-model timeout (model entry over repository), None when unlimited."""
        return self.model(repo, model).timeout_s or self.repo(repo).timeout_s


def format_value(value: float, kind: str) -> str:
    """Render a hyperparameter for the command line exactly as it is recorded."""
    return str(int(value)) if kind == "int" else repr(float(value))


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def _check_name(name: str, what: str) -> None:
    """Repository and model names become folder names: letters, digits and ``._+-`` only."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{what} name {name!r} must start with a letter or digit and use only letters, "
            "digits and ._+- (it names result folders)"
        )


def _compile_regex(pattern: str, where: str) -> None:
    try:
        with warnings.catch_warnings():  # e.g. "possible nested set": valid, only a hint
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{where}: invalid regex {pattern!r}: {error}") from error


def format_validation_error(error: ValidationError, source: str) -> str:
    """One line per problem, each naming the field path, joined with '; '."""
    parts = []
    for item in error.errors():
        loc = ".".join(str(p) for p in item["loc"]) or "<top level>"
        if item["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown key (check its spelling)")
        else:
            got = repr(item.get("input"))
            got = got if len(got) <= 80 else got[:77] + "..."
            parts.append(f"{loc}: {item['msg']} (got {got})")
    return f"{source}: " + "; ".join(parts)


def read_json(path: Path, what: str) -> Any:
    """Read a JSON object with :func:`codedag.util.io.read_json`'s checks; errors are ConfigError."""
    from codedag.util.io import read_json as read_checked

    return read_checked(path, what, expect=dict, error=ConfigError)


def read_model(file: Path, what: str, model: type[_Model]) -> _Model:
    """The JSON object of ``file`` validated as ``model``; errors are ConfigError (a schema
    violation names the field)."""
    data = read_json(file, what)
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, str(file))) from error


def bundled_path(name: str) -> Path:
    """Path of a file shipped inside ``codedag.energy`` (config, settings, examples)."""
    return Path(str(resources.files("codedag.energy").joinpath(name)))


def load_models_config(path: str | Path | None = None) -> ModelsConfig:
    """Load and validate a models config; ``None`` loads the bundled one.

    Raises:
        ConfigError: unreadable file, invalid JSON, or a schema violation (naming the field).
    """
    file = Path(path) if path is not None else bundled_path("models_config.json")
    config = read_model(file, "models config", ModelsConfig)
    config._base_dir = file.resolve().parent
    return config
