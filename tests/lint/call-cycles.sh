#!/bin/bash
# The call-cycle check (scripts/call-cycles.py) on tiny trees: one where
# two files call each other fails and names the edges, one where calls
# only point down passes, one with a ring of three fails, and --report
# prints a cycle but exits 0.
set -u
script="$(dirname "$0")/../../scripts/call-cycles.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

# down: a.c calls b.c; b.c calls only its own static helper; a callback
# handed down (b_run (a_done)) and a call through a pointer are no edges,
# nor is a name in a comment or a string.
mkdir "$tmp/down"
cat >"$tmp/down/b.h" <<'C'
void b_run (void (*cb) (void));
int b_value (void);
C
cat >"$tmp/down/a.c" <<'C'
#include "b.h"
void a_done (void) {}
int a_main (void)
{
    b_run (a_done);
    return b_value ();
}
C
cat >"$tmp/down/b.c" <<'C'
#include "b.h"
struct ops { void (*a_done) (void); };
static int helper (void) { return 1; }
/* a_main () is the caller */
void b_run (void (*cb) (void))
{
    struct ops o = { cb };
    o.a_done ();
    const char *s = "a_main (";
    (void)s;
    cb ();
}
int b_value (void) { return helper (); }
C
out=$(python3 "$script" "$tmp/down" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then ok "calls that only point down pass"; else not_ok "calls that only point down pass (rc $rc: $out)"; fi

# back: b.c calls a_main back
mkdir "$tmp/back"
cp "$tmp/down/"* "$tmp/back/"
cat >>"$tmp/back/b.c" <<'C'
int b_again (void) { return a_main (); }
C
out=$(python3 "$script" "$tmp/back" 2>&1)
rc=$?
if [ $rc -eq 1 ]; then ok "a call back fails"; else not_ok "a call back fails (rc $rc)"; fi
case "$out" in
*"a.c -> b.c: b_run b_value"*"b.c -> a.c: a_main"*) ok "the edges name their functions" ;;
*) not_ok "the edges name their functions: $out" ;;
esac
out=$(python3 "$script" --report "$tmp/back" 2>&1)
rc=$?
case "$rc:$out" in
0:*"cycle: a.c b.c"*) ok "--report prints the cycle and exits 0" ;;
*) not_ok "--report prints the cycle and exits 0 (rc $rc: $out)" ;;
esac

# ring: x -> y -> z -> x
mkdir "$tmp/ring"
echo 'int y (void); int x (void) { return y (); }' >"$tmp/ring/x.c"
echo 'int z (void); int y (void) { return z (); }' >"$tmp/ring/y.c"
echo 'int x (void); int z (void) { return x (); }' >"$tmp/ring/z.c"
out=$(python3 "$script" "$tmp/ring" 2>&1)
rc=$?
case "$rc:$out" in
1:*"cycle: x.c y.c z.c"*) ok "a ring of three fails" ;;
*) not_ok "a ring of three fails (rc $rc: $out)" ;;
esac

# a static function of the same name as another file's stays local
mkdir "$tmp/static"
echo 'int b (void); int a (void) { return b (); }' >"$tmp/static/a.c"
echo 'static int a (void) { return 0; } int b (void) { return a (); }' >"$tmp/static/b.c"
python3 "$script" "$tmp/static" >/dev/null 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "a static namesake is no edge"; else not_ok "a static namesake is no edge (rc $rc)"; fi

# libraries: lib a and lib b call each other through different files
# (a/x.c -> b/y.c, b/z.c -> a/w.c): no file-level ring, a library ring;
# and a name defined in two libraries resolves to the caller's own.
mkdir -p "$tmp/tree/a" "$tmp/tree/b" "$tmp/tree/c"
echo 'int y (void); int x (void) { return y (); }' >"$tmp/tree/a/x.c"
echo 'int y (void) { return 1; }' >"$tmp/tree/b/y.c"
echo 'int w (void); int z (void) { return w (); }' >"$tmp/tree/b/z.c"
echo 'int w (void) { return 2; }' >"$tmp/tree/a/w.c"
echo 'int y (void) { return 3; } int v (void) { return y (); }' >"$tmp/tree/c/v.c"
out=$(python3 "$script" "$tmp/tree" 2>&1)
rc=$?
case "$rc:$out" in
1:*"library cycle: a b"*"a -> b: y"*"b -> a: w"*) ok "a ring of libraries fails" ;;
*) not_ok "a ring of libraries fails (rc $rc: $out)" ;;
esac
case "$out" in
*"c -> b"*) not_ok "a namesake in the caller's own library is the one called: $out" ;;
*) ok "a namesake in the caller's own library is the one called" ;;
esac

python3 "$script" "$tmp/nonesuch" >/dev/null 2>&1
rc=$?
if [ $rc -eq 2 ]; then ok "a missing directory exits 2"; else not_ok "a missing directory exits 2 (rc $rc)"; fi

echo "1..$n"
exit $((fails > 0))
