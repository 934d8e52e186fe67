"""``codedag experiment new``: one folder per Kaggle competition, from templates.

Layout::

    experiments/
      docker/Dockerfile.pytorch, Dockerfile.tensorflow
      kaggle_NAME/requirements.txt, experiment_config.json, baseline.py, optimization.py
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from codedag.errors import ConfigError
from codedag.util.io import atomic_write_text

FRAMEWORKS = ("pytorch", "tensorflow")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_FILES = ("baseline.py", "optimization.py", "requirements.txt", "experiment_config.json")


@dataclass(frozen=True)
class Scaffold:
    """What ``new_experiment`` created."""

    folder: Path
    files: list[Path]


def experiment_folder(root: Path, name: str) -> Path:
    """``root/kaggle_NAME``."""
    return Path(root) / f"kaggle_{name}"


def class_prefix(name: str) -> str:
    """CamelCase identifier from a competition slug: ``birdclef_2023`` -> ``Birdclef2023``."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name) if w]
    prefix = "".join(w[:1].upper() + w[1:] for w in words)
    return prefix if prefix[:1].isalpha() else "Kaggle" + prefix


def validate_name(name: str) -> str:
    """Check a competition name: letters, digits, ``_`` and ``-``, at most 64 characters."""
    if not _NAME.match(name):
        raise ConfigError(
            f"experiment name must be letters, digits, '_' or '-' (at most 64), got {name!r}"
        )
    return name


def _template(path: str) -> str:
    return resources.files("codedag.experiments").joinpath("templates").joinpath(path).read_text()


def new_experiment(
    name: str, framework: str = "pytorch", root: Path = Path("experiments"), force: bool = False
) -> Scaffold:
    """Create ``root/kaggle_NAME`` and ``root/docker`` from the templates.

    Raises:
        ConfigError: bad name or framework, or the folder exists and ``force`` is false.
    """
    validate_name(name)
    if framework not in FRAMEWORKS:
        raise ConfigError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    folder = experiment_folder(root, name)
    if folder.exists() and any(folder.iterdir()) and not force:
        raise ConfigError(f"{folder} already exists; use --force to overwrite its template files")
    values = {
        "name": name,
        "title": f"Kaggle {name} ({framework})",
        "class_prefix": class_prefix(name),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        created = []
        for filename in _FILES:
            text = Template(_template(f"{framework}/{filename}.tmpl")).substitute(values)
            target = folder / filename
            atomic_write_text(target, text)  # a link planted there is refused
            created.append(target)
        docker = Path(root) / "docker"
        docker.mkdir(parents=True, exist_ok=True)
        for flavour in FRAMEWORKS:
            target = docker / f"Dockerfile.{flavour}"
            if force or not target.exists():
                atomic_write_text(target, _template(f"docker/Dockerfile.{flavour}"))
                created.append(target)
    except OSError as e:
        raise ConfigError(f"cannot write the experiment into {folder}: {e.strerror}") from e
    return Scaffold(folder, created)
