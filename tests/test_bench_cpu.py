"""`schedlab bench-cpu` pieces: the conv layer case runs and compares with onnxruntime, the
light models get random weights that keep their outputs informative, bad `--only` is named,
and a NaN on one side only counts as a difference."""

from __future__ import annotations

import argparse

import numpy as np
import onnx
import pytest

from schedlab.bench_common import model_path, randomized_weights
from schedlab.bench_cpu import (
    ConvShape,
    bench_conv_layer,
    conv_model,
    model_conv_shapes,
    run_cpu_bench,
)
from schedlab.run import _max_abs_diff
from schedlab.target import Target


def test_conv_layer_case_runs_and_matches_onnxruntime(tmp_path):
    result = bench_conv_layer(16, 9, Target("cpu"), tmp_path, goal=True)
    assert result.name == "conv3x3 16@9" and result.goal == 0.5
    assert result.ratio > 0 and "max abs diff" in result.detail


def test_random_weights_replace_constant_fills_and_keep_outputs_informative(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = randomized_weights(model_path("light_squeezenet"), tmp_path / "sq.onnx")
    model = onnx.load(str(path))
    assert not any(node.op_type == "ConstantOfShape" for node in model.graph.node)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    (probs,) = session.run(None, {session.get_inputs()[0].name: x})
    assert np.isfinite(probs).all() and probs.std() > 1e-4  # not uniform, not one-hot NaN
    assert probs.max() < 0.99


def test_model_layers_are_the_distinct_convs_of_the_model(tmp_path):
    shapes = model_conv_shapes(model_path("light_squeezenet"))
    assert shapes[0] == ConvShape(3, 64, 224, kernel=3, stride=2, pad=0)  # the stem
    assert ConvShape(512, 1000, 13, kernel=1, stride=1, pad=0) in shapes  # the classifier
    assert len(shapes) == len(set(shapes)) == 18
    path = conv_model(tmp_path / "stem.onnx", shapes[0])
    (out,) = onnx.load(str(path)).graph.output
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 64, 111, 111]
    assert shapes[0].flops == 2 * 3 * 64 * 9 * 111 * 111 and str(shapes[0]) == "3x3/2 3->64@224"


def test_unknown_case_is_named():
    with pytest.raises(ValueError, match="unknown case.*speed.*known: gemm, conv, models"):
        run_cpu_bench(argparse.Namespace(only="gemm,speed"))


def test_nan_on_one_side_is_a_difference():
    a, b = np.array([1.0, np.nan]), np.array([1.0, 2.0])
    assert _max_abs_diff([a], [b]) == np.inf
    assert _max_abs_diff([np.array([np.nan])], [np.array([np.nan])]) == 0.0
