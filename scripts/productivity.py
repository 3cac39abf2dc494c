#!/usr/bin/env python3
"""The productivity table (issue 39, item 4; seed 004's Table 1): lines of code and library
constructs of every Task Bench system of Tactor, beside reference programs counted the same way
and the seed's own figures.

Lines of code: non-blank lines that are not only a comment, tests excluded (a `#[cfg(test)]`
module to the end of its file). A system counts its own module (file or folder) and, once each,
the helper modules of `taskbench::systems` it reaches through `super::`/`crate::` paths, followed
transitively. Not counted, as
the reference's `core/` is not: `taskbench-core` (graphs, kernels, validation) and the harness
every system implements (`systems/interface.rs`: the `System` trait, `RunConfig`, `RunError`,
`check_workers`, and `RunConfig::tactor`, the runtime a run asks for — its workers and pinning,
on ranks the exchange on Task Bench's port — what `MPI_Init` and `mpirun`'s binding are to the
reference; `systems/shared.rs`: `footprint`, the task body helpers (`run_inputs` and kin, and
`WorkerScratch`, the scratch buffer a task body gets on whichever worker runs it); `systems/timing.rs`, how a
pass is timed — a warm-up pass, then one timed from a barrier of every worker and rank, with
the tasks the workers validated — what the reference's `Timer` and `report_timing` in `core/`
with its `MPI_Barrier`s are to it, the same for every system so that their times compare;
`systems/mod.rs`, the registry; `team::Pass`, the result type), nor the
fault injection that tests use (`faults.rs`). The rank code is the runtime's (`tactor::job`).

Library constructs: distinct items of `tactor`/`tactor_comm` the counted files use — names reached
by path or `use`, and methods of those crates' public types called by name (a method name that
the counted files define themselves, or that the standard library uses for everyday things, is
not counted). For a C or C++ reference: distinct `MPI_Xxx` functions and types (constants, all
capitals, are not constructs).

With --apps, the applications instead (issue 40): each of `tactor-apps`' solvers (its module
and the block helpers it uses; the command that parses and reports, shared by both, on a row of
its own), beside PRK's MPI1 Stencil (`--prk DIR`, a checkout of ParRes/Kernels) and PETSc's ex23
driver (`--petsc-ex23 FILE`), counted the same way; a C program's constructs are its distinct
`MPI_Xxx` names, or PETSc's `Petsc/Vec/Mat/KSP/PC` functions and types.

Usage: scripts/productivity.py [--reference DIR]
       scripts/productivity.py --apps [--prk DIR] [--petsc-ex23 FILE]
  DIR: a checkout of StanfordLegion/task-bench (counts mpi/nonblock.cc, mpi/bulk_synchronous.cc).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEMS = os.path.join(ROOT, "crates", "taskbench", "src", "systems")
TACTOR = [os.path.join(ROOT, "crates", c, "src") for c in ("tactor", "tactor-comm")]

HARNESS_ITEMS = {"Pass"}  # what a system may take from team.rs without counting it
SEED = [("MPI (seed 004)", 137, 11), ("HPX (seed 004)", 224, 23),
        ("Itoyori (seed 004)", 77, 14), ("ItoyoriFBC (seed 004)", 115, 11)]
STD_METHODS = {
    "new", "clone", "len", "is_empty", "get", "iter", "map", "push", "insert", "take", "set",
    "run", "default", "from", "into", "unwrap", "expect", "contains", "extend", "store", "load",
    "drop", "next", "as_ref", "with", "build", "finish", "name", "read", "write", "fmt", "eq",
}


def systems():
    """Every system `taskbench --list` names, with its own module: the file under systems/ whose
    code returns that name (a `mod.rs` stands for its whole folder)."""
    exe = os.path.join(ROOT, "target", "release", "taskbench")
    cmd = [exe, "--list"] if os.path.exists(exe) else \
        ["cargo", "run", "-q", "--release", "-p", "taskbench", "--", "--list"]
    listing = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    names = [l.split()[0] for l in listing.splitlines()[1:] if l.strip()]
    own = {}
    for dirpath, _, files in os.walk(SYSTEMS):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            code = "\n".join(code_lines(path))
            for name in names:
                if f'"{name}"' in code and name not in own:
                    rel = os.path.relpath(path, SYSTEMS)
                    own[name] = os.path.dirname(rel) if f == "mod.rs" and dirpath != SYSTEMS else rel
    missing = [n for n in names if n not in own]
    if missing:
        sys.exit(f"error: no module under {SYSTEMS} names the system(s) {', '.join(missing)}")
    return [(n, own[n]) for n in names]


def files_of(entry):
    path = os.path.join(SYSTEMS, entry)
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".rs"))
    return [path]


def code_lines(path):
    """The lines that count: no blank lines, comments or test modules."""
    out, in_block = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if s.startswith("#[cfg(test)]") or s.startswith("#[cfg(all(test"):
                break
            if in_block:
                if "*/" in s:
                    in_block = False
                    s = s.split("*/", 1)[1].strip()
                else:
                    continue
            if s.startswith("/*"):
                if "*/" not in s:
                    in_block = True
                continue
            if not s or s.startswith("//"):
                continue
            out.append(line.rstrip("\n"))
    return out


def helpers(text):
    """Sibling modules of systems/ this code reaches, with the items taken: paths
    (`super::styles::run`) and use trees (`use super::{styles, team::Pass}`) alike."""
    found = {}
    # A grouped use of siblings is spelled out first: `super::{a, b::C}` as `super::a`, `super::b::C`.
    for m in re.finditer(r"\b(super|crate::systems)::\{([^;]*)\}\s*;", text):
        for part in split_tree(m.group(2)):
            text += f"\n{m.group(1)}::{part}"
    for m in re.finditer(r"\b(?:super|crate::systems)::(\w+)(?:::(\{[^}]*\}|\w+))?", text):
        mod, items = m.group(1), m.group(2) or ""
        found.setdefault(mod, set()).update(re.findall(r"\w+", items))
    return found


def split_tree(tree):
    """The top-level parts of a use tree's braces: `a, b::{C, D}` gives `a` and `b::{C, D}`."""
    parts, depth, cur = [], 0, ""
    for ch in tree:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "{") - (ch == "}")
        cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def module_file(mod):
    for entry in (mod + ".rs", mod):
        if os.path.exists(os.path.join(SYSTEMS, entry)):
            return files_of(entry)
    return []


