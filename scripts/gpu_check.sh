#!/usr/bin/env bash
# One check of the GPU paths (over 10 minutes on one H200; docs/PERFORMANCE.md §10):
#   1. the tests that take a device parameter, on cpu and cuda (tests/core/test_devices.py ...);
#   2. bench_planner.py --device cuda: noise and oracle at D = 4, 6 with up to 100k episodes,
#      the learned MLP (generic, tree, TorchRL) at D = 4, the tree at D = 4, 6 with 100k;
#   3. bench_training.py --quick --device cuda (K = 1, 5);
#   4. python -m gridplan.experiments --quick --device cuda (scripts/reproduce.py);
#   5. bench_scaling.py: the g32-k64 row (S = 136, 32x32 grid) beside the default world's:
#      planner, env.step, V*, training step on cuda; without CUDA its --quick run on the CPU.
# Writes every log and JSON under $GPU_CHECK_OUT (default gpu_check/) and one summary,
# $GPU_CHECK_OUT/summary.json. Without a CUDA device the GPU steps are recorded as skipped and
# only the CPU sides of steps 1 and 5 run, so the script also runs (quickly) on a CPU-only
# machine.
#
# The step limits (120, 150, 240, 180, 600 and 120 s) add up to more than one 10-minute
# command, so a run can select steps and cap the whole run: GPU_CHECK_STEPS is a comma-separated
# list of step names (tests, bench_planner, bench_planner_tree, bench_training, reproduce,
# scaling_g32_k64; default: all), the others are recorded as skipped ("not selected");
# GPU_CHECK_BUDGET_S (default: none) caps each step's limit at the seconds left of that budget
# and skips the steps that find none left ("budget spent"), so summary.json is always written.
#
#   bash scripts/gpu_check.sh                       # on the GPU machine
#   GPU_CHECK_OUT=/tmp/gc bash scripts/gpu_check.sh # elsewhere
#   PYTHON=python3 bash scripts/gpu_check.sh        # default: .venv/bin/python, else python3
#   GPU_CHECK_STEPS=tests,bench_training GPU_CHECK_BUDGET_S=300 bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_steps="tests bench_planner bench_planner_tree bench_training reproduce scaling_g32_k64"
selection=${GPU_CHECK_STEPS:-all}
if [ "$selection" != all ]; then
    for name in ${selection//,/ }; do
        case " $all_steps " in
            *" $name "*) ;;
            *) echo "GPU_CHECK_STEPS: unknown step '$name' (steps: ${all_steps// /,})" >&2; exit 2 ;;
        esac
    done
fi
budget=${GPU_CHECK_BUDGET_S:-}
if [ -n "$budget" ] && ! [[ "$budget" =~ ^[1-9][0-9]*$ ]]; then
    echo "GPU_CHECK_BUDGET_S: '$budget' is not a positive whole number of seconds" >&2
    exit 2
fi
deadline=$(( $(date +%s) + ${budget:-0} ))
selected() { [ "$selection" = all ] || [[ ",$selection," == *",$1,"* ]]; }

out=${GPU_CHECK_OUT:-gpu_check}
if [ -x .venv/bin/python ]; then default_py=.venv/bin/python; else default_py=python3; fi
py=${PYTHON:-$default_py}
mkdir -p "$out"
steps="$out/steps.tsv"
: > "$steps"
cuda=$("$py" -c "import torch; print(int(torch.cuda.is_available()))")
# The configs ship as the package gridplan.conf, which only an install maps (pyproject.toml):
# a bare checkout (a GPU machine with its own torch and no registry) is installed in place.
if ! "$py" -c "import gridplan.conf" 2>/dev/null; then
    "$py" -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 \
        || { echo "install: failed ($out/install.log)"; exit 1; }
fi

# run NAME LIMIT_S JSON CMD...: runs CMD with a time limit (capped by the budget), logs to
# $out/NAME.log, records a row.
run() {
    local name=$1 limit=$2 json=$3
    shift 3
    local start end rc left
    if [ -n "$budget" ]; then
        left=$(( deadline - $(date +%s) ))
        if [ "$left" -le 0 ]; then skip "$name" "budget spent"; return; fi
        if [ "$left" -lt "$limit" ]; then limit=$left; fi
    fi
    start=$(date +%s%N)
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    rc=$?
    end=$(date +%s%N)
    ms=$(( (end - start) / 1000000 ))
    printf '%s\t%s\t%d.%03d\t%s\t%s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000)) "$json" "$*" \
        >> "$steps"
    echo "$name: exit $rc ($(tail -n 1 "$out/$name.log"))"
}
skip() {
    printf '%s\tskipped\t0\t\t%s\n' "$1" "$2" >> "$steps"
    echo "$1: skipped ($2)"
}

