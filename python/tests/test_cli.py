import hashlib
import pathlib

import pytest

from forge.__main__ import main
from forge._protos import graph_pb2

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "llama_block.py"


def test_export_writes_graph_and_blobs(tmp_path, capsys):
    assert main(["export", str(EXAMPLE), "-o", str(tmp_path)]) == 0
    graph = graph_pb2.Graph.FromString((tmp_path / "graph.pb").read_bytes())
    assert graph.metadata.name == "llama_block"
    blobs = list((tmp_path / "blobs").iterdir())
    assert {b.name for b in blobs} == {i.data.sha256 for i in graph.inputs if i.data.sha256}
    for blob in blobs:
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    assert "aten::scaled_dot_product_attention" in capsys.readouterr().out


def test_export_of_a_file_without_example_is_a_clear_error(tmp_path):
    model_file = tmp_path / "empty_model.py"
    model_file.write_text("x = 1\n")
    with pytest.raises(SystemExit, match="defines no example"):
        main(["export", str(model_file), "-o", str(tmp_path / "out")])
