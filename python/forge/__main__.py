"""python -m forge export MODEL.py -o DIR

Loads MODEL.py, calls its `example()` (returning a module and example inputs), exports the module
with forge.export, writes DIR/graph.pb (a forge.v1.Graph) and DIR/blobs/<sha256> (the weights), and
prints a summary of the graph.
"""

import argparse
import collections
import importlib.util
import pathlib
import sys

import forge
from forge._protos import graph_pb2


def _load_example(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"forge: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "example"):
        raise SystemExit(f"forge: {path} defines no example() returning (module, example_inputs)")
    return module.example()


def summarize(model: forge.ExportedModel) -> str:
    graph = model.graph
    ops = collections.Counter(node.op for node in graph.nodes)
    kinds = collections.Counter(graph_pb2.InputKind.Name(i.kind) for i in graph.inputs)
    weight_bytes = sum(len(b) for b in model.blobs.values())
    lines = [f"model {graph.metadata.name}: {len(graph.nodes)} ATen calls, {len(graph.values)} values, "
             f"{len(model.blobs)} weight blobs ({weight_bytes / 1e6:.2f} MB), torch {graph.metadata.torch_version}",
             "inputs: " + ", ".join(f"{n} {k.removeprefix('INPUT_KIND_').lower()}" for k, n in sorted(kinds.items())),
             "operators:"]
    lines += [f"  {count:4d}  {op}" for op, count in ops.most_common()]
    lines += [f"note: {note}" for note in graph.metadata.notes]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m forge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="export a model file's example() to Forge's IR")
    export.add_argument("model", type=pathlib.Path, help="a Python file defining example()")
    export.add_argument("-o", "--output", type=pathlib.Path, required=True, help="output directory")
    args = parser.parse_args(argv)

    module, inputs = _load_example(args.model)
    model = forge.export(module, inputs, name=args.model.stem)
    model.save(args.output)
    print(summarize(model))
    print(f"wrote {args.output / 'graph.pb'} and {len(model.blobs)} blobs under "
          f"{args.output / 'blobs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
