"""E8, the scale experiment: the margin and its slope on hand-built pools with known values,
verdicts that can fail, the settings' checks, and the tiny profile end to end (with the
results document's in-place update of one group)."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from gridplan.core import world as worlds
from gridplan.experiments import GROUPS, settings
from gridplan.experiments.e8 import (
    CLAIMS,
    ScaleRecord,
    WorldRow,
    axis_fit,
    margin_replicates,
    verdicts,
)
from gridplan.experiments.runner import read_done, run_groups
from gridplan.experiments.tables import GroupReport
from gridplan.util.fragments import read_fragments
from tests.experiments.test_templates import REPO, load_script


def record(e_tot: float, drpe: float, success: float) -> ScaleRecord:
    return ScaleRecord(
        world="g8-k2", size=8, distractors=2, state_width=12, name="m", family="controlled",
        sigma_r=0.0, sigma_i=0.0, key=None, seed=None, E_tot=e_tot, DRPE_graded=drpe,
        DRPE_binary=drpe, success=success, success_se=0.0, n_episodes=10,
    )  # fmt: skip


def world_row(name: str, width: int, size: int, rho_e: float, rho_d: float, **kw) -> WorldRow:
    values = dict(
        world=name, size=size, distractors=(width - 8) // 2, state_width=width,
        irrelevant_share=(width - 6) / width, horizon=60 * size // 8, n_grid=48,
        oracle_success=1.0, oracle_E_tot=0.05, E_tot_min=0.05, E_tot_max=0.3,
        irrelevant_drpe_max=0.0, rho_E_tot=rho_e, rho_E_tot_low=rho_e - 0.1,
        rho_E_tot_high=rho_e + 0.1, rho_DRPE=rho_d, rho_DRPE_low=rho_d - 0.05,
        rho_DRPE_high=min(rho_d + 0.05, 1.0), margin=abs(rho_d) - abs(rho_e), margin_low=None,
        margin_high=None, n_learned=0, learned_success=None, pooled_rho_E_tot=None,
        pooled_rho_DRPE=None, grid_seconds=1.0, learned_seconds=None,
    )  # fmt: skip
    values.update(kw)
    return WorldRow(**values)


def test_the_margin_is_drpes_lead_in_absolute_rho_with_paired_replicates():
    # DRPE orders success exactly (rho -1); E_tot's ranks are 2, 1, 4, 3 (rho -0.6).
    success = [1.0, 0.8, 0.5, 0.1]
    pool = [record(e, d, s) for e, d, s in zip([2, 1, 4, 3], [0, 1, 2, 3], success, strict=True)]
    point, reps = margin_replicates(pool, n_resamples=500, seed=3)
    assert point == pytest.approx(1.0 - 0.6)
    assert reps.shape == (500,)
    finite = reps[np.isfinite(reps)]
    # |rho_DRPE| is 1 in every resample, |rho_E_tot| at most 1: the margin is never negative.
    assert finite.size > 400 and finite.min() >= -1e-12
    same, again = margin_replicates(pool, n_resamples=500, seed=3)
    np.testing.assert_array_equal(reps, again)


def test_the_margin_slope_is_the_least_squares_line_through_the_worlds_margins():
    names = ("g8-k2", "g8-k8", "g8-k32")
    rows = {
        n: world_row(n, w, 8, -0.5, -0.5 - m)
        for n, w, m in zip(names, (12, 24, 72), (0.1, 0.2, 0.6), strict=True)
    }
    # Each world's replicates scatter independently around its margin (SD 0.01): the slope's
    # CI is narrow and excludes 0.
    rng = np.random.default_rng(0)
    reps = {n: rows[n].margin + rng.normal(0.0, 0.01, 200) for n in names}
    fit = axis_fit("width", names, rows, reps, 200)
    assert fit.x == (12, 24, 72)
    assert fit.slope == pytest.approx(np.polyfit([12, 24, 72], [0.1, 0.2, 0.6], 1)[0])
    assert fit.slope_low < fit.slope < fit.slope_high and fit.slope_low > 0


def test_verdicts_fail_when_total_error_leads_and_are_unstated_on_a_smoke_profile():
    cfg = settings.E8["full"]
    sizes = {n: worlds.get(n) for n in cfg.worlds}
    good = {n: world_row(n, w.state_dim, w.size, -0.3, -0.95) for n, w in sizes.items()}
    # In the widest world E_tot ranks better than DRPE: the width lead fails there.
    bad = dict(good, **{"g8-k64": world_row("g8-k64", 136, 8, -0.9, -0.6)})
    reps = {n: np.full(50, bad[n].margin) for n in cfg.worlds}
    fits = {
        axis: axis_fit(axis, getattr(cfg, f"{axis}_axis"), bad, reps, 50)
        for axis in ("width", "length")
    }
    report = GroupReport("E8", "full")
    verdicts(report, cfg, bad, fits)
    got = {key: v.reproduced for key, v in zip(CLAIMS, report.verdicts, strict=True)}
    assert got["lead_width"] is False and got["strong_width"] is False
    assert got["margin_width"] is False  # the margin falls from 0.65 to -0.3
    assert got["lead_length"] is True and got["strong_length"] is True
    assert got["etot_width"] is False  # |-0.9| is not below |-0.3|
    assert got["lead_learned"] is None  # no pooled rho in hand-built rows
    assert "g8-k64: |-0.60| vs |-0.90|" in report.verdicts[0].detail
    smoke = GroupReport("E8", "quick")
    verdicts(smoke, cfg, bad, fits)
    assert [v.reproduced for v in smoke.verdicts] == [None] * len(CLAIMS)
    assert [v.label for v in smoke.verdicts] == ["smoke run: no verdict"] * len(CLAIMS)
    assert smoke.verdicts[0].detail == report.verdicts[0].detail


def test_the_settings_start_both_axes_at_the_papers_world_and_train_only_measured_worlds():
    full = settings.E8["full"]
    assert full.width_axis == ("g8-k2", "g8-k8", "g8-k32", "g8-k64")
    assert full.length_axis == ("g8-k2", "g16-k2", "g32-k2")
    assert full.protocol.depth == 4 and len(full.sigma_r) * len(full.sigma_i) == 48
    with pytest.raises(ValueError, match="width_axis must start at the paper's world"):
        dataclasses.replace(full, width_axis=("g8-k8", "g8-k64"))
    with pytest.raises(ValueError, match=r"learned_worlds \['g64-k2'\] are not measured"):
        dataclasses.replace(full, learned_worlds=("g64-k2",))


def test_the_results_template_states_every_claim_before_the_run():
    text = read_fragments(REPO / "scripts" / "templates" / "results.md")["e8-claims"].substitute()
    for claim in CLAIMS.values():
        assert claim in text


@pytest.mark.slow
def test_e8_tiny_runs_every_world_and_updates_only_its_section_of_the_results_doc(tmp_path):
    assert run_groups(GROUPS, ["e8"], tmp_path, "tiny", progress=False) == {"e8": "ran"}
    folder = tmp_path / "e8"
    with (folder / "worlds.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["world"] for r in rows] == ["g8-k2", "g8-k8", "g10-k2"]
    assert [int(r["state_width"]) for r in rows] == [12, 24, 12]
    assert [int(r["horizon"]) for r in rows] == [60, 60, 75]
    for r in rows:
        assert float(r["oracle_success"]) == 1.0
        assert float(r["irrelevant_drpe_max"]) == 0.0
        assert float(r["oracle_E_tot"]) > 0.0  # the distractors' own randomness
    assert [int(r["n_learned"]) for r in rows] == [1, 0, 0]
    models = json.loads((folder / "models.json").read_text())["models"]
    assert len(models) == 3 * 4 + 1
    noisy = [m for m in models if m["sigma_r"] == 2.0]
    assert all(m["DRPE_graded"] > 0 for m in noisy)
    done = read_done(folder)
    assert [v["claim"] for v in done["verdicts"]] == list(CLAIMS.values())
    assert all(v["reproduced"] is None for v in done["verdicts"])
    table = (folder / "table.md").read_text()
    assert "smoke run, numbers only, no verdict stated" in table.splitlines()[0]
    assert "-0.98 [-1.00, -0.94]" in table and (folder / "fig_scale.png").stat().st_size > 0

    doc = tmp_path / "docs" / "RESULTS.md"
    doc.parent.mkdir()
    other = "## E1 — the first group\n\nkept as it was"
    script = load_script("results_doc")
    # A later table that also names groups (as the readings' does) is not the summary.
    readings = "| group | claim |\n| --- | --- |\n| e7 | an effect |"
    summary = f"{script.SUMMARY_HEADER}\n| --- |\n| e1 | x | y | z | w |"
    doc.write_text(f"# Results\n\n{summary}\n\n{readings}\n\n{other}\n")
    argv = ["--results", str(tmp_path), "--doc", str(doc), "--only", "e8", "--force"]
    assert script.main([*argv, "--allow-profile", "tiny"]) == 0
    first = doc.read_text()
    assert other in first and readings in first
    assert first.index("| e1 |") < first.index("| e8 |") < first.index("| e7 |")
    assert "## E8 — " in first and "E8's verdicts were stated before" in first
    assert (doc.parent / "figures" / "e8" / "fig_scale.png").is_file()
    assert script.main([*argv, "--allow-profile", "tiny"]) == 0
    assert doc.read_text() == first  # replaced, not appended again
    assert script.main(argv) == 2  # a tiny run is refused for the full document
