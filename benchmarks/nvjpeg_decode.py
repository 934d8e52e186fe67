"""JPEG decoding on the device: ``cv2.imdecode`` per sample against batched nvJPEG.

For the sources of the letterbox and demo_image pipelines, encoded as JPEG as the pipelines
encode them (``image_format="jpg"``, ``cv2.imencode`` at OpenCV's default quality; the
letterbox's default format, the demo image's JPEG variant), measured:

* ``cv2.imdecode`` (libjpeg) per sample, as the pipelines decode: ms per sample;
* the share of epoch 1 of the pipeline's own loader that decoding takes: every source's decode
  time over the wall time of a first epoch loaded in this process (0 workers: all of its time is
  this process's work, decoding included);
* where ``torchvision.io.decode_jpeg(..., device="cuda")`` is importable and CUDA is present:
  ms per sample decoded by nvJPEG in batches of ``--batch-size`` (the bytes uploaded, the
  images left on the device, synchronized), and the largest absolute difference of its pixels
  from libjpeg's, with the share of pixels that differ. nvJPEG is not bit exact with libjpeg:
  this measures what decoding on the device would give and cost; codedag never decodes on the
  device by default.

Without torchvision or CUDA, one line says what is missing and the cv2 side alone is measured.
It measures; it asserts nothing. Run::

    python benchmarks/nvjpeg_decode.py [--device cuda|cpu] [--samples 128] [--batch-size 32]
        [--quick] [--pipelines letterbox demo_image] [--out nvjpeg.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

import cv2
import numpy as np
import torch

from codedag.experiments import pipelines

PIPELINES = ("letterbox", "demo_image")


def jpeg_sources(name: str, samples: int, batch_size: int) -> tuple[Any, list[bytes]]:
    """Pipeline ``name``'s own DataLoader (0 workers) over JPEG sources, and those sources."""
    loader = pipelines.make_loader(
        name, batch_size=batch_size, num_workers=0, seed=0, n=samples, image_format="jpg"
    )
    return loader, [sample.data for sample in loader.dataset.samples]


