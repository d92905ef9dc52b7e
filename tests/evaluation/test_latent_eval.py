"""Latent models through ``python -m eval``: a latent plug-in's report carries E_repr, E_pred
and E_excess beside success (schema-valid, with its card); broken latent plug-ins end in a
clear error and nothing is written."""

from __future__ import annotations

import json
import re

import pytest
from helpers_schema import validate_file

from eval.cli import main

TINY = [
    "--ladder-sizes", "tiny", "--depth", "2", "--seeds", "1", "--episodes", "4",
    "--eval-windows", "16", "--horizon", "4", "--no-progress",
]  # fmt: skip

PLUGINS = """
import torch
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel


def state(task):
    return StateLatentModel(task.world)


class NaNLatent(PersistenceLatentModel):
    def predict_latent(self, z, action, generator):
        return torch.full_like(z, float("nan"))


def nan(task):
    return NaNLatent(task.world)


class ConstantReward(StateLatentModel):
    def reward(self, z, action, z_next):
        return torch.ones(z.shape[0])


def constant_reward(task):
    return ConstantReward(task.world)


class WideLatent(PersistenceLatentModel):
    def encode(self, obs):
        return torch.zeros(obs.shape[0], 3)


def wide(task):
    return WideLatent(task.world)
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "latent_plugins.py"
    path.write_text(PLUGINS)
    return path


@pytest.mark.slow
def test_a_latent_plugin_report_carries_the_protocol_beside_success(plugins, capsys):
    out = plugins.parent / "state.json"
    assert main(["--model", f"{plugins}:state", "--json", str(out), "--card", *TINY]) == 0
    printed = capsys.readouterr().out
    assert "latent model: frozen-decoder protocol" in printed
    assert "\n  own/E_excess " in printed and "\n  action_consistency/consistency " in printed
    report = json.loads(out.read_text())
    assert validate_file(out) == "eval.schema.json"
    assert report["success"]["mean"] == 1.0
    assert report["E_excess"] == report["E_pred"] - report["E_repr"]
    own = report["latent"]["own"]
    assert own["E_repr"] == 0.0 and own["DRPE_excess"] == 0.0
    # The perfect latent model is its own floor: the same transitions and draws.
    floor = report["latent"]["floor"]
    assert {k: own[k] for k in floor} == floor and floor["E_excess"] > 0.2
    assert report["latent_floor"] == {k: floor[k] for k in ("E_repr", "E_pred", "E_excess")}
    assert "\n  latent_floor/E_excess " in printed
    assert report["latent"]["planning"]["leaf_score"] == "decoder"
    assert report["ladder"]["L4"]["decision_agreement"]["mean"] == 1.0
    card = (plugins.parent / "state.card.md").read_text()
    assert "**latent model: frozen-decoder protocol" in card


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "nan",
            r"latent_plugins.nan.predict_latent \(from latent_plugins.py\) holds non-finite "
            r"values",
        ),
        (
            "wide",
            r"latent_plugins.wide.encode \(from latent_plugins.py\) must have shape \(8, 12\) "
            r"\(rows, latent_dim\), got \(8, 3\) \(called with obs \(8, 12\) float32\)",
        ),
    ],
)
def test_a_broken_latent_plugin_is_a_clear_error_and_nothing_is_written(
    plugins, capsys, factory, message
):
    out = plugins.parent / "broken.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", f"{plugins}:{factory}", "--json", str(out), *TINY])
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.slow
def test_the_leaf_score_is_a_recorded_choice_and_refused_where_it_cannot_apply(plugins, capsys):
    decoded, heads = (plugins.parent / f"{n}.json" for n in ("decoder", "heads"))
    target = f"{plugins}:constant_reward"
    assert main(["--model", target, "--json", str(decoded), "--levels", "success", *TINY]) == 0
    argv = ["--model", target, "--json", str(heads), "--levels", "success", *TINY]
    assert main([*argv, "--leaf-score", "heads"]) == 0
    by_decoder, by_heads = (json.loads(f.read_text()) for f in (decoded, heads))
    assert "leaf_score" not in by_decoder["spec"]["planner"]  # the default keeps old hashes
    assert by_heads["spec"]["planner"]["leaf_score"] == "heads"
    assert by_heads["latent"]["planning"]["reward"] == "model reward head"
    assert by_heads["spec_hash"] != by_decoder["spec_hash"]
    # A reward of 1 for every step: the heads leave the goal unwanted, the decoder does not.
    assert by_decoder["success"]["mean"] == 1.0 > by_heads["success"]["mean"]
    capsys.readouterr()
    for model, message in (
        ("oracle", "oracle is a state model, whose leaves are scored with the true reward"),
        (f"{plugins}:state", "has no reward"),
    ):
        out = plugins.parent / "refused.json"
        with pytest.raises(SystemExit) as exit_info:
            main(["--model", model, "--json", str(out), "--leaf-score", "heads", *TINY])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
        assert not out.exists()
