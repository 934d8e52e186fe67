"""Finding each sample's deterministic prefix in a traced DataLoader batch, and cutting it (pure).

In every traced sample (the ``__getitem__`` calls of the batch) a chain starts at a *source
call*: a library call that reads the sample's source and whose result the sample goes on
computing with. A source is a file, named by a path or open, read by a function its library
declares a file source (``facts.py``: ``cv2.imread``, ``PIL.Image.open``, ``librosa.load``,
``numpy.load``; :mod:`codedag.backends.sources`), or the bytes read from one or an array the data
set holds, whichever call takes them first (``numpy.frombuffer(data)``). A sample whose first
call takes none of these is recorded with the reason (:class:`Skipped`). The chain
follows the dataflow from call to call while each value is a function of the source and fixed
arguments only:

* the value goes to exactly one next operation (an intermediate another part of the sample also
  reads would see a stand-in on a hit), or to several whose values meet again in one call, all
  of them of the chain (a min-max or percentile normalization: ``(img - img.min()) / ...``):
  the calls on such branches are steps, never cuts (:func:`_meeting`); reading its metadata (an
  image's ``size``, an array's ``shape``) is no use: the stored header answers it, and neither
  is entering or leaving a ``with`` block (``with Image.open(path) as im``): a value read back
  has no file to close;
* that operation draws no random numbers and reads no clock, and it writes into nothing
  (``operator.setitem``);
* where a random draw happens in the sample between the source call and it, its arguments
  (other than arrays) are the same in every traced call of it, two at least (of two samples, or
  of one that reads several files in a loop, a whole batch read by one item): the tracer records
  every draw, Python's ``random`` included, but does not follow the numbers they return, so a
  draw may reach the arguments (a random size); the same arguments everywhere say it did not (a
  transform applied when ``random.random() < p`` with ``p=1``, as albumentations does). Were one
  to come from a draw after all, the run-time key holds it: a miss, never a wrong value;
* its other array inputs are not computed in the sample from its data or draws (constants such
  as a mean and std are fixed arguments, or made from literals in the sample before any draw:
  :meth:`_SampleGraph.fixed`; the run-time key holds their values).

Where the data set's own code was not traced (its module is excluded), samples are split by
dataflow and their bounds are unknown: a random draw anywhere earlier in the DataLoader fetch
counts as one in the sample. An array no traced call produced is a source only while no random
draw came before it: after one, it may be computed from the draw out of the tracer's sight
(operators in untraced code), and a key of its bytes could change every epoch.

Chains of different samples that start at the same source function called from the same
function form one :class:`PrefixChain` (a mosaic's four image loads are one chain). Every value
along the part all samples share is a candidate cut with its traced time up to there and its
bytes. :func:`decide` picks, per chain, the cut that saves the most over :data:`EPOCHS` epochs
within the memory budget (a cut whose data set does not fit saves on the share that does), from
the store's measured read and write costs (:mod:`codedag.calibrate.store_costs`), among the cuts that
win back their storing within :data:`PAYBACK_EPOCHS` cached epoch; no cut when none does. So a
value's bytes count at the store's measured cost per size: a later, larger value (a float32
normalization of a uint8 image) is kept only where the calls it spares cost more than its extra
bytes do, and the reason says which (:mod:`codedag.optimize.cache_bytes`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from statistics import median
from typing import Any, NamedTuple

from codedag.backends.facts import FileSource
from codedag.backends.libraries import library_takes_any_value, takes_any_value
from codedag.backends.sources import file_source
from codedag.graph.model import ExecutionDAG
from codedag.optimize.cache_bytes import _mb, _ms, bytes_clause
from codedag.optimize.samples import is_operation, traced_samples
from codedag.plan.cache import (
    FIRST_EPOCH_SLACK,
    STORE_SHARE,
    CacheChain,
    CacheCut,
    CacheSection,
    FirstEpoch,
    SkippedSource,
)
from codedag.store.meta import PIL_MODES
from codedag.trace.value_nodes import DataTypes

EPOCHS = 10
"""Epochs a cut is judged over: what it saves from the second on against storing in the first."""

MIN_SAVING = 0.1
"""A cut must save at least this share of its prefix's traced time per hit."""

PAYBACK_EPOCHS = 1
"""Cached epochs within which a cut must win back what storing its values cost in the first:
storing and reading a value back must cost less than computing it, so that a run of two epochs
is not slower with the cache, whatever the number of epochs :data:`EPOCHS` assumes."""

PAYBACK_MARGIN = 0.5
"""The share of a cut's traced time that storing and reading its value back may take for the cut
to be sure to pay. The run time measures those costs on a chain's first values, in a first epoch
whose storing competes with loading for the cores, and gives the chain up where they exceed
computing (:meth:`codedag.migrate.cache.session.Session.judge`); there they came out at up to
twice the calibration's figures (a float32 tensor of 0.83 MB: 1.3-1.9 ms measured, 0.68 ms
estimated, 0.85 ms to compute), so a cut within this share is preferred to one of more value
beyond it (which would leave nothing cached) where it is worth half as much at least."""

_BUFFER_TYPES = ("builtins.bytes", "builtins.bytearray", "builtins.memoryview")
_CONTEXT = (".__enter__", ".__exit__")
_CLOCKS = ("time.", "datetime.", "os.urandom", "uuid.", "secrets.")
_WRITES = frozenset({"operator.setitem", "operator.delitem"})
NO_DISPATCH = frozenset(
    {
        "numpy.frombuffer", "numpy.fromfile", "numpy.load", "numpy.asarray", "numpy.asanyarray",
        "numpy.ascontiguousarray", "numpy.array", "numpy.asfortranarray", "numpy.require",
    }
)  # fmt: skip
"""NumPy functions that do not dispatch to ``__array_function__``: the cache patches them."""
SHARED_STOP = "its value goes to"
"""How the reason a chain stops at a value several operations take begins (an in-place method,
PIL's ``draft``, among them)."""
_SAMPLE_METHODS = frozenset({"__getitem__", "__getitems__"})
"""The data set's methods whose return is the sample."""
OUTPUT = "the sample's output"
"""A chain's stop where its value is what the sample returns."""
RANDOM_STOP = "cut ends before"
"""How a chain's stop begins when a random draw ends it (the plan's reason repeats it)."""
_METHOD_OWNERS = ("numpy.ndarray.", "PIL.Image.Image.", "torch.Tensor.", "torch._C.TensorBase.")
"""Where the tracer names the methods of arrays, images and tensors."""
_PROXY_HANDLED = ("operator.", *_METHOD_OWNERS)
"""Steps a prefix value takes itself (operators and methods): never patched."""


