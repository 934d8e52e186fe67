"""Turn a session's raw records into an :class:`ExecutionDAG`: ids, times, context keys, edges."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from codedag.graph.model import ExecutionDAG
from codedag.trace.recorder import (
    ARG_CONTAINER,
    ARG_SCALAR,
    ARG_TYPE,
    ARG_VALUE,
    ARGS,
    DEPTH,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_WRAPPED,
    MEM,
    N0,
    N1,
    NAME,
    OV0,
    OV1,
    PARENT,
    RET,
    SEQ,
    SITE,
    SKIP0,
    SKIP1,
    T0,
    T1,
)
from codedag.trace.values import format_dtype, format_shape, short_repr, value_summary

if TYPE_CHECKING:
    from codedag.trace.calibrate import Calibration
    from codedag.trace.recorder import Session


class DAGBuilder:
    """Holds the DAG of the last tracing window (``tracer.dag_builder.dag``) and builds it."""

    def __init__(self) -> None:
        self.dag = ExecutionDAG()

    def build(
        self, session: Session, calibration: Calibration, metadata: dict[str, Any]
    ) -> ExecutionDAG:
        """Build the DAG from ``session``'s records and keep it as ``self.dag``."""
        calls, values = session.calls, session.values
        totals, selfs = _times(calls, calibration)
        value_by_seq = {v[0]: v for v in values}
        cwd = os.getcwd() + os.sep
        dag = ExecutionDAG(metadata=metadata)
        keys: dict[int, str] = {}
        counters: dict[tuple[int, str], int] = {}
        ci = vi = 0
        n_calls, n_values = len(calls), len(values)
        while ci < n_calls or vi < n_values:
            if vi >= n_values or (ci < n_calls and calls[ci][SEQ] < values[vi][0]):
                rec = calls[ci]
                parent, name = rec[PARENT], rec[NAME]
                count = counters.get((parent, name), 0)
                counters[(parent, name)] = count + 1
                segment = f"{name}#{count}"
                key = f"{keys[parent]}/{segment}" if parent in keys else segment
                keys[rec[SEQ]] = key
                dag.add_call(
                    id=rec[SEQ],
                    name=name,
                    context_key=key,
                    call_site=_site(rec[SITE], cwd),
                    depth=rec[DEPTH],
                    total_ns=totals[ci],
                    self_ns=selfs[ci],
                    mem_bytes=rec[MEM],
                    arg_summaries=[_arg(a, value_by_seq) for a in rec[ARGS]],
                    return_summary=_ret(rec[RET], value_by_seq),
                    is_builtin=rec[KIND] != KIND_PY,
                )
                ci += 1
            else:
                v = values[vi]
                dag.add_value(
                    id=v[0],
                    name=v[1],
                    version=v[2],
                    type_name=v[3],
                    shape=format_shape(v[4]),
                    dtype=format_dtype(v[5]),
                    nbytes=int(v[6]),
                    device=v[7],
                )
                vi += 1
        edges = dag.edges
        edges.extend((rec[PARENT], rec[SEQ], "calls") for rec in calls if rec[PARENT] >= 0)
        edges.extend((v, c, "uses") for v, c in session.uses)
        edges.extend((c, v, "produces") for c, v in session.produces)
        self.dag = dag
        return dag


def _times(calls: list[list[Any]], cal: Calibration) -> tuple[list[int], list[int]]:
    """Total and self time of every record, with the tracer's own cost subtracted.

    Measured hook time inside a call is subtracted exactly; the unmeasured rest (the interpreter
    invoking the hook, skipped events) with calibrated per-event constants. A call's total is
    never below the sum of its callees' totals, so ``self_ns >= 0``.
    """
    n = len(calls)
    # prefix counts of recorded calls by kind, to count each record's descendants by kind
    prefix = [[0] * (n + 1) for _ in range(3)]
    for i, rec in enumerate(calls):
        for k in range(3):
            prefix[k][i + 1] = prefix[k][i] + (rec[KIND] == k)
    per_kind = {KIND_PY: cal.kept_py_ns, KIND_WRAPPED: cal.kept_wrapped_ns, KIND_C: cal.kept_c_ns}
    index_of = {rec[SEQ]: i for i, rec in enumerate(calls)}
    totals = [0] * n
    child_sum = [0] * n
    for i in range(n - 1, -1, -1):
        rec = calls[i]
        nested = rec[N1] - rec[N0]
        own = rec[T1] - rec[T0] - (rec[OV1] - rec[OV0]) - (rec[SKIP1] - rec[SKIP0]) * cal.skip_ns
        for k, cost in per_kind.items():
            own -= (prefix[k][i + 1 + nested] - prefix[k][i + 1]) * cost
        total = max(int(own), child_sum[i], 0)
        totals[i] = total
        parent = index_of.get(rec[PARENT])
        if parent is not None:
            child_sum[parent] += total
    selfs = [totals[i] - child_sum[i] for i in range(n)]
    return totals, selfs


def _site(site: Any, cwd: str) -> str:
    if site is None:
        return ""
    filename, line = site
    if filename.startswith(cwd):
        filename = filename[len(cwd) :]
    return f"{filename}:{line}"


def _payload(kind: int, payload: Any, value_by_seq: dict[int, list[Any]]) -> str:
    if kind == ARG_VALUE:
        v = value_by_seq.get(payload)
        return "?" if v is None else value_summary(v[1], v[4], v[5])
    if kind == ARG_SCALAR:
        return short_repr(payload)
    if kind == ARG_CONTAINER:
        return f"{payload[0]}[{payload[1]}]"
    if kind == ARG_TYPE:
        return f"<{payload.__name__}>"
    return "?"


def _arg(arg: tuple[Any, int, Any], value_by_seq: dict[int, list[Any]]) -> str:
    label, kind, payload = arg
    text = _payload(kind, payload, value_by_seq)
    return text if isinstance(label, int) else f"{label}={text}"


def _ret(ret: Any, value_by_seq: dict[int, list[Any]]) -> str | None:
    return None if ret is None else _payload(ret[0], ret[1], value_by_seq)


def python_info() -> str:
    """``CPython 3.11.9`` for the DAG's metadata."""
    return f"{sys.implementation.name} {sys.version.split()[0]}"
