"""Grouping subgraphs into isomorphism classes, exactly.

Each subgraph is a list of node ids in extraction order (breadth-first from its anchor). Its
*positional form* (node labels by position and edges between positions) is an exact certificate:
two subgraphs with equal forms are isomorphic through the identity mapping of positions. Forms that
differ are grouped by a structural hash that does not depend on node order (multiset of node labels
and of labelled edges); a hash match is only a candidate, and forms merge only when VF2
(``rustworkx.vf2_mapping`` with node and edge matchers) returns an isomorphism. Hashes alone are not
enough: differently wired subgraphs with the same node names can share them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

import rustworkx as rx

# One class instance: (member ids in extraction order, position -> representative position or
# None when positions already match the representative's).
Instance = tuple[list[int], list[int] | None]


@dataclass
class MatchStats:
    """Counters of one grouping run."""

    subgraphs: int = 0
    forms: int = 0
    hash_buckets: int = 0
    isomorphism_checks: int = 0
    hash_collisions_rejected: int = 0


@dataclass
class _Form:
    labels: tuple[int, ...]
    edges: tuple[tuple[int, int, int], ...]
    instances: list[list[int]] = field(default_factory=list)

    def invariant(self) -> int:
        labels = self.labels
        node_multiset = tuple(sorted(labels))
        edge_multiset = tuple(sorted((labels[i], labels[j], k) for i, j, k in self.edges))
        return hash((node_multiset, edge_multiset))

    def graph(self) -> rx.PyDiGraph:
        g = rx.PyDiGraph(multigraph=True)
        g.add_nodes_from(list(self.labels))
        g.add_edges_from(list(self.edges))
        return g


def positional_form(
    members: Sequence[int],
    label_of: dict[int, int],
    out_edges: dict[int, list[tuple[int, int]]],
) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]:
    """Labels by position and the sorted edges between positions ``(i, j, kind_code)``."""
    pos = {node: i for i, node in enumerate(members)}
    labels = tuple(label_of[node] for node in members)
    edges = []
    for i, node in enumerate(members):
        for dst, kind in out_edges.get(node, ()):
            j = pos.get(dst)
            if j is not None:
                edges.append((i, j, kind))
    edges.sort()
    return labels, tuple(edges)


def _mapping(rep: rx.PyDiGraph, other: rx.PyDiGraph, size: int) -> list[int] | None:
    """Position in ``other`` -> position in ``rep`` of a label- and kind-preserving isomorphism."""
    found = rx.vf2_mapping(
        rep,
        other,
        node_matcher=operator.eq,
        edge_matcher=operator.eq,
        id_order=False,
        subgraph=False,
        call_limit=max(10_000, 50 * size),  # give up (no merge) rather than search for long
    )
    try:
        rep_to_other = next(iter(found))
    except StopIteration:
        return None
    perm = [0] * size
    for rep_pos, other_pos in rep_to_other.items():
        perm[other_pos] = rep_pos
    return perm


def isomorphism_classes(
    subgraphs: Sequence[list[int]],
    label_of: dict[int, int],
    out_edges: dict[int, list[tuple[int, int]]],
    stats: MatchStats | None = None,
) -> list[list[Instance]]:
    """Partition ``subgraphs`` into classes of isomorphic subgraphs, in order of first appearance.

    The first instance of each class is its representative (permutation None).
    """
    stats = stats if stats is not None else MatchStats()
    stats.subgraphs += len(subgraphs)
    forms: dict[tuple[object, object], _Form] = {}
    for members in subgraphs:
        labels, edges = positional_form(members, label_of, out_edges)
        form = forms.get((labels, edges))
        if form is None:
            form = forms[(labels, edges)] = _Form(labels, edges)
        form.instances.append(members)
    stats.forms += len(forms)

    buckets: dict[int, list[_Form]] = {}
    for form in forms.values():
        buckets.setdefault(form.invariant(), []).append(form)
    stats.hash_buckets += len(buckets)

    classes: list[list[Instance]] = []
    for bucket in buckets.values():
        # (representative form, its graph, the class's instance list)
        reps: list[tuple[_Form, rx.PyDiGraph | None, list[Instance]]] = []
        for form in bucket:
            placed = False
            for index, (rep_form, rep_graph, instances) in enumerate(reps):
                if len(rep_form.labels) != len(form.labels):
                    continue
                if rep_graph is None:
                    rep_graph = rep_form.graph()
                    reps[index] = (rep_form, rep_graph, instances)
                stats.isomorphism_checks += 1
                perm = _mapping(rep_graph, form.graph(), len(form.labels))
                if perm is None:
                    stats.hash_collisions_rejected += 1
                    continue
                instances.extend((members, perm) for members in form.instances)
                placed = True
                break
            if not placed:
                instances = [(members, None) for members in form.instances]
                reps.append((form, None, instances))
        classes.extend(instances for _, _, instances in reps)
    # Deterministic order: by the first member id of each class's representative.
    classes.sort(key=lambda cls: cls[0][0][0])
    return classes
