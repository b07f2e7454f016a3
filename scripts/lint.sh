#!/bin/sh
# lint.sh format|cppcheck|cycles|size: the checks CI runs on the source tree.
set -eu
cd "$(dirname "$0")/.."
files=$(find src tests bench -name '*.[ch]' 2>/dev/null | sort)
case "${1:-}" in
format)
    # shellcheck disable=SC2086
    clang-format --dry-run -Werror $files
    ;;
cppcheck)
    # shellcheck disable=SC2086
    cppcheck --error-exitcode=1 --enable=warning,portability,performance \
        --inline-suppr -q --std=c11 -D_GNU_SOURCE \
        -I src/common -I src/apiclient -I src/store -I src/fmclient $files
    ;;
cycles)
    # No file of src/ calls a function of a file that calls back into it,
    # and no library a library that calls back into it
    # (scripts/call-cycles.py); a lower file reports up through hooks its
    # owner sets (outbox_set_hooks, reconcile_set_hooks).
    python3 scripts/call-cycles.py src
    ;;
size)
    # No function over 100 lines, no file over 1,000 (scripts/code-size.py).
    python3 scripts/code-size.py src
    ;;
*)
    echo "usage: $0 format|cppcheck|cycles|size" >&2
    exit 2
    ;;
esac