@dataclass(frozen=True)
class Step:
    """One call of a traced chain.

    Attributes:
        call_id: its node.
        name: canonical name.
        occurrence: calls of the same name before it in the chain.
        total_ns: its traced time.
        nbytes: bytes of its value.
        shape: its value's shape (for an image: height, width, bands).
        dtype: its value's dtype (or PIL mode).
        context_key: its context key.
        image_mode: the PIL mode of an image value (``""``: not an image, or not known).
        drawn: the first random draw the sample made between the source call and this call
            (``""``: none).
        arguments: its arguments other than arrays and images, as text (what must be the same
            in every sample for a call after a draw to be cached, drawn in some samples or all).
        returns_seen: it returned an object the sample held before, its input (``cv2.circle``
            draws into the image it receives and returns it; ``np.ascontiguousarray`` of a
            contiguous array returns it): never a cut (see :func:`candidates`).
        branch: a call on a branch of the chain's value before the branches meet again
            (``img.min()`` of ``(img - img.min()) / ...``): never a cut, as the call where
            they meet takes other values of the chain too.
    """

    call_id: int
    name: str
    occurrence: int
    total_ns: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    context_key: str
    image_mode: str = ""
    drawn: str = ""
    arguments: str = ""
    returns_seen: bool = False
    branch: bool = False


@dataclass
class TracedChain:
    """One source's chain in one sample, and why it stops where it stops."""

    sample: int
    caller: str
    source_slot: str
    source_kind: str
    steps: list[Step]
    stop: str
    line: int = 0
    """The line of the caller's code making the source call (0: not known)."""


@dataclass
class PrefixChain:
    """Chains of several samples that start at the same source call of the same function.

    Attributes:
        id: ``prefix0``, ``prefix1``, ...
        source_function: the source call's function.
        caller: the function making it.
        traced: each traced source's chain.
    """

    id: str
    source_function: str
    caller: str
    traced: list[TracedChain] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    """The caller's lines that start it, where chains of one caller and source function start
    at different lines (an image and its mask): empty, any line."""

    @property
    def common(self) -> list[tuple[str, int]]:
        """``(name, occurrence)`` of the steps every traced source took, in order; a step after
        a random draw only where at least two of its calls took it with the same arguments."""
        return self._common()[0]

    def _common(self) -> tuple[list[tuple[str, int]], str]:
        """The common steps, and why they end (``""``: at the end of every chain)."""
        sequences = [[(s.name, s.occurrence) for s in t.steps] for t in self.traced]
        out: list[tuple[str, int]] = []
        for position, item in enumerate(sequences[0]):
            if not all(len(seq) > position and seq[position] == item for seq in sequences):
                return out, "samples take different calls after this point"
            steps = [t.steps[position] for t in self.traced]
            drawn = next((s.drawn for s in steps if s.drawn), "")
            unrecorded = any(s.arguments == "?" for s in steps)
            if drawn and (len(steps) < 2 or unrecorded or len({s.arguments for s in steps}) > 1):
                # the draw's value may reach the call's arguments (the tracer does not follow
                # numbers): only the same arguments, recorded in every call (two at least, of
                # one sample or more: a batch read in a loop by one item), say it did not
                why = "one call"
                if len(steps) > 1:
                    why = "its arguments differ between samples"
                    why = "its arguments were not recorded" if unrecorded else why
                if not position:  # its key would differ in every epoch: nothing to read back
                    return out, f"its source call follows a random draw ({drawn}; {why})"
                return out, f"{RANDOM_STOP} {item[0]}: it follows a random draw ({drawn}; {why})"
            out.append(item)
        return out, ""

    @property
    def samples(self) -> int:
        """Traced samples that ran the chain."""
        return len({t.sample for t in self.traced})

    @property
    def stop(self) -> str:
        """Why the chain ends where it does (the first source's reason where every source
        went as far)."""
        return self._common()[1] or self.traced[0].stop


@dataclass(frozen=True)
class Candidate:
    """One possible cut of a chain, with its traced figures (medians over the sources)."""

    position: int
    step: str
    occurrence: int
    prefix_ns: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    image_mode: str = ""
    """The PIL mode of an image value (``""``: not an image, or not known)."""
    stands_in: bool = True
    """Whether a value read back stands in for every call up to the cut: not at a source call
    whose other results only the call tells (``soundfile.read``'s rate is the file's)."""
    after_draw: str = ""
    """The random draw a traced sample made between the source call and the cut (``""``: none):
    a call after it may run only on some paths (``if random.random() < 0.5: flip``), so a
    sample that takes another one misses at this cut."""

    @property
    def storable(self) -> bool:
        """Whether the store keeps the value exactly: not an image of a mode it cannot keep
        (a palette image, ``P``, whose palette NumPy's array of it leaves out), nor an array of
        Python objects (``np.load(path, allow_pickle=True)`` of a pickled dict)."""
        if self.dtype == "object":
            return False
        return not self.image_mode or self.image_mode in PIL_MODES


@dataclass
class Skipped:
    """A sample's first call that starts no chain, and why (what it takes is not a source).

    Attributes:
        function: the call's name.
        caller: the function making it.
        reason: why it starts no chain, in words.
        samples: traced samples whose first call it is.
    """

    function: str
    caller: str
    reason: str
    samples: int = 1


@dataclass
class PrefixFound:
    """What :func:`find_prefixes` found."""

    chains: list[PrefixChain]
    samples: int
    dataset_len: int | None
    note: str = ""
    calls: frozenset[str] = frozenset()
    """Names of the library calls the traced samples made (what a value may reach)."""
    skipped: list[Skipped] = field(default_factory=list)
    """The first calls of samples that start no chain, grouped by function and caller."""
    sample_ns: int = 0
    """A traced sample's library time (the median over samples of its operations' time)."""


def _random(name: str) -> bool:
    from codedag.backends.placement_blockers import placement_blocker

    if name.startswith(_CLOCKS):
        return True
    reason = placement_blocker(name)
    return reason is not None and "random" in reason


def _value(dag: ExecutionDAG, call_id: int) -> Any:
    for value_id in dag.successors(call_id, "produces"):
        node = dag.nodes[value_id]
        if getattr(node, "shape", None) is not None or getattr(node, "nbytes", 0) > 0:
            return node
    return None


def _source_slot(node: Any) -> tuple[str, str] | None:
    """``(argument, kind)`` of a call's source argument, or None."""
    declared = file_source(node.name)
    if declared is not None:
        entry = _declared_argument(node, declared)
        kind = _file_kind(entry) if entry is not None else None
        if entry is not None and declared.opened_from and entry.get("kind") == "object":
            kind = "file"  # an archive opened from a file, read further by this call
        return (str(entry.get("name", "0")), kind) if entry and kind else None
    for entry in node.args or ():
        if entry.get("kind") == "object" and entry.get("type") in _BUFFER_TYPES:
            return str(entry.get("name", "0")), "buffer"
    for entry in node.args or ():  # an array the data set holds (a waveform, a volume)
        if entry.get("kind") == "array":
            return str(entry.get("name", "0")), "array"
    return None


def _declared_argument(node: Any, declared: FileSource) -> dict[str, Any] | None:
    """The traced argument a declared file source reads (by keyword or position)."""
    for entry in node.args or ():
        if str(entry.get("name", "")) in (declared.argument, str(declared.position)):
            return dict(entry)
    return None


