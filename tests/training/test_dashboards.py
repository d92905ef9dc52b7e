"""TensorBoard custom-scalar charts (gridplan.training.module.dashboard_layout): per-dimension
errors grouped by relevance with their weights, flags apart from positions and event flags
apart from event errors."""

from __future__ import annotations

import re

import pytest
from paper_layout import DIM_NAMES, FLAG_DIMS

from gridplan.core import tasks
from gridplan.core.relevance import relevance_weights
from gridplan.training.module import (
    EVENT_ERRORS,
    EVENT_FLAGS,
    dashboard_layout,
    metric_scalars,
    relevance_text,
    write_dashboards,
)


def _charts(prefix: str, task) -> dict[str, list[str]]:
    """``{title: tags of the scalars the chart draws}`` among ``metric_scalars``' tags."""
    tags = [f"{prefix}/err_dim/{n}" for n in DIM_NAMES]
    tags += [f"{prefix}/event/{n}" for n in (*EVENT_ERRORS, *EVENT_FLAGS)]
    tags += [f"{prefix}/E_tot", f"{prefix}/DRPE_graded", f"{prefix}/DRPE_binary"]
    layout = dashboard_layout(prefix, task)
    assert list(layout) == [prefix]
    out = {}
    for title, (kind, patterns) in layout[prefix].items():
        assert kind == "Multiline"
        out[title] = [t for t in tags if any(re.search(p, t) for p in patterns)]
    return out


@pytest.mark.parametrize("name", ["A", "B"])
def test_dimension_charts_split_relevance_and_kind_and_name_the_weights(name):
    task = tasks.get(name)
    weights = relevance_weights(task)
    charts = _charts("val", task)
    dims = {
        title: [t.rsplit("/", 1)[1] for t in found]
        for title, found in charts.items()
        if found and "/err_dim/" in found[0]
    }
    assert sorted(d for found in dims.values() for d in found) == sorted(DIM_NAMES)
    relevant = {DIM_NAMES[d] for d in task.relevant_dims}
    flags = {DIM_NAMES[d] for d in FLAG_DIMS}
    for title, found in dims.items():
        # One chart holds relevant or irrelevant dims, positions or flags, never a mix.
        assert len({n in relevant for n in found}) == 1, title
        assert len({n in flags for n in found}) == 1, title
        if found[0] in relevant:
            assert title.startswith("relevant ")
            shown = dict(re.findall(r"(\w+) (\d\.\d{3})", title.split(": ", 1)[1]))
            assert sorted(shown) == sorted(found)  # each dim with its weight, most relevant first
            for n, w in shown.items():
                assert float(w) == pytest.approx(float(weights[DIM_NAMES.index(n)]), abs=5e-4)
            assert [float(w) for w in shown.values()] == sorted(
                (float(w) for w in shown.values()), reverse=True
            )
        else:
            assert title.startswith("irrelevant ") and "(weight 0)" in title
    in_b_relevant = [t for t, found in dims.items() if "c1" in found][0]
    assert in_b_relevant.startswith("relevant flags" if name == "B" else "irrelevant flags")


def test_event_flags_and_event_errors_are_separate_charts():
    charts = _charts("eval", tasks.get("A"))
    errors = charts["event audit: squared errors at pickups and door openings"]
    flags = charts["event audit: predicted flag at the event (truth 1)"]
    assert errors == [f"eval/event/{n}" for n in EVENT_ERRORS]
    assert flags == [f"eval/event/{n}" for n in EVENT_FLAGS]
    assert charts["E_tot and DRPE"] == ["eval/E_tot", "eval/DRPE_graded", "eval/DRPE_binary"]
    every = [t for found in charts.values() for t in found]
    assert len(every) == len(set(every))  # no scalar drawn twice


def test_the_event_names_are_the_audits(tmp_path):
    """``EVENT_ERRORS`` and ``EVENT_FLAGS`` are every event scalar ``metric_scalars`` logs."""
    audit = {n: 0.5 for n in (*EVENT_ERRORS, *EVENT_FLAGS)}
    metrics = {
        "E_tot": 0.1,
        "DRPE": {"graded": 0.1, "binary": 0.1},
        "profile": dict.fromkeys(DIM_NAMES, 0.1),
        "event_audit": {**audit, "n_pickup": 3, "n_door": 2},
    }
    events = {t for t in metric_scalars(metrics, "val") if "/event/" in t}
    assert events == {f"val/event/{n}" for n in audit}


def test_write_dashboards_adds_the_layout_and_the_relevance_table(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    write_dashboards(writer, "val", tasks.get("A"))
    writer.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    events.Reload()
    text = events.Tensors("val/relevance/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text == relevance_text(tasks.get("A"))
    assert "| agent_x | 0.2740 | yes | position |" in text
    assert "| carrying | 0.2064 | yes | flag |" in text
    assert "| d2_y | 0.0000 | no | position |" in text
    assert "custom_scalars__config__" in events.Tags()["tensors"]
