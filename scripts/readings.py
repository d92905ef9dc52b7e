"""Measure every reading of the paper's ambiguous choices on E1, E2, E5 and E6, side by side.

Examples::

    python scripts/readings.py                          # every registered reading, full protocol
    python scripts/readings.py --readings project,paper --profile quick --out results
    python scripts/readings.py --no-run                 # the tables from finished runs only
    python scripts/readings.py --readings project,paper --ties random   # under random ties

For each reading (``gridplan/core/readings.py``) the groups e1, e2, e5 and e6 of
``scripts/reproduce.py`` run into the reading's folder (``<out>`` for ``project``,
``<out>/<reading>`` otherwise; finished groups are reused, as by ``reproduce.py``). Then
``<out>/readings.md`` gets the comparison: Table 2 with the paper's exact pair under each
reading, the row factor, Table 1's ρ, E5's Task B success and outcomes, E6's depth effect and
AR(1) dose response, and which reading reproduces which of the paper's effects (the groups'
verdicts; sanity checks are not counted). ``<out>/readings.json`` holds the same numbers.
``scripts/results_doc.py`` copies ``readings.md`` into ``docs/RESULTS.md``.
``--ties first|random`` runs every reading under that tie rule of the planner: a reading whose
own rule differs runs as ``<reading>-ties-<rule>`` (``gridplan.core.readings.with_ties``) into
its own folder.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)

import torch  # noqa: E402

from gridplan.core import readings  # noqa: E402
from gridplan.core.env import reset  # noqa: E402
from gridplan.core.tasks import TASK_A  # noqa: E402
from gridplan.experiments import GROUPS, PROFILES, paper, run_groups  # noqa: E402
from gridplan.experiments.runner import RESULTS_FILE, group_folders, read_done  # noqa: E402
from gridplan.experiments.tables import fmt, md_table  # noqa: E402
from gridplan.models.noise import NoiseModel  # noqa: E402
from gridplan.planning.planner import Planner  # noqa: E402
from gridplan.planning.registry import through_predict  # noqa: E402
from gridplan.util.fragments import read_fragments  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402

#: The groups whose effects depend on the reading.
COMPARED = ("e1", "e2", "e5", "e6")
#: The groups of learned models: their readings are the tie rule and the training preset.
LEARNED = ("e3", "e4", "e7")
#: E1 models whose numbers the explanations quote.
QUOTED = ("M(0, 0)", "M(0, 0.3)", "M(0.35, 0.1)", "M(0, 1.2)", "M(0.35, 0)")
#: Per-dimension errors the explanations quote.
QUOTED_DIMS = ("err_c1", "err_carrying", "err_d1_x", "err_d2_x")
SUMMARY_FILE = "readings.md"
SUMMARY_JSON = "readings.json"
PAIR = ("M(0, 0.3)", "M(0.35, 0.1)")
PAPER_SWITCHES = readings.PAPER.switches()
#: The prose of readings.md: named fragments with ``${...}`` placeholders.
TEMPLATE = Path(__file__).resolve().parent / "templates" / "readings.md"
TEXT = read_fragments(TEMPLATE)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python scripts/readings.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--readings",
        default=",".join(readings.names()),
        help="comma-separated reading names (gridplan.core.readings)",
    )
    p.add_argument(
        "--ties",
        choices=readings.CHOICES["ties"],
        default=None,
        help="the planner's tie rule for every reading (default: each reading's own)",
    )
    p.add_argument("--profile", choices=PROFILES, default="full")
    p.add_argument("--out", default="results", help="results root folder (as reproduce.py)")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (0: gridplan.util.threads.default_threads, OMP_NUM_THREADS or 1)",
    )
    p.add_argument("--no-run", action="store_true", help="only tabulate finished groups")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return p


# --------------------------------------------------------------------------- reading results


def _load(folder: Path, profile: str) -> dict | None:
    done = read_done(folder)
    if done is None or done.get("profile") != profile:
        return None
    return {"done": done, "results": json.loads((folder / RESULTS_FILE).read_text())}


def learned_columns(out: Path, profile: str) -> dict[str, dict]:
    """The verdicts of the learned-model groups (``LEARNED``) in every folder of ``out`` that
    holds one finished under ``profile``: ``out`` itself (the default tie rule and training) and
    each subfolder, such as a tie rule's (``project-ties-random``) or a training preset's
    (``paper-error-scale``), keyed by the folder's name."""
    folders = {"default": out}
    if out.is_dir():
        folders |= {sub.name: sub for sub in sorted(out.iterdir()) if sub.is_dir()}
    columns = {}
    for name, folder in folders.items():
        runs = {g: _load(folder / g, profile) for g in LEARNED}
        verdicts = {
            g: {v["claim"]: v["reproduced"] for v in r["done"]["verdicts"]}
            for g, r in runs.items()
            if r is not None
        }
        if verdicts:
            columns[name] = {"verdicts": verdicts}
    return columns