def _file_kind(entry: dict[str, Any]) -> str | None:
    """What identifies a file source's argument: ``file`` (a path, an open file), ``buffer``
    (bytes read from one), ``array`` (an encoded array); ``None`` for anything else."""
    kind, type_name = entry.get("kind"), str(entry.get("type") or "")
    if kind == "scalar" and isinstance(entry.get("value"), str):
        return "file"
    if kind == "object" and type_name in _BUFFER_TYPES:
        return "buffer"
    if kind == "object" and ("Path" in type_name or type_name.startswith(("_io.", "io."))):
        return "file"
    if kind == "array":
        return "array"
    return None


def _what_it_takes(node: Any) -> str:
    """A call's arguments in words, for a reason (``path='a.wav', sr=16000``)."""
    parts = []
    for entry in list(node.args or ())[:3]:
        name, kind = str(entry.get("name", "")), entry.get("kind")
        if kind == "scalar":
            what = repr(entry.get("value"))[:40]
        else:
            what = f"a {entry.get('type') or kind}"
        parts.append(what if name.isdigit() else f"{name}={what}")
    return ", ".join(parts) or "no argument"


def _not_a_source(node: Any) -> str:
    """Why a sample's first call starts no chain."""
    takes = _what_it_takes(node)
    if file_source(node.name) is None and any(
        e.get("kind") == "scalar" and isinstance(e.get("value"), str) for e in node.args or ()
    ):
        return (
            f"the first call {node.name} takes {takes}, which is not a file: no library declares "
            f"{node.name} a file source (file_sources in its facts.py)"
        )
    return f"the first call {node.name} takes {takes}, which is not a file"


def _describe(
    dag: ExecutionDAG,
    node: Any,
    occurrence: int,
    consumer: Any | None,
    drawn: str = "",
    before: Step | None = None,
    source_slot: str = "",
) -> Step:
    value = _value(dag, node.id)
    shape = tuple(value.shape or ()) if value is not None else ()
    dtype = str(value.dtype or "") if value is not None else ""
    nbytes = int(value.nbytes) if value is not None else 0
    kind = str(getattr(value, "type_name", "") or "")
    image_mode = dtype if kind.startswith("PIL.") else ""  # an image's dtype is its mode
    if consumer is not None and (not nbytes or not shape):
        for entry in consumer.args or ():  # a PIL image: its size and mode in the next call
            if entry.get("kind") == "image" and entry.get("size"):
                width, height = entry["size"]
                image_mode = mode = str(entry.get("mode", ""))
                bands = _IMAGE_BYTES.get(mode, 3)
                shape = (height, width, bands) if mode not in _ONE_BAND else (height, width)
                nbytes, dtype = width * height * bands, mode
                break
    return Step(
        node.id,
        node.name,
        occurrence,
        int(node.total_ns),
        nbytes,
        shape,
        dtype,
        node.context_key,
        image_mode,
        drawn,
        _arguments(node, before, "" if before is not None else source_slot),
        _returns_seen(dag, node, value),
    )


def _returns_seen(dag: ExecutionDAG, call: Any, value: Any) -> bool:
    """Whether ``call`` returned an object the sample held before it: a later version of a value
    made outside the call (``cv2.circle`` returns the image it drew into). A version made by a
    call nested in it from a value also made in it (``librosa.resample``'s
    ``np.ascontiguousarray`` of the array it resampled) is new to the sample."""
    inside = call.context_key + "/"
    todo, seen = [value], set()
    while todo:
        current = todo.pop()
        if current is None or current.id in seen or not getattr(current, "version", 0):
            continue
        seen.add(current.id)
        makers: list[Any] = [dag.nodes[p] for p in dag.predecessors(current.id, "produces")]
        if not makers:
            return True
        maker = max(makers, key=lambda node: node.id)  # the deepest: the call that wrote it
        if maker.id == call.id or not maker.context_key.startswith(inside):
            return True
        for used in dag.predecessors(maker.id, "uses"):
            producers: list[Any] = [dag.nodes[p] for p in dag.predecessors(used, "produces")]
            if not any(p.context_key.startswith(inside) for p in producers):
                return True  # the maker took a value from outside the call
            todo.append(dag.nodes[used])
    return False


def _arguments(node: Any, chain_value: Step | None, source_slot: str = "") -> str:
    """A call's recorded arguments as text (``"?"``: none recorded). The chain's own value (an
    argument of its shape and dtype; a source call's ``source_slot``) and arrays too big for the
    trace to keep their bytes count by kind only: the latter are fixed ones the run-time key
    holds (an array computed in the sample ends the chain before)."""
    if node.args is None:
        return "?"
    own = ([*chain_value.shape], chain_value.dtype) if chain_value is not None else None
    entries = []
    for entry in node.args:
        kind = entry.get("kind")
        if source_slot and str(entry.get("name", "")) == source_slot:
            entry = {"name": source_slot, "kind": "source"}
        elif kind == "image" or (
            kind == "array"
            and ("data" not in entry or (entry.get("shape"), entry.get("dtype")) == own)
        ):
            entry = {"name": entry.get("name"), "kind": kind}
        entries.append(entry)
    return json.dumps(entries, sort_keys=True, default=str)


_IMAGE_BYTES = {"1": 1, "L": 1, "P": 1, "I": 4, "F": 4, "LA": 2, "PA": 2, "RGB": 3, "RGBA": 4}
"""Bytes per pixel of a PIL mode's array (3 for a mode not named)."""
_ONE_BAND = frozenset({"1", "L", "P", "I", "F"})


_LOADER_FRAMES = ("torch.utils.data.",)


def caller_of(node: Any) -> str:
    """The function making the call; ``""`` when the data set's own code was not traced (the
    call then starts the chain wherever a DataLoader fetch makes it)."""
    parts = node.context_key.split("/")
    caller = parts[-2].rpartition("#")[0] if len(parts) >= 2 else ""
    return "" if caller.startswith(_LOADER_FRAMES) else caller


def _metadata(name: str) -> bool:
    """Whether a traced step only reads a value's metadata (an image's ``size``, an array's
    ``shape``) or enters or leaves a ``with`` block: the cache answers it from the stored header
    (a value read back holds no file to close), so it does not use the value."""
    from codedag.backends.lazy_values import is_metadata_member

    return name.endswith(_CONTEXT) or is_metadata_member(name)


def _top_level(dag: ExecutionDAG, node: Any) -> bool:
    """Whether a call is made by user code (not by a library call it is inside)."""
    for parent_id in dag.predecessors(node.id, "calls"):
        parent = dag.nodes[parent_id]
        if is_operation(parent) and not parent.name.startswith(_LOADER_FRAMES):
            return False
    return True