def closure(own):
    """Every file a system whose own module is `own` counts: its own, then helpers,
    transitively."""
    todo, seen = list(files_of(own)), set()
    own_dir = os.path.join(SYSTEMS, own) if os.path.isdir(os.path.join(SYSTEMS, own)) else None
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = "\n".join(code_lines(path))
        for mod, items in helpers(text).items():
            if own_dir and os.path.exists(os.path.join(own_dir, mod + ".rs")):
                continue  # a submodule of its own folder: already counted
            if mod == "team" and items and items <= HARNESS_ITEMS:
                continue
            if mod in ("self", "interface", "shared", "timing") or not module_file(mod):
                continue
            files = module_file(mod)
            if any(f.endswith(os.path.join("systems", "mod.rs")) for f in files):
                continue
            todo.extend(files)
    return sorted(seen)


def public_methods():
    names = set()
    for src in TACTOR:
        for dirpath, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                    names.update(re.findall(r"^\s+pub fn (\w+)", text, re.M))
    return names - STD_METHODS


def constructs(lines, methods):
    text = "\n".join(lines)
    used = set()
    for m in re.finditer(r"\btactor(?:_comm)?::((?:\w+::)*)(\{[^;]*\}|\w+)", text, re.S):
        used.update(leaves(m.group(2)))
    defined = set(re.findall(r"\bfn (\w+)", text))
    used.update(m for m in re.findall(r"\.(\w+)\s*(?:::<[^>]*>)?\(", text)
                if m in methods and m not in defined)
    return used


