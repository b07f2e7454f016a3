#!/usr/bin/env python3
"""man_check.py SRC BIN: each man page's SYNOPSIS and OPTIONS agree with
its program's --help.

For fmbroker(1), fmbrokerd(8) and fmbroker-cxi(8):
- every option --help defines for the program as a whole (an option
  line of fmbrokerd's help; the "Options:" section of fmbroker's and
  fmbroker-cxi's) is described in the page's OPTIONS section, and is in
  its SYNOPSIS too unless the SYNOPSIS says [OPTIONS];
- every option of a command (fmbroker COMMAND --help, fmbroker-cxi's
  "Commands:" section) is named somewhere in the page;
- every option the page's SYNOPSIS or OPTIONS names is one --help knows.
Long options only.  Prints one line per problem and exits 1 if any.
"""
import os
import re
import subprocess
import sys

src, bindir = sys.argv[1], sys.argv[2]
problems = []
LONG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def helptext(*argv):
    r = subprocess.run([os.path.join(bindir, argv[0])] + list(argv[1:]),
                       capture_output=True, text=True)
    return r.stdout + r.stderr


def section(text, title):
    """The lines after a help heading such as "Options:" up to a blank line."""
    m = re.search(r"^" + re.escape(title) + r"\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    return m.group(1) if m else ""


def defined(text):
    """Options a help text defines, {long: short or None}: each option
    line's own ("  -c, --config FILE ...")."""
    out = {}
    for line in text.split("\n"):
        m = re.match(r"\s+(?:(-\w), )?(--[a-z][\w-]*)", line)
        if m:
            out[m.group(2)] = m.group(1)
    return out


def names(text, o, short):
    """Does a page's text name option o, or its short form?"""
    if o in LONG.findall(text):
        return True
    return bool(short) and re.search(r"(?<![\w-])" + short + r"(?![\w-])", text)


def man_sections(path):
    """{SECTION: text} of a man page, roff escapes and fonts taken out."""
    text = open(path).read()
    text = re.sub(r"\\f[BIRP]|\\f\(..", "", text).replace("\\-", "-")
    out, name = {}, None
    for line in text.split("\n"):
        m = re.match(r"\.SH\s+\"?([^\"]+)\"?", line)
        if m:
            name = m.group(1).strip()
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def check(page, prog, glob, cmd_opts):
    path = os.path.join(src, "doc", page)
    secs = man_sections(path)
    syn, opts = secs.get("SYNOPSIS", ""), secs.get("OPTIONS", "")
    whole = "".join(secs.values())
    for o, short in sorted(glob.items()):
        if not names(opts, o, short):
            problems.append(f"{page}: OPTIONS lacks {o} ({prog} --help has it)")
        if "[OPTIONS]" not in syn and not names(syn, o, short):
            problems.append(f"{page}: SYNOPSIS lacks {o} ({prog} --help has it)")
    for o in sorted(cmd_opts - set(glob)):
        if o not in LONG.findall(whole):
            problems.append(f"{page}: names nowhere {o} ({prog}'s help for a command has it)")
    # another program's options, as in "fmbrokerd --node-token NAME", are
    # that program's page's business
    own = re.sub(r"\b(fmbroker-cxi|fmbrokerd|fmbroker)\s+(--[a-z][\w-]*)",
                 lambda m: m.group(0) if m.group(1) == prog else "", syn + opts)
    for o in sorted(set(LONG.findall(own)) - set(glob) - cmd_opts):
        problems.append(f"{page}: SYNOPSIS or OPTIONS names {o}, which {prog} --help does not")


# fmbroker: the global options, and each command's usage
cli_help = helptext("fmbroker", "--help")
commands = re.findall(r"^  ([a-z][a-z-]+) ", section(cli_help, "Commands:"), re.M)
cli_cmd = set()
for c in commands:
    cli_cmd |= set(LONG.findall(helptext("fmbroker", c, "--help")))
cli_glob = defined(section(cli_help, "Options:"))
if not cli_glob or not commands:
    problems.append("fmbroker --help: no Options: or Commands: section found")
check("fmbroker.1", "fmbroker", cli_glob, cli_cmd)

# fmbrokerd: no commands; every option line is the program's
daemon_help = helptext("fmbrokerd", "--help")
check("fmbrokerd.8", "fmbrokerd", defined(daemon_help), set())

# fmbroker-cxi: "Options:" and the options of "Commands:"
agent_help = helptext("fmbroker-cxi", "--help")
agent_glob = defined(section(agent_help, "Options:"))
agent_cmd = set(LONG.findall(agent_help.split("Options:")[0]))
if not agent_glob:
    problems.append("fmbroker-cxi --help: no Options: section found")
check("fmbroker-cxi.8", "fmbroker-cxi", agent_glob, agent_cmd)

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