def _fetch_randoms(dag: ExecutionDAG, operations: list[Any]) -> list[int]:
    """The random draws of the DataLoader fetches making ``operations`` whose caller was not
    traced (the data set's own code is excluded: samples split by dataflow have no known
    bounds, so a draw anywhere earlier in the fetch may belong to the sample)."""
    parents = {
        parent
        for node in operations
        if not caller_of(node)
        for parent in dag.predecessors(node.id, "calls")
    }
    return [
        child
        for parent in parents
        for child in dag.successors(parent, "calls")
        if is_operation(dag.nodes[child]) and _random(dag.nodes[child].name)
    ]


class _SampleGraph:
    """One traced sample's top-level calls and the dataflow between them."""

    def __init__(self, dag: ExecutionDAG, operations: list[Any]) -> None:
        self.dag = dag
        self.inside = {n.id for n in operations}
        self.randoms = sorted(
            {n.id for n in operations if _random(n.name)}.union(_fetch_randoms(dag, operations))
        )
        self._fixed: dict[int, bool] = {}

    def producers(self, node: Any) -> set[int]:
        """The sample's calls whose values ``node`` takes (for a list or tuple of values it
        takes, ``np.dstack([img, edges])``, the calls making its items)."""
        dag, out = self.dag, set()
        for value in dag.predecessors(node.id, "uses"):
            for maker in dag.predecessors(value, "produces"):
                if maker in self.inside:
                    out.update(
                        self.producers(dag.nodes[maker]) if not dag.nodes[maker].name else {maker}
                    )
        return out

    def consumers(self, node: Any) -> list[Any]:
        """The sample's calls taking ``node``'s value, in call order: not those reading its
        metadata, nor a list or tuple of values a call takes (the call takes its items too)."""
        dag, out = self.dag, {}
        for value in dag.successors(node.id, "produces"):
            for user in dag.successors(value, "uses"):
                name = dag.nodes[user].name
                if user in self.inside and user != node.id and name and not _metadata(name):
                    out[user] = dag.nodes[user]
        return [out[k] for k in sorted(out)]

    def returned(self, node: Any) -> bool:
        """Whether the sample returns ``node``'s value (``__getitem__`` hands it on in a tuple,
        list or dict), where a hit would hand on a stand-in."""
        dag = self.dag
        return any(
            p not in self.inside and dag.nodes[p].name.rsplit(".", 1)[-1] in _SAMPLE_METHODS
            for value in dag.successors(node.id, "produces")
            for p in dag.predecessors(value, "produces")
        )

    def fixed(self, call_id: int) -> bool:
        """Whether a call's value is a constant the sample computes (``np.array([0.485, 0.456,
        0.406]) * 255``): made from literals and other such constants only, before any random
        draw, reading no source, at most :data:`FIXED_BYTES` (the run-time key holds its bytes,
        the same in every epoch)."""
        known = self._fixed.get(call_id)
        if known is None:
            node = self.dag.nodes[call_id]
            value = _value(self.dag, call_id)
            inputs = self.producers(node)
            computed = inputs and not _reads_what_was_opened(node.name)
            known = (
                not _random(node.name)
                and not any(r < call_id for r in self.randoms)
                and (computed or _source_slot(node) is None)  # no source read
                and (value is None or int(value.nbytes or 0) <= FIXED_BYTES)
            )
            self._fixed[call_id] = known  # before the inputs: the dataflow has no cycle
            known = known and all(self.fixed(p) for p in inputs)
            self._fixed[call_id] = known
        return known

    def outside(self, node: Any, chain_ids: set[int]) -> bool:
        """Whether ``node`` takes a value computed in the sample outside the chain, other than
        a constant (:meth:`fixed`)."""
        return any(not self.fixed(p) for p in self.producers(node) - chain_ids)


FIXED_BYTES = 1 << 16
"""The largest constant computed in a sample that a chain's call may take besides its values."""


def _sample_chains(
    dag: ExecutionDAG, ops: list[Any], sample: int, skipped: list[Skipped] | None = None
) -> list[TracedChain]:
    operations = sorted(
        (n for n in ops if is_operation(n) and _top_level(dag, n)), key=lambda n: n.id
    )
    graph = _SampleGraph(dag, operations)
    chains = []
    first: Any = None
    for node in operations:
        computed = graph.producers(node) and not _reads_what_was_opened(node.name)
        if computed or _random(node.name) or node.name.startswith(_PROXY_HANDLED):
            continue  # a slice or operator of a value: a source is read by a library call
        slot = _source_slot(node)
        if slot is None:
            first = first or node
            continue
        if slot[1] == "array" and any(r < node.id for r in graph.randoms):
            continue  # an array that may come from a random draw the trace did not follow
        steps, stop = _follow(graph, node, slot[0])
        caller = caller_of(node)
        line = _site_line(node.call_site) if caller else 0
        chains.append(TracedChain(sample, caller, slot[0], slot[1], steps, stop, line))
    if not chains and first is not None and skipped is not None:
        skipped.append(Skipped(first.name, caller_of(first), _not_a_source(first)))
    return chains


def _reads_what_was_opened(name: str) -> bool:
    """Whether ``name`` is a declared file source reading an object the sample opened from a
    file (``np.load(path)["image"]``): its input is computed in the sample, but from the file
    alone, which identifies it (:attr:`~codedag.backends.facts.FileSource.opened_from`)."""
    declared = file_source(name)
    return declared is not None and bool(declared.opened_from)


def _followed(name: str) -> bool:
    """Whether a chain's values record a call of ``name`` as a step at run time: a method of an
    array, image or tensor only where they record it (``.astype``, ``.convert``, ``.permute``;
    not ``.to``), and every operator they install."""
    from codedag.migrate.cache.headers import LEFT_OUT_OPERATORS, RECORDED_METHODS

    if name.startswith(_METHOD_OWNERS):
        return name in RECORDED_METHODS
    module, _, short = name.rpartition(".")
    return module != "operator" or short not in LEFT_OUT_OPERATORS


_DATA_TYPES = DataTypes()
"""The libraries' data value types (a PIL ``JpegImageFile`` is an image), resolved as loaded."""


def _patchable(name: str) -> bool:
    """Whether the cache's run time may patch ``name`` where it runs (a registered op, or a
    function of a library the registry loads: :func:`~codedag.backends.admission.admit_in_place`)
    where it is a function it patches at all (not an operator, a method or a NumPy function,
    which its values record themselves)."""
    if not functions_to_patch([name]):
        return True
    from codedag.backends.admission import admit_in_place

    return admit_in_place([("", name)]).allows_in_place(name)


def _other_objects_method(name: str) -> bool:
    """Whether ``name`` is a method of an object other than an array, image or tensor (a cv2
    ``CLAHE``'s ``apply``): its ``self`` has no value a run-time key can hold."""
    from codedag.patching import loaded_value

    if name.startswith(_METHOD_OWNERS):
        return False
    try:
        owner = loaded_value(name.rpartition(".")[0])
    except LookupError:
        return False
    return isinstance(owner, type) and not _DATA_TYPES.is_data(owner)


