"""The segments of a traced context key (``a#0/b#5/cv2.resize#1``): a canonical name and a
counter each, read by the plan's matcher and by what needs a key's function names without
importing the plan's models."""

from __future__ import annotations


def split_segment(segment: str) -> tuple[str, int]:
    """``"cv2.resize#3"`` -> ``("cv2.resize", 3)``; a segment without a counter gets 0."""
    name, sep, count = segment.rpartition("#")
    if sep and count.isdigit():
        return name, int(count)
    return segment, 0
