"""``codedag env check|build|setup|run``: the experiment environment, Docker or --local."""

from __future__ import annotations

import argparse
from pathlib import Path

from codedag.cli.args import nonempty_path


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``env`` subcommand and its verbs."""
    parser = subparsers.add_parser(
        "env",
        parents=[parent],
        help="check, build, set up and run experiment environments (Docker or --local)",
        description=(
            "The experiment environment: Docker images per framework and per experiment, "
            "or the current Python environment with --local."
        ),
    )
    parser.add_argument(
        "--root", type=nonempty_path, default=Path("experiments"), help="experiments folder"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    check = verbs.add_parser("check", parents=[parent], help="Docker engine, GPUs, experiments")
    check.set_defaults(handler=run_check)
    build = verbs.add_parser("build", parents=[parent], help="build the framework base images")
    build.add_argument("--framework", choices=["pytorch", "tensorflow"], action="append")
    build.set_defaults(handler=run_build)
    setup = verbs.add_parser("setup", parents=[parent], help="install an experiment's requirements")
    setup.add_argument("name", help="experiment name (experiments/kaggle_NAME)")
    setup.add_argument("--local", action="store_true", help="pip install into this environment")
    setup.set_defaults(handler=run_setup)
    run = verbs.add_parser("run", parents=[parent], help="run an experiment mode")
    run.add_argument("name", help="experiment name (experiments/kaggle_NAME)")
    run.add_argument("mode", choices=["baseline", "optimization"])
    run.add_argument("--local", action="store_true", help="run in this Python environment")
    run.set_defaults(handler=run_run)


def run_check(args: argparse.Namespace) -> int:
    """Print Docker, GPU and experiment status."""
    from codedag.devices.gpus import detect_gpus
    from codedag.experiments.docker import probe_docker

    status = probe_docker()
    gpus = detect_gpus()
    print(f"docker client : {status.client or 'missing'}")
    print(f"docker engine : {status.engine or 'unreachable'} ({status.reason})")
    print(f"nvidia runtime: {'yes' if status.nvidia_runtime else 'no'}")
    print(f"GPUs          : {gpus.count} ({gpus.source})")
    experiments = sorted(p.name for p in args.root.glob("kaggle_*") if p.is_dir())
    print(f"experiments   : {', '.join(experiments) if experiments else 'none'} in {args.root}")
    if not status.usable:
        print("without an engine, use: codedag env run NAME MODE --local")
    return 0


def run_build(args: argparse.Namespace) -> int:
    """Build base images (needs a Docker engine)."""
    from codedag.experiments.docker import probe_docker
    from codedag.experiments.environment import build_images

    frameworks = tuple(args.framework) if args.framework else ("pytorch", "tensorflow")
    for tag in build_images(args.root, probe_docker(), frameworks):
        print(f"built {tag}")
    return 0


def run_setup(args: argparse.Namespace) -> int:
    """Install requirements into an image or locally."""
    from codedag.experiments.docker import probe_docker
    from codedag.experiments.environment import load_experiment, setup

    experiment = load_experiment(args.root, args.name)
    where = setup(experiment, None if args.local else probe_docker(), args.local)
    print(f"{experiment.name}: requirements installed in {where}")
    return 0


def run_run(args: argparse.Namespace) -> int:
    """Run a mode; exit with the experiment's exit code."""
    from codedag.experiments.environment import load_experiment, run

    experiment = load_experiment(args.root, args.name)
    return run(experiment, args.mode, args.local)
