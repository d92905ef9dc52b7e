"""Named paragraphs of prose kept in a markdown file beside the code that fills them in.

A fragments file (``scripts/templates/readings.md``) is a sequence of fragments, each started
by a marker line ``<!-- name -->`` and running to the next marker; text before the first
marker is a note for the reader. A fragment is one paragraph: its lines are joined with
single spaces, so a long paragraph wraps in the file and renders as one line. Leading spaces
and punctuation stay part of the fragment, for pieces spliced into a sentence. Placeholders
are ``string.Template``'s ``${name}``.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

MARKER = re.compile(r"<!-- ([a-z0-9][a-z0-9-]*) -->")


def read_fragments(path: str | Path) -> dict[str, Template]:
    """The fragments of ``path`` by name, as templates to ``substitute``.

    Raises:
        ValueError: naming the file and fragment when a name repeats, a fragment is empty or
            holds a blank line (a fragment is one paragraph).
    """
    path = Path(path)
    fragments: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        marker = MARKER.fullmatch(line)
        if marker:
            name = marker.group(1)
            if name in fragments:
                raise ValueError(f"{path}: fragment {name!r} appears twice")
            lines = fragments[name] = []
        elif lines is not None:
            lines.append(line)
    out = {}
    for name, body in fragments.items():
        while body and not body[-1].strip():
            body.pop()
        if not body or any(not line.strip() for line in body):
            raise ValueError(
                f"{path}: fragment {name!r} must be one paragraph (no blank line inside, not empty)"
            )
        out[name] = Template(" ".join(body))
    return out
