"""Python classes for the forge.v1 protocol, generated from proto/forge/v1 on first use.

The generated modules land in forge/v1/ beside this file (ignored by git) and are rebuilt when a
.proto file is newer than them, so the Python SDK always speaks the same protocol as the C++ side.
"""

import importlib
import os
import pathlib

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
_PROTO_ROOT = pathlib.Path(os.environ.get("FORGE_PROTO_ROOT", _PACKAGE_DIR.parent.parent / "proto"))
_PROTO_FILES = ("graph.proto", "task.proto", "service.proto")


def _generated_is_current(out_dir: pathlib.Path) -> bool:
    for name in _PROTO_FILES:
        source = _PROTO_ROOT / "forge" / "v1" / name
        generated = out_dir / (name.replace(".proto", "_pb2.py"))
        if not generated.exists() or generated.stat().st_mtime < source.stat().st_mtime:
            return False
    return True


def _generate() -> None:
    out_dir = _PACKAGE_DIR / "v1"
    if (_PROTO_ROOT / "forge" / "v1").is_dir() and not _generated_is_current(out_dir):
        import importlib.resources

        try:
            from grpc_tools import protoc  # only needed when the stubs are stale
        except ImportError:
            if all((out_dir / n.replace(".proto", "_pb2.py")).exists() for n in _PROTO_FILES):
                return  # e.g. a GPU machine without grpcio-tools, given generated stubs: use them
            raise

        well_known = importlib.resources.files("grpc_tools") / "_proto"  # google/protobuf/*.proto

        out_dir.mkdir(exist_ok=True)
        (out_dir / "__init__.py").touch()
        files = [str(_PROTO_ROOT / "forge" / "v1" / name) for name in _PROTO_FILES]
        # Generated modules import each other as forge.v1.*, i.e. through this package.
        args = ["protoc", f"-I{_PROTO_ROOT}", f"-I{well_known}", f"--python_out={_PACKAGE_DIR.parent}",
                f"--grpc_python_out={_PACKAGE_DIR.parent}", *files]
        if protoc.main(args) != 0:
            raise RuntimeError(f"forge: generating Python classes from {_PROTO_ROOT} failed")


_generate()
graph_pb2 = importlib.import_module("forge.v1.graph_pb2")
task_pb2 = importlib.import_module("forge.v1.task_pb2")
service_pb2 = importlib.import_module("forge.v1.service_pb2")
