"""cuDNN for the extension's cudnn_conv steps (runtime/extension/cudnn_conv_step.h): the cuDNN
frontend's headers and torch's cuDNN 9 (headers and libcudnn.so.9), found on this machine.

The frontend (header-only): $FORGE_CUDNN_FRONTEND_INCLUDE, else the `include` directory of the
importable `cudnn` package (the nvidia-cudnn-frontend wheel), else
~/.cache/forge/cudnn-frontend-<version>/include (scripts/setup's pinned copy; scripts/lib.sh's
FORGE_CUDNN_FRONTEND_VERSION). cuDNN itself: the nvidia-cudnn wheel torch depends on
(nvidia/cudnn/include and lib, which cmake/ForgeCudnn.cmake uses for the worker too). The
extension links that libcudnn.so.9 (with an RPATH to it): torch has already loaded the same
library by its soname. Without either, cudnn_conv steps run as their ATen calls, and
`cudnn_build` says why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib

from forge.runtime.host_launched import find_include

FRONTEND_VERSION = "1.16.0"  # scripts/lib.sh FORGE_CUDNN_FRONTEND_VERSION
PINNED_FRONTEND = (pathlib.Path.home() / ".cache" / "forge" / f"cudnn-frontend-{FRONTEND_VERSION}"
                   / "include")
LIBRARY = "libcudnn.so.9"


@dataclasses.dataclass(frozen=True)
class CudnnBuild:
    """The extension's build arguments for cudnn_conv steps, and a digest of the headers they
    name (the frontend's version header and cuDNN's), for the extension's digest."""

    include_paths: tuple[str, ...]
    ldflags: tuple[str, ...]
    digest: str


def cudnn_build() -> tuple[CudnnBuild | None, str]:
    """How the extension builds with cuDNN (see the module's comment), or None and why not."""
    frontend = find_include("FORGE_CUDNN_FRONTEND_INCLUDE", "cudnn", "include", PINNED_FRONTEND,
                            "cudnn_frontend.h")
    if frontend is None:
        return None, ("the cuDNN frontend's headers are not on this machine (set "
                      "FORGE_CUDNN_FRONTEND_INCLUDE, `pip install nvidia-cudnn-frontend`, or run "
                      f"scripts/setup, which unpacks them into {PINNED_FRONTEND.parent})")
    cudnn = find_include("FORGE_CUDNN_ROOT", "nvidia.cudnn", "", None, f"lib/{LIBRARY}")
    if cudnn is None or not (cudnn / "include" / "cudnn.h").is_file():
        return None, (f"cuDNN's headers and {LIBRARY} are not on this machine (torch's "
                      "nvidia-cudnn wheel: nvidia/cudnn/include and lib; or set FORGE_CUDNN_ROOT)")
    sha = hashlib.sha256()
    for header in (frontend / "cudnn_frontend_version.h", cudnn / "include" / "cudnn_version.h"):
        sha.update(header.read_bytes() if header.is_file() else str(header).encode())
    lib = cudnn / "lib"
    return CudnnBuild(include_paths=(str(frontend), str(cudnn / "include")),
                      ldflags=(f"-L{lib}", f"-l:{LIBRARY}", f"-Wl,-rpath,{lib}"),
                      digest=sha.hexdigest()), ""