def _follow(graph: _SampleGraph, node: Any, slot: str) -> tuple[list[Step], str]:
    """The steps of the chain from its source call ``node``, and why it stops where it does."""
    dag, randoms = graph.dag, graph.randoms
    steps: list[Step] = []
    counts: dict[str, int] = {}
    chain_ids = {node.id}
    # a draw before the source call may reach its other arguments (``librosa.load(path,
    # offset=random.uniform(...))``): then no key of it comes back in a later epoch
    drawn = next((dag.nodes[r].name for r in randoms if r < node.id), "")

    def add(call: Any, consumer: Any | None, branch: bool = False) -> None:
        # the run time counts a cut's calls on the way through each call's first input of the
        # chain: never on a branch, whose calls' occurrences count apart; a step that merges a
        # statement's operations is as many calls there (``(img / 255.0 - MEAN) / STD``)
        suffix = " branch" if branch else ""
        for merged in call.operations[:-1]:
            counts[merged + suffix] = counts.get(merged + suffix, -1) + 1
        name = call.name + suffix
        counts[name] = counts.get(name, -1) + 1
        before = steps[-1] if steps else None
        draws = [r for r in randoms if node.id < r < call.id]
        # a draw after the source call is judged across samples (``common``)
        seen = (dag.nodes[draws[0]].name if draws else "") if steps else drawn
        step = _describe(dag, call, counts[name], consumer, seen, before, slot)
        steps.append(replace(step, branch=True) if branch else step)

    current = node
    while True:
        nexts = graph.consumers(current)
        after = nexts[0] if len(nexts) == 1 else None
        add(current, after)
        if not nexts:
            return steps, OUTPUT
        if graph.returned(current):  # and into the sample, which a hit would hand a stand-in
            names = ", ".join(dict.fromkeys(n.name for n in nexts))
            if after is not None:
                return steps, f"{SHARED_STOP} {names} and into the sample"
            return steps, f"{SHARED_STOP} {len(nexts)} operations ({names})"
        if after is None:
            met = _meeting(graph, nexts, chain_ids, steps)
            if isinstance(met, str):
                return steps, met
            branches, after = met
            for call in branches:
                add(call, None, branch=True)
                chain_ids.add(call.id)
        why = _stop_before(after) or _indexed_by_chain(graph, after, chain_ids, steps)
        if why:
            return steps, why
        if graph.outside(after, chain_ids):
            return steps, f"{after.name} also takes a value computed in the sample"
        chain_ids.add(after.id)
        current = after


MAX_BRANCH_CALLS = 64
"""Calls the branches of a chain's value may make before they meet again (``img.min()`` and
``img.max()`` meeting in ``(img - lo) / (hi - lo)``; a clip's 16 frames, each taken, resized
and converted, meeting in ``np.stack``). A chain makes at most
:data:`~codedag.migrate.cache.prefix_values.MAX_STEPS` calls along its first inputs."""


def _meeting(
    graph: _SampleGraph, nexts: list[Any], chain_ids: set[int], steps: list[Step]
) -> tuple[list[Any], Any] | str:
    """Where the operations taking a chain value (``nexts``, several) meet again: the calls on
    the branches, in call order, and the one call every branch's value goes to (a min-max or
    percentile normalization reads the image twice and gives one value); or why the chain stops
    before them: a branch's call is one the chain cannot go into (:func:`_stop_before`,
    :func:`_indexed_by_chain`; ``steps``: the chain's so far), its value goes into the sample
    or it takes a value computed outside the chain, or the branches do not meet within
    :data:`MAX_BRANCH_CALLS` calls.

    A branch whose array value nothing traced takes (``lo, hi = np.percentile(img, (1, 99))``:
    the tracer does not follow unpacking) ends there, as a prefix value unpacks into steps at
    run time; a scalar nothing traced takes ends the chain (``float(img.max())``, ``if
    img.max() > 1``: a number or a truth value needs the real value)."""
    names = ", ".join(dict.fromkeys(n.name for n in nexts))
    stop = f"{SHARED_STOP} {len(nexts)} operations ({names})"
    branches: dict[int, Any] = {}
    waiting = {n.id: n for n in nexts}
    while len(waiting) > 1 or not branches:
        if len(branches) >= MAX_BRANCH_CALLS or not waiting:
            return stop
        call = waiting.pop(min(waiting))
        taken = chain_ids | branches.keys()
        if graph.outside(call, taken) or graph.returned(call) or _stop_before(call):
            return stop
        if _indexed_by_chain(graph, call, taken, steps):  # ``table[gray]`` on a branch
            return stop
        branches[call.id] = call
        following = graph.consumers(call)
        if not following:
            value = _value(graph.dag, call.id)
            if value is None or not value.shape:
                return stop
        waiting.update((n.id, n) for n in following)
    (meeting,) = waiting.values()
    return [branches[k] for k in sorted(branches)], meeting


def _indexed_by_chain(
    graph: _SampleGraph, call: Any, chain_ids: set[int], steps: list[Step]
) -> str:
    """Why a chain cannot go on into a subscript that also takes a constant the sample computes
    and whose container is not known to be a value of the chain (``np.eye(C)[mask]``: the
    chain's value is the index, and the array's own ``__getitem__`` needs its real value); ``""``
    where it can (it takes only values of the chain, or its container has a chain value's
    shape and dtype)."""
    if call.name != "operator.getitem" or not graph.producers(call) - chain_ids:
        return ""
    container = next((e for e in call.args or () if str(e.get("name")) == "0"), None)
    if container is not None and container.get("kind") == "array":
        layout = (list(container.get("shape") or ()), str(container.get("dtype") or ""))
        if any(layout == ([*s.shape], s.dtype) for s in steps):
            return ""
    return f"{call.name} may index an array with the chain's value, which needs the real value"


def _stop_before(call: Any) -> str:
    """Why a chain cannot go on into ``call``, or an operation it merges (``""``: it can)."""
    for name in (*call.operations[:-1], call.name):
        if name in _WRITES or _random(name):
            return f"{name} writes or draws random numbers"
        if not _followed(name):
            return f"{name} is a method the cache's values do not record"
        if _other_objects_method(name):  # ``self.clahe.apply(img)``: the CLAHE is its self
            return f"{name} is a method of an object no key can hold"
        if not _patchable(name):  # the run time would leave it, and so the chain, alone
            return f"{name} is of no library codedag knows (it cannot be patched)"
    return ""


