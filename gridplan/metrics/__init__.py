"""Metrics of a model and statistics over models.

``prediction`` (E_tot, DRPE, profiles, event audit, VPE; paper §3 "Metrics", §4.1),
``relevance_estimation`` (estimated relevance weights; §4.1, §5.2), ``stats`` (mean ± SE,
Spearman with bootstrap CIs, iso-error pairs; §5), ``bootstrap`` (paired hierarchical bootstrap).

Its public names (``__all__``) are imported on first use: ``import gridplan.metrics``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "STANDARD_WEIGHTS": "prediction",
    "PredictionMetrics": "prediction",
    "prediction_metrics": "prediction",
    "rollout_predictions": "prediction",
    "squared_errors": "prediction",
    "profile": "prediction",
    "step_profile": "prediction",
    "e_tot": "prediction",
    "drpe": "prediction",
    "check_weights": "prediction",
    "standard_weights": "prediction",
    "event_audit": "prediction",
    "EpisodeSummary": "stats",
    "SpearmanResult": "stats",
    "mean_se": "stats",
    "summarize_episodes": "stats",
    "spearman_ci": "stats",
    "iso_error_pairs": "stats",
    "PairedDifference": "bootstrap",
    "paired_hierarchical_bootstrap": "bootstrap",
    "UncertaintyQuality": "calibration",
    "risk_coverage": "calibration",
    "aurc": "calibration",
    "uncertainty_quality": "calibration",
    "FVIConfig": "relevance_estimation",
    "RelevanceEstimate": "relevance_estimation",
    "estimate_relevance": "relevance_estimation",
    "FrozenDecoder": "frozen_decoder",
    "LatentFidelity": "frozen_decoder",
    "fit_frozen_decoder": "frozen_decoder",
    "latent_fidelity": "frozen_decoder",
    "effective_rank": "frozen_decoder",
    "ActionConsistency": "action_consistency",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