def _rho(entry: dict | None, key: str) -> float | None:
    if not entry or not entry.get(key):
        return None
    return entry[key]["rho"]


def summarize(folders: dict[str, Path], profile: str) -> dict:
    """The compared numbers of one reading from its finished groups (None where missing)."""
    runs = {g: _load(folders[g], profile) for g in COMPARED}
    out: dict = {"verdicts": {}, "missing": [g for g, r in runs.items() if r is None]}
    for g, r in runs.items():
        if r is not None:
            out["verdicts"][g] = {v["claim"]: v["reproduced"] for v in r["done"]["verdicts"]}
    if runs["e1"]:
        res = runs["e1"]["results"]
        t2 = {row["row"]: row for row in res["table2"]}
        factors = [r["E_tot_factor"] for r in res["rows"] if r["E_tot_factor"] is not None]
        a, b = t2[PAIR[0]], t2[PAIR[1]]
        found = a["E_tot"] is not None and b["E_tot"] is not None
        out["e1"] = {
            "oracle_E_tot": t2["oracle"]["E_tot"],
            "pair": {k: {f: t2[k][f] for f in ("E_tot", "DRPE_graded", "success")} for k in PAIR},
            "pair_E_tot_gap": (
                abs(a["E_tot"] - b["E_tot"]) / max(a["E_tot"], b["E_tot"]) if found else None
            ),
            "pair_success_gap": a["success"] - b["success"] if found else None,
            "row_factor": [min(factors), max(factors)],
            "iso_pairs": len(res["iso_pairs"]["pairs"]),
            "models": {
                m["name"]: {k: m[k] for k in ("E_tot", "success", *QUOTED_DIMS)}
                for m in res["models"]
                if m["name"] in QUOTED
            },
        }
    if runs["e2"]:
        sp = runs["e2"]["results"]["spearman"]
        out["e2"] = {
            pool: {"E_tot": _rho(sp.get(pool), "E_tot"), "DRPE": _rho(sp.get(pool), "DRPE")}
            for pool in ("grid", "sweep_graded", "sweep_binary", "all")
        }
    if runs["e5"]:
        res = runs["e5"]["results"]
        rows = {(m["model"], m["task"]): m for m in res["models"]}
        c1 = rows[("c1-noise", "B")]
        out["e5"] = {
            "c1_B_success": c1["success"],
            "c1_B_se": c1["success_se"],
            "c1_B_outcomes": [c1[k] for k in ("goal", "hazard", "timeout")],
            "n_episodes": c1["n_episodes"],
            "E_tot": [rows[(m, "B")]["E_tot"] for m in ("c1-noise", "c2-noise")],
            "by_goal_counts": {
                r["true_goal"]: [r[k] for k in ("goal", "hazard", "timeout")]
                for r in res.get("by_goal", [])
                if r["model"] == "c1-noise"
            },
            "by_goal": {
                r["true_goal"]: r["success"]
                for r in res.get("by_goal", [])
                if r["model"] == "c1-noise"
            },
        }
    if runs["e6"]:
        res = runs["e6"]["results"]
        depth = {}
        for r in res["depth"]:
            if r["kind"] == "relevant" and r["sigma_r"] == max(x["sigma_r"] for x in res["depth"]):
                depth[r["depth"]] = r["success"]
        ar1 = sorted(
            (r["sigma_r"], r["success_ar1"]) for r in res["ar1"] if r["kind"] == "relevant"
        )
        out["e6"] = {"depth_success": depth, "ar1_success": ar1}
    return out


