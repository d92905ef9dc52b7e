"""README.md is an entry point: at most 10 KB, "Evaluate your own model" on its first screen in
at most 15 lines, the "## Tests" section CI's instructions name, and links that resolve."""

from __future__ import annotations

import re

from helpers_docs import REPO

README = REPO / "README.md"
#: Markdown links and images: ``[text](target)``.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _section(lines: list[str], heading: str) -> list[str]:
    start = lines.index(heading)
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
    return lines[start:end]


def test_the_readme_is_at_most_10_kb():
    assert len(README.read_text().encode()) <= 10240


def test_evaluate_your_own_model_is_on_the_first_screen_in_at_most_15_lines():
    lines = README.read_text().splitlines()
    section = _section(lines, "## Evaluate your own model")
    assert lines.index("## Evaluate your own model") < 40
    assert len([line for line in section[1:] if line.strip()]) <= 15  # below its heading
    assert any("gridplan-eval --model" in line for line in section)


def test_the_tests_section_names_the_test_command():
    section = _section(README.read_text().splitlines(), "## Tests")
    assert "bash scripts/run_tests.sh                 # set-up, lint, the default tier" in section


def test_every_relative_link_of_the_readme_resolves_to_a_file():
    targets = [t for t in LINK.findall(README.read_text()) if not re.match(r"[a-z]+:", t)]
    assert len(targets) >= 20
    missing = [t for t in targets if not (REPO / t.split("#")[0]).is_file()]
    assert missing == []
