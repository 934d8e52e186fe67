"""``codedag trace``: trace a function or one DataLoader batch into an execution DAG."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from codedag.cli.args import integer, nonempty_path
from codedag.errors import TraceError, UsageError
from codedag.graph.model import ExecutionDAG

FORMATS = ("json", "dot", "svg")


def register(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``trace`` subcommand."""
    p = subparsers.add_parser(
        "trace",
        parents=[parent],
        help="trace a data pipeline into an execution DAG",
        description=(
            "Run TARGET (a function without arguments) or one batch of a DataLoader under the "
            "tracer and write the execution DAG (dag.json, dag.dot, dag.svg)."
        ),
    )
    p.add_argument(
        "target", nargs="?", help="path/to/script.py:function or package.module:function"
    )
    p.add_argument(
        "--dataloader",
        metavar="MODULE:FACTORY",
        help="a function returning a torch DataLoader; one batch is traced",
    )
    p.add_argument("--out", required=True, type=nonempty_path, help="output folder")
    p.add_argument(
        "--max-depth",
        type=integer(1, 500, "Python stops at 1000 nested calls"),
        default=10,
        help="deepest call recorded (default 10)",
    )
    p.add_argument("--no-memory", action="store_true", help="do not measure memory per call")
    p.add_argument(
        "--warmup",
        type=integer(0, 1000, "each warm-up runs the whole target"),
        default=1,
        metavar="N",
        help="untraced runs before the traced one: imports, JIT and caches warm (default 1)",
    )
    p.add_argument(
        "--no-lines",
        action="store_true",
        help="record calls only: no steps for operators, subscripts and methods in user code",
    )
    p.add_argument(
        "--format", default="json,dot,svg", help="comma-separated: json,dot,svg (default all)"
    )
    p.add_argument(
        "--include",
        default="",
        metavar="PREFIXES",
        help="comma-separated module prefixes recorded as user code (e.g. your installed package)",
    )
    p.add_argument(
        "--exclude", default="", metavar="PREFIXES", help="comma-separated module prefixes to skip"
    )
    p.add_argument(
        "--max-nodes",
        type=integer(1, 100_000, "Graphviz takes minutes past that"),
        default=1500,
        help="nodes drawn in DOT/SVG",
    )
    p.add_argument("--top", type=integer(1, 10_000), default=15, help="rows in the summary tables")
    p.add_argument(
        "--show",
        action="store_true",
        help="print one sample's chain of calls (time, share, where it runs) and write dag.html: "
        "that chain drawn left to right, and the full DAG to zoom and search",
    )
    p.add_argument(
        "--plan",
        metavar="PLAN",
        help="with --show: a migration_plan.json saying where each call runs",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def _formats(text: str) -> list[str]:
    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UsageError(f"--format {text!r}: expected a comma-separated subset of {FORMATS}")
    return formats


def summarize(dag: ExecutionDAG, top: int) -> dict[str, Any]:
    """Calls aggregated by name (sorted by self time) and the largest values."""
    by_name: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for node in dag.calls():
        row = by_name[node.name]
        row[0] += 1
        row[1] += node.total_ns
        row[2] += node.self_ns
        row[3] = max(row[3], node.mem_bytes)
    calls = [
        {
            "name": k,
            "count": v[0],
            "total_ms": v[1] / 1e6,
            "self_ms": v[2] / 1e6,
            "max_mem_bytes": v[3],
        }
        for k, v in sorted(by_name.items(), key=lambda kv: -kv[1][2])[:top]
    ]
    values = [
        {"id": v.id, "name": v.name, "shape": v.shape, "dtype": v.dtype, "nbytes": v.nbytes}
        for v in sorted(dag.values(), key=lambda v: -v.nbytes)[:top]
    ]
    return {"stats": dag.stats(), "calls": calls, "values": values}


def _print_tables(summary: dict[str, Any], written: list[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    s = summary["stats"]
    console.print(
        f"[bold]{s['calls']}[/] calls, [bold]{s['values']}[/] values, [bold]{s['edges']}[/] edges"
    )
    table = Table(title="Calls by self time")
    table.add_column("function", overflow="fold")
    for col in ("count", "total ms", "self ms", "max mem"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in summary["calls"]:
        table.add_row(
            row["name"],
            str(row["count"]),
            f"{row['total_ms']:.3f}",
            f"{row['self_ms']:.3f}",
            f"{row['max_mem_bytes'] / 1024:.1f} KiB",
        )
    console.print(table)
    if summary["values"]:
        vt = Table(title="Values by size")
        for col in ("id", "value", "shape", "dtype", "size"):
            vt.add_column(col, justify="right" if col in ("id", "size") else "left")
        for v in summary["values"]:
            shape = "" if v["shape"] is None else "x".join(map(str, v["shape"]))
            vt.add_row(
                str(v["id"]), v["name"], shape, v["dtype"] or "", f"{v['nbytes'] / 1024:.1f} KiB"
            )
        console.print(vt)
    for path in written:
        console.print(f"wrote {path}")


def describe_failure(error: BaseException) -> str:
    """``Type: message`` of a user-code exception on one line.

    A DataLoader worker's exception arrives in the main process with the worker's traceback in
    its message; its last line names the original error.
    """
    text = str(error).strip()
    if "Traceback (most recent call last)" in text:
        return text.splitlines()[-1].strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def run(args: argparse.Namespace) -> int:
    """Trace, write the requested formats, print the summary."""
    from codedag.util.paths import check_output_dir, output_lock

    if bool(args.target) == bool(args.dataloader):
        raise UsageError("give exactly one of TARGET or --dataloader MODULE:FACTORY")
    if args.plan and not args.show:
        raise UsageError("--plan goes with --show")
    formats = _formats(args.format)
    check_output_dir(args.out)
    with output_lock(args.out):
        return _trace(args, formats)


def _trace(args: argparse.Namespace, formats: list[str]) -> int:
    from codedag.trace.dot import to_dot, write_visualization
    from codedag.trace.tracer import EnhancedTracer, trace_dataloader
    from codedag.util.targets import load_target

    filter_config: dict[str, Iterable[str]] = {
        "include": [m.strip() for m in args.include.split(",") if m.strip()],
        "exclude": [m.strip() for m in args.exclude.split(",") if m.strip()],
    }
    tracer = EnhancedTracer(
        max_depth=args.max_depth,
        track_memory=not args.no_memory,
        filter_config=filter_config,
        line_level=not args.no_lines,
    )
    out: Path = args.out
    failure: TraceError | None = None
    if args.dataloader:
        factory = load_target(args.dataloader, what="--dataloader", raises=TraceError)
        try:
            loader = factory()
        except Exception as error:
            raise TraceError(
                f"--dataloader {args.dataloader} raised {describe_failure(error)}"
            ) from error
        try:
            trace_dataloader(loader, tracer, warmup=args.warmup)
        except TraceError:
            raise
        except Exception as error:
            raise TraceError(
                f"loading a batch of --dataloader {args.dataloader} raised "
                f"{describe_failure(error)}"
            ) from error
    else:
        target = load_target(args.target, raises=TraceError)
        try:
            for _ in range(args.warmup):
                target()
        except Exception:  # traced below, where it raises again: the partial DAG is kept
            pass
        try:
            tracer.trace(target)
        except Exception as error:
            failure = TraceError(
                f"target {args.target} raised {describe_failure(error)} "
                f"(partial DAG written to {out / 'dag.json'})"
            )
            failure.__cause__ = error
    dag = tracer.dag
    written: list[Path] = []
    if "json" in formats or failure is not None:
        written.append(dag.save(out / "dag.json"))
    if "dot" in formats:
        from codedag.util.io import atomic_write_text

        written.append(atomic_write_text(out / "dag.dot", to_dot(dag, max_nodes=args.max_nodes)))
    if "svg" in formats:
        written.append(write_visualization(dag, out / "dag.svg", max_nodes=args.max_nodes))
    if failure is not None:
        raise failure
    view = None
    if args.show:
        from codedag.cli.chain import print_chain, write_chain_page

        view, page = write_chain_page(dag, out, args.plan, written)
        written.append(page)
    summary = summarize(dag, args.top)
    if args.json:
        print(json.dumps({**summary, "written": [str(p) for p in written]}, indent=2))
    else:
        _print_tables(summary, written)
        if view is not None:
            print_chain(view)
    return 0
