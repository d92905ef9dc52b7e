"""MLP world model, its WorldModel wrapper and checkpoint loading (gridplan.models.learned)."""

from __future__ import annotations

import pickle

import pytest
import torch
from helpers_learned import module_checkpoint, probe_batch, tiny_module, zero_last_layer

from gridplan.core.constants import STATE_LAYOUT_VERSION
from gridplan.models import learned
from gridplan.models.contract import WorldModel
from gridplan.models.learned import LearnedWorldModel, MLPDynamics, load_world_model
from gridplan.planning.planner import Planner


def test_network_returns_one_prediction_per_member_and_row():
    net = MLPDynamics((16, 16), members=3)
    state, action = probe_batch(5)
    assert net(state, action).shape == (3, 5, 12)


def test_delta_model_with_zero_output_layer_predicts_no_change():
    net = zero_last_layer(MLPDynamics((16,), members=1))
    state, action = probe_batch(8)
    assert torch.equal(LearnedWorldModel(net).predict(state, action), state)


def test_absolute_model_with_zero_output_layer_predicts_its_bias():
    net = zero_last_layer(MLPDynamics((16,), predict_delta=False), bias=0.25)
    state, action = probe_batch(8)
    assert torch.equal(LearnedWorldModel(net).predict(state, action), torch.full((8, 12), 0.25))


def test_predictions_are_clamped_to_the_unit_interval():
    net = zero_last_layer(MLPDynamics((16,)), bias=3.0)
    state, action = probe_batch(8)
    assert torch.equal(LearnedWorldModel(net).predict(state, action), torch.ones(8, 12))
    net = zero_last_layer(MLPDynamics((16,)), bias=-3.0)
    assert torch.equal(LearnedWorldModel(net).predict(state, action), torch.zeros(8, 12))


def test_ensemble_predict_is_the_clamped_mean_of_its_members():
    torch.manual_seed(0)
    net = MLPDynamics((16,), members=4)
    state, action = probe_batch(10)
    raw = net(state, action).detach()
    model = LearnedWorldModel(net)
    assert not torch.allclose(raw[0], raw[1])
    assert torch.allclose(model.predict(state, action), raw.mean(0).clamp(0, 1))
    assert torch.allclose(model.predict_members(state, action), raw.clamp(0, 1))


@pytest.mark.parametrize("activation", ["silu", "relu", "tanh", "gelu"])
@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("delta", [True, False])
def test_the_gradient_free_forward_is_bit_identical_to_the_autograd_one(
    activation, members, delta, monkeypatch
):
    monkeypatch.setattr(learned, "WORKSPACE_BYTES", 2**20)
    torch.manual_seed(0)
    net = MLPDynamics((48, 32), members=members, activation=activation, predict_delta=delta)
    gen = torch.Generator().manual_seed(1)
    # Every row count from 1 to 70 (both sides of the transposed output layer's threshold),
    # larger calls, and calls larger than the kept workspace; each twice (buffers reused).
    for rows in [*range(1, 71), 257, 1710, 3307, 20_000]:
        state = torch.rand(rows, 12, generator=gen) * 1.4 - 0.2
        action = torch.randint(0, 4, (rows,), generator=gen)
        expected = net(state, action).detach()
        with torch.no_grad():
            first, again = net(state, action), net(state, action)
        assert first.is_contiguous() and torch.equal(first, expected), rows
        assert torch.equal(again, expected), rows
        stacked = torch.rand(members, rows, 12, generator=gen)
        moves = torch.randint(0, 4, (members, rows), generator=gen)
        expected = net(stacked, moves).detach()
        with torch.no_grad():
            assert torch.equal(net(stacked, moves), expected), (rows, "one batch per member")


def test_a_workspace_made_under_inference_mode_is_replaced_outside_it():
    model = LearnedWorldModel(MLPDynamics((32, 32)))
    state, action = torch.rand(100, 12), torch.randint(0, 4, (100,))
    with torch.inference_mode():
        inside = model.predict(state, action)
    outside = model.predict(state, action)
    assert torch.equal(inside, outside) and not outside.is_inference()


def test_the_action_changes_the_prediction():
    torch.manual_seed(0)
    model = LearnedWorldModel(MLPDynamics((16,)))
    state = probe_batch(1)[0].expand(4, 12)
    pred = model.predict(state, torch.arange(4))
    assert len({tuple(row.tolist()) for row in pred}) == 4


def test_learned_model_is_a_world_model_the_planner_accepts():
    model = LearnedWorldModel(MLPDynamics((16,)))
    assert isinstance(model, WorldModel)
    state = probe_batch(3)[0]
    action = Planner(model, depth=2).act(state, torch.Generator().manual_seed(0))
    assert action.shape == (3,)


@pytest.mark.parametrize(
    "state_shape, action_shape, match",
    [((4, 11), (4,), "state must have shape"), ((4, 12), (3,), "action must have shape")],
)
def test_predict_rejects_misshapen_inputs(state_shape, action_shape, match):
    model = LearnedWorldModel(MLPDynamics((16,)))
    with pytest.raises(ValueError, match=match):
        model.predict(torch.zeros(state_shape), torch.zeros(action_shape, dtype=torch.long))


