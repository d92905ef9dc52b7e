"""Config folder of ``gridplan.conf`` (``configs/__init__.py``)."""
