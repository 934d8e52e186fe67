"""``codedag trace``: trace a function or one DataLoader batch into an execution DAG."""

from __future__ import annotations

import argparse
import logging
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.cli.args import check_loader_source, integer, loader_source, nonempty_path
from codedag.cli.output import print_json
from codedag.errors import TraceError, UsageError
from codedag.util.drawing import SVG_MAX_NODES

if TYPE_CHECKING:
    from codedag.graph.model import ExecutionDAG
    from codedag.report.dag_drawing import Drawing
    from codedag.trace.tracer import EnhancedTracer

log = logging.getLogger(__name__)

FORMATS = ("json", "dot", "svg")


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
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
    loader_source(
        p,
        "path/to/script.py:function or package.module:function",
        "a function returning a torch DataLoader; one batch is traced",
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
        help="nodes written to dag.dot (default 1500)",
    )
    p.add_argument(
        "--svg-max-nodes",
        type=integer(1, 100_000, "Graphviz takes minutes past that"),
        default=SVG_MAX_NODES,
        metavar="N",
        help="largest DAG drawn node by node in dag.svg; a larger one is drawn coarsened "
        f"(default {SVG_MAX_NODES}: Graphviz takes seconds past that)",
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
    drawing = summary.get("drawing")
    if drawing:
        console.print(coarsened_note(drawing), highlight=False, soft_wrap=True)
    for path in written:
        console.print(f"wrote {path}", highlight=False, soft_wrap=True)


def _coarsened_summary(drawing: Drawing, full_dot: Path, dot_max_nodes: int) -> dict[str, Any]:
    return {
        "coarsened": True,
        "shows": drawing.shows,
        "nodes": drawing.nodes,
        "dag_nodes": drawing.dag_nodes,
        "full_dot": str(full_dot),
        "full_dot_nodes": min(drawing.dag_nodes, dot_max_nodes),
    }


def coarsened_note(drawing: dict[str, Any]) -> str:
    """One line: what a coarsened dag.svg shows and where every node is."""
    cut = drawing["full_dot_nodes"] < drawing["dag_nodes"]
    return (
        f"dag.svg is coarsened: it draws {drawing['shows']}, {drawing['nodes']} nodes for "
        f"the DAG's {drawing['dag_nodes']} (--svg-max-nodes); the DAG node by node is in "
        f"{drawing['full_dot']}"
        + (f" (first {drawing['full_dot_nodes']}: --max-nodes)" if cut else "")
    )


def write_drawing(
    dag: ExecutionDAG, out: Path, svg_max_nodes: int, dot_max_nodes: int, dot_written: bool
) -> tuple[Drawing, list[Path]]:
    """Write ``dag.svg``: the DAG, coarsened when it has more than ``svg_max_nodes`` nodes
    (:func:`~codedag.report.dag_drawing.choose_drawing`), with ``dag.dot`` beside a coarsened
    drawing. Without ``dot`` (or when it fails) the drawing's DOT is written instead: ``dag.dot``,
    or ``dag.coarsened.dot`` for a coarsened one.

    Returns:
        The drawing and the files written.
    """
    import shutil

    from codedag.report.dag_drawing import choose_drawing
    from codedag.trace.dot import INSTALL_HINT, render_svg, to_dot
    from codedag.util.io import atomic_write_bytes, atomic_write_text

    drawing = choose_drawing(dag, svg_max_nodes)
    missing = shutil.which("dot") is None
    svg = None if missing else render_svg(drawing.dot_text)
    full_dot = out / "dag.dot"
    written: list[Path] = []
    if not dot_written and (drawing.coarsened or svg is None):
        written.append(atomic_write_text(full_dot, to_dot(dag, max_nodes=dot_max_nodes)))
    svg_path = out / "dag.svg"
    if svg is not None:
        written.append(atomic_write_bytes(svg_path, svg))
        return drawing, written
    drawn = full_dot
    if drawing.coarsened:
        drawn = atomic_write_text(out / "dag.coarsened.dot", drawing.dot_text)
        written.append(drawn)
    if missing:
        log.warning(
            "the dot program is missing, so no dag.svg. To get it: %s",
            INSTALL_HINT.format(dot=drawn, svg=svg_path),
        )
    else:
        log.warning("wrote %s instead of %s", drawn, svg_path)
    return drawing, written


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

    check_loader_source(args)
    if args.plan and not args.show:
        raise UsageError("--plan goes with --show")
    formats = _formats(args.format)
    check_output_dir(args.out)
    with output_lock(args.out):
        return _trace(args, formats)


def write_outputs(
    dag: ExecutionDAG, args: argparse.Namespace, formats: list[str], failed: bool
) -> tuple[list[Path], Drawing | None]:
    """Write the requested formats (``dag.json`` always after a failure); each file once."""
    from codedag.trace.dot import to_dot
    from codedag.util.io import atomic_write_text

    out: Path = args.out
    written: list[Path] = []
    if "json" in formats or failed:
        written.append(dag.save(out / "dag.json"))
    if "dot" in formats:
        written.append(atomic_write_text(out / "dag.dot", to_dot(dag, max_nodes=args.max_nodes)))
    drawing = None
    if "svg" in formats:
        dot_written = "dot" in formats
        drawing, paths = write_drawing(dag, out, args.svg_max_nodes, args.max_nodes, dot_written)
        written.extend(paths)
    return written, drawing


def make_tracer(args: argparse.Namespace) -> EnhancedTracer:
    """The tracer ``trace``'s flags configure (depth, memory, include/exclude, line steps)."""
    from codedag.trace.tracer import EnhancedTracer

    filter_config: dict[str, Iterable[str]] = {
        "include": [m.strip() for m in args.include.split(",") if m.strip()],
        "exclude": [m.strip() for m in args.exclude.split(",") if m.strip()],
    }
    return EnhancedTracer(
        max_depth=args.max_depth,
        track_memory=not args.no_memory,
        filter_config=filter_config,
        line_level=not args.no_lines,
    )


def trace_loader(spec: str, tracer: EnhancedTracer, warmup: int) -> None:
    """Trace one batch of the DataLoader that ``spec`` (``MODULE:FACTORY``) returns into
    ``tracer.dag``.

    Raises:
        TraceError: the factory is not found or raised, or loading the batch raised.
    """
    from codedag.trace.tracer import trace_dataloader
    from codedag.util.targets import load_target

    factory = load_target(spec, what="--dataloader", raises=TraceError)
    try:
        loader = factory()
    except Exception as error:
        raise TraceError(f"--dataloader {spec} raised {describe_failure(error)}") from error
    try:
        trace_dataloader(loader, tracer, warmup=warmup)
    except TraceError:
        raise
    except Exception as error:
        raise TraceError(
            f"loading a batch of --dataloader {spec} raised {describe_failure(error)}"
        ) from error


def _trace(args: argparse.Namespace, formats: list[str]) -> int:
    from codedag.util.targets import load_target

    tracer = make_tracer(args)
    out: Path = args.out
    failure: TraceError | None = None
    if args.dataloader:
        trace_loader(args.dataloader, tracer, args.warmup)
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
    written, drawing = write_outputs(dag, args, formats, failure is not None)
    if failure is not None:
        raise failure
    view = None
    if args.show:
        from codedag.cli.chain import print_chain, write_chain_page

        view, page = write_chain_page(dag, out, args.plan, written)
        written.append(page)
    summary = summarize(dag, args.top)
    if drawing is not None and drawing.coarsened:
        summary["drawing"] = _coarsened_summary(drawing, out / "dag.dot", args.max_nodes)
    if args.json:
        print_json({**summary, "written": [str(p) for p in written]}, indent=2)
    else:
        _print_tables(summary, written)
        if view is not None:
            print_chain(view)
    return 0
