"""python -m forge.runtime build BUNDLE... [--arch sm_90] [--build-root DIR] [--verbose]

Builds result bundles' extensions into the build cache ($FORGE_CACHE_DIR/extensions unless
--build-root), each bundle with its graph.pb beside it, so that forge.runtime.load_plan later finds
them built, with the objects of their host-launched steps. No GPU is needed; a plan of ATen steps
alone gets its plan op built too.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from forge.runtime import PlanError, build_bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m forge.runtime",
                                     description=__doc__.split("\n\n")[1])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build bundles' extensions")
    build.add_argument("bundles", nargs="+", type=pathlib.Path)
    build.add_argument("--arch", help="target architecture (default: the plan's)")
    build.add_argument("--build-root", type=pathlib.Path)
    build.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    failed = 0
    for bundle in args.bundles:
        try:
            built = build_bundle(bundle, target_arch=args.arch, build_root=args.build_root,
                                 verbose=args.verbose)
        except PlanError as err:
            failed += 1
            print(f"{bundle}: {err}", file=sys.stderr)
            continue
        print(f"{bundle}: {built if built else 'nothing to build (the plan has no steps)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
