"""E10 (``gridplan.experiments.e10``): its settings, its ρ table and verdicts on known
inputs (the claims can fail), and a tiny end-to-end run (slow)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gridplan.experiments import e10, settings
from gridplan.experiments.settings import E10Config
from gridplan.experiments.tables import GroupReport


def test_every_profile_loads_and_bad_planners_are_refused():
    for profile in ("full", "quick", "tiny"):
        cfg = settings.E10[profile]
        assert cfg.planners[0] == "search"
        others = ("search-learned-v", "search-no-heuristic", "cem", "mppi", "mcts")
        assert cfg.planners[1:] == others
    full = settings.E10["full"]
    assert len(full.sigma_r) * len(full.sigma_i) == 48  # E1's whole grid
    base = {f: getattr(full, f) for f in full.__dataclass_fields__}
    with pytest.raises(ValueError, match="unknown planner 'alphazero'"):
        E10Config(**{**base, "planners": ("search", "alphazero")})
    with pytest.raises(ValueError, match="must start with 'search'"):
        E10Config(**{**base, "planners": ("cem", "search")})


def _rows(drpe, etot, success):
    return [
        e10.ModelRow(
            name=f"m{i}",
            family="grid",
            E_tot=e,
            DRPE=d,
            planner_drpe={"search": d, "cem": d},
            regret={"search": d, "cem": e},
            success={"search": s, "cem": s},
        )
        for i, (d, e, s) in enumerate(zip(drpe, etot, success, strict=True))
    ]


def test_rho_table_known_answer():
    rows = _rows([0.0, 0.1, 0.2, 0.3], [0.3, 0.1, 0.2, 0.0], [1.0, 0.8, 0.5, 0.1])
    table = e10.rho_table(rows, ["search", "cem"], 200, 0)
    get = {(r["planner"], r["metric"]): r["rho"] for r in table}
    assert get[("search", "DRPE")] == pytest.approx(-1.0)
    assert get[("cem", "planner_drpe")] == pytest.approx(-1.0)
    # E_tot ranks 4, 2, 3, 1 against success ranks 4, 3, 2, 1: rho = 1 - 6 * 2 / 60 = 0.8.
    assert get[("search", "E_tot")] == pytest.approx(0.8)
    assert get[("cem", "regret")] == pytest.approx(0.8)


def test_the_claims_can_fail():
    # DRPE that ranks nothing and E_tot that ranks perfectly: the DRPE claims read False.
    rows = _rows([0.2, 0.0, 0.3, 0.1], [0.0, 0.1, 0.2, 0.3], [1.0, 0.8, 0.5, 0.1])
    table = e10.rho_table(rows, ["search", "cem"], 200, 0)
    report = GroupReport("t", "full")
    e10.verdicts(report, table, [], ["search", "cem"])
    by_claim = {v.claim: v.reproduced for v in report.verdicts}
    assert by_claim[e10.CLAIMS["drpe_beats_etot"]] is False
    assert by_claim[e10.CLAIMS["drpe_strong_sampling"]] is False


@pytest.mark.slow
def test_tiny_profile_end_to_end(tmp_path):
    from gridplan.experiments import GROUPS, run_groups

    run_groups(GROUPS, ["e10"], tmp_path, "tiny", progress=False)
    res = json.loads((tmp_path / "e10" / "results.json").read_text())
    assert res["verdicts_stated"] is False
    assert {r["planner"] for r in res["rho_grid"]} == set(settings.E10["tiny"].planners)
    assert np.isclose(sum(res["weights"]["search"]), 1.0)
    assert (tmp_path / "e10" / "fig_planners.png").exists()
