"""Ragged prefixes: samples of different input sizes brought to one size, run as one batch.

Grouping by step keys runs a chain that starts on images of different sizes once per input
size until a step gives them one shape (a letterbox: ``cv2.resize`` to a size that keeps each
image's aspect ratio, then ``cv2.copyMakeBorder`` to a fixed square). When every sample's
program starts with such a prefix (an optional uint8 ``INTER_LINEAR`` resize of a payload
image, then an optional constant border) and the rest of the programs is the same, the prefix
runs here as one gather over the whole batch instead: each output pixel reads its four source
pixels through per-sample index tables (rows and columns, padded to the common output size),
weighs them with cv2's 11-bit fixed-point weights and rounds as cv2 does, so the result is
bit for bit cv2's.

A border pixel has zero weights and a bias that makes the same arithmetic give the fill
value: a column outside the image gives ``fill * 128`` from the horizontal pass (what a row of
``fill`` gives), a row outside gives ``(4 * fill + 2) >> 2`` from the vertical one. A missing
resize is the identity (weights ``2048, 0``).

Each sample's tables depend only on its sizes, pads and fill (computed once per signature and
kept); a batch stacks them on the host and uploads them in one copy: no host reads of device
data, and a fixed number of aten ops per batch whatever the number of sizes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import codedag.backends.batched.fusion as fusion
from codedag.backends.batched.collate import BatchRecord, Ref, Step
from codedag.backends.batched.fusion import Plan
from codedag.backends.batched.ops import LibraryOp, Meta, Op
from codedag.backends.batched.transfer import DeviceIO
from codedag.backends.ops.cv2._common import BORDER_CONSTANT, BORDER_ISOLATED, scalar_values
from codedag.backends.ops.cv2.resize import area_switch, linear_u8_taps, output_size
from codedag.errors import UnsupportedOperation

RESIZE = "cv2.resize"
BORDER = "cv2.copyMakeBorder"
_ONE = 2048  # INTER_RESIZE_COEF_SCALE: a weight of 1
_MAX_INDEX = 2**31 - 1
_MAX_TABLES = 4096


@dataclass(frozen=True)
class _Tables:
    """One sample's prefix as taps: ``rows`` ``(2, OH)`` source row offsets (in elements of its
    image), ``cols`` ``(2, OW, C)`` source element offsets in a row, ``wx`` ``(2, OW)`` and
    ``wy`` ``(2, OH)`` weights, ``hb`` ``(2, OW, C)`` and ``vb`` ``(2, OH, C)`` biases."""

    rows: np.ndarray
    cols: np.ndarray
    wx: np.ndarray
    hb: np.ndarray
    wy: np.ndarray
    vb: np.ndarray


def _axis(
    src: int, taps: tuple[np.ndarray, np.ndarray] | None, before: int, after: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices ``(2, out)``, weights ``(2, out)`` and whether each output lies inside the
    image, along one axis: the resize's taps (``None``: the identity) between the pads."""
    if taps is None:
        idx = np.stack([np.arange(src), np.arange(src)], axis=1)
        w = np.tile(np.array([_ONE, 0], np.int32), (src, 1))
    else:
        idx, w = taps
    size = before + len(idx) + after
    full_idx = np.zeros((2, size), np.int64)
    full_w = np.zeros((2, size), np.int32)
    inside = np.zeros(size, bool)
    full_idx[:, before : before + len(idx)] = idx.T
    full_w[:, before : before + len(idx)] = w.T
    inside[before : before + len(idx)] = True
    return full_idx, full_w, inside


