"""Generates the part of the forge package that is built, not written: forge/v1 (and, for a
wheel, stages the runtime's extension templates, which live in runtime/extension).

forge/v1 holds the Python classes of the wire protocol, made by grpc_tools.protoc from
proto/forge/v1/*.proto (<name>_pb2.py, <name>_pb2_grpc.py), and an __init__.py that records the
project version the SDK was built as (SDK_VERSION, from `project(forge VERSION x.y.z)` in the
top-level CMakeLists.txt, the project's one place for it). Nothing here is kept in git, and the
package never writes into itself when imported: forge._protos only imports forge.v1, and says how
to build it when it is missing.

Two callers, one generator:
  - setup.py (`pip install ./python` or `.`, `pip wheel`, an sdist): into the wheel's build tree
    (with the templates), or into python/forge itself for an editable install;
  - the CMake target forge_python_sdk (every `scripts/build`): into python/forge, for the SDK in
    the tree that scripts, tests, benchmarks and the GPU machine use with PYTHONPATH=python.

The sources are the repository's proto/ and CMakeLists.txt beside python/; an sdist carries its own
copy of proto/ and its version in PKG-INFO instead.

  python python/build_sdk.py [--out DIR]     writes DIR/forge/v1 (default DIR: this folder)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.resources
import pathlib
import re
import shutil
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROTO_PACKAGE = pathlib.PurePosixPath("forge/v1")  # the protocol's package, as a path
_PROJECT_VERSION = re.compile(r"project\(\s*forge\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)")
_GENCODE_VERSION = re.compile(r"^# Protobuf Python Version: ([0-9]+)\.([0-9]+)\.([0-9]+)",
                              re.MULTILINE)


class BuildError(Exception):
    """The SDK cannot be built here; the message says what is missing."""


@dataclasses.dataclass(frozen=True)
class Sources:
    proto_root: pathlib.Path  # holds forge/v1/*.proto
    runtime_root: pathlib.Path  # holds extension/, the templates forge.runtime builds from
    version: str  # the project version, e.g. "0.1.0"

    @property
    def proto_files(self) -> list[pathlib.Path]:
        return sorted((self.proto_root / PROTO_PACKAGE).glob("*.proto"))


def find_sources(project_dir: pathlib.Path = HERE) -> Sources:
    """The protocol files and the version for the package in `project_dir` (python/ in the
    repository, or an unpacked sdist)."""
    repo = project_dir.parent
    if (repo / "proto" / PROTO_PACKAGE).is_dir() and (repo / "CMakeLists.txt").is_file():
        match = _PROJECT_VERSION.search((repo / "CMakeLists.txt").read_text())
        if not match:
            raise BuildError(f"no `project(forge VERSION x.y.z)` in {repo / 'CMakeLists.txt'}")
        return Sources(repo / "proto", repo / "runtime", match.group(1))
    pkg_info = project_dir / "PKG-INFO"
    if (project_dir / "proto" / PROTO_PACKAGE).is_dir() and pkg_info.is_file():
        version = re.search(r"^Version: (\S+)$", pkg_info.read_text(), re.MULTILINE)
        if version:
            return Sources(project_dir / "proto", project_dir / "runtime", version.group(1))
    raise BuildError(f"the Forge SDK in {project_dir} is built from the Forge repository (it reads "
                     f"../proto/{PROTO_PACKAGE} and ../CMakeLists.txt) or from its sdist; found "
                     "neither")


def generate(sources: Sources, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Writes out_dir/forge/v1 afresh from `sources` and returns the files written."""
    try:
        from grpc_tools import protoc
    except ImportError as err:
        raise BuildError("building the Forge SDK needs grpcio-tools (pip install grpcio-tools): "
                         "it generates the protocol classes") from err
    protos = sources.proto_files
    if not protos:
        raise BuildError(f"no .proto files under {sources.proto_root / PROTO_PACKAGE}")
    well_known = importlib.resources.files("grpc_tools") / "_proto"  # google/protobuf/*.proto
    target = out_dir / PROTO_PACKAGE
    # protoc writes into a scratch tree first, so that a failed run leaves the old classes whole.
    with tempfile.TemporaryDirectory(prefix="forge-protos-") as scratch:
        args = ["protoc", f"-I{sources.proto_root}", f"-I{well_known}", f"--python_out={scratch}",
                f"--grpc_python_out={scratch}", *map(str, protos)]
        if protoc.main(args) != 0:
            raise BuildError(f"protoc failed on {sources.proto_root / PROTO_PACKAGE} (its message "
                             "is above)")
        generated = pathlib.Path(scratch) / PROTO_PACKAGE
        (generated / "__init__.py").write_text(
            '"""forge.v1: the protocol classes of proto/forge/v1, generated as the SDK was built\n'
            '(python/build_sdk.py). Do not edit: rebuild.\n\n'
            'SDK_VERSION is the project version the SDK was built as."""\n\n'
            f"SDK_VERSION = {sources.version!r}\n")
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(generated, target)
    return sorted(target.iterdir())


def stage_runtime_templates(sources: Sources, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Copies runtime/extension (the templates of the extension a plan is built into) to
    out_dir/forge/runtime/extension, where an installed forge.runtime finds them; in the tree it
    reads runtime/extension itself. Returns the files copied."""
    source = sources.runtime_root / "extension"
    files = sorted(path for path in source.iterdir() if path.is_file()) if source.is_dir() else []
    if not files:
        raise BuildError(f"no runtime templates under {source}")
    target = out_dir / "forge" / "runtime" / "extension"
    target.mkdir(parents=True, exist_ok=True)
    return [pathlib.Path(shutil.copy2(path, target)) for path in files]


def protobuf_requirement(out_dir: pathlib.Path) -> str:
    """The protobuf runtime the classes in out_dir/forge/v1 need: protobuf refuses gencode newer
    than itself or of another major version."""
    text = (out_dir / PROTO_PACKAGE / "graph_pb2.py").read_text()
    match = _GENCODE_VERSION.search(text)
    if not match:
        raise BuildError(f"no '# Protobuf Python Version' line in {out_dir / PROTO_PACKAGE}")
    major, minor, patch = map(int, match.groups())
    return f"protobuf>={major}.{minor}.{patch},<{major + 1}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=HERE,
                        help="the folder that holds forge/ (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        sources = find_sources()
        written = generate(sources, args.out)
    except BuildError as err:
        print(f"build_sdk: {err}", file=sys.stderr)
        return 1
    print(f"build_sdk: forge {sources.version}: {len(written)} files in {args.out / PROTO_PACKAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
