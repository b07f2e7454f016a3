#!/bin/bash
# t0010-config-docs.sh: every configuration key the code knows is documented
# in deploy/fmbroker.conf.example with its real default, and the example
# names no key the code does not know.
. "$(dirname "$0")/lib.sh"
example="$FMB_SRC/deploy/fmbroker.conf.example"
# The keys are the point here, not this host's /var/lib and /run: the
# directories the check would create go in the test's own directory.
dirs="--set broker.state_dir=$T/state --set api.socket=$T/run/api.sock"

# "section key = value" lines, from an INI text with keys maybe commented.
keys_of () {
    awk '/^\[/ { s = $0; gsub(/[][]/, "", s); next }
         /^#?[a-z_]+ =/ { sub(/^#/, ""); sub(/[ \t]+$/, ""); print s, $0 }' "$1"
}

expect_ok 'fmbrokerd --dump-config prints the built-in defaults' '
    "$FMB_BIN/fmbrokerd" -c /dev/null --dump-config >dump.conf &&
    grep -q "^\[fabric_manager\]" dump.conf
'
expect_ok 'the example documents every key with its default' '
    keys_of dump.conf | sort >code.keys &&
    keys_of "$example" | sort >doc.keys &&
    test "$(wc -l <code.keys)" -gt 30 &&
    diff -u code.keys doc.keys
'
expect_ok 'the example parses as a valid configuration' '
    "$FMB_BIN/fmbrokerd" -c "$example" --check-config --user root $dirs
'
expect_ok 'the example with every key uncommented is valid too' '
    sed "s/^#\([a-z_]* =\)/\1/" "$example" >all.conf &&
    "$FMB_BIN/fmbrokerd" -c all.conf --check-config --user root $dirs
'
expect_ok 'every man page names the release the programs report' '
    v=$("$FMB_BIN/fmbrokerd" --version | awk "{print \$2}") && v=${v%.*} && test -n "$v" &&
    for m in "$FMB_SRC"/doc/*.[158]; do
        grep -q "^\.so " "$m" && continue # a link to a page checked here
        head -n 1 "$m" | grep -q "\"fmbroker $v\"" || { echo "$m: $(head -n 1 "$m"), not fmbroker $v"; return 1; }
    done
'
done_testing
