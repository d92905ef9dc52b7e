"""A recurrent latent model on a partial observation plans from its belief filtered over the
episode (``gridplan.models.episode_memory``): the memory is picked by observation kind, the
closed loop hands the planner ``z_0 = encode(o_0)``, ``z_{t+1} = filter_latent(z_t, a_t,
o_{t+1})`` along each episode's recorded trajectory, and a fully observed model keeps
encoding the current observation."""

from __future__ import annotations

import torch

from gridplan.core import dynamics, tasks
from gridplan.core import world as worlds
from gridplan.core.render import obs_shape
from gridplan.models.episode_memory import EpisodeBelief, episode_memory, memory_words
from gridplan.models.latent import LatentNetwork, RSSMLatentModel
from gridplan.models.latent_contract import LatentThroughDecoder, encode_states
from gridplan.planning.closed_loop import run_closed_loop
from gridplan.planning.planner import Planner

EGO = "minigrid-doorkey-5x5"
#: Steps of every closed loop here: enough for beliefs to part from fresh encodings.
STEPS = 8


def _loop(model, record: bool = False):
    task = tasks.get("A", world=EGO)
    gen = torch.Generator().manual_seed(0)
    start = dynamics.reset(task, 3, gen)
    return run_closed_loop(Planner(model, 1, task), start, gen, horizon=STEPS, record=record)


def _rssm(world_name: str, kind: str) -> RSSMLatentModel:
    world = worlds.get(world_name)
    torch.manual_seed(0)
    net = LatentNetwork(
        "rssm",
        kind,
        obs_shape(world, kind),
        world.state_dim,
        latent_dim=12,
        channels=(4, 4),
        hidden=(16, 16),
        stochastic=True,
        belief_dim=8,
        n_actions=world.n_actions,
    )
    return RSSMLatentModel(net, {}, world)


class Spy(LatentThroughDecoder):
    """Records the beliefs the closed loop hands over at every decision."""

    def __init__(self, latent) -> None:
        super().__init__(latent)
        self.handed: list[tuple[torch.Tensor, torch.Tensor]] = []

    def plan_from(self, root, z=None) -> None:
        if root is not None:
            self.handed.append((root.clone(), z.clone()))
        super().plan_from(root, z)


def test_the_memory_is_a_belief_only_for_a_filtering_model_on_a_partial_observation():
    ego = LatentThroughDecoder(_rssm(EGO, "egocentric"))
    start = dynamics.reset(tasks.get("A", world=EGO), 3, torch.Generator().manual_seed(0))
    assert isinstance(episode_memory(ego, start), EpisodeBelief)
    # The full grid shows every cell: one observation is a complete history.
    assert episode_memory(LatentThroughDecoder(_rssm(EGO, "full")), start) is None
    paper = tasks.get("A")
    paper_start = dynamics.reset(paper, 3, torch.Generator().manual_seed(0))
    paper_rssm = LatentThroughDecoder(_rssm(paper.world.name, "grid"))
    assert episode_memory(paper_rssm, paper_start) is None


def test_the_closed_loop_plans_from_the_belief_filtered_along_each_episode():
    latent = _rssm(EGO, "egocentric")
    spy = Spy(latent)
    result = _loop(spy, record=True)
    steps = result.trajectory.shape[0] - 1
    assert len(spy.handed) >= 3
    # The plain recursion along the recorded trajectory: encode the start, then filter every
    # step an episode took (a finished episode's belief is never read again).
    z = encode_states(latent, result.trajectory[0])
    for t, (root, handed) in enumerate(spy.handed):
        live = result.actions[t] >= 0 if t < steps else torch.zeros(3, dtype=torch.bool)
        rows = torch.nonzero(live | (t == 0)).flatten()
        assert torch.equal(root, result.trajectory[t][rows])
        torch.testing.assert_close(handed, z[rows], rtol=0, atol=1e-6)
        if t + 1 < len(spy.handed):
            a = result.actions[t].clamp(min=0)
            z = torch.where(
                live.unsqueeze(1),
                latent.filter_latent(z, a, latent.observe(result.trajectory[t + 1])),
                z,
            )
    # The beliefs differ from a fresh encoding once an episode has moved: memory is used.
    fresh = encode_states(latent, spy.handed[-1][0])
    assert not torch.allclose(fresh, spy.handed[-1][1])


def test_a_fully_observed_filtering_model_encodes_the_current_observation():
    spy = Spy(_rssm(EGO, "full"))
    _loop(spy)
    assert spy.handed == []


def test_reports_say_what_the_planning_latent_holds():
    assert memory_words(_rssm(EGO, "egocentric")) == "Z is the belief filtered over the episode"
    assert memory_words(_rssm(EGO, "full")) == ""