def learned_uniform(out: Path, profile: str) -> dict | None:
    """E_tot and the quoted per-dimension errors of e3's uniform-20k models (reading-free, so
    in the default folder), or None if e3 has not finished with this profile."""
    run = _load(group_folders(GROUPS, out)["e3"], profile)
    if run is None:
        return None
    for m in run["results"]["models"]:
        if m["key"] == "uniform_20k":
            return {k: m[k] for k in ("E_tot", *QUOTED_DIMS)}
    return None


def decision_costs(
    episodes: int = 300, depth: int = 4, repeats: int = 3, device: str = "cpu"
) -> list[dict]:
    """Milliseconds per decision of M(0.35, 0.1) at ``depth`` on ``episodes`` reset states,
    best of ``repeats``, for the four ways of scoring its leaves: fused or through
    ``predict``, independent leaves or shared prefixes. ``draws`` counts the normal draws of
    one decision per noisy dim (fused) or the model's predictions (through ``predict``)."""
    roots = reset(episodes, torch.Generator(device=device).manual_seed(0), TASK_A)
    shared = readings.PROJECT_SHARED_PREFIX
    leaves = 4**depth
    nodes = sum(4**t for t in range(1, depth + 1))
    variants = [
        ("fused", "independent", NoiseModel.controlled(0.35, 0.1), {}, depth * leaves),
        ("fused", "shared-prefix", NoiseModel.controlled(0.35, 0.1, reading=shared), {}, nodes),
        (
            "predict",
            "independent",
            NoiseModel.controlled(0.35, 0.1),
            {"factory": through_predict},
            depth * leaves,
        ),
        (
            "predict",
            "shared-prefix",
            NoiseModel.controlled(0.35, 0.1),
            {"tree": "shared-prefix", "factory": through_predict},
            nodes,
        ),
    ]
    rows = []
    for path, tree, model, kwargs, draws in variants:
        planner = Planner(model, depth, TASK_A, device=device, **kwargs)
        best = math.inf
        for r in range(repeats):
            gen = torch.Generator(device=device).manual_seed(r)
            t0 = time.perf_counter()
            planner.act(roots, gen)
            best = min(best, time.perf_counter() - t0)
        rows.append(
            {
                "path": path,
                "tree": tree,
                "scorer": type(planner.scorer).__name__,
                "draws_per_decision": draws,
                "ms_per_decision": 1000 * best / episodes,
            }
        )
    return rows


def cost_table(rows: list[dict]) -> str:
    return md_table(
        ["leaves scored", "tree", "scorer", "draws or predictions per decision", "ms / decision"],
        [
            [
                r["path"],
                r["tree"],
                r["scorer"],
                r["draws_per_decision"],
                fmt(r["ms_per_decision"], 3),
            ]
            for r in rows
        ],
    )


# --------------------------------------------------------------------------- tables


def _pct(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f}%"


def _paper_row_table2() -> list[str]:
    t2 = paper.TABLE_2
    a, b = (t2[k]["E_tot"].value for k in PAIR)
    return [
        "**paper**",
        t2["oracle"]["E_tot"].text,
        f"{t2[PAIR[0]]['E_tot'].text} / {t2[PAIR[1]]['E_tot'].text}",
        _pct(abs(a - b) / max(a, b)),
        t2[PAIR[1]]["DRPE"].text,
        f"{t2[PAIR[0]]['success'].text} / {t2[PAIR[1]]['success'].text}",
        "60",
    ]