def find_prefixes(dag: Any) -> PrefixFound:
    """The deterministic prefix chains of each traced sample, grouped across samples."""
    dag = getattr(dag, "source", dag)
    samples = traced_samples(dag, resumptions=True)
    info = (getattr(dag, "metadata", {}) or {}).get("dataloader") or {}
    length = info.get("dataset_len")
    dataset_len = length if isinstance(length, int) and not isinstance(length, bool) else None
    if not samples:
        note = "the trace holds no DataLoader samples"
        if info.get("iterable"):
            note = (
                f"the data set ({info.get('dataset') or 'an IterableDataset'}) is iterable and "
                "its __iter__ hands its samples to a generator that is not one of its methods: "
                "the prefix cache follows the samples of a map-style data set's __getitem__, or "
                "an iterable one's own generator from one yield to the next"
            )
        return PrefixFound([], 0, dataset_len, note)
    calls = frozenset(n.name for ops in samples for n in ops if is_operation(n))
    skipped: list[Skipped] = []
    traced = [t for i, ops in enumerate(samples) for t in _sample_chains(dag, ops, i, skipped)]
    chains = _grouped_chains(traced)
    note = "" if chains else "no sample reads a source (a buffer, a file) that a chain follows"
    if not chains and skipped:
        note = "no sample reads a source: " + "; ".join(s.reason for s in _grouped(skipped))
    # samples split by dataflow (the data set's code not traced) are parts of samples: there are
    # no more samples than the traced batch holds
    from codedag.optimize.batched import traced_batch_size

    count = min(len(samples), traced_batch_size(dag, len(samples)))
    sample_ns = int(median(sum(int(n.total_ns) for n in ops if is_operation(n)) for ops in samples))
    return PrefixFound(chains, count, dataset_len, note, calls, _grouped(skipped), sample_ns)


def _site_line(site: str) -> int:
    """The line of a traced call site (``path:line``; 0 when it names none)."""
    line = site.rpartition(":")[2]
    return int(line) if line.isdigit() else 0


def _grouped_chains(traced: list[TracedChain]) -> list[PrefixChain]:
    """The traced chains grouped by caller and source function, and by the caller's line where
    one caller starts chains of one source function at several lines (they may go on through
    different calls: an image converted and resized, its mask only resized)."""
    lines: dict[tuple[str, str], set[int]] = {}
    for chain in traced:
        lines.setdefault((chain.caller, chain.steps[0].name), set()).add(chain.line)
    groups: dict[tuple[str, str, int], PrefixChain] = {}
    for chain in traced:
        caller, function = chain.caller, chain.steps[0].name
        found = lines[(caller, function)]
        line = chain.line if len(found) > 1 and 0 not in found else 0
        group = groups.get((caller, function, line))
        if group is None:
            group = PrefixChain(f"prefix{len(groups)}", function, caller)
            group.lines = [line] if line else []
            groups[(caller, function, line)] = group
        group.traced.append(chain)
    return list(groups.values())


def _grouped(skipped: list[Skipped]) -> list[Skipped]:
    """One entry per function and caller, counting its samples."""
    out: dict[tuple[str, str], Skipped] = {}
    for item in skipped:
        found = out.get((item.function, item.caller))
        if found is None:
            out[(item.function, item.caller)] = Skipped(item.function, item.caller, item.reason)
        else:
            found.samples += 1
    return list(out.values())


def candidates(chain: PrefixChain) -> list[Candidate]:
    """Every cut along the part of the chain all traced sources share, with median figures.

    A call that returns an object the sample held before (its input: ``cv2.circle(img, ...)``
    draws into ``img`` and returns it) stands in for nothing: a value read back there is a new
    object, while the sample goes on with the one it holds (``img``, the call's result
    ignored), whose stand-in would then be computed without the call's writes.

    Nor is a call on a branch of the chain's value a cut (:attr:`Step.branch`), nor a call of
    a function a branch before it calls too: the run time counts a cut function's calls on its
    way from the source through each call's first input of the chain, and the calls every way
    passes (not on a branch) are the ones the plan's occurrences count.
    """
    out = []
    branches: set[str] = set()
    for position, (name, occurrence) in enumerate(chain.common):
        if chain.traced[0].steps[position].branch:
            branches.add(name)  # not a cut: where the branches meet takes other values too
            continue
        if name in branches:  # the run time counts a cut's calls on one way from the source,
            continue  # which may pass a branch's call of the same function
        prefix = [sum(s.total_ns for s in t.steps[: position + 1]) for t in chain.traced]
        sizes = [t.steps[position].nbytes for t in chain.traced]
        first = chain.traced[0].steps[position]
        drawn = (t.steps[q].drawn for t in chain.traced for q in range(1, position + 1))
        out.append(
            Candidate(
                position,
                name,
                occurrence,
                int(median(prefix)),
                int(median(sizes)),
                first.shape,
                first.dtype,
                first.image_mode,
                (position > 0 or _source_stands_in(chain))
                and not any(t.steps[position].returns_seen for t in chain.traced),
                next((d for d in drawn if d), ""),
            )
        )
    return out


def path_share(candidate: Candidate, samples: int) -> float:
    """The share of samples expected to reach ``candidate``'s cut on the traced path, where
    ``samples`` traced samples all did: 1 before any random draw; after one, Laplace's rule of
    succession, (n + 1) / (n + 2), as a call there may run only when a draw says so (all 4
    traced samples flipped by a ``p=0.5`` draw once in 16 plans, and half of every epoch would
    miss a cut after the flip)."""
    return 1.0 if not candidate.after_draw else (samples + 1) / (samples + 2)


def _source_stands_in(chain: PrefixChain) -> bool:
    """Whether a value read back stands in for the chain's source call in every traced sample:
    the call returns the value itself, or a tuple whose other items echo its arguments
    (``librosa.load``'s rate is its ``sr``, unless that is ``None``)."""
    declared = file_source(chain.source_function)
    if declared is None or declared.item is None:
        return True
    if len(declared.echoes) != declared.length - 1:
        return False
    for traced in chain.traced:
        text = traced.steps[0].arguments
        if text == "?":  # not recorded: the run time tells
            continue
        given = {str(e.get("name")): e.get("value") for e in json.loads(text)}
        if any(given.get(argument) is None for argument in declared.echoes.values()):
            return False
    return True


def functions_to_guard(functions: list[str], calls: frozenset[str]) -> list[str]:
    """The traced calls of the chain's libraries that are not in the chain (``cv2.copyMakeBorder``
    where the chain is ``cv2.imdecode``, ``cv2.resize``): such a library takes arrays only (cv2
    ignores ``__array__``), so a value before the cut that reaches one, on a branch the chain does
    not take, is computed there and its chain computed normally."""
    roots = {name.split(".", 1)[0] for name in functions if not library_takes_any_value(name)}
    return sorted(
        name
        for name in calls
        if name.split(".", 1)[0] in roots
        and name not in functions
        and not name.startswith(_PROXY_HANDLED)
        and not name.endswith(".__del__")  # a destructor is handed no value of the chain
        and not takes_any_value(name)
    )


def functions_to_patch(steps: list[str]) -> list[str]:
    """The library functions of a chain that the cache patches (the rest reach its values
    through operators, methods and NumPy's dispatch)."""
    out: set[str] = set()
    for name in steps:
        if name.startswith(_PROXY_HANDLED):
            continue
        if name.startswith("numpy.") and name not in NO_DISPATCH:
            continue
        out.add(name)
    return sorted(out)


Costs = Callable[[int], tuple[int, int]]
"""``bytes -> (read_ns, write_ns)`` of the store, measured."""


