"""scripts/against.py, the ``--against REF`` of every benchmark, on a fake benchmark: each run
imports its own tree's ``gridplan`` alone, the runs alternate ours then ref, the ratio is ours
over ref and its summary the median, and a ref without a module the benchmark imports is one
clear error. Nothing real is timed: the fake benchmark prints rates its tree states."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "against.py"


def load_against():
    spec = importlib.util.spec_from_file_location("against", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


AGAINST = load_against()

#: The fake benchmark: appends its tree to the log, prints the tree's rate for this pair.
FAKE = """\
import json, sys
from pathlib import Path
import gridplan
log = Path(sys.argv[1])
done = log.read_text().splitlines() if log.exists() else []
mine = f"{gridplan.NAME} {gridplan.__file__}"
log.write_text("".join(f"{line}\\n" for line in [*done, mine]))
if "--extra" in sys.argv:
    import gridplan.extra
rate = gridplan.RATES[done.count(mine)]
print("some table the benchmark prints")
print(json.dumps({"rate": rate, "unit": "steps/s", "what": "fake step", "file": gridplan.__file__}))
"""


def fake_tree(root: Path, name: str, rates: list[float], extra: bool = False) -> Path:
    package = root / "gridplan"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"NAME = {name!r}\nRATES = {rates!r}\n")
    if extra:
        (package / "extra.py").write_text("")
    return root


@pytest.fixture
def trees(tmp_path):
    (tmp_path / "fake_bench.py").write_text(FAKE)
    return {
        "ours": fake_tree(tmp_path / "ours", "ours", [4.0, 2.0, 9.0], extra=True),
        "ref": fake_tree(tmp_path / "ref", "ref", [1.0, 1.0, 1.0]),
    }


def test_runs_alternate_ours_then_ref_each_importing_its_own_tree(trees, tmp_path, capsys):
    log = tmp_path / "order.log"
    rows = AGAINST.interleave(trees, tmp_path / "fake_bench.py", [str(log)], 3)
    order = [line.split()[0] for line in log.read_text().splitlines()]
    assert order == ["ours", "ref"] * 3
    for row in rows:
        for side in ("ours", "ref"):
            assert row[side]["file"] == str(trees[side] / "gridplan" / "__init__.py")
    assert [r["ratio"] for r in rows] == [4.0, 2.0, 9.0]
    assert AGAINST.summary(rows) == {
        "median_ratio": 4.0,
        "min_ratio": 2.0,
        "max_ratio": 9.0,
        "ours_median_rate": 4.0,
    }
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("pair")]
    assert printed[1] == "pair  2: ours 2.00 ref 1.00 steps/s, ratio 2.000"


def test_a_process_the_benchmark_starts_imports_the_same_tree(trees, tmp_path):
    code = (
        "import gridplan, json; "
        "print(json.dumps({'rate': gridplan.RATES[0], 'unit': 'u', 'what': gridplan.__file__}))"
    )
    (tmp_path / "parent.py").write_text(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {code!r}], check=True)\n"
    )
    (row,) = AGAINST.interleave(trees, tmp_path / "parent.py", [], 1)
    assert row["ref"]["what"] == str(trees["ref"] / "gridplan" / "__init__.py")
    assert row["ours"]["what"] == str(trees["ours"] / "gridplan" / "__init__.py")
    assert row["ratio"] == 4.0


def test_a_module_the_ref_lacks_is_a_ref_error_naming_it(trees, tmp_path):
    argv = [str(tmp_path / "order.log"), "--extra"]
    with pytest.raises(AGAINST.RefError, match=r"No module named 'gridplan.extra' in .*ref"):
        AGAINST.interleave(trees, tmp_path / "fake_bench.py", argv, 1)


def test_a_module_our_checkout_lacks_is_not_blamed_on_the_ref(trees, tmp_path):
    swapped = {"ours": trees["ref"], "ref": trees["ours"]}
    argv = [str(tmp_path / "order.log"), "--extra"]
    with pytest.raises(RuntimeError, match="this checkout fails an import: No module") as err:
        AGAINST.interleave(swapped, tmp_path / "fake_bench.py", argv, 1)
    assert not isinstance(err.value, AGAINST.RefError)


def test_a_run_without_a_headline_or_that_fails_names_its_script(trees, tmp_path):
    (tmp_path / "quiet.py").write_text("print('no json')\n")
    with pytest.raises(RuntimeError, match="quiet.py printed no headline"):
        AGAINST.interleave(trees, tmp_path / "quiet.py", [], 1)
    (tmp_path / "broken.py").write_text("raise SystemExit('broken here')\n")
    with pytest.raises(RuntimeError, match="broken.py .* failed .*\n.*broken here"):
        AGAINST.interleave(trees, tmp_path / "broken.py", [], 1)


def test_child_argv_drops_the_comparisons_options_and_asks_for_the_headline():
    argv = ["--quick", "--against", "main", "--pairs=3", "--json", "x.json", "--sizes", "1"]
    assert AGAINST.child_argv(argv) == ["--quick", "--sizes", "1", "--headline"]


def git(repo: Path, *argv: str) -> None:
    subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True)


def test_against_a_git_ref_without_the_module_is_one_line_and_exit_status_2(
    trees, tmp_path, capsys
):
    # A repository whose commit lacks gridplan/extra.py; the checkout has it, uncommitted.
    repo = trees["ours"]
    git(repo, "init", "-q")
    git(repo, "add", "gridplan/__init__.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    argv = [str(tmp_path / "order.log"), "--extra"]
    with pytest.raises(AGAINST.RefError, match=r"HEAD \(\w+\) lacks what fake_bench.py needs"):
        AGAINST.compare(tmp_path / "fake_bench.py", argv, "HEAD", 2, ours=repo)
    listing = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert len(listing.splitlines()) == 1  # the ref's worktree is gone
    # Without the extra module the comparison runs; every pair is ours 4, 2 / ref 4, 2.
    result = AGAINST.compare(
        tmp_path / "fake_bench.py",
        [str(tmp_path / "order2.log")],
        "HEAD",
        2,
        floor=lambda heads: (8.0, f"twice ours' first, {heads[0]['rate']}"),
        ours=repo,
    )
    assert result["median_ratio"] == 1.0 and result["floor"] == 8.0
    assert result["what"] == "fake step" and len(result["pairs"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("median ratio 1.000 (range 1.000-1.000) over 2 pairs")
    assert "load average" in out[-2]
    assert out[-1] == "floor: 8.00 steps/s (twice ours' first, 4.0); ours at 37.5% of it"


def test_main_names_a_bad_ref_in_one_line(tmp_path, capsys):
    (tmp_path / "fake_bench.py").write_text(FAKE)
    argv = ["no-such-ref-anywhere", str(tmp_path / "fake_bench.py"), "--pairs", "1", "--", "x"]
    code = AGAINST.main(argv)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-ref-anywhere" in err[0]


def test_the_guard_refuses_a_package_imported_before_it():
    code = (
        f"import importlib.util; s = importlib.util.spec_from_file_location('a', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)\n"
        "import gridplan\n"
        "try:\n    m.guard('/nowhere')\nexcept RuntimeError as err:\n    print(err)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "imported before the guard of /nowhere" in done.stdout
