"""The evaluation spec (gridplan.evaluation.spec): the paper's protocols as files, the profiles,
tracks and suites, the content hash, validation, and one spec behind every entry point."""

from __future__ import annotations

import json

import pytest

import gridplan
from eval.cli import main as eval_main
from gridplan.evaluation.spec import (
    CONTROLLED,
    LEARNED,
    SPEC_ROOT,
    EvalSpec,
    PlannerSpec,
    load_spec,
    load_suite,
    load_track,
    resolve_spec,
    suite_names,
    track_names,
)
from gridplan.experiments.profiles import PROFILES, profile
from gridplan.models.noise import NoiseModel, OracleModel

#: One closed loop, no windows beyond a few: the depth a spec names is what is played.
SMALL = {"seeds": (0,), "episodes": 2, "n_windows": 16, "levels": ("success",)}


def test_the_paper_protocols_are_the_files_of_its_tables():
    # Paper §5.1 (Table 2): depth 4, 10 seeds x 30 episodes, 1000 held-out H = 10 windows.
    assert (CONTROLLED.depth, CONTROLLED.seeds, CONTROLLED.episodes) == (4, tuple(range(10)), 30)
    assert (CONTROLLED.n_windows, CONTROLLED.horizon, CONTROLLED.n_episodes) == (1000, 10, 300)
    # Paper §5.4 (Table 3): depth 2, 5 training seeds x 40 episodes, the same windows.
    assert (LEARNED.depth, LEARNED.seeds, LEARNED.episodes) == (2, tuple(range(5)), 40)
    assert (LEARNED.n_windows, LEARNED.horizon, LEARNED.n_episodes) == (1000, 10, 200)
    assert (CONTROLLED.name, LEARNED.name) == ("controlled", "learned")
    assert (SPEC_ROOT / "protocols" / "controlled.yaml").is_file()
    # The dataclass's defaults are the controlled file's values (the file states them).
    assert EvalSpec().content_hash() == CONTROLLED.replace(levels=None).content_hash()


def test_profiles_select_the_protocol_files():
    assert list(PROFILES) == ["full", "quick", "tiny"]
    full, quick, tiny = (PROFILES[n] for n in PROFILES)
    assert (full.controlled, full.learned, full.n_resamples) == (CONTROLLED, LEARNED, 2000)
    loop = ("depth", "seeds", "episodes", "n_windows")
    assert [getattr(quick.controlled, k) for k in loop] == [4, (0, 1), 10, 500]
    assert [getattr(quick.learned, k) for k in loop] == [2, (0, 1), 20, 500]
    assert [getattr(tiny.controlled, k) for k in loop] == [1, (0, 1), 2, 32]
    assert [getattr(tiny.learned, k) for k in loop] == [2, (0,), 2, 32]
    assert tiny.n_resamples == 200 and tiny.controlled.n_resamples == 200
    assert quick.controlled.name == "quick-controlled"
    assert profile("quick") is PROFILES["quick"]
    with pytest.raises(ValueError, match="unknown profile 'fast'; valid profiles: full, quick"):
        profile("fast")


def test_the_content_hash_follows_the_content_not_the_labels():
    relabelled = CONTROLLED.replace(name="mine", version=7, description="another name")
    assert relabelled.content_hash() == CONTROLLED.content_hash()
    assert len(CONTROLLED.content_hash()) == 64
    for change in ({"episodes": 31}, {"planner": {"ties": "random"}}, {"task": "B"},
                   {"levels": ("L1",)}, {"planner": {"name": "cem"}}):
        assert CONTROLLED.replace(**change).content_hash() != CONTROLLED.content_hash(), change
    # Equal specs are equal objects with equal hashes (a frozen, hashable dataclass).
    assert hash(CONTROLLED.replace(episodes=3)) == hash(CONTROLLED.replace(episodes=3))
    assert EvalSpec.from_dict(CONTROLLED.to_dict()) == CONTROLLED
    assert json.loads(json.dumps(LEARNED.to_dict())) == LEARNED.to_dict()


def test_replace_validates_and_merges_the_planner():
    spec = CONTROLLED.replace(seeds=[3, 4], episodes=2, planner={"name": "cem"})
    assert spec.seeds == (3, 4) and spec.n_episodes == 4
    assert spec.planner == PlannerSpec("cem", ties="first", tree="independent")
    again = spec.replace(planner={"ties": "random"})
    assert (again.planner.name, again.planner.ties) == ("cem", "random")
    assert PlannerSpec("cem", {"candidates": "32"}).settings == {"candidates": 32}
    assert CONTROLLED.seeds == tuple(range(10))  # the preset is untouched


