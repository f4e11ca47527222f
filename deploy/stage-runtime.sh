#!/usr/bin/env bash
# Gathers what Forge binaries need at run time into one folder, for an image's runtime stage to
# take with a single COPY. Run in the build stage, after scripts/build:
#   deploy/stage-runtime.sh STAGE BINARY...
# STAGE then holds
#   opt/forge/bin/                   the binaries
#   opt/forge/debian-packages.txt    the Debian packages that provide their system libraries,
#                                    for the runtime stage to apt-get install
#   <same absolute paths as here>    every other library they load (the CUDA toolkit's, the
#                                    PyTorch wheel's), so the RUNPATHs the build wrote still hold
#   etc/ld.so.conf.d/forge.conf      those libraries' folders, for ldconfig, because the build
#                                    stage may have found some through its own ld.so.conf
# ldd does not see libraries opened with dlopen. A wheel folder (site-packages/...) is taken
# whole: cuDNN opens its engine libraries, libtorch_cuda its siblings. Beside NVRTC and CUPTI
# from the toolkit go the companions Forge loads from their folder (common/loader): NVRTC's
# builtins, CUPTI's profiler libraries.
# The CUDA driver (libcuda.so.1) is the host's, mounted by the NVIDIA container runtime.
set -euo pipefail

die() { printf 'stage-runtime: %s\n' "$*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: stage-runtime.sh STAGE BINARY..."
stage="$1"
shift

# The Debian package that owns a library, if any. With merged /usr, ldd names /lib/... while
# most packages list /usr/lib/...; the real file's path settles it.
debian_package() {
  local library="$1" candidate owner
  for candidate in "$library" "/usr$library" "$(readlink -f "$library")"; do
    if owner="$(dpkg-query -S "$candidate" 2>/dev/null)"; then
      printf '%s\n' "${owner%%:*}"
      return 0
    fi
  done
  return 1
}

declare -A copied_dirs=()
copy_preserving_path() {
  # -L: the loader looks libraries up by the name ldd printed, so that name must be a file.
  cp -L --parents "$@" "$stage/"
}

stage_library() {
  local library="$1" dir
  case "$library" in
    /lib/* | /lib64/* | /usr/lib/*)
      debian_package "$library" >>"$stage/opt/forge/debian-packages.txt" \
        || die "$library: in a system folder but owned by no Debian package"
      return
      ;;
  esac
  # Without resolving links: the path the loader used is the one to recreate.
  dir="$(realpath --no-symlinks "$(dirname "$library")")"
  library="$dir/$(basename "$library")"
  if [[ "$dir" == */site-packages/* ]]; then
    [ -n "${copied_dirs[$dir]:-}" ] && return
    mkdir -p "$stage$(dirname "$dir")"
    cp -a "$dir" "$stage$(dirname "$dir")/"
  else
    copy_preserving_path "$library"
    local -a companions
    case "$(basename "$library")" in
      libnvrtc.so*) companions=("$dir"/libnvrtc-builtins.so*) ;;
      libcupti.so*) companions=("$dir"/libnvperf_host.so* "$dir"/libnvperf_target.so*) ;;
      *) companions=() ;;
    esac
    local file
    for file in "${companions[@]}"; do
      [ -e "$file" ] && copy_preserving_path "$file"
    done
  fi
  copied_dirs[$dir]=1
}

mkdir -p "$stage/opt/forge/bin" "$stage/etc/ld.so.conf.d"
: >"$stage/opt/forge/debian-packages.txt"
for binary in "$@"; do
  [ -x "$binary" ] || die "$binary: not an executable (did scripts/build build it?)"
  install -m 0755 "$binary" "$stage/opt/forge/bin/"
  resolved="$(ldd "$binary")"
  if grep -q 'not found' <<<"$resolved"; then
    die "$binary: unresolved libraries here already: $(grep 'not found' <<<"$resolved" | tr -s ' \t\n' ' ')"
  fi
  while read -r library; do
    stage_library "$library"
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$resolved")
done
for dir in "${!copied_dirs[@]}"; do
  printf '%s\n' "$dir"
done | sort >"$stage/etc/ld.so.conf.d/forge.conf"
sort -u -o "$stage/opt/forge/debian-packages.txt" "$stage/opt/forge/debian-packages.txt"
printf 'stage-runtime: %d binaries, %d Debian packages, %d library folders copied into %s\n' \
  "$#" "$(wc -l <"$stage/opt/forge/debian-packages.txt")" "${#copied_dirs[@]}" "$stage"
