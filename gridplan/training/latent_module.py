"""Lightning training of the latent world models (``gridplan.models.latent``) from logged
observations.

The data are ``gridplan.training.module.TransitionDataModule``'s logged transitions; each batch's
observations are drawn from its logged states on demand (``gridplan.core.render.observe``:
``state``, ``grid``, ``pixels``, or on DoorKey ``egocentric`` or ``full``), so the cached
datasets hold states only. The variants apply where they make sense (``VariantConfig``):

* ``latent_recon``: ``loss = recon + pred + latent_weight * latent`` with ``recon`` the
  weighted MSE of ``decode(encode(o_t))`` against ``s_t``, ``pred`` that of
  ``decode(predict(encode(o_t), a_t))`` against ``s_t+1`` (the variant's dimension weights
  and event weights: ``event_weighted``, ``rel_only``, ...; with ``rollout_horizon = H > 1``
  the mean over ``H`` open-loop latent steps, each decoded against its logged state), and
  ``latent`` the squared error of the predicted latent against the encoding of ``o_t+1``
  (gradient stopped at the target; a stochastic latent scores the Gaussian negative
  log-likelihood of the target instead), event-weighted.
* ``jepa``: ``loss = latent_weight * latent + var_weight * variance + cov_weight *
  covariance``: ``latent`` the event-weighted squared error of the predicted latent against
  the target encoder's encoding of ``o_t+1`` (averaged over the ``H`` open-loop steps of the
  rollout variant), ``variance`` and ``covariance`` the VICReg terms of the online encodings
  of the batch; the target encoder follows the online one by EMA after every optimiser step
  (``ema_update``). No
  reconstruction: the dimension weights do not apply.
* ``tdmpc`` (TD-MPC-style, decoder-free): ``loss = latent_weight * latent + variance and
  covariance as jepa + reward_weight * (reward + done) + value_weight * value`` over the ``H``
  open-loop steps of the rollout: ``reward`` the squared error of the reward head at each
  imagined latent against the logged step's reward, ``done`` the binary cross-entropy of the
  termination head against the step ending at a goal or a hazard
  (``gridplan.core.dynamics.outcome``), ``value`` the squared error of ``V`` at each imagined
  latent against ``TDHeads.td_target`` of the target encoder's encoding of the logged state
  there (a backup over every action through the model, bootstrapped by the EMA value head,
  with the task's ``gamma``). The target encoder and the target value head follow by EMA.
* ``rssm`` (Dreamer's world-model loss on sequences of ``H + 1`` logged states; ``variant``'s
  ``rollout_horizon`` is ``H``, the model's config sets 8): from the belief ``h_0 = 0`` the
  posterior filters each observation's embedding, the prior steps the belief with the
  logged action; ``loss = recon + pred + kl_weight * kl``: ``recon`` the weighted MSE of the
  decoded posterior latent ``[h_t, s_t]`` against ``s_t`` at every step, ``pred`` that of the
  decoded prior mean against the same state (the latent the planner imagines), ``kl`` the KL
  of the posterior from the prior summed over state dims, at least ``free_nats`` per step
  (Dreamer's free nats), each step weighted by its event weight and by whether it lies in the
  episode.

Data budgets (``data=4k|12k|20k``) and behaviour policies apply as for the state MLP. Each
epoch logs ``train/loss``, ``val/loss`` (the monitor) and its terms ``val/recon``,
``val/pred``, ``val/latent``, ``val/variance``, ``val/covariance``. Checkpoints carry a
``"gridplan"`` entry of kind ``latent`` (``LatentWorldModelModule.metadata``) that
``gridplan.models.latent.load_latent_model`` reads.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch.distributions import Normal, kl_divergence

from gridplan.core import dynamics
from gridplan.core.render import obs_shape, observe
from gridplan.data.datasets import TransitionDataset
from gridplan.models.latent import (
    LATENT_KIND,
    TARGET_FAMILIES,
    LatentNetwork,
    covariance_loss,
    ema_update,
    load_latent_model,
    variance_loss,
)
from gridplan.models.learned import CHECKPOINT_KEY
from gridplan.training.config import config_task
from gridplan.training.module import (
    adamw,
    dimension_weights,
    lr_factor,
    run_metadata,
    sample_weights,
)

#: Loss terms logged beside ``loss``, per family.
TERMS = {
    "latent_recon": ("recon", "pred", "latent"),
    "jepa": ("latent", "variance", "covariance"),
    "tdmpc": ("latent", "variance", "covariance", "reward", "done", "value"),
    "rssm": ("recon", "pred", "kl"),
}


def _row_weighted(err: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``mean_n weight_n * mean_z err_nz`` of ``(N, Z)`` errors and ``(N,)`` weights."""
    return (err.mean(dim=1) * weight).mean()


