"""Strict JSON for every file gridplan writes: NaN and inf become ``null``.

Python's ``json`` writes a bare ``NaN`` by default, which strict parsers (JavaScript,
``jq``, ``json.loads(..., parse_constant=...)`` that rejects constants) refuse. Every JSON
writer of the library and the command lines goes through ``dumps``, so an undefined number
(the SE of a single episode, a metric with no event) reads as ``null``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch


def to_jsonable(obj):
    """Convert records and configs (their ``to_dict``), dataclasses, tensors, arrays, paths and
    NaN/inf floats (-> None) for JSON."""
    if hasattr(obj, "to_dict") and callable(obj.to_dict) and not isinstance(obj, type):
        return to_jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, torch.Tensor):
        return to_jsonable(obj.detach().cpu().tolist())
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def dumps(obj, **kwargs) -> str:
    """``json.dumps`` of ``to_jsonable(obj)`` with ``allow_nan=False`` (keywords passed on).

    Raises:
        TypeError: if ``obj`` holds something ``to_jsonable`` does not convert.
    """
    return json.dumps(to_jsonable(obj), allow_nan=False, **kwargs)
