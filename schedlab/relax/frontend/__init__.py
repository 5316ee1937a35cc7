"""Importers of models from other frameworks into the graph IR (`frontend.onnx.from_onnx`)."""
