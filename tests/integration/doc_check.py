#!/usr/bin/env python3
"""doc_check.py SRC BIN: README.md and doc/*.md name only what exists.

Checks, for the front page and every guide:
- each relative link resolves to a file in the repository;
- each repository path in a code span or block (src/..., deploy/...,
  tests/..., ...) exists (placeholders such as NAME or {a,b} skipped);
- each `fmbroker SUBCOMMAND`, and each --flag given to fmbroker,
  fmbrokerd or fmbroker-cxi, is one the program's --help lists;
- each row of a table has as many cells as its header (a stray "| |"
  shifts every later cell into the wrong column).
Prints one line per problem and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys

src, bindir = sys.argv[1], sys.argv[2]
docs = [os.path.join(src, "README.md")] + sorted(
    os.path.join(src, "doc", f) for f in os.listdir(os.path.join(src, "doc"))
    if f.endswith(".md") and f != "DESIGN.md")  # the design, not a guide
TOP = ("src/", "tests/", "deploy/", "doc/", "bench/", "scripts/", "api/", ".ci/")
problems = []


def helptext(*argv):
    r = subprocess.run([os.path.join(bindir, argv[0])] + list(argv[1:]),
                       capture_output=True, text=True)
    return r.stdout + r.stderr


cli_help = helptext("fmbroker", "--help")
subcommands = set(re.findall(r"^  ([a-z][a-z-]+) ", cli_help, re.M))
daemon_help = helptext("fmbrokerd", "--help")
agent_help = helptext("fmbroker-cxi", "--help")


def code_of(text):
    """Code blocks and code spans, as a list of strings."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    rest = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M)
    spans = [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", rest)]
    # shell comments are prose
    return [re.sub(r"(^|\s)#\s.*$", "", b, flags=re.M) for b in blocks] + spans


def check_links(path, text):
    base = os.path.dirname(path)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        f = os.path.normpath(os.path.join(base, target.split("#")[0]))
        if not f.startswith(os.path.abspath(src) + os.sep) and f != os.path.abspath(src):
            problems.append(f"{path}: link {target} leaves the repository")
        elif not os.path.exists(f):
            problems.append(f"{path}: link {target}: no such file")


def check_paths(path, code):
    for word in re.findall(r"[A-Za-z0-9_./{},*-]+", code):
        word = word.rstrip(".,")
        if not word.startswith(TOP) or re.search(r"[{}*]|[A-Z]{3,}", word):
            continue
        if not os.path.exists(os.path.join(src, word)):
            problems.append(f"{path}: {word}: no such file in the repository")


def check_commands(path, code):
    for line in code.split("\n"):
        for m in re.finditer(r"(?<![\w/.-])(?<!-u )(fmbroker-cxi|fmbrokerd|fmbroker)(?![\w.-])((?: +[^ #|;&)`]+)*)",
                             line):
            before = line[: m.start()].rstrip()
            if before and not before.endswith(("&&", "||", ";", "|", "(", "--", "$")):
                continue  # a word in a sentence or a message, not a command
            prog, args = m.group(1), m.group(2).split()
            flags = [a.split("=")[0] for a in args if re.match(r"--[a-z]", a)]
            if prog == "fmbroker":
                words = [a for a in args if not a.startswith("-")]
                # the subcommand: the first word after the global options
                i, sub = 0, None
                while i < len(args):
                    if args[i] in ("-c", "--socket", "--broker-url", "--timeout", "-t", "-s", "-b"):
                        i += 2
                        continue
                    if args[i].startswith("-"):
                        i += 1
                        continue
                    sub = args[i]
                    break
                if sub is None or not re.match(r"^[a-z][a-z-]*$", sub):
                    continue
                if sub not in subcommands:
                    if words and re.match(r"^[a-z-]+$", sub) and len(args) > 0:
                        problems.append(f"{path}: fmbroker {sub}: no such subcommand")
                    continue
                known = cli_help + helptext("fmbroker", sub, "--help")
            elif prog == "fmbrokerd":
                known = daemon_help
            else:
                sub = next((a for a in args if not a.startswith("-")), None)
                known = agent_help + (helptext("fmbroker-cxi", sub, "--help") if sub else "")
            for f in flags:
                if not re.search(re.escape(f) + r"\b", known):
                    problems.append(f"{path}: {prog} ... {f}: not an option of {prog}")


def check_tables(path, text):
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    header = None
    for n, line in enumerate(prose.split("\n"), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line)) - 1
        if header is None:
            header = cells
        elif cells != header:
            problems.append(f"{path}: a table row with {cells} cells under a header "
                            f"of {header}: {line[:60]}")


for path in docs:
    text = open(path, encoding="utf-8").read()
    check_links(path, text)
    check_tables(path, text)
    for code in code_of(text):
        check_paths(path, code)
        check_commands(path, code)
for p in problems:
    print(p)
print(f"# {len(docs)} pages checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