def weighted_state_mse(
    pred: torch.Tensor, target: torch.Tensor, dim_weights: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """``mean_{n,d} weight_n * dim_weights_d * (pred_nd - target_nd)^2`` of ``(N, S)``
    states, as ``gridplan.training.module.weighted_mse`` of one member."""
    return ((pred - target).square() * dim_weights * weight.unsqueeze(1)).mean()


class LatentWorldModelModule(pl.LightningModule):
    """A latent world model (``model.family`` ``latent_recon`` or ``jepa``) trained on the
    observations of logged transitions (module docstring for the losses).

    Args:
        config: the resolved run config as a plain dict (``gridplan.training.config.Config``):
            ``model`` builds the network, ``obs`` the observations, ``variant`` and
            ``data.task`` the weights.
        dataset: ``TransitionDataModule.summary()`` of the training data (in checkpoints).

    Raises:
        ValueError: on an invalid architecture or observation.
    """

    def __init__(self, config: dict, dataset: dict | None = None) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        m, o = config["model"], config.get("obs", {"name": "state", "pixels_per_cell": 4})
        self.task = config_task(config)
        world = self.task.world
        self.family, self.obs_kind = m["family"], o["name"]
        self.pixels_per_cell = int(o["pixels_per_cell"])
        self.net = LatentNetwork(
            self.family,
            self.obs_kind,
            obs_shape(world, self.obs_kind, self.pixels_per_cell),
            world.state_dim,
            m["latent_dim"],
            m["channels"],
            m["hidden"],
            m["stochastic"],
            self.pixels_per_cell,
            m["belief_dim"],
            world.n_actions,
        )
        self.register_buffer("dim_weights", dimension_weights(config["variant"], self.task))
        self.event_weight = float(config["variant"]["event_weight"])
        self.latent_weight = float(m["latent_weight"])
        self.ema_decay = float(m["ema_decay"])
        self.var_weight, self.cov_weight = float(m["var_weight"]), float(m["cov_weight"])
        self.reward_weight, self.value_weight = float(m["reward_weight"]), float(m["value_weight"])
        self.kl_weight, self.free_nats = float(m["kl_weight"]), float(m["free_nats"])

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """``(..., S)`` states -> their observations ``(..., *obs_shape)``."""
        lead = state.shape[:-1]
        flat = state.reshape(-1, state.shape[-1])
        obs = observe(flat, self.task.world, self.obs_kind, self.pixels_per_cell)
        return obs.view(*lead, *obs.shape[1:])

    def _latent_error(self, z_next: torch.Tensor, target: torch.Tensor, mean_std) -> torch.Tensor:
        """Per-element latent prediction error: squared error, or the Gaussian negative
        log-likelihood of ``target`` (constant dropped) for a stochastic transition."""
        mean, std = mean_std
        if std is None:
            return (z_next - target).square()
        return 0.5 * ((target - mean) / std).square() + std.log()

    def terms(self, batch) -> dict[str, torch.Tensor]:
        """The loss and its terms of a batch ``(states, actions, next_states, pickup,
        door_opened[, actions, targets, events, valid of the later steps])``."""
        state, action, target, pickup, door, *later = batch
        weight = sample_weights(pickup, door, self.event_weight)
        if self.family == "rssm":
            return self._rssm_terms(state, action, target, weight, later)
        net = self.net
        z = net.encoder(self.observe(state))
        steps = [(action, target, weight)]
        if later:
            actions, targets, events, valid = later
            for j in range(actions.shape[1]):
                w = torch.where(events[:, j], self.event_weight, 1.0) * valid[:, j]
                steps.append((actions[:, j], targets[:, j], w))
        h = len(steps)
        # Observations of every target state in one render and one encoding.
        next_obs = self.observe(torch.stack([s for _, s, _ in steps], dim=1))
        flat_obs = next_obs.reshape(-1, *next_obs.shape[2:])
        if self.family in TARGET_FAMILIES:
            with torch.no_grad():
                goals = net.target_encoder(flat_obs).view(state.shape[0], h, -1)
        else:
            goals = net.encoder(flat_obs).view(state.shape[0], h, -1).detach()
        out: dict[str, torch.Tensor] = {}
        zp, latent, pred = z, 0.0, 0.0
        imagined = []
        for j, (a, s_next, w) in enumerate(steps):
            imagined.append(zp)
            mean_std = net.dynamics.distribution(zp, a)
            mean, std = mean_std
            zp = mean if std is None else mean + std * torch.randn_like(mean)
            latent = latent + _row_weighted(self._latent_error(zp, goals[:, j], mean_std), w)
            if self.family == "latent_recon":
                pred = pred + weighted_state_mse(net.decoder(zp), s_next, self.dim_weights, w)
        out["latent"] = latent / h
        if self.family == "tdmpc":
            out.update(self._head_terms(state, steps, imagined, goals))
        if self.family == "latent_recon":
            out["recon"] = weighted_state_mse(net.decoder(z), state, self.dim_weights, weight)
            out["pred"] = pred / h
            out["loss"] = out["recon"] + out["pred"] + self.latent_weight * out["latent"]
        else:
            out["variance"] = variance_loss(z)
            out["covariance"] = covariance_loss(z)
            out["loss"] = (
                self.latent_weight * out["latent"]
                + self.var_weight * out["variance"]
                + self.cov_weight * out["covariance"]
            )
        if self.family == "tdmpc":
            out["loss"] = (
                out["loss"]
                + self.reward_weight * (out["reward"] + out["done"])
                + self.value_weight * out["value"]
            )
        return out

    def _rssm_terms(self, state, action, target, weight, later) -> dict[str, torch.Tensor]:
        """An ``rssm``'s terms on the sequence ``state, target, later targets`` (module
        docstring); a step outside the episode (``valid`` False) weighs 0."""
        net = self.net
        states, actions, weights = [state, target], [action], [weight, weight]
        if later:
            later_actions, targets, events, valid = later
            for j in range(later_actions.shape[1]):
                actions.append(later_actions[:, j])
                states.append(targets[:, j])
                weights.append(torch.where(events[:, j], self.event_weight, 1.0) * valid[:, j])
        b, steps = state.shape[0], len(actions)
        obs = self.observe(torch.stack(states, dim=1))
        embedding = net.encoder(obs.reshape(-1, *obs.shape[2:])).view(b, steps + 1, -1)
        belief = embedding.new_zeros(b, net.belief_dim)
        z, _, _ = net.filtered(belief, embedding[:, 0], torch.randn(b, net.noise_dim))
        recon = weighted_state_mse(net.decoder(z), state, self.dim_weights, weights[0])
        pred = kl = 0.0
        for t, a in enumerate(actions):
            noise = torch.randn(b, net.noise_dim, device=z.device)
            prior, prior_mean, prior_std = net.dynamics.step(z, a, noise)
            belief = prior[:, : net.belief_dim]
            z, mean, std = net.filtered(belief, embedding[:, t + 1], torch.randn_like(noise))
            w, s_next = weights[t + 1], states[t + 1]
            recon = recon + weighted_state_mse(net.decoder(z), s_next, self.dim_weights, w)
            imagined = torch.cat([belief, prior_mean], dim=1)
            pred = pred + weighted_state_mse(net.decoder(imagined), s_next, self.dim_weights, w)
            step_kl = kl_divergence(Normal(mean, std), Normal(prior_mean, prior_std)).sum(dim=1)
            kl = kl + (w * step_kl.clamp(min=self.free_nats)).mean()
        out = {"recon": recon / (steps + 1), "pred": pred / steps, "kl": kl / steps}
        out["loss"] = out["recon"] + out["pred"] + self.kl_weight * out["kl"]
        return out

    def _head_terms(self, state, steps, imagined, goals) -> dict[str, torch.Tensor]:
        """The ``tdmpc`` heads' terms (module docstring): at each step ``j`` of the rollout,
        the reward and termination heads at the imagined latent and the step's action against
        the logged outcome, and the value head against the TD target of the actual latent
        (the target encoder's: ``goals`` of the step before, or of the start state)."""
        heads, gamma = self.net.heads, float(self.task.gamma)
        with torch.no_grad():
            start = self.net.target_encoder(self.observe(state)).unsqueeze(1)
            actual = torch.cat([start, goals[:, :-1]], dim=1)
        reward = done = value = 0.0
        for j, ((a, s_next, w), zj) in enumerate(zip(steps, imagined, strict=True)):
            true_reward, goal, hazard = dynamics.outcome(self.task, s_next)
            r_hat, d_logit = heads.step(zj, a)
            reward = reward + (w * (r_hat - true_reward).square()).mean()
            ended = (goal | hazard).to(d_logit.dtype)
            bce = torch.nn.functional.binary_cross_entropy_with_logits
            done = done + (w * bce(d_logit, ended, reduction="none")).mean()
            target = heads.td_target(actual[:, j], self.net.dynamics, gamma)
            value = value + (w * (heads.value(zj).squeeze(1) - target).square()).mean()
        h = len(steps)
        return {"reward": reward / h, "done": done / h, "value": value / h}

    def _log_terms(self, stage: str, terms: dict[str, torch.Tensor], rows: int) -> None:
        on_step = stage == "train"
        self.log(
            f"{stage}/loss",
            terms["loss"],
            on_step=on_step,
            on_epoch=True,
            prog_bar=stage == "val",
            batch_size=rows,
        )
        for name in TERMS[self.family]:
            self.log(f"{stage}/{name}", terms[name], on_step=False, on_epoch=True, batch_size=rows)

    def training_step(self, batch, batch_idx):
        terms = self.terms(batch)
        self._log_terms("train", terms, batch[0].shape[0])
        return terms["loss"]

    def validation_step(self, batch, batch_idx):
        self._log_terms("val", self.terms(batch), batch[0].shape[0])

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.family in TARGET_FAMILIES:
            ema_update(self.net.target_encoder, self.net.encoder, self.ema_decay)
        if self.family == "tdmpc":
            ema_update(self.net.heads.target_value, self.net.heads.value, self.ema_decay)

    def configure_optimizers(self):
        m = self.hparams["config"]["model"]
        params = [p for p in self.parameters() if p.requires_grad]
        opt = adamw(params, m["lr"], m["weight_decay"], self.device)
        epochs = int(self.hparams["config"]["trainer"]["max_epochs"])
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: lr_factor(e, epochs))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

    def metadata(self) -> dict[str, Any]:
        """The checkpoint's ``"gridplan"`` entry: kind ``latent``, family, observation,
        architecture, layout version, config, data, world."""
        return {
            "kind": LATENT_KIND,
            "family": self.family,
            "obs": {"kind": self.obs_kind, "pixels_per_cell": self.pixels_per_cell},
            **run_metadata(self, self.net.architecture()),
        }

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = self.metadata()