def table2_table(summaries: dict[str, dict]) -> str:
    rows = [_paper_row_table2()]
    for name, s in summaries.items():
        e = s.get("e1")
        if e is None:
            rows.append([name] + ["not run"] * 6)
            continue
        a, b = (e["pair"][k] for k in PAIR)
        rows.append(
            [
                name,
                fmt(e["oracle_E_tot"]),
                f"{fmt(a['E_tot'])} / {fmt(b['E_tot'])}",
                _pct(e["pair_E_tot_gap"]),
                fmt(b["DRPE_graded"]),
                f"{fmt(a['success'], 2)} / {fmt(b['success'], 2)}",
                _pct(e["pair_success_gap"]).rstrip("%"),
            ]
        )
    headers = ["reading", "oracle E_tot", "E_tot M(0, .3) / M(.35, .1)", "E_tot gap"]
    headers += ["DRPE M(.35, .1)", "success M(0, .3) / M(.35, .1)", "success gap (points)"]
    return md_table(headers, rows)


def effects_table(summaries: dict[str, dict]) -> str:
    p1, p5 = paper.TABLE_1, paper.E5
    low, high = (paper.E1_TEXT[k].text for k in ("row_etot_factor_low", "row_etot_factor_high"))
    ref_b = p5["outcomes_B_c1"]
    rows = [
        [
            "**paper**",
            f"×{low}–×{high}",
            f"{p1['grid']['E_tot'].text} / {p1['grid']['DRPE'].text}",
            f"{p1['sweep_graded']['E_tot'].text} / {p1['sweep_graded']['DRPE'].text}",
            f"{p5['success_B']['c1'].cell()} ({ref_b['goal'].text}/{ref_b['hazard'].text}/"
            f"{ref_b['timeout'].text} of {ref_b['episodes'].text})",
            "—",
            f"{p5['E_tot']['c1'].text} / {p5['E_tot']['c2'].text}",
            "falls with D",
            "not monotone",
        ]
    ]
    for name, s in summaries.items():
        e1, e2, e5, e6 = (s.get(g) for g in COMPARED)
        cells = [name]
        low_f, high_f = e1["row_factor"] if e1 else (None, None)
        cells.append(f"×{fmt(low_f, 1)}–×{fmt(high_f, 1)}" if e1 else "—")
        for pool in ("grid", "sweep_graded"):
            cells.append(f"{fmt(e2[pool]['E_tot'], 2)} / {fmt(e2[pool]['DRPE'], 2)}" if e2 else "—")
        if e5:
            g, h, t = e5["c1_B_outcomes"]
            cells.append(
                f"{fmt(e5['c1_B_success'], 2)} ± {fmt(e5['c1_B_se'], 2)} "
                f"({g}/{h}/{t} of {e5['n_episodes']})"
            )
            goals = e5["by_goal"]
            cells.append(" / ".join(f"{fmt(goals[k], 2)}" for k in ("(7, 5)", "(7, 2)")))
            cells.append(f"{fmt(e5['E_tot'][0])} / {fmt(e5['E_tot'][1])}")
        else:
            cells += ["—"] * 3
        if e6:
            cells.append(" → ".join(fmt(v, 2) for _, v in sorted(e6["depth_success"].items())))
            cells.append(" → ".join(fmt(v, 2) for _, v in e6["ar1_success"]))
        else:
            cells += ["—"] * 2
        rows.append(cells)
    headers = ["reading", "row factor", "Table 1 ρ grid E_tot / DRPE", "ρ sweep E_tot / DRPE"]
    headers += ["E5 c1 Task B success (goal/hazard/timeout)", "by true goal (7, 5) / (7, 2)"]
    headers += ["E5 E_tot c1 / c2", "E6 M(.35, 0) success D = 1 → 2 → 4"]
    headers.append("E6 AR(1) success σR .15 → .25 → .35")
    return md_table(headers, rows)


