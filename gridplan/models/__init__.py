"""World models: the ``WorldModel`` contract, the controlled family, learned MLPs, ensembles.

``contract`` (the ``WorldModel`` contract and its optional declarations), ``capabilities``
(what a model offers: the protocols of its methods and the ``Capabilities`` record the library
reads), ``noise`` (the oracle, ``M(sigma_r, sigma_i)``, AR(1) noise; paper §4.2), ``learned``
(MLP dynamics and self-describing checkpoints; §5.4), ``ensemble`` (bootstrapped ensembles),
``plugins`` (a user's model from ``file.py:factory`` behind contract checks; ``admit``, the
boundary every model crosses once), ``signatures`` (every method of the state, latent and
history contracts, with shapes, as data), ``opaque`` (models with opaque, history-aware
state, seen as latent models). Models know nothing of the
planner; the planner chooses how to score a model's leaves (``gridplan.planning.registry``).

Its public names (``__all__``) are imported on first use: ``import gridplan.models``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "WorldModel": "contract",
    "check_model_world": "contract",
    "keeps_memory": "contract",
    "NoiseModel": "noise",
    "OracleModel": "noise",
    "AR1NoiseModel": "noise",
    "noise_grid": "noise",
    "imagined_transition": "noise",
    "check_sigma": "noise",
    "LearnedWorldModel": "learned",
    "EnsembleWorldModel": "learned",
    "MLPDynamics": "learned",
    "load_world_model": "learned",
    "load_ensemble": "ensemble",
    "PluginError": "plugins",
    "CheckedModel": "plugins",
    "checked": "plugins",
    "build": "plugins",
    "check_contract": "plugins",
    "check_plugin": "plugins",
    "admit": "plugins",
    "Capabilities": "capabilities",
    "capabilities_of": "capabilities",
    "CheckedLatentModel": "plugins",
    "CheckedHistoryModel": "plugins",
    "HistoryWorldModel": "opaque",
    "OpaqueLatent": "opaque",
    "admit_history": "opaque",
    "is_history_model": "opaque",
    "sibling_imports": "plugins",
    "METHODS": "signatures",
    "LatentWorldModel": "latent_contract",
    "LatentContractError": "latent_contract",
    "is_latent_model": "latent_contract",
    "check_latent_model": "latent_contract",
    "LearnedLatentModel": "latent",
    "load_latent_model": "latent",
    "StateLatentModel": "latent_reference",
    "PersistenceLatentModel": "latent_reference",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
