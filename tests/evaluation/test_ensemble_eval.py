"""``python -m eval --ckpt <ensemble run>``: the disagreement's Spearman with rollout error and
its seeded CI, AURC, and the risk-coverage figure on the card."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers_learned import debug_overrides

from eval.cli import main
from gridplan.training.config import compose

TINY = ["--seeds", "1", "--episodes", "2", "--eval-windows", "24", "--no-progress"]


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory) -> Path:
    """The run folder of a trained 3-member bootstrap ensemble (tiny data, two epochs)."""
    from gridplan.training.runs import train

    tmp = tmp_path_factory.mktemp("ens")
    own = [o for o in debug_overrides(tmp) if not o.startswith("model.")]
    ensemble = ["model=ensemble5", "model.hidden=[32,32]", "model.members=3"]
    _, artifacts = train(compose([*own, *ensemble]))
    return Path(artifacts["run_dir"])


@pytest.mark.slow
def test_the_report_of_an_ensemble_run_holds_its_uncertainty_with_a_seeded_ci(
    ensemble_run, tmp_path, capsys
):
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for out in outs:
        assert main(["--ckpt", str(ensemble_run), "--json", str(out), *TINY]) == 0
    out = capsys.readouterr().out
    assert "uncertainty (predict_members)\n  spearman " in out
    assert re.search(r"\n  n +24 +rollouts scored\n", out)
    first, second = (json.loads(p.read_text())["uncertainty"] for p in outs)
    assert first == second  # the bootstrap is seeded
    rho = first["spearman"]
    assert rho["n"] == first["n"] == 24
    assert -1 <= rho["low"] <= rho["rho"] <= rho["high"] <= 1
    assert first["aurc_optimal"] <= first["aurc"]
    assert first["curve"][-1] == pytest.approx([1.0, first["aurc_random"]])


@pytest.mark.slow
def test_the_card_of_an_ensemble_run_shows_spearman_aurc_and_the_risk_coverage_figure(
    ensemble_run, capsys
):
    argv = ["--ckpt", str(ensemble_run), "--levels", "uncertainty", "--card", "--force"]
    assert main([*argv, "--ladder-sizes", "tiny", *TINY]) == 0
    (card_path,) = (ensemble_run / "checkpoints").glob("best.eval.*.card.json")
    card = json.loads(card_path.read_text())
    rows = {r["metric"]: r for r in card["profile"] if r["level"] == "uncertainty"}
    low, high = (float(x) for x in rows["spearman"]["interval"].strip("[]").split(", "))
    assert low <= float(rows["spearman"]["value"]) <= high
    assert float(rows["aurc"]["value"]) == pytest.approx(rows["aurc"]["estimate"], abs=5e-5)
    figure = card_path.parent / card["figures"]["risk_coverage"]
    assert figure.is_file() and figure.stat().st_size > 1000
    markdown = card_path.with_name(card_path.name.replace(".card.json", ".card.md")).read_text()
    assert "Spearman(uncertainty, rollout error)" in markdown and figure.name in markdown


def test_a_run_folder_without_a_best_checkpoint_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--ckpt", str(tmp_path), *TINY])
    assert exit_info.value.code == 2
    assert "is a folder without checkpoints/best.ckpt" in capsys.readouterr().err
