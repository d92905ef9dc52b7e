"""Helpers every layer may use: atomic file writes, JSON of tensors, progress lines, threads.

Nothing here knows the gridworld. ``files`` (atomic writes), ``jsonio`` (tensors and dataclasses
to JSON), ``progress`` (a tqdm bar in a terminal, plain lines in a log), ``threads`` (OpenMP wait
policy and thread counts, set before torch starts its pool).
"""