def run_data(metadata: dict) -> tuple[TransitionDataset, TransitionDataset]:
    """The ``(train, val)`` transitions a checkpoint was trained and validated on, from its
    ``metadata`` (a loaded model's ``metadata``: the run's ``data`` config), collected again
    or read from the run's cache exactly as training split them (by episode, no episode in
    both), so a probe fitted on a run's training observations can keep apart the episodes
    the run never saw.

    Raises:
        ValueError: if the metadata lack the run config, or the data made again do not have
            the fingerprint the checkpoint recorded (another gridplan, another dataset).
    """
    from gridplan.core import tasks
    from gridplan.data.datasets import parse_budget
    from gridplan.training.module import cached_dataset

    config = metadata.get("config") if isinstance(metadata, dict) else None
    if not isinstance(config, dict) or "data" not in config:
        raise ValueError("the checkpoint's metadata lack the run config (config.data)")
    d = config["data"]
    task = tasks.get(d["task"], world=config.get("world", "default"))
    data = cached_dataset(
        d["policy"], parse_budget(d["budget"]), int(d["seed"]), task, d["cache_dir"]
    )
    want = (metadata.get("dataset") or {}).get("fingerprint")
    if want is not None and data.fingerprint() != want:
        raise ValueError(
            f"the run's data made again have fingerprint {data.fingerprint()}, the checkpoint "
            f"recorded {want}"
        )
    return data.split_by_episode(float(d["val_fraction"]), int(d["seed"]))


@torch.no_grad()
def latent_scores(path, data: TransitionDataset, rows: int = 2048) -> dict[str, float]:
    """One-step scores of a latent checkpoint on (the first ``rows`` of) ``data``:
    ``best/latent_mse`` (predicted latent against the encoding of the next observation,
    both through ``LearnedLatentModel.encode``, mean over rows and dims; a stochastic
    transition's sample drawn from a generator seeded 0), and for a
    decoding model ``best/recon_mse`` (decoded encoding against the state) and
    ``best/pred_mse`` (decoded prediction against the next state), means over rows and the
    ``S`` dims."""
    model = load_latent_model(path)
    n = min(rows, len(data))
    state, action, nxt = data.states[:n], data.actions[:n], data.next_states[:n]
    z = model.encode(model.observe(state))
    gen = torch.Generator().manual_seed(0)
    z_next = model.predict_latent(z, action, gen)
    target = model.encode(model.observe(nxt))
    out = {"best/latent_mse": float((z_next - target).square().mean())}
    if hasattr(model, "decode"):
        out["best/recon_mse"] = float((model.decode(z) - state).square().mean())
        out["best/pred_mse"] = float((model.decode(z_next) - nxt).square().mean())
    return out
