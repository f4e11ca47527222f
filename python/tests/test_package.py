"""The SDK as a pip package (python/pyproject.toml, setup.py, build_sdk.py).

A copy of what the build reads from the repository (python/ without its tests, proto/forge/v1,
runtime/extension, CMakeLists.txt, the root's pyproject.toml) is built into a wheel from python/
and from the root, and into an sdist that is built into a wheel away from the repository, with
this environment's setuptools and grpcio-tools (pip's --no-build-isolation --no-deps: offline and
fast). Each wheel is installed into a folder of its
own and imported from there by a fresh interpreter: the protocol classes are in it, generated at
build time, the version is CMakeLists.txt's, and importing writes nothing into the package.
Without its generated classes, the package in place fails to import with an error that says how
to build them, and writes nothing either.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTOS = sorted(p.stem for p in (ROOT / "proto" / "forge" / "v1").glob("*.proto"))
TEMPLATES = sorted(p.name for p in (ROOT / "runtime" / "extension").iterdir() if p.is_file())


def project_version() -> str:
    cmake = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(forge VERSION ([0-9.]+)", cmake).group(1)


def run(args, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FORGE_RUNTIME_ROOT")}
    env.update(kwargs.pop("env", {}))
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, **kwargs)


def check(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"{result.args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def build_wheel(project: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    check(run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
               "-w", str(out), str(project)]))
    (wheel,) = out.glob("forge_sdk-*.whl")
    return wheel


def files_under(directory: pathlib.Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")
            if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> pathlib.Path:
    """What the build reads from the repository, and nothing it could have generated before."""
    copy = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "python", copy / "python", ignore=shutil.ignore_patterns(
        "tests", "v1", "build", "dist", "*.egg-info", "__pycache__", "CMakeLists.txt"))
    protos = copy / "proto" / "forge" / "v1"
    protos.mkdir(parents=True)
    for proto in PROTOS:
        shutil.copy(ROOT / "proto" / "forge" / "v1" / f"{proto}.proto", protos)
    shutil.copytree(ROOT / "runtime" / "extension", copy / "runtime" / "extension")
    shutil.copy(ROOT / "CMakeLists.txt", copy)
    shutil.copy(ROOT / "pyproject.toml", copy)  # `pip install .` at the root
    return copy


@pytest.fixture(scope="module")
def wheel(repo_copy, tmp_path_factory) -> pathlib.Path:
    return build_wheel(repo_copy / "python", tmp_path_factory.mktemp("wheel"))


def install_and_import(wheel: pathlib.Path, target: pathlib.Path) -> list[str]:
    """Installs `wheel` into `target` and imports it there, from a directory without forge; returns
    the lines the import printed."""
    check(run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
               str(wheel)]))
    before = files_under(target)
    script = ("import forge, forge.runtime.extension as ext\n"
              "from forge.v1 import graph_pb2, service_pb2, service_pb2_grpc, task_pb2\n"
              "print(forge.__version__)\n"
              "print(forge.__file__)\n"
              "ext._templates()\n"  # raises when the extension's templates are not found
              "print(ext._RUNTIME_ROOT)\n"
              "print(service_pb2.DESCRIPTOR.services_by_name['JobService'].full_name)\n")
    out = check(run([sys.executable, "-c", script], cwd=target.parent,
                    env={"PYTHONPATH": str(target)}))
    assert files_under(target) == before, "importing forge wrote into the installed package"
    return out.splitlines()


def metadata(wheel: pathlib.Path) -> str:
    return zipfile.ZipFile(wheel).read(f"forge_sdk-{project_version()}.dist-info/METADATA").decode()


def test_wheel_holds_the_generated_classes_and_the_project_version(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for proto in PROTOS:
        assert f"forge/v1/{proto}_pb2.py" in names and f"forge/v1/{proto}_pb2_grpc.py" in names
    assert {"forge/v1/__init__.py", "forge/py.typed", "forge/__main__.py",
            "forge/runtime/__init__.py"} <= names
    assert {f"forge/runtime/extension/{t}" for t in TEMPLATES} <= names
    assert not any(n.startswith(("tests/", "build_sdk", "setup")) for n in names)
    assert re.search(rf"^Version: {re.escape(project_version())}$", metadata(wheel), re.MULTILINE)
    requires = re.findall(r"^Requires-Dist: ([a-z]+)", metadata(wheel), re.MULTILINE)
    assert sorted(requires) == ["grpcio", "numpy", "protobuf", "torch"]


def test_protobuf_requirement_is_the_generated_codes(wheel):
    text = zipfile.ZipFile(wheel).read("forge/v1/graph_pb2.py").decode()
    major, minor, patch = re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", text).groups()
    assert f"Requires-Dist: protobuf<{int(major) + 1},>={major}.{minor}.{patch}" in metadata(wheel)


def test_installed_wheel_imports_from_itself(wheel, tmp_path):
    target = tmp_path / "site"
    version, module_file, runtime_root, service = install_and_import(wheel, target)
    assert version == project_version()
    assert pathlib.Path(module_file).is_relative_to(target)
    assert pathlib.Path(runtime_root).is_relative_to(target)  # the templates the wheel carries
    assert service == "forge.v1.JobService"


def assert_same_package(wheel: pathlib.Path, other: pathlib.Path) -> None:
    assert other.name == wheel.name
    ours, theirs = zipfile.ZipFile(wheel), zipfile.ZipFile(other)
    package_files = sorted(n for n in ours.namelist() if n.startswith("forge/"))
    assert package_files == sorted(n for n in theirs.namelist() if n.startswith("forge/"))
    for name in package_files:
        assert ours.read(name) == theirs.read(name), name


def test_repository_root_builds_the_same_wheel(repo_copy, wheel, tmp_path):
    assert_same_package(wheel, build_wheel(repo_copy, tmp_path / "wheel"))


def test_sdist_builds_the_same_wheel_away_from_the_repository(repo_copy, wheel, tmp_path):
    sdist_dir = tmp_path / "sdist"
    check(run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
               "print(build_meta.build_sdist(sys.argv[1]))", str(sdist_dir)],
              cwd=repo_copy / "python"))
    (sdist,) = sdist_dir.glob("forge_sdk-*.tar.gz")
    names = tarfile.open(sdist).getnames()
    assert any(n.endswith("/proto/forge/v1/graph.proto") for n in names)
    assert not any(n.endswith(("_pb2.py", "_pb2_grpc.py")) for n in names), "generated classes"
    unpacked = tmp_path / "unpacked"
    with tarfile.open(sdist) as archive:
        # The "data" filter where this Python has it (3.11.4 and later; Debian 12's 3.11.2 lacks
        # it); the archive is the one this test just built.
        if hasattr(tarfile, "data_filter"):
            archive.extractall(unpacked, filter="data")
        else:
            archive.extractall(unpacked)
    (project,) = unpacked.iterdir()
    from_sdist = build_wheel(project, tmp_path / "wheel")
    assert_same_package(wheel, from_sdist)
    assert install_and_import(from_sdist, tmp_path / "site")[0] == project_version()


def test_in_place_package_without_generated_classes_says_how_to_build_them(tmp_path):
    shutil.copytree(ROOT / "python" / "forge", tmp_path / "forge",
                    ignore=shutil.ignore_patterns("v1", "__pycache__"))
    result = run([sys.executable, "-c", "import forge"], cwd=tmp_path,
                 env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode != 0
    assert "forge.v1" in result.stderr and "scripts/build" in result.stderr
    assert "pip install ./python" in result.stderr
    assert not (tmp_path / "forge" / "v1").exists(), "importing forge wrote its classes"


def test_in_place_package_is_the_project_version():
    import forge
    assert forge.__version__ == project_version()
