# hooklib.sh: what the Slurm and the Flux hooks share, sourced first by
# their common.sh (which then adds what is its resource manager's own:
# fmb_log, where messages go, and how a job and a node are named).
# Installed in /usr/share/fmbroker, beside their directories.

# Settings: defaults here, a site's in /etc/default/fmbroker (every one
# is listed there; FMBROKER_DEFAULTS names another file in its place, for
# tests: resource managers give their hooks none of their environment).
# Resource managers give their hooks no PATH of use either.
export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
[ -r "${FMBROKER_DEFAULTS:-/etc/default/fmbroker}" ] && . "${FMBROKER_DEFAULTS:-/etc/default/fmbroker}"
# The site's own Slurm or Flux commands before the distribution's.
[ -n "${FMBROKER_PATH:-}" ] && PATH="$FMBROKER_PATH:$PATH"
FMBROKER_BINDIR=${FMBROKER_BINDIR:-/usr/bin}
FMBROKER_SBINDIR=${FMBROKER_SBINDIR:-/usr/sbin}
FMBROKER_CONF=${FMBROKER_CONF:-/etc/fmbroker/fmbroker.conf}
# How long a hook may wait for the broker before going on without it.
FMBROKER_HOOK_TIMEOUT=${FMBROKER_HOOK_TIMEOUT:-5}
# Extra fmbroker-cxi options (e.g. --libcxi PATH --state-dir DIR).
FMBROKER_CXI_ARGS=${FMBROKER_CXI_ARGS:-}

# How long a CLEANUP that found no broker (or a 429/5xx) is tried again,
# in the background with back-off, in s: a CLEANUP that never arrives
# leaves the job's VNIs and FM reservation held.
FMBROKER_CLEANUP_RETRY_S=${FMBROKER_CLEANUP_RETRY_S:-600}

# Is a failed fmbroker call (exit status $1) worth another try?  The CLI
# exits 75 (EX_TEMPFAIL) when no broker answered or one answered 408, 429
# or 5xx (busy, failing over): the one rule every client of the broker
# follows (src/apiclient/apiretry.h); 124 is timeout(1)'s, where a site's
# wrapper puts one around a hook.  1 (refused)
# and 3 (usage, a bad option, or configuration) do not change by waiting.
# ($2, the call's output, is for the callers' messages.)
fmb_transient () {
    [ "$1" = 75 ] || [ "$1" = 124 ]
}

# Run "$@" in a session of its own, in the background, and return once it
# is there.  slurmctld kills a hook's process group when the hook exits: a
# child still in it then (setsid not yet called) dies with it.  Measured
# under Debian's Slurm 22.05: 7 of 10 detached retries killed without
# this wait, none with it.  Gives up waiting after about 2 s.
fmb_detach () {
    setsid "$@" </dev/null >/dev/null 2>&1 &
    _pid=$! _tries=0
    # /proc/PID/stat after "(comm) ": state ppid pgrp session ...
    while [ "$(sed 's/.*) //' "/proc/$_pid/stat" 2>/dev/null | cut -d' ' -f4)" != "$_pid" ] &&
        [ -e "/proc/$_pid" ] && [ $_tries -lt 200 ]; do
        _tries=$((_tries + 1))
        sleep 0.01
    done
}

# Did a failed end-job (output $1) find no such job at the broker (404):
# its RUN never got there, so it holds no VNI and no FM reservation.
fmb_no_such_job () {
    echo "$1" | grep -q ": 404 "
}
fmb_log_no_such_job () { # JOB [after]
    fmb_log "job $1: the broker has no such job${2:+ ($2)}: its RUN never reached it, so it holds nothing; nothing to end"
}

# fmb_end_job JOB: CLEANUP at the broker; prints what went wrong.  (No
# timeout(1) around it: the CLI bounds the whole call, name lookup and
# TLS handshake included, and says so when it gives up (exit 75); a
# timeout(1) killing it first would lose that reason.)
fmb_end_job () {
    "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
        --timeout "$FMBROKER_HOOK_TIMEOUT" end-job "$1" 2>&1 >/dev/null
}

# fmb_cleanup JOB: the job's CLEANUP, the one call that ends it at the
# broker.  When no broker answers (a failover takes tens of seconds) or
# one answers 429/5xx, this returns at once and a detached copy of the
# calling script ("$0" --retry JOB) goes on with fmb_cleanup_retry.
fmb_cleanup () {
    # fmbroker-slurm-cleanup tried first and found no broker, or a busy
    # one (its reason here): taken as this call's, no second wait for it
    if [ -n "${FMBROKER_CLEANUP_TRANSIENT:-}" ]; then
        _out=$FMBROKER_CLEANUP_TRANSIENT _rc=75
        unset FMBROKER_CLEANUP_TRANSIENT
    else
        _out=$(fmb_end_job "$1")
        _rc=$?
    fi
    [ $_rc = 0 ] && return 0
    if fmb_no_such_job "$_out"; then
        fmb_log_no_such_job "$1"
    elif fmb_transient $_rc "$_out"; then
        fmb_log "job $1: end-job failed: $(echo "$_out" | tail -n 1); retrying for up to $FMBROKER_CLEANUP_RETRY_S s"
        fmb_detach "$0" --retry "$1"
    else
        fmb_log "job $1: end-job failed: $(echo "$_out" | tail -n 1)"
    fi
}

# fmb_cleanup_retry JOB [STOP]: the detached copy's tries, after 2 s and
# then with back-off to 60 s, for FMBROKER_CLEANUP_RETRY_S.  STOP JOB,
# when given, runs before each try: when it succeeds (it says why), the
# CLEANUP is left alone.  The last words name who ends the job then:
# fmb_cleanup_later, else an admin.  Returns 1 when it never got through.
fmb_cleanup_retry () {
    _job=$1 _stop=${2:-} _delay=2 _waited=0 _out=
    while [ "$_waited" -lt "$FMBROKER_CLEANUP_RETRY_S" ]; do
        sleep "$_delay"
        _waited=$((_waited + _delay))
        if [ -n "$_stop" ] && "$_stop" "$_job"; then return 0; fi
        _out=$(fmb_end_job "$_job")
        _rc=$?
        if [ $_rc = 0 ]; then
            fmb_log "job $_job: end-job done after $_waited s of retries"
            return 0
        fi
        if fmb_no_such_job "$_out"; then
            fmb_log_no_such_job "$_job" "after $_waited s of retries"
            return 0
        fi
        fmb_transient $_rc "$_out" || break
        _delay=$((_delay * 2))
        [ $_delay -gt 60 ] && _delay=60
    done
    fmb_log "job $_job: end-job still failing after $_waited s ($(echo "$_out" | tail -n 1)); it keeps its VNIs and FM reservation until ${fmb_cleanup_later:-someone runs 'fmbroker end-job $_job' once a broker answers}"
    return 1
}
