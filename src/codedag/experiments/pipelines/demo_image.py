"""The demo's image pipeline (:mod:`codedag.experiments.demo_data`) behind the pipelines' factories.

Colored shapes on noise, PNG bytes decoded per sample: resize, BGR to RGB, random flip and affine
(drawn from a generator seeded with ``seed + index``, so a sample does not depend on the worker),
normalize, HWC to CHW. A batch is ``(images, labels)``: float32 ``(B, 3, image_size, image_size)``
and int64 ``(B,)``.
"""

from __future__ import annotations

from codedag.experiments.demo_data import ImageDemoDataset, make_image_samples
from codedag.experiments.pipelines.loaders import check_sizes, loader_maker

DESCRIPTION = (
    "the demo's image classification pipeline: imdecode, resize, BGR->RGB, random flip and "
    "affine, normalize, HWC->CHW"
)
CALLS = (
    "numpy.frombuffer",
    "cv2.imdecode",
    "cv2.resize",
    "cv2.cvtColor",
    "cv2.flip",
    "cv2.getRotationMatrix2D",
    "cv2.warpAffine",
    "numpy.transpose",
    "numpy.ascontiguousarray",
    "torch.from_numpy",
)


def make_dataset(
    n: int = 64,
    seed: int = 0,
    image_size: int = 128,
    source_size: int = 256,
    num_classes: int = 4,
    image_format: str = "png",
) -> ImageDemoDataset:
    """The demo's ``n`` encoded ``source_size`` images, preprocessed to ``image_size``."""
    check_sizes(n=n, image_size=image_size, source_size=source_size, num_classes=num_classes)
    samples = make_image_samples(
        n, num_classes=num_classes, source_size=source_size, image_format=image_format, seed=seed
    )
    return ImageDemoDataset(samples, out_size=image_size, seed=seed)


make_loader = loader_maker(make_dataset)
