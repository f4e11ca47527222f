"""The forge.v1 protocol classes (proto/forge/v1), and the version the SDK was built as.

forge.v1 is generated when the SDK is built, never when it is imported: `pip install ./python`
puts it in the installed package, and `scripts/build` writes it into python/forge/v1 (ignored by
git) for the SDK used in place with PYTHONPATH=python. Both run python/build_sdk.py. When it is
missing, or was generated before SDK_VERSION existed, importing forge fails with an ImportError
that says how to build it.
"""

try:
    from forge.v1 import SDK_VERSION, graph_pb2, service_pb2, task_pb2
except ImportError as err:
    if not (err.name or "").startswith("forge.v1"):
        raise  # e.g. protobuf itself is missing: the message names it
    raise ImportError(
        "forge: the protocol classes (forge.v1) are missing or predate this SDK: in a clone of "
        "the Forge repository run scripts/build (or: python python/build_sdk.py), or install the "
        "SDK with pip install ./python") from err

__all__ = ["SDK_VERSION", "graph_pb2", "service_pb2", "task_pb2"]
