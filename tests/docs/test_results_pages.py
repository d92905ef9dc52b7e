"""scripts/results_doc.py splits the results document into the site's pages: one per
experiment group (with its sections under each training preset), the readings, each preset,
and an index whose summary links every group; the committed pages are that split of
docs/RESULTS.md."""

from __future__ import annotations

import pytest

from gridplan.experiments import GROUPS
from tests.experiments.test_templates import REPO, load_script

RESULTS_DOC = load_script("results_doc")

DOC = """# Results

intro

| group | what | verdict | wall time | profile |
| --- | --- | --- | --- | --- |
| e1 | grid | reproduces | 1 s | full |
| e2 | ranks | not run | — | — |

## Pre-registered rules (`docs/PREREGISTERED.md`)

### Rule 1

dropped: the index links the rules' own page

## The machine

### Load

quiet, see [the design](DESIGN.md)

## Readings of the paper's ambiguous choices

### The readings

| reading |

## E1 — matched total error (§5.1)

![Fig. 2](figures/e1/fig2.png)

### Table 2

row, see [the rules](PREREGISTERED.md) and [a site](https://example.org/x.md)

## Under the training preset `slow-preset` (docs/PREREGISTERED.md, Rule 2)

The preset's own text.

### E1 — matched total error (§5.1)

**Verdict: partly**

##### Table 2

preset row
"""


def test_a_results_document_splits_into_exact_pages():
    pages = RESULTS_DOC.split_pages(DOC)
    assert list(pages) == ["index.md", "readings.md", "e1.md", "slow-preset.md"]
    assert pages["e1.md"] == (
        "# E1 — matched total error (§5.1)\n\n"
        "![Fig. 2](../figures/e1/fig2.png)\n\n"
        "## Table 2\n\n"
        "row, see [the rules](../PREREGISTERED.md) and [a site](https://example.org/x.md)\n\n"
        "## Under the training preset `slow-preset`\n\n"
        + RESULTS_DOC.TEXT["page-preset"].substitute(name="slow-preset", page="slow-preset.md")
        + "\n\n**Verdict: partly**\n\n### Table 2\n\npreset row\n"
    )
    assert pages["readings.md"] == (
        "# Readings of the paper's ambiguous choices\n\n## The readings\n\n| reading |\n"
    )
    assert pages["slow-preset.md"] == (
        "# Under the training preset `slow-preset` (docs/PREREGISTERED.md, Rule 2)\n\n"
        "The preset's own text.\n"
    )
    index = pages["index.md"]
    assert "| [e1](e1.md) | grid |" in index and "| e2 | ranks | not run |" in index
    assert "Rule 1" not in index and "dropped" not in index
    assert index.endswith(
        "- [Readings of the paper's ambiguous choices](readings.md)\n"
        "- [Under the training preset `slow-preset` (docs/PREREGISTERED.md, Rule 2)]"
        "(slow-preset.md)\n"
        "- [Pre-registered rules](../PREREGISTERED.md)\n\n"
        "## The machine\n\n### Load\n\nquiet, see [the design](../DESIGN.md)\n"
    )


def test_the_committed_pages_are_the_split_of_the_committed_results_document():
    doc = REPO / "docs" / "RESULTS.md"
    pages = RESULTS_DOC.split_pages(doc.read_text())
    groups = [f"{name}.md" for name in GROUPS]
    assert groups == [n for n in pages if n.startswith("e")]
    for name, text in pages.items():
        committed = REPO / "docs" / RESULTS_DOC.PAGES_FOLDER / name
        assert committed.read_text() == text, f"{committed} is stale: python " + (
            "scripts/results_doc.py --pages-only --force"
        )


def test_pages_only_refuses_to_change_pages_without_force(tmp_path, capsys):
    doc = tmp_path / "RESULTS.md"
    doc.write_text(DOC)
    argv = ["--doc", str(doc), "--pages-only"]
    assert RESULTS_DOC.main(argv) == 0
    e1 = tmp_path / "results" / "e1.md"
    assert e1.read_text().startswith("# E1 — matched total error")
    e1.write_text("edited by hand")
    assert RESULTS_DOC.main(argv) == 2
    assert f"{e1} would change; pass --force" in capsys.readouterr().err
    assert e1.read_text() == "edited by hand"
    assert RESULTS_DOC.main([*argv, "--force"]) == 0
    assert e1.read_text().startswith("# E1 — matched total error")


@pytest.mark.parametrize("argv", [["--pages-only"], ["--pages-only", "--force"]])
def test_pages_only_needs_an_existing_document(tmp_path, capsys, argv):
    assert RESULTS_DOC.main(["--doc", str(tmp_path / "none.md"), *argv]) == 2
    assert "--pages-only splits an existing" in capsys.readouterr().err
