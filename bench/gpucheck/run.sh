#!/usr/bin/env bash
# run.sh is the GPU check: on a GPU machine with no Go toolchain and no
# network, from the archive prepare.sh left in .gpucheck/, it checks the
# ggml backend on the GPU (Vulkan) against the CPU backend on generated
# Llama-3.2-1B-shape models, Q8_0 then Q4_K_M (entropix-bench backends:
# agreement of logits, entropy, varentropy, top-10 and greedy tokens;
# decode, 16- and 64-branch steps, prefill of 512, the search's time
# outside the forward pass, 16 concurrent server requests against one,
# and the share of the memory bandwidth used), within GPUCHECK_BUDGET
# seconds (default 450: under 8 minutes).
#
#   bench/gpucheck/run.sh [--small | --cpu-only] [OUTDIR]
#
# Results go to OUTDIR (default $OUT, else ./gpucheck-out): summary.md
# (the machine, the timings of each part, both checks' tables), one JSON
# per model, and log.txt (everything the tools printed). --small runs the
# same on a small shape with -quick (a test of the script on any
# machine, e.g. over lavapipe with GGML_VK_VISIBLE_DEVICES=0); --cpu-only
# is --small on ggml's CPU device, no Vulkan needed.
#
# Environment: GPUCHECK_B (the backend checked, ggml), GPUCHECK_DEVICE
# (its device, vulkan0), GPUCHECK_SHAPE, GPUCHECK_DTYPES ("q8_0 q4_k"),
# GPUCHECK_BANDWIDTH (GB/s; by default 4800 on an H200, 3350 on an H100),
# GPUCHECK_BUDGET (seconds), GPUCHECK_ARGS (more flags for
# entropix-bench backends), GPUCHECK_LLAMA_TIME (seconds kept for
# llama.cpp's tools when the bundle has them: 100), GPUCHECK_WORK (where to
# unpack; a temporary folder by default).
set -uo pipefail
shopt -s nullglob
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$(date +%s)

small=0 cpuonly=0
while [ $# -gt 0 ]; do
  case "$1" in
  --small) small=1 ;;
  --cpu-only) small=1 cpuonly=1 ;;
  -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  *) break ;;
  esac
  shift
done
out=${1:-${OUT:-$PWD/gpucheck-out}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
log=$out/log.txt
summary=$out/summary.md
: >"$log"
budget=${GPUCHECK_BUDGET:-450}

elapsed() { echo $(($(date +%s) - start)); }
note() { echo "run.sh: $*" | tee -a "$log" >&2; }
parts=()
part() { parts+=("| $1 | $2 s | $3 |"); }

# 1. Unpack the bundle.
t=$(date +%s)
bundles=("$root"/.gpucheck/bundle.tar.*)
bundle=${bundles[0]:-}
if [ -z "$bundle" ]; then
  note "no .gpucheck/bundle.tar.*: run bench/gpucheck/prepare.sh first, and carry .gpucheck"
  exit 1
fi
work=${GPUCHECK_WORK:-$(mktemp -d /tmp/gpucheck.XXXXXX)}
mkdir -p "$work"
unpack() {
  [ "${GPUCHECK_UNPACK:-}" = python ] || case "$bundle" in
  *.xz) command -v xz >/dev/null && tar -C "$work" -xJf "$bundle" && return ;;
  *.gz) command -v gzip >/dev/null && tar -C "$work" -xzf "$bundle" && return ;;
  esac
  # No xz (or gzip): Python's tarfile reads both.
  python3 - "$bundle" "$work" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    t.extractall(sys.argv[2], **kw)
PY
}
if ! unpack; then
  note "could not unpack $bundle (no tar with xz or gzip, no python3?)"
  exit 1
fi
chmod +x "$work/bin/entropix-bench"
part "unpack $(basename "$bundle") into $work" $(($(date +%s) - t)) ok
note "bundle: $(sed -n 2,5p "$work/MANIFEST" | tr '\n' ';')"

