#!/usr/bin/env bash
# prepare.sh packs what the GPU check (run.sh) needs on a GPU machine that
# has no Go toolchain and no network, into the git-ignored .gpucheck/ of
# the repository root: one compressed archive holding
#   bin/entropix-bench   built here with CGO_ENABLED=0
#   ggml/                the pinned ggml Vulkan package's libraries
#                        (model/ggml/getlibs.sh vulkan; its CUDA library,
#                        159 MB, is too big to travel)
#   vulkan/libvulkan.so.1  the Vulkan loader, from Debian's libvulkan1 .deb
#   llama/               with --llama: llama.cpp's llama-bench and
#                        llama-batched-bench (llama-tools.sh), run on the
#                        same ggml libraries for a comparison
#   src/ggml-src.tar.xz  with --llama or --cuda-src: ggml's source (0.7
#                        MiB), for cuda.sh to build ggml-cuda there
#   MANIFEST             versions, commit and checksums
# and checks that it stays under 60 MiB (at most 64 MiB travel with the
# working tree). Run it from any folder; it needs Go, npm (or the package
# tarball: see getlibs.sh), and apt-get download or an installed
# libvulkan1; --llama also cmake and a C++ compiler.
#
#   bench/gpucheck/prepare.sh [--llama] [--cuda-src]
set -euo pipefail
llama=0 cudasrc=0
for arg in "$@"; do
  case "$arg" in
  --llama) llama=1 cudasrc=1 ;;
  --cuda-src) cudasrc=1 ;;
  *) echo "usage: prepare.sh [--llama] [--cuda-src]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
root=$PWD
export PATH="$PATH:/usr/local/go/bin"

out=$root/.gpucheck
limit=$((60 * 1024 * 1024))
say() { echo "prepare: $*" >&2; }
die() { say "$*"; exit 1; }
t0=$(date +%s)

command -v go >/dev/null || die "Go is not installed (https://go.dev/dl/)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/ggml" "$stage/vulkan" "$out"

say "building entropix-bench (CGO_ENABLED=0, linux/amd64)..."
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false -ldflags "-s -w" \
  -o "$stage/bin/entropix-bench" ./cmd/entropix-bench
registered=$("$stage/bin/entropix-bench" backends -h 2>&1 | tr '\n' ' ' | grep -o 'registered: [^)]*' | head -n 1 || true)
say "the binary's backends: ${registered#registered: }"
case "$registered" in
*ggml*) ;;
*) say "WARNING: this build has no ggml backend: run.sh can only check the CPU against itself (GPUCHECK_B=cpu)" ;;
esac

say "the ggml Vulkan libraries..."
env_line=$(model/ggml/getlibs.sh vulkan) || die "could not get ggml's Vulkan package (see above)"
ggml_dir=${env_line#export ENTROPIX_GGML_DIR=}
cp "$ggml_dir"/libggml*.so "$stage/ggml/"
cp "$ggml_dir"/_nlcBuildMetadata.json "$ggml_dir"/.pinned "$stage/ggml/" 2>/dev/null || true

say "the Vulkan loader (libvulkan1)..."
deb_dir=$(mktemp -d -p "$stage")
loader=""
if command -v apt-get >/dev/null && (cd "$deb_dir" && apt-get download -q libvulkan1 >/dev/null 2>&1); then
  deb=$(find "$deb_dir" -name 'libvulkan1_*.deb' | head -n 1)
  dpkg-deb -x "$deb" "$deb_dir/x"
  loader=$(find "$deb_dir/x" -name 'libvulkan.so.1' | head -n 1)
  loader_from=$(basename "$deb")
fi
if [ -z "$loader" ]; then
  for p in /usr/lib/x86_64-linux-gnu/libvulkan.so.1 /usr/lib64/libvulkan.so.1 /usr/lib/libvulkan.so.1; do
    if [ -e "$p" ]; then loader=$p loader_from="$p (installed here; apt-get download failed)"; break; fi
  done
fi
[ -n "$loader" ] || die "no libvulkan.so.1: apt-get download libvulkan1 failed and none is installed"
cp -L "$loader" "$stage/vulkan/libvulkan.so.1"
rm -rf "$deb_dir"

if [ "$llama" = 1 ]; then
  say "llama.cpp's llama-bench and llama-batched-bench..."
  bench/gpucheck/llama-tools.sh "$stage/llama" || die "could not build llama.cpp's tools (see above)"
fi
if [ "$cudasrc" = 1 ]; then
  say "ggml's source, for cuda.sh..."
  src=$(bench/gpucheck/llama-tools.sh --source) || die "could not get llama.cpp's source (see above)"
  mkdir -p "$stage/src"
  # ggml alone (its own cmake project): the core, the CPU and CUDA backends.
  mapfile -t core < <(cd "$src" && git ls-files 'ggml/src/*.c' 'ggml/src/*.cpp' 'ggml/src/*.h' 'ggml/src/*.in' | grep -v '^ggml/src/[^/]*/')
  (cd "$src" && git archive HEAD ggml/CMakeLists.txt ggml/cmake ggml/include ggml/src/CMakeLists.txt \
    ggml/src/ggml-cpu ggml/src/ggml-cuda "${core[@]}") |
    xz -6 >"$stage/src/ggml-src.tar.xz" || die "could not pack ggml's source from $src"
fi

{
  echo "GPU check bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "go: $(go version)"
  echo "backends: ${registered#registered: }"
  echo "ggml: $(cat "$stage/ggml/.pinned" 2>/dev/null || echo unknown)"
  echo "vulkan loader: $loader_from"
  echo
  (cd "$stage" && find . -type f ! -name MANIFEST | sort | xargs sha256sum)
} >"$stage/MANIFEST"

rm -f "$out"/bundle.tar.*
if command -v xz >/dev/null; then
  bundle=$out/bundle.tar.xz
  tar -C "$stage" -cf - . | xz -T0 -6 >"$bundle.tmp"
else
  bundle=$out/bundle.tar.gz
  tar -C "$stage" -cf - . | gzip -9 >"$bundle.tmp"
fi
mv "$bundle.tmp" "$bundle"
cp "$stage/MANIFEST" "$out/MANIFEST"

size=$(du -sb "$out" | cut -f1)
unpacked=$(du -sb "$stage" | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
say "$(basename "$bundle"): $(mib "$size") ($(mib "$unpacked") unpacked) in $(($(date +%s) - t0)) s"
[ "$size" -le "$limit" ] || die ".gpucheck is $(mib "$size"): over the $(mib "$limit") limit"

# What travels to the device machine: tracked files, untracked ones git
# does not ignore, and the carried .gpucheck.
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 -r du -cb 2>/dev/null | awk '$2 == "total" { s += $1 } END { print s + 0 }')
total=$((tree + size))
say "the working tree ($(mib "$tree")) and .gpucheck together: $(mib "$total") of the 64 MiB that may travel"
[ "$total" -le $((64 * 1024 * 1024)) ] || die "over 64 MiB: the device tool would refuse the call"
say "done: carry [\".gpucheck\"] and run bench/gpucheck/run.sh"
