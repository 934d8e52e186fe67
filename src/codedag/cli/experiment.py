"""``codedag experiment new NAME``: scaffold a Kaggle competition experiment."""

from __future__ import annotations

import argparse
from pathlib import Path

from codedag.cli.args import nonempty_path


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``experiment`` subcommand."""
    parser = subparsers.add_parser(
        "experiment",
        parents=[parent],
        help="scaffold a per-competition experiment folder",
        description="Manage per-competition experiment folders (experiments/kaggle_NAME).",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    new = verbs.add_parser(
        "new",
        parents=[parent],
        help="create experiments/kaggle_NAME from templates",
        description=(
            "Create experiments/kaggle_NAME with requirements.txt, experiment_config.json, "
            "baseline.py (the original training code: Dataset, Model, CONFIG) and optimization.py "
            "(monitor, trace, optimize and migrate around it), plus experiments/docker/Dockerfile.*"
        ),
    )
    new.add_argument("name", help="competition name, e.g. birdclef_2023")
    new.add_argument("--framework", choices=["pytorch", "tensorflow"], default="pytorch")
    new.add_argument(
        "--root", type=nonempty_path, default=Path("experiments"), help="experiments folder"
    )
    new.add_argument("--force", action="store_true", help="overwrite existing template files")
    new.set_defaults(handler=run_new)


def run_new(args: argparse.Namespace) -> int:
    """Create the folder and list what was written."""
    import importlib.util

    from codedag.experiments.scaffold import new_experiment
    from codedag.util.paths import check_output_dir

    check_output_dir(args.root, "--root")
    scaffold = new_experiment(args.name, args.framework, args.root, force=args.force)
    for path in scaffold.files:
        print(f"created {path}")
    if args.framework == "tensorflow" and importlib.util.find_spec("tensorflow") is None:
        print(
            "note: TensorFlow is not installed here; install it (pip install 'codedag[tensorflow]')"
            " before running this experiment"
        )
    print(f"next: codedag env run {args.name} baseline --local  (or build a Docker image first)")
    return 0
