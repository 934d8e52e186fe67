"""Text from files made safe to show: the one escaper for terminals, logs, HTML and DOT.

Names in a DAG, a plan or a results file (functions, context keys, experiments) may hold control
characters: ``\\x1b]0;...\\x07`` retitles a terminal window, ``\\x1b[2J`` clears the screen, a
Unicode direction override reorders what a reader sees. :func:`printable` writes every such
character as a visible escape (``\\x1b``) and cuts text past a length, saying how much was cut;
HTML (:func:`html_text`) and DOT escape its result for their own syntax. :func:`listing` shows the first items of a
long list and a count of the rest, so one line stays one line. :func:`redact_uri` masks the
credentials of every URI in a text (``http://user:***@host``) before it is shown or stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# C0 and C1 controls, DEL, line and paragraph separators, direction embeddings and isolates,
# and lone surrogates (undecodable bytes of a file name read with ``surrogateescape``).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
DEFAULT_LIMIT = 300
# scheme://USERINFO@ : the user-info runs to the last "@" before the host's end ("/", "?", "#").
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#@\s]*(?:@[^/?#@\s]*)*)@"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, limit: int | None = DEFAULT_LIMIT) -> str:
    """``text`` with control characters as visible escapes, cut after ``limit`` characters.

    Args:
        text: anything; converted with ``str``.
        limit: the most characters kept (``None``: all); a cut text ends with how much was cut.
    """
    value = str(text)
    cut = 0
    if limit is not None and len(value) > limit:
        cut = len(value) - limit
        value = value[:limit]
    value = _UNSAFE.sub(_escape, value)
    return f"{value}... ({cut:,} more characters)" if cut else value


def terminal_text(text: object, limit: int | None = DEFAULT_LIMIT) -> Any:
    """:func:`printable` text as a rich ``Text``: shown as it is, never read as rich markup
    (``[link=...]`` or ``[/]`` in a name stays text)."""
    from rich.text import Text

    return Text(printable(text, limit))


def html_text(text: object, limit: int | None = 2000) -> str:
    """:func:`printable` text (cut past ``limit``) with HTML's markup characters escaped."""
    import html

    return html.escape(printable(text, limit), quote=True)


def dot_string(text: str, limit: int = 200) -> str:
    """``text`` as a quoted Graphviz DOT string: each line :func:`printable` (cut past
    ``limit``), quotes and backslashes escaped, line breaks as DOT's ``\\n``."""
    lines = (printable(line, limit) for line in str(text).split("\n"))
    body = "\\n".join(line.replace("\\", "\\\\").replace('"', '\\"') for line in lines)
    return f'"{body}"'


def file_stem(text: str, limit: int = 100) -> str:
    """``text`` as a safe file name part: letters, digits, ``._-`` kept, the rest ``_``, cut
    to ``limit`` characters (a name from a file never becomes a path: no ``/``, no ``..``)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:limit].strip(".")
    return stem or "_"


def listing(items: Sequence[str], limit: int = 8) -> str:
    """``a, b, c`` or, past ``limit`` items, ``a, b, ... and 99,998 more``."""
    shown = ", ".join(items[:limit])
    rest = len(items) - limit
    return f"{shown}, ... and {rest:,} more" if rest > 0 else shown


def _mask(match: re.Match[str]) -> str:
    user, colon, _password = match.group("info").partition(":")
    # user:password keeps the user; a lone user-info is usually a token, so all of it goes
    info = f"{user}:***" if colon else "***"
    return f"{match.group('scheme')}{info}@"


def redact_uri(text: object) -> str:
    """``text`` with the credentials of every URI in it masked.

    ``mlflow:http://user:secret@host`` becomes ``mlflow:http://user:***@host`` and
    ``https://TOKEN@host`` becomes ``https://***@host``; text without user-info is unchanged.
    Use it wherever a URI given by the user (a sink, a tracking server) is logged, printed or
    written into a results file.
    """
    return _USERINFO.sub(_mask, str(text))


def folded_path(steps: Sequence[str], longest: int = 4) -> str:
    """``steps`` joined by ``" -> "``, a run of one block of up to ``longest`` steps repeated three
    times or more folded into ``16x (operator.getitem -> cv2.resize)`` (a clip's frames each
    resized: the path a reader can take in)."""
    out: list[str] = []
    i, n = 0, len(steps)
    while i < n:
        best_length, best_count = 1, 1
        for length in range(1, longest + 1):
            block = list(steps[i : i + length])
            count = 1
            while list(steps[i + count * length : i + (count + 1) * length]) == block:
                count += 1
            if count >= 3 and length * count > best_length * best_count:
                best_length, best_count = length, count
        if best_count >= 3:
            run = " -> ".join(steps[i : i + best_length])
            out.append(f"{best_count}x ({run})" if best_length > 1 else f"{best_count}x {run}")
            i += best_length * best_count
        else:
            out.append(steps[i])
            i += 1
    return " -> ".join(out)
