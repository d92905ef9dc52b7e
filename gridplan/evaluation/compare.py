"""Paired comparison of two world models (or two sets of trained models) for decisions.

Both arms are evaluated under one protocol, so they meet the same start states, branch states,
anchor starts and probe questions, and the same random streams (common random numbers). Each
arm may hold several models, one per training seed, paired by position. Then:

- closed-loop success ``A - B`` with a paired hierarchical bootstrap over training seed ->
  evaluation seed -> episode (``gridplan.metrics.bootstrap``); with three or fewer units at the top
  level that varies, the interval is flagged as indicative only;
- decision regret ``A - B`` over the shared branch states, bootstrapped over training seed ->
  state;
- every headline ladder number side by side (means over each arm's models).

Method: the paired hierarchical bootstrap of the JEPA prediction-vs-planning protocol
(arXiv 2610.19375).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gridplan.evaluation.schema import Report
from gridplan.metrics.bootstrap import PairedDifference, paired_hierarchical_bootstrap

#: The numbers shown side by side: (level, key).
HEADLINE = (
    ("L4", "decision_agreement"),
    ("L4", "decision_regret"),
    ("L4", "ipe"),
    ("L4", "action_effect"),
    ("L5", "reward_error"),
    ("L5", "value_error"),
    ("L5", "brier"),
    ("L6", "spearman"),
    ("L6", "pra"),
    ("L6", "mmrv"),
    ("L7", "success"),
    ("L7", "policy_gain"),
    ("L7", "optimality_regret"),
    ("L7", "xgap"),
    ("probe", "regret"),
    ("probe", "reward_error"),
    ("uncertainty", "aurc"),
)


def _number(report: dict, level: str, key: str) -> float | None:
    entry = report.get("ladder", {}).get(level, {}).get(key)
    if isinstance(entry, dict):
        return entry.get("mean")
    return entry


@dataclass
class Comparison:
    """Attributes:
    names: the two arms' names.
    reports_a, reports_b: each arm's reports, one per model (training seed).
    success: paired difference of closed-loop success, or None without L7.
    decision_regret: paired difference of decision regret on the branch states, or None
        without L4.
    side_by_side: one dict per headline number: ``level``, ``metric``, ``a``, ``b``,
        ``difference`` (``a - b``; None where either arm lacks it).
    """

    names: tuple[str, str]
    reports_a: list[Report]
    reports_b: list[Report]
    success: PairedDifference | None
    decision_regret: PairedDifference | None
    side_by_side: list[dict]

    def to_dict(self) -> dict:
        """JSON form: both arms' report dicts, the paired differences, the table."""
        return {
            "arms": list(self.names),
            "success_difference": None if self.success is None else self.success.to_dict(),
            "decision_regret_difference": (
                None if self.decision_regret is None else self.decision_regret.to_dict()
            ),
            "side_by_side": self.side_by_side,
            "reports": {
                self.names[0]: [r.to_dict() for r in self.reports_a],
                self.names[1]: [r.to_dict() for r in self.reports_b],
            },
        }

    def lines(self) -> list[str]:
        """Human-readable lines of the comparison (columns ``A`` and ``B``, named first)."""
        a, b = self.names
        width = 9

        def cell(v):
            return f"{'n/a':>{width}}" if v is None else f"{v:>{width}.4f}"

        out = [
            f"A = {a}",
            f"B = {b}",
            f"{'level':<12}{'metric':<22}{'A':>{width}}  {'B':>{width}}  {'A - B':>{width}}",
        ]
        for row in self.side_by_side:
            out.append(
                f"{row['level']:<12}{row['metric']:<22}{cell(row['a'])}  {cell(row['b'])}  "
                f"{cell(row['difference'])}"
            )
        for label, diff in (("success", self.success), ("decision regret", self.decision_regret)):
            if diff is None:
                continue
            out.append(
                f"{label} A - B = {diff.difference:+.4f}, {diff.confidence:.0%} paired "
                f"hierarchical bootstrap [{diff.low:+.4f}, {diff.high:+.4f}] over "
                + " -> ".join(f"{n} ({u})" for n, u in zip(diff.levels, diff.units, strict=True))
            )
            if diff.warning:
                out.append(f"  warning: {diff.warning}")
        return out


def _stack(reports: Sequence[Report], attr: str, key: str | None = None) -> np.ndarray | None:
    parts = [getattr(r, attr) if key is None else getattr(r, attr).get(key) for r in reports]
    if any(p is None for p in parts):
        return None
    return np.stack(parts)


def compare(
    arm_a,
    arm_b,
    names: tuple[str, str] = ("A", "B"),
    infos: tuple[Sequence[dict] | None, Sequence[dict] | None] = (None, None),
    n_resamples: int | None = None,
    seed: int = 0,
    spec=None,
    device="cpu",
    progress=False,
    **changes,
) -> Comparison:
    """Evaluate two arms under one spec and compare them pairwise.

    Args:
        arm_a, arm_b: a model, or a sequence of models (one per training seed, paired by
            position; both arms the same length).
        names: the arms' names in reports.
        infos: per-arm sequences of ``model_info`` dicts (one per model), or None.
        n_resamples: bootstrap resamples (default: the spec's).
        seed: bootstrap seed.
        spec, device, progress, **changes: as for ``gridplan.evaluation.ladder.evaluate``
            (one spec for both arms).

    Raises:
        ValueError: if the arms hold different numbers of models, or as ``evaluate``.
    """
    from gridplan.evaluation.ladder import evaluate
    from gridplan.evaluation.spec import resolve_spec

    models_a = list(arm_a) if isinstance(arm_a, (list, tuple)) else [arm_a]
    models_b = list(arm_b) if isinstance(arm_b, (list, tuple)) else [arm_b]
    if len(models_a) != len(models_b):
        raise ValueError(
            f"paired arms need the same number of models (training seeds), got "
            f"{len(models_a)} and {len(models_b)}"
        )
    spec = resolve_spec(spec)
    spec = spec.replace(**changes) if changes else spec
    if n_resamples is None:
        n_resamples = spec.n_resamples
    reports = []
    for models, info, name in zip((models_a, models_b), infos, names, strict=True):
        info = list(info) if info is not None else [{"name": name}] * len(models)
        reports.append(
            [
                evaluate(m, spec, device=device, model_info=i, progress=progress)
                for m, i in zip(models, info, strict=True)
            ]
        )
    reports_a, reports_b = reports
    success = None
    sa, sb = _stack(reports_a, "episode_success"), _stack(reports_b, "episode_success")
    if sa is not None and sb is not None:
        success = paired_hierarchical_bootstrap(sa, sb, n_resamples=n_resamples, seed=seed)
    regret = None
    ra = _stack(reports_a, "per_state", "decision_regret")
    rb = _stack(reports_b, "per_state", "decision_regret")
    if ra is not None and rb is not None:
        regret = paired_hierarchical_bootstrap(
            ra, rb, ("training seed", "branch state"), n_resamples, seed
        )
    dicts_a = [r.to_dict() for r in reports_a]
    dicts_b = [r.to_dict() for r in reports_b]
    rows = []
    for level, key in HEADLINE:
        va = [_number(d, level, key) for d in dicts_a]
        vb = [_number(d, level, key) for d in dicts_b]
        if all(v is None for v in va + vb):
            continue
        a = None if None in va else float(np.mean(va))
        b = None if None in vb else float(np.mean(vb))
        diff = None if a is None or b is None else a - b
        rows.append({"level": level, "metric": key, "a": a, "b": b, "difference": diff})
    return Comparison(tuple(names), reports_a, reports_b, success, regret, rows)