def decide(
    found: PrefixFound,
    costs: Costs | None,
    budget_bytes: int,
    mode: str = "auto",
    first_epoch: FirstEpoch = "all",
) -> CacheSection:
    """The plan's ``cache`` section for the chains found.

    Args:
        found: what :func:`find_prefixes` found.
        costs: the store's measured read and write cost per size (``None``: not measured, so
            nothing is cached).
        budget_bytes: the memory the cached values may take (the RAM tier's budget).
        mode: ``auto`` or ``off``.
        first_epoch: how the first epoch stores values (:data:`~codedag.plan.cache.FirstEpoch`;
            :func:`pace_first_epoch`).
    """
    section = CacheSection(
        mode="off" if mode == "off" else "auto",
        budget_bytes=max(0, budget_bytes),
        dataset_len=found.dataset_len,
        samples=found.samples,
        sample_ns=max(0, found.sample_ns),
    )
    left = budget_bytes
    per_sample = max(1, found.samples)
    for chain in found.chains:
        entry = _chain_entry(chain, found.calls)
        distinct = _distinct_sources(chain, found)
        best, unpaid, risky = _weigh_cuts(chain, entry, costs, distinct, left)
        if mode != "off" and not chain.common:  # not even its source call's value
            entry.reason = f"no value to keep: {entry.stop}"
        elif mode == "off" or costs is None or best is None:
            entry.reason = _uncached_reason(mode, costs is not None, unpaid, bool(entry.candidates))
            if mode != "off" and costs is not None and not entry.candidates:
                entry.reason = _unstorable_reason(chain) or _source_reason(chain) or entry.reason
            elif mode != "off" and not any(c.bytes_per_sample for c in entry.candidates):
                entry.reason = _no_data_reason(chain, found.chains)
        else:
            cut = best[1]
            total = cut.bytes_per_sample * distinct
            fits = min(total, max(0, left))
            left -= fits
            share = fits / total if total else 0.0
            sources = len(chain.traced) / per_sample
            section.saved_ns_per_sample += int(share * cut.saved_ns * sources)
            section.write_ns_per_sample += int(share * cut.write_ns * sources)
            section.bytes_total += fits
            entry.cut, entry.cached, entry.share = cut, True, share
            entry.reason = (
                f"cut after {cut.step} (call {cut.position + 1} of {len(entry.steps)}): a hit "
                f"saves {_ms(cut.saved_ns)} of {_ms(cut.prefix_ns)} traced (reading "
                f"{_mb(cut.bytes_per_sample)} back takes {_ms(cut.read_ns)}; storing it once "
                f"{_ms(cut.write_ns)}); {_mb(total)} for {distinct} sources"
                + ("" if share >= 1 else f", {share:.0%} of them within the budget")
            )
            clause = bytes_clause(entry.candidates, cut, EPOCHS, MIN_SAVING)
            entry.reason += f"; {clause}" if clause else ""
            entry.reason += _margin_clause(risky)
            entry.reason += _path_clause(chain, cut)
        # why no later cut, in one clause: a draw or a shared value, or whatever ends the chain
        # where the cut is its last call
        at_end = entry.cut is not None and entry.cut.position + 1 == len(entry.steps)
        if entry.stop.startswith((RANDOM_STOP, SHARED_STOP)) or (at_end and entry.stop != OUTPUT):
            entry.reason += f"; {entry.stop}"
        section.chains.append(entry)
    section.skipped = [
        SkippedSource(function=s.function, caller=s.caller, reason=s.reason, samples=s.samples)
        for s in found.skipped
    ]
    note = found.note
    if not note and not section.cached_chains:
        note = "nothing is cached: " + "; ".join(c.reason for c in section.chains)
    section.note = note
    pace_first_epoch(section, first_epoch)
    return section


def _distinct_sources(chain: PrefixChain, found: PrefixFound) -> int:
    """The values ``chain`` stores over an epoch: one per sample of the data set, in the share
    of traced samples that ran it (a part of a ``ConcatDataset``, a branch some samples take:
    two chains that each ran in half the samples do not each count the whole data set)."""
    if not found.dataset_len:
        return len(chain.traced)
    if not found.samples or chain.samples >= found.samples:
        return found.dataset_len
    return max(1, round(found.dataset_len * chain.samples / found.samples))


def _path_clause(chain: PrefixChain, cut: CacheCut) -> str:
    """Why the cut is not a later one that would save more on a hit, where that one follows a
    random draw (:func:`path_share`), or ``""``."""
    later = [
        c
        for c in candidates(chain)
        if c.position > cut.position and c.after_draw and c.prefix_ns > cut.prefix_ns
    ]
    if not later:
        return ""
    n = chain.samples
    return (
        f"; a cut after {later[-1].step} follows a random draw ({later[0].after_draw}), so it "
        f"is weighed as reached by {n + 1} samples in {n + 2}, though all {n} traced ones did"
    )


def _no_data_reason(chain: PrefixChain, chains: list[PrefixChain]) -> str:
    """Why a chain whose values hold no data the store keeps (``np.load`` of an ``.npz``: an
    archive its arrays are read from by key, each read a chain of its own among ``chains``) is
    not cached."""
    steps = [name for name, _ in chain.common]
    readers = sorted(
        {
            c.source_function
            for c in chains
            if c.caller == chain.caller and _reads_what_was_opened(c.source_function)
        }
    )
    if readers:
        return (
            f"{' and '.join(steps)} return{'s' if len(steps) == 1 else ''} an archive, read "
            f"further by {', '.join(readers)}: each read is a chain of its own"
        )
    return (
        f"{' and '.join(steps)} return{'s' if len(steps) == 1 else ''} no array, image or "
        "tensor (an archive or a handle read further by code the trace does not follow): "
        "nothing the store can keep" + ("" if chain.stop == OUTPUT else f"; {chain.stop}")
    )


def _unstorable_reason(chain: PrefixChain) -> str:
    """Why a chain whose every value the store cannot keep is not cached (PIL images of some
    modes, arrays of Python objects), or ``""``."""
    unkept = [c for c in candidates(chain) if not c.storable]
    if not unkept:
        return ""
    modes = sorted({c.image_mode for c in unkept if c.image_mode and c.dtype != "object"})
    if not modes:
        return "its values are arrays of Python objects, which the store cannot keep"
    palette = " (an array of a palette image leaves its palette out)"
    return (
        f"its values are PIL images of mode {', '.join(modes)}, which the store cannot keep "
        "exactly" + (palette if {"P", "PA"} & set(modes) else "")
    )


def _source_reason(chain: PrefixChain) -> str:
    """Why a chain whose only value is its source call's is not cached, where that call's other
    results come from the call alone, or ``""``."""
    if len(chain.common) != 1 or _source_stands_in(chain):
        return ""
    return (
        f"{chain.source_function}'s other results come from the file, so the call runs in every "
        "epoch, and the chain has no value after it"
    )


