"""Small hand-built execution DAGs for the optimizer tests."""

from __future__ import annotations

from typing import Any

from codedag.graph.model import ExecutionDAG


def add_call(
    dag: ExecutionDAG, name: str, parent: int | None, key: str, ns: int, depth: int
) -> int:
    node = dag.add_call(
        name=name, context_key=key, depth=depth, total_ns=ns, self_ns=ns, is_builtin=True
    )
    if parent is not None:
        dag.add_edge(parent, node, "calls")
    return node


def add_value(dag: ExecutionDAG, producer: int | None, nbytes: int) -> int:
    value = dag.add_value(name="ndarray", type_name="numpy.ndarray", nbytes=nbytes)
    if producer is not None:
        dag.add_edge(producer, value, "produces")
    return value


def wired_subgraph(dag: ExecutionDAG, parent: int, key: str, variant: str) -> int:
    """A call ``f`` with callees a, b, c, where only the dataflow wiring differs by ``variant``.

    variant "chain": a -> b -> c (a's output feeds b, b's feeds c);
    variant "fork":  a -> b and a -> c (a's output feeds both, b's output is unused).
    Same node names, same node and edge counts, same per-level signatures.
    """
    f = add_call(dag, "pkg.f", parent, f"{key}", 100, 1)
    a = add_call(dag, "pkg.a", f, f"{key}/pkg.a#0", 10, 2)
    va = add_value(dag, a, 8)
    b = add_call(dag, "pkg.b", f, f"{key}/pkg.b#0", 10, 2)
    vb = add_value(dag, b, 8)
    c = add_call(dag, "pkg.c", f, f"{key}/pkg.c#0", 10, 2)
    add_value(dag, c, 8)
    dag.add_edge(va, b, "uses")
    dag.add_edge(vb if variant == "chain" else va, c, "uses")
    dag.nodes[f].total_ns = 130  # type: ignore[union-attr]
    return f


def fake_calibration(
    dag: ExecutionDAG,
    backend_over_original: dict[str, float],
    *,
    original_ns: int = 1_000_000,
    spread_pct: float = 1.0,
    h2d_ns: int = 0,
    device: str = "cpu",
    passthrough_ns: int = 0,
    errors: dict[str, str] | None = None,
) -> Any:
    """A Calibration whose every call of ``name`` takes ``original_ns`` with the library and
    ``original_ns * ratio`` through the migrated path (``ratio`` from ``backend_over_original``)."""
    from codedag.calibrate import Calibration, CallEstimate, DispatchCost, Measurement, Timing

    def timing(median: int) -> Timing:
        half = int(median * spread_pct / 200)
        return Timing(median, median - half, median + half, 9)

    cal = Calibration(device, f"fake {device}")
    cal.dispatch = DispatchCost(0, passthrough_ns)
    for node in dag.calls():
        if node.name not in backend_over_original and node.name not in (errors or {}):
            continue
        error = (errors or {}).get(node.name)
        ratio = backend_over_original.get(node.name, 1.0)
        m = Measurement(
            node.name, "sig", "", device, f"fake {device}",
            original=None if error else timing(original_ns),
            backend=None if error else timing(int(original_ns * ratio)),
            h2d_ns=h2d_ns, error=error,
        )  # fmt: skip
        cal.measurements[f"{node.name}|{node.id}"] = m
        cal.calls[node.id] = CallEstimate(m)
    return cal


FIXED_MIGRATABLE: frozenset[str] = frozenset(
    {
        "cv2.resize",
        "cv2.cvtColor",
        "cv2.flip",
        "cv2.GaussianBlur",
        "cv2.warpAffine",
        "numpy.clip",
        "numpy.stack",
        "numpy.transpose",
    }
)


def builtin_can_migrate(canonical_name: str) -> bool:
    """A fixed migratable set, whatever the op library offers (placement tests stay stable)."""
    return canonical_name in FIXED_MIGRATABLE