# 2. The libraries: ggml's, the Vulkan loader, a driver.
export ENTROPIX_GGML_DIR=$work/ggml
export LD_LIBRARY_PATH=$work/vulkan${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -e "$work/ggml/libggml-cuda.so" ]; then
  # A CUDA build of ggml needs CUDA 13's runtime and cuBLAS: the machine's
  # own, or PyTorch's wheels'.
  for lib in libcudart.so.13 libcublas.so.13; do
    if ! ldconfig -p 2>/dev/null | grep -q "$lib"; then
      p=$(find /usr/local /opt /usr/lib -name "$lib*" 2>/dev/null | head -n 1)
      [ -n "$p" ] && LD_LIBRARY_PATH=$(dirname "$p"):$LD_LIBRARY_PATH
    fi
  done
fi
icds=(/usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/*.json)
nv_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nv_icd" ] && ! grep -qs nvidia "${icds[@]}" /dev/null; then
  # The loader finds no NVIDIA driver where it looks: name the one there.
  export VK_DRIVER_FILES=$nv_icd VK_ICD_FILENAMES=$nv_icd
fi
note "Vulkan drivers: ${icds[*]:-none in the usual folders}${VK_DRIVER_FILES:+; VK_DRIVER_FILES=$VK_DRIVER_FILES}"

# 3. The machine.
{
  echo "## nvidia-smi"
  if command -v nvidia-smi >/dev/null; then timeout 30 nvidia-smi 2>&1; else echo "(no nvidia-smi)"; fi
} >>"$log" 2>&1
gpu=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
bw=${GPUCHECK_BANDWIDTH:-}
if [ -z "$bw" ]; then
  case "$gpu" in
  *H200*) bw=4800 ;;
  *H100*PCIe*) bw=2000 ;;
  *H100*) bw=3350 ;;
  *) bw=0 ;;
  esac
fi
bin=$work/bin/entropix-bench
registered=$("$bin" backends -h 2>&1 | tr '\n' ' ' | grep -o 'registered: [^)]*' | head -n 1)
b=${GPUCHECK_B:-ggml}
case ", ${registered#registered: }," in
*", $b,"*) ;;
*)
  if [ "$cpuonly" = 1 ] && [ -z "${GPUCHECK_B:-}" ]; then
    note "this build has no backend $b (${registered:-none}): --cpu-only checks cpu against cpu"
    b=cpu
  else
    note "this build has no backend $b (${registered:-none}): rebuild with prepare.sh from a checkout that has it"
    exit 1
  fi
  ;;
esac
device=${GPUCHECK_DEVICE:-vulkan0}
[ "$cpuonly" = 1 ] && device=${GPUCHECK_DEVICE:-cpu}
devflags=()
[ "$b" = ggml ] && devflags=(-device "$device")
# The devices ggml sees (the check's header line, from a run that measures
# nothing); without the one asked for, and with an NVIDIA driver the
# loader was not told of, name that driver and look again.
probe() {
  "$bin" backends -a cpu -b ggml "${devflags[@]}" -shape stories260K -dtype q8_0 -agree=false -timings none 2>>"$log" |
    grep -m 1 '^- ggml devices' || true
}
if [ "$b" = ggml ]; then
  t=$(date +%s)
  devices=$(probe)
  if ! grep -qi "\b$device (" <<<"$devices" && [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nv_icd" ]; then
    note "no $device among ${devices:-no devices}: trying VK_DRIVER_FILES=$nv_icd"
    export VK_DRIVER_FILES=$nv_icd VK_ICD_FILENAMES=$nv_icd
    devices=$(probe)
  fi
  note "${devices:-ggml listed no devices (see log.txt)}"
  part "ggml's devices: ${devices#- ggml devices: }" $(($(date +%s) - t)) "$(grep -qi "\b$device (" <<<"$devices" && echo ok || echo "no $device")"
fi
shape=${GPUCHECK_SHAPE:-llama3.2-1b}
[ "$small" = 1 ] && shape=${GPUCHECK_SHAPE:-stories15M}
read -r -a dtypes <<<"${GPUCHECK_DTYPES:-q8_0 q4_k}"
read -r -a extra <<<"${GPUCHECK_ARGS:-}"
[ "$small" = 1 ] && extra=(-quick "${extra[@]}")
note "GPU: ${gpu:-none}; checking $b${devflags[*]:+ (${devflags[*]})} against cpu on $shape ${dtypes[*]}; bandwidth $bw GB/s; budget $budget s, $(elapsed) s spent"

# 4. One check per weight type, each within its share of the time left.
status=0
results=()
n=${#dtypes[@]}
reserve=0 # for llama.cpp's tools, when the bundle has them
[ -x "$work/llama/llama-bench" ] && [ "$b" = ggml ] && reserve=${GPUCHECK_LLAMA_TIME:-100}
for i in "${!dtypes[@]}"; do
  dt=${dtypes[$i]}
  left=$((budget - $(elapsed) - 5 - reserve))
  hard=$((left / (n - i)))
  soft=$((hard - 40))
  if [ "$soft" -lt 20 ]; then
    part "$shape $dt" 0 "skipped: $left s left"
    status=1
    continue
  fi
  name=$shape-$dt
  t=$(date +%s)
  note "$name: entropix-bench backends, at most $hard s..."
  timeout -k 10 "$hard" "$bin" backends -a cpu -b "$b" "${devflags[@]}" -shape "$shape" -dtype "$dt" -keep "$work/models" \
    -bandwidth "$bw" -timings b -timeout "${soft}s" -json "$out/$name.json" "${extra[@]}" \
    >"$work/$name.md" 2> >(tee -a "$log" >&2)
  rc=$?
  secs=$(($(date +%s) - t))
  case $rc in
  0) what=ok ;;
  124 | 137) what="stopped at its $hard s limit"; status=1 ;;
  *) what="exit $rc (see log.txt)"; status=1 ;;
  esac
  if [ "$rc" != 0 ] && [ -s "$out/$name.json" ]; then
    # Cut short: what it measured before is in its JSON.
    "$bin" backends -render "$out/$name.json" >"$work/$name.md" 2>>"$log" && what="$what; the parts measured before are below"
  fi
  part "$shape $dt: agreement and timings" "$secs" "$what"
  results+=("$work/$name.md")
done

# 5. llama.cpp on the same libraries, when the bundle has its tools
# (prepare.sh --llama) and time is left.
if [ -x "$work/llama/llama-bench" ] && [ "$b" = ggml ]; then
  # The tools were linked with ggml's versioned names: give them the
  # package's libraries under those.
  reg=("$work"/ggml/libggml.*.so)
  [ -n "${reg[0]:-}" ] && ln -sf "${reg[0]}" "$work/llama/libggml.so.0"
  ln -sf "$work/ggml/libggml-base.so" "$work/llama/libggml-base.so.0"
  ngl=99
  [ "$device" = cpu ] && ngl=0
  for dt in "${dtypes[@]}"; do
    name=$shape-$dt
    models=("$work/models/$shape-$dt"-seed*.gguf)
    left=$((budget - $(elapsed) - 5))
    if [ -z "${models[0]:-}" ] || [ ! -s "$out/$name.json" ]; then
      part "llama.cpp, $name" 0 "skipped: no model or no check"
      continue
    fi
    if [ "$left" -lt 40 ]; then
      part "llama.cpp, $name" 0 "skipped: $left s left"
      continue
    fi
    t=$(date +%s)
    note "$name: llama-bench and llama-batched-bench, at most $((left / 2)) s each..."
    python3 "$here/llama_compare.py" "$out/$name.json" "${models[0]}" "$work/llama" "$work/ggml" "$ngl" $((left / 2)) \
      >"$work/$name-llama.md" 2>>"$log"
    rc=$?
    part "llama.cpp, $name" $(($(date +%s) - t)) "$([ $rc = 0 ] && echo ok || echo "exit $rc (see the table)")"
    results+=("$work/$name-llama.md")
  done
fi

# 6. The summary.
{
  echo "# GPU check: $b${devflags[*]:+ (${devflags[*]})} against cpu, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "GPU: ${gpu:-none}. Bundle: $(sed -n 2p "$work/MANIFEST"). Total $(elapsed) s of a $budget s budget."
  echo
  echo "| part | took | result |"
  echo "| --- | ---: | --- |"
  printf '%s\n' "${parts[@]}"
  echo
  # Each check's markdown, the machine's header only once.
  first=1
  for r in "${results[@]}"; do
    [ -s "$r" ] || continue
    if [ "$first" = 1 ] || ! grep -q '^# ' "$r"; then cat "$r"; else sed -n '/^## /,$p' "$r"; fi
    first=0
  done
} >"$summary"
cat "$summary"
echo "run.sh: results in $out (summary.md, log.txt, one JSON per model); $(elapsed) s" >&2
[ -z "${GPUCHECK_WORK:-}" ] && rm -rf "$work"
exit $status
