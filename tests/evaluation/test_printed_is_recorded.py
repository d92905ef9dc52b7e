"""What ``python -m eval`` prints is what it records: every number of the printed tables of
``--compare``, ``--card`` and ``--levels`` is read back from stdout and checked against the JSON
written, and every recorded number of the levels asked for is printed.

The reference here walks the JSON on its own (``_recorded``), apart from the renderer
(``gridplan.evaluation.tabular``), so a row that shows another row's number, or a measured level
left unprinted, fails."""

from __future__ import annotations

import json
import re

import pytest

from eval.cli import main
from gridplan.evaluation.schema import LEVEL_TITLES

TINY = ["--ladder-sizes", "tiny", "--depth", "1", "--seeds", "1", "--episodes", "2"]
TINY += ["--eval-windows", "8", "--horizon", "4", "--no-progress"]
MODELS = ["oracle", "noise,sigma_r=0.35,sigma_i=0.1", "noise,sigma_r=0.1"]
#: Report keys that are not printed numbers: settings, text, and series drawn as figures.
NOT_NUMBERS = {"step_profile", "curve", "planning", "protocol", "decoder", "source"}
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _run(argv: list[str], capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def _close(text: str, value) -> bool:
    """``text`` shows ``value`` at its own precision (``n/a`` for an undefined one)."""
    if value is None:
        return text == "n/a"
    digits = len(text.partition(".")[2])
    return abs(float(text) - value) <= 0.5 * 10**-digits + 1e-12


def _check_numbers(texts: list[str], values: list, where: str) -> None:
    assert len(texts) == len(values), (where, texts, values)
    for text, value in zip(texts, values, strict=True):
        assert _close(text, value), (where, text, value)


# --compare ---------------------------------------------------------------------------------


def _columns(header: str) -> list[int]:
    """Start of each column of a printed table: its header cells stand two spaces apart."""
    return [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header)]


def _printed_comparison(out: str) -> dict[tuple[str, str], list[str]]:
    """(level, metric) -> the cells of its printed row, cut at the header's columns."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("level "))
    starts = _columns(lines[start]) + [None]
    printed = {}
    for line in lines[start + 1 :]:
        if line.startswith("baseline: "):
            break
        cells = [line[a:b].strip() for a, b in zip(starts, starts[1:], strict=False)]
        assert (cells[0], cells[1]) not in printed, f"printed twice: {cells[:2]}"
        printed[(cells[0], cells[1])] = cells[2:]
    return printed


def _check_comparison(out: str, recorded: dict) -> dict:
    printed = _printed_comparison(out)
    rows = {(r["level"], r["metric"]): r for r in recorded["rows"]}
    assert len(rows) == len(recorded["rows"])  # a row is named by level and metric
    assert set(printed) == set(rows)
    names = [m["name"] for m in recorded["models"]]
    for key, cells in printed.items():
        row = rows[key]
        _check_numbers([cells[0]], [row["values"][names[0]]], f"{key} {names[0]}")
        for i, name in enumerate(names[1:]):
            value, diff = cells[1 + 2 * i], cells[2 + 2 * i]
            _check_numbers([value], [row["values"][name]], f"{key} {name}")
            d = row["differences"][name]
            expected = [x for x in (d["difference"], d["low"], d["high"]) if x is not None]
            _check_numbers(NUMBER.findall(diff), expected, f"{key} d({name})")
            assert diff.endswith("*") == bool(d["low"] is not None and d["indicative"])
    return printed


def _markdown_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip()[1:-1].split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    ]


def test_compare_prints_every_recorded_row_and_the_markdown_shows_the_same(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    argv = ["--compare", *MODELS[:2], "--levels", "L5,probe", "--json", str(out), *TINY]
    text = _run(argv, capsys)
    recorded = json.loads(out.read_text())
    printed = _check_comparison(text, recorded)
    # L5 and the probe both record a reward_error: each row shows its own level's.
    l5, probe = printed[("L5", "reward_error")], printed[("probe", "reward_error")]
    reports = recorded["reports"][MODELS[1]][0]["ladder"]
    assert _close(l5[1], reports["L5"]["reward_error"]["mean"])
    assert _close(probe[1], reports["probe"]["reward_error"]["mean"])
    # The Markdown beside it is the same table: its value cells are the printed ones.
    body = _markdown_rows(out.with_suffix(".md").read_text())[1:]
    assert [cells[2:] for cells in body] == [
        printed[(r["level"], r["metric"])] for r in recorded["rows"]
    ]


@pytest.mark.slow
def test_compare_of_three_models_at_every_level_prints_what_it_records(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    text = _run(["--compare", *MODELS, "--json", str(out), *TINY], capsys)
    recorded = json.loads(out.read_text())
    printed = _check_comparison(text, recorded)
    measured = {r["level"] for r in recorded["rows"]}
    assert measured >= {"closed loop", "L1", "L4", "L5", "L6", "L7", "probe"}
    assert {level for level, _ in printed} == measured


# one report: --card, --levels ----------------------------------------------------------------


def _section(title: str) -> str | None:
    """The section a printed table's title names (None: a line that is no table's title)."""
    if title.startswith("closed loop"):
        return "closed loop"
    if title.startswith("L1 error profile"):
        return "L1 profile"
    if title.startswith("latent model"):
        return "latent"
    for level, words in LEVEL_TITLES.items():
        if title.startswith((f"{level} {words}", words)):
            return level
    return None


def _printed_report(out: str) -> dict[tuple[str, str], list[str]]:
    """(section, metric) -> the printed cells after the metric."""
    printed, section = {}, None
    for line in out.splitlines():
        if not line.startswith("  "):
            section = _section(line)
        elif section is not None:
            cells = re.split(r" {2,}", line.strip())
            assert (section, cells[0]) not in printed, f"printed twice: {section} {cells[0]}"
            printed[(section, cells[0])] = cells[1:]
    return printed


def _value_interval(cells: list[str]) -> tuple[str, str]:
    """A row's value and interval (the interval column may be empty, the meaning too)."""
    interval = cells[1] if len(cells) > 1 and cells[1].startswith(("[", "±")) else ""
    return cells[0], interval


