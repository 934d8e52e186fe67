"""HTML of the chain view, and of the full DAG as a view to zoom and search.

The chain view is laid out by the browser, not by Graphviz: boxes in a row that wraps, left to
right, each with its name, its time and share, a bar for the share, and where it runs. Text is
12-13 px and wraps inside its box, so at any page width every label stays readable and none
overlaps another (``tests/report/test_chain_view.py`` checks this in headless Chromium at
1400 px). The full DAG (an SVG) sits in a scrolling frame with zoom buttons and a search field
that outlines the nodes whose text matches.
"""

from __future__ import annotations

import html
from typing import Any

from codedag.report.chain_view import LIBRARY, USER_CODE, Box, ChainView

CHAIN_CSS = """
.cv { margin: 0.8rem 0; }
.cv-head { color: #3b4656; margin: 0.3rem 0 0.6rem; }
.cv-row { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 6px; }
.cv-samples { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 6px;
              border: 2px dashed #8aa4c8; border-radius: 6px; padding: 8px; flex: 1 1 60%; }
.cv-samples > .cv-caption { flex: 1 1 100%; font-size: 13px; color: #3b4656; margin: 0; }
.cv-box { box-sizing: border-box; width: 150px; border: 1px solid #9fb0c4; border-radius: 5px;
          padding: 5px 7px; font-size: 12px; line-height: 1.35; background: #fff; }
.cv-box .cv-name { font-size: 13px; font-weight: 600; overflow-wrap: anywhere; }
.cv-box .cv-bar { height: 5px; background: #e3e8ef; border-radius: 2px; margin: 3px 0; }
.cv-box .cv-bar span { display: block; height: 5px; background: #2f6db5; border-radius: 2px; }
.cv-arrow { font-size: 18px; color: #7f8a99; }
.cv-library { background: #eef7e8; } .cv-user { background: #e8f0fa; }
.cv-torch { background: #fdebd9; border-color: #e39a52; }
.cv-batched { background: #f9dede; border-color: #c94a4a; }
.cv-batch { background: #f4f4f4; border-style: dashed; }
.dag-tools { display: flex; gap: 6px; align-items: center; margin: 0.4rem 0; font-size: 13px; }
.dag-tools input { font-size: 13px; padding: 3px 6px; width: 22rem; }
.dag-tools button { font-size: 13px; min-width: 2rem; }
.dag-hit polygon, .dag-hit ellipse, .dag-hit path { stroke: #d62728 !important;
                                                    stroke-width: 4px !important; }
"""

