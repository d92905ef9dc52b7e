"""The prose templates beside the generators of docs/RESULTS.md (``scripts/templates/``): each
fragment is one paragraph, every fragment a script fills exists and is used, and every
paragraph of readings.md renders with its placeholders filled."""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path

import pytest

from gridplan.core import readings
from gridplan.util.fragments import read_fragments

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        # Importing the script sets OpenMP's wait policy, too late in a test process.
        warnings.simplefilter("ignore", RuntimeWarning)
        spec.loader.exec_module(module)
    return module


def test_a_fragment_is_one_paragraph_whose_lines_join_with_spaces(tmp_path):
    path = tmp_path / "t.md"
    path.write_text(
        "a note for the reader\n\n<!-- first -->\nOne ${x}\nparagraph.\n\n"
        "<!-- second-piece -->\n (a leading space stays)\n"
    )
    text = read_fragments(path)
    assert list(text) == ["first", "second-piece"]
    assert text["first"].substitute(x="long") == "One long paragraph."
    assert text["second-piece"].substitute() == " (a leading space stays)"
    with pytest.raises(KeyError, match="x"):
        text["first"].substitute()


@pytest.mark.parametrize(
    "body, problem",
    [
        ("<!-- a -->\none\n<!-- a -->\ntwo\n", "fragment 'a' appears twice"),
        ("<!-- a -->\none\n\ntwo\n", "fragment 'a' must be one paragraph"),
        ("<!-- a -->\n\n<!-- b -->\ntwo\n", "fragment 'a' must be one paragraph"),
    ],
    ids=["repeated", "blank-line", "empty"],
)
def test_a_bad_fragments_file_is_refused_naming_file_and_fragment(tmp_path, body, problem):
    path = tmp_path / "bad.md"
    path.write_text(body)
    with pytest.raises(ValueError, match=re.escape(f"{path}: {problem}")):
        read_fragments(path)


@pytest.mark.parametrize("script", ["readings", "results_doc"])
def test_every_fragment_a_script_fills_is_in_its_template_and_every_one_is_used(script):
    module = load_script(script)
    source = (REPO / "scripts" / f"{script}.py").read_text()
    assert set(re.findall(r'TEXT\["([a-z0-9-]+)"\]', source)) == set(module.TEXT)


def summary(script, value: float) -> dict:
    """A reading's summary (``scripts/readings.py summarize``) with every number ``value``."""
    quoted = ("E_tot", "success", *script.QUOTED_DIMS)
    models = {m: dict.fromkeys(quoted, value) for m in script.QUOTED}
    pair = dict.fromkeys(("E_tot", "DRPE_graded", "success"), value)
    return {
        "verdicts": {g: {f"{g} effect": True} for g in ("e1", "e2", "e5", "e6")},
        "missing": [],
        "e1": {
            "oracle_E_tot": value,
            "pair": {"M(0, 0.3)": pair, "M(0.35, 0.1)": pair},
            "pair_E_tot_gap": 0.5,
            "pair_success_gap": 0.25,
            "row_factor": [2.0, 40.0],
            "iso_pairs": 1,
            "models": models,
        },
        "e2": {p: {"E_tot": value, "DRPE": value} for p in ("grid", "sweep_graded")},
        "e5": {
            "c1_B_success": value,
            "c1_B_se": 0.01,
            "c1_B_outcomes": [3, 2, 1],
            "n_episodes": 6,
            "E_tot": [value, value],
            "by_goal": {"(7, 5)": value, "(7, 2)": value},
        },
        "e6": {"depth_success": {1: value}, "ar1_success": [(0.15, value)]},
    }


def test_every_paragraph_of_readings_md_renders_with_its_numbers():
    script = load_script("readings")
    summaries = {name: summary(script, 0.125) for name in readings.names()}
    learned = dict.fromkeys(("E_tot", *script.QUOTED_DIMS), 0.25)
    notes = script.explanations(summaries, learned)
    heads = [n.split("**")[1] for n in notes]
    assert heads == [
        "E1, Table 2: why the paper's pair is not matched under `project`.",
        "E1, the row factor.",
        "E5, the scale of E_tot.",
        "E5, the Task B mechanism.",
        "E3, learned E_tot below the paper's and below our oracle's floor.",
        "What `paper` is, and how it was picked.",
    ]
    assert not any("$" in n or "\n" in n or "  " in n for n in notes)
    assert "M(0, 0.3) and M(0.35, 0.1) read 0.125 and 0.125 (50% apart)." in notes[0]
    assert "the factors ×2.0–×40.0." in notes[1]
    assert "σ² (H + 1) / 2 / 12 = 0.293 of E_tot over H = 10" in notes[2]
    assert (
        "(3 goals, 2 hazards, 1 timeouts in 6; by true goal (7, 5) 0.12 / (7, 2) 0.12)"
        in (notes[3])
    )
    assert "Above that floor our models add 0.125;" in notes[4]
    # Every reading reproduces all four effects: none is ahead of `paper`, the rest tie.
    paper = notes[5]
    assert "It has the switches of `shared-prefix`. It reproduces 4 of 4" in paper
    assert "; no measured reading reproduces more (`project`, " in paper
    assert paper.endswith("from 0.12 to 0.12 (paper 0.37).")
