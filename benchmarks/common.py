"""Helpers shared by the benchmark scripts: example pipelines sized from one image side."""

from __future__ import annotations

from typing import Any

from codedag.experiments import pipelines

IMAGE_PIPELINES = ("demo_image", "letterbox", "compose", "yolo_mosaic")


def pipeline_sizes(name: str, size: int | None) -> dict[str, int]:
    """Keyword sizes of pipeline ``name`` whose decoded source images are about ``size`` px.

    ``None`` keeps the pipeline's own defaults; audio pipelines have no image size.
    """
    if size is None or name not in IMAGE_PIPELINES:
        return {}
    if size < 32:
        raise ValueError(f"--size must be at least 32 px, got {size}")
    even = size - size % 2
    if name == "demo_image":
        return {"source_size": size, "image_size": max(16, size // 2)}
    if name == "yolo_mosaic":
        return {"img_size": even}
    # letterbox, compose: ragged sources around the size, resized to it (compose crops half)
    target = size if name == "letterbox" else max(16, size // 2)
    return {"img_size": target, "min_size": size * 3 // 4, "max_size": size * 5 // 4}


def make_loader(
    name: str,
    workers: int,
    batch_size: int,
    samples: int,
    seed: int,
    size: int | None = None,
    **defaults: int,
) -> Any:
    """Pipeline ``name``'s DataLoader: ``size`` (when given) overrides the ``defaults`` sizes."""
    sizes = {**defaults, **pipeline_sizes(name, size)}
    return pipelines.make_loader(
        name, batch_size=batch_size, num_workers=workers, seed=seed, n=samples, **sizes
    )
