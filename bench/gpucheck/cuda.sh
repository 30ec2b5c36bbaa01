#!/usr/bin/env bash
# cuda.sh tries ggml's CUDA backend on the GPU machine: the pinned
# package's libggml-cuda.so (159 MB) cannot travel there, so it builds one
# for sm_90 only from ggml's source (0.74 MB, packed by prepare.sh --llama
# or --cuda-src) with the machine's nvcc, timing the build, and when it is
# done within the budget runs the check with -device cuda0 on it (the
# package's other libraries around it: its libggml-base, registry, CPU).
# A session with device time to spare runs it after run.sh, as its own
# call.
#
#   bench/gpucheck/cuda.sh [OUTDIR]
#
# Results in OUTDIR (default $OUT, else ./gpucheck-cuda): summary.md,
# build.log, the check's JSON and log.txt. Environment: GPUCHECK_BUDGET
# (seconds in all, 480), GPUCHECK_DTYPES ("q4_k"), GPUCHECK_SHAPE
# (llama3.2-1b), GPUCHECK_ARGS (more flags for the check), CUDA_ARCH (90),
# GPUCHECK_CUDA_DRYRUN=1 (no nvcc: build ggml's CPU backend from the same
# source instead, to test this script on any machine).
set -uo pipefail
shopt -s nullglob
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$(date +%s)
out=${1:-${OUT:-$PWD/gpucheck-cuda}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
log=$out/log.txt
: >"$log"
budget=${GPUCHECK_BUDGET:-480}
dry=${GPUCHECK_CUDA_DRYRUN:-0}
elapsed() { echo $(($(date +%s) - start)); }
note() { echo "cuda.sh: $*" | tee -a "$log" >&2; }
parts=()
part() { parts+=("| $1 | $2 s | $3 |"); }
status=0

finish() {
  {
    echo "# ggml-cuda for sm_${CUDA_ARCH:-90}, built on the GPU machine, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "GPU: ${gpu:-none}. nvcc: ${nvcc_version:-none}. Total $(elapsed) s of a $budget s budget."
    echo
    echo "| part | took | result |"
    echo "| --- | ---: | --- |"
    printf '%s\n' "${parts[@]}"
    echo
    for r in "${results[@]}"; do [ -s "$r" ] && sed -n '/^## /,$p' "$r"; done
  } >"$out/summary.md"
  cat "$out/summary.md"
  exit "$status"
}
results=()

bundles=("$root"/.gpucheck/bundle.tar.*)
[ -n "${bundles[0]:-}" ] || { note "no .gpucheck/bundle.tar.*: run prepare.sh --llama (or --cuda-src) first"; exit 1; }
work=${GPUCHECK_WORK:-$(mktemp -d /tmp/gpucheck-cuda.XXXXXX)}
mkdir -p "$work"
t=$(date +%s)
if command -v xz >/dev/null; then
  tar -C "$work" -xJf "${bundles[0]}"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "${bundles[0]}" "$work"
fi || { note "could not unpack ${bundles[0]}"; exit 1; }
[ -f "$work/src/ggml-src.tar.xz" ] || { note "the bundle has no ggml source: prepare.sh --llama or --cuda-src"; exit 1; }
mkdir -p "$work/src/ggml-src"
tar -C "$work/src/ggml-src" -xJf "$work/src/ggml-src.tar.xz" 2>/dev/null ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$work/src/ggml-src.tar.xz" "$work/src/ggml-src"
# Built alone, ggml wants its pkg-config template, which llama.cpp's copy
# of ggml lacks.
[ -f "$work/src/ggml-src/ggml/ggml.pc.in" ] || : >"$work/src/ggml-src/ggml/ggml.pc.in"
part "unpack" $(($(date +%s) - t)) ok

gpu=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
arch=${CUDA_ARCH:-90}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
nvcc_version=$([ -n "$nvcc" ] && "$nvcc" --version | tail -n 2 | head -n 1)
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ "$dry" = 1 ]; then
  flags=(-DGGML_CUDA=OFF -DGGML_CPU=ON) target=ggml-cpu lib=libggml-cpu.so device=cpu
else
  [ -n "$nvcc" ] || { note "no nvcc"; part "configure" 0 "no nvcc"; status=1; finish; }
  flags=(-DGGML_CUDA=ON -DGGML_CPU=OFF "-DCMAKE_CUDA_ARCHITECTURES=$arch" "-DCMAKE_CUDA_COMPILER=$nvcc")
  target=ggml-cuda lib=libggml-cuda.so device=cuda0
