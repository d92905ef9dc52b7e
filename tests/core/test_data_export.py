"""``python -m gridplan.data export``: the trainer's datasets as .npz, with their fingerprint."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from helpers_learned import tiny_config
from omegaconf import OmegaConf

from gridplan.core import render
from gridplan.core.constants import RIGHT
from gridplan.core.env import transition
from gridplan.core.tasks import TASK_A
from gridplan.data.__main__ import main
from gridplan.data.datasets import TENSOR_FIELDS, TransitionDataset, collect
from gridplan.data.export import (
    EXPORT_SCHEMA,
    SEQUENCE_SCHEMA,
    VAL_FRACTION,
    export_sequences,
    load_export,
    load_sequences,
    sequence_rows,
    sidecar,
    transitions_of,
)
from gridplan.training.config import DataConfig
from gridplan.training.module import TransitionDataModule


def _trainer_data(tmp_path, *overrides):
    cfg = OmegaConf.to_container(tiny_config(tmp_path, *overrides), resolve=True)
    module = TransitionDataModule(cfg["data"])
    module.setup()
    return module


def test_exported_arrays_are_the_trainers_dataset_and_its_fingerprint(tmp_path, capsys):
    module = _trainer_data(tmp_path, "data.policy=random", "seed=3")
    out = tmp_path / "export"
    assert (
        main(["export", "--policy", "random", "--budget", "600", "--seed", "3", "--out", str(out)])
        == 0
    )
    path = out / "A-random-600-seed3.npz"
    fingerprint = module.summary()["fingerprint"]
    assert capsys.readouterr().out.splitlines()[-1] == f"exported: {path} {fingerprint}"
    with np.load(path) as npz:
        assert sorted(npz.files) == sorted([*TENSOR_FIELDS, "val", "metadata"])
        for name in TENSOR_FIELDS:
            np.testing.assert_array_equal(npz[name], getattr(module.dataset, name).numpy())
        assert npz["states"].dtype == np.float32 and npz["actions"].dtype == np.int64
        val = npz["val"]
        record = json.loads(str(npz["metadata"]))
    # The val mask picks out exactly the trainer's validation split, rows in order.
    np.testing.assert_array_equal(
        npz_rows := module.dataset.states.numpy()[val], module.val_set.states.numpy()
    )
    assert len(npz_rows) == len(module.val_set) and (~val).sum() == len(module.train_set)
    assert record == json.loads(sidecar(path).read_text())
    assert (record["schema"], record["fingerprint"]) == (EXPORT_SCHEMA, fingerprint)
    assert record["meta"] == module.dataset.meta
    assert record["event_counts"] == module.dataset.event_counts()
    assert record["dims"][:2] == ["agent_x", "agent_y"] and len(record["dims"]) == 12
    data, mask, _ = load_export(path)
    assert data.fingerprint() == fingerprint
    np.testing.assert_array_equal(mask, val)


def test_the_default_val_fraction_is_the_trainers():
    assert VAL_FRACTION == DataConfig.__dataclass_fields__["val_fraction"].default


def test_every_combination_is_written_and_nothing_is_replaced_without_force(tmp_path, capsys):
    args = [
        "export",
        "--policy",
        "random",
        "expert",
        "--budget",
        "300",
        "--seed",
        "0",
        "1",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    names = sorted(p.name for p in tmp_path.glob("*.npz"))
    assert names == [f"A-{p}-300-seed{s}.npz" for p in ("expert", "random") for s in (0, 1)]
    before = load_export(tmp_path / "A-random-300-seed1.npz")
    (tmp_path / "A-random-300-seed1.npz").write_bytes(b"mine")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "A-random-300-seed1.npz" in err and "already exist(s); pass --force" in err
    assert (tmp_path / "A-random-300-seed1.npz").read_bytes() == b"mine"
    assert main([*args, "--force"]) == 0
    after = load_export(tmp_path / "A-random-300-seed1.npz")  # the same data again
    assert after[2] == before[2] and after[0].fingerprint() == before[0].fingerprint()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "4x"], "budget must be a transition count"),
        (["--val-fraction", "1.5"], "--val-fraction 1.5: val_fraction must lie in"),
        (["--seed", "0", str(2**32)], f"--seed {2**32}: a data seed must be an integer in"),
        (["--world", "g4-k1"], "--world g4-k1: world size must be an int >= 5"),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(tmp_path, capsys, args, message):
    assert main(["export", "--budget", "300", *args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_budget_too_small_is_named_with_the_valid_ones_before_anything_is_written(
    tmp_path, capsys
):
    # The 4k dataset is valid, but nothing is collected or written while 1 is bad.
    assert main(["export", "--budget", "4k", "1", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: --budget 1: an export needs at least 2 transitions (2 episodes for the "
        "trainer's validation split), got 1; valid budgets are counts >= 2, e.g. 4k 12k 20k "
        "or 5000\n"
    )
    assert not list(tmp_path.iterdir())


def test_every_bad_argument_is_named_at_once(tmp_path, capsys):
    args = ["export", "--budget", "1", "3x", "300", "--seed", "-1", "0", "--out", str(tmp_path)]
    assert main(args) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1] for line in lines] == [" --budget 1", " --budget 3x", " --seed -1"]
    assert not list(tmp_path.iterdir())


def test_export_dataset_refuses_a_budget_below_two_transitions_before_collecting():
    from gridplan.data.export import export_dataset

    with pytest.raises(ValueError, match="at least 2 transitions"):
        export_dataset("never.npz", "random", 1, 0, TASK_A)


def test_an_out_that_is_a_file_is_refused_and_nothing_is_written(tmp_path, capsys):
    target = tmp_path / "data"
    target.write_text("mine")
    assert main(["export", "--budget", "300", "--out", str(target)]) == 2
    assert capsys.readouterr().err == f"error: --out {target} is a file; give a folder\n"
    assert target.read_text() == "mine" and sorted(tmp_path.iterdir()) == [target]
    assert main(["export", "--budget", "300", "--out", str(target / "sub")]) == 2
    assert capsys.readouterr().err == (
        f"error: --out {target / 'sub'}: {target} is a file; give a folder\n"
    )
    assert sorted(tmp_path.iterdir()) == [target]


def test_an_existing_metadata_record_stops_every_file_without_force(tmp_path, capsys):
    # Only the second file's .json exists; the first file, new, is not written either.
    (tmp_path / "A-random-300-seed1.json").write_text("mine")
    args = [
        "export",
        "--policy",
        "random",
        "--budget",
        "300",
        "--seed",
        "0",
        "1",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'A-random-300-seed1.json'} already exist(s); pass --force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A-random-300-seed1.json"]


def test_an_existing_folder_in_a_files_place_is_refused_even_with_force(tmp_path, capsys):
    (tmp_path / "A-random-300-seed0.npz").mkdir()
    args = ["export", "--policy", "random", "--budget", "300", "--out", str(tmp_path), "--force"]
    assert main(args) == 2
    assert "A-random-300-seed0.npz exist(s) and not as a file" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["A-random-300-seed0.npz"]


def test_the_same_dataset_named_twice_is_written_once(tmp_path, capsys):
    args = ["export", "--policy", "random", "--budget", "300", "0300", "--out", str(tmp_path)]
    assert main(args) == 0
    exported = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("exported:")]
    assert len(exported) == 1 and exported[0].startswith(f"exported: {tmp_path}/A-random-300-")


def test_an_altered_export_is_refused(tmp_path):
    assert main(["export", "--policy", "random", "--budget", "300", "--out", str(tmp_path)]) == 0
    path = tmp_path / "A-random-300-seed0.npz"
    data, val, record = load_export(path)
    actions = data.actions.clone()
    actions[0] = (actions[0] + 1) % 4
    arrays = {k: v.numpy() for k, v in dataclasses.replace(data, actions=actions).tensors().items()}
    with open(path, "wb") as out:
        np.savez(out, **arrays, val=val, metadata=np.array(json.dumps(record)))
    with pytest.raises(ValueError, match="fingerprint .* is not the recorded"):
        load_export(path)


def test_a_path_without_npz_is_refused(tmp_path):
    from gridplan.data.export import export_dataset

    with pytest.raises(ValueError, match="must end in .npz"):
        export_dataset(tmp_path / "x.pt", "random", 100, 0, TASK_A)


# sequences: episodes of observations for multi-step training -----------------------------------


def _hand_episodes(make_state) -> TransitionDataset:
    """Two hand-played episodes of the true env: RIGHT, RIGHT from (1, 1) (cut after two
    steps), then RIGHT onto the goal from (6, 4) with the key and the door open."""
    gen = torch.Generator().manual_seed(0)
    rows = {name: [] for name in TENSOR_FIELDS}
    for episode, (start, actions) in enumerate(
        [(make_state(agent=(1, 1), key=(1, 3)), [RIGHT, RIGHT]),
         (make_state(agent=(6, 4), carrying=True, door_open=True), [RIGHT])]
    ):
        state = start
        for t, action in enumerate(actions):
            nxt, reward, terminated, info = transition(state, torch.tensor([action]), gen, TASK_A)
            logged = {"states": state, "actions": torch.tensor([action]), "next_states": nxt,
                      "rewards": reward.float(), "terminated": terminated,
                      "pickup": info["pickup"], "door_opened": info["door_opened"],
                      "goal": info["goal"], "episode": torch.tensor([episode]),
                      "t": torch.tensor([t])}
            for name, value in logged.items():
                rows[name].append(value)
            state = nxt
    return TransitionDataset(**{k: torch.cat(v) for k, v in rows.items()}, meta={})


def test_sequence_rows_of_a_hand_played_episode_are_aligned(make_state):
    data = _hand_episodes(make_state)
    rows = sequence_rows(data)
    # 3 transitions in 2 episodes: 5 rows, each episode closed by its last state.
    assert rows["episode"].tolist() == [0, 0, 0, 1, 1]
    assert rows["step"].tolist() == [0, 1, 2, 0, 1]
    assert rows["action"].tolist() == [RIGHT, RIGHT, -1, RIGHT, -1]
    assert rows["reward"].tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert rows["goal"].tolist() == [False, False, False, True, False]
    assert rows["is_first"].tolist() == [True, False, False, True, False]
    assert rows["is_last"].tolist() == [False, False, True, False, True]
    assert rows["is_terminal"].tolist() == [False, False, False, False, True]
    # By hand: RIGHT moves the agent one cell east (x / 7 in the normalized state).
    cells = rows["state"][:, :2] * 7
    assert torch.equal(cells.round(), cells.round(decimals=4))
    assert cells.round().tolist() == [[1, 1], [2, 1], [3, 1], [6, 4], [7, 4]]
    # state[k + 1] is the env's step of (state[k], action[k]): the logged next state.
    step = ~rows["is_last"]
    torch.testing.assert_close(rows["state"][torch.roll(step, 1)], data.next_states, rtol=0, atol=0)
    assert transitions_of(rows, {}).fingerprint() == data.fingerprint()


def test_sequences_refuse_transitions_that_do_not_chain(make_state):
    data = _hand_episodes(make_state)
    repeated = dataclasses.replace(data, states=data.states[[0, 0, 2]])
    with pytest.raises(ValueError, match=r"transition 1 \(episode 0, step 1\) does not follow"):
        sequence_rows(repeated)
    skipped = dataclasses.replace(data, t=torch.tensor([0, 2, 0]))
    with pytest.raises(ValueError, match=r"transition 1 \(episode 0, step 2\) does not follow"):
        sequence_rows(skipped)


def test_exported_pixel_sequences_are_the_renderings_of_the_env_steps(tmp_path, capsys):
    out = tmp_path / "export"
    assert main(["export", "--budget", "300", "--seed", "1", "--sequences", "pixels",
                 "--out", str(out)]) == 0
    path = out / "A-balanced-300-seed1-seq-pixels.npz"
    data = collect("balanced", 300, 1, TASK_A)
    assert capsys.readouterr().out.splitlines()[-1] == f"exported: {path} {data.fingerprint()}"
    arrays, record = load_sequences(path)
    episodes = record["event_counts"]["episodes"]
    assert record["rows"] == 300 + episodes == len(arrays["obs"])
    assert record["obs_shape"] == [3, 32, 32] and arrays["obs"].dtype == np.uint8
    assert record["schema"] == SEQUENCE_SCHEMA and set(record["fields"]) == set(arrays)
    state = torch.from_numpy(arrays["state"])
    # obs[k] is the rendering of state[k], on every row.
    np.testing.assert_array_equal(arrays["obs"], render.observe(state, TASK_A.world, "pixels"))
    # state[k + 1] = env.step(state[k], action[k]) within an episode: the decided dims
    # (agent, key, flags) and the reward and termination are the env's.
    k = np.flatnonzero(~arrays["is_last"])
    nxt, reward, terminated, _ = transition(state[k], torch.from_numpy(arrays["action"][k]),
                                            torch.Generator().manual_seed(0), TASK_A)
    np.testing.assert_array_equal(arrays["state"][k + 1][:, :8], nxt[:, :8].numpy())
    np.testing.assert_array_equal(arrays["reward"][k], reward.numpy())
    np.testing.assert_array_equal(arrays["is_terminal"][k + 1], terminated.numpy())
    assert (arrays["action"][arrays["is_last"]] == -1).all()
    assert arrays["is_first"].sum() == arrays["is_last"].sum() == episodes


def test_an_altered_sequence_file_is_refused(tmp_path):
    path = tmp_path / "seq.npz"
    export_sequences(path, "random", 40, 0, TASK_A, "state")
    with np.load(path) as npz:
        arrays = dict(npz)
    arrays["action"] = np.where(arrays["action"] >= 0, (arrays["action"] + 1) % 4, -1)
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="the rows' fingerprint .* is not the recorded"):
        load_sequences(path)
