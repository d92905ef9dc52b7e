"""The DRPE paper's reference numbers, each with the table, figure or section it comes from.

Every experiment table prints these beside our numbers (paper §5). Values are kept as the
paper prints them (``text``), so a table shows "0.97", not "0.970000"; ``value`` is the float.
Sources: the paper's §5 and Tables 1-3, and its appendix (sections A-J, Table 4). Numbers
that the paper gives only in words carry the section; derived numbers say how they were
derived in ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperValue:
    """One number of the paper.

    Attributes:
        text: the number as printed, e.g. ``"0.97"`` or ``"-0.98"``.
        source: where it is printed, e.g. ``"Table 2"``, ``"§5.3"``, ``"appendix H"``.
        se: the printed standard error, if any.
        ci: the printed bootstrap 95% CI ``(low, high)``, if any.
        note: how a derived number was obtained, or what it counts.
    """

    text: str
    source: str
    se: str | None = None
    ci: tuple[str, str] | None = None
    note: str = ""

    @property
    def value(self) -> float:
        """The number as a float."""
        return float(self.text)

    def cell(self) -> str:
        """Markdown cell text: ``0.97 ± 0.01``, ``-0.32 [-0.56, -0.04]`` or ``0.020``."""
        out = self.text
        if self.se is not None:
            out += f" ± {self.se}"
        if self.ci is not None:
            out += f" [{self.ci[0]}, {self.ci[1]}]"
        return out


def _pv(text: str, source: str, **kw) -> PaperValue:
    return PaperValue(text, source, **kw)


#: Table 1: Spearman ρ of total error and of DRPE with closed-loop success, per model pool.
#: ``learned`` is the seven learned variants alone (§5.2 text, appendix "Learned-model results").
TABLE_1: dict[str, dict[str, PaperValue]] = {
    "all": {
        "n": _pv("55", "Table 1"),
        "E_tot": _pv("-0.25", "Table 1"),
        "DRPE": _pv("-0.84", "Table 1"),
    },
    "grid": {
        "n": _pv("48", "Table 1"),
        "E_tot": _pv("-0.32", "Table 1", ci=("-0.56", "-0.04")),
        "DRPE": _pv("-0.98", "Table 1", ci=("-1.00", "-0.94")),
    },
    "sweep_graded": {
        "n": _pv("24", "Table 1"),
        "E_tot": _pv("-0.24", "Table 1", ci=("-0.62", "0.19")),
        "DRPE": _pv("-0.99", "Table 1", ci=("-1.00", "-0.94")),
    },
    "sweep_binary": {
        "n": _pv("24", "Table 1"),
        "E_tot": _pv("-0.24", "Table 1"),
        "DRPE": _pv("-0.99", "Table 1"),
    },
    "learned": {"n": _pv("7", "§5.2"), "E_tot": _pv("0.43", "§5.2"), "DRPE": _pv("0.43", "§5.2")},
}

#: Iso-error pairs (E_tot within 10%): Spearman of |ΔDRPE| against |Δsuccess| (§5.2).
ISO_PAIRS: dict[str, PaperValue] = {
    "rho": _pv("0.97", "§5.2, Table 1 caption"),
    "n_pairs": _pv("77", "§5.2, Table 1 caption"),
}

#: Table 2: the headline rows. DRPE of the oracle and of M(0, 0.3) is printed as 0.000.
TABLE_2: dict[str, dict[str, PaperValue]] = {
    "oracle": {
        "E_tot": _pv("0.020", "Table 2"),
        "DRPE": _pv("0.000", "Table 2"),
        "success": _pv("0.97", "Table 2", se="0.01"),
    },
    "M(0, 0.3)": {
        "E_tot": _pv("0.151", "Table 2"),
        "DRPE": _pv("0.000", "Table 2"),
        "success": _pv("0.97", "Table 2", se="0.01"),
    },
    "M(0.35, 0.1)": {
        "E_tot": _pv("0.152", "Table 2"),
        "DRPE": _pv("0.234", "Table 2"),
        "success": _pv("0.37", "Table 2", se="0.02"),
    },
}

#: §5.1 / appendix F in numbers.
E1_TEXT: dict[str, PaperValue] = {
    "headline_success_gap": _pv("0.60", "§5.1", note="M(0, 0.3) vs M(0.35, 0.1)"),
    "headline_etot_gap": _pv("0.01", "§5.1", note="relative E_tot difference of the pair"),
    "row_etot_factor_low": _pv("14", "§5.1", note="E_tot max/min along a fixed-σR row"),
    "row_etot_factor_high": _pv("91", "§5.1", note="E_tot max/min along a fixed-σR row"),
}

#: §5.3, Figure 3/5, appendix H: Task B, σ = 0.8 noise on c1 only or on c2 only.
E5: dict[str, dict[str, PaperValue]] = {
    "success_A": {"c1": _pv("0.97", "§5.3"), "c2": _pv("0.97", "§5.3")},
    "success_B": {
        "c1": _pv("0.82", "§5.3, Figure 3", se="0.02"),
        "c2": _pv("0.97", "§5.3, Figure 3", se="0.01"),
    },
    "E_tot": {"c1": _pv("0.310", "§5.3"), "c2": _pv("0.333", "§5.3")},
    "DRPE_task": {"c1": _pv("0.214", "§5.3"), "c2": _pv("0.000", "§5.3")},
    "outcomes_B_c1": {
        "episodes": _pv("240", "appendix H"),
        "hazard": _pv("35", "appendix H"),
        "timeout": _pv("8", "appendix H"),
        "goal": _pv("197", "appendix H", note="derived: 240 - 35 - 8"),
    },
}

#: §5.4 and appendix A on E6's topics. The depth, horizon and fan results are figures
#: (Fig. 6a, 6b, 7) whose claims are qualitative; ``E6_CLAIMS`` states them.
E6: dict[str, PaperValue] = {
    "VPE_rho": _pv("-0.98", "appendix A (value-prediction error)", note="48-model grid"),
    "DRPE_rho": _pv("-0.98", "Table 1", note="48-model grid"),
}
E6_CLAIMS: dict[str, str] = {
    "depth": "relevant noise hurts more the deeper the planner imagines; irrelevant noise never "
    "matters (§5.4, Fig. 6a)",
    "horizon": "prediction error grows with the horizon for relevant noise while DRPE stays "
    "zero for irrelevant noise (§5.4, Fig. 6b)",
    "fans": "imagined positions of the irrelevant-noise model trace the true trajectory; those "
    "of the relevant-noise model fan out (§5.4, Fig. 7)",
    "ar1": "with AR(1) noise, irrelevant noise stays harmless and relevant noise harmful, the "
    "relevant-noise dose response not monotone (appendix A)",
}

#: Table 3 (E3): learned variants, success mean ± SE over 5 training seeds x 40 episodes.
TABLE_3: dict[str, dict[str, PaperValue]] = {
    "uniform_20k": {
        "success": _pv("0.75", "Table 3", se="0.03"),
        "E_tot": _pv("0.145", "Table 3"),
        "DRPE": _pv("0.076", "Table 3"),
    },
    "event_weighted_20k": {
        "success": _pv("0.79", "Table 3", se="0.07"),
        "E_tot": _pv("0.128", "Table 3"),
        "DRPE": _pv("0.043", "Table 3"),
    },
    "anti_weighted_20k": {
        "success": _pv("0.40", "Table 3", se="0.04"),
        "E_tot": _pv("0.168", "Table 3"),
        "DRPE": _pv("0.105", "Table 3"),
    },
    "rel_heavy_20k": {
        "success": _pv("0.35", "Table 3", se="0.10"),
        "E_tot": _pv("0.111", "Table 3"),
        "DRPE": _pv("0.020", "Table 3"),
    },
    "rel_only_20k": {
        "success": _pv("0.04", "Table 3", se="0.04"),
        "E_tot": _pv("0.102", "Table 3"),
        "DRPE": _pv("0.011", "Table 3"),
    },
    "uniform_12k": {
        "success": _pv("0.70", "Table 3", se="0.05"),
        "E_tot": _pv("0.355", "Table 3"),
        "DRPE": _pv("0.383", "Table 3"),
    },
    "uniform_4k": {
        "success": _pv("0.47", "Table 3", se="0.01"),
        "E_tot": _pv("0.187", "Table 3"),
        "DRPE": _pv("0.125", "Table 3"),
    },
}

#: §5.4 (i), appendix E/G: the model trained on 12k uniform-random transitions.
RANDOM_DATA_12K: dict[str, PaperValue] = {
    "success": _pv("0.00", "§5.4"),
    "carrying_at_pickup": _pv("0.19", "§5.4"),
    "pickup_event_mse": _pv("0.67", "§5.4"),
    "carrying_mse": _pv("0.070", "§5.4, appendix G"),
    "position_mse_low": _pv("0.001", "§5.4"),
    "position_mse_high": _pv("0.006", "§5.4"),
    "balanced_carrying_mse": _pv("0.080", "appendix G"),
}

#: Appendix A / Table 4 (E4): estimated relevance weights and approximate masks.
TABLE_4: dict[str, PaperValue] = {
    "estimated_rho": _pv("-0.24", "appendix A (relevance estimation)"),
    "estimated_irrelevant_mass_low": _pv("0.39", "appendix A (relevance estimation)"),
    "estimated_irrelevant_mass_high": _pv("0.42", "appendix A (relevance estimation)"),
    "exact_mask_rho": _pv("-0.98", "Table 4"),
    "c1_false_positive_rho": _pv("-0.45", "Table 4"),
    "dropped_relevant_rho": _pv("-0.98", "Table 4", note="false negatives"),
}
