"""A bar chart as inline SVG markup: one bar per label, its value written above it.

Drawn by hand so that a page that shows a few figures (an accelerated run's epochs) needs no
plotting library: the page is written at the end of every ``codedag run``, where importing
matplotlib would cost the script's exit half a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from codedag.util.text import html_text

_WIDTH = 460
_HEIGHT = 240
_TOP, _BOTTOM, _LEFT, _RIGHT = 48, 30, 12, 12
STYLES = {"on": "#3b6fb6", "partly": "#8fb0dd", "off": "#b8bec8"}
"""Fill of a bar by its kind (an epoch the plan served, served in part, or not at all)."""


@dataclass(frozen=True)
class Bar:
    """One bar: its label under it, its value, the kind that colours it and a hover text."""

    label: str
    value: float
    kind: str = "on"
    note: str = ""


def _figure(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def bar_chart_svg(title: str, bars: Sequence[Bar], unit: str = "") -> str:
    """``bars`` as an SVG chart titled ``title``; values are written as ``value unit``."""
    top = max((b.value for b in bars if b.value > 0), default=1.0)
    inner_w = _WIDTH - _LEFT - _RIGHT
    inner_h = _HEIGHT - _TOP - _BOTTOM
    slot = inner_w / max(len(bars), 1)
    width = min(slot * 0.7, 80.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{_WIDTH}" '
        f'height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" font-family="sans-serif" '
        'font-size="12">',
        f"<title>{html_text(title)}</title>",
        f'<text x="{_LEFT}" y="18" font-size="14" font-weight="600">{html_text(title)}</text>',
        f'<line x1="{_LEFT}" y1="{_TOP + inner_h}" x2="{_WIDTH - _RIGHT}" '
        f'y2="{_TOP + inner_h}" stroke="#8a94a3"/>',
    ]
    for i, bar in enumerate(bars):
        height = inner_h * max(bar.value, 0.0) / top
        x = _LEFT + slot * i + (slot - width) / 2
        y = _TOP + inner_h - height
        fill = STYLES.get(bar.kind, STYLES["on"])
        shown = f"{_figure(bar.value)} {unit}".strip()
        hover = f"{bar.label}: {shown}" + (f" ({bar.note})" if bar.note else "")
        parts += [
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
            f'fill="{fill}"><title>{html_text(hover)}</title></rect>',
            f'<text x="{x + width / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">'
            f"{html_text(shown)}</text>",
            f'<text x="{x + width / 2:.1f}" y="{_TOP + inner_h + 16:.1f}" '
            f'text-anchor="middle">{html_text(bar.label)}</text>',
        ]
    parts.append("</svg>")
    return "".join(parts)