def _leaves(value, path: str, out: dict) -> None:
    """Every number under ``value`` by path: a mean as one leaf, a list of named records
    (L6's anchors) as ``<field>/<name>``, lists of numbers (figures) and text left out."""
    if isinstance(value, dict) and "n" in value and ("mean" in value or "rho" in value):
        out[path] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in NOT_NUMBERS:
                _leaves(item, f"{path}/{key}".lstrip("/"), out)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        parent = path.rpartition("/")[0]
        for record in value:
            for key, item in record.items():
                if key != "name":
                    out[f"{parent}/{key}/{record['name']}".lstrip("/")] = item
    elif value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        out[path] = value


def _recorded(report: dict) -> dict[tuple[str, str], object]:
    """(section, path) -> recorded value of every number of the report's measured parts."""
    parts = {}
    if "success" in report:
        parts["closed loop"] = {k: report[k] for k in ("success", "outcomes", "mean_steps")}
    if "E_tot" in report:
        l1 = ("E_tot", "DRPE", "VPE", "event_audit", "oracle_floor", "E_repr", "E_pred")
        parts["L1"] = {k: report[k] for k in (*l1, "E_excess") if k in report}
        parts["L1 profile"] = report["profile"]
    if report.get("latent"):
        parts["latent"] = report["latent"]
    parts.update(report.get("ladder", {}))
    out = {}
    for section, numbers in parts.items():
        leaves: dict = {}
        _leaves(numbers, "", leaves)
        out.update({(section, path): value for path, value in leaves.items()})
    return out


def _check_report(out: str, report: dict) -> dict:
    printed = _printed_report(out)
    recorded = _recorded(report)
    assert set(printed) == set(recorded), set(printed) ^ set(recorded)
    ci = report.get("profile_ci", {})
    for (section, path), cells in printed.items():
        value, where = recorded[(section, path)], f"{section} {path}"
        if section == "L1 profile":  # relevant, weight, error, interval (where recorded)
            _check_numbers([cells[2]], [value], where)
            _check_numbers(NUMBER.findall(" ".join(cells[3:])), ci.get(path, []), where)
        elif isinstance(value, dict) and "low" in value:
            shown, interval = _value_interval(cells)
            _check_numbers([shown], [value.get("mean", value.get("rho"))], where)
            bounds = [x for x in (value["low"], value["high"]) if x is not None]
            _check_numbers(NUMBER.findall(interval), bounds, where)
        elif isinstance(value, dict):  # closed-loop success: mean ± SE (SE, n=N)
            shown, interval = _value_interval(cells)
            _check_numbers([shown], [value["mean"]], where)
            se = interval.split()[1]
            assert interval == f"± {se} (SE, n={value['n']})"
            _check_numbers([se], [value["se"]], where)
        else:
            _check_numbers([cells[0]], [value], where)
    return printed


def test_the_papers_report_prints_what_it_records_and_no_intervals_it_lacks(tmp_path, capsys):
    out = tmp_path / "paper.json"
    argv = ["--model", "noise", "--sigma-r", "0.35", "--json", str(out)]
    text = _run([*argv, *TINY[2:]], capsys)
    report = json.loads(out.read_text())
    assert "profile_ci" not in report  # the paper's report (schema 1) records no intervals
    title = next(line for line in text.splitlines() if line.startswith("L1 error profile"))
    assert title == (
        "L1 error profile (open-loop MSE over H=4 steps, ordered by graded relevance weight)"
    )
    printed = _check_report(text, report)
    assert {section for section, _ in printed} == {"closed loop", "L1", "L1 profile"}


def test_levels_l1_l4_print_the_l1_section_as_recorded(tmp_path, capsys):
    out = tmp_path / "l1l4.json"
    argv = ["--model", "noise", "--sigma-r", "0.35", "--levels", "L1,L4", "--json", str(out)]
    text = _run([*argv, *TINY], capsys)
    report = json.loads(out.read_text())
    printed = _check_report(text, report)
    assert {section for section, _ in printed} == {"L1", "L1 profile", "L4"}
    assert ("L1", "E_tot") in printed and ("L1", "DRPE/graded") in printed


def test_card_prints_every_recorded_number_and_writes_the_same_tables(tmp_path, capsys):
    out = tmp_path / "noisy.json"
    argv = ["--model", "noise", "--sigma-r", "0.35", "--sigma-i", "0.1", "--card"]
    text = _run([*argv, "--json", str(out), *TINY], capsys)
    report = json.loads(out.read_text())
    printed = _check_report(text, report)
    assert {s for s, _ in printed} >= {"closed loop", "L1", "L4", "L5", "L6", "L7", "probe"}
    # The card shows the printed tables: every printed row is a row of its Markdown.
    card = {tuple(cells) for cells in _markdown_rows(out.with_name("noisy.card.md").read_text())}
    for (section, metric), cells in printed.items():
        if section == "L1 profile":
            assert (metric, *cells) in card
        else:
            shown, interval = _value_interval(cells)
            assert any(row[:3] == (metric, shown, interval) for row in card), (section, metric)
