#!/usr/bin/env bash
# llama-tools.sh builds llama.cpp's llama-bench and llama-batched-bench
# from the llama.cpp source node-llama-cpp@3.22.1 ships (the source of the
# pinned ggml packages' libraries), for the GPU check's comparison with
# llama.cpp on the same libraries: at run time the tools load the
# package's ggml (its libggml-base.so, its registry library as libggml.so,
# its Vulkan and CPU backends); only libllama and the tools are built here.
#
#   bench/gpucheck/llama-tools.sh DEST
#   bench/gpucheck/llama-tools.sh --source   # only fetch the source; print its folder
#
# The source: LLAMA_SRC=folder, else .ggml/llama-src, cloned from the
# package's llama/gitRelease.bundle (npm pack node-llama-cpp@3.22.1,
# checked against the sha512 below). The build (.ggml/llama-build, kept)
# needs cmake and a C++17 compiler: about 10 minutes on 2 cores the first
# time. DEST receives the two tools and the libraries they need besides
# ggml's.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dest=${1:?usage: llama-tools.sh DEST}
say() { echo "llama-tools: $*" >&2; }
die() { say "$*"; exit 1; }

version=3.22.1
sha=6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f

src=${LLAMA_SRC:-$root/.ggml/llama-src}
if [ ! -f "$src/CMakeLists.txt" ]; then
  command -v npm >/dev/null || die "no llama.cpp source: set LLAMA_SRC, or install npm to fetch node-llama-cpp@$version"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "npm pack node-llama-cpp@$version ..."
  (cd "$tmp" && npm pack --loglevel=error "node-llama-cpp@$version" >/dev/null) || die "npm pack node-llama-cpp@$version failed"
  tgz=$(find "$tmp" -maxdepth 1 -name '*.tgz' | head -n 1)
  [ "$(sha512sum "$tgz" | cut -d' ' -f1)" = "$sha" ] || die "node-llama-cpp@$version: not the pinned package (sha512)"
  tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$src"
  git clone -q "$tmp/package/llama/gitRelease.bundle" "$src"
fi
if [ "$dest" = --source ]; then
  echo "$src"
  exit 0
fi
command -v cmake >/dev/null || die "cmake is not installed (apt-get install cmake)"

build=$root/.ggml/llama-build
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  say "configuring $src ..."
  cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON >"$build.log" 2>&1 ||
    { tail -n 20 "$build.log" >&2; die "cmake failed"; }
fi
say "building llama-bench and llama-batched-bench ..."
cmake --build "$build" -j "$(nproc)" --target llama-bench llama-batched-bench >>"$build.log" 2>&1 ||
  { tail -n 20 "$build.log" >&2; die "the build failed"; }

mkdir -p "$dest"
bins=$build/bin
for t in llama-bench llama-batched-bench; do
  cp "$bins/$t" "$dest/"
done
# The libraries they need that are not ggml's (those come from the package).
for lib in $(ldd "$bins/llama-bench" "$bins/llama-batched-bench" 2>/dev/null | awk '$3 ~ /^\// { print $3 }' | sort -u); do
  case "$(basename "$lib")" in
  libllama*) cp -L "$lib" "$dest/$(basename "$lib")" ;;
  esac
done
strip "$dest"/* 2>/dev/null || true
say "$(cd "$dest" && echo *) ($(du -sh "$dest" | cut -f1)) in $dest"
