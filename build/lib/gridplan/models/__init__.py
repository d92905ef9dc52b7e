"""World models: the ``WorldModel`` contract, the controlled family, learned MLPs, ensembles.

``contract`` (the ``WorldModel`` contract and its optional declarations), ``noise`` (the
oracle, ``M(sigma_r, sigma_i)``, AR(1) noise; paper §4.2), ``learned`` (MLP dynamics and
self-describing checkpoints; §5.4), ``ensemble`` (bootstrapped ensembles), ``plugins`` (a
user's model from ``file.py:factory`` behind contract checks). Models know nothing of the
planner; the planner chooses how to score a model's leaves (``gridplan.planning.registry``).
"""
