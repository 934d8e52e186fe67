"""``codedag env check|build|setup|run``: the experiment environment, in Docker or locally.

With a reachable Docker engine, ``build`` makes the framework base images from
``experiments/docker``, ``setup`` makes an experiment image with its ``requirements.txt``, and
``run`` runs ``optimization.py --modes MODE`` in a container (``--gpus all`` when the NVIDIA runtime
exists). ``--local`` does the same in the current Python environment, without Docker.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codedag.errors import ConfigError, ExperimentError
from codedag.experiments.docker import DockerStatus, probe_docker
from codedag.experiments.scaffold import FRAMEWORKS, experiment_folder, validate_name
from codedag.util.io import read_json

log = logging.getLogger(__name__)

MODES = ("baseline", "optimization")
IMAGE_PREFIX = "codedag"


@dataclass(frozen=True)
class Experiment:
    """A scaffolded experiment folder and its settings."""

    name: str
    folder: Path
    framework: str

    @property
    def image(self) -> str:
        """Docker image tag of this experiment."""
        return f"{IMAGE_PREFIX}-kaggle-{self.name.lower()}"


def load_experiment(root: Path, name: str) -> Experiment:
    """Find ``root/kaggle_NAME`` and read its framework from ``experiment_config.json``.

    Raises:
        ConfigError: the folder or its files are missing or malformed.
    """
    validate_name(name)
    folder = experiment_folder(root, name)
    if not folder.is_dir():
        known = sorted(p.name[len("kaggle_") :] for p in Path(root).glob("kaggle_*") if p.is_dir())
        hint = f" (known: {', '.join(known)})" if known else ""
        raise ConfigError(
            f"no experiment {name!r}: {folder} does not exist{hint}; "
            f"create it with: codedag experiment new {name}"
        )
    config = read_json(
        folder / "experiment_config.json", "experiment config", expect=dict, error=ConfigError
    )
    framework = config.get("framework", "pytorch")
    if framework not in FRAMEWORKS:
        raise ConfigError(
            f"{folder / 'experiment_config.json'}: framework must be one of {FRAMEWORKS}, "
            f"got {framework!r}"
        )
    for required in ("baseline.py", "optimization.py"):
        if not (folder / required).is_file():
            raise ConfigError(f"{folder / required} is missing")
    return Experiment(name, folder, framework)


def require_engine(status: DockerStatus, verb: str, local_hint: bool = True) -> None:
    """Raise one clear line when Docker cannot do ``verb`` here."""
    if not status.usable:
        hint = "; add --local to use the current Python environment instead" if local_hint else ""
        raise ExperimentError(f"cannot {verb} without a Docker engine ({status.reason}){hint}")


def _source_root() -> Path | None:
    """The codedag checkout this package runs from, when it is one (for the image build)."""
    candidate = Path(__file__).resolve().parents[3]
    return candidate if (candidate / "pyproject.toml").is_file() else None


def _docker(args: list[str]) -> int:
    log.info("$ docker %s", " ".join(args))
    return subprocess.call(["docker", *args])


def build_images(
    root: Path, status: DockerStatus, frameworks: tuple[str, ...] = FRAMEWORKS
) -> list[str]:
    """Build the base images ``codedag-<framework>`` from ``root/docker``; returns their tags."""
    require_engine(status, "build images", local_hint=False)
    docker_dir = Path(root) / "docker"
    tags = []
    for framework in frameworks:
        dockerfile = docker_dir / f"Dockerfile.{framework}"
        if not dockerfile.is_file():
            raise ConfigError(f"{dockerfile} is missing; run codedag experiment new first")
        with tempfile.TemporaryDirectory(prefix="codedag-build-") as context:
            source = Path(context) / "codedag-src"
            checkout = _source_root()
            if checkout is not None:
                shutil.copytree(
                    checkout,
                    source,
                    ignore=shutil.ignore_patterns(".venv", ".git", "results", "__pycache__"),
                )
            else:
                source.mkdir()
            tag = f"{IMAGE_PREFIX}-{framework}"
            if _docker(["build", "-f", str(dockerfile), "-t", tag, context]) != 0:
                raise ExperimentError(f"docker build of {tag} failed (see the output above)")
            tags.append(tag)
    return tags


def setup(experiment: Experiment, status: DockerStatus | None, local: bool) -> str:
    """Install the experiment's requirements: an image on top of the base one, or locally."""
    requirements = experiment.folder / "requirements.txt"
    if local:
        command = [sys.executable, "-m", "pip", "install", "-r", str(requirements)]
        log.info("$ %s", " ".join(command))
        if subprocess.call(command) != 0:
            raise ExperimentError(f"pip could not install {requirements}")
        return "local environment"
    assert status is not None
    require_engine(status, "set up an image")
    dockerfile = (
        f"FROM {IMAGE_PREFIX}-{experiment.framework}\n"
        "COPY requirements.txt /tmp/requirements.txt\n"
        "RUN pip install --no-cache-dir -r /tmp/requirements.txt\n"
    )
    with tempfile.TemporaryDirectory(prefix="codedag-setup-") as context:
        shutil.copy(requirements, Path(context) / "requirements.txt")
        (Path(context) / "Dockerfile").write_text(dockerfile)
        if _docker(["build", "-t", experiment.image, context]) != 0:
            raise ExperimentError(f"docker build of {experiment.image} failed")
    return experiment.image


def run_command(
    experiment: Experiment, mode: str, local: bool, status: DockerStatus | None
) -> list[str]:
    """The command that runs ``mode`` of the experiment, in a container or locally."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    script = ["optimization.py", "--modes", mode]
    if local:
        return [sys.executable, *script]
    assert status is not None
    require_engine(status, "run a container")
    command = ["docker", "run", "--rm", "-v", f"{experiment.folder.resolve()}:/workspace"]
    if status.nvidia_runtime:
        command += ["--gpus", "all"]
    return [*command, "-w", "/workspace", experiment.image, "python", *script]


def run(experiment: Experiment, mode: str, local: bool, status: DockerStatus | None = None) -> int:
    """Run one mode; the child's output streams through; returns its exit code."""
    if not local and status is None:
        status = probe_docker()
    command = run_command(experiment, mode, local, status)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if local:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(experiment.folder), env.get("PYTHONPATH", "")) if p
        )
    log.info("$ %s", " ".join(command))
    return subprocess.call(command, cwd=experiment.folder, env=env)
