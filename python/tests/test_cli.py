import hashlib
import json
import os
import pathlib
import re
import subprocess

import pytest

from forge.__main__ import main
from forge._protos import graph_pb2

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "llama_block.py"


def test_export_writes_graph_and_blobs(tmp_path, capsys):
    assert main(["export", str(EXAMPLE), "-o", str(tmp_path)]) == 0
    graph = graph_pb2.Graph.FromString((tmp_path / "graph.pb").read_bytes())
    assert graph.metadata.name == "llama_block"
    blobs = list((tmp_path / "blobs").iterdir())
    assert {b.name for b in blobs} == {i.data.sha256 for i in graph.inputs if i.data.sha256}
    for blob in blobs:
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    assert "aten::scaled_dot_product_attention" in capsys.readouterr().out


def test_export_of_a_file_without_example_is_a_clear_error(tmp_path):
    model_file = tmp_path / "empty_model.py"
    model_file.write_text("x = 1\n")
    with pytest.raises(SystemExit, match="defines no example"):
        main(["export", str(model_file), "-o", str(tmp_path / "out")])


# ----- the C++ binaries' command lines (built by scripts/build) -----

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("FORGE_BUILD_DIR", ROOT / "build"))
FORGE = BUILD / "client/forge/forge"
DAEMONS = {"forge-coordinator": BUILD / "server/forge-coordinator",
           "forge-worker": BUILD / "worker/daemon/forge-worker"}
needs_cli = pytest.mark.skipif(not FORGE.exists(), reason="needs scripts/build forge")
needs_daemons = pytest.mark.skipif(not all(p.exists() for p in DAEMONS.values()),
                                   reason="needs scripts/build forge-coordinator forge-worker")


def run(binary, *args):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)


def project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(forge VERSION ([0-9.]+)", cmake).group(1)


@needs_cli
def test_forge_version_in_text_and_json():
    for args in (["--version"], ["version"]):
        text = run(FORGE, *args)
        assert text.returncode == 0, text.stderr
        assert text.stdout.startswith(f"forge {project_version()} (commit ")
        assert "\ngenerators: " in text.stdout
    info = json.loads(run(FORGE, "--version", "--json").stdout)
    assert info["program"] == "forge"
    assert info["project_version"] == project_version()
    assert info["version"].startswith(project_version())
    assert info["generators"] in text.stdout


@needs_cli
def test_forge_help_command_and_suggestions():
    help_command = run(FORGE, "help", "results")
    assert help_command.returncode == 0
    assert help_command.stdout == run(FORGE, "results", "--help").stdout
    assert "-o, --output DIR" in help_command.stdout

    typo = run(FORGE, "sumbit", "model.pt2")
    assert typo.returncode == 2
    assert "unknown command 'sumbit' (did you mean 'submit'?)" in typo.stderr
    flag = run(FORGE, "jobs", "--stat", "running")
    assert flag.returncode == 2
    assert "unknown flag --stat (did you mean --state?)" in flag.stderr


@needs_daemons
def test_daemons_print_their_version_and_accept_old_spellings_with_a_warning():
    for name, binary in DAEMONS.items():
        version = run(binary, "--version")
        assert version.returncode == 0, version.stderr
        assert version.stdout.startswith(f"{name} {project_version()} (commit ")
        assert "\ngenerators: " in version.stdout
    # The worker stops at its missing coordinator, after reading the flags.
    old = run(DAEMONS["forge-worker"], "--shutdown-grace=1s", "--metrics-port=0")
    assert old.returncode == 2
    assert "--shutdown-grace is deprecated, write --shutdown.grace" in old.stderr
    assert "--metrics-port is deprecated, write --metrics.port" in old.stderr
    assert "coordinator is required" in old.stderr
