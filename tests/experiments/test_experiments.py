"""Plumbing of the paper-reproduction runner (gridplan/experiments, scripts/reproduce.py).

The real groups run once on the ``tiny`` profile (2x2 grid, depth 1-2, 2 seeds x 2 episodes)
through the command line; runner behaviour (skip, --force, failures, interrupts, recovery)
is checked on a toy group that costs nothing. Not the paper's numbers: those need a full run.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

from gridplan.experiments import GROUPS, settings
from gridplan.experiments.learned_runs import DATA_CACHE
from gridplan.experiments.profiles import PROFILES
from gridplan.experiments.records import (
    MODEL_FIELDS,
    ControlledRecord,
    LearnedRecord,
    read_models,
)
from gridplan.experiments.runner import Group, read_done, run_groups, select_groups, to_jsonable
from gridplan.experiments.tables import GroupReport

REPO = Path(__file__).resolve().parents[2]
#: A pid above the kernel's maximum (2**22), so no process can have it.
DEAD_PID = 2**22 + 17
ALL_SETTINGS = {g: getattr(settings, g.upper()) for g in GROUPS}


def load_cli():
    spec = importlib.util.spec_from_file_location("reproduce", REPO / "scripts" / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory) -> Path:
    """All registered groups run once on the tiny profile through the command line (about
    30 s: the tests that read it are in the slow tier)."""
    root = tmp_path_factory.mktemp("results")
    code = load_cli().main(["--profile", "tiny", "--out", str(root), "--no-progress"])
    assert code == 0
    return root


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    value: int = 1


def toy_group(
    name: str = "toy", fail: type[BaseException] | None = None, calls=None, reads=()
) -> Group:
    """A group that writes one CSV (and, with ``fail``, raises after writing it); it looks up
    the finished groups it ``reads``."""

    def run(ctx):
        if calls is not None:
            calls.append(ctx.name)
        for other in reads:
            ctx.finished_group(other)
        ctx.write_csv("numbers.csv", [{"value": ctx.config.value}])
        if fail is not None:
            raise fail("boom")
        report = GroupReport(f"{name} report")
        report.verdict("the toy effect", True, "always")
        return report

    configs = {p: ToyConfig() for p in PROFILES}
    return Group(name, "toy group", run, configs, tuple(reads))


@pytest.mark.slow
def test_every_group_writes_tables_figures_numbers_and_done_json(tiny_root):
    for name in GROUPS:
        folder = tiny_root / name
        files = {p.name for p in folder.iterdir()}
        assert {"table.md", "results.json", "done.json"} <= files, name
        assert any(f.endswith(".png") for f in files), name
        assert any(f.endswith(".csv") for f in files), name
    # Besides the group folders only e3's shared dataset cache.
    assert sorted(p.name for p in tiny_root.iterdir()) == sorted([*GROUPS, DATA_CACHE])


@pytest.mark.slow
def test_e1_models_csv_has_one_row_per_grid_setting_with_exact_zero_drpe_for_irrelevant_noise(
    tiny_root,
):
    rows = read_csv(tiny_root / "e1" / "models.csv")
    assert [r["name"] for r in rows] == ["M(0, 0)", "M(0, 1.2)", "M(0.35, 0)", "M(0.35, 1.2)"]
    by = {r["name"]: r for r in rows}
    # Noise on irrelevant dims never touches dims 0-5, so their error is exactly zero.
    assert float(by["M(0, 0)"]["DRPE_graded"]) == 0.0
    assert float(by["M(0, 1.2)"]["DRPE_graded"]) == 0.0
    assert float(by["M(0.35, 0)"]["DRPE_graded"]) > 0.0
    # The oracle still errs on the stochastic distractors, and irrelevant noise adds to it.
    assert 0.0 < float(by["M(0, 0)"]["E_tot"]) < float(by["M(0, 1.2)"]["E_tot"])
    for r in rows:
        assert r["n_episodes"] == "4"
        assert 0.0 <= float(r["success"]) <= 1.0
        assert int(r["goal"]) + int(r["hazard"]) + int(r["timeout"]) == 4
    models = json.loads((tiny_root / "e1" / "models.json").read_text())["models"]
    assert [m["name"] for m in models] == [r["name"] for r in rows]


@pytest.mark.slow
def test_tables_print_the_paper_value_beside_ours(tiny_root):
    t1 = (tiny_root / "e1" / "table.md").read_text()
    assert (
        "| model | E_tot | E_tot (paper) | DRPE | DRPE (paper) | success | success (paper) |" in t1
    )
    assert "| oracle = M(0, 0) |" in t1 and "| 0.020 |" in t1 and "0.37 ± 0.02" in t1
    t2 = (tiny_root / "e2" / "table.md").read_text()
    assert "-0.98 [-1.00, -0.94]" in t2 and "-0.32 [-0.56, -0.04]" in t2
    t5 = (tiny_root / "e5" / "table.md").read_text()
    assert "0.82 ± 0.02" in t5 and "0.214" in t5 and "35 of 240" in t5
    for name in GROUPS:
        text = (tiny_root / name / "table.md").read_text()
        assert "**Verdict: " in text.splitlines()[2], name


@pytest.mark.slow
def test_done_json_records_profile_config_wall_time_and_verdicts(tiny_root):
    done = read_done(tiny_root / "e1")
    assert done["profile"] == "tiny"
    assert done["config"] == to_jsonable(settings.E1["tiny"])
    assert done["wall_time_s"] > 0
    assert done["verdict"].startswith("**Verdict: ")
    assert len(done["verdicts"]) == 6
    assert [c["claim"] for c in done["sanity_checks"]] == [
        "Along a row of fixed σR success is statistically constant (§5.1)"
    ]


@pytest.mark.slow
def test_e2_reuses_finished_e1_and_says_the_learned_pool_is_missing(tiny_root, tmp_path):
    shutil.copytree(tiny_root / "e1", tmp_path / "e1")
    assert run_groups(GROUPS, ["e2"], tmp_path, "tiny", progress=False) == {"e2": "ran"}
    results = json.loads((tmp_path / "e2" / "results.json").read_text())
    assert results["grid_source"] == "e1"
    assert results["learned_available"] is False
    assert "learned pool not available: run e3" in (tmp_path / "e2" / "table.md").read_text()
    done = read_done(tmp_path / "e2")
    assert done["inputs"] == {"e1": read_done(tmp_path / "e1")["run_id"], "e3": None}
    rows = read_csv(tmp_path / "e2" / "spearman.csv")
    assert {r["pool"] for r in rows} == {"grid", "sweep_graded", "sweep_binary"}


@pytest.mark.slow
def test_e2_pools_the_learned_models_of_a_finished_e3(tiny_root, tmp_path):
    shutil.copytree(tiny_root / "e1", tmp_path / "e1")
    e3 = tmp_path / "e3"
    e3.mkdir()
    learned = [learned_record(f"learned_{k}", k) for k in range(3)]
    extra = dataclasses.replace(learned[0], name="random_data", family="learned_extra")
    rows = [to_jsonable(r) for r in [*learned, extra]]
    (e3 / "models.json").write_text(json.dumps({"models": rows}))
    (e3 / "done.json").write_text(json.dumps({"profile": "tiny", "run_id": "fake-e3"}))
    status = run_groups(GROUPS, ["e2"], out=tmp_path, profile="tiny", progress=False)
    assert status == {"e2": "ran"}
    pool = read_csv(tmp_path / "e2" / "pool.csv")
    assert len(pool) == 4 + 3
    assert "random_data" not in {r["name"] for r in pool}
    rows = {(r["pool"], r["metric"]): r for r in read_csv(tmp_path / "e2" / "spearman.csv")}
    assert rows[("all", "E_tot")]["n"] == "7"
    # Among the three learned models DRPE rises exactly as success falls.
    assert float(rows[("learned", "DRPE_graded")]["rho"]) == pytest.approx(-1.0)
    assert read_done(tmp_path / "e2")["inputs"]["e3"] == "fake-e3"


def learned_record(name: str, k: int) -> LearnedRecord:
    """A learned model record whose DRPE rises by k as its success falls."""
    return LearnedRecord(
        name=name,
        family="learned",
        key=name,
        variant="uniform",
        data="20k",
        policy="balanced",
        E_tot=0.1 + k / 100,
        E_tot_se=None,
        DRPE_graded=0.05 * k,
        DRPE_binary=0.05 * k,
        VPE=0.0,
        success=0.9 - 0.2 * k,
        success_se=0.05,
        success_se_over="seeds",
        n_seeds=5,
        n_episodes=200,
        per_seed=(0.9 - 0.2 * k,) * 5,
        outcomes={"goal": 180 - 40 * k, "hazard": 0, "timeout": 20 + 40 * k},
        picked_up_key=1.0,
        opened_door=1.0,
        carrying_at_pickup=0.9,
        pickup_mse=0.01,
        door_open_at_opening=0.9,
        door_mse=0.01,
        profile=(0.1,) * 12,
        checkpoints=(),
    )


def test_a_finished_group_is_skipped_unless_forced(tmp_path):
    calls = []
    registry = {"toy": toy_group(calls=calls)}
    assert run_groups(registry, None, tmp_path, "tiny", progress=False) == {"toy": "ran"}
    first = read_done(tmp_path / "toy")
    assert run_groups(registry, None, tmp_path, "tiny", progress=False) == {"toy": "skipped"}
    assert calls == ["toy"]
    assert read_done(tmp_path / "toy") == first
    assert run_groups(registry, None, tmp_path, "tiny", force=True, progress=False) == {
        "toy": "ran"
    }
    assert calls == ["toy", "toy"]
    assert read_done(tmp_path / "toy")["run_id"] != first["run_id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy"]


def test_a_skipped_group_says_when_an_input_it_read_has_changed(tmp_path, capsys):
    registry = {"a": toy_group("a"), "b": toy_group("b", reads=("a",))}
    run_groups(registry, None, tmp_path, "tiny", progress=False)
    assert read_done(tmp_path / "b")["inputs"] == {"a": read_done(tmp_path / "a")["run_id"]}
    run_groups(registry, ["a"], tmp_path, "tiny", force=True, progress=False)
    capsys.readouterr()
    assert run_groups(registry, ["b"], tmp_path, "tiny", progress=False) == {"b": "skipped"}
    assert "its input a has changed since" in capsys.readouterr().err


def test_a_failing_forced_rerun_leaves_the_finished_group_intact(tmp_path):
    run_groups({"toy": toy_group()}, None, tmp_path, "tiny", progress=False)
    before = {p.name: p.read_bytes() for p in (tmp_path / "toy").iterdir()}
    status = run_groups(
        {"toy": toy_group(fail=RuntimeError)}, None, tmp_path, "tiny", force=True, progress=False
    )
    assert status == {"toy": "failed"}
    assert {p.name: p.read_bytes() for p in (tmp_path / "toy").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy"]


def test_an_interrupted_group_leaves_no_folder_and_the_interrupt_propagates(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_groups(
            {"toy": toy_group(fail=KeyboardInterrupt)}, None, tmp_path, "tiny", progress=False
        )
    assert list(tmp_path.iterdir()) == []


def test_leftovers_of_a_dead_run_are_cleaned_and_a_swapped_out_group_restored(tmp_path):
    run_groups({"toy": toy_group()}, None, tmp_path, "tiny", progress=False)
    run_id = read_done(tmp_path / "toy")["run_id"]
    # A run killed mid --force swap: the finished folder moved aside, the new one half written.
    (tmp_path / "toy").rename(tmp_path / f".toy.old-{DEAD_PID}")
    (tmp_path / f".toy.tmp-{DEAD_PID}").mkdir()
    assert run_groups({"toy": toy_group()}, None, tmp_path, "tiny", progress=False) == {
        "toy": "skipped"
    }
    assert read_done(tmp_path / "toy")["run_id"] == run_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy"]


def test_a_folder_without_done_json_is_never_overwritten(tmp_path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "mine.txt").write_text("keep me")
    assert run_groups({"toy": toy_group()}, None, tmp_path, "tiny", progress=False) == {
        "toy": "failed"
    }
    assert [p.name for p in (tmp_path / "toy").iterdir()] == ["mine.txt"]


def test_unknown_group_is_an_error_listing_the_valid_groups(tmp_path, capsys):
    valid = "valid groups: " + ", ".join(GROUPS)
    with pytest.raises(ValueError, match=f"unknown group.*e99; {valid}"):
        select_groups(GROUPS, ["e1", "e99"])
    with pytest.raises(SystemExit) as exit_info:
        load_cli().main(["--only", "e1,e99", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert valid in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_groups_run_after_the_groups_whose_results_they_read():
    assert select_groups(GROUPS, ["e6", "e2", "e1"]) == ["e1", "e2", "e6"]
    registry = {"b": toy_group("b", reads=("a",)), "a": toy_group("a")}
    assert select_groups(registry, ["b", "a"]) == ["a", "b"]
    assert select_groups(registry, ["b"]) == ["b"]


def test_threads_apply_during_the_run_only_and_are_recorded(tmp_path):
    group, seen = toy_group(), []

    def run(ctx):
        seen.append(torch.get_num_threads())
        return group.run(ctx)

    registry = {"toy": dataclasses.replace(group, run=run)}
    before = torch.get_num_threads()
    wanted = 2 if before == 1 else 1
    run_groups(registry, None, tmp_path, "tiny", progress=False, threads=wanted)
    assert seen == [wanted]
    assert read_done(tmp_path / "toy")["threads"] == wanted
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        run_groups(registry, None, tmp_path, "tiny", progress=False, threads=0)


def test_overall_verdict_counts_only_checked_effects():
    report = GroupReport("r")
    report.verdict("one", True, "")
    report.verdict("two", False, "")
    report.verdict("three", None, "input missing")
    assert report.overall() == (
        "**Verdict: partly reproduces** (1 of 2 effects reproduce; 1 not checked)."
    )


def test_a_record_row_spreads_profile_and_outcomes_over_columns_and_reads_back():
    rec = ControlledRecord(
        name="M(0.35, 0.1)",
        family="controlled",
        sigma_r=0.35,
        sigma_i=0.1,
        E_tot=0.2,
        DRPE_graded=0.3,
        DRPE_binary=0.25,
        VPE=0.01,
        success=0.4,
        success_se=0.05,
        n_episodes=10,
        outcomes={"goal": 4, "hazard": 0, "timeout": 6},
        per_seed=(0.5, 0.3),
        profile=tuple(float(d) for d in range(12)),
    )
    row = rec.to_dict()
    assert list(row)[:11] == [
        *MODEL_FIELDS[:2],
        "sigma_r",
        "sigma_i",
        *MODEL_FIELDS[2:5],
        "VPE",
        *MODEL_FIELDS[5:],
    ]
    assert list(row)[11:15] == ["goal", "hazard", "timeout", "per_seed"]
    assert row["err_agent_x"] == 0.0 and row["err_d2_y"] == 11.0
    assert list(row) == ControlledRecord.header()
    assert ControlledRecord.from_dict(row) == rec


def test_reading_model_records_names_the_record_and_the_missing_columns(tmp_path):
    (tmp_path / "models.json").write_text(json.dumps({"models": [{"name": "M(0, 0)"}]}))
    with pytest.raises(ValueError, match=r"model record 0 \(M\(0, 0\)\):.*lacks \['family'"):
        read_models(tmp_path, ControlledRecord)
    with pytest.raises(ValueError, match="not found: the group wrote no model records"):
        read_models(tmp_path / "nowhere", ControlledRecord)


def test_configs_are_recorded_in_the_form_earlier_runs_wrote_so_their_groups_are_reused():
    keys = {name: list(to_jsonable(cfgs["full"])) for name, cfgs in ALL_SETTINGS.items()}
    protocol = ["depth", "seeds", "episodes", "n_windows", "horizon"]
    assert keys["e1"] == ["sigma_r", "sigma_i", *protocol, "iso_tolerance", "n_resamples"]
    assert keys["e2"] == ["sweep_sigma_r", "sweep_sigma_i", *protocol, "iso_tolerance"] + [
        "n_resamples"
    ]
    assert keys["e3"] == ["rows", "random_row", "seeds", "episodes", "depth", "n_windows"] + [
        "train_overrides",
        "n_resamples",
    ]
    assert keys["e5"] == ["sigma", *protocol]
    assert keys["e6"][:6] == ["models", "depths", "seeds", "episodes", "horizons", "n_windows"]
    full = to_jsonable(settings.E1["full"])
    assert (full["depth"], full["seeds"], full["episodes"], full["n_windows"]) == (
        4,
        list(range(10)),
        30,
        1000,
    )


def test_e6_config_must_end_its_depth_sweep_at_the_protocol_depth():
    with pytest.raises(ValueError, match="depths must end at the protocol's depth 4"):
        dataclasses.replace(settings.E6["full"], depths=(1, 2))
