"""The chain view: one sample's chain from a traced batch, readable in a browser at 1400 px."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from chain_helpers import COLLATE, ROOT, traced_batch

from codedag.cli.main import main
from codedag.report.chain_view import chain_view
from codedag.report.html import ReportContent, write_html_report

DATASETS = Path(__file__).parent.parent / "support" / "trace_datasets.py"


def test_samples_coarsen_into_one_chain_with_the_batch_around_it() -> None:
    view = chain_view(traced_batch(samples=3))
    assert view.batch_name == ROOT and view.samples == 3
    assert [b.name for b in view.steps] == [
        "cv2.imdecode", "cv2.resize", "cv2.flip", "mydata.normalize"
    ]  # fmt: skip
    flip = view.steps[2]
    assert flip.samples == 2 and flip.ms == pytest.approx(3.0)  # taken by two samples of three
    assert sum(b.share_pct for b in view.steps) == pytest.approx(100.0)
    # samples of 10, 7 (no flip) and 10 ms: normalize's 3 x 4 ms are 12 of 27
    assert view.steps[3].share_pct == pytest.approx(100.0 * 12 / 27)
    assert view.sample_ms == pytest.approx(9.0)
    assert [b.name for b in view.before] == ["torch.utils.data.sampler.BatchSampler.__iter__"]
    assert [b.name for b in view.after] == [COLLATE]
    assert view.after[0].share_pct == pytest.approx(100 * 2.0 / 29.6)
    assert {b.where for b in view.steps} == {"library", "your code"}
    assert view.steps[3].where == "your code"


def test_a_big_call_of_user_code_is_shown_as_the_calls_it_makes() -> None:
    dag = traced_batch(samples=2)
    for node in [n for n in dag.calls() if n.name == "mydata.normalize"]:  # 4 of 10 or 7 ms
        for name, ms in (("cv2.subtract", 1), ("numpy.multiply", 2)):
            inner = dag.add_call(name=name, total_ns=ms * 1_000_000, is_builtin=True, depth=3)
            dag.add_edge(node.id, inner, "calls")
    view = chain_view(dag)
    assert [b.name for b in view.steps] == [
        "cv2.imdecode", "cv2.resize", "cv2.flip", "cv2.subtract", "numpy.multiply"
    ]  # fmt: skip
    assert view.sample_ms == pytest.approx(8.5)  # the samples' time, normalize's own included
    assert view.steps[4].share_pct == pytest.approx(100.0 * 4 / 17)
    assert chain_view(traced_batch(samples=2)).steps[3].name == "mydata.normalize"  # no calls


def test_an_inherited_method_is_named_after_the_class_of_its_self() -> None:
    steps = ["cv2.imdecode", "aug.Transform.__call__", "aug.Transform.__call__"]
    dag = traced_batch(samples=2, steps=steps)
    calls = [n for n in dag.calls() if n.name == "aug.Transform.__call__"]
    for node, cls in zip(calls, ["Resize", "Flip", "Resize", "Flip"], strict=True):
        node.arg_summaries = [f"self=<{cls}>", "image=ndarray[8,8,3] uint8"]
    view = chain_view(dag)
    assert [b.name for b in view.steps] == [
        "cv2.imdecode", "aug.Resize.__call__", "aug.Flip.__call__"
    ]  # fmt: skip
    assert view.steps[2].samples == 2


def test_the_plan_says_where_each_call_runs() -> None:
    plan = {
        "context_device_map": {
            f"{ROOT}#0/mydata.ImageDataset.__getitem__#0/cv2.resize#0": "cuda:0"
        },
        "target_device": "cuda:0",
        "batched": {"device": "cuda:0", "chains": [{"batched": True, "steps": ["cv2.flip"]}]},
    }
    view = chain_view(traced_batch(), plan)
    where = {b.name: b.where for b in view.steps}
    assert where["cv2.resize"] == "torch on cuda:0" and where["cv2.flip"] == "batched on cuda:0"
    assert where["cv2.imdecode"] == "library" and view.placed


LAYOUT_CHECK = """
<script>
window.addEventListener('load', function () {
  var labels = Array.prototype.slice.call(document.querySelectorAll('.cv .label'));
  var rects = labels.map(function (l) { return l.getBoundingClientRect(); });
  var minHeight = Math.min.apply(null, rects.map(function (r) { return r.height; }));
  var overlaps = 0;
  for (var i = 0; i < rects.length; i++) {
    for (var j = i + 1; j < rects.length; j++) {
      var a = rects[i], b = rects[j];
      var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 0.5 && h > 0.5) { overlaps++; }
    }
  }
  var fonts = labels.map(function (l) { return parseFloat(getComputedStyle(l).fontSize); });
  var svg = document.querySelector('#dag-view svg');
  var before = svg.getBoundingClientRect().width;
  document.querySelector('[data-zoom="in"]').click();
  var zoomed = svg.getBoundingClientRect().width;
  var search = document.getElementById('dag-search');
  search.value = 'resize';
  search.dispatchEvent(new Event('input'));
  var out = document.createElement('pre');
  out.id = 'layout';
  out.textContent = JSON.stringify({
    width: window.innerWidth, labels: labels.length, minHeight: minHeight,
    minFont: Math.min.apply(null, fonts), overlaps: overlaps, zoom: zoomed / before,
    hits: document.querySelectorAll('.dag-hit').length,
    hitText: document.getElementById('dag-hits').textContent
  });
  document.body.appendChild(out);
});
</script>
"""

SVG = """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 3000 200" width="3000pt"
height="200pt"><g class="node"><title>n1</title><text x="10" y="20">cv2.resize</text></g>
<g class="node"><title>n2</title><text x="200" y="20">cv2.imdecode</text></g></svg>"""


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    flags = [
        "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
        "--window-size=1400,1000", "--enable-logging=stderr", "--v=0",
    ]  # fmt: skip
    return subprocess.run([*flags, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_at_1400_px_every_label_is_readable_and_none_overlaps(tmp_path: Path) -> None:
    long_names = [
        "cv2.imdecode",
        "mypackage.augmentations.geometric.RandomPerspectiveWithBorderReflection",
        "cv2.flip",
        *[f"albumentations.augmentations.transforms.Step{i}WithALongName" for i in range(14)],
        "numpy.ascontiguousarray",
    ]
    view = chain_view(traced_batch(samples=4, steps=long_names))
    page = write_html_report(
        tmp_path / "chain.html", ReportContent(title="chain", chain=view, dag_svg=SVG)
    )
    checked = tmp_path / "checked.html"
    checked.write_text(page.read_text().replace("</body>", LAYOUT_CHECK + "</body>"))
    dom = chromium("--dump-dom", checked.as_uri(), profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout)
    assert found, dom.stdout[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"'))
    assert layout["width"] == 1400
    assert layout["labels"] >= 3 * len(long_names) + 1  # name, figures, where of each box
    assert layout["minHeight"] >= 10 and layout["minFont"] >= 11
    assert layout["overlaps"] == 0
    assert layout["zoom"] > 1.4  # the full DAG zooms
    assert layout["hits"] == 1 and layout["hitText"] == "1 node(s)"  # and is searchable
    shot = tmp_path / "chain.png"
    done = chromium(f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "profile")
    assert done.returncode == 0 and shot.stat().st_size > 10_000
    if os.environ.get("CODEDAG_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["CODEDAG_KEEP_SCREENSHOT"])


def test_trace_show_prints_the_chain_and_writes_the_page(tmp_path: Path, capsys) -> None:
    code = main(["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path), "--show"])
    assert code == 0
    out = capsys.readouterr().out
    assert "each of 4 sample(s)" in out and "cv2.resize" in out
    page = (tmp_path / "dag.html").read_text()
    assert 'class="cv-samples"' in page and "cv2.cvtColor" in page
    assert main(["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path), "--plan", "x"]) == 2
