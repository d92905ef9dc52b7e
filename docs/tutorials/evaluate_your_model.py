# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial: evaluate your own world model
#
# A world model can be accurate on average and still useless for decisions. This tutorial
# writes a small world model by hand, evaluates it for decisions with `gridplan.evaluate`,
# reads its report and card, and compares it with a model whose total error is as large but
# sits on dimensions that do not matter for the task. It runs in under a minute on a laptop
# CPU; CI executes it (`tests/docs/test_tutorial.py`) and its asserts check the conclusion.
#
# The file is a [Jupytext](https://jupytext.readthedocs.io) percent script:
# `jupytext --to notebook evaluate_your_model.py` makes a notebook of it, and
# `python evaluate_your_model.py` runs it as a script.

# %%
import tempfile
from pathlib import Path

import torch

import gridplan
from gridplan.core import tasks
from gridplan.core.env import reset, step
from gridplan.evaluation.card import write_card
from gridplan.evaluation.spec import load_spec
from gridplan.models.noise import NoiseModel

torch.set_num_threads(1)

# %% [markdown]
# ## 1. A world model is an object with `predict`
#
# The contract (`gridplan/models/plugins.py`): `predict(state, action, generator)` takes a
# batch of states `(N, 12)` float32 in `[0, 1]`, actions `(N,)` long in `0..3` and a
# `torch.Generator` (the only randomness allowed), and returns the predicted next states
# `(N, 12)`. The 12 dimensions are `agent_x agent_y key_x key_y carrying door_open c1 c2 d1_x
# d1_y d2_x d2_y`, positions as cell / 7.
#
# Our model knows the rules of the gridworld exactly, with one mistake: it never predicts the
# key pickup, so the `carrying` flag (dimension 4) keeps its value. That is one dimension out of
# twelve, wrong only at the rare steps where the agent reaches the key.

# %%
CARRYING = 4


class ForgetfulModel:
    """The true step of ``task``, except that the carrying flag never changes."""

    def __init__(self, task):
        self.task = task

    def predict(self, state, action, generator):
        next_state = step(state, action, generator, self.task)[0].clone()
        next_state[:, CARRYING] = state[:, CARRYING]
        return next_state


task = tasks.get("A")
model = ForgetfulModel(task)
generator = torch.Generator().manual_seed(0)
states = reset(4, generator, task)
predicted = model.predict(states, torch.tensor([0, 1, 2, 3]), generator)
print(states.shape, "->", predicted.shape, predicted.dtype)

# %% [markdown]
# ## 2. Evaluate it for decisions
#
# `gridplan.evaluate` measures the levels of the decision ladder
# ([concepts](../concepts/ladder.md)): L1 the paper's prediction errors (`E_tot`, `DRPE`),
# L4 whether the planner's decisions with the model agree with the optimal ones, L7 closed-loop
# success of the planner that uses the model. Every setting of an evaluation is one
# `EvalSpec` ([concepts](../concepts/specs.md)), which the report records whole with its
# content hash. A small spec keeps it fast: the `tiny-controlled` protocol file's ladder sizes
# with 2 evaluation seeds x 8 episodes, 64 held-out windows and a depth-2 planner. (The paper's
# protocol, `controlled`, is the default.)

# %%
spec = load_spec("tiny-controlled").replace(
    task="A", depth=2, seeds=(0, 1), episodes=8, n_windows=64, levels=("L1", "L4", "L7")
)
report = gridplan.evaluate(model, spec)
result = report.to_dict()
print(f"success   {result['success']['mean']:.2f} ± {result['success']['se']:.2f}")
print(f"E_tot     {result['E_tot']:.4f}")
print(f"DRPE      {result['DRPE']['graded']:.4f} (graded)")
agreement = result["ladder"]["L4"]["decision_agreement"]
print(f"decisions {agreement['mean']:.2f} agree with the optimal ones")

# %% [markdown]
# `report.to_dict()` is the JSON that `gridplan-eval --json` writes. The card condenses it: the
# gates the model passes or fails, a verdict, and what to fix first.

# %%
with tempfile.TemporaryDirectory() as folder:
    paths = write_card(result, Path(folder) / "forgetful.eval.json")
    card = paths["markdown"].read_text()
verdict = card.split("## Verdict", 1)[1].strip().splitlines()[0]
print(verdict)
print(card[card.index("## What to fix") :].split("\n## ")[0] if "## What to fix" in card else "")

# %% [markdown]
# ## 3. Compare it with another model
#
# The controlled model `M(0, 0.3)` (`gridplan.models.noise.NoiseModel.controlled`) predicts
# the relevant dimensions exactly and adds Gaussian noise of 0.3 to the six irrelevant ones (the
# colour bits and the distractors). Its total error comes out about as large as the forgetful
# model's: the two are an iso-error pair, like the paper's Table 2 (§5.1). `gridplan.compare`
# evaluates both under one spec, on the same draws, and gives paired differences.

# %%
noisy = NoiseModel.controlled(0.0, 0.3, task=task)
comparison = gridplan.compare(
    model,
    noisy,
    names=("forgetful", "M(0, 0.3)"),
    spec=spec,
)
print("\n".join(comparison.lines()))

# %% [markdown]
# Equal total error, opposite decision quality: the forgetful model's one error sits on a
# dimension the task depends on, at the one event that matters, while the noise of `M(0, 0.3)`
# sits where the task does not look. DRPE, which weighs each dimension's error by its relevance
# to the task's value, separates the two where `E_tot` cannot. That is the paper's point, and
# the check below holds the tutorial to it.

# %%
forgetful, noisy_result = comparison.reports_a[0].to_dict(), comparison.reports_b[0].to_dict()
for name, r in (("forgetful", forgetful), ("M(0, 0.3)", noisy_result)):
    print(
        f"{name:>10}: E_tot {r['E_tot']:.4f}  DRPE {r['DRPE']['graded']:.4f}  "
        f"success {r['success']['mean']:.2f}"
    )
assert abs(forgetful["E_tot"] / noisy_result["E_tot"] - 1) < 0.1, "E_tot within 10%"
assert forgetful["DRPE"]["graded"] > noisy_result["DRPE"]["graded"], "the larger DRPE"
assert comparison.success.high < 0, "plans worse, beyond the paired interval"

# %% [markdown]
# ## Next
#
# - The same from the command line: `gridplan-eval --model mine.py:make --card`
#   ([Evaluate your own model](../getting-started/evaluate-your-model.md)).
# - Many models at once: `gridplan-eval --compare A B C ...`
#   ([Compare many models](../how-to/compare.md)).
# - Every level and metric: [the decision ladder](../concepts/ladder.md).
