"""Writing the optimizer's stage results: JSON for each pass, DOT for the coarsened graph."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.partition import Partition
from codedag.util.io import atomic_write_json, atomic_write_text
from codedag.util.text import dot_string

FILES = (
    "coarsening_result.json",
    "coarsening_graph.dot",
    "kway_partition.json",
    "optimized_partition.json",
    "migration_plan.json",
)
PARTITION_COLORS = (
    "#cfe2f3",
    "#f4cccc",
    "#d9ead3",
    "#fff2cc",
    "#ead1dc",
    "#d0e0e3",
    "#fce5cd",
    "#d9d2e9",
)
_EDGE_STYLE = {"calls": "solid", "uses": "dashed", "produces": "bold"}


def coarse_dot(dag: CoarsenedDAG, partitions: list[Partition] | None = None) -> str:
    """Graphviz DOT of the coarsened DAG; nodes show name and instance count, colored by partition."""
    part_of = {n: p.id for p in partitions or [] for n in p.nodes}
    lines = ["digraph coarsened {", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    for node in dag.nodes.values():
        label = node.name if node.instance_count == 1 else f"{node.name} x{node.instance_count}"
        if node.kind == "call":
            label += f"\n{node.total_ns / 1e6:.3f} ms"
        shape = "box" if node.kind == "call" else "ellipse"
        color = (
            PARTITION_COLORS[part_of[node.id] % len(PARTITION_COLORS)]
            if node.id in part_of
            else "white"
        )
        lines.append(
            f"  n{node.id} [label={dot_string(label)}, shape={shape}, style=filled, "
            f'fillcolor="{color}"];'
        )
    for src, dst, kind in dag.edges:
        lines.append(f"  n{src} -> n{dst} [style={_EDGE_STYLE.get(kind, 'solid')}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def partitions_dict(partitions: list[Partition], stats: dict[str, Any]) -> dict[str, Any]:
    """Plain data of a partitioning and the statistics of the pass that made it."""
    return {
        "schema_version": 1,
        "partitions": [p.to_dict() for p in partitions],
        "statistics": stats,
    }


def write_results(out_dir: Path, result: Mapping[str, Any]) -> list[Path]:
    """Write the five stage files of :meth:`OptimizerManager.optimize` into ``out_dir``."""
    coarse: CoarsenedDAG = result["coarsened_dag"]
    stats = result["statistics"]
    refined = result["optimized_partitions"]
    return [
        atomic_write_json(out_dir / FILES[0], coarse.to_dict()),
        atomic_write_text(out_dir / FILES[1], coarse_dot(coarse, refined)),
        atomic_write_json(
            out_dir / FILES[2], partitions_dict(result["kway_partitions"], stats["partitioning"])
        ),
        atomic_write_json(out_dir / FILES[3], partitions_dict(refined, stats["iteration"])),
        atomic_write_json(out_dir / FILES[4], result["migration_plan"]),
    ]
