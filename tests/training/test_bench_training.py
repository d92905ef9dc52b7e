"""scripts/bench_training.py: sequential and vectorized training of the same runs side by side,
the same epochs on both sides, the speedup and the matmul floor per K."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gridplan.util.threads import training_threads

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_training.py"
sys.path.insert(0, str(REPO / "scripts"))
import bench_training  # noqa: E402

sys.path.pop(0)


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), "--out", str(tmp_path / "scratch"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)


def test_step_flops_count_forward_weight_and_input_gradients():
    # Layers 16->256, 256->256, 256->12 on 256 rows: forward 2*256*(4096 + 65536 + 3072)
    # FLOPs, the weight gradients as much, the input gradients of the last two layers.
    forward = 2 * 256 * (16 * 256 + 256 * 256 + 256 * 12)
    assert bench_training.step_flops() == 2 * forward + 2 * 256 * (256 * 256 + 256 * 12)
    assert bench_training.step_flops(1) * 256 == bench_training.step_flops()


def test_the_matmul_floor_times_the_shapes_of_one_step():
    floor = bench_training.matmul_floor(2, "cpu", repeats=2)
    assert floor["K"] == 2 and floor["seconds_per_step"] > 0
    flops = 2 * bench_training.step_flops()
    assert floor["GFLOP_per_s"] == pytest.approx(flops / floor["seconds_per_step"] / 1e9)


def test_a_worlds_widths_keep_the_hidden_layers_and_scale_input_and_output():
    assert bench_training.widths_of(12) == bench_training.WIDTHS
    widths = bench_training.widths_of(136)
    assert widths == (140, 256, 256, 136)
    forward = 2 * 256 * (140 * 256 + 256 * 256 + 256 * 136)
    backward_inputs = 2 * 256 * (256 * 256 + 256 * 136)
    assert bench_training.step_flops(widths=widths) == 2 * forward + backward_inputs


def test_the_bare_step_and_its_matmul_floor_run_at_a_worlds_width():
    widths = bench_training.widths_of(40)
    floor = bench_training.matmul_floor(2, "cpu", repeats=2, widths=widths)
    flops = 2 * bench_training.step_flops(widths=widths)
    assert floor["GFLOP_per_s"] == pytest.approx(flops / floor["seconds_per_step"] / 1e9)
    assert bench_training.bare_step(2, "cpu", repeats=2, widths=widths) > 0


@pytest.mark.slow
def test_both_sides_train_the_same_epochs_and_the_json_has_a_speedup_per_k(tmp_path):
    out = tmp_path / "bench.json"
    done = _bench(tmp_path, "--ks", "2", "--epochs", "1", "--budget", "600", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert list(result["speedup"]) == ["2"]
    for k in (2,):
        seq, vec = (
            next(r for r in result["rows"] if r["K"] == k and r["mode"] == mode)
            for mode in ("sequential", "vectorized")
        )
        assert seq["epochs"] == vec["epochs"] == k  # one epoch per run
        # One process one thread on both sides: two tiny runs are not worth a worker's start
        # (gridplan.training.vectorized.auto_workers, as python -m train picks).
        assert (seq["processes"], seq["threads"]) == (1, training_threads())
        assert vec["processes"] == 1
        assert seq["transitions"] == vec["transitions"] > 0
        assert result["speedup"][str(k)] == pytest.approx(seq["wall_s"] / vec["wall_s"], abs=0.01)
    assert [f["K"] for f in result["floor"]] == [2]
    assert all(f["distance"] > 0 for f in result["floor"])
    # The bare step runs the floor's matmuls and more.
    assert all(
        f["bare_step_ms_per_member"] > 0.5 * f["floor_ms_per_member_step"] for f in result["floor"]
    )
    assert "| 2 | vectorized |" in done.stdout and "x floor" in done.stdout
    assert vec["cpu_pair_speedups"] == [round(seq["cpu_s"] / vec["cpu_s"], 2)]
    assert f"K = 2 CPU s (median): sequential {seq['cpu_s']:.1f}" in done.stdout
    assert _bench(tmp_path, "--json", str(out)).returncode == 2  # never over a result


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present")
def test_device_cuda_without_a_gpu_says_so(tmp_path):
    done = _bench(tmp_path, "--quick", "--device", "cuda")
    assert done.returncode == 2
    assert "--device cuda but torch sees no CUDA GPU" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_device_cuda_measures_both_sides_on_the_gpu(tmp_path):
    out = tmp_path / "bench.json"
    done = _bench(tmp_path, "--quick", "--device", "cuda", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["device"] == "cuda"
    assert all(r["peak_MB"] > 0 for r in result["rows"])


def test_a_latent_row_trains_its_family_and_chosen_threads_reach_every_run():
    ns = type(
        "Args",
        (),
        {
            "device": "cpu",
            "budget": "4k",
            "epochs": 1,
            "workers": 0,
            "world": "default",
            "threads": 0,
        },
    )()
    plain = bench_training.overrides(0, ns, Path("/tmp/x"), False)
    latent = bench_training.overrides(0, ns, Path("/tmp/x"), False, "jepa:pixels")
    assert latent == ["model=jepa", "obs=pixels", *plain]
    assert not any(o.startswith("threads=") for o in plain)  # as python -m train picks
    ns.threads = 2  # --threads reaches every run, alone or in a group
    assert bench_training.overrides(0, ns, Path("/tmp/x"), False) == ["threads=2", *plain]


@pytest.mark.slow
def test_the_latent_rows_report_the_throughput_of_each_family(tmp_path):
    out = tmp_path / "bench.json"
    done = _bench(
        tmp_path,
        "--ks",
        "1",
        "--epochs",
        "1",
        "--budget",
        "600",
        "--latent-obs",
        "pixels",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["latent"]
    assert [(r["family"], r["obs"]) for r in rows] == [
        ("latent_recon", "pixels"),
        ("jepa", "pixels"),
    ]
    assert all(r["epochs"] == 1 and r["transitions_per_s"] > 0 for r in rows)
    assert "| jepa | pixels |" in done.stdout