def verdict_matrix(summaries: dict[str, dict], groups: tuple[str, ...] = COMPARED) -> str:
    """Claim x reading: ✓ reproduces, ✗ does not, · not checked; the count per reading."""
    claims: list[tuple[str, str]] = []
    for s in summaries.values():
        for g in groups:
            for claim in s["verdicts"].get(g, {}):
                if (g, claim) not in claims:
                    claims.append((g, claim))
    mark = {True: "✓", False: "✗", None: "·"}
    rows = []
    for g, claim in claims:
        cells = [g, claim]
        for s in summaries.values():
            v = s["verdicts"].get(g, {})
            cells.append(mark[v[claim]] if claim in v else "—")
        rows.append(cells)
    totals = ["", "**effects reproduced**"]
    for s in summaries.values():
        totals.append("{} of {}".format(*reproduced(s, groups)))
    rows.append(totals)
    return md_table(["group", "effect", *summaries], rows)


def switches_table(names: list[str]) -> str:
    keys = list(readings.CHOICES)
    rows = []
    for name in names:
        r = readings.get(name)
        rows.append([name, *(str(v) for v in r.switches().values())])
    return md_table(["reading", *keys], rows)


def _e1(summaries: dict, name: str, model: str, key: str = "E_tot") -> str:
    return fmt(summaries[name]["e1"]["models"][model][key])


def _has(summaries: dict, *names: str, group: str = "e1") -> bool:
    return all(summaries.get(n, {}).get(group) for n in names)


def explanations(summaries: dict[str, dict], learned: dict | None) -> list[str]:
    """The explanations of docs/RESULTS.md (fragments of ``TEMPLATE``), each quoting the
    measurements above (a paragraph is left out when a reading it needs was not run)."""
    s, out = summaries, []
    ladder = ("project", "unclamped", "noisy-bits", "expected-distractors", "carried-flags")
    if _has(s, *ladder, "flag-sigma-r", "belief"):
        irrelevant, relevant = PAIR  # M(0, 0.3), M(0.35, 0.1)
        out.append(
            TEXT["e1-pair"].substitute(
                weak_irrelevant=_e1(s, "project", irrelevant),
                pair_relevant=_e1(s, "project", relevant),
                pair_gap=_pct(s["project"]["e1"]["pair_E_tot_gap"]),
                carried_flags=_e1(s, "carried-flags", relevant),
                belief=_e1(s, "belief", relevant),
                c1_clamped=_e1(s, "project", irrelevant, "err_c1"),
                c1_carried=_e1(s, "noisy-bits", irrelevant, "err_c1"),
                noisy_bits=_e1(s, "noisy-bits", irrelevant),
                carrying_expected=_e1(s, "expected-distractors", relevant, "err_carrying"),
                expected_distractors=_e1(s, "expected-distractors", relevant),
                flag_sigma_r=_e1(s, "flag-sigma-r", relevant),
                carrying_carried=_e1(s, "carried-flags", relevant, "err_carrying"),
                floor_sampled=_e1(s, "project", "M(0, 0)"),
                d2_sampled=_e1(s, "project", "M(0, 0)", "err_d2_x"),
                floor_expected=_e1(s, "expected-distractors", "M(0, 0)"),
                d2_expected=_e1(s, "expected-distractors", "M(0, 0)", "err_d2_x"),
            )
        )
        rows = {n: s[n]["e1"]["row_factor"] for n in ladder}
        out.append(
            TEXT["e1-rows"].substitute(
                clamped=_e1(s, "project", "M(0, 1.2)"),
                clamped_low=fmt(rows["project"][0], 1),
                clamped_high=fmt(rows["project"][1], 1),
                unclamped=_e1(s, "unclamped", "M(0, 1.2)"),
                unclamped_high=fmt(rows["unclamped"][1], 1),
                noisy_bits=_e1(s, "noisy-bits", "M(0, 1.2)"),
                noisy_bits_high=fmt(rows["noisy-bits"][1], 1),
                expected_high=fmt(rows["expected-distractors"][1], 1),
                carried_flags_low=fmt(rows["carried-flags"][0], 1),
            )
        )
    if _has(s, "project", "noisy-bits", "expected-distractors", group="e5"):
        e = {n: s[n]["e5"]["E_tot"] for n in ("project", "noisy-bits", "expected-distractors")}
        out.append(
            TEXT["e5-scale"].substitute(
                c1_clamped=fmt(e["project"][0]),
                c2_clamped=fmt(e["project"][1]),
                walk=f"{0.8**2 * 11 / 2 / 12:.3f}",
                c1_carried=fmt(e["noisy-bits"][0]),
                c2_carried=fmt(e["noisy-bits"][1]),
                c1_expected=fmt(e["expected-distractors"][0]),
                c2_expected=fmt(e["expected-distractors"][1]),
            )
        )
    trees = [n for n in ("paper", "shared-prefix") if _has(s, n, group="e5")]
    tree = trees[0] if trees else None
    if _has(s, "project", group="e5") and tree:
        g = s["project"]["e5"]["by_goal"]
        t = s[tree]["e5"]
        goals, hazards, timeouts = t["c1_B_outcomes"]
        out.append(
            TEXT["e5-task-b"].substitute(
                near=fmt(g.get("(7, 5)"), 2),
                far=fmt(g.get("(7, 2)"), 2),
                tree=tree,
                success=fmt(t["c1_B_success"], 2),
                goals=goals,
                hazards=hazards,
                timeouts=timeouts,
                episodes=t["n_episodes"],
                by_goal=" / ".join(f"{k} {fmt(v, 2)}" for k, v in t["by_goal"].items()),
            )
        )
    if learned and _has(s, "project", "expected-distractors"):
        oracle = s["project"]["e1"]["models"]["M(0, 0)"]
        mean_floor = s["expected-distractors"]["e1"]["models"]["M(0, 0)"]["E_tot"]
        out.append(
            TEXT["e3-learned"].substitute(
                learned=fmt(learned["E_tot"]),
                oracle=fmt(oracle["E_tot"]),
                learned_d2=fmt(learned["err_d2_x"]),
                oracle_d2=fmt(oracle["err_d2_x"]),
                mean_floor=fmt(mean_floor),
                above_floor=fmt(learned["E_tot"] - mean_floor),
            )
        )
    if "paper" in s and all(s[n]["verdicts"] for n in s):
        out.append(_paper_paragraph(s))
    return out


