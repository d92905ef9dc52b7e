"""scripts/bench_scaling.py: the growth it states is the fit of the costs it measured, and one
quick run reports every section in every world it is given, with the V* tables' true sizes
and the planner inside its memory budget."""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_scaling.py"


def load_scaling():
    spec = importlib.util.spec_from_file_location("bench_scaling", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCALING = load_scaling()


def test_the_fitted_exponent_is_the_power_of_an_exact_power_law():
    xs = [12, 40, 136]
    assert SCALING.fit_exponent(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0)
    assert SCALING.fit_exponent(xs, [5.0] * 3) == pytest.approx(0.0)
    assert SCALING.fit_exponent([8, 8], [1.0, 2.0]) is None
    with pytest.raises(ValueError, match="positive"):
        SCALING.fit_exponent([8, 16], [1.0, 0.0])
    with pytest.raises(ValueError, match="2 x values but 3 costs"):
        SCALING.fit_exponent([8, 16], [1.0, 2.0, 3.0])


def _row(measure: str, world: str, size: int, state_dim: int, cost: float) -> dict:
    return {
        "measure": measure,
        "world": world,
        "size": size,
        "state_dim": state_dim,
        "cost_s": cost,
    }


def test_cpu_times_get_their_own_growth_beside_the_wall_times():
    rows = [_row("m", "default", 8, 12, 1.0), _row("m", "g16-k2", 16, 12, 4.0)]
    rows[0]["cpu_cost_s"], rows[1]["cpu_cost_s"] = 0.5, 1.0
    (g,) = SCALING.growth(rows)
    assert g["exponent_N"] == pytest.approx(2.0) and g["cpu"]["exponent_N"] == pytest.approx(1.0)
    assert g["cpu"]["ratio_vs_default"] == {"default": 1.0, "g16-k2": 2.0}


def test_growth_states_each_cost_against_the_default_world_and_fits_each_dimension():
    rows = [
        _row("m", "default", 8, 12, 1.0),
        _row("m", "g8-k16", 8, 40, 1.0 * (40 / 12)),
        _row("m", "g8-k64", 8, 136, 1.0 * (136 / 12)),
        _row("m", "g16-k2", 16, 12, 16.0),
        _row("m", "g32-k2", 32, 12, 256.0),
        _row("m", "g32-k64", 32, 136, 300.0),
    ]
    (g,) = SCALING.growth(rows)
    assert g["measure"] == "m"
    assert g["exponent_S"] == pytest.approx(1.0) and g["exponent_N"] == pytest.approx(4.0)
    assert g["ratio_vs_default"]["default"] == 1.0
    assert g["ratio_vs_default"]["g32-k64"] == pytest.approx(300.0)
    assert g["cpu"] is None  # no CPU times measured
    # A dimension with one world measured has no exponent.
    (lone,) = SCALING.growth([_row("m", "default", 8, 12, 1.0), _row("m", "g16-k2", 16, 12, 2.0)])
    assert lone["exponent_S"] is None and lone["exponent_N"] == pytest.approx(1.0)


def _run(wall: float, cpu: float, transitions: int) -> dict:
    return {"wall_s": wall, "cpu_s": cpu, "transitions": transitions, "peak_MB": 100.0}


def test_the_trainers_epoch_is_the_difference_of_its_runs_and_the_rest_its_fixed_cost():
    world = SCALING.worlds.get("g8-k16")
    first, extra = SCALING.TRAINER_EPOCHS[0], SCALING.TRAINER_EPOCHS[1] - SCALING.TRAINER_EPOCHS[0]
    # 2 s and 1 CPU-s per epoch of 1,000 samples; 5 s and 3 CPU-s fixed.
    short = _run(5 + 2 * first, 3 + first, 1000 * first)
    long = _run(5 + 2 * (first + extra), 3 + first + extra, 1000 * (first + extra))
    epoch, fixed = SCALING.trainer_summary(world, _run(9.0, 9.0, 1), short, long)
    assert epoch["samples"] == 1000 * extra and epoch["rate_per_s"] == pytest.approx(500.0)
    assert epoch["cost_s"] == pytest.approx(2e-3) and epoch["cpu_cost_s"] == pytest.approx(1e-3)
    assert fixed["cost_s"] == pytest.approx(5.0) and fixed["cpu_cost_s"] == pytest.approx(3.0)
    assert epoch["world"] == "g8-k16" and epoch["state_dim"] == 40
    assert epoch["peak_memory_bytes"] == 100 * 2**20 and epoch["warm_up_wall_s"] == 9.0
    # A longer run that took no longer (a busy machine) states no rate, not a negative one.
    epoch, fixed = SCALING.trainer_summary(world, short, short, short)
    assert epoch["rate_per_s"] is None and epoch["cost_s"] is None and fixed["cost_s"] is None


@pytest.fixture
def restored_process():
    """``main`` sets one torch thread and freezes the garbage collector: undo both."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
    gc.unfreeze()


def _check_result(result: dict, names: list[str], sections=SCALING.SECTIONS) -> None:
    rows = result["rows"]
    assert {r["section"] for r in rows} == set(sections)
    for measure in {r["measure"] for r in rows if r["section"] != "training"}:
        assert [r["world"] for r in rows if r["measure"] == measure] == names, measure
    # Training does not read the grid: one row per state width.
    if "training" in sections:
        widths = {r["state_dim"] for r in rows}
        trained = [r["state_dim"] for r in rows if r["section"] == "training"]
        assert sorted(trained) == sorted(widths)
    for r in rows:
        if r["section"] == "value":
            n = r["size"]
            assert r["table_entries"] == n**4 * 4 and r["table_bytes"] == 4 * n**4 * 4
        if r["section"] == "planner":
            assert r["within_budget"] is True, r
            assert r["rate_per_s"] * r["cost_s"] == pytest.approx(1.0)
        assert r["cost_s"] > 0 and math.isfinite(r["cost_s"])
    growth = {g["measure"]: g for g in result["growth"]}
    assert set(growth) == {r["measure"] for r in rows}
    for g in growth.values():
        assert g["ratio_vs_default"]["default"] == 1.0
    assert result["settings"]["threads"] == 1
    assert result["memory_bandwidth_bytes_per_s"] > 0 and result["randn_per_s"] > 0


def test_a_quick_run_reports_each_section_it_runs_in_every_world_it_is_given(
    tmp_path, restored_process, capsys
):
    # The training section imports Lightning (seconds): the slow test below runs it.
    out = tmp_path / "scaling.json"
    argv = ["--quick", "--worlds", "g8-k2,g8-k16,g16-k2", "--sections", "value,env,planner"]
    assert SCALING.main([*argv, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    names = ["default", "g8-k16", "g16-k2"]
    assert [w["name"] for w in result["worlds"]] == names
    _check_result(result, names, ("value", "env", "planner"))
    planner = [r for r in result["rows"] if r["section"] == "planner"]
    assert {r["scorer"] for r in planner} == {"FusedNoiseScorer", "GenericScorer"}
    for g in result["growth"]:
        for fit in (g, g["cpu"]):
            assert fit["exponent_N"] is not None and fit["exponent_S"] is not None, g
            assert set(fit["ratio_vs_default"]) == set(names)
    printed = capsys.readouterr().out
    assert "~S^b" in printed and "load average" in printed
    # An existing result is never overwritten.
    with pytest.raises(SystemExit):
        SCALING.main(["--quick", "--worlds", "g8-k2", "--json", str(out)])


def test_a_world_named_twice_or_unknown_is_refused(restored_process, capsys):
    with pytest.raises(SystemExit):
        SCALING.main(["--quick", "--worlds", "g8-k2,default"])
    assert "twice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        SCALING.main(["--quick", "--worlds", "g8"])
    assert "unknown world 'g8'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        SCALING.main(["--quick", "--sections", "planner,gpu"])
    assert "unknown sections ['gpu']" in capsys.readouterr().err


@pytest.mark.slow
def test_the_quick_run_of_every_scaling_world_reports_each_one(tmp_path):
    out = tmp_path / "scaling.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [w["name"] for w in result["worlds"]] == list(SCALING.WORLDS)
    _check_result(result, list(SCALING.WORLDS))
    growth = {g["measure"]: g for g in result["growth"]}
    for measure, g in growth.items():
        assert g["exponent_S"] is not None, measure
        assert (g["exponent_N"] is None) == measure.startswith("training"), measure
    assert set(growth["planner mlp"]["ratio_vs_default"]) == set(SCALING.WORLDS)
