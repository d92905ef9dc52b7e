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


def test_a_preset_with_finished_groups_gets_its_own_section(tmp_path):
    folder = tmp_path / "paper-error-scale" / "e3"
    folder.mkdir(parents=True)
    (folder / "done.json").write_text('{"profile": "full"}')
    (folder / "table.md").write_text("# E3 — learned\n\n![fig](fig_a.png)\n\n## Table 3\n\nrow\n")
    text = RESULTS_DOC.preset_sections(tmp_path, "full")
    assert text.startswith("## Under the training preset `paper-error-scale` (docs/PREREGISTERED")
    assert "### E3 — learned" in text and "#### Table 3" in text and "fig_a.png" not in text
    assert "### The learned-error-scale preset: selection by Rule 2" not in text
    assert "| 20 | 0.066 |" in text
    assert RESULTS_DOC.preset_sections(tmp_path, "quick") == ""
