"""Exact grouping of subgraphs into isomorphism classes."""

from __future__ import annotations

from codedag.optimize.isomorphism import MatchStats, isomorphism_classes, positional_form


def test_positional_form_keeps_only_edges_inside_the_members() -> None:
    labels, edges = positional_form(
        [5, 3, 9], {5: 1, 3: 2, 9: 1}, {5: [(3, 0), (7, 0)], 3: [(9, 1)], 9: [(5, 2)]}
    )
    assert labels == (1, 2, 1)
    assert edges == ((0, 1, 0), (1, 2, 1), (2, 0, 2))


def test_equal_forms_share_a_class_without_a_vf2_check() -> None:
    label_of = {1: 0, 2: 1, 3: 0, 4: 1, 5: 2}
    out_edges = {1: [(2, 0)], 3: [(4, 0)]}
    stats = MatchStats()
    classes = isomorphism_classes([[1, 2], [3, 4], [5]], label_of, out_edges, stats)
    assert classes == [[([1, 2], None), ([3, 4], None)], [([5], None)]]
    assert (stats.subgraphs, stats.forms, stats.isomorphism_checks) == (3, 2, 0)


def test_reordered_members_merge_with_a_position_mapping() -> None:
    # a -> b in both, but the second lists b first.
    label_of = {1: 10, 2: 20, 3: 20, 4: 10}
    out_edges = {1: [(2, 0)], 4: [(3, 0)]}
    stats = MatchStats()
    classes = isomorphism_classes([[1, 2], [3, 4]], label_of, out_edges, stats)
    assert len(classes) == 1
    (rep, rep_perm), (other, perm) = classes[0]
    assert (rep, rep_perm) == ([1, 2], None)
    assert other == [3, 4]
    assert perm == [1, 0]  # position 0 of [3, 4] (label 20) is position 1 of the representative
    assert stats.isomorphism_checks == 1 and stats.hash_collisions_rejected == 0


def test_same_labels_wired_differently_stay_apart() -> None:
    # chain a -> b -> c  versus  fork a -> b, a -> c: equal label multisets, different wiring
    label_of = {1: 0, 2: 1, 3: 2, 4: 0, 5: 1, 6: 2}
    out_edges = {1: [(2, 0)], 2: [(3, 0)], 4: [(5, 0), (6, 0)]}
    classes = isomorphism_classes([[1, 2, 3], [4, 5, 6]], label_of, out_edges)
    assert classes == [[([1, 2, 3], None)], [([4, 5, 6], None)]]


def test_hash_collisions_are_rejected_by_vf2() -> None:
    # Edges a -> b and b -> a between two a's and two b's: the (label, label, kind) multiset
    # {(a,b), (b,a)} is the same for 1->2, 3->4 ... so build two graphs whose multisets agree
    # but whose structure differs: a1->b1, b2->a2 versus a1->b1, b1->a2 (plus b2 isolated).
    label_of = {1: 0, 2: 1, 3: 1, 4: 0, 5: 0, 6: 1, 7: 1, 8: 0}
    out_edges = {1: [(2, 0)], 3: [(4, 0)], 5: [(6, 0)], 6: [(8, 0)]}
    stats = MatchStats()
    classes = isomorphism_classes([[1, 2, 3, 4], [5, 6, 7, 8]], label_of, out_edges, stats)
    assert len(classes) == 2
    assert stats.hash_buckets == 1
    assert stats.hash_collisions_rejected == 1


def test_classes_are_ordered_by_first_member_id() -> None:
    label_of = {1: 0, 2: 1}
    classes = isomorphism_classes([[2], [1]], label_of, {})
    assert [cls[0][0] for cls in classes] == [[1], [2]]