def _flips(s: dict, frm: str, to: str) -> tuple[list[str], list[str]]:
    """The effects ``to`` reproduces and ``frm`` does not, and the reverse."""
    gained, lost = [], []
    for g in COMPARED:
        a, b = s[frm]["verdicts"].get(g, {}), s[to]["verdicts"].get(g, {})
        for claim in b:
            if b[claim] is True and a.get(claim) is False:
                gained.append(claim)
            if b[claim] is False and a.get(claim) is True:
                lost.append(claim)
    return gained, lost


def _paper_paragraph(s: dict) -> str:
    """What the ``paper`` reading is and how it was picked (post hoc, by its verdict count), from
    the verdict counts and numbers."""
    counts = {n: reproduced(x)[0] for n, x in s.items()}
    mine, total = reproduced(s["paper"])
    twins = [n for n in s if n != "paper" and readings.get(n).switches() == PAPER_SWITCHES]
    others = {n: c for n, c in counts.items() if n != "paper" and n not in twins}
    ahead = [n for n, c in others.items() if c > mine]
    tied = [n for n, c in others.items() if c == mine]
    pieces = dict.fromkeys(("twins", "rank", "e1", "belief", "gained", "lost"), "")
    if twins:
        pieces["twins"] = TEXT["paper-twins"].substitute(twin=twins[0])
    if ahead:
        ranked = ", ".join(f"`{n}` ({others[n]})" for n in ahead)
        pieces["rank"] = TEXT["paper-ahead"].substitute(ahead=ranked)
    else:
        level = ", ".join(f"`{n}`" for n in tied)
        pieces["rank"] = TEXT["paper-none-ahead"].substitute(
            tied=TEXT["paper-tied"].substitute(tied=level) if tied else ""
        )
    e1 = s["paper"].get("e1")
    if e1:
        pieces["e1"] = TEXT["paper-e1"].substitute(
            oracle=fmt(e1["oracle_E_tot"]),
            pair_gap=_pct(e1["pair_E_tot_gap"]),
            success_gap=_pct(e1["pair_success_gap"]).rstrip("%"),
        )
    if e1 and all(s.get("belief", {}).get(g) for g in ("e1", "e5")) and s["paper"].get("e5"):
        b5, p5 = s["belief"]["e5"], s["paper"]["e5"]
        b1, p1 = s["belief"]["e1"]["pair"][PAIR[1]], s["paper"]["e1"]["pair"][PAIR[1]]
        pieces["belief"] = TEXT["paper-belief"].substitute(
            belief_b=fmt(b5["c1_B_success"], 2),
            paper_b=fmt(p5["c1_B_success"], 2),
            belief_pair=fmt(b1["success"], 2),
            paper_pair=fmt(p1["success"], 2),
        )
    if "project" in s:
        gained, lost = _flips(s, "project", "paper")
        if gained:
            pieces["gained"] = TEXT["paper-gained"].substitute(claims="; ".join(gained))
        if lost:
            pieces["lost"] = TEXT["paper-lost"].substitute(claims="; ".join(lost))
    return TEXT["paper"].substitute(mine=mine, total=total, **pieces)