def leaves(tree):
    """The items a use tree names, without the modules on their way: `{job::Blocks, Future}`
    gives `Blocks` and `Future` (`self` names its module)."""
    if not tree.startswith("{"):
        return {tree}
    out = set()
    for part in split_tree(tree[1:-1]):
        part = part.split(" as ")[0].strip()
        last = part.rsplit("::", 1)
        if last[-1].startswith("{") or "::{" in part:
            head, _, sub = part.partition("::{")
            out |= leaves("{" + sub) if sub else leaves(part)
        elif last[-1] == "self":
            out.add(last[0].rsplit("::", 1)[-1])
        else:
            out.add(last[-1])
    return out


def reference_rows(ref):
    rows = []
    for rel in ("mpi/nonblock.cc", "mpi/bulk_synchronous.cc"):
        path = os.path.join(ref, rel)
        if not os.path.exists(path):
            continue
        lines = code_lines(path)
        names = set(re.findall(r"\bMPI_[A-Z][a-z]\w*", "\n".join(lines)))
        rows.append((f"reference {rel}", len(lines), len(names), [rel]))
    return rows


def c_row(name, path, pattern):
    lines = code_lines(path)
    return (name, len(lines), len(set(re.findall(pattern, "\n".join(lines)))),
            [os.path.basename(path)])


def apps_rows(args):
    apps = os.path.join(ROOT, "crates", "apps", "src")
    methods = public_methods()
    rows = []
    for name, files in (("tactor-apps stencil", ["stencil.rs", "blocks.rs", "fragments.rs"]),
                        ("tactor-apps cg", ["cg.rs", "blocks.rs", "fragments.rs"]),
                        ("tactor-apps command (both)", ["bin/tactor-apps.rs", "launch.rs"])):
        lines = [l for f in files for l in code_lines(os.path.join(apps, f))]
        rows.append((name, len(lines), len(constructs(lines, methods)), files))
    if args.prk:
        path = os.path.join(args.prk, "MPI1", "Stencil", "stencil.c")
        if not os.path.exists(path):
            sys.exit(f"error: --prk {args.prk}: no MPI1/Stencil/stencil.c there")
        rows.append(c_row("PRK MPI1 Stencil", path, r"\bMPI_[A-Z][a-z]\w*"))
    if args.petsc_ex23:
        if not os.path.exists(args.petsc_ex23):
            sys.exit(f"error: --petsc-ex23 {args.petsc_ex23}: no such file")
        rows.append(c_row("PETSc ex23", args.petsc_ex23, r"\b(?:Petsc|Vec|Mat|KSP|PC)[A-Z]\w*"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", help="a checkout of StanfordLegion/task-bench")
    ap.add_argument("--apps", action="store_true", help="count the applications instead")
    ap.add_argument("--prk", help="a checkout of ParRes/Kernels (with --apps)")
    ap.add_argument("--petsc-ex23", help="PETSc's src/ksp/ksp/tutorials/ex23.c (with --apps)")
    args = ap.parse_args()
    if args.apps:
        print("| program | lines of code | library constructs | files counted |")
        print("|---|---|---|---|")
        for name, loc, nlc, files in apps_rows(args):
            print(f"| {name} | {loc} | {nlc} | {', '.join(files)} |")
        return
    if args.reference and not os.path.isdir(args.reference):
        sys.exit(f"error: --reference {args.reference}: no such folder")
    methods = public_methods()
    rows = []
    for system, own in systems():
        files = closure(own)
        lines = [l for f in files for l in code_lines(f)]
        rel = [os.path.relpath(f, SYSTEMS) for f in files]
        rows.append((system, len(lines), len(constructs(lines, methods)), rel))
    if args.reference:
        rows += reference_rows(args.reference)
    print("| system | lines of code | library constructs | files counted |")
    print("|---|---|---|---|")
    for name, loc, nlc, files in rows:
        print(f"| {name} | {loc} | {nlc} | {', '.join(files)} |")
    for name, loc, nlc in SEED:
        print(f"| {name} | {loc} | {nlc} | (the seed's Table 1) |")


if __name__ == "__main__":
    main()
