"""Training entry points for gridplan."""