def reproduced(summary: dict, groups: tuple[str, ...] = COMPARED) -> tuple[int, int]:
    """Effects reproduced and effects checked over ``groups`` of one reading."""
    flat = [v for g in groups for v in summary["verdicts"].get(g, {}).values() if v is not None]
    return sum(flat), len(flat)


def write_summary(
    out: Path,
    names: list[str],
    summaries: dict[str, dict],
    profile: str,
    learned: dict | None,
    costs: list[dict],
) -> Path:
    parts = [
        "## Readings of the paper's ambiguous choices",
        TEXT["intro"].substitute(profile=profile),
        "### The readings\n\n" + switches_table(names),
        "### Table 2 under each reading\n\n" + table2_table(summaries),
        "### Row factor, Table 1, E5 and E6 under each reading\n\n" + effects_table(summaries),
        "### Which reading reproduces which effect\n\n"
        + verdict_matrix(summaries)
        + "\n\n"
        + TEXT["verdicts"].substitute(),
    ]
    learned_verdicts = learned_columns(out, profile)
    if learned_verdicts:
        parts.append(
            "### The learned-model groups under each tie rule and training preset\n\n"
            + verdict_matrix(learned_verdicts, LEARNED)
            + "\n\n"
            + TEXT["learned-verdicts"].substitute()
        )
    parts.append(
        "### The shared-prefix tree: cost per decision\n\n"
        + cost_table(costs)
        + "\n\n"
        + TEXT["costs"].substitute()
    )
    notes = explanations(summaries, learned)
    if notes:
        parts.append("### What the readings explain\n\n" + "\n\n".join(notes))
    path = out / SUMMARY_FILE
    path.write_text("\n\n".join(parts) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.readings.split(",") if n.strip()]
    try:
        # A reading under another tie rule is registered, so the tables resolve its name.
        chosen = [readings.register(readings.with_ties(readings.get(n), args.ties)) for n in names]
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    names = [r.name for r in chosen]
    out = Path(args.out)
    threads = configure_threads(args.threads or None)
    print(describe(threads), flush=True)
    failed = []
    if not args.no_run:
        for r in chosen:
            print(f"reading {r.name}: {r.differences(readings.PROJECT) or 'the default'}")
            status = run_groups(
                GROUPS,
                list(COMPARED),
                out,
                args.profile,
                args.device,
                progress=not args.no_progress,
                threads=threads,
                reading=r,
            )
            failed += [f"{r.name}/{g}" for g, s in status.items() if s == "failed"]
    summaries = {r.name: summarize(group_folders(GROUPS, out, r), args.profile) for r in chosen}
    costs = decision_costs(device=args.device)
    summaries_json = {"readings": summaries, "decision_costs": costs}
    path = write_summary(
        out, names, summaries, args.profile, learned_uniform(out, args.profile), costs
    )
    (out / SUMMARY_JSON).write_text(json.dumps(summaries_json, indent=2, default=str) + "\n")
    print(f"wrote {path} and {out / SUMMARY_JSON}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