def _taps(
    src: int, size: tuple[int, int, float, float] | None, vertical: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """One axis of a resize: cv2's linear taps, or the exact 2x shrink cv2 runs as INTER_AREA
    (``(a + b + c + d + 2) >> 2``: pairs of weight 1024 on both axes give exactly that)."""
    if size is None:
        return None
    dst = size[1] if vertical else size[0]
    if area_switch(size[2], size[3]):
        pairs = np.arange(dst)[:, None] * 2 + np.arange(2)
        return pairs, np.full((dst, 2), _ONE // 2, np.int32)
    return linear_u8_taps(src, dst, size[3] if vertical else size[2], vertical)


def _tables(
    shape: tuple[int, int, int],
    size: tuple[int, int, float, float] | None,
    pads: tuple[int, int, int, int],
    fill: tuple[int, ...],
) -> _Tables:
    sh, sw, c = shape
    top, bottom, left, right = pads
    ry, wy, in_y = _axis(sh, _taps(sh, size, True), top, bottom)
    rx, wx, in_x = _axis(sw, _taps(sw, size, False), left, right)
    f = np.asarray(fill, np.int64)
    channel = np.arange(c)
    cols = rx[:, :, None] * c + channel
    hb = np.zeros((2, len(in_x), c), np.int64)
    hb[0, ~in_x] = f * _ONE
    vb = np.zeros((2, len(in_y), c), np.int64)
    vb[0, in_y] = 2 << 16
    vb[0, ~in_y] = (4 * f + 2) << 16
    return _Tables(ry * (sw * c), cols, wx, hb, wy, vb)


_TableKey = tuple[
    tuple[int, int, int],
    tuple[int, int, float, float] | None,
    tuple[int, int, int, int],
    tuple[int, ...],
]
"""The arguments of :func:`_tables`: shape, resize size, pads, fill."""
_CACHE: dict[_TableKey, _Tables] = {}
_LOCK = threading.Lock()


def _cached_tables(key: _TableKey) -> _Tables:
    """``_tables(*key)``, kept for later records of the same key."""
    found = _CACHE.get(key)
    if found is None:
        found = _tables(*key)
        with _LOCK:
            if len(_CACHE) >= _MAX_TABLES:
                _CACHE.clear()
            _CACHE[key] = found
    return found


class PaddedOp(Op):
    """A batch's ragged prefixes as one gather (module docstring); made per record."""

    name = "ragged[resize+copyMakeBorder]"

    def __init__(self, tables: list[_Tables], offsets: list[int], meta: Meta) -> None:
        self.tables = tables
        self.offsets = offsets
        self.meta_out = meta

    def key(self) -> tuple[Any, ...]:
        return ("ragged", id(self))

    def original(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a ragged prefix is never replayed: its steps are")

    def run_on(self, payload: torch.Tensor, io: DeviceIO) -> torch.Tensor:
        """The prefixes' results ``(n, OH, OW[, C])`` from the payload on the device."""
        n = len(self.tables)
        first = self.tables[0]
        oh, ow, c = first.wy.shape[1], first.wx.shape[1], first.cols.shape[2]
        rows = np.stack([t.rows for t in self.tables]) + np.asarray(self.offsets)[:, None, None]
        parts = [
            rows,
            np.stack([t.cols for t in self.tables]),
            np.stack([t.wx for t in self.tables]),
            np.stack([t.hb for t in self.tables]),
            np.stack([t.wy for t in self.tables]),
            np.stack([t.vb for t in self.tables]),
        ]
        packed = io.value(np.concatenate([p.reshape(-1) for p in parts]).astype(np.int32))
        r, cols, wx, hb, wy, vb = packed.split([p.size for p in parts])
        index = r.view(n, 2, oh, 1, 1, 1) + cols.view(n, 1, 1, 2, ow, c)
        g = payload.index_select(0, index.view(-1)).view(n, 2, oh, 2, ow, c).to(torch.int32)
        h = torch.addcmul(hb.view(n, 1, 1, 2, ow, c), g, wx.view(n, 1, 1, 2, ow, 1))
        h = h.sum(3, dtype=torch.int32)
        h >>= 4
        v = torch.addcmul(vb.view(n, 2, oh, 1, c), h, wy.view(n, 2, oh, 1, 1))
        v >>= 16
        out = v.sum(1, dtype=torch.int32)
        out >>= 2
        return out.to(torch.uint8).view(n, *self.meta_out.shape)


# -- recognizing a ragged record -----------------------------------------------------------------


def _bound(step: Step) -> dict[str, Any]:
    """The step's arguments by the library's names (concrete values; data as their refs)."""
    op = step.op
    assert isinstance(op, LibraryOp)
    named = {op.param(i): ref for i, ref in enumerate(step.args)}
    named.update(step.kwargs)
    return {k: (ref if ref[0] in ("s", "x") else ref[1]) for k, ref in named.items()}


def _prefix_length(program: list[Step]) -> int:
    """How many leading steps form a prefix this module runs: resize, border or both."""
    names = [s.op.name for s in program[:2]]
    if names[:2] == [RESIZE, BORDER]:
        k = 2
    elif names[:1] in ([RESIZE], [BORDER]):
        k = 1
    else:
        return 0
    if program[0].args[0][0] != "x" or (k == 2 and program[1].args[0] != ("s", 0)):
        return 0
    return k


def _fill(value: Any, c: int) -> tuple[int, ...]:
    """cv2's border value saturated to uint8 (``cvRound``, NaN and huge values to 0)."""
    out = []
    for v in scalar_values(value, c):
        r = float(np.rint(v)) if np.isfinite(v) and abs(v) < 2**31 else 0.0
        out.append(int(min(max(r, 0.0), 255.0)))
    return tuple(out)


def _sample_tables(program: list[Step], k: int, entry: Meta) -> _Tables:
    """One sample's tables, or UnsupportedOperation for a prefix this module cannot run."""
    if entry.kind != "array" or np.dtype(entry.dtype) != np.uint8 or entry.ndim not in (2, 3):
        raise UnsupportedOperation("ragged: not a uint8 image")
    sh, sw = entry.shape[:2]
    c = entry.shape[2] if entry.ndim == 3 else 1
    size = None
    steps = program[:k]
    if steps[0].op.name == RESIZE:
        a = _bound(steps[0])
        if a.get("dst") is not None or int(a.get("interpolation", 1)) != 1:
            raise UnsupportedOperation("ragged: only INTER_LINEAR")
        size = output_size(sw, sh, a.get("dsize"), a.get("fx", 0), a.get("fy", 0))
        if size is None:
            raise UnsupportedOperation("ragged: no output size")
        if area_switch(size[2], size[3]) and (c not in (1, 3, 4) or sw % 2 or sh % 2):
            raise UnsupportedOperation("ragged: a 2x shrink cv2 rounds otherwise")
        if (size[0], size[1]) == (sw, sh):
            size = None  # cv2 copies
        steps = steps[1:]
    pads, fill = (0, 0, 0, 0), (0,) * c
    if steps:
        a = _bound(steps[0])
        kind = a.get("borderType")
        if a.get("dst") is not None or kind is None or int(kind) & ~BORDER_ISOLATED != 0:
            raise UnsupportedOperation("ragged: only BORDER_CONSTANT")
        assert BORDER_CONSTANT == 0
        pads = tuple(int(a[p]) for p in ("top", "bottom", "left", "right"))  # type: ignore[assignment]
        if min(pads) < 0:
            raise UnsupportedOperation("ragged: a negative border")
        fill = _fill(a.get("value"), c)
    return _cached_tables(((sh, sw, c), size, pads, fill))


RaggedGroup = tuple[list[int], Plan, list[list[Step]]]
"""Samples whose programs after the prefix are the same, their plan and aligned programs."""


def plan(record: BatchRecord, samples: list[int], fuse: bool = True) -> list[RaggedGroup] | None:
    """Groups of ``samples`` that share one ragged prefix step, or ``None``.

    Each group's plan starts with the shared step (made here, for the samples of every group
    in turn), then the rest of its programs as :func:`codedag.backends.batched.fusion.plan`
    rewrites them; each aligned program is ``[shared step, *steps after the prefix]``. ``None``
    unless every sample has a prefix, the prefixes differ and all end at one shape.
    """
    programs = {i: record.programs[i] for i in samples}
    lengths = {i: _prefix_length(p) if p else 0 for i, p in programs.items()}
    if not all(lengths.values()) or record.payload.numel() > _MAX_INDEX:
        return None
    full: dict[int, list[Step]] = {i: p for i, p in programs.items() if p}
    prefixes = {tuple(s.key for s in full[i][: lengths[i]]) for i in samples}
    out_meta = full[samples[0]][lengths[samples[0]] - 1].meta
    if len(prefixes) < 2 or any(full[i][lengths[i] - 1].meta != out_meta for i in samples):
        return None
    by_rest: dict[Any, list[int]] = {}
    for i in samples:
        by_rest.setdefault(tuple(_relative(full[i], lengths[i])), []).append(i)
    order = [i for group in by_rest.values() for i in group]
    try:
        tables = [
            _sample_tables(full[i], lengths[i], record.entries[_entry(full[i])][1]) for i in order
        ]
    except UnsupportedOperation:
        return None
    op = PaddedOp(tables, [record.entries[_entry(full[i])][0] for i in order], out_meta)
    head = Step(op, (), (), out_meta, (("ragged", id(op)), (), ()))
    groups: list[RaggedGroup] = []
    for members in by_rest.values():
        first = members[0]
        rest = _rebased(fusion.plan(full[first], fuse=fuse), lengths[first])
        if rest is None:
            return None
        aligned = [[head, *full[i][lengths[i] :]] for i in members]
        groups.append((members, Plan([head, *rest.steps], [None, *rest.origins]), aligned))
    return groups


def _entry(program: list[Step]) -> int:
    """The payload entry a prefix reads."""
    return int(program[0].args[0][1])


def _relative(program: list[Step], k: int) -> list[tuple[Any, ...]]:
    """The program after its prefix: keys and argument refs relative to the prefix's end."""

    def ref(r: Ref) -> Ref:
        return ("s", r[1] - k) if r[0] == "s" else (r[0], None)

    return [
        (s.key, tuple(ref(r) for r in s.args), tuple((n, ref(r)) for n, r in s.kwargs))
        for s in program[k:]
    ]


def _rebased(base: Plan, k: int) -> Plan | None:
    """The first sample's plan after its prefix, refs and origins counted from the prefix's
    result as step 0 (``None`` when a later step reads the prefix's inner results)."""
    if base.origins[:k] != list(range(k)):
        return None
    steps: list[Step] = []
    for step in base.steps[k:]:

        def ref(r: Ref) -> Ref:
            return ("s", r[1] - k + 1) if r[0] == "s" else r

        refs = [r for r in (*step.args, *(r for _n, r in step.kwargs)) if r[0] == "s"]
        if any(r[1] < k - 1 for r in refs):
            return None
        args = tuple(ref(r) for r in step.args)
        kwargs = tuple((n, ref(r)) for n, r in step.kwargs)
        steps.append(Step(step.op, args, kwargs, step.meta, step.key))
    origins = [None if o is None else o - k + 1 for o in base.origins[k:]]
    return Plan(steps, origins)
