"""``codedag mutate``: train with mutated hyperparameters and measure energy and quality."""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from pathlib import Path
from typing import Any

from codedag.cli.args import NON_NEGATIVE_NUMBER, SEED, integer, number
from codedag.cli.output import print_json, stdout_console

_WEEK_S = 7 * 24 * 3600.0


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``mutate`` subcommand."""
    parser = subparsers.add_parser(
        "mutate",
        parents=[parent],
        help="run training with mutated hyperparameters and measure CPU/GPU energy",
        description=(
            "Run a repository's training script with mutated hyperparameters (or its defaults), "
            "each run in its own process group with a timeout, retries and a cooldown; measure "
            "CPU energy (RAPL, perf) and GPU energy (NVML counter) over each run's exact window; "
            "write results/run_<timestamp>/ with experiment.json, training.log, energy/ and "
            "summary.csv, and record every experiment in results/codedag_energy.sqlite."
        ),
    )
    _what_flags(parser)
    _how_flags(parser)
    _where_flags(parser)
    parser.set_defaults(handler=run)


def _what_flags(parser: argparse.ArgumentParser) -> None:
    """What to run: a registered experiment, a command or a function."""
    what = parser.add_argument_group("what to run (one of)")
    what.add_argument("-l", "--list", action="store_true", help="list repositories and models")
    what.add_argument("-r", "--repo", help="repository name from the models config")
    what.add_argument("-m", "--model", help="model name within the repository")
    what.add_argument(
        "-mt", "--mutate", help="hyperparameters to mutate: comma list or 'all' (none: defaults)"
    )
    what.add_argument(
        "-ec",
        "--experiment-config",
        metavar="SETTINGS",
        help="batch settings file, or a bundled one: default, all, boundary_test",
    )
    what.add_argument("--report", metavar="SESSION_DIR", help="plot a finished session")


def _how_flags(parser: argparse.ArgumentParser) -> None:
    """The mutations, repetitions, energy meters and outputs."""
    how = parser.add_argument_group("how to run")
    how.add_argument(
        "-n",
        "--runs",
        type=integer(1, 10_000, "runs per configuration"),
        help="runs per configuration (default 1)",
    )
    how.add_argument("-g", "--governor", help="CPU governor for the session, e.g. performance")
    how.add_argument("-s", "--seed", type=SEED, help="random seed of the mutations")
    how.add_argument(
        "-mr",
        "--max-retries",
        type=integer(0, 100),
        help="retries of a failed run (default 2)",
    )
    how.add_argument("--results-dir", default="results", help="results folder (default: results)")
    how.add_argument(
        "--cooldown",
        type=number(0, _WEEK_S),
        help="seconds between runs (default: the settings' cooldown_s, else 60)",
    )
    how.add_argument(
        "--timeout",
        type=number(above=0, max_value=_WEEK_S),
        help="seconds before a run is ended (all models)",
    )
    how.add_argument(
        "--retry-pause", type=NON_NEGATIVE_NUMBER, default=5.0, help="seconds before a retry"
    )
    how.add_argument(
        "--gpu-interval",
        type=number(0.001, 60.0),
        default=0.1,
        help="GPU sampling interval in seconds",
    )
    how.add_argument("--models-config", help="models config JSON (default: the bundled one)")
    how.add_argument(
        "--avoid-previous",
        action="store_true",
        help="never draw a configuration an earlier session in --results-dir already ran",
    )
    how.add_argument("--no-echo", action="store_true", help="do not copy training output here")
    how.add_argument("--dry-run", action="store_true", help="show the planned runs and commands")
    how.add_argument("--metric", help="with --report: the quality metric of the Pareto plot")
    how.add_argument("--json", action="store_true", help="machine-readable output")


def _where_flags(parser: argparse.ArgumentParser) -> None:
    """Where the runs go: this machine's GPUs or a Ray cluster."""
    where = parser.add_argument_group("where to run (default: this machine, one run per free GPU)")
    where.add_argument(
        "--executor",
        choices=["local", "ray"],
        help="local: this machine; ray: one Ray task per run on a Ray cluster (codedag[ray])",
    )
    where.add_argument(
        "--address",
        help="Ray cluster: auto, HOST:PORT or ray://HOST:10001 (default: RAY_ADDRESS, "
        "else a new Ray instance on this machine)",
    )
    where.add_argument(
        "--node-retries",
        type=integer(0, 100),
        help="Ray: resubmit a run lost with its worker or node this many times (default 3)",
    )
    where.add_argument(
        "--cpus-per-experiment",
        type=number(above=0, max_value=4096),
        help="Ray: CPUs a run asks for on a cluster without GPUs (default 1)",
    )