def test_invalid_architectures_are_rejected():
    with pytest.raises(ValueError, match="hidden"):
        MLPDynamics(())
    with pytest.raises(ValueError, match="members"):
        MLPDynamics((8,), members=0)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        MLPDynamics((8,), activation="swish")


def test_checkpoint_round_trip_gives_identical_predictions(tmp_path):
    module = tiny_module(tmp_path, "model.members=2")
    path = module_checkpoint(module, tmp_path / "model.ckpt")
    loaded = load_world_model(path)
    state, action = probe_batch(32)
    assert torch.equal(loaded.predict(state, action), module.world_model().predict(state, action))
    assert loaded.members == 2
    assert loaded.metadata["config"]["model"]["hidden"] == [32, 32]
    assert loaded.metadata["state_layout_version"] == STATE_LAYOUT_VERSION


def test_missing_checkpoint_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_world_model(tmp_path / "nope.ckpt")


def test_corrupt_checkpoint_is_rejected(tmp_path):
    good = module_checkpoint(tiny_module(tmp_path), tmp_path / "good.ckpt")
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_world_model(bad)


def test_text_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.ckpt"
    path.write_text("hello")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_world_model(path)


def test_torch_file_without_a_state_dict_is_not_a_lightning_checkpoint(tmp_path):
    path = tmp_path / "tensor.ckpt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(ValueError, match="not a Lightning checkpoint"):
        load_world_model(path)


def test_lightning_checkpoint_without_gridplan_entry_is_rejected(tmp_path):
    path = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"layer.weight": torch.zeros(2, 2)}}, path)
    with pytest.raises(ValueError, match="not a gridplan world model"):
        load_world_model(path)


def test_checkpoint_of_another_state_layout_is_rejected(tmp_path):
    module = tiny_module(tmp_path)
    ckpt = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(ckpt)
    ckpt["gridplan"]["state_layout_version"] = STATE_LAYOUT_VERSION + 1
    path = tmp_path / "future.ckpt"
    torch.save(ckpt, path)
    with pytest.raises(ValueError, match=f"state layout version {STATE_LAYOUT_VERSION + 1}"):
        load_world_model(path)


def test_weights_that_do_not_fit_the_architecture_are_rejected(tmp_path):
    module = tiny_module(tmp_path)
    ckpt = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(ckpt)
    ckpt["gridplan"]["model"]["hidden"] = [64, 64]
    path = tmp_path / "mismatch.ckpt"
    torch.save(ckpt, path)
    with pytest.raises(ValueError, match="weights do not fit"):
        load_world_model(path)


class Payload:
    """An arbitrary Python object: a weights-only load must refuse to build it."""


def test_a_shape_mismatch_names_each_parameter_and_both_shapes(tmp_path):
    module = tiny_module(tmp_path)  # hidden [32, 32]
    ckpt = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(ckpt)
    ckpt["gridplan"]["model"]["hidden"] = [64, 32]
    path = tmp_path / "mismatch.ckpt"
    torch.save(ckpt, path)
    with pytest.raises(ValueError) as err:
        load_world_model(path)
    msg = str(err.value)
    assert "weights do not fit the stored architecture" in msg
    # Ensemble-major weights (members, in, out); input 12 state dims + 4 one-hot actions.
    assert "layers.0.weight: checkpoint (1, 16, 32), architecture (1, 16, 64)" in msg
    assert "layers.0.bias: checkpoint (1, 1, 32), architecture (1, 1, 64)" in msg
    assert "layers.2.weight: checkpoint (1, 32, 32), architecture (1, 64, 32)" in msg
    assert "Error(s) in loading state_dict" not in msg


def test_missing_and_unexpected_parameters_are_listed(tmp_path):
    module = tiny_module(tmp_path)
    ckpt = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(ckpt)
    key = next(k for k in ckpt["state_dict"] if k.endswith("bias"))
    ckpt["state_dict"]["net.extra.weight"] = ckpt["state_dict"].pop(key)
    path = tmp_path / "renamed.ckpt"
    torch.save(ckpt, path)
    with pytest.raises(
        ValueError,
        match=r"missing from the checkpoint: .*bias.*; not in the "
        r"architecture: extra\.weight",
    ):
        load_world_model(path)


@pytest.mark.parametrize(
    "payload",
    [{"state_dict": Payload()}, pickle.dumps(Payload(), protocol=4), b"\x00" * 64],
    ids=["torch-file-with-an-object", "plain-pickle", "raw-bytes"],
)
def test_a_file_torch_refuses_gets_no_advice_to_disable_weights_only(tmp_path, payload):
    path = tmp_path / "x.ckpt"
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    else:
        torch.save(payload, path)
    with pytest.raises(ValueError, match="not a readable checkpoint") as err:
        load_world_model(path)
    msg = str(err.value)
    assert "weights_only" not in msg and "will likely succeed" not in msg
    assert "the weights-only loader refused it" in msg


def test_a_good_checkpoint_still_loads(tmp_path):
    path = module_checkpoint(tiny_module(tmp_path), tmp_path / "good.ckpt")
    assert load_world_model(path).metadata["model"]["hidden"] == [32, 32]
