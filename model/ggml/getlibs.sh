#!/usr/bin/env bash
# getlibs.sh fetches the prebuilt ggml libraries the ggml backend runs on:
# a pinned @node-llama-cpp npm package (ggml 0.25.1, commit 0ad4a86),
# checked against the sha512 pinned below, unpacked into DEST/<variant>/.
#
#   model/ggml/getlibs.sh [cpu|vulkan|cuda|metal] [DEST]
#   eval "$(model/ggml/getlibs.sh vulkan)"    # sets ENTROPIX_GGML_DIR
#
# DEST defaults to .ggml/ in the repository root (git-ignored). The only
# line on standard output is the `export ENTROPIX_GGML_DIR=...` to use;
# progress and errors go to standard error. A second run with the folder
# in place and matching does nothing. The package comes from `npm pack`
# (GETLIBS_NPM: the npm command), else from the registry's tarball URL
# with curl or wget (GETLIBS_REGISTRY, https://registry.npmjs.org by
# default), or from a tarball at hand (GETLIBS_TARBALL=path/to/it.tgz),
# checked the same way. Exit status: 0 done, 1 failed (network,
# checksum), 2 bad usage.
set -euo pipefail

version=3.22.1
variant=${1:-cpu}
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${2:-$root/.ggml}

die() { echo "getlibs: $*" >&2; exit 1; }

# The pins: package, its folder under package/bins/, and the sha512 of
# the tarball (hex; npm's integrity field is the same digest in base64).
case "$variant" in
cpu)
  pkg=@node-llama-cpp/linux-x64 bins=linux-x64
  sha=e6e0820cda9608d7da026f1a47f533c5ba381c1a4a80d17dd640873dea4a86032057638099ab6879f6ce94c8a1b2a0a21f639ddf913f7941d00856df44126e3a
  ;;
vulkan)
  pkg=@node-llama-cpp/linux-x64-vulkan bins=linux-x64-vulkan
  sha=6c1c6a53e24e701bb59dbe508f6cdc31c8be241c93d44f046a31ef62877235f5483e41215e1fbf1ccc11d7f053ef13f4f182b4864b3e90cf1f825111d0ff0912
  ;;
cuda)
  pkg=@node-llama-cpp/linux-x64-cuda bins=linux-x64-cuda
  sha=f2b4028f234d2d9254162b7e6298f0942e21c242a038c224076c2ec9c2817fc354d8edf248a6e259943c6b0f64bb69d44d78d29d422b13a281f3c8ad76e4c1b8
  ;;
metal)
  echo "getlibs: no @node-llama-cpp/mac-arm64-metal@$version is published (its last release is 3.21.1, another ggml);" >&2
  echo "getlibs: build ggml at commit 0ad4a86 (llama.cpp's ggml/, cmake -DGGML_METAL=ON -DGGML_BACKEND_DL=ON -DBUILD_SHARED_LIBS=ON)" >&2
  echo "getlibs: and point --ggml-dir or ENTROPIX_GGML_DIR at the folder of its libggml*.dylib" >&2
  exit 1
  ;;
-h | --help | help)
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 0
  ;;
*)
  echo "getlibs: unknown variant '$variant': want cpu, vulkan, cuda or metal" >&2
  exit 2
  ;;
esac

out=$dest/$variant
stamp=$out/.pinned
want="$pkg@$version sha512:$sha"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$out/libggml-base.so" ]; then
  echo "getlibs: $pkg@$version already in $out" >&2
  echo "export ENTROPIX_GGML_DIR=$out"
  exit 0
fi

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.getlibs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

tgz=$tmp/package.tgz
if [ -n "${GETLIBS_TARBALL:-}" ]; then
  [ -f "$GETLIBS_TARBALL" ] || die "GETLIBS_TARBALL=$GETLIBS_TARBALL: no such file"
  cp "$GETLIBS_TARBALL" "$tgz"
elif command -v "${GETLIBS_NPM:-npm}" >/dev/null; then
  echo "getlibs: npm pack $pkg@$version ..." >&2
  if ! (cd "$tmp" && "${GETLIBS_NPM:-npm}" pack --loglevel=error "$pkg@$version" >"$tmp/npm.out" 2>"$tmp/npm.err"); then
    tail -n 5 "$tmp/npm.err" >&2
    die "npm pack $pkg@$version failed (no network? see above)"
  fi
  got=$(find "$tmp" -maxdepth 1 -name '*.tgz' | head -n 1)
  [ -n "$got" ] || die "npm pack wrote no tarball"
  mv "$got" "$tgz"
else
  url="${GETLIBS_REGISTRY:-https://registry.npmjs.org}/$pkg/-/${pkg#*/}-$version.tgz"
  echo "getlibs: no npm; fetching $url ..." >&2
  if command -v curl >/dev/null; then
    curl -fsSL --retry 3 -o "$tgz" "$url" || die "could not download $url (no network?); or install npm (https://nodejs.org) and run again"
  elif command -v wget >/dev/null; then
    wget -q -O "$tgz" "$url" || die "could not download $url (no network?); or install npm (https://nodejs.org) and run again"
  else
    die "neither npm nor curl nor wget is installed: install npm (https://nodejs.org) and run again"
  fi
fi

got=$(sha512sum "$tgz" | cut -d' ' -f1)
[ "$got" = "$sha" ] || die "$pkg@$version: sha512 $got, want $sha: not the pinned package"

tar -xzf "$tgz" -C "$tmp" "package/bins/$bins" || die "the package holds no package/bins/$bins"
new=$tmp/$variant
mkdir -p "$new"
# The ggml libraries and the build's description; not llama.cpp's own
# libraries nor node's addon.
find "$tmp/package/bins/$bins" -maxdepth 1 -type f \( -name 'libggml*' -o -name '_nlcBuildMetadata.json' \) -exec mv {} "$new/" \;
[ -f "$new/libggml-base.so" ] || die "the package holds no libggml-base.so"
echo "$want" >"$new/.pinned"
rm -rf "$out"
mv "$new" "$out"
echo "getlibs: $pkg@$version unpacked into $out ($(du -sh "$out" | cut -f1))" >&2
case "$variant" in
vulkan) echo "getlibs: it needs libvulkan.so.1 and a Vulkan driver (on a machine without a GPU: apt-get install libvulkan1 mesa-vulkan-drivers, and GGML_VK_VISIBLE_DEVICES=0)" >&2 ;;
cuda) echo "getlibs: it needs libcudart.so.13 and libcublas.so.13 (CUDA 13) and the driver's libcuda.so.1 on the library path" >&2 ;;
esac
echo "export ENTROPIX_GGML_DIR=$out"
