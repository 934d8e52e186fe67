"""Text made safe to show: URI credentials masked."""

from __future__ import annotations

import pytest

from codedag.util.text import html_text, redact_uri


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("mlflow:http://user:password@host", "mlflow:http://user:***@host"),
        ("http://user:p@ss@host:5000/x?q=a@b", "http://user:***@host:5000/x?q=a@b"),
        ("https://TOKEN@github.com/org/repo", "https://***@github.com/org/repo"),
        ("to http://a:b@h and https://c:d:e@f/g", "to http://a:***@h and https://c:***@f/g"),
        ("sink 'mlflow:databricks://p:tok@ws'", "sink 'mlflow:databricks://p:***@ws'"),
    ],
)
def test_redact_uri_masks_credentials(text: str, shown: str) -> None:
    assert redact_uri(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "sqlite:///mlflow.db",
        "mlflow:http://host:5000/api@2",
        "tensorboard:/runs/a@b",
        "mail user@host",
        "",
    ],
)
def test_redact_uri_leaves_text_without_credentials(text: str) -> None:
    assert redact_uri(text) == text


def test_html_text_shows_controls_escapes_markup_and_cuts_long_text() -> None:
    assert html_text('<b title="x">\x1b[2J&</b>') == (
        "&lt;b title=&quot;x&quot;&gt;\\x1b[2J&amp;&lt;/b&gt;"
    )
    assert html_text("a" * 10, limit=4) == "aaaa... (6 more characters)"


def test_a_repeated_run_of_steps_is_folded_once() -> None:
    from codedag.util.text import folded_path

    frames = ["operator.getitem", "cv2.resize", "cv2.cvtColor"] * 16
    steps = ["numpy.load", *frames, "numpy.stack", "operator.truediv"]
    assert folded_path(steps) == (
        "numpy.load -> 16x (operator.getitem -> cv2.resize -> cv2.cvtColor) -> numpy.stack "
        "-> operator.truediv"
    )
    assert folded_path(["a", "b", "b", "b", "c"]) == "a -> 3x b -> c"
    assert folded_path(["a", "b", "a", "b", "c"]) == "a -> b -> a -> b -> c"  # twice: as it is
    assert folded_path([]) == ""
