#!/usr/bin/env bash
# Writes the generators' snapshot (codegen_snapshot) over the test models and the GPU validate and
# anchor problems to OUT.tsv. Run it at two commits and diff the files: a refactor of the
# generators must leave every line the same.
#   compiler/codegen/tools/snapshot.sh OUT.tsv   (after scripts/build codegen_snapshot)
set -euo pipefail
source "$(dirname "$0")/../../../scripts/lib.sh"
out="$1"
build="$(forge_build_dir)"
py="$(forge_pyenv_path)/bin/python"
graphs="$build/codegen_snapshot_graphs"
if [ ! -f "$graphs/.complete" ]; then
  rm -rf "$graphs"; mkdir -p "$graphs"
  "$py" "$FORGE_ROOT/tests/fixtures/make_models.py" "$graphs/test_models" >/dev/null
  (cd "$FORGE_ROOT" && "$py" benchmarks/gpu/problems.py export "$graphs/problems" >/dev/null)
  touch "$graphs/.complete"
fi
(cd "$graphs" && "$build/compiler/codegen/codegen_snapshot" test_models problems) > "$out"
say "snapshot: $(wc -l < "$out") lines, $(grep -c 'invalid:' "$out" || true) invalid points -> $out"
