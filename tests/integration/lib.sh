# lib.sh: helpers for fmbroker's integration tests; prints TAP.
#
# Each script sources this, gets a private temporary directory $T (removed
# at exit), and writes steps as
#     expect_ok 'title' 'shell commands'
#     expect_fail 'title' 'shell commands that must fail'
# then ends with done_testing.  FMB_BIN (built programs) and FMB_SRC (the
# source tree) come from ctest.
set -u
: "${FMB_BIN:?FMB_BIN must point at the built bin directory}"
: "${FMB_SRC:?FMB_SRC must point at the source tree}"
T=$(mktemp -d "${TMPDIR:-/tmp}/fmbit.XXXXXX")
cd "$T" || exit 1
trap 'cleanup_all' EXIT
test_count=0
test_failed=0
cleanup_hooks=

cleanup_all () {
    for h in $cleanup_hooks; do $h; done
    cd / && rm -rf "$T"
}

on_exit () {
    cleanup_hooks="$cleanup_hooks $1"
}

run_step () {
    # $1: ok|fail, $2: title, $3: commands
    test_count=$((test_count + 1))
    out="$T/.step$test_count.out"
    (eval "$3") >"$out" 2>&1
    rc=$?
    if { [ "$1" = ok ] && [ $rc -eq 0 ]; } || { [ "$1" = fail ] && [ $rc -ne 0 ]; }; then
        echo "ok $test_count - $2"
    else
        echo "not ok $test_count - $2"
        sed 's/^/#   /' "$out"
        test_failed=$((test_failed + 1))
    fi
}

expect_ok () { run_step ok "$1" "$2"; }
expect_fail () { run_step fail "$1" "$2"; }

# wait_for TRIES DELAY COMMAND...: retry COMMAND until it succeeds.
wait_for () {
    tries=$1 delay=$2
    shift 2
    while [ "$tries" -gt 0 ]; do
        "$@" && return 0
        tries=$((tries - 1))
        sleep "$delay"
    done
    return 1
}

file_mode () { stat -c %a "$1"; }

done_testing () {
    echo "1..$test_count"
    echo "$((test_count - test_failed)) passed, $test_failed failed"
    [ "$test_failed" -eq 0 ]
}