def _check_args(args: argparse.Namespace) -> None:
    from codedag.errors import UsageError

    modes = [
        args.list,
        bool(args.experiment_config),
        bool(args.repo or args.model),
        bool(args.report),
    ]
    if sum(modes) != 1:
        raise UsageError(
            "give exactly one of -l/--list, -ec/--experiment-config, -r/--repo with -m/--model, "
            "or --report SESSION_DIR"
        )
    if (args.repo or args.model) and not (args.repo and args.model):
        raise UsageError("-r/--repo and -m/--model go together")
    if args.mutate is not None and not args.repo:
        raise UsageError("-mt/--mutate needs -r/--repo and -m/--model")


def run(args: argparse.Namespace) -> int:
    """List models, plan and run a session, or plot one."""
    _check_args(args)
    from codedag.energy.config import load_models_config

    if args.report:
        return _report(args)
    config = load_models_config(args.models_config)
    if args.list:
        return _list(config, args.json)
    from codedag.energy.jobs import plan_jobs, settings_from_flags
    from codedag.energy.settings import load_settings

    if args.experiment_config:
        settings = load_settings(args.experiment_config, config)
        overrides: dict[str, Any] = {}
        if args.governor is not None:
            overrides["governor"] = args.governor
        if args.max_retries is not None:
            overrides["max_retries"] = args.max_retries
        if args.runs is not None:
            overrides["runs_per_config"] = args.runs
        settings = settings.model_copy(update=overrides)
    else:
        settings = settings_from_flags(
            args.repo,
            args.model,
            args.mutate,
            runs=args.runs or 1,
            max_retries=2 if args.max_retries is None else args.max_retries,
            governor=args.governor,
        )
    settings = _with_executor(args, settings)
    seed = args.seed if args.seed is not None else settings.seed
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    results_dir = Path(args.results_dir)
    previous = None
    if args.avoid_previous:
        from codedag.energy.store import ResultsDB

        previous = ResultsDB(results_dir).hyperparameters
    jobs = plan_jobs(config, settings, seed, previous)
    if args.dry_run:
        return _dry_run(config, jobs, seed, args.json)
    from codedag.energy.store import ResultsDB
    from codedag.util.paths import check_output_dir

    check_output_dir(results_dir, "--results-dir")
    ResultsDB(results_dir)  # a file there that is not our database fails now, not after a run
    return _run_session(args, config, settings, jobs, seed, results_dir)


def _with_executor(args: argparse.Namespace, settings: Any) -> Any:
    """The settings' executor with the command line's flags over it."""
    from codedag.errors import UsageError

    current = settings.executor
    update = {
        key: value
        for key, value in (
            ("kind", args.executor),
            ("address", args.address),
            ("node_retries", args.node_retries),
            ("cpus_per_experiment", args.cpus_per_experiment),
        )
        if value is not None
    }
    executor = current.model_copy(update=update)
    if executor.kind != "ray":
        given = [f for f in ("address", "node_retries", "cpus_per_experiment") if f in update]
        if given:
            flags = ", ".join("--" + f.replace("_", "-") for f in given)
            raise UsageError(f"{flags} only apply with --executor ray")
    return settings.model_copy(update={"executor": executor})


def _make_executor(settings: Any, echo: bool) -> Any:
    """The Ray executor the settings ask for (None: the local one)."""
    spec = settings.executor
    if spec.kind != "ray":
        return None
    from codedag.energy.ray_executor import RayExecutor

    return RayExecutor(
        address=spec.address,
        node_retries=spec.node_retries,
        cpus_per_experiment=spec.cpus_per_experiment,
        echo=echo,
        wanted_governor=settings.governor,
    )


def _run_session(
    args: argparse.Namespace, config: Any, settings: Any, jobs: Any, seed: int, results_dir: Path
) -> int:
    from codedag.devices.gpus import EmptyGPUs, open_gpus
    from codedag.energy.session import EnergySession, SessionOptions

    options = SessionOptions(
        results_dir=results_dir,
        cooldown_s=next(c for c in (args.cooldown, settings.cooldown_s, 60.0) if c is not None),
        timeout_s=args.timeout,
        retry_pause_s=args.retry_pause,
        gpu_interval_s=args.gpu_interval,
        echo=None if (args.no_echo or args.json) else sys.stdout,
        seed=seed,
    )

    # SIGTERM and SIGHUP (terminal closed) end the session like Ctrl-C (the CLI's top level
    # turns them into KeyboardInterrupt): no process is left, finished experiments are kept.
    progress = _progress(options.echo is None and not args.json)
    executor = _make_executor(settings, echo=options.echo is not None)
    gpus = open_gpus() if executor is None else EmptyGPUs("experiments run on Ray nodes")
    # --json: stdout carries the JSON alone (Ray prints its workers' errors to stdout)
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    with gpus, progress, quiet:
        task = progress.add_task("experiments", total=len(jobs))
        options.on_record = lambda record: progress.advance(task)
        session = EnergySession(config, settings, options, gpus=gpus, executor=executor)
        result = session.run(jobs)
    if args.json:
        print_json(
            {
                "session": str(result.path),
                "status": result.status,
                "executor": settings.executor.kind,
                "governor": result.governor,
                "seed": seed,
                "experiments": result.records,
            },
            indent=2,
            default=str,
        )
    else:
        _print_summary(result, seed, config)
    if result.status == "interrupted":
        print("codedag mutate: interrupted; finished experiments are kept", file=sys.stderr)
        return 130
    return 0 if all(r["training_success"] for r in result.records) else 1


