"""The pre-registered rules appear in the results page as one replaceable section."""

from tests.experiments.test_templates import REPO, load_script

RESULTS_DOC = load_script("results_doc")


def test_preregistered_section_demotes_headings(tmp_path):
    source = tmp_path / "rules.md"
    source.write_text("# Rules\n\nintro\n\n## Rule 1\n\ntext\n")
    section = RESULTS_DOC.preregistered_section(source)
    assert section == [
        "## Pre-registered rules (`docs/PREREGISTERED.md`)",
        "",
        "intro",
        "",
        "### Rule 1",
        "",
        "text",
    ]


def test_preregistered_section_is_inserted_once_then_replaced():
    page = [RESULTS_DOC.SUMMARY_HEADER, "| --- |", "", "## Readings", "r", "## E1 — x", "e"]
    first = RESULTS_DOC.place_preregistered(page, ["## Pre-registered rules", "old"])
    assert first == [*page[:3], "## Pre-registered rules", "old", "", *page[3:]]
    second = RESULTS_DOC.place_preregistered(first, ["## Pre-registered rules", "new"])
    assert second == [*page[:3], "## Pre-registered rules", "new", "", *page[3:]]


def test_the_committed_rules_are_in_the_results_page():
    doc = (REPO / "docs" / "RESULTS.md").read_text()
    section = "\n".join(RESULTS_DOC.preregistered_section())
    assert section in doc
