"""Graph coarsening: merge repeated, isomorphic subgraphs into cluster nodes.

1. Anchors: call nodes whose normalized name (``#i`` and ``:line`` suffixes removed) occurs twice
   or more.
2. From each anchor a subgraph grows along ``calls`` edges down to ``max_depth`` levels, plus the
   values those calls produce.
3. Subgraphs of one anchor name are grouped into exact isomorphism classes
   (:mod:`codedag.optimize.isomorphism`: order-invariant hash, then a verified isomorphism).
4. Each class of two or more instances becomes one set of cluster nodes: position ``i`` of every
   instance maps onto position ``i`` of the representative (the first instance).

Anchor names are processed outermost first, and nodes merged once are not reused at that level.
The pass repeats on its own output (multilevel coarsening, ``max_levels``), so per-sample work that
was first merged per batch is merged again across batches. A merge that would create a cycle (an
edge between two instances of one class) is undone. Times and memory are summed, so totals are
preserved.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

import rustworkx as rx

from codedag.errors import ConfigError, GraphError
from codedag.optimize.coarse import Cluster, ClusterNode, CoarsenedDAG
from codedag.optimize.isomorphism import Instance, MatchStats, isomorphism_classes

if TYPE_CHECKING:
    from codedag.graph.model import ExecutionDAG

log = logging.getLogger(__name__)

KIND_CODES: dict[str, int] = {"calls": 0, "uses": 1, "produces": 2}
_SUFFIX = re.compile(r"(#\d+|:\d+)+$")


def normalize_name(name: str) -> str:
    """Drop instance (``#3``) and line (``:42``) suffixes: ``cv2.resize#3`` -> ``cv2.resize``."""
    return _SUFFIX.sub("", name)


class _Level:
    """One level of the multilevel coarsening: nodes, labels and adjacency by id."""

    def __init__(self) -> None:
        self.label: dict[int, int] = {}
        self.is_call: dict[int, bool] = {}
        self.depth: dict[int, int] = {}
        self.edges: list[tuple[int, int, int]] = []
        self.children: dict[int, list[int]] = {}
        self.produced: dict[int, list[int]] = {}
        self.out: dict[int, list[tuple[int, int]]] = {}

    def index(self) -> None:
        children, produced, out = self.children, self.produced, self.out
        for src, dst, kind in self.edges:
            out.setdefault(src, []).append((dst, kind))
            if kind == 0:
                children.setdefault(src, []).append(dst)
            elif kind == 2:
                produced.setdefault(src, []).append(dst)


class GraphCoarsening:
    """Merge isomorphic repeated subgraphs of an execution DAG into cluster nodes.

    Args:
        max_depth: how many call levels below an anchor a subgraph grows.
        max_levels: how many times the pass is repeated on its own output.
    """

    def __init__(self, max_depth: int = 5, max_levels: int = 8) -> None:
        if max_depth < 0 or max_levels < 1:
            raise ConfigError(
                f"coarsen max_depth must be >= 0 and max_levels >= 1, got {max_depth}, {max_levels}"
            )
        self.max_depth = max_depth
        self.max_levels = max_levels
        self.stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ public
    def coarsen(self, dag: ExecutionDAG) -> CoarsenedDAG:
        """Return the coarsened DAG; raise :class:`GraphError` for a dangling edge or a cycle."""
        start = time.perf_counter()
        level, names = self._level_zero(dag)
        _check_acyclic(level.edges, "execution DAG")
        parent: dict[int, int] = {}
        records: list[tuple[str, int, list[int]]] = []
        match = MatchStats()
        undone = 0
        levels_run = 0
        banned: set[int] = set()
        while levels_run < self.max_levels:
            levels_run += 1
            classes = self._merge_classes(level, match, banned)
            if not classes:
                break
            mapping, accepted, dropped = _accept(level, classes)
            undone += len(dropped)
            banned.update(level.label[cls[0][0][0]] for cls in dropped)
            if not accepted:
                continue
            for cls in accepted:
                rep_members = cls[0][0]
                anchor = rep_members[0]
                records.append((names[level.label[anchor]], anchor, rep_members))
            parent.update(mapping)
            level = _next_level(level, mapping)
        result = self._build(dag, parent, records)
        elapsed = time.perf_counter() - start
        self.stats = {
            "original_nodes": len(dag.nodes),
            "coarse_nodes": len(result.nodes),
            "original_edges": len(dag.edges),
            "coarse_edges": len(result.edges),
            "clusters": len(result.clusters),
            "merged_instances": sum(c.instance_count for c in result.clusters.values()),
            "reduction_ratio": (len(result.nodes) / len(dag.nodes)) if dag.nodes else 1.0,
            "levels": levels_run,
            "candidate_subgraphs": match.subgraphs,
            "isomorphism_checks": match.isomorphism_checks,
            "hash_collisions_rejected": match.hash_collisions_rejected,
            "merges_undone_for_cycles": undone,
            "max_depth": self.max_depth,
            "time_s": elapsed,
        }
        result.stats = dict(self.stats)
        log.info(
            "coarsening: %d -> %d nodes, %d clusters in %.2f s",
            len(dag.nodes),
            len(result.nodes),
            len(result.clusters),
            elapsed,
        )
        return result

    # ------------------------------------------------------------------ steps
    def _level_zero(self, dag: ExecutionDAG) -> tuple[_Level, list[str]]:
        level = _Level()
        interned: dict[tuple[bool, str], int] = {}
        by_raw: dict[tuple[bool, str], int] = {}  # raw name -> code, to normalize once per name
        names: list[str] = []
        for node_id, node in dag.nodes.items():
            is_call = node.kind == "call"
            code = by_raw.get((is_call, node.name))
            if code is None:
                key = (is_call, normalize_name(node.name))
                code = interned.get(key)
                if code is None:
                    code = interned[key] = len(names)
                    names.append(key[1])
                by_raw[(is_call, node.name)] = code
            level.label[node_id] = code
            level.is_call[node_id] = is_call
            if is_call:
                level.depth[node_id] = node.depth  # type: ignore[union-attr]
        nodes = dag.nodes
        edges = level.edges
        for src, dst, kind in dag.edges:
            if src not in nodes or dst not in nodes:
                missing = src if src not in nodes else dst
                raise GraphError(
                    f"edge ({src}, {dst}, {kind}) names node {missing}, which is absent"
                )
            edges.append((src, dst, KIND_CODES[kind]))
        level.index()
        return level, names

    def _merge_classes(
        self, level: _Level, match: MatchStats, banned: set[int]
    ) -> list[list[Instance]]:
        """Isomorphism classes of two or more disjoint subgraphs, outermost anchors first."""
        groups: dict[int, list[int]] = {}
        for node_id, is_call in level.is_call.items():
            if is_call and level.label[node_id] not in banned:
                groups.setdefault(level.label[node_id], []).append(node_id)
        anchor_groups = [ids for ids in groups.values() if len(ids) >= 2]
        anchor_groups.sort(key=lambda ids: (min(level.depth.get(i, 0) for i in ids), ids[0]))
        claimed: set[int] = set()
        out: list[list[Instance]] = []
        for anchors in anchor_groups:
            subgraphs: list[list[int]] = []
            local: set[int] = set()
            for anchor in anchors:
                if anchor in claimed or anchor in local:
                    continue
                members = self._extract(level, anchor)
                if any(m in claimed or m in local for m in members):
                    continue
                local.update(members)
                subgraphs.append(members)
            if len(subgraphs) < 2:
                continue
            for cls in isomorphism_classes(subgraphs, level.label, level.out, match):
                if len(cls) >= 2:
                    out.append(cls)
                    for members, _ in cls:
                        claimed.update(members)
        return out

    def _extract(self, level: _Level, anchor: int) -> list[int]:
        """The anchor, its callees down to ``max_depth`` levels, then the values they produce."""
        children, produced = level.children, level.produced
        members = [anchor]
        seen = {anchor}
        frontier = [anchor]
        for _ in range(self.max_depth):
            nxt: list[int] = []
            for node in frontier:
                for child in children.get(node, ()):
                    if child not in seen:
                        seen.add(child)
                        members.append(child)
                        nxt.append(child)
            if not nxt:
                break
            frontier = nxt
        for node in list(members):
            for value in produced.get(node, ()):
                if value not in seen:
                    seen.add(value)
                    members.append(value)
        return members

    def _build(
        self,
        dag: ExecutionDAG,
        parent: dict[int, int],
        records: list[tuple[str, int, list[int]]],
    ) -> CoarsenedDAG:
        def resolve(node_id: int) -> int:
            seen = []
            while node_id in parent:
                seen.append(node_id)
                node_id = parent[node_id]
            for s in seen:
                parent[s] = node_id
            return node_id

        nodes: dict[int, ClusterNode] = {}
        original_to_coarse: dict[int, int] = {}
        for node_id in sorted(dag.nodes):
            node = dag.nodes[node_id]
            target = resolve(node_id) if node_id in parent else node_id
            if target != node_id:
                original_to_coarse[node_id] = target
            cluster = nodes.get(target)
            is_call = node.kind == "call"
            if cluster is None:
                rep = dag.nodes[target]
                cluster = nodes[target] = ClusterNode(
                    id=target,
                    kind=rep.kind,
                    name=rep.name,
                    instance_count=0,
                    original_ids=[],
                    representative_id=target,
                    depth=rep.depth if is_call else 0,  # type: ignore[union-attr]
                )
            cluster.instance_count += 1
            cluster.original_ids.append(node_id)
            if is_call:
                cluster.total_ns += node.total_ns  # type: ignore[union-attr]
                cluster.self_ns += node.self_ns  # type: ignore[union-attr]
                cluster.mem_bytes += node.mem_bytes  # type: ignore[union-attr]
                cluster.depth = min(cluster.depth, node.depth)  # type: ignore[union-attr]
            else:
                cluster.nbytes += node.nbytes  # type: ignore[union-attr]
        edges: dict[tuple[int, int, str], None] = {}
        for src, dst, kind in dag.edges:
            edges[(original_to_coarse.get(src, src), original_to_coarse.get(dst, dst), kind)] = None
        clusters: dict[int, Cluster] = {}
        by_anchor: dict[int, int] = {}
        for anchor_name, anchor, members in records:
            anchor_id = resolve(anchor)
            cid = by_anchor.get(anchor_id)
            if cid is None:
                cid = by_anchor[anchor_id] = len(clusters)
            node_ids = sorted({resolve(m) for m in members})
            clusters[cid] = Cluster(
                id=cid,
                anchor_name=anchor_name,
                anchor_id=anchor_id,
                instance_count=nodes[anchor_id].instance_count,
                node_ids=node_ids,
            )
        for merged in sorted(clusters.values(), key=lambda c: -len(c.node_ids)):
            for node_id in merged.node_ids:
                nodes[node_id].cluster_id = merged.id
        return CoarsenedDAG(nodes, list(edges), clusters, dag, original_to_coarse)


def _accept(
    level: _Level, classes: list[list[Instance]]
) -> tuple[dict[int, int], list[list[Instance]], list[list[Instance]]]:
    """Node mapping of the classes that keep the graph acyclic; returns (mapping, kept, dropped)."""
    kept = list(range(len(classes)))
    dropped: list[list[Instance]] = []
    while kept:
        mapping: dict[int, int] = {}
        owner: dict[int, int] = {}
        for index in kept:
            cls = classes[index]
            rep = cls[0][0]
            for members, perm in cls:
                for pos, node in enumerate(members):
                    target = rep[perm[pos]] if perm is not None else rep[pos]
                    owner[node] = index
                    if node != target:
                        mapping[node] = target
        bad: set[int] = set()
        new_edges: list[tuple[int, int]] = []
        for src, dst, _ in level.edges:
            a, b = mapping.get(src, src), mapping.get(dst, dst)
            if a == b:
                bad.update(owner[n] for n in (src, dst) if n in owner)
            else:
                new_edges.append((a, b))
        if not bad:
            cycle = _find_cycle(new_edges)
            reps = {mapping.get(n, n) for n in owner}
            bad = {owner[n] for n in cycle if n in reps and n in owner}
            if cycle and not bad:  # pragma: no cover - the input was checked acyclic
                raise GraphError(f"cycle through nodes {cycle}")
        if not bad:
            return mapping, [classes[i] for i in kept], dropped
        dropped.extend(classes[i] for i in sorted(bad))
        kept = [i for i in kept if i not in bad]
    return {}, [], dropped


def _next_level(level: _Level, mapping: dict[int, int]) -> _Level:
    nxt = _Level()
    for node_id, code in level.label.items():
        if node_id in mapping:
            target = mapping[node_id]
            if level.is_call[node_id]:
                nxt.depth[target] = min(nxt.depth.get(target, 1 << 30), level.depth[node_id])
            continue
        nxt.label[node_id] = code
        nxt.is_call[node_id] = level.is_call[node_id]
        if node_id in level.depth:
            nxt.depth[node_id] = min(nxt.depth.get(node_id, 1 << 30), level.depth[node_id])
    seen: dict[tuple[int, int, int], None] = {}
    for src, dst, kind in level.edges:
        seen[(mapping.get(src, src), mapping.get(dst, dst), kind)] = None
    nxt.edges = list(seen)
    nxt.index()
    return nxt


def _find_cycle(edges: list[tuple[int, int]]) -> list[int]:
    """Node ids of one directed cycle, or [] when the edges form a DAG."""
    if all(src < dst for src, dst in edges):
        return []
    for src, dst in edges:
        if src == dst:
            return [src]
    ids = sorted({n for edge in edges for n in edge})
    index = {n: i for i, n in enumerate(ids)}
    graph = rx.PyDiGraph()
    graph.add_nodes_from(ids)
    graph.add_edges_from_no_data([(index[s], index[d]) for s, d in edges])
    if rx.is_directed_acyclic_graph(graph):
        return []
    for component in rx.strongly_connected_components(graph):
        if len(component) > 1:
            return sorted(ids[i] for i in component)
    return []  # pragma: no cover


def _check_acyclic(edges: list[tuple[int, int, int]], what: str) -> None:
    cycle = _find_cycle([(s, d) for s, d, _ in edges])
    if cycle:
        shown = ", ".join(map(str, cycle[:20]))
        more = f" and {len(cycle) - 20} more" if len(cycle) > 20 else ""
        raise GraphError(f"{what} is cyclic: nodes {shown}{more} lie on a cycle; expected a DAG")