def test_a_deterministic_model_plans_with_the_planners_default_tree():
    # No draws, so the tree's law does not apply: the planner's default (shared prefixes,
    # bit-identical scores at fewer predictions) serves it, whatever the spec's tree.
    class Deterministic:
        deterministic = True

    for tree in ("independent", "shared-prefix"):
        assert PlannerSpec(tree=tree).tree_for(Deterministic()) is None
        assert PlannerSpec(tree=tree).tree_for(NoiseModel.controlled(0.3, 0.1)) == tree


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"seeds": ()}, "seeds must be a non-empty list of ints"),
        ({"seeds": (0, True)}, "seeds must be a non-empty list of ints"),
        ({"episodes": 1.5}, "episodes must be an integer >= 1"),
        ({"depth": 0}, "depth must be an integer >= 1, got 0"),
        ({"task": "C"}, "unknown task"),
        ({"obs": "rgb"}, "obs must be one of"),
        ({"levels": ("L9",)}, r"levels: unknown \['L9'\]"),
        ({"planner": {"ties": "any"}}, "planner.ties must be one of"),
        ({"planner": {"name": "dfs"}}, "dfs"),
        ({"planner": {"name": "cem", "settings": {"candidate": 3}}}, "candidate"),
        ({"depths": 3}, r"unknown spec keys \['depths'\]; valid: depth, seeds"),
        ({"planner": {"tie": "first"}}, r"unknown planner keys \['tie'\]"),
    ],
)
def test_bad_specs_are_errors_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        CONTROLLED.replace(**changes)


def test_every_shipped_track_and_suite_loads(tmp_path):
    assert {"paper", "quick", "scale", "pixels", "planners"} <= set(suite_names())
    for name in suite_names():
        suite = load_suite(name)
        assert suite.tracks and all(t.name in track_names() for t in suite.tracks)
    paper = load_suite("paper")
    assert [t.name for t in paper.tracks] == ["paper-a", "paper-b", "paper-learned-a"]
    a, b, learned = paper.tracks
    assert (a.task, a.depth, a.n_episodes, b.task) == ("A", 4, 300, "B")
    assert (learned.depth, learned.n_episodes) == (2, 200)
    assert load_track("scale-g16-k8").world == "g16-k8"
    assert load_track("obs-pixels").obs == "pixels"
    assert load_track("planner-mcts").planner.settings == {"budget": 64}
    # Tracks of different content never share a hash.
    hashes = [load_track(t).content_hash() for t in track_names()]
    assert len(set(hashes)) == len(hashes)


def test_bad_names_and_files_list_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown track 'paper-c'; valid tracks: obs-grid"):
        load_track("paper-c")
    with pytest.raises(ValueError, match="unknown suite 'fast'; valid suites: paper, pixels"):
        load_suite("fast")
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: controlled\nepisode: 3\n")
    with pytest.raises(ValueError, match=r"bad.yaml: unknown keys \['episode'\]; valid keys: "
                                         r"depth, seeds, episodes"):
        load_spec(bad)
    bad.write_text("base: fast\n")
    with pytest.raises(ValueError, match="unknown base 'fast'; valid protocols: controlled"):
        load_spec(bad)
    bad.write_text("base: learned\nplanner: {name: cem, settings: {candidates: 0}}\n")
    with pytest.raises(ValueError, match="bad.yaml: .*candidates"):
        load_spec(bad)
    good = tmp_path / "mine.yaml"
    good.write_text("base: learned\ntask: B\nplanner: {ties: random}\n")
    mine = load_spec(good)
    assert (mine.name, mine.task, mine.depth, mine.planner.ties) == ("mine", "B", 2, "random")
    assert mine.planner.name == "search"


def test_the_depth_a_spec_names_is_played():
    # evaluate(model, "learned") once played depth 4 with the learned protocol's seeds.
    oracle = OracleModel()
    assert gridplan.evaluate(oracle, "learned", **SMALL).depth == 2
    assert gridplan.evaluate(oracle, "controlled", **SMALL).depth == 4
    assert gridplan.evaluate(oracle, "tiny-controlled", **SMALL).depth == 1
    report = gridplan.evaluate(oracle, LEARNED.replace(depth=3, **SMALL)).to_dict()
    assert report["depth"] == 3 and report["protocol"]["depth"] == 3


