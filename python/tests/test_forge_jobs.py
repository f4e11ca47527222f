"""The suite's Forge side (benchmarks/suite/forge_jobs.py): job summaries from events, and one small
problem through a real local service (emulated worker) when the binaries are built."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.suite import forge_jobs  # noqa: E402

BUILD = pathlib.Path(os.environ.get("FORGE_BUILD_DIR", ROOT / "build"))
BINARIES = {"forge-coordinator": BUILD / "server/forge-coordinator",
            "forge-worker": BUILD / "worker/daemon/forge-worker",
            "forge": BUILD / "client/forge/forge"}


def event(seconds, **fields):
    return {"time": f"2026-11-30T05:00:{seconds:06.3f}Z", "progress": fields.pop("progress", {}),
            **fields}


def test_summary_times_first_speedup_and_best_from_the_events():
    events = [
        event(0, state_changed={"current": "JOB_STATE_QUEUED"}),
        event(1, task_improved={"speedup_vs_eager": 0.8}),
        event(2.5, task_improved={"speedup_vs_eager": 1.4}),
        event(4, task_improved={"speedup_vs_eager": 2.0}),
        event(5, state_changed={"current": "JOB_STATE_DONE"},
              progress={"candidates_completed": "11", "candidates_failed": "2",
                        "best_speedup": 2.0}),
    ]
    summary = forge_jobs.summarize(events)
    assert summary["time_to_first_speedup_s"] == pytest.approx(2.5)
    assert summary["time_to_best_s"] == pytest.approx(4)
    assert summary["candidates_tried"] == 13
    assert summary["state"] == "JOB_STATE_DONE"
    assert summary["wall_s"] == pytest.approx(5)


def test_no_speedup_leaves_the_first_speedup_unset():
    events = [event(0, state_changed={"current": "JOB_STATE_QUEUED"}),
              event(1, task_improved={"speedup_vs_eager": 0.9}),
              event(2, state_changed={"current": "JOB_STATE_DONE"})]
    assert forge_jobs.summarize(events)["time_to_first_speedup_s"] is None


@pytest.mark.skipif(not all(p.exists() for p in BINARIES.values()) or not shutil.which("redis-server"),
                    reason="needs scripts/build (coordinator, worker, CLI) and redis-server")
def test_a_small_problem_goes_through_the_service(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, path in BINARIES.items():
        (bin_dir / name).symlink_to(path)
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(ROOT / "benchmarks/suite/forge_jobs.py"), "--bin",
                    str(bin_dir), "--out", str(out), "--budget", "4", "--small", "--emulate",
                    "--only", "elementwise_chain_2p28_f32"], check=True, timeout=300,
                   env={**os.environ, "FORGE_CACHE_DIR": str(tmp_path / "cache")})
    summary = json.loads((out / "jobs/elementwise_chain_2p28_f32.json").read_text())
    assert summary["state"] == "JOB_STATE_DONE"
    assert summary["candidates_tried"] >= 2
    assert (pathlib.Path(summary["bundle"]) / "report.md").exists()
    assert (pathlib.Path(summary["bundle"]) / "graph.pb").exists()  # for forge_plan.py
    assert "PREDICTED" in (pathlib.Path(summary["bundle"]) / "report.md").read_text()
    # Its extension was built in the background (the emulated plan names sm_90; nvcc needs no
    # GPU), or the plan needed none.
    built = (out / "service/build-elementwise_chain_2p28_f32.log").read_text().splitlines()[-1]
    assert built.startswith(f"{summary['bundle']}: {tmp_path / 'cache'}") or \
        built.endswith("nothing to build (ATen steps only)"), built

    # A second session resumes: the finished problem is skipped, the next one runs, and a job
    # past --job-timeout-s is cancelled with its bests so far fetched as its bundle.
    before = (out / "jobs/elementwise_chain_2p28_f32.json").stat().st_mtime_ns
    subprocess.run([sys.executable, str(ROOT / "benchmarks/suite/forge_jobs.py"), "--bin",
                    str(bin_dir), "--out", str(out), "--budget", "100000", "--max-seconds", "600",
                    "--small", "--emulate", "--resume", "--job-timeout-s", "0.5", "--builds", "0",
                    "--concurrent",
                    "--only", "elementwise_chain_2p28_f32,llama3_8b_layer_decode_b1_kv2048_bf16"],
                   check=True, timeout=300)
    assert (out / "jobs/elementwise_chain_2p28_f32.json").stat().st_mtime_ns == before
    cut = json.loads((out / "jobs/llama3_8b_layer_decode_b1_kv2048_bf16.json").read_text())
    assert cut["state"] == "cancelled after the 0.5 s job timeout", cut
    assert cut["max_seconds"] == 600 and cut["concurrent"]
    assert (pathlib.Path(cut["bundle"]) / "plan.json").exists()
