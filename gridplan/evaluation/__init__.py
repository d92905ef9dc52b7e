"""Evaluating one model for decisions: the paper's report, the ladder L4-L7, the probe, the card.

``ladder`` (``evaluate``, the public ``gridplan.evaluate``: every level under one protocol;
``paper_report``: the paper's report, metrics and closed-loop success, by the same levels),
``levels`` (one function per level and the context they share), ``spec`` (``EvalSpec``,
every setting of an evaluation, and the named protocols, tracks and suites of
``configs/eval/``), ``compare`` (paired comparison), ``schema`` (the versioned
report), ``card`` (the evaluation card), ``anchors`` and ``probe``.

One module per concern: ``branch`` (the branch set ``Q`` of true states), ``fidelity`` (L4
interventional fidelity), ``decisions`` (L4 decision agreement and regret, L7 exploitability
gap), ``outcome`` (L5 reward, value and success fidelity of anchor policies), ``ranking`` (L6
policy ranking), ``uncertainty`` (uncertainty scores of a model, scored by
``gridplan.metrics.calibration``). ``gridplan.evaluate`` runs them all under one protocol; the
README section "Evaluate your own model" defines every number. Source of the ladder: "How
Should World Models Be Evaluated for Embodied Decision-Making?" (arXiv 2606.15032), §4-6.

Its public names (``__all__``) are imported on first use: ``import gridplan.evaluation``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "evaluate": "ladder",
    "paper_report": "ladder",
    "EvalSpec": "spec",
    "PlannerSpec": "spec",
    "Suite": "spec",
    "CONTROLLED": "spec",
    "LEARNED": "spec",
    "load_spec": "spec",
    "load_track": "spec",
    "load_suite": "spec",
    "resolve_spec": "spec",
    "track_names": "spec",
    "suite_names": "spec",
    "protocol_names": "spec",
    "Comparison": "compare",
    "ModelComparison": "compare_models",
    "Report": "schema",
    "LEVELS": "schema",
    "SCHEMA_VERSION": "schema",
    "write_report": "schema",
    "build_card": "card",
    "write_card": "card",
    "ProbeResult": "probe",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
