"""Matching a runtime call against the plan's context keys.

A traced context key is ``seg/seg/.../name#k``: each segment is a canonical name
and a counter of earlier calls of that name under the same parent call. At run time the migrator
does not trace (that costs 10x), so it knows less:

* the names of the enclosing Python frames (module + ``co_qualname``, as the tracer names them);
* the function's own counter ``k``: earlier calls of this function from the same caller frame
  object, counted by the wrapper;
* not the counters of the enclosing segments: ``Dataset.__getitem__#5`` is the sixth sample of
  the traced batch, a number that means nothing for a later batch.

So every key is *normalized*: outer counters dropped, the last one kept
(``a#0/b#5/cv2.resize#1`` -> ``(("a", "b"), "cv2.resize", 1)``). The plan's enclosing names are
looked up, innermost first, in order among the runtime frames (frames the tracer filtered out do
not break a match). The best plan key is the one whose innermost name is found closest to the call
(the direct caller beats a frame further up), then the one with more names found, then the one
with the same own counter. This one rule covers three levels of match: *exact* (the whole plan
key matches), *suffix* (its innermost segments match, e.g. a DataLoader worker's stack above
``__getitem__`` differs from the traced ``__next__``), *function name* (no enclosing segment
matches: the function's majority placement decides).

Each function gets a :class:`ContextMatcher`. When every traced call of the function has the same
placement (the usual case: the optimizer moved all ``cv2.resize`` calls) the matcher is
*constant* and the wrapper never looks at the stack.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from types import CodeType, FrameType

from codedag.util.context_keys import split_segment

# Placement of a call: a device string, or None for "keep the original".
Placement = str | None


@dataclass(frozen=True)
class NormalizedKey:
    """A context key without per-sample counters: enclosing names, own name and counter."""

    parents: tuple[str, ...]
    name: str
    counter: int


def normalize_key(key: str) -> NormalizedKey:
    """Drop the counters of the enclosing segments of a context key; keep the last one."""
    segments = [s for s in key.split("/") if s]
    if not segments:
        raise ValueError("empty context key")
    name, counter = split_segment(segments[-1])
    parents = tuple(split_segment(s)[0] for s in segments[:-1])
    return NormalizedKey(parents, name, counter)


def function_of(key: str) -> str:
    """The canonical function name of a context key (its last segment without counter)."""
    return split_segment(key.rsplit("/", 1)[-1])[0]


def _suffix_score(
    plan_parents: tuple[str, ...], runtime_parents: tuple[str, ...]
) -> tuple[int, int]:
    """Match the plan's enclosing names, innermost first, in order among the runtime frames.

    Returns:
        ``(-gap, matched)``: ``gap`` is how many runtime frames lie between the call and the
        innermost matched name (0: the plan's innermost segment is the direct caller), and
        ``matched`` how many of the plan's names were found. Larger is better.
    """
    matched = 0
    gap = 0
    j = len(runtime_parents) - 1
    for name in reversed(plan_parents):
        while j >= 0 and runtime_parents[j] != name:
            j -= 1
        if j < 0:
            break
        if matched == 0:
            gap = len(runtime_parents) - 1 - j
        matched += 1
        j -= 1
    return (-gap if matched else -len(runtime_parents) - 1), matched


class ContextMatcher:
    """Placement of one function's calls from the plan's positive and negative keys.

    Args:
        name: canonical function name.
        entries: ``(context key, placement)`` pairs: planned keys with their device, and the
            traced keys the plan keeps on the CPU with ``None``.
    """

    def __init__(self, name: str, entries: Iterable[tuple[str, Placement]]) -> None:
        self.name = name
        votes: dict[NormalizedKey, Counter[Placement]] = {}
        overall: Counter[Placement] = Counter()
        for key, placement in entries:
            norm = normalize_key(key)
            votes.setdefault(norm, Counter())[placement] += 1
            overall[placement] += 1
        # Ties (per-sample splits the runtime cannot reproduce) go to the majority, then to
        # migrating (a device string sorts after None is impossible, so compare explicitly).
        self.keys: dict[NormalizedKey, Placement] = {k: _majority(v) for k, v in votes.items()}
        self.default: Placement = _majority(overall) if overall else None
        distinct = set(self.keys.values())
        self.constant: bool = len(distinct) <= 1
        self.depth: int = max((len(k.parents) for k in self.keys), default=0)
        self.conflicts: int = sum(1 for v in votes.values() if len(v) > 1)
        by_parent: dict[str, set[Placement]] = {}
        for norm_key, placement in self.keys.items():
            if norm_key.parents:
                by_parent.setdefault(norm_key.parents[-1], set()).add(placement)
        self._by_parent = by_parent
        self.innermost: frozenset[str] = frozenset(by_parent)
        """Names that are the innermost enclosing segment of some plan key."""

    def decided_by_caller(self, caller_name: str) -> bool:
        """Whether every call made directly from ``caller_name`` gets the same placement.

        True when the plan names ``caller_name`` as the innermost enclosing call of this
        function and all such keys agree: the wrapper may then cache the placement per caller
        code object and skip the stack walk. The same holds for a frame further out: when the
        closest enclosing frame whose name is in :attr:`innermost` has such a name, the frames
        beyond it cannot change the placement (they only decide between exact and suffix).
        """
        return len(self._by_parent.get(caller_name, ())) == 1

    def match(self, parents: tuple[str, ...], counter: int) -> tuple[Placement, str]:
        """Placement of a runtime call and the level that decided it.

        Returns:
            ``(placement, level)`` with level ``exact``, ``suffix`` or ``name``.
        """
        placement, level, _independent = self.match_detail(parents, counter)
        return placement, level

    def match_detail(self, parents: tuple[str, ...], counter: int) -> tuple[Placement, str, bool]:
        """Like :meth:`match`, plus whether the placement is the same for every own counter
        (then a caller may cache it for this stack)."""
        top: tuple[int, int] | None = None
        candidates: list[NormalizedKey] = []
        for key in self.keys:
            score = _suffix_score(key.parents, parents)
            if top is None or score > top:
                top, candidates = score, [key]
            elif score == top:
                candidates.append(key)
        if top is None:
            return self.default, "name", True
        same_counter = [k for k in candidates if k.counter == counter]
        if top[1] == 0:
            placement = self.keys[same_counter[0]] if same_counter else self.default
            independent = all(self.keys[k] == self.default for k in candidates)
            return placement, "name", independent
        best = same_counter[0] if same_counter else candidates[0]
        independent = len({self.keys[k] for k in candidates}) == 1
        if top[1] == len(best.parents) and same_counter:
            return self.keys[best], "exact", independent
        return self.keys[best], "suffix", independent


def _majority(votes: Counter[Placement]) -> Placement:
    ranked = sorted(votes.items(), key=lambda item: (-item[1], item[0] is None, str(item[0])))
    return ranked[0][0]


# id(code) -> (code, name). Keyed by identity: hashing a code object hashes its whole content.
# The code object is kept, so its id is never reused while the entry exists.
_CODE_NAMES: dict[int, tuple[CodeType, str]] = {}


def frame_name(frame: FrameType) -> str:
    """Canonical name of a Python frame's function (module of its globals + ``co_qualname``)."""
    code = frame.f_code
    hit = _CODE_NAMES.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    module = frame.f_globals.get("__name__", "?")
    if module == "__mp_main__":  # the main script, imported again by a spawned worker
        module = "__main__"
    name = f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
    _CODE_NAMES[id(code)] = (code, name)
    return name
