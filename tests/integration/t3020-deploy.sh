#!/bin/bash
# t3020-deploy.sh: the unit passes systemd-analyze verify; the .deb has the
# right dependencies, files and maintainer scripts, and its programs run;
# the man pages list every key, command and subcommand the code has.
. "$(dirname "$0")/lib.sh"
src=$FMB_SRC

expect_ok 'systemd-analyze verify accepts the unit, and would refuse a broken one' '
    if ! command -v systemd-analyze >/dev/null; then echo "skipped: no systemd-analyze"; return 0; fi
    sed "s|^ExecStart=/usr/sbin/fmbrokerd|ExecStart=$FMB_BIN/fmbrokerd|" "$src/deploy/fmbrokerd.service" >fmbrokerd.service &&
    systemd-analyze verify --man=no ./fmbrokerd.service 2>err && test ! -s err &&
    mkdir -p broken && sed "s/^Type=notify/Type=notifyy/" fmbrokerd.service >broken/fmbrokerd.service &&
    systemd-analyze verify --man=no broken/fmbrokerd.service 2>err; grep -q "Failed to parse service type" err
'
expect_ok 'the unit is hardened: notify, watchdog, own user, no capabilities, no core dumps' '
    for l in Type=notify WatchdogSec= User=fmbroker StateDirectory=fmbroker RuntimeDirectory=fmbroker \
             ConfigurationDirectory=fmbroker ProtectSystem=strict NoNewPrivileges=yes "CapabilityBoundingSet=$" \
             LimitCORE=0 ; do grep -q "^$l" "$src/deploy/fmbrokerd.service" || { echo "missing $l"; return 1; }; done
'
expect_ok 'cpack builds a .deb with the libraries it links as dependencies' '
    (cd "$FMB_BIN/.." && cpack -G DEB -B "$T/pkg" >/dev/null) && deb=$(ls "$T"/pkg/fmbroker_*.deb) &&
    dpkg-deb -f "$deb" Depends >deps &&
    for d in libcurl4 libmicrohttpd12 libjansson4 libsqlite3-0 libssl3 libinih1 libsystemd0 adduser; do
        grep -q "$d" deps || { echo "Depends lacks $d: $(cat deps)"; return 1; }
    done
'
expect_ok 'the .deb holds programs, unit, man pages, hooks and maintainer scripts' '
    deb=$(ls "$T"/pkg/fmbroker_*.deb) && dpkg-deb -c "$deb" | awk "{print \$6}" >files &&
    for f in ./usr/sbin/fmbrokerd ./usr/sbin/fmbroker-cxi ./usr/bin/fmbroker ./usr/lib/systemd/system/fmbrokerd.service \
             ./usr/lib/sysusers.d/fmbroker.conf ./usr/lib/tmpfiles.d/fmbroker.conf ./usr/share/man/man8/fmbrokerd.8 \
             ./usr/share/man/man5/fmbroker.conf.5 ./usr/share/man/man1/fmbroker.1 ./usr/share/man/man8/fmbroker-cxi.8 \
             ./usr/share/fmbroker/slurm/prolog_slurmctld.sh ./usr/share/doc/fmbroker/examples/fmbroker.conf.example; do
        grep -qx "$f" files || { echo "missing $f"; return 1; }
    done &&
    ! grep -q -e mockfm -e mockcxi -e "/test_" files &&
    dpkg-deb -e "$deb" ctl && test -x ctl/postinst && test -x ctl/prerm && grep -q sysusers ctl/postinst
'
expect_ok 'the packaged programs run' '
    deb=$(ls "$T"/pkg/fmbroker_*.deb) && dpkg-deb -x "$deb" root &&
    root/usr/sbin/fmbrokerd --version | grep -q "^fmbrokerd 0\." &&
    root/usr/bin/fmbroker --version | grep -q "^fmbroker 0\." &&
    root/usr/sbin/fmbroker-cxi --help | grep -q "^Usage: fmbroker-cxi" &&
    root/usr/sbin/fmbrokerd -c "$src/deploy/fmbroker.conf.example" --check-config
'
expect_ok 'the man pages render cleanly' '
    for p in "$src"/doc/*.[158]; do
        out=$(MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) && test -z "$out" || { echo "$p: $out"; return 1; }
    done
'
expect_ok 'fmbroker.conf(5) documents every key with its default' '
    "$FMB_BIN/fmbrokerd" -c /dev/null --dump-config | awk "/^\\[/ {next} / = / {print}" >keys &&
    while read -r key _ value; do
        grep -A2 "^\\.B $key\$" "$src/doc/fmbroker.conf.5" | grep -qF "Default: ${value:-(empty)}." ||
            { echo "conf.5 lacks $key = ${value:-(empty)}"; return 1; }
    done <keys
'
expect_ok 'fmbroker(1) and fmbroker-cxi(8) describe every command' '
    for c in $("$FMB_BIN/fmbroker" --help | awk "/^Commands:/ {on=1; next} on && /^  [a-z]/ {print \$1}"); do
        sed "s/\\\\-/-/g" "$src/doc/fmbroker.1" | grep -q "^\\.B $c" || { echo "fmbroker.1 lacks $c"; return 1; }
    done &&
    for c in prolog epilog env list clean; do
        grep -q "^\\.B $c" "$src/doc/fmbroker-cxi.8" || { echo "fmbroker-cxi.8 lacks $c"; return 1; }
    done
'
done_testing
