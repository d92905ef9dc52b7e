"""Every group that trains sends its trainings through one executor: the group's Hydra
launcher (``GroupContext.launcher``), by ``gridplan.training.runs.train_all``, as a training
sweep does. Each trainer is stopped at its call (nothing trains): the test reads what was
asked of it."""

from __future__ import annotations

import pytest
import torch

from gridplan.experiments import e8, e9, learned_runs
from gridplan.experiments.e3 import UNIFORM_20K
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import load_settings
from gridplan.training import runs
from gridplan.training.dispatch import Launcher


class _Asked(Exception):
    pass


@pytest.fixture
def asked(monkeypatch):
    calls = []

    def train_all(cfgs, progress=True, record_dir=None, records=None, launcher=None):
        calls.append({"cfgs": cfgs, "launcher": launcher, "record_dir": record_dir})
        raise _Asked

    def train(*args, **kwargs):
        raise AssertionError("a group trained a run outside its launcher (runs.train)")

    monkeypatch.setattr(runs, "train_all", train_all)
    monkeypatch.setattr(runs, "train", train)
    return calls


def _ctx(tmp_path, group: str) -> GroupContext:
    settings = load_settings("tiny")
    return GroupContext(
        group,
        "tiny",
        getattr(settings, group),
        tmp_path / group,
        tmp_path,
        torch.device("cpu"),
        progress=False,
        launcher=Launcher("joblib", 2),
    )


def _train(group: str, ctx: GroupContext, settings):
    if group == "e8":
        return e8.train_learned(ctx, ctx.config)
    if group in ("e9", "e11"):
        return e9.train_zoo(ctx, ctx.config)
    row = next(r for r in settings.e3.rows if r.key == UNIFORM_20K)
    return learned_runs.train_run(ctx, settings.e3, row, 0)


@pytest.mark.parametrize("group", ["e8", "e9", "e11", "e4"])
def test_a_groups_trainings_go_to_its_launcher(tmp_path, asked, group):
    threads = torch.get_num_threads()
    ctx = _ctx(tmp_path, group if group != "e4" else "e3")
    try:
        with pytest.raises(_Asked):
            _train(group, ctx, load_settings("tiny"))
    finally:
        torch.set_num_threads(threads)
    [call] = asked
    assert call["launcher"] is ctx.launcher
    assert call["cfgs"] and str(call["record_dir"]).startswith(str(ctx.out))
    if group == "e4":  # one run alone, as runs.train trains it
        assert [c.train.vectorize for c in call["cfgs"]] == [False]
    if group in ("e9", "e11"):  # no dashboard images or per-epoch window scores (not training)
        trainer = {(c.trainer.figures_every_n_epochs, c.trainer.metrics_every_n_epochs)
                   for c in call["cfgs"]}  # fmt: skip
        assert trainer == {(0, 0)}
    if group == "e11":  # every (family, observation) of the zoo, as python -m train names them
        pairs = [(c.model.name, c.obs.name) for c in call["cfgs"]]
        configs = e9.configurations(ctx.config)
        assert pairs == [(f, o) for f, o, _ in configs for _ in ctx.config.train_seeds]
