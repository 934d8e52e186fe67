"""The chain view's HTML boxes and the DAG explorer."""

from __future__ import annotations

from codedag.report.chain_html import chain_section, dag_explorer
from codedag.report.chain_view import LIBRARY, USER_CODE, Box, ChainView


def _view(placed: bool = True, samples: int = 4) -> ChainView:
    return ChainView(
        batch_name="DataLoader.__next__",
        batch_ms=40.0,
        samples=samples,
        sample_ms=8.0,
        steps=[
            Box("cv2.imread", "cv2.imread", 5.0, 62.5, samples, LIBRARY),
            Box("cv2.resize", "cv2.resize", 2.0, 25.0, samples - 1, "batched on cuda:0"),
            Box("ds.norm", "ds.norm", 0.005, 130.0, samples, USER_CODE),
        ],
        after=[Box("collate", "collate", 4.0, 10.0, 1, LIBRARY)],
        placed=placed,
    )


def test_boxes_carry_their_kind_time_share_and_coverage() -> None:
    html = chain_section(_view())
    assert 'class="cv-box cv-library"' in html and 'class="cv-box cv-batched"' in html
    assert 'class="cv-box cv-user"' in html and 'class="cv-box cv-batch"' in html
    assert "cv2.<wbr>resize" in html
    assert "5 ms · 62.5 %" in html
    assert "5 µs · 100.0 %" in html  # under 0.01 ms in microseconds; share capped at 100
    assert "batched on cuda:0; in 3 of 4" in html
    assert html.count("→") == 3  # imread -> resize -> norm, then the samples -> collate


def test_the_caption_and_head_say_what_the_view_shows() -> None:
    html = chain_section(_view())
    assert "each of 4 sample(s): 8 ms, " in html
    assert "One batch: 40 ms in DataLoader.__next__." in html
    assert "where each call runs comes from the migration plan" in html
    unplanned = chain_section(_view(placed=False, samples=1))
    assert "no migration plan" in unplanned and "the traced calls: 8 ms" in unplanned


def test_an_empty_chain_says_so() -> None:
    empty = ChainView("f", 1.0, 0, 0.0)
    assert chain_section(empty) == "<p>The trace recorded no calls to show as a chain.</p>"


def test_names_are_escaped() -> None:
    view = _view()
    view.steps = [Box("<f>", "<f>", 1.0, 50.0, 4, "torch on cpu")]
    html = chain_section(view)
    assert "&lt;f&gt;" in html and "<f>" not in html
    assert "cv-torch" in html


def test_dag_explorer_wraps_the_svg_with_search_and_zoom() -> None:
    html = dag_explorer("<svg>x</svg>")
    assert html.endswith('<div class="dag" id="dag-view"><svg>x</svg></div>')
    assert 'id="dag-search"' in html
    assert all(f'data-zoom="{z}"' in html for z in ("in", "out", "fit"))
