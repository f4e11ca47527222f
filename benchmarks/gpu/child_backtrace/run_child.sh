#!/usr/bin/env bash
# The bundle's sandbox child with backtrace_preload.c's handler (see there). FORGE_BUNDLE: the bundle
# (default .gpu), holding bin/forge-sandbox-child and libbacktrace_preload.so.
bundle="${FORGE_BUNDLE:-$PWD/.gpu}"
LD_PRELOAD="$bundle/libbacktrace_preload.so" exec "$bundle/bin/forge-sandbox-child" "$@"
