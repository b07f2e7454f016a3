#!/bin/bash
# t0015-doc-commands.sh: the front page stays a front page, every guide
# is one click from it, and the README and the guides name only files,
# subcommands and options that exist (as t0010 does for keys).
. "$(dirname "$0")/lib.sh"
check="$FMB_SRC/tests/integration/doc_check.py"
guides="install slurm flux compute-nodes high-availability security configuration
operations api development"

expect_ok 'README.md is a front page: under 250 lines' '
    n=$(wc -l <"$FMB_SRC/README.md") && echo "$n lines" && test "$n" -lt 250
'
expect_ok 'README.md starts with the two commands for a fresh machine' '
    test "$(grep -c "^\./scripts/install-deps\.sh && cmake -S \. -B build && cmake --build build -j2 && " \
        "$FMB_SRC/README.md")" = 2 &&
    head -n 12 "$FMB_SRC/README.md" | grep -q "scripts/demo\.sh$" &&
    head -n 12 "$FMB_SRC/README.md" | grep -q "ctest --test-dir build --output-on-failure -j2$"
'
expect_ok 'every guide and the contents page are one click from README.md' '
    for g in $guides README; do
        grep -q "](doc/$g\.md)" "$FMB_SRC/README.md" || { echo "no link to doc/$g.md"; return 1; }
        test -s "$FMB_SRC/doc/$g.md" || { echo "doc/$g.md missing"; return 1; }
    done
'
expect_ok 'links, paths, subcommands and options in README.md and doc/ exist' '
    python3 "$check" "$FMB_SRC" "$FMB_BIN"
'
expect_ok 'the check finds a missing file, subcommand and option' '
    mkdir copy && for f in "$FMB_SRC"/* "$FMB_SRC"/.ci; do ln -s "$f" copy/; done &&
    rm copy/doc && cp -r "$FMB_SRC/doc" copy/doc &&
    printf "%s\n" "\`fmbroker frobnicate\`" "\`fmbrokerd --no-such-flag\`" \
        "\`fmbroker-cxi prolog --no-such-flag\`" "\`deploy/no-such-file\`" \
        "[x](no-such.md)" >copy/doc/bad.md &&
    ! python3 "$check" "$PWD/copy" "$FMB_BIN" >out; cat out &&
    test "$(grep -c "^$PWD/copy/doc/bad.md: " out)" = 5 && test "$(grep -c ": " out)" = 5
'
done_testing
