"""Turn a session's raw records into an :class:`ExecutionDAG`: ids, times, context keys, edges."""

from __future__ import annotations

import contextlib
import functools
import gc
import heapq
import os
import sys
from typing import TYPE_CHECKING, Any

from codedag.graph.model import CallNode, ExecutionDAG, ValueNode
from codedag.trace.args import describe_arguments, parameter_defaults
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    ARGS,
    DEPTH,
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_STEP,
    KIND_WRAPPED,
    LIB,
    MEM,
    NAME,
    NL0,
    NL1,
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
        self._versions: dict[str, int] = {}

    # The original incremental API, for building DAGs by hand (tests, other front ends).
    def add_function_node(self, name: str, context: str = "", **fields: Any) -> int:
        """Add a call node named ``name`` with context key ``context``; return its id."""
        return self.dag.add_call(name=name, context_key=context, **fields)

    def add_variable_node(self, name: str, version: int | None = None, **fields: Any) -> int:
        """Add a value node; without ``version`` the next SSA version of ``name`` is used."""
        if version is None:
            version = self._versions.get(name, -1) + 1
        self._versions[name] = max(version, self._versions.get(name, -1))
        return self.dag.add_value(name=name, version=version, **fields)

    def add_edge(self, source: int, target: int, edge_type: str) -> None:
        """Add an edge (``calls``, ``uses`` or ``produces``)."""
        self.dag.add_edge(source, target, edge_type)

    def build(
        self, session: Session, calibration: Calibration, metadata: dict[str, Any]
    ) -> ExecutionDAG:
        """Build the DAG from ``session``'s records and keep it as ``self.dag``."""
        enabled = gc.isenabled()
        gc.disable()  # only acyclic objects are made here; GC passes would only slow it down
        try:
            dag = self._build(session, calibration, metadata)
        finally:
            if enabled:
                gc.enable()
        self.dag = dag
        return dag

    def _build(
        self, session: Session, calibration: Calibration, metadata: dict[str, Any]
    ) -> ExecutionDAG:
        calls, values = session.calls, session.values
        value_by_seq = {v[0]: v for v in values}
        step_uses = _step_inputs(calls, session.uses)
        weights = _step_weights(step_uses, session.produces, value_by_seq)
        totals, selfs = _times(calls, calibration, weights)
        cwd = os.getcwd() + os.sep
        dag = ExecutionDAG(metadata=metadata)
        nodes = dag.nodes
        keys: dict[int, str] = {}
        counters: dict[tuple[int, str], int] = {}
        sites: dict[Any, str] = {}
        summaries: dict[Any, str] = {}
        call_edges: list[tuple[int, int, str]] = []
        ci = vi = 0
        n_calls, n_values = len(calls), len(values)
        while ci < n_calls or vi < n_values:
            if vi >= n_values or (ci < n_calls and calls[ci][SEQ] < values[vi][0]):
                rec = calls[ci]
                seq, parent, name = rec[SEQ], rec[PARENT], rec[NAME]
                count = counters.get((parent, name), 0)
                counters[(parent, name)] = count + 1
                key = f"{keys[parent]}/{name}#{count}" if parent >= 0 else f"{name}#{count}"
                keys[seq] = key
                site = sites.get(rec[SITE])
                if site is None:
                    site = sites[rec[SITE]] = _site(rec[SITE], cwd)
                args = []
                raw_args = rec[ARGS]
                if raw_args is None:  # a step of several operations: what it read
                    raw_args = [(i, ARG_VALUE, v) for i, v in enumerate(step_uses.get(seq, ()))]
                for arg in raw_args:
                    if arg[1] == ARG_VALUE or arg[1] == ARG_SMALL:
                        args.append(_arg(arg, value_by_seq))
                        continue
                    try:
                        text = summaries.get(arg)
                    except TypeError:  # an unhashable scalar payload
                        text = None
                    if text is None:
                        text = _arg(arg, value_by_seq)
                        with contextlib.suppress(TypeError):
                            summaries[arg] = text
                    args.append(text)
                nodes[seq] = CallNode(
                    seq,
                    name,
                    key,
                    site,
                    rec[DEPTH],
                    totals[ci],
                    selfs[ci],
                    rec[MEM],
                    args,
                    _ret(rec[RET], value_by_seq),
                    rec[KIND] != KIND_PY,
                    _arguments(rec, value_by_seq),
                )
                if parent >= 0:
                    call_edges.append((parent, seq, "calls"))
                calls[ci] = None  # type: ignore[call-overload] # free records as nodes are made
                ci += 1
            else:
                v = values[vi]
                nodes[v[0]] = ValueNode(
                    v[0],
                    v[1],
                    v[2],
                    v[3],
                    format_shape(v[4]),
                    format_dtype(v[5]),
                    int(v[6]),
                    v[7],
                )
                vi += 1
        dag._next_id = max(nodes, default=-1) + 1
        edges = dag.edges
        edges.extend(call_edges)
        calls.clear()
        edges.extend((v, c, "uses") for v, c in dict.fromkeys(session.uses))
        edges.extend((c, v, "produces") for c, v in dict.fromkeys(session.produces))
        if any(src > dst for src, dst, _ in edges):
            _renumber(dag)
        return dag


