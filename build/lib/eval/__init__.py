"""Evaluation entry points for gridplan."""
