"""The hand-drawn SVG bar chart: bars in proportion, values written, text escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from codedag.report.svg_bars import STYLES, Bar, bar_chart_svg

_SVG = "{http://www.w3.org/2000/svg}"


def _rects(svg: str) -> list[ET.Element]:
    return ET.fromstring(svg).findall(f"{_SVG}rect")


def test_bars_stand_in_proportion_to_their_values_on_one_baseline() -> None:
    svg = bar_chart_svg("Samples per second", [Bar("1", 50.0, "off"), Bar("2", 200.0)])
    first, second = _rects(svg)
    assert float(second.get("height") or 0) == 4 * float(first.get("height") or 0)
    bottoms = {
        round(float(r.get("y") or 0) + float(r.get("height") or 0), 1) for r in (first, second)
    }
    assert len(bottoms) == 1
    assert (first.get("fill"), second.get("fill")) == (STYLES["off"], STYLES["on"])
    texts = [t.text for t in ET.fromstring(svg).iter(f"{_SVG}text")]
    assert "50" in texts and "200" in texts and "Samples per second" in texts


def test_labels_are_escaped_units_written_and_an_empty_chart_is_valid() -> None:
    svg = bar_chart_svg("wait <s>", [Bar("a&b", 0.25, "partly", "plan from batch 2")], "s")
    root = ET.fromstring(svg)  # well-formed: the label's & and < are escaped
    assert "0.25 s" in [t.text for t in root.iter(f"{_SVG}text")]
    assert "a&b: 0.25 s (plan from batch 2)" in [t.text for t in root.iter(f"{_SVG}title")]
    empty = bar_chart_svg("nothing", [])
    assert _rects(empty) == [] and re.search(r"<title>nothing</title>", empty)


def test_a_zero_or_negative_value_draws_no_height() -> None:
    rects = _rects(bar_chart_svg("t", [Bar("1", 0.0), Bar("2", -1.0), Bar("3", 2.0)]))
    assert [float(r.get("height") or 0) for r in rects][:2] == [0.0, 0.0]