DAG_SCRIPT = """
(function () {
  var frame = document.getElementById('dag-view');
  if (!frame) { return; }
  var svg = frame.querySelector('svg');
  if (!svg) { return; }
  var box = svg.viewBox && svg.viewBox.baseVal;
  var natural = (box && box.width) || svg.getBoundingClientRect().width || 1000;
  var scale = Math.min(1, frame.clientWidth / natural);
  function apply() {
    svg.style.maxWidth = 'none';
    svg.style.width = Math.round(natural * scale) + 'px';
    svg.style.height = 'auto';
  }
  apply();
  document.querySelectorAll('[data-zoom]').forEach(function (button) {
    button.addEventListener('click', function () {
      var how = button.getAttribute('data-zoom');
      if (how === 'in') { scale = scale * 1.5; }
      else if (how === 'out') { scale = scale / 1.5; }
      else { scale = Math.min(1, frame.clientWidth / natural); }
      apply();
    });
  });
  var search = document.getElementById('dag-search');
  var hits = document.getElementById('dag-hits');
  search.addEventListener('input', function () {
    var query = search.value.trim().toLowerCase();
    var found = [];
    svg.querySelectorAll('g.node').forEach(function (node) {
      var match = query && node.textContent.toLowerCase().indexOf(query) >= 0;
      node.classList.toggle('dag-hit', !!match);
      if (match) { found.push(node); }
    });
    hits.textContent = query ? found.length + ' node(s)' : '';
    if (found.length) { found[0].scrollIntoView({block: 'center', inline: 'center'}); }
  });
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _kind(where: str) -> str:
    if where.startswith("batched"):
        return "batched"
    if where.startswith("torch"):
        return "torch"
    return {LIBRARY: "library", USER_CODE: "user"}.get(where, "library")


def _ms(ms: float) -> str:
    return f"{ms:.3g} ms" if ms >= 0.01 else f"{1000 * ms:.3g} µs"


def _box(box: Box, samples: int, batch_level: bool = False) -> str:
    share = min(100.0, max(0.0, box.share_pct))
    what = "of the batch" if batch_level else "of a sample"
    partial = "" if batch_level or box.samples >= samples else f"; in {box.samples} of {samples}"
    kind = "batch" if batch_level else _kind(box.where)
    title = f"{box.name}: {_ms(box.ms)} {'per batch' if batch_level else 'per sample'}, "
    title += f"{share:.1f} % {what}, {box.where}{partial}"
    return (
        f'<div class="cv-box cv-{kind}" title="{_e(title)}">'
        f'<div class="cv-name label">{_e(box.label).replace(".", ".<wbr>")}</div>'
        f'<div class="label">{_e(_ms(box.ms))} · {share:.1f} %</div>'
        f'<div class="cv-bar"><span style="width:{share:.1f}%"></span></div>'
        f'<div class="label">{_e(box.where + partial)}</div></div>'
    )


ARROW = '<span class="cv-arrow" aria-hidden="true">→</span>'


def chain_section(view: ChainView) -> str:
    """The chain view's HTML (a ``div.cv``)."""
    if not view.steps:
        return "<p>The trace recorded no calls to show as a chain.</p>"
    parts = [ARROW.join(_box(b, view.samples, batch_level=True) for b in view.before)]
    chain = ARROW.join(_box(b, view.samples) for b in view.steps)
    caption = (
        f"each of {view.samples} sample(s): {_ms(view.sample_ms)}, "
        f"{view.samples_share_pct:.0f} % of the batch"
        if view.samples > 1
        else f"the traced calls: {_ms(view.sample_ms)}"
    )
    parts.append(
        f'<div class="cv-samples"><p class="cv-caption label">{_e(caption)}</p>{chain}</div>'
    )
    parts.append(ARROW.join(_box(b, view.samples, batch_level=True) for b in view.after))
    row = ARROW.join(p for p in parts if p)
    placed = (
        "where each call runs comes from the migration plan"
        if view.placed
        else "no migration plan: every call runs where the trace saw it"
    )
    head = (
        f"One batch: {_e(_ms(view.batch_ms))} in {_e(view.batch_name or 'the traced function')}."
        f" Boxes: time per sample and share of the sample's time; dashed boxes: the batch's own "
        f"calls with their share of the batch; {placed}."
    )
    legend = (
        '<p class="legend"><span class="cv-library">library</span>'
        '<span class="cv-torch">torch per call</span><span class="cv-batched">batched</span>'
        '<span class="cv-user">your code</span></p>'
    )
    return f'<div class="cv"><p class="cv-head">{head}</p>{legend}<div class="cv-row">{row}</div></div>'


def dag_explorer(svg_markup: str) -> str:
    """The full DAG in a frame with zoom buttons and a search field (needs :data:`DAG_SCRIPT`)."""
    tools = (
        '<div class="dag-tools"><input id="dag-search" type="search" '
        'placeholder="find a call or value (e.g. resize)" aria-label="search the DAG">'
        '<button type="button" data-zoom="out" aria-label="zoom out">−</button>'
        '<button type="button" data-zoom="in" aria-label="zoom in">+</button>'
        '<button type="button" data-zoom="fit">fit</button><span id="dag-hits"></span></div>'
    )
    return f'{tools}<div class="dag" id="dag-view">{svg_markup}</div>'
