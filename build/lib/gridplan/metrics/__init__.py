"""Metrics of a model and statistics over models.

``prediction`` (E_tot, DRPE, profiles, event audit, VPE; paper §3 "Metrics", §4.1),
``relevance_estimation`` (estimated relevance weights; §4.1, §5.2), ``stats`` (mean ± SE,
Spearman with bootstrap CIs, iso-error pairs; §5), ``bootstrap`` (paired hierarchical bootstrap).
"""