def _uncached_reason(mode: str, measured: bool, unpaid: CacheCut | None, candidates: bool) -> str:
    """Why a chain is not cached: the cache is off, the store was not measured, its best cut
    does not pay for storing (``unpaid``), or no cut saves time."""
    if mode == "off":
        return "the cache is off (--cache off)"
    if not measured:
        return "the store's costs were not measured: nothing is cached"
    if unpaid is not None:
        return (
            f"no cut pays for storing: the best, after {unpaid.step}, costs "
            f"{_ms(unpaid.write_ns)} to store and {_ms(unpaid.read_ns)} to read back "
            f"({_mb(unpaid.bytes_per_sample)}), more than the {_ms(unpaid.prefix_ns)} "
            "it takes to compute"
        )
    if candidates:
        return "no cut saves time: reading a value back costs about what computing it does"
    return "the chain has no value to keep"


def pace_first_epoch(section: CacheSection, first_epoch: FirstEpoch = "all") -> None:
    """Set how the section's first epoch stores values, and say why (``first_epoch``).

    A first epoch has no hit: what storing costs it (the writer's copy, the loading thread's
    checksum) is added to it wherever the loading fills every core. ``all`` stores every value
    in the epoch that computes it (the default: the fastest run of two epochs or more), ``auto``
    paces storing (:data:`~codedag.plan.cache.STORE_SHARE` of the loading time until a hit)
    where storing every value would cost more than
    :data:`~codedag.plan.cache.FIRST_EPOCH_SLACK` of a sample's traced library time, ``paced``
    always. A value a paced epoch leaves is stored by the next one, which then gains that much
    less. The line says what storing costs either way.
    """
    section.store_share, section.first_epoch = 0.0, ""
    if not section.cached_chains:
        return
    write, sample = section.write_ns_per_sample, section.sample_ns
    cost = f"storing every value adds {_ms(write)} per sample"
    if sample:
        cost += f", {write / sample:.0%} of a sample's {_ms(sample)} traced"
    dear = first_epoch == "paced" or write > FIRST_EPOCH_SLACK * sample
    stored = min(1.0, STORE_SHARE * sample / write) if write and sample else 1.0
    forgone = _ms((1 - stored) * section.saved_ns_per_sample)
    if first_epoch == "all" or not dear:
        section.first_epoch = f"the first epoch stores every value: {cost}"
        if first_epoch == "all" and dear:
            section.first_epoch += (
                f"; --first-epoch auto would pace it (about {stored:.0%} stored in the first "
                f"epoch, the second gaining about {forgone} per sample less)"
            )
        return
    section.store_share = STORE_SHARE
    why = " (--first-epoch paced)" if first_epoch == "paced" else ""
    section.first_epoch = (
        f"the first epoch stores values while storing takes under {STORE_SHARE:.0%} of its "
        f"loading time{why} (about {stored:.0%} of them): {cost}; the second stores the rest "
        f"from its first hit on and gains about {forgone} per sample less"
    )


class _Weighed(NamedTuple):
    """A chain's candidate cuts weighed: ``best`` (its value over the epochs, the cut), the cut
    that saves the most on a hit but does not pay for its write (``unpaid``), and the cut of
    more value than ``best`` passed over for paying with too thin a margin (``risky``)."""

    best: tuple[float, CacheCut] | None
    unpaid: CacheCut | None
    risky: CacheCut | None


def _weigh_cuts(
    chain: PrefixChain, entry: CacheChain, costs: Costs | None, distinct: int, left: int
) -> _Weighed:
    """Each candidate cut of ``chain`` with its measured costs (added to ``entry``), weighed:
    the cut of most value over the epochs among those that pay for their write by
    :data:`PAYBACK_EPOCHS` within :data:`PAYBACK_MARGIN`, where that is worth half the best
    one's value at least (else the best of those that pay)."""
    best: tuple[float, CacheCut] | None = None
    sure: tuple[float, CacheCut] | None = None
    unpaid: CacheCut | None = None
    for cand in candidates(chain):
        if not cand.storable or not cand.stands_in:
            continue
        reached = path_share(cand, chain.samples)
        cut = CacheCut(
            step=cand.step,
            occurrence=cand.occurrence,
            position=cand.position,
            bytes_per_sample=cand.nbytes,
            shape=list(cand.shape),
            dtype=cand.dtype,
            prefix_ns=cand.prefix_ns,
        )
        if costs is not None and cand.nbytes:
            read_ns, write_ns = costs(cand.nbytes)
            cut.read_ns, cut.write_ns = read_ns, write_ns
            cut.saved_ns = cand.prefix_ns - read_ns
            total = cand.nbytes * distinct
            share = min(1.0, max(0, left) / total) if total else 0.0
            value = share * (EPOCHS - 1) * reached * cut.saved_ns - write_ns
            saves = cut.saved_ns > MIN_SAVING * cand.prefix_ns
            pays_back = write_ns <= PAYBACK_EPOCHS * cut.saved_ns
            if saves and not pays_back and (unpaid is None or cut.saved_ns > unpaid.saved_ns):
                unpaid = cut
            if saves and pays_back and value > 0 and (best is None or value > best[0]):
                best = (value, cut)
            margin = write_ns + read_ns <= PAYBACK_MARGIN * cand.prefix_ns
            if saves and pays_back and margin and value > 0 and (sure is None or value > sure[0]):
                sure = (value, cut)
        entry.candidates.append(cut)
    if sure is None or best is None or sure[1] is best[1] or sure[0] < best[0] / 2:
        return _Weighed(best, unpaid, None)  # the run time judges a thin margin
    return _Weighed(sure, unpaid, best[1])


def _margin_clause(risky: CacheCut | None) -> str:
    """Why the cut is not the one of more value passed over for its thin margin, or ``""``."""
    if risky is None:
        return ""
    costs = risky.write_ns + risky.read_ns
    return (
        f"; not at {risky.step}'s value ({_mb(risky.bytes_per_sample)} {risky.dtype}): storing "
        f"and reading it back ({_ms(costs)}) would take {costs / max(1, risky.prefix_ns):.0%} "
        f"of the {_ms(risky.prefix_ns)} computing it does, more than the "
        f"{PAYBACK_MARGIN:.0%} that surely pays in a first epoch sharing the cores"
    )


def _chain_entry(chain: PrefixChain, calls: frozenset[str]) -> CacheChain:
    steps = [s.name for s in chain.traced[0].steps[: len(chain.common)]]
    functions = functions_to_patch(steps)
    return CacheChain(
        id=chain.id,
        source_function=chain.source_function,
        source_kind=chain.traced[0].source_kind,
        source_slot=chain.traced[0].source_slot,
        callers=[chain.caller] if chain.caller else [],
        lines=chain.lines,
        context_keys=sorted({t.steps[0].context_key for t in chain.traced}),
        steps=steps,
        functions=functions,
        guards=functions_to_guard(functions, calls),
        sources=len(chain.traced),
        samples=chain.samples,
        stop=chain.stop,
    )
