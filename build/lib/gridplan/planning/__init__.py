"""Planning in a world model: leaf scorers, the full-width search and the closed loop.

``scorers`` (the ``LeafScorer`` interface and the generic one over ``predict``), ``tree`` (the
shared-prefix tree), ``fused`` (the noise family rolled on the relevant dims only), ``planner``
(``Planner``: expand, score, reduce, tie-break), ``closed_loop`` (plan in the model, act in the
environment), ``reference`` (the one-episode plain-Python version the tests check against).
Paper §3 "Planner".
"""