def _step_inputs(calls: list[list[Any]], uses: list[tuple[int, int]]) -> dict[int, list[int]]:
    """Values each step read, in order (``{step seq: [value seqs]}``)."""
    steps = {rec[SEQ] for rec in calls if rec[KIND] == KIND_STEP}
    out: dict[int, list[int]] = {}
    if steps:
        for vseq, cseq in uses:
            if cseq in steps:
                out.setdefault(cseq, []).append(vseq)
    return out


def _step_weights(
    step_uses: dict[int, list[int]],
    produces: list[tuple[int, int]],
    value_by_seq: dict[int, list[Any]],
) -> dict[int, int]:
    """Bytes each step produced: a statement's time is shared by its steps in this proportion."""
    out: dict[int, int] = {}
    for cseq, vseq in produces:
        if cseq in step_uses or cseq not in out:
            v = value_by_seq.get(vseq)
            out[cseq] = out.get(cseq, 0) + (int(v[6]) if v is not None else 0)
    return out


def _renumber(dag: ExecutionDAG) -> None:
    """Renumber nodes in a topological order (steps can produce values made before them).

    Kahn's algorithm, taking the smallest old id first: ids keep the creation order wherever
    the edges allow it.
    """
    nodes, edges = dag.nodes, dag.edges
    indegree = dict.fromkeys(nodes, 0)
    succ: dict[int, list[int]] = {}
    for src, dst, _ in edges:
        indegree[dst] += 1
        succ.setdefault(src, []).append(dst)
    ready = [n for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        node_id = heapq.heappop(ready)
        order.append(node_id)
        for nxt in succ.get(node_id, ()):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    if len(order) != len(nodes):  # a cycle: leave the ids (self_check reports it)
        return
    new_id = {old: new for new, old in enumerate(order)}
    renumbered = {}
    for old in order:
        node = nodes[old]
        node.id = new_id[old]
        renumbered[node.id] = node
    dag.nodes = renumbered
    dag.edges = [(new_id[s], new_id[d], k) for s, d, k in edges]
    dag._next_id = len(order)


def _times(
    calls: list[list[Any]], cal: Calibration, weights: dict[int, int]
) -> tuple[list[int], list[int]]:
    """Total and self time of every record, with the tracer's own cost subtracted.

    Measured hook time inside a call is subtracted exactly; the unmeasured rest (the interpreter
    invoking the hook, skipped events, line events) with calibrated per-event constants. A call's
    total is never below the sum of its callees' totals, so ``self_ns >= 0``. A statement's time
    outside the calls it made is shared by its steps in proportion to the bytes they produced,
    within what its frame has left.
    """
    n = len(calls)
    per_kind = {
        KIND_PY: cal.kept_py_ns,
        KIND_WRAPPED: cal.kept_wrapped_ns,
        KIND_C: cal.kept_c_ns,
        KIND_STEP: 0.0,
    }
    index_of = {rec[SEQ]: i for i, rec in enumerate(calls)}
    skip_ns, line_ns = cal.skip_ns, cal.line_ns
    totals = [0] * n
    child_sum = [0] * n
    desc_cost = [0.0] * n  # unmeasured cost of the recorded calls nested inside each record
    steps_of: dict[int, list[int]] = {}
    for i, rec in enumerate(calls):
        if rec[KIND] == KIND_STEP:
            parent = index_of.get(rec[PARENT])
            if parent is not None:
                steps_of.setdefault(parent, []).append(i)
    for i in range(n - 1, -1, -1):
        rec = calls[i]
        if rec[KIND] == KIND_STEP:
            continue
        own = (
            rec[T1]
            - rec[T0]
            - (rec[OV1] - rec[OV0])
            - (rec[SKIP1] - rec[SKIP0]) * skip_ns
            - (rec[NL1] - rec[NL0]) * line_ns
        )
        if i in steps_of:
            available = max(0, int(own - desc_cost[i]) - child_sum[i])
            shares = _step_times(calls, steps_of[i], totals, desc_cost, index_of, cal, weights)
            scale = min(1.0, available / sum(shares)) if sum(shares) else 0.0
            for j, share in zip(steps_of[i], shares):
                totals[j] = int(share * scale)
                child_sum[i] += totals[j]
        total = max(int(own - desc_cost[i]), child_sum[i], 0)
        totals[i] = total
        parent = index_of.get(rec[PARENT])
        if parent is not None:
            child_sum[parent] += total
            desc_cost[parent] += desc_cost[i] + per_kind[rec[KIND]]
    selfs = [totals[i] - child_sum[i] for i in range(n)]
    return totals, selfs


def _step_times(
    calls: list[list[Any]],
    steps: list[int],
    totals: list[int],
    desc_cost: list[float],
    index_of: dict[int, int],
    cal: Calibration,
    weights: dict[int, int],
) -> list[float]:
    """Time of each step: its statement's time outside recorded calls, shared by weight."""
    per_kind = {
        KIND_PY: cal.kept_py_ns,
        KIND_WRAPPED: cal.kept_wrapped_ns,
        KIND_C: cal.kept_c_ns,
        KIND_STEP: 0.0,
    }
    by_unit: dict[Any, list[int]] = {}
    for j in steps:
        by_unit.setdefault(calls[j][INFO][0], []).append(j)
    out = dict.fromkeys(steps, 0.0)
    for members in by_unit.values():
        rec = calls[members[0]]
        own = (
            rec[T1]
            - rec[T0]
            - (rec[OV1] - rec[OV0])
            - (rec[SKIP1] - rec[SKIP0]) * cal.skip_ns
            - (rec[NL1] - rec[NL0]) * cal.line_ns
        )
        for sibling in rec[INFO][1]:
            k = index_of.get(sibling)
            if k is not None:
                own -= totals[k] + desc_cost[k] + per_kind[calls[k][KIND]]
        own = max(0.0, own)
        weight = [weights.get(calls[j][SEQ], 0) for j in members]
        total_weight = sum(weight)
        for j, w in zip(members, weight):
            out[j] = own * (w / total_weight if total_weight else 1 / len(members))
    return [out[j] for j in steps]


def _site(site: Any, cwd: str) -> str:
    if site is None:
        return ""
    code, lasti = site
    filename, line = code.co_filename, _line_of(code, lasti)
    if filename.startswith(cwd):
        filename = filename[len(cwd) :]
    return f"{filename}:{line}"


def _arguments(rec: list[Any], value_by_seq: dict[int, list[Any]]) -> list[dict[str, Any]] | None:
    """``CallNode.args`` of a library call or a one-operation step (else None)."""
    if rec[KIND] == KIND_STEP:
        return None if rec[ARGS] is None else describe_arguments(rec[ARGS], value_by_seq)
    if rec[LIB] is None or rec[KIND] == KIND_C:
        return None
    if rec[KIND] != KIND_PY:
        return describe_arguments(rec[ARGS], value_by_seq)
    return describe_arguments(rec[ARGS], value_by_seq, rec[INFO], parameter_defaults(rec[NAME]))


def _payload(kind: int, payload: Any, value_by_seq: dict[int, list[Any]]) -> str:
    if kind in (ARG_VALUE, ARG_SMALL):
        v = value_by_seq.get(payload if kind == ARG_VALUE else payload[0])
        if v is None:
            return "?"
        if len(v) < 10:
            v.append(value_summary(v[1], v[4], v[5]))  # once per value
        return str(v[9])
    if kind in (ARG_SCALAR, ARG_OBJ):
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


@functools.lru_cache(maxsize=4096)
def _line_table(code: Any) -> list[tuple[int, int, int | None]]:
    return list(code.co_lines())


def _line_of(code: Any, lasti: int) -> int:
    """Source line of the instruction at byte offset ``lasti`` (what ``f_lineno`` would say)."""
    for start, end, line in _line_table(code):
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


def python_info() -> str:
    """``CPython 3.11.9`` for the DAG's metadata."""
    return f"{sys.implementation.name} {sys.version.split()[0]}"
