"""Planning in a world model: leaf scorers, the full-width search and the closed loop.

``scorers`` (the ``LeafScorer`` interface and the generic one over ``predict``), ``tree`` (the
shared-prefix tree), ``fused`` (the noise family rolled on the relevant dims only), ``planner``
(``Planner``: expand, score, reduce, tie-break), ``closed_loop`` (plan in the model, act in the
environment), ``reference`` (the one-episode plain-Python version the tests check against).
Paper §3 "Planner".

Its public names (``__all__``) are imported on first use: ``import gridplan.planning``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "Planner": "planner",
    "TIES": "planner",
    "break_ties": "planner",
    "default_ties": "planner",
    "PLANNERS": "planners",
    "make_planner": "planners",
    "planner_settings": "planners",
    "check_planner": "planners",
    "needs_learned_value": "planners",
    "DEFAULT_MAX_MEMORY": "scorers",
    "LeafScorer": "scorers",
    "GenericScorer": "scorers",
    "RewardScorer": "scorers",
    "action_sequences": "scorers",
    "check_prediction": "scorers",
    "check_depth": "scorers",
    "FusedNoiseScorer": "fused",
    "TreeScorer": "tree",
    "LatentScorer": "latent_scorer",
    "register_scorer": "registry",
    "leaf_scorer": "registry",
    "EpisodeResults": "closed_loop",
    "run_closed_loop": "closed_loop",
    "run_episodes": "closed_loop",
    "start_states": "closed_loop",
    "LearnedValue": "learned_value",
    "ZeroValue": "learned_value",
    "CrossEntropyPlanner": "cem",
    "PathIntegralPlanner": "mppi",
    "TreeSearchPlanner": "mcts",
    "SequencePlanner": "sampling",
    "ValueSearchPlanner": "value_search",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
