"""Logged data: behaviour policies, transition datasets and held-out evaluation windows.

``datasets`` (``random``/``balanced``/``expert`` behaviour policies, budgets, ``collect``,
``TransitionDataset``, ``EvalWindows``). Paper §5.4, §5.5. ``export``: the datasets the
trainer uses as ``.npz`` files with their fingerprint (``python -m gridplan.data export``,
console script ``gridplan-data``).
"""
