"""``scripts/results_doc.py --only``: a group's section is replaced up to the next level-2
heading, so a section that follows it and is not a group's (a training preset's) stays."""

from __future__ import annotations

from tests.experiments.test_templates import load_script


def test_updating_one_group_keeps_the_preset_section_that_follows_it(tmp_path, monkeypatch):
    script = load_script("results_doc")
    monkeypatch.setattr(
        script, "group_section", lambda name, folder, figures: ("## E10 — new\n\nnew body", {})
    )
    monkeypatch.setattr(script, "summary_row", lambda name, text, done: "| e10 | new |")
    monkeypatch.setattr(script, "preregistered_section", lambda: ["## Pre-registered rules"])
    summary = f"{script.SUMMARY_HEADER}\n| --- |\n| e10 | old |\n| e12 | x |"
    preset = "## Under the training preset `p`\n\nthe preset's tables"
    doc = tmp_path / "RESULTS.md"
    doc.write_text(
        f"# Results\n\n{summary}\n\n## E10 — old\n\nold body\n\n{preset}\n\n"
        "## E12 — last\n\nlast body\n"
    )
    script.update_sections(doc, tmp_path, ["e10"], tmp_path / "figures")
    text = doc.read_text()
    assert "old body" not in text and "## E10 — new\n\nnew body\n\n## Under" in text
    assert preset in text and text.endswith("## E12 — last\n\nlast body\n")
    assert "| e10 | new |" in text
