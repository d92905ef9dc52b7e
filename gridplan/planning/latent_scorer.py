"""The leaf scorer of latent world models (paper §3 "Planner"; seed 004 §3; ``docs/DESIGN.md``,
"Latent world models").

A latent model (``gridplan.models.latent_contract``) is planned with behind
``LatentThroughDecoder``, and its leaves are rolled in latent space: the root's true state is
observed and encoded once, ``z_0 = E(o(s))``, each leaf's action sequence is rolled by
``predict_latent``, and every imagined latent is decoded, ``s_hat_t = D(z_t)``, by the
decoder the wrapper holds (the model's own ``decode``, or the frozen protocol decoder of
``gridplan.metrics.frozen_decoder``). Two leaf scores, stated in every report
(``LatentScorer.describe``):

* ``decoder`` (the paper's protocol, the default): the true sparse reward of the decoded
  states, terminal at a goal or hazard, plus ``gamma^D V*(s_hat_D)``, read through rounded
  cells and thresholded flags exactly as for a state model
  (``gridplan.planning.scorers``)::

      score(l) = sum_{t < D} gamma^t r(D(z_{t+1})) [alive] + gamma^D V*(D(z_D)) [alive]

* ``heads`` (``LatentThroughDecoder(heads=True)``): the model's own ``reward(z_t, a_t,
  z_{t+1})`` replaces the true reward, and its ``value(z_D)`` replaces ``V*`` where it has a
  value head (else V* of the decoded leaf); termination is still read from the decoded states.

Leaves always roll independently (one draw per leaf path). For a model whose
``predict_latent`` is deterministic both trees give the same scores, so the shared-prefix tree
is accepted and rolled the same way; a stochastic latent model under the shared-prefix tree is
refused.
"""

from __future__ import annotations

import torch

from gridplan.core import dynamics
from gridplan.core.tasks import Task
from gridplan.models.capabilities import capabilities_of
from gridplan.models.latent_contract import LatentThroughDecoder, check_head
from gridplan.models.signatures import label
from gridplan.planning.registry import register_scorer
from gridplan.planning.scorers import DEFAULT_MAX_MEMORY, GenericScorer, LeafScorer


class LatentScorer(GenericScorer):
    """Leaf scores of a ``LatentThroughDecoder`` rolled in latent space (module docstring).

    Args and budgets as ``GenericScorer`` (the wrapper declares its ``bytes_per_row``).

    Raises:
        ValueError: as ``GenericScorer``; the wrapped model's broken outputs as
            ``gridplan.models.latent_contract.LatentContractError``.
    """

    def describe(self) -> dict:
        """How leaves are scored: ``{"leaf_score": "decoder" | "heads", "decoder": ...}``."""
        model: LatentThroughDecoder = self.model
        own_value = model.heads and capabilities_of(model.latent).value
        return {
            "leaf_score": "heads" if model.heads else "decoder",
            "reward": "model reward head" if model.heads else "true reward of decoded states",
            # The value head reads the leaf's latent, V* the decoded leaf state.
            "leaf_value": "model value head at the leaf latent"
            if own_value
            else "V* at the decoded leaf",
            "decoder": dict(model.decoder),
        }

    @torch.no_grad()
    def scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        model: LatentThroughDecoder = self.model
        latent = model.latent
        b, n = root.shape[0], self.n_leaves
        z = model.encode_states(root).repeat_interleave(n, dim=0)
        score = torch.zeros(b * n, device=root.device)
        alive = torch.ones(b * n, dtype=torch.bool, device=root.device)
        for t in range(self.depth):
            action = self.sequences[:, t].repeat(b).to(z.device)
            z_next = model.step_latent(z, action, generator)
            decoded = model.decode_latent(z_next).to(root.device)
            reward, goal, hazard = dynamics.outcome(self.task, decoded)
            if model.heads:
                out = latent.reward(z, action, z_next)
                reward = check_head(out, z.shape[0], label(latent, "reward"))
                reward = reward.float().to(root.device)
            score += self.discounts[t] * reward * alive
            alive &= ~(goal | hazard)
            z = z_next
        if model.heads and capabilities_of(latent).value:
            leaf = check_head(latent.value(z), z.shape[0], label(latent, "value")).float()
            leaf = leaf.to(root.device)
        else:
            leaf = self.values.lookup(decoded)
        score += self.discounts[self.depth] * leaf * alive
        return score.view(b, n)


def latent_scorer(
    model,
    task: Task,
    depth: int,
    device: torch.device | str = "cpu",
    max_memory: int = DEFAULT_MAX_MEMORY,
    max_rows: int | None = None,
    tree: str = "independent",
) -> LeafScorer:
    """``LatentScorer`` for a ``LatentThroughDecoder`` (``gridplan.planning.registry``).

    Raises:
        ValueError: if the shared-prefix tree is asked of a stochastic latent model.
    """
    if tree == "shared-prefix" and not model.latent.deterministic:
        raise ValueError(
            f"{type(model.latent).__name__} is a stochastic latent model; its leaves roll "
            "independently (tree='independent'), not with shared prefixes"
        )
    return LatentScorer(model, task, depth, device, max_memory, max_rows)


register_scorer(LatentThroughDecoder, latent_scorer)