fi

# 1. Configure and build, timed, within the budget less the check's share.
check_time=${GPUCHECK_CHECK_TIME:-200}
t=$(date +%s)
build=$work/build
if ! cmake -S "$work/src/ggml-src/ggml" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF "${flags[@]}" >"$out/build.log" 2>&1; then
  part "cmake configure" $(($(date +%s) - t)) "failed (build.log)"
  status=1
  finish
fi
part "cmake configure" $(($(date +%s) - t)) ok
t=$(date +%s)
limit=$((budget - $(elapsed) - check_time))
[ "$limit" -gt 30 ] || limit=30
note "building $target with $(nproc) jobs, at most $limit s..."
timeout "$limit" cmake --build "$build" --target "$target" -j "$(nproc)" >>"$out/build.log" 2>&1
rc=$?
built=$(find "$build" -name "$lib" | head -n 1)
if [ "$rc" != 0 ] || [ -z "$built" ]; then
  done_steps=$(grep -c '^\[' "$out/build.log" || true)
  part "build $target" $(($(date +%s) - t)) "$([ "$rc" = 124 ] && echo "not done in $limit s" || echo "failed, exit $rc") ($done_steps build steps logged)"
  status=1
  finish
fi
what="build $target for sm_$arch"
[ "$dry" = 1 ] && what="build $target (a dry run: no CUDA)"
part "$what" $(($(date +%s) - t)) "ok, $(du -h "$built" | cut -f1)"

# 2. The package's ggml with the built backend beside it, and the check.
gdir=$work/ggml-$device
mkdir -p "$gdir"
for f in "$work"/ggml/libggml*.so "$work"/ggml/_nlcBuildMetadata.json; do
  case "$(basename "$f")" in libggml-vulkan.so) ;; *) cp "$f" "$gdir/" ;; esac
done
[ "$dry" = 1 ] && rm -f "$gdir"/libggml-cpu-*.so
cp "$built" "$gdir/"
# The built module asks for libggml-base.so.0: the package's.
ln -sf libggml-base.so "$gdir/libggml-base.so.0"
export ENTROPIX_GGML_DIR=$gdir LD_LIBRARY_PATH=$gdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  if ! ldconfig -p 2>/dev/null | grep -q "$l"; then
    p=$(find /usr/local /opt /usr/lib -name "$l*" 2>/dev/null | head -n 1)
    [ -n "$p" ] && LD_LIBRARY_PATH=$(dirname "$p"):$LD_LIBRARY_PATH
  fi
done
bw=${GPUCHECK_BANDWIDTH:-0}
case "$gpu" in *H200*) bw=${GPUCHECK_BANDWIDTH:-4800} ;; *H100*) bw=${GPUCHECK_BANDWIDTH:-3350} ;; esac
shape=${GPUCHECK_SHAPE:-llama3.2-1b}
read -r -a dtypes <<<"${GPUCHECK_DTYPES:-q4_k}"
read -r -a extra <<<"${GPUCHECK_ARGS:-}"
for dt in "${dtypes[@]}"; do
  left=$((budget - $(elapsed) - 5))
  if [ "$left" -lt 60 ]; then
    part "$shape $dt on $device" 0 "skipped: $left s left"
    status=1
    continue
  fi
  name=$shape-$dt-$device
  t=$(date +%s)
  timeout -k 10 "$left" "$work/bin/entropix-bench" backends -a cpu -b ggml -device "$device" -shape "$shape" -dtype "$dt" \
    -bandwidth "$bw" -timings b -timeout "$((left - 30))s" -json "$out/$name.json" "${extra[@]}" \
    >"$work/$name.md" 2> >(tee -a "$log" >&2)
  rc=$?
  if [ "$rc" != 0 ] && [ -s "$out/$name.json" ]; then
    "$work/bin/entropix-bench" backends -render "$out/$name.json" >"$work/$name.md" 2>>"$log"
  fi
  part "$shape $dt on $device" $(($(date +%s) - t)) "$([ "$rc" = 0 ] && echo ok || echo "exit $rc")"
  [ "$rc" = 0 ] || status=1
  results+=("$work/$name.md")
done
finish