def first_epoch_s(loader: Any) -> float:
    """Wall seconds of one epoch of ``loader``, seeded as the benchmarks seed their epoch 0."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    started = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - started


def cv2_decode(sources: list[bytes], repeats: int) -> tuple[float, list[np.ndarray]]:
    """Seconds to decode every source with ``cv2.imdecode`` (median over ``repeats`` passes) and
    the decoded BGR images."""
    images: list[np.ndarray] = []
    passes = []
    for _ in range(repeats):
        images = []
        started = time.perf_counter()
        for data in sources:
            image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
            if image is None:
                raise ValueError("a source is not a decodable JPEG")
            images.append(image)
        passes.append(time.perf_counter() - started)
    return statistics.median(passes), images


def nvjpeg_missing(device: str) -> str | None:
    """What decoding on ``device`` with nvJPEG lacks here, in words; ``None``: nothing."""
    missing = []
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except ImportError as error:
        missing.append(f"torchvision is not importable ({error})")
    if torch.device(device).type != "cuda":
        missing.append(f"the device is {device}, not CUDA")
    elif not torch.cuda.is_available():
        missing.append("CUDA is not available")
    return " and ".join(missing) or None


def nvjpeg_decode(
    sources: list[bytes], batch_size: int, device: str, repeats: int
) -> tuple[float, list[torch.Tensor]]:
    """Seconds to decode every source with nvJPEG in batches of ``batch_size`` (the bytes
    uploaded, synchronized; median over ``repeats`` passes after one warm-up batch) and the
    decoded RGB CHW images (on the device)."""
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(s), dtype=torch.uint8) for s in sources]
    decode_jpeg(data[:batch_size], mode=ImageReadMode.RGB, device=device)  # nvJPEG's start-up
    torch.cuda.synchronize(device)
    images: list[torch.Tensor] = []
    passes = []
    for _ in range(repeats):
        images = []
        started = time.perf_counter()
        for start in range(0, len(data), batch_size):
            chunk = data[start : start + batch_size]
            images.extend(decode_jpeg(chunk, mode=ImageReadMode.RGB, device=device))
        torch.cuda.synchronize(device)
        passes.append(time.perf_counter() - started)
    return statistics.median(passes), images


def difference(reference: list[np.ndarray], decoded: list[torch.Tensor]) -> tuple[int, float]:
    """The largest absolute pixel difference of ``decoded`` (RGB CHW) from libjpeg's BGR HWC
    images, and the share of pixel values that differ."""
    worst, differing, total = 0, 0, 0
    for bgr, image in zip(reference, decoded):
        expected = torch.from_numpy(np.ascontiguousarray(bgr[..., ::-1])).permute(2, 0, 1)
        gap = (image.cpu().int() - expected.int()).abs()
        worst = max(worst, int(gap.max()))
        differing += int((gap > 0).sum())
        total += gap.numel()
    return worst, differing / total if total else 0.0


def measure(name: str, args: argparse.Namespace, missing: str | None) -> dict[str, Any]:
    """One pipeline's row."""
    loader, sources = jpeg_sources(name, args.samples, args.batch_size)
    epoch_s = first_epoch_s(loader)
    cv2_s, images = cv2_decode(sources, args.repeats)
    n = len(sources)
    row: dict[str, Any] = {
        "pipeline": name,
        "samples": n,
        "mean_pixels": statistics.fmean(i.shape[0] * i.shape[1] for i in images),
        "mean_jpeg_bytes": statistics.fmean(len(s) for s in sources),
        "epoch1_s": epoch_s,
        "cv2_ms_per_sample": cv2_s * 1e3 / n,
        "decode_share_epoch1": cv2_s / epoch_s,
        "nvjpeg_ms_per_sample": None,
        "nvjpeg_batch": None,
        "cv2_over_nvjpeg": None,
        "max_abs_diff": None,
        "differing_share": None,
        "nvjpeg_missing": missing,
    }
    if missing is None:
        nv_s, decoded = nvjpeg_decode(sources, args.batch_size, args.device, args.repeats)
        worst, share = difference(images, decoded)
        row.update(
            nvjpeg_ms_per_sample=nv_s * 1e3 / n,
            nvjpeg_batch=args.batch_size,
            cv2_over_nvjpeg=cv2_s / nv_s,
            max_abs_diff=worst,
            differing_share=share,
        )
    return row


def _print(row: dict[str, Any]) -> None:
    side = "cv2 only"
    if row["nvjpeg_ms_per_sample"] is not None:
        side = (
            f"nvJPEG {row['nvjpeg_ms_per_sample']:.3f} ms/sample in batches of "
            f"{row['nvjpeg_batch']} ({row['cv2_over_nvjpeg']:.2f}x cv2), max |d| "
            f"{row['max_abs_diff']} against libjpeg, {row['differing_share']:.2%} of values differ"
        )
    print(
        f"{row['pipeline']:<11} {row['samples']} JPEGs of {row['mean_pixels'] / 1e3:.0f} kpx "
        f"({row['mean_jpeg_bytes'] / 1e3:.1f} kB): cv2.imdecode {row['cv2_ms_per_sample']:.3f} "
        f"ms/sample, {row['decode_share_epoch1']:.0%} of epoch 1 ({row['epoch1_s']:.2f} s, "
        f"0 workers); {side}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--samples", type=int, default=None, help="default 128; quick 16")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=None, help="default 3; quick 1")
    parser.add_argument("--quick", action="store_true", help="fewer samples, one pass")
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.samples is None:
        args.samples = 16 if args.quick else 128
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    for name in ("samples", "batch_size", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    missing = nvjpeg_missing(args.device)
    if missing:
        print(f"nvJPEG not measured: {missing}; measuring cv2.imdecode only", flush=True)
    rows = [measure(name, args, missing) for name in args.pipelines]
    for row in rows:
        _print(row)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(
                {"device": args.device, "nvjpeg_missing": missing, "rows": rows}, out, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
