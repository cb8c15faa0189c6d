#!/usr/bin/env python3
"""Fails when the page's wasm links core code that belongs in the worker (ARCHITECTURE.md
"Architecture invariant: the page binary links only ..."). Reads the function names of a
pre-wasm-opt cargo build with a name section (target/wasm32-unknown-unknown/wasm-page/app.wasm,
which scripts/build-web.sh checks after every build) and lists every function whose Rust path
starts with a forbidden prefix.
Usage: scripts/check-page-binary.py FILE.wasm"""
import sys

# Core modules that only the worker runs: the resolver and everything under it (catalogs,
# capacity, step-time model, engine, simulation, search, validation, the vLLM command reader,
# the comparison's importers).
FORBIDDEN = [
    "servesim_core::scenario::Scenario::resolve",
    "servesim_core::scenario::ResolvedScenario",
    "servesim_core::capacity::",
    "servesim_core::model::",
    "servesim_core::gpu::catalog",
    "servesim_core::perf::StepCostModel",
    "servesim_core::engine::",
    "servesim_core::sim::",
    "servesim_core::sweep::SweepRunner",
    "servesim_core::topology::disagg::run",
    "servesim_core::search::",
    "servesim_core::validate::",
    "servesim_core::vllm::",
    # The comparison's importers run in the tools worker (ToWorker::Import).
    "servesim_core::compare::import_files",
    "servesim_core::compare::import_text",
    "servesim_core::compare::json",
    "servesim_core::compare::table",
    "servesim_core::compare::headers",
]


def leb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def function_names(data):
    i = 8
    names = []
    while i < len(data):
        sid = data[i]
        i += 1
        n, i = leb(data, i)
        off = i
        i += n
        if sid != 0:
            continue
        j = off
        l, j = leb(data, j)
        if data[j:j + l] != b"name":
            continue
        j += l
        while j < off + n:
            t = data[j]
            j += 1
            sl, j = leb(data, j)
            e = j + sl
            if t == 1:
                cnt, j = leb(data, j)
                for _ in range(cnt):
                    _, j = leb(data, j)
                    l, j = leb(data, j)
                    names.append(data[j:j + l].decode("utf8", "replace"))
                    j += l
            j = e
    return names


def rust_path(nm):
    """`_ZN13servesim_core8capacity7compute17h...E` -> `servesim_core::capacity::compute`."""
    if not nm.startswith("_ZN"):
        return nm
    s, p, out = nm[3:], 0, []
    while p < len(s) and s[p].isdigit():
        q = p
        while s[q].isdigit():
            q += 1
        n = int(s[p:q])
        part = s[q:q + n]
        if not (part.startswith("h") and len(part) == 17):
            out.append(part)
        p = q + n
    return "::".join(out)


def main():
    data = open(sys.argv[1], "rb").read()
    names = function_names(data)
    if not names:
        sys.exit(f"{sys.argv[1]}: no name section (check the pre-wasm-opt cargo build)")
    bad = sorted({p for p in map(rust_path, names) if any(p.startswith(f) for f in FORBIDDEN)})
    if bad:
        print(f"[check-page-binary] FAIL: the page binary links {len(bad)} worker-only function(s):", file=sys.stderr)
        for p in bad[:40]:
            print("  " + p, file=sys.stderr)
        print("Answer it in the worker (web/src/command_tools.rs, ToWorker) instead (ARCHITECTURE.md).", file=sys.stderr)
        sys.exit(1)
    print(f"[check-page-binary] ok: {len(names)} functions, none under the worker-only prefixes", file=sys.stderr)


main()
