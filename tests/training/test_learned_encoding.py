"""The gradient-free forward's input encoding (gridplan.models.learned.MLPDynamics._infer): a
gather of per-action rows kept as a non-persistent buffer, outside the checkpoint format."""

from __future__ import annotations

import torch

from gridplan.models.learned import MLPDynamics


def test_the_encoding_table_stays_out_of_the_weights_and_checkpoints():
    net = MLPDynamics((16, 8), members=2)
    names = {name for name, _ in net.named_parameters()}
    assert set(net.state_dict()) == names
    fresh = MLPDynamics((16, 8), members=2)
    fresh.load_state_dict(net.state_dict())  # strict: the table is neither missing nor extra
    expected = torch.cat([torch.full((4, 12), -1.0), torch.eye(4)], dim=1)
    assert torch.equal(net._codes, expected)


def test_a_double_network_encodes_its_inputs_bit_for_bit_as_the_autograd_forward():
    torch.manual_seed(0)
    net = MLPDynamics((32, 32)).double()
    assert net._codes.dtype == torch.float64
    gen = torch.Generator().manual_seed(2)
    state = torch.rand(300, 12, generator=gen, dtype=torch.float64) * 1.4 - 0.2
    action = torch.randint(0, 4, (300,), generator=gen)
    expected = net(state, action).detach()
    with torch.no_grad():
        assert torch.equal(net(state, action), expected)


def test_the_encoding_follows_the_input_where_the_table_lives_elsewhere():
    torch.manual_seed(0)
    net = MLPDynamics((32,))
    net._codes = net._codes.double()  # e.g. a table left on another dtype or device
    state, action = torch.rand(70, 12), torch.randint(0, 4, (70,))
    expected = net(state, action).detach()
    with torch.no_grad():
        assert torch.equal(net(state, action), expected)
    assert net._codes.dtype == torch.float32
