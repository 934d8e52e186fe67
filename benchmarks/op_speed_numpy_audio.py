"""Op speed of the NumPy, PIL and librosa torch backends against the libraries, side by side.

For every op and batch size the library runs once per sample (as a Dataset's ``__getitem__``
would call it) and the backend runs once on the whole batch: on the CPU through torch, and on CUDA
when a GPU is present (op time with the data already on the device, and with host-to-device and
device-to-host copies included). Images are 224x224 and 512x512 RGB uint8, audio 5 s clips at
22050 and 32000 Hz. Each figure is the median of repeated runs; ratios are library time / backend
time (above 1: the backend is faster). Nothing is estimated: a column that cannot be measured
says why.

    python benchmarks/op_speed_numpy_audio.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFilter

from codedag.backends.ops import audio, pil
from codedag.backends.ops import numpy as npops


@dataclass
class Row:
    op: str
    case: str
    batch: int
    library_ms: float
    torch_cpu_ms: float
    cuda_ms: float | None
    cuda_with_copies_ms: float | None


def _median_ms(fn: Callable[[], Any], budget_s: float, sync: bool = False) -> float:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget_s and len(times) < 50):
        t0 = time.perf_counter()
        fn()
        if sync:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _to(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, pil.PILBatch):
        return pil.PILBatch(x.data.to(device), x.mode)
    return x


def _data(x: Any) -> torch.Tensor:
    return x.data if isinstance(x, pil.PILBatch) else x


def measure(
    op: str,
    case: str,
    samples: list[Any],
    library: Callable[[Any], Any],
    to_batch: Callable[[list[Any]], Any],
    backend: Callable[[Any], Any],
    budget_s: float,
) -> Row:
    lib_ms = _median_ms(lambda: [library(s) for s in samples], budget_s)
    batch = to_batch(samples)
    cpu_ms = _median_ms(lambda: backend(batch), budget_s)
    cuda_ms = cuda_copy_ms = None
    if torch.cuda.is_available():
        dev_batch = _to(batch, "cuda")
        backend(dev_batch)  # warm-up: kernels, cuFFT plans, cached filters
        torch.cuda.synchronize()
        cuda_ms = _median_ms(lambda: backend(dev_batch), budget_s, sync=True)

        def with_copies() -> None:
            out = backend(_to(batch, "cuda"))
            _data(out).cpu()

        cuda_copy_ms = _median_ms(with_copies, budget_s, sync=True)
    return Row(op, case, len(samples), lib_ms, cpu_ms, cuda_ms, cuda_copy_ms)


def _stack(xs: list[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(np.stack(xs))


Op = tuple[str, Callable[[Any], Any], Callable[[Any], Any]]


def _numpy_ops() -> list[tuple[str, bool, Callable[[Any], Any], Callable[[Any], Any]]]:
    """(name, takes float32 input, library call on one sample, backend call on the batch)."""
    b = npops.BACKENDS
    pad_width = ((0, 0), (8, 8), (8, 8), (0, 0))
    return [
        (
            "numpy.ndarray.astype",
            False,
            lambda a: a.astype(np.float32),
            lambda t: b["numpy.ndarray.astype"](t, np.float32),
        ),
        ("numpy.add", False, lambda a: np.add(a, a), lambda t: b["numpy.add"](t, t)),
        (
            "numpy.clip",
            True,
            lambda a: np.clip(a, 0.1, 0.9),
            lambda t: b["numpy.clip"](t, 0.1, 0.9),
        ),
        (
            "numpy.mean",
            True,
            lambda a: np.mean(a, axis=(0, 1)),
            lambda t: b["numpy.mean"](t, axis=(1, 2)),
        ),
        (
            "numpy.pad",
            False,
            lambda a: np.pad(a, pad_width[1:], "reflect"),
            lambda t: b["numpy.pad"](t, pad_width, "reflect"),
        ),
        (
            "numpy.fft.fft2",
            True,
            lambda a: np.fft.fft2(a[..., 0]),
            lambda t: b["numpy.fft.fft2"](t[..., 0]),
        ),
    ]


def _pil_ops(half: tuple[int, int]) -> list[Op]:
    p = pil.BACKENDS
    blur = ImageFilter.GaussianBlur(2)
    return [
        (
            "PIL.Image.Image.resize",
            lambda im: im.resize(half, Image.Resampling.BICUBIC),
            lambda bt: p["PIL.Image.Image.resize"](bt, half, 3),
        ),
        (
            "PIL.Image.Image.convert",
            lambda im: im.convert("L"),
            lambda bt: p["PIL.Image.Image.convert"](bt, "L"),
        ),
        (
            "PIL.Image.Image.rotate",
            lambda im: im.rotate(15, Image.Resampling.BILINEAR),
            lambda bt: p["PIL.Image.Image.rotate"](bt, 15, 2),
        ),
        (
            "PIL.Image.Image.filter",
            lambda im: im.filter(blur),
            lambda bt: p["PIL.Image.Image.filter"](bt, blur),
        ),
    ]


def _audio_ops(sr: int) -> list[tuple[str, bool, Callable[[Any], Any], Callable[[Any], Any]]]:
    """(name, takes a mel spectrogram, library call on one clip, backend call on the batch)."""
    import librosa

    a = audio.BACKENDS
    poly = {"orig_sr": sr, "target_sr": 16000, "res_type": "polyphase"}
    return [
        ("librosa.stft", False, librosa.stft, a["librosa.stft"]),
        (
            "librosa.feature.melspectrogram",
            False,
            lambda c: librosa.feature.melspectrogram(y=c, sr=sr),
            lambda t: a["librosa.feature.melspectrogram"](y=t, sr=sr),
        ),
        ("librosa.power_to_db", True, librosa.power_to_db, a["librosa.power_to_db"]),
        (
            "librosa.feature.mfcc",
            False,
            lambda c: librosa.feature.mfcc(y=c, sr=sr),
            lambda t: a["librosa.feature.mfcc"](y=t, sr=sr),
        ),
        (
            "librosa.resample",
            False,
            lambda c: librosa.resample(c, **poly),
            lambda t: a["librosa.resample"](t, **poly),
        ),
    ]


def image_cases(sizes: list[int], batches: list[int], budget_s: float) -> list[Row]:
    rows = []
    rng = np.random.default_rng(0)
    for side in sizes:
        for n in batches:
            arrays = [rng.integers(0, 256, (side, side, 3), dtype=np.uint8) for _ in range(n)]
            floats = [a.astype(np.float32) / 255 for a in arrays]
            case = f"{side}x{side}x3"
            for name, as_float, lib, back in _numpy_ops():
                xs = floats if as_float else arrays
                rows.append(measure(name, case, xs, lib, _stack, back, budget_s))
            ims = [Image.fromarray(a) for a in arrays]
            for name, lib, back in _pil_ops((side // 2, side // 2)):
                rows.append(measure(name, case, ims, lib, pil.from_pil, back, budget_s))
    return rows


def audio_cases(rates: list[int], batches: list[int], budget_s: float) -> list[Row]:
    import librosa

    rows = []
    rng = np.random.default_rng(1)
    for sr in rates:
        for n in batches:
            clips = [(rng.standard_normal(5 * sr) * 0.1).astype(np.float32) for _ in range(n)]
            mels = [librosa.feature.melspectrogram(y=c, sr=sr) for c in clips]
            case = f"5 s @ {sr} Hz"
            for name, on_mels, lib, back in _audio_ops(sr):
                xs = mels if on_mels else clips
                rows.append(measure(name, case, xs, lib, _stack, back, budget_s))
    return rows


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:9.2f}"


def _ratio(lib: float, other: float | None) -> str:
    return "n/a" if other is None else f"{lib / other:6.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="224x224, 22050 Hz and shorter runs")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    budget = 0.3 if args.quick else 1.0
    sizes = [224] if args.quick else [224, 512]
    rates = [22050] if args.quick else [22050, 32000]
    batches = [1, 64]
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; CUDA: "
        f"{cuda or 'unavailable (no CUDA device on this machine): CUDA columns are n/a'}"
    )
    rows = image_cases(sizes, batches, budget) + audio_cases(rates, batches, budget)
    head = (
        f"{'op':32} {'case':16} {'N':>3} {'library ms':>10} {'torch cpu':>10} {'ratio':>7} "
        f"{'cuda ms':>9} {'ratio':>7} {'cuda+copy':>9} {'ratio':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.op:32} {r.case:16} {r.batch:>3} {r.library_ms:10.2f} {r.torch_cpu_ms:10.2f} "
            f"{_ratio(r.library_ms, r.torch_cpu_ms):>7} {_fmt(r.cuda_ms)} "
            f"{_ratio(r.library_ms, r.cuda_ms):>7} {_fmt(r.cuda_with_copies_ms)} "
            f"{_ratio(r.library_ms, r.cuda_with_copies_ms):>7}"
        )
    if args.json:
        from codedag.util.io import atomic_write_json

        atomic_write_json(args.json, {"cuda_device": cuda, "rows": [asdict(r) for r in rows]})


if __name__ == "__main__":
    main()
