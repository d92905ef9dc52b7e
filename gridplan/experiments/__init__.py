"""The paper's experiment groups (paper §5: E1-E6; E7, the learned-model zoo; E8, larger
worlds) and their registry.

``python scripts/reproduce.py`` runs them through ``run_groups``. Layout (``docs/DESIGN.md``):

- ``groups``: ``GROUPS``, the registry of every group;
- ``runner``: ``Group``, ``GroupContext``, ``run_groups`` (temp folders, skip/force, done.json);
- ``settings``: every group's config per profile (protocols: ``profiles``, spec files of
  ``configs/eval/protocols/``);
- ``records``: the typed records groups write and the model-record files they exchange;
- ``measure``, ``pools``, ``learned_runs``: shared computation (windows and closed-loop
  summaries; the controlled grid and sweep; training the learned models);
- ``tables`` (``table.md``: tables and verdicts) and ``figures`` (every figure);
- ``e1`` ... ``e10``: one group each, compute -> records -> files, tables, figures, verdicts;
- ``paper``: the paper's numbers printed beside ours.

To add a group: write a module with ``run(ctx) -> GroupReport``, its config per profile in
``settings``, and one ``Group`` entry in ``groups``; ``reads`` names the groups whose finished
results it reuses (they then run first; it reads their result files, never their modules).

Its public names (``__all__``) are imported on first use: ``import gridplan.experiments``
imports no group (``from gridplan.experiments import GROUPS`` imports them all).
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "GROUPS": "groups",
    "PROFILES": "profiles",
    "Profile": "profiles",
    "Group": "runner",
    "GroupContext": "runner",
    "run_groups": "runner",
    "select_groups": "runner",
    "GroupReport": "tables",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