def test_without_a_spec_every_level_of_the_controlled_protocol_is_measured():
    sizes = {"branch_states": 16, "anchor_starts": 8, "anchor_rollouts": 2,
             "probe_questions": 8, "xgap_states": 16, "n_resamples": 50}
    report = gridplan.evaluate(OracleModel(), seeds=(0,), episodes=2, n_windows=16, **sizes)
    assert report.levels == ("L1", "L4", "L5", "L6", "L7", "probe")
    assert (report.depth, report.protocol["name"]) == (4, "controlled")
    assert resolve_spec(None).levels is None and CONTROLLED.levels == ("L1", "success")


def test_the_report_records_the_spec_whole_and_its_hash():
    spec = LEARNED.replace(task="B", planner={"ties": "random"}, **SMALL)
    report = gridplan.evaluate(NoiseModel.controlled(0.3, 0.1), spec).to_dict()
    # The world and observation kind the spec leaves to the model are recorded as measured.
    measured = spec.replace(world="default", obs="state")
    assert report["spec_hash"] == measured.content_hash() != spec.content_hash()
    assert EvalSpec.from_dict(report["protocol"]) == measured
    assert (report["ties"], report["task"]) == ("random", "B")


#: `python -m eval` on main before the spec (same draws): the spec files reproduce them.
BEFORE = {
    # --model noise --sigma-r 0.35 --sigma-i 0.1 --seeds 2 --episodes 6 --eval-windows 64
    "noise": {"success": 4 / 12, "E_tot": 0.08677811175584793,
              "DRPE": {"binary": 0.07617448270320892, "graded": 0.09238264709711075}},
    # --model oracle --task B --depth 2 --seeds 1 --episodes 8 --eval-windows 32 --ties random
    "oracle-b": {"success": 1.0, "E_tot": 0.046805910766124725},
}


def test_the_spec_files_reproduce_the_command_line_of_before(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flags = ["--no-progress", "--threads", "1"]
    assert eval_main(["--model", "noise", "--sigma-r", "0.35", "--sigma-i", "0.1", "--seeds", "2",
                      "--episodes", "6", "--eval-windows", "64", "--json", "cli.json", *flags]) == 0
    (tmp_path / "noise.yaml").write_text(
        "base: controlled\nseeds: [0, 1]\nepisodes: 6\nn_windows: 64\nlevels: [L1, success]\n"
    )
    assert eval_main(["--model", "noise", "--sigma-r", "0.35", "--sigma-i", "0.1", "--spec",
                      "noise.yaml", "--json", "file.json", *flags]) == 0
    cli, file = (json.loads((tmp_path / f).read_text()) for f in ("cli.json", "file.json"))
    for report in (cli, file):
        assert report["success"]["mean"] == BEFORE["noise"]["success"]
        assert report["E_tot"] == BEFORE["noise"]["E_tot"]
        assert report["DRPE"] == BEFORE["noise"]["DRPE"]
    assert cli["spec_hash"] == file["spec_hash"]
    assert file["spec"]["name"] == "noise" and cli["spec"]["name"] == "controlled"
    # The library gives the same numbers under the same spec.
    spec = load_spec(tmp_path / "noise.yaml")
    lib = gridplan.evaluate(NoiseModel.controlled(0.35, 0.1), spec).to_dict()
    assert (lib["success"], lib["E_tot"], lib["DRPE"]) == (file["success"], file["E_tot"],
                                                            file["DRPE"])
    assert lib["spec_hash"] == file["spec_hash"]
    assert eval_main(["--model", "oracle", "--task", "B", "--depth", "2", "--seeds", "1",
                      "--episodes", "8", "--eval-windows", "32", "--ties", "random", "--json",
                      "b.json", *flags]) == 0
    b = json.loads((tmp_path / "b.json").read_text())
    assert (b["success"]["mean"], b["E_tot"], b["ties"]) == (1.0, BEFORE["oracle-b"]["E_tot"],
                                                             "random")


def test_a_track_on_the_command_line_is_its_spec_and_flags_override_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert eval_main(["--model", "oracle", "--track", "quick-a", "--episodes", "2", "--seeds",
                      "1", "--no-progress", "--json", "t.json"]) == 0
    report = json.loads((tmp_path / "t.json").read_text())
    track = load_track("quick-a").replace(episodes=2, seeds=(0,))
    assert report["spec_hash"] == track.content_hash()
    assert report["protocol"]["name"] == "quick-a" and report["levels"] == ["L1", "L4", "success"]
    with pytest.raises(SystemExit) as err:
        eval_main(["--model", "oracle", "--track", "paper-z"])
    assert err.value.code == 2
