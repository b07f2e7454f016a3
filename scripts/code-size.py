#!/usr/bin/env python3
"""code-size.py: no function over 100 lines, no source file over 1,000.

For the C files under a directory (default src), recursively, it counts
each file's lines and, with universal-ctags, each function's (from the
line of its name to its closing brace), and prints every one over the
limit, longest first.  A long function or file is where a reader gets
lost and a change lands in the wrong place: cut it along its concerns
rather than raising the limit.

Exit status: 0 when nothing is over, 1 when something is, 2 when it
cannot run.  The lint test runs it (scripts/lint.sh size).
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", nargs="?", default="src")
    ap.add_argument("--function-lines", type=int, default=100)
    ap.add_argument("--file-lines", type=int, default=1000)
    args = ap.parse_args()
    if not os.path.isdir(args.directory):
        print("code-size: %s: not a directory" % args.directory, file=sys.stderr)
        return 2
    paths = []
    for top, dirs, names in os.walk(args.directory):
        dirs.sort()
        paths += [os.path.join(top, n) for n in names if n.endswith((".c", ".h"))]
    paths.sort()
    over = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > args.file_lines:
            over.append((n, "file", p, ""))
    cmd = ["ctags", "--output-format=json", "--languages=C", "--kinds-C=f",
           "--fields=+ne", "-f", "-"] + paths
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("code-size: ctags failed: %s" % e, file=sys.stderr)
        return 2
    for line in res.stdout.splitlines():
        try:
            t = json.loads(line)
        except ValueError:
            continue
        if t.get("_type") != "tag" or "end" not in t:
            continue
        n = t["end"] - t["line"] + 1
        if n > args.function_lines:
            over.append((n, "function", "%s:%d" % (t["path"], t["line"]), t["name"]))
    for n, kind, where, name in sorted(over, reverse=True):
        limit = args.file_lines if kind == "file" else args.function_lines
        print("%s: %s%s has %d lines (limit %d)"
              % (where, kind, " " + name if name else "", n, limit))
    if over:
        print("code-size: %s: %d over the limit" % (args.directory, len(over)))
        return 1
    print("code-size: %s: no function over %d lines, no file over %d"
          % (args.directory, args.function_lines, args.file_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
