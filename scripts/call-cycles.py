#!/usr/bin/env python3
"""call-cycles.py: find files of a source tree that call each other.

For the C files under a directory (default src), recursively, it finds, with
universal-ctags, which file defines each function and, from the source,
which files call it; then it builds the file-level call graph and reports
every strongly connected component of more than one file (A calls B and B
calls A, or a longer ring), with the functions behind each edge.

A call is a name followed by '(' inside a function body or a macro, not
after '.' or '->' (a call through a pointer is no dependency on a file),
outside comments and strings.  A name a file defines itself (static or
not) resolves in that file; any other resolves to the file that defines
it with external linkage.  A function passed as a callback is not a call:
that is how a lower file hands work back up without depending on it.

Exit status: 0 without a cycle (or with --report), 1 with one, 2 when it
cannot run.  The lint test runs it (scripts/lint.sh cycles).
"""
import argparse
import json
import os
import re
import subprocess
import sys

IDENT_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def strip_c(text):
    """Comments, strings and char literals blanked; newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " ")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def ctags(paths):
    cmd = ["ctags", "--output-format=json", "--languages=C",
           "--kinds-C=fd", "--fields=+ne", "-f", "-"] + paths
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("call-cycles: ctags failed: %s" % e)
    tags = []
    for line in res.stdout.splitlines():
        try:
            tag = json.loads(line)
        except ValueError:
            continue
        if tag.get("_type") == "tag" and "line" in tag:
            tags.append(tag)
    return tags


def c_files(root):
    """The .c and .h files under 'root', as paths relative to it, sorted."""
    out = []
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for n in names:
            if n.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(top, n), root))
    return sorted(out)


def graph(directory):
    """{file: {other_file: set(functions)}} for the C files under 'directory'.

    Files are named by their path under 'directory'.  A name with external
    linkage defined in more than one file (a program's main, a function of
    src/common compiled into a plugin) resolves to the definition in the
    caller's own directory when there is one, else to every definition.
    """
    files = c_files(directory)
    paths = [os.path.join(directory, f) for f in files]
    by_path = dict(zip(paths, files))
    tags = ctags(paths) if paths else []
    local = {f: set() for f in files}    # every function a file defines
    external = {}                        # name -> files defining it non-static
    bodies = {f: [] for f in files}      # (first, last, own name) line ranges
    for t in tags:
        f = by_path.get(t["path"], t["path"])
        if f not in local:
            continue
        last = t.get("end", t["line"])
        if t["kind"] == "function":
            local[f].add(t["name"])
            if not t.get("file"):
                external.setdefault(t["name"], set()).add(f)
        bodies[f].append((t["line"], last, t["name"]))
    edges = {f: {} for f in files}
    for f, path in zip(files, paths):
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = strip_c(fh.read()).split("\n")
        here = os.path.dirname(f)
        for first, last, own in bodies[f]:
            for no in range(first, last + 1):
                if no > len(lines):
                    break
                line = lines[no - 1]
                for m in IDENT_CALL.finditer(line):
                    name = m.group(1)
                    if no == first and name == own:
                        continue  # the definition itself
                    before = line[:m.start()].rstrip()
                    if before.endswith(".") or before.endswith("->"):
                        continue
                    if name in local[f] or name not in external:
                        continue
                    targets = external[name]
                    near = {g for g in targets if os.path.dirname(g) == here}
                    for g in near or targets:
                        if g != f:
                            edges[f].setdefault(g, set()).add(name)
    return edges


def libraries(edges):
    """The same graph with each file replaced by its directory."""
    out = {}
    for f, targets in edges.items():
        d = os.path.dirname(f) or "."
        out.setdefault(d, {})
        for g, names in targets.items():
            e = os.path.dirname(g) or "."
            out.setdefault(e, {})
            if e != d:
                out[d].setdefault(e, set()).update(names)
    return out


def components(edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(
        description="Report files of a C directory that call each other.")
    ap.add_argument("directory", nargs="?", default="src")
    ap.add_argument("--report", action="store_true",
                    help="print the cycles but exit 0")
    ap.add_argument("--graph", action="store_true",
                    help="print every file-level call edge too")
    args = ap.parse_args()
    if not os.path.isdir(args.directory):
        print("call-cycles: %s: not a directory" % args.directory,
              file=sys.stderr)
        return 2
    edges = graph(args.directory)
    if args.graph:
        for f in sorted(edges):
            for g in sorted(edges[f]):
                print("%s -> %s: %s" % (f, g, " ".join(sorted(edges[f][g]))))
    comps = components(edges)
    lib_edges = libraries(edges)
    lib_comps = components(lib_edges)
    for kind, graph_, found in (("cycle", edges, comps),
                                ("library cycle", lib_edges, lib_comps)):
        for comp in found:
            print("%s: %s" % (kind, " ".join(comp)))
            for f in comp:
                for g in sorted(graph_[f]):
                    if g in comp:
                        print("  %s -> %s: %s"
                              % (f, g, " ".join(sorted(graph_[f][g]))))
    comps = comps + lib_comps
    if not comps:
        print("call-cycles: %s: no file calls back into a file it calls"
              % args.directory)
        return 0
    print("call-cycles: %s: %d cycle(s)%s"
          % (args.directory, len(comps), " (report only)" if args.report else ""))
    return 0 if args.report else 1


if __name__ == "__main__":
    sys.exit(main())