if ! selected tests; then
    skip tests "not selected"
elif [ "$cuda" = 1 ]; then
    run tests 120 "" env GRIDPLAN_TEST_DEVICES=cpu,cuda "$py" -m pytest tests -q -k cuda -p no:cacheprovider
else
    run tests 120 "" env GRIDPLAN_TEST_DEVICES=cpu "$py" -m pytest tests/core/test_devices.py -q -p no:cacheprovider
fi

if ! selected bench_planner; then
    skip bench_planner "not selected"
elif [ "$cuda" = 1 ]; then
    run bench_planner 150 "$out/bench_planner.json" "$py" scripts/bench_planner.py --device cuda \
        --depths 4,6 --batches 1000,10000,100000 --learned-depths 4 --learned-batches 1000,10000 \
        --no-learned-d6 --min-time 0.5 --max-memory 16G --json "$out/bench_planner.json"
else
    skip bench_planner "no CUDA device"
fi

if ! selected bench_planner_tree; then
    skip bench_planner_tree "not selected"
elif [ "$cuda" = 1 ]; then
    run bench_planner_tree 240 "$out/bench_planner_tree.json" "$py" scripts/bench_planner.py \
        --device cuda --only-learned --learned-paths tree --learned-depths 4,6 \
        --learned-batches 100000 --no-learned-d6 --min-time 0.5 --max-memory 16G \
        --json "$out/bench_planner_tree.json"
else
    skip bench_planner_tree "no CUDA device"
fi

if ! selected bench_training; then
    skip bench_training "not selected"
elif [ "$cuda" = 1 ]; then
    run bench_training 180 "$out/bench_training.json" "$py" scripts/bench_training.py \
        --quick --device cuda --json "$out/bench_training.json"
else
    skip bench_training "no CUDA device"
fi

if ! selected reproduce; then
    skip reproduce "not selected"
elif [ "$cuda" = 1 ]; then
    run reproduce 600 "" "$py" -m gridplan.experiments --quick --device cuda --force \
        --no-progress --out "$out/results"
else
    skip reproduce "no CUDA device"
fi

rm -f "$out/scaling_g32_k64.json"
if ! selected scaling_g32_k64; then
    skip scaling_g32_k64 "not selected"
elif [ "$cuda" = 1 ]; then
    run scaling_g32_k64 120 "$out/scaling_g32_k64.json" "$py" scripts/bench_scaling.py \
        --device cuda --worlds g8-k2,g32-k64 --no-trainer --no-weights --max-memory 16G \
        --json "$out/scaling_g32_k64.json"
else
    run scaling_g32_k64 120 "$out/scaling_g32_k64.json" "$py" scripts/bench_scaling.py \
        --quick --worlds g8-k2,g32-k64 --json "$out/scaling_g32_k64.json"
fi

"$py" - "$out" <<'PY'
import json, os, platform, sys
from pathlib import Path

import torch

out = Path(sys.argv[1])
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, rc, seconds, result, command = line.split("\t")
    step = {"name": name, "status": "skipped" if rc == "skipped" else ("ok" if rc == "0" else "failed"),
            "exit_code": None if rc == "skipped" else int(rc), "seconds": float(seconds),
            "command": command}
    if rc == "skipped":
        step["reason"] = command
        del step["command"]
    else:
        step["log"] = str(out / f"{name}.log")
    if result and Path(result).is_file():
        data = json.loads(Path(result).read_text())
        step["headline"] = {k: data[k] for k in ("speedup_vs_reference", "transitions_per_s",
                                                 "actions_identical") if k in data}
        if "learned" in data:
            step["learned"] = {"headline": data["learned"].get("headline"),
                               "actions_identical": data["learned"]["actions_identical"],
                               "rows": [{k: r[k] for k in ("path", "depth", "episodes",
                                                           "transitions_per_s", "peak_memory_bytes")}
                                        for r in data["learned"]["rows"]]}
        if "growth" in data:
            step["scaling"] = [{k: r.get(k) for k in ("measure", "world", "rate_per_s", "cost_s",
                                                      "floor_per_s", "peak_memory_bytes",
                                                      "within_budget")}
                               for r in data["rows"] if r["world"] != "default"]
        step["json"] = result
    steps.append(step)
summary = {
    "cuda": torch.cuda.is_available(),
    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    "torch": torch.__version__,
    "platform": platform.platform(),
    "load_average": list(os.getloadavg()),
    "ok": all(s["status"] != "failed" for s in steps),
    "seconds": round(sum(s["seconds"] for s in steps), 1),
    "steps": steps,
}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
print(f"summary: {out / 'summary.json'} (ok: {summary['ok']}, {summary['seconds']} s)")
sys.exit(0 if summary["ok"] else 1)
PY
