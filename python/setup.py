"""The build hooks of the forge-sdk distribution; its metadata is in pyproject.toml.

  - build_py: after copying the package's sources, generates forge/v1 (the protocol classes,
    build_sdk.generate) into the build tree, or into forge/ itself for an editable install, and
    copies the runtime's extension templates into the build tree (an editable install reads them
    from the repository, like the tree does);
  - sdist: carries proto/forge/v1 and runtime/extension, which live outside python/ in the
    repository, so that a wheel can be built from the sdist alone.
The version and the dependencies are computed here: the version is the project's (CMakeLists.txt,
or the sdist's PKG-INFO), and the protobuf runtime must be one that accepts the generated classes.
"""

import pathlib
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build_sdk  # noqa: E402  (beside this file; not part of the package)

# forge imports torch (export, runtime) and numpy (tensor bytes) at once, and grpcio when it talks
# to a coordinator. torch is a dependency, not an extra: `import forge` needs it. Its line is the
# project's (2.11, as in requirements.txt): the graphs it exports are ATen programs of that version,
# which the coordinator's LibTorch imports and runs as the reference. Install the torch build for
# your CUDA first (pytorch.org); pip keeps it when it satisfies this bound.
REQUIRES = ["torch>=2.11,<2.12", "numpy>=1.26,<3", "grpcio>=1.60,<2"]

SOURCES = build_sdk.find_sources(HERE)


class BuildPy(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # the package is this folder: generate beside the sources
            build_sdk.generate(SOURCES, HERE)
        else:
            build_sdk.generate(SOURCES, pathlib.Path(self.build_lib))
            build_sdk.stage_runtime_templates(SOURCES, pathlib.Path(self.build_lib))


class Sdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        base = pathlib.Path(base_dir)
        (base / "proto" / build_sdk.PROTO_PACKAGE).mkdir(parents=True, exist_ok=True)
        for proto in SOURCES.proto_files:
            shutil.copy2(proto, base / "proto" / build_sdk.PROTO_PACKAGE)
        shutil.copytree(SOURCES.runtime_root / "extension", base / "runtime" / "extension",
                        dirs_exist_ok=True)


def _protobuf_requirement() -> str:
    # The classes are generated (into a scratch tree) to read which protobuf they need.
    import tempfile
    with tempfile.TemporaryDirectory(prefix="forge-sdk-") as scratch:
        build_sdk.generate(SOURCES, pathlib.Path(scratch))
        return build_sdk.protobuf_requirement(pathlib.Path(scratch))


setup(version=SOURCES.version, install_requires=[*REQUIRES, _protobuf_requirement()],
      cmdclass={"build_py": BuildPy, "sdist": Sdist})
