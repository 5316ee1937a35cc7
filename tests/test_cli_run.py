"""`schedlab run model.onnx`: outputs, schedlab's and onnxruntime's latency side by side, the
profile table, dynamic shapes given with --shape, and one-line errors with exit status 2."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from schedlab.cli import main  # noqa: E402
from schedlab.run import RunError, parse_shapes, random_inputs, run_model  # noqa: E402
from tests.relax.frontend.test_onnx import make_model, rand  # noqa: E402
from tests.relax.test_end_to_end import transformer_model  # noqa: E402


@pytest.fixture(scope="module")
def transformer_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "block.onnx"
    onnx.save(transformer_model(seq=7, dim=12, heads=3, hidden=20), str(path))
    return str(path)


def test_run_prints_outputs_latencies_and_profile(transformer_path, capsys):
    assert main(["run", transformer_path, "--target", "cpu", "--profile", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "out: shape (1, 7, 12) dtype float32" in out
    assert "schedlab     min" in out and "onnxruntime  min" in out
    assert "schedlab / onnxruntime (median):" in out
    diff = float(out.split("max abs difference vs onnxruntime: ")[1].split()[0])
    assert diff < 1e-4
    assert "profile:" in out and "kernel" in out and "(whole call)" in out


def test_run_model_report_fields(transformer_path):
    report = run_model(transformer_path, repeat=1, min_repeat_ms=1.0)
    assert report.outputs == [("out", (1, 7, 12), "float32")]
    assert report.schedlab.min > 0 and report.onnxruntime.min > 0
    assert report.max_abs_diff < 1e-4 and report.profile is None


def _symbolic_model():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    return make_model(nodes, [("x", ["batch", 5])], [("y", ["batch", 3])], {"w": rand(5, 3)})


def test_dynamic_dims_need_shape(tmp_path, capsys):
    path = str(tmp_path / "dyn.onnx")
    onnx.save(_symbolic_model(), path)
    assert main(["run", path, "--repeat", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--shape x=" in err
    assert main(["run", path, "--shape", "x=3,5", "--repeat", "1"]) == 0
    assert "y: shape (3, 3) dtype float32" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "no such file"),
        (b"\x08\x07garbage that is not protobuf \xff\xfe", "not a valid ONNX model"),
    ],
)
def test_missing_and_corrupt_files_are_one_line(tmp_path, capsys, content, expected):
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err and err.startswith("schedlab run:")


def test_a_directory_is_named_as_one(tmp_path, capsys):
    assert main(["run", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"schedlab run: error: from_onnx: {str(tmp_path)!r} is a directory; expected the path "
        "of an .onnx model file"
    )


def test_truncated_file_is_one_line(tmp_path, transformer_path, capsys):
    data = open(transformer_path, "rb").read()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    assert main(["run", str(path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_unsupported_ops_are_one_line(tmp_path, capsys):
    nodes = [helper.make_node("CumSum", ["x", "axis"], ["y"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [onnx.numpy_helper.from_array(np.array(1, np.int64), name="axis")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "cumsum.onnx")
    onnx.save(model, path)
    assert main(["run", path]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "CumSum" in err


@pytest.mark.parametrize("item", ["x", "x=1,a", "=3", "x=-1,2"])
def test_bad_shape_option(item):
    with pytest.raises(RunError, match="--shape"):
        parse_shapes([item])


def test_parse_shapes_and_seeded_inputs():
    assert parse_shapes(["x=3,5", "y=7"]) == {"x": (3, 5), "y": (7,)}
    from schedlab.relax.frontend.onnx import from_onnx

    mod = from_onnx(_symbolic_model(), {"x": (2, 5)})
    first, again = random_inputs(mod, seed=4), random_inputs(mod, seed=4)
    assert first[0].shape == (2, 5) and first[0].dtype == np.float32
    np.testing.assert_array_equal(first[0], again[0])
