#!/usr/bin/env python3
"""Runs llama.cpp's llama-bench and llama-batched-bench on the model a GPU
check measured, on the same ggml libraries, and prints a markdown table of
our backend's speed against llama.cpp's: decode at one row, prefill, and the
step of B sequences sharing a prompt (llama-batched-bench -pps -kvu, whose
S_TG is the tokens/s of all B sequences' decode steps, our B-branch step's
counterpart; -kvu, one KV buffer for all sequences, holds the shared prompt
once, as our pool does: without it this llama.cpp gives each sequence a
fixed share, 256 positions at 64 sequences, and a 512-token prompt fails).

    llama_compare.py CHECK.json MODEL.gguf LLAMA_DIR GGML_DIR NGL SECONDS

CHECK.json is entropix-bench backends' JSON (its first model, the timing of
its backend b); LLAMA_DIR holds the tools and libllama, GGML_DIR the ggml
libraries they load (the tools run there, as ggml looks for its backends in
the working folder); NGL is llama.cpp's -ngl (99: every layer on the GPU;
0: the CPU); SECONDS bounds each tool's run.
"""

import json
import os
import re
import subprocess
import sys


def run(cmd, cwd, env, seconds):
    """Runs cmd, returning its output, or raising with the tail of it."""
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=seconds)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (os.path.basename(cmd[0]), p.returncode, (p.stderr or p.stdout)[-600:].strip()))
    return p.stdout


def batched_tg(out):
    """Maps B to S_TG t/s in llama-batched-bench's table."""
    res, col = {}, None
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "S_TG t/s" in cells:
            col = cells.index("S_TG t/s")
            continue
        if col is None or len(cells) <= col or not re.fullmatch(r"\d+", cells[0] or "x"):
            continue
        try:
            res[int(cells[2])] = float(cells[col])
        except ValueError:
            pass
    return res


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    check, model, llama_dir, ggml_dir, ngl, seconds = sys.argv[1:]
    seconds = float(seconds)
    with open(check) as f:
        rep = json.load(f)
    chk = rep["models"][0]
    timing = next((t for t in chk.get("timings") or [] if t["backend"] == chk["b"]), None)
    if timing is None:
        sys.exit("llama_compare: %s holds no timing of %s" % (check, chk["b"]))
    cfg = timing["config"]
    decode, prefill, prefix = cfg["DecodeTokens"], cfg["PromptTokens"], cfg["Prefix"]
    branches = [b for b in cfg["Branches"]]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join([llama_dir, ggml_dir] + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
    bench = [os.path.join(llama_dir, "llama-bench"), "-m", model, "-ngl", ngl, "-p", str(prefill), "-n", str(decode), "-r", "3", "-o", "json"]
    batched = [os.path.join(llama_dir, "llama-batched-bench"), "-m", model, "-ngl", ngl, "-c", str(prefix + 8 * max(branches) + 64),
               "-npp", str(prefix), "-ntg", "8", "-npl", ",".join(map(str, branches)), "-pps", "-kvu"]

    theirs, errors = {}, []
    try:
        for r in json.loads(run(bench, ggml_dir, env, seconds)):
            if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0:
                theirs["decode"] = r["avg_ts"]
            elif r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0:
                theirs["prefill"] = r["avg_ts"]
            theirs.setdefault("build", "%s %s" % (r.get("build_commit", "?"), r.get("backends", "")))
    except Exception as e:  # noqa: BLE001 - reported in the table
        errors.append(str(e))
    try:
        for b, v in batched_tg(run(batched, ggml_dir, env, seconds)).items():
            theirs["step%d" % b] = v
    except Exception as e:  # noqa: BLE001
        errors.append(str(e))

    ours = {}
    if timing.get("decode"):
        ours["decode"] = timing["decode"]["TokensPerSec"]
    if timing.get("prefill"):
        ours["prefill"] = timing["prefill"]["TokensPerSec"]
    for s in timing.get("steps") or []:
        ours["step%d" % s["Branches"]] = s["TokensPerSec"]
    bare = timing.get("bare") or {}
    if bare.get("decode"):
        ours["decode-bare"] = bare["decode"]["TokensPerSec"]
    for s in bare.get("steps") or []:
        ours["step%d-bare" % s["Branches"]] = s["TokensPerSec"]
    for k in list(theirs):
        if k == "decode" or k.startswith("step"):
            theirs[k + "-bare"] = theirs[k]

    rows = [("decode", "decode, 1 row (%d tokens)" % decode), ("prefill", "prefill of %d tokens" % prefill)]
    rows += [("step%d" % b, "%d-branch step: %d sequence%s sharing a %d-token prompt" % (b, b, "" if b == 1 else "s", prefix)) for b in branches]
    # Ours computes each row's statistics (the top 64, the normalizer's
    # moments) with the step; llama.cpp's benchmarks time the forward pass
    # alone: the same without them.
    rows += [(k + "-bare", label + ", ours without the rows' statistics") for k, label in rows if k == "decode" or k.startswith("step")]
    print("### %s: %s against llama.cpp on the same ggml libraries (-ngl %s)\n" % (chk["model"], chk["b"], ngl))
    print("| measure | ours, tokens/s | llama.cpp, tokens/s | ours / llama.cpp |")
    print("| --- | ---: | ---: | ---: |")
    for key, label in rows:
        o, t = ours.get(key), theirs.get(key)
        ratio = "**%.2f**" % (o / t) if o and t else "-"
        print("| %s | %s | %s | %s |" % (label, "%.1f" % o if o else "-", "%.1f" % t if t else "-", ratio))
    print("\nllama.cpp: `%s` and `%s`%s.\n" % (" ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(bench)),
                                           " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(batched)),
                                           " (build %s)" % theirs["build"] if "build" in theirs else ""))
    for e in errors:
        print("- llama.cpp: %s" % e.replace("\n", " ").replace("|", "/"))
    if errors:
        print()
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
