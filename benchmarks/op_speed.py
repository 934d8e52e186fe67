"""Per op: the library on N samples (one call each, as pipelines do) vs our torch backend on a batch
of N, side by side in one run: torch on the CPU and, where CUDA exists, on the GPU (inputs already
on the device, and with the uint8 host-to-device and result device-to-host copies included).

Usage: ``python benchmarks/op_speed.py [--batches 1,64] [--sizes 224,512] [--repeats 5] [--json]``.
Backends come from the registry (``codedag.migrate``); ops whose backend is absent are listed as
unavailable. GPU timings synchronize around each measurement.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.migrate.registry import default_registry


def _time_ms(fn: Callable[[], Any], repeats: int, cuda: bool = False) -> float:
    fn()  # warm-up (kernels, caches, filterbanks)
    samples = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def _image_ops(size: int) -> list[tuple[str, str, Callable[..., Any], dict[str, Any]]]:
    import cv2
    from PIL import ImageFilter

    half = (size // 2, size // 2)
    rot = cv2.getRotationMatrix2D((size / 2, size / 2), 15, 1.0)
    return [
        ("cv2.resize", "cv2", lambda im: cv2.resize(im, half), {"dsize": half}),
        ("cv2.cvtColor", "cv2", lambda im: cv2.cvtColor(im, cv2.COLOR_BGR2HSV), {"code": 40}),
        ("cv2.GaussianBlur", "cv2", lambda im: cv2.GaussianBlur(im, (5, 5), 0), {}),
        ("cv2.warpAffine", "cv2", lambda im: cv2.warpAffine(im, rot, (size, size)), {"M": rot}),
        ("cv2.flip", "cv2", lambda im: cv2.flip(im, 1), {"flipCode": 1}),
        ("numpy.clip", "numpy", lambda im: np.clip(im, 20, 200), {}),
        ("PIL.Image.Image.filter", "pil", lambda im: im.filter(ImageFilter.SHARPEN), {}),
    ]


def _backend_call(name: str, spec: Any, batch: torch.Tensor, *, extra: dict[str, Any]) -> Any:
    if name == "cv2.resize":
        return spec.backend(batch, extra["dsize"])
    if name == "cv2.cvtColor":
        return spec.backend(batch, extra["code"])
    if name == "cv2.GaussianBlur":
        return spec.backend(batch, (5, 5), 0)
    if name == "cv2.warpAffine":
        size = int(batch.shape[1])
        return spec.backend(batch, torch.as_tensor(extra["M"]), (size, size))
    if name == "cv2.flip":
        return spec.backend(batch, 1)
    if name == "numpy.clip":
        return spec.backend(batch, 20, 200)
    raise KeyError(name)


def _library_loop(fn: Callable[[Any], Any], samples: list[Any]) -> None:
    for sample in samples:
        fn(sample)


def _measure(
    row: dict[str, Any],
    library: Callable[[], Any],
    backend: Callable[[torch.Tensor], Any],
    host: torch.Tensor,
    repeats: int,
) -> dict[str, Any]:
    """Library time, backend time on the CPU and, with CUDA, on the GPU with and without copies."""
    row["library_ms"] = _time_ms(library, repeats)
    row["torch_cpu_ms"] = _time_ms(functools.partial(backend, host), repeats)
    if torch.cuda.is_available():
        dev = host.cuda()
        row["cuda_ms"] = _time_ms(functools.partial(backend, dev), repeats, cuda=True)
        row["cuda_with_copies_ms"] = _time_ms(
            functools.partial(_with_copies, backend, host), repeats, cuda=True
        )
    return row


def _with_copies(backend: Callable[[torch.Tensor], Any], host: torch.Tensor) -> Any:
    out = backend(host.cuda(non_blocking=False))
    out = getattr(out, "data", out)  # a PILBatch carries its tensor in .data
    return out.cpu() if isinstance(out, torch.Tensor) else out


def _rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    from PIL import Image, ImageFilter

    registry = default_registry()
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    for size in args.sizes:
        for n in args.batches:
            images = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(n)]
            host = torch.from_numpy(np.stack(images))
            for name, lib, fn, extra in _image_ops(size):
                spec = registry.get(name)
                row: dict[str, Any] = {"op": name, "input": f"{size}x{size}x3 u8", "n": n}
                if spec is None:
                    rows.append({**row, "unavailable": "no backend in this build"})
                    continue
                if lib == "pil":
                    samples: list[Any] = [Image.fromarray(im) for im in images]
                    backend: Callable[[torch.Tensor], Any] = _PilFilter(spec, ImageFilter.SHARPEN)
                else:
                    samples = images
                    backend = functools.partial(_backend_call, name, spec, extra=extra)
                library = functools.partial(_library_loop, fn, samples)
                rows.append(_measure(row, library, backend, host, args.repeats))
    rows.extend(_audio_rows(args, registry))
    return rows


class _PilFilter:
    """``Image.filter`` on a batch: the PIL backend (``PILBatch`` in and out), or the FactoryOp
    transform built per device when that is the registered spec."""

    def __init__(self, spec: Any, filter: Any) -> None:
        self.spec, self.filter, self.transforms = spec, filter, {}

    def __call__(self, batch: torch.Tensor) -> Any:
        data: Any = batch
        if self.spec.pil_batch:
            from codedag.migrate.ops.pil import PILBatch

            data = PILBatch(batch, "RGB")
        if self.spec.strategy.value != "FactoryOp":
            return self.spec.backend(data, self.filter)
        transform = self.transforms.get(batch.device)
        if transform is None:
            transform = self.transforms[batch.device] = self.spec.backend(
                self.filter, device=batch.device
            )
        return transform(data)


def _audio_rows(args: argparse.Namespace, registry: Any) -> list[dict[str, Any]]:
    try:
        import librosa
    except ImportError:
        return [{"op": "librosa.*", "unavailable": "librosa not installed"}]
    rows = []
    sr = 22050
    rng = np.random.default_rng(1)
    for n in args.batches:
        clips = [(0.2 * rng.standard_normal(5 * sr)).astype(np.float32) for _ in range(n)]
        host = torch.from_numpy(np.stack(clips))
        for name, fn in (
            ("librosa.stft", librosa.stft),
            ("librosa.feature.melspectrogram", _melspectrogram),
        ):
            spec = registry.get(name)
            row: dict[str, Any] = {"op": name, "input": "5 s @ 22050 Hz f32", "n": n}
            if spec is None:
                rows.append({**row, "unavailable": "no backend in this build"})
                continue
            keyword = not name.endswith("stft")
            backend = functools.partial(_audio_backend, spec.backend, keyword)
            library = functools.partial(_library_loop, fn, clips)
            rows.append(_measure(row, library, backend, host, args.repeats))
    return rows


def _melspectrogram(y: np.ndarray) -> Any:
    import librosa

    return librosa.feature.melspectrogram(y=y)


def _audio_backend(backend: Callable[..., Any], keyword: bool, batch: torch.Tensor) -> Any:
    return backend(y=batch) if keyword else backend(batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,64", help="comma-separated batch sizes")
    parser.add_argument("--sizes", default="224,512", help="comma-separated image sizes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads for torch and cv2 (default 1: one core each, comparable; on a shared "
        "machine more threads than free cores make OpenMP spin and distort torch's times)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import cv2

    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    args.batches = [int(b) for b in args.batches.split(",")]
    args.sizes = [int(s) for s in args.sizes.split(",")]
    rows = _rows(args)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    cuda = torch.cuda.is_available()
    header = f"{'op':32s} {'input':20s} {'N':>4s} {'library ms':>11s} {'torch cpu':>10s} {'x':>6s}"
    if cuda:
        header += f" {'cuda ms':>9s} {'x':>7s} {'+copies':>9s} {'x':>7s}"
    print(header)
    for row in rows:
        if "unavailable" in row:
            print(f"{row['op']:32s} {row.get('input', ''):20s} unavailable: {row['unavailable']}")
            continue
        lib_ms = row["library_ms"]
        line = (
            f"{row['op']:32s} {row['input']:20s} {row['n']:4d} {lib_ms:11.3f} "
            f"{row['torch_cpu_ms']:10.3f} {lib_ms / row['torch_cpu_ms']:6.2f}"
        )
        if cuda:
            line += (
                f" {row['cuda_ms']:9.3f} {lib_ms / row['cuda_ms']:7.1f}"
                f" {row['cuda_with_copies_ms']:9.3f} {lib_ms / row['cuda_with_copies_ms']:7.1f}"
            )
        print(line)
    print("x = library time / backend time (above 1: the backend is faster)")
    print(f"CPU threads: {args.threads} for torch and cv2")
    if not cuda:
        print("CUDA: unavailable on this machine (no GPU); GPU columns omitted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