def _progress(show: bool) -> Any:
    """A progress bar over experiments on a terminal's stderr (only when training output is
    not echoed, which would tear the bar apart)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not (show and console.is_terminal),
    )


def _print_summary(result: Any, seed: int, config: Any) -> None:
    from rich.table import Table

    console = stdout_console()
    table = Table(title=f"session {result.path.name} ({result.status}, seed {seed})")
    remote = any(r.get("executor") == "ray" for r in result.records)
    columns = ["experiment", "ok", "time s", "changed", "metrics", "CPU J", "GPU J"]
    for column in [*columns, *(["node", "lost"] if remote else [])]:
        table.add_column(column)
    for r in result.records:
        energy = r["energy_metrics"]
        row = [
            r["experiment_id"],
            "yes" if r["training_success"] else f"no: {r['error_message']}",
            f"{r['duration_seconds']:.1f}",
            _changed(r, config.defaults(r["repository"], r["model"])),
            ", ".join(f"{k}={v:g}" for k, v in r["performance_metrics"].items()),
            _joules(energy.get("cpu_energy_total_joules")),
            _joules(energy.get("gpu_energy_total_joules")),
        ]
        if remote:
            node = r.get("node") or {}
            gpu = r.get("gpu") or {}
            where = node.get("hostname") or node.get("ip") or "?"
            row += [where + (f" {gpu.get('name')}" if gpu else ""), str(len(r["node_failures"]))]
        table.add_row(*row)
    console.print(table)
    if result.records:
        first = result.records[0]["energy_metrics"]
        for kind in ("cpu", "gpu"):
            reason = first.get(f"{kind}_energy_unavailable_reason")
            if reason:
                console.print(f"{kind.upper()} energy unavailable: {reason}")
    console.print(f"governor: {result.governor}")
    console.print(f"summary: {result.path / 'summary.csv'}")


def _changed(record: dict[str, Any], defaults: dict[str, float]) -> str:
    values = record["hyperparameters"]
    text = ", ".join(f"{k}={v}" for k, v in values.items() if v != defaults.get(k))
    return text or "defaults"


def _joules(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _list(config: Any, as_json: bool) -> int:
    rows = []
    for name, repo in config.repositories.items():
        for model in repo.models:
            rows.append(
                {
                    "repository": name,
                    "model": model,
                    "hyperparameters": config.defaults(name, model),
                    "path": str(config.repo_dir(name)),
                }
            )
    if as_json:
        print_json(rows, indent=2)
        return 0
    from rich.table import Table

    table = Table(title="models (codedag mutate -r REPO -m MODEL -mt all)")
    for column in ("repository", "model", "hyperparameters (defaults)"):
        table.add_column(column)
    for row in rows:
        defaults = ", ".join(f"{k}={v}" for k, v in row["hyperparameters"].items())
        table.add_row(row["repository"], row["model"], defaults)
    stdout_console().print(table)
    return 0


def _dry_run(config: Any, jobs: Any, seed: int, as_json: bool) -> int:
    import shlex

    rows = [
        {
            "repository": j.repo,
            "model": j.model,
            "mode": j.mode,
            "hyperparameters": j.hyperparameters,
            "mutated": j.mutated,
            "command": config.command(j.repo, j.model, j.hyperparameters),
            "background": j.background.model_dump() if j.background else None,
        }
        for j in jobs
    ]
    if as_json:
        print_json({"seed": seed, "runs": rows}, indent=2)
        return 0
    print(f"{len(rows)} planned run(s), seed {seed}:")
    for i, row in enumerate(rows, 1):
        defaults = config.defaults(row["repository"], row["model"])
        changed = {k: v for k, v in row["hyperparameters"].items() if v != defaults[k]}
        print(f"[{i}] {row['repository']}/{row['model']} ({row['mode']}) {changed or 'defaults'}")
        print(f"    {shlex.join(row['command'])}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from codedag.energy.analysis import report

    summary = report(Path(args.report), metric=args.metric)
    if args.json:
        print_json(summary, indent=2)
        return 0
    print(
        f"plotted {summary['experiments_plotted']} experiment(s); energy axis: {summary['energy_axis']}"
    )
    if summary["note"]:
        print(f"note: {summary['note']}")
    if summary["metric"]:
        print(f"Pareto front ({summary['metric']}): {', '.join(summary['pareto_front'])}")
    for file in summary["files"]:
        print(file)
    return 0
