"""Forge's Python SDK: export PyTorch models to Forge's graph IR (and, as the service lands,
submit them for kernel search)."""

from forge.export import ExportError, ExportedModel, export, tensor_bytes

__all__ = ["ExportError", "ExportedModel", "export", "tensor_bytes"]
