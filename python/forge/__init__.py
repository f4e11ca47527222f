"""Forge's Python SDK: export PyTorch models to Forge's graph IR (forge.export), optimize them with
a Forge coordinator (forge.optimize), and run result bundles in PyTorch (forge.runtime)."""

from forge._protos import SDK_VERSION as __version__
from forge.client import ForgeError, JobError, ServerError
from forge.export import ExportError, ExportedModel, export, tensor_bytes
from forge.optimize import InvalidModelError, OptimizationJob, OutputMismatchError, optimize
from forge.runtime import PlanError

__all__ = ["ExportError", "ExportedModel", "ForgeError", "InvalidModelError", "JobError",
           "OptimizationJob",
           "OutputMismatchError", "PlanError", "ServerError", "__version__", "export", "optimize",
           "tensor_bytes"]
