"""Logged data: behaviour policies, transition datasets and held-out evaluation windows.

``datasets`` (``random``/``balanced``/``expert`` behaviour policies, budgets, ``collect``,
``TransitionDataset``, ``EvalWindows``). Paper §5.4, §5.5. ``export``: the datasets the
trainer uses as ``.npz`` files with their fingerprint (``python -m gridplan.data export``,
console script ``gridplan-data``).

Its public names (``__all__``) are imported on first use: ``import gridplan.data``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "BEHAVIOUR_POLICIES": "datasets",
    "BALANCED_EPSILONS": "datasets",
    "EXPERT_EPSILONS": "datasets",
    "DATASET_SCHEMA": "datasets",
    "WINDOWS_SCHEMA": "datasets",
    "TENSOR_FIELDS": "datasets",
    "parse_budget": "datasets",
    "check_policy": "datasets",
    "TransitionDataset": "datasets",
    "collect": "datasets",
    "EvalWindows": "datasets",
    "eval_windows": "datasets",
    "EXPORT_SCHEMA": "export",
    "export_name": "export",
    "export_dataset": "export",
    "load_export": "export",
    "SEQUENCE_SCHEMA": "export",
    "export_sequences": "export",
    "load_sequences": "export",
    "sequence_rows": "export",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
