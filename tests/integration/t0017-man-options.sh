#!/bin/bash
# t0017-man-options.sh: each man page's SYNOPSIS and OPTIONS name the
# options its program's --help gives, and no other (man_check.py says
# exactly what it compares).
. "$(dirname "$0")/lib.sh"
check="$FMB_SRC/tests/integration/man_check.py"

expect_ok 'fmbroker(1), fmbrokerd(8) and fmbroker-cxi(8) agree with --help' '
    python3 "$check" "$FMB_SRC" "$FMB_BIN"
'
expect_ok 'the check finds an option missing from a SYNOPSIS and one --help does not know' '
    mkdir -p copy/doc && cp "$FMB_SRC"/doc/*.[158] copy/doc/ &&
    sed -i "s/\\\\-\\\\-broker\\\\-url/--gone/" copy/doc/fmbroker.1 &&
    sed -i "s/^\\.B \\\\-\\\\-rotate\\\\-node\\\\-key$/.B \\\\-\\\\-no\\\\-such/" copy/doc/fmbrokerd.8 &&
    ! python3 "$check" "$PWD/copy" "$FMB_BIN" >out; cat out &&
    grep -q "^fmbroker.1: SYNOPSIS lacks --broker-url" out &&
    grep -q "^fmbroker.1: SYNOPSIS or OPTIONS names --gone" out &&
    grep -q "^fmbrokerd.8: SYNOPSIS lacks --rotate-node-key" out &&
    grep -q "^fmbrokerd.8: SYNOPSIS or OPTIONS names --no-such" out
'
done_testing
