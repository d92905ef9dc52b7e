"""Logged datasets and evaluation windows (gridplan.data.datasets)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    CARRYING,
    DOOR_OPEN,
    KEY_X,
    KEY_Y,
    STATE_LAYOUT_VERSION,
)
from gridplan.core.env import relevant_step, to_cell, to_flag
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.world import DEFAULT
from gridplan.data.datasets import (
    BALANCED_EPSILONS,
    DATASET_SCHEMA,
    TransitionDataset,
    collect,
    eval_windows,
    parse_budget,
)

HORIZON = TASK_A.horizon


@pytest.fixture(scope="module")
def balanced_12k() -> TransitionDataset:
    return collect("balanced", 12_000, seed=0)


@pytest.fixture(scope="module")
def random_12k() -> TransitionDataset:
    return collect("random", 12_000, seed=0)


@pytest.fixture(scope="module")
def windows():
    return eval_windows(300, horizon=10)


def relevant_of(states: torch.Tensor):
    """Integer cells and flags of ``(N, 12)`` states for ``relevant_step``."""
    return (
        to_cell(states[:, AGENT_X : AGENT_Y + 1], DEFAULT),
        to_cell(states[:, KEY_X : KEY_Y + 1], DEFAULT),
        to_flag(states[:, CARRYING]),
        to_flag(states[:, DOOR_OPEN]),
    )


@pytest.mark.parametrize(("text", "value"), [("12k", 12_000), ("4K", 4_000), ("20000", 20_000)])
def test_parse_budget_reads_thousands_and_plain_counts(text, value):
    assert parse_budget(text) == value
    assert parse_budget(value) == value


@pytest.mark.parametrize("bad", ["0", "-3k", "12m", "1.5k", "", 0, -1, 2.0, True])
def test_parse_budget_rejects_anything_but_a_positive_count(bad):
    with pytest.raises(ValueError, match="budget"):
        parse_budget(bad)


def test_collect_logs_exactly_the_budget_and_stores_its_config(balanced_12k):
    assert len(balanced_12k) == 12_000
    meta = balanced_12k.meta
    assert meta["policy"] == "balanced"
    assert (meta["transitions"], meta["seed"], meta["task"]) == (12_000, 0, "A")
    assert meta["horizon"] == HORIZON
    assert meta["layout_version"] == STATE_LAYOUT_VERSION
    assert meta["epsilons"] == list(BALANCED_EPSILONS)
    assert len(collect("random", 7, seed=3)) == 7


def test_collect_is_reproducible_per_seed():
    a, b, c = (collect("balanced", 500, seed=s) for s in (1, 1, 2))
    assert a.fingerprint() == b.fingerprint()
    assert torch.equal(a.states, b.states)
    assert a.fingerprint() != c.fingerprint()


def test_balanced_data_sees_hundreds_of_pickups_and_door_openings(balanced_12k, random_12k):
    # Measured (seed 0): balanced 415 pickups / 353 door openings / 329 goals;
    # random 103 pickups / 11 door openings / 1 goal.
    bal, rnd = balanced_12k.event_counts(), random_12k.event_counts()
    assert bal["pickups"] >= 300 and bal["door_openings"] >= 300 and bal["goals"] >= 250
    assert rnd["pickups"] * 3 < bal["pickups"]
    assert rnd["door_openings"] * 10 < bal["door_openings"]
    assert bal["transitions"] == rnd["transitions"] == 12_000


def test_event_counts_match_the_flags(random_12k):
    counts = random_12k.event_counts()
    assert counts["pickups"] == int(random_12k.pickup.sum())
    assert counts["episodes"] == int(random_12k.episode.unique().numel())


def test_logged_transitions_chain_within_episodes_and_follow_the_true_dynamics(balanced_12k):
    d = balanced_12k
    same = d.episode[1:] == d.episode[:-1]
    assert torch.equal(d.t[1:][same], d.t[:-1][same] + 1)
    assert torch.equal(d.states[1:][same], d.next_states[:-1][same])
    assert (d.t[1:][~same] == 0).all()
    rel = relevant_step(*relevant_of(d.states), d.actions, DEFAULT)
    assert torch.equal(rel.pickup, d.pickup)
    assert torch.equal(rel.door_opened, d.door_opened)
    assert torch.equal(rel.carrying, to_flag(d.next_states[:, CARRYING]))


def test_episodes_end_at_termination_or_the_horizon(balanced_12k):
    d = balanced_12k
    assert int(d.t.max()) == HORIZON - 1
    last_of_episode = torch.ones(len(d), dtype=torch.bool)
    last_of_episode[:-1] = d.episode[1:] != d.episode[:-1]
    assert not (d.terminated & ~last_of_episode).any()
    assert torch.equal(d.rewards, d.goal.float())


@pytest.mark.parametrize("policy", ["greedy", "Random", ""])
def test_unknown_policy_is_rejected_with_the_valid_ones_listed(policy):
    with pytest.raises(ValueError, match="random, balanced"):
        collect(policy, 100, seed=0)


@pytest.mark.parametrize("n", [0, -5])
def test_an_empty_budget_is_rejected(n):
    with pytest.raises(ValueError, match="transitions"):
        collect("random", n, seed=0)


def test_task_b_collection_uses_the_task_b_values():
    d = collect("balanced", 3000, seed=0, task=TASK_B)
    assert d.meta["task"] == "B"
    assert d.event_counts()["goals"] > 50
    assert (d.rewards[d.terminated & ~d.goal] == -1).all()


def test_save_and_load_round_trip_keeps_every_byte(tmp_path, balanced_12k):
    path = balanced_12k.save(tmp_path / "sub" / "data.pt")
    loaded = TransitionDataset.load(path)
    assert loaded.fingerprint() == balanced_12k.fingerprint()
    assert loaded.meta == balanced_12k.meta


def test_save_refuses_to_overwrite_unless_asked(tmp_path):
    d = collect("random", 50, seed=0)
    path = d.save(tmp_path / "d.pt")
    with pytest.raises(FileExistsError):
        collect("random", 60, seed=1).save(path)
    assert len(TransitionDataset.load(path)) == 50
    collect("random", 60, seed=1).save(path, overwrite=True)
    assert len(TransitionDataset.load(path)) == 60


def _payload(d: TransitionDataset) -> dict:
    return {
        "schema": DATASET_SCHEMA,
        "tensors": dict(d.tensors()),
        "meta_json": json.dumps(d.meta),
    }


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda p: p.update(schema="someone.else/3"), "schema"),
        (lambda p: p.pop("schema"), "no schema tag"),
        (lambda p: p["tensors"].pop("pickup"), "missing keys"),
        (lambda p: p["tensors"].update(states=p["tensors"]["states"][:, :11]), "states"),
        (lambda p: p["tensors"].update(actions=p["tensors"]["actions"].float()), "actions"),
        (lambda p: p.update(meta_json='{"layout_version": 0}'), "layout version"),
        (lambda p: p["tensors"].update({k: v[:0] for k, v in p["tensors"].items()}), "empty"),
    ],
)
def test_loading_a_file_of_the_wrong_schema_names_the_problem(tmp_path, corrupt, message):
    payload = _payload(collect("random", 40, seed=0))
    corrupt(payload)
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=message):
        TransitionDataset.load(tmp_path / "bad.pt")


def test_loading_garbage_bytes_is_a_value_error(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"not a torch file at all")
    with pytest.raises(ValueError, match="not a readable gridplan dataset"):
        TransitionDataset.load(tmp_path / "junk.pt")
    with pytest.raises(FileNotFoundError):
        TransitionDataset.load(tmp_path / "missing.pt")


def test_split_by_episode_shares_no_episode_and_loses_no_row(balanced_12k):
    train, val = balanced_12k.split_by_episode(0.2, seed=0)
    assert len(train) + len(val) == len(balanced_12k)
    assert not set(train.episode.tolist()) & set(val.episode.tolist())
    n_ep = balanced_12k.event_counts()["episodes"]
    assert val.event_counts()["episodes"] == round(0.2 * n_ep)
    again, _ = balanced_12k.split_by_episode(0.2, seed=0)
    assert again.fingerprint() == train.fingerprint()
    assert (train.meta["split"], val.meta["split"]) == ("train", "val")


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1])
def test_split_rejects_fractions_outside_the_open_unit_interval(balanced_12k, fraction):
    with pytest.raises(ValueError, match="val_fraction"):
        balanced_12k.split_by_episode(fraction, seed=0)


def test_windows_have_the_documented_shapes(windows):
    assert windows.start.shape == (300, 12)
    assert windows.actions.shape == (300, 10) and windows.actions.dtype == torch.long
    assert windows.targets.shape == windows.prev.shape == (300, 10, 12)
    assert windows.pickup.shape == windows.door_opened.shape == (300, 10)
    assert windows.horizon == 10 and len(windows) == 300
    assert windows.check() is windows


def test_windows_are_consecutive_true_steps(windows):
    assert torch.equal(windows.prev[:, 0], windows.start)
    assert torch.equal(windows.prev[:, 1:], windows.targets[:, :-1])
    prev = windows.prev.reshape(-1, 12)
    rel = relevant_step(*relevant_of(prev), windows.actions.reshape(-1), DEFAULT)
    nxt = windows.targets.reshape(-1, 12)
    assert torch.equal(rel.agent, to_cell(nxt[:, AGENT_X : AGENT_Y + 1], DEFAULT))
    assert torch.equal(rel.pickup, windows.pickup.reshape(-1))
    assert torch.equal(rel.door_opened, windows.door_opened.reshape(-1))


def test_windows_never_run_past_an_episode_end(windows):
    agent = to_cell(windows.targets[..., AGENT_X : AGENT_Y + 1], DEFAULT)
    at_goal = (agent == torch.tensor(TASK_A.goal)).all(dim=-1)
    assert not at_goal[:, :-1].any()


def test_balanced_windows_contain_pickups_and_door_openings(windows):
    assert int(windows.pickup.sum()) > 50
    assert int(windows.door_opened.sum()) > 50


def test_windows_are_reproducible_and_seeded():
    a, b = eval_windows(20, horizon=5, seed=7), eval_windows(20, horizon=5, seed=7)
    c = eval_windows(20, horizon=5, seed=8)
    assert torch.equal(a.targets, b.targets) and torch.equal(a.actions, b.actions)
    assert not torch.equal(a.start, c.start)
    assert a.meta["seed"] == 7 and a.meta["horizon"] == 5


@pytest.mark.parametrize("horizon", [0, -1, HORIZON + 1])
def test_windows_reject_a_horizon_outside_one_to_sixty(horizon):
    with pytest.raises(ValueError, match="horizon H"):
        eval_windows(10, horizon=horizon)


def test_windows_reject_zero_windows():
    with pytest.raises(ValueError, match="n_windows"):
        eval_windows(0)


def test_a_shorter_task_horizon_truncates_collected_episodes_and_bounds_windows():
    brief = dataclasses.replace(TASK_A, name="brief", horizon=5)
    d = collect("random", 600, seed=0, task=brief)
    assert int(d.t.max()) == 4 and d.meta["horizon"] == 5 and d.meta["task"] == "brief"
    assert eval_windows(10, horizon=5, task=brief).targets.shape == (10, 5, 12)
    with pytest.raises(ValueError, match=r"horizon H must be an integer in 1\.\.5, got 6"):
        eval_windows(10, horizon=6, task=brief)


def test_long_windows_come_from_untruncated_random_episodes():
    w = eval_windows(30, horizon=HORIZON, policy="random")
    assert w.targets.shape == (30, HORIZON, 12)
    assert w.meta["policy"] == "random"
