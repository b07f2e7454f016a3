#!/bin/bash
# t3020-deploy.sh: the unit passes systemd-analyze verify; the two .debs
# (fmbroker, fmbroker-node) and the two RPMs have the right dependencies,
# files and maintainer scripts, and their programs run;
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
expect_ok 'systemd-analyze verify accepts the sweeps'"'"' services and timers' '
    if ! command -v systemd-analyze >/dev/null; then echo "skipped: no systemd-analyze"; return 0; fi
    for rm in slurm flux; do
        sed "s|^ExecStart=/usr/share/fmbroker/$rm/|ExecStart=$src/deploy/$rm/|" \
            "$src/deploy/$rm/fmbroker-$rm-sweep.service" >"fmbroker-$rm-sweep.service" &&
        cp "$src/deploy/$rm/fmbroker-$rm-sweep.timer" . || return 1
    done &&
    systemd-analyze verify --man=no ./fmbroker-slurm-sweep.service ./fmbroker-slurm-sweep.timer \
        ./fmbroker-flux-sweep.service ./fmbroker-flux-sweep.timer 2>err && test ! -s err
'
expect_ok 'tmpfiles makes the job records'"'"' directory as the agent does (0755: users read their record)' '
    grep -qx "d /run/fmbroker-cxi 0755 root root -" "$src/deploy/fmbroker.tmpfiles"
'
expect_ok 'the unit is hardened: notify, watchdog, own user, no capabilities, no core dumps, a file limit' '
    for l in Type=notify WatchdogSec= User=fmbroker StateDirectory=fmbroker RuntimeDirectory=fmbroker \
             ConfigurationDirectory=fmbroker ProtectSystem=strict NoNewPrivileges=yes "CapabilityBoundingSet=$" \
             LimitCORE=0 LimitNOFILE=131072 ; do grep -q "^$l" "$src/deploy/fmbrokerd.service" || { echo "missing $l"; return 1; }; done
'
expect_ok 'cpack builds two .debs with the libraries they link as dependencies' '
    (cd "$FMB_BIN/.." && cpack -G DEB -B "$T/pkg" >/dev/null) &&
    deb=$(ls "$T"/pkg/fmbroker_*.deb) && node=$(ls "$T"/pkg/fmbroker-node_*.deb) &&
    dpkg-deb -f "$deb" Depends >deps &&
    for d in libcurl4 libmicrohttpd12 libjansson4 libsqlite3-0 libssl3 libinih1 libsystemd0 adduser "fmbroker-node (= "; do
        grep -qF "$d" deps || { echo "fmbroker Depends lacks $d: $(cat deps)"; return 1; }
    done &&
    dpkg-deb -f "$node" Depends >ndeps &&
    for d in libssl3 libjansson4 libinih1 libsmartcols1 jq; do
        grep -q "$d" ndeps || { echo "fmbroker-node Depends lacks $d: $(cat ndeps)"; return 1; }
    done &&
    ! grep -q -e libmicrohttpd -e libsqlite3 -e adduser -e libcurl ndeps &&
    release=$(dpkg-query -W -f="\${Version}" slurm-client 2>/dev/null | cut -d. -f1-2) &&
    dpkg-deb -f "$node" Breaks >nbreaks && cat nbreaks &&
    { [ -z "$release" ] || grep -qF "slurm-client (<< $release~)" nbreaks; } &&
    for p in "$deb" "$node"; do
        dpkg-deb -f "$p" Maintainer | grep -q "^fmbroker maintainers <maintainers@" &&
        ! dpkg-deb -f "$p" Maintainer | grep -q localhost || { echo "$p: bad Maintainer"; return 1; }
    done
'
# has LIST DEB-OR-RPM PATHS...: each path is in the list, or say which is not
has () {
    list=$1; shift
    for f in "$@"; do grep -qx "$f" "$list" || { echo "missing $f"; return 1; }; done
}
broker_files="/usr/sbin/fmbrokerd /usr/lib/systemd/system/fmbrokerd.service
    /usr/lib/sysusers.d/fmbroker.conf /usr/lib/tmpfiles.d/fmbroker.conf /usr/share/man/man8/fmbrokerd.8.gz
    /usr/share/fmbroker/openapi.yaml /usr/share/doc/fmbroker/examples/fmbroker.conf.example
    /usr/share/doc/fmbroker/copyright /usr/share/doc/fmbroker/README.md
    /usr/share/doc/fmbroker/doc/install.md /usr/share/doc/fmbroker/doc/operations.md"
node_files="/usr/sbin/fmbroker-cxi /usr/sbin/fmbroker-slurm-prolog /usr/sbin/fmbroker-slurm-cleanup
    /usr/bin/fmbroker /etc/default/fmbroker
    /usr/lib/systemd/system/fmbroker-cxi.service
    /usr/lib/systemd/system/fmbroker-cxi-report.timer /usr/lib/systemd/system/fmbroker-cxi-report.service
    /usr/share/man/man1/fmbroker.1.gz /usr/share/man/man5/fmbroker.conf.5.gz /usr/share/man/man8/fmbroker-cxi.8.gz
    /usr/share/man/man8/fmbroker-slurm-cleanup.8.gz /usr/share/man/man8/fmbroker-slurm-prolog.8.gz
    /usr/share/fmbroker/slurm/prolog_slurmctld.sh /usr/share/fmbroker/slurm/epilog_slurmctld.sh
    /usr/share/fmbroker/hooklib.sh /usr/share/fmbroker/slurm/fmbroker-slurm-sweep.sh /usr/lib/systemd/system/fmbroker-slurm-sweep.timer
    /usr/lib/systemd/system/fmbroker-slurm-sweep.service /usr/share/fmbroker/sweeplib.sh
    /usr/share/fmbroker/flux/fmbroker-flux-sweep.sh /usr/lib/systemd/system/fmbroker-flux-sweep.timer
    /usr/share/fmbroker/flux/fmbroker-cxi-epilog.sh /usr/share/doc/fmbroker-node/copyright
    /usr/share/doc/fmbroker-node/README.md /usr/share/doc/fmbroker-node/doc/slurm.md
    /usr/share/doc/fmbroker-node/doc/compute-nodes.md"
# Slurm's plugin directory on Debian (where doc/slurm.md says it is)
[ -e "$FMB_BIN/../lib/fmbroker_spank.so" ] &&
    node_files="$node_files /usr/lib/$(gcc -print-multiarch)/slurm-wlm/fmbroker_spank.so
        /usr/lib/$(gcc -print-multiarch)/slurm-wlm/fmbroker_spank_clean.so"
expect_ok 'fmbroker holds the broker host, fmbroker-node the rest, each with copyright and gzipped man pages' '
    dpkg-deb -c "$T"/pkg/fmbroker_*.deb | awk "{print substr(\$6, 2)}" >files &&
    dpkg-deb -c "$T"/pkg/fmbroker-node_*.deb | awk "{print substr(\$6, 2)}" >nfiles &&
    has files $broker_files && has nfiles $node_files &&
    ! grep -v "^/usr/share/doc/fmbroker/doc/" files |
        grep -q -e fmbroker-cxi -e /usr/bin/fmbroker -e slurm -e flux &&
    ! grep -q -e fmbrokerd -e sysusers nfiles &&
    ! grep -q "/man/.*[0-9]$" files nfiles &&
    ! cat files nfiles | grep -q -e mockfm -e mockcxi -e "/test_" &&
    dpkg-deb -x "$T"/pkg/fmbroker_*.deb root && dpkg-deb -x "$T"/pkg/fmbroker-node_*.deb root &&
    gzip -t root/usr/share/man/man8/fmbrokerd.8.gz && zcat root/usr/share/man/man1/fmbroker.1.gz | grep -q "^.TH FMBROKER 1" &&
    grep -q "^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" root/usr/share/doc/fmbroker/copyright &&
    grep -q "^License: " root/usr/share/doc/fmbroker-node/copyright &&
    plugin=$(awk "\$1 == \"required\" {print \$2}" root/usr/share/fmbroker/slurm/plugstack.conf) &&
    echo "# plugstack.conf: required $plugin" && test -f "root$plugin"
'
expect_ok 'maintainer scripts: sysusers, restart on upgrade after a check (t3025), /etc/default/fmbroker a conffile' '
    dpkg-deb -e "$T"/pkg/fmbroker_*.deb ctl && test -x ctl/postinst && test -x ctl/prerm &&
    grep -q sysusers ctl/postinst && grep -q "try-restart fmbrokerd.service" ctl/postinst &&
    grep -q "fmbrokerd --check-config" ctl/postinst &&
    dpkg-deb -e "$T"/pkg/fmbroker-node_*.deb nctl && grep -qx /etc/default/fmbroker nctl/conffiles &&
    test -x nctl/postinst && test -x nctl/prerm &&
    sh -n ctl/postinst && sh -n ctl/prerm && sh -n nctl/postinst && sh -n nctl/prerm &&
    . root/etc/default/fmbroker
'
# Compute-node images are built by installing packages into a directory
# (a chroot, a container) where systemd does not run: the report timer
# must come out enabled all the same.
wants=etc/systemd/system/timers.target.wants/fmbroker-cxi-report.timer
image_dpkg () { # IMAGE ARGS...: dpkg on an image, its scripts run outside it
    img=$1; shift
    mkdir -p "$img/var/lib/dpkg/info" "$img/var/lib/dpkg/updates" && touch "$img/var/lib/dpkg/status" &&
    dpkg --root="$T/$img" --log=/dev/null --force-depends --force-script-chrootless "$@"
}
expect_ok 'installed into an image with no running systemd, fmbroker-node enables the report timer' '
    image_dpkg img -i "$T"/pkg/fmbroker-node_*.deb >dpkg.out 2>&1 &&
    test -L "img/$wants" && readlink "img/$wants" | grep -qx "/usr/lib/systemd/system/fmbroker-cxi-report.timer" &&
    test -f "img/usr/lib/systemd/system/fmbroker-cxi-report.timer" &&
    image_dpkg img -r fmbroker-node >>dpkg.out 2>&1 && test ! -L "img/$wants"
'
expect_ok '... and so does its postinst where there is no systemctl at all' '
    rm -rf img2 && mkdir -p img2 nosysd && dpkg-deb -x "$T"/pkg/fmbroker-node_*.deb img2 &&
    for c in sh mkdir ln rm; do ln -sf "$(command -v $c)" nosysd/$c; done &&
    PATH=$T/nosysd DPKG_ROOT=$T/img2 nosysd/sh nctl/postinst configure "" &&
    readlink "img2/$wants" | grep -qx "/usr/lib/systemd/system/fmbroker-cxi-report.timer"
'
expect_ok 'the packaged programs run' '
    root/usr/sbin/fmbrokerd --version | grep -q "^fmbrokerd 0\." &&
    root/usr/bin/fmbroker --version | grep -q "^fmbroker 0\." &&
    root/usr/sbin/fmbroker-cxi --help | grep -q "^Usage: fmbroker-cxi" &&
    root/usr/sbin/fmbrokerd -c "$src/deploy/fmbroker.conf.example" --check-config --user root
'
# EpilogSlurmctld finds its script where the package put it (no path of
# the build's): with no configuration to reach a broker by, it hands the
# CLEANUP to the packaged epilog_slurmctld.sh, which says why.
expect_ok 'the packaged CLEANUP hook hands what it cannot do to the packaged script beside it' '
    env -i SLURM_JOB_ID=pkg1 FMBROKER_DEFAULTS=/dev/null FMBROKER_CONF="$T/no-such.conf" \
        FMBROKER_BINDIR="$T/root/usr/bin" FMBROKER_HOOK_LOG="$T/pkg-hook.log" \
        root/usr/sbin/fmbroker-slurm-cleanup && cat pkg-hook.log &&
    grep -q "job pkg1: end-job failed: fmbroker: .*no-such.conf" pkg-hook.log
'
expect_ok 'the RPMs (cpack RPM) hold the same files, the unit, the user and a config file' '
    if ! command -v rpmbuild >/dev/null; then echo "skipped: no rpmbuild (Debian package rpm)"; return 0; fi
    (cd "$FMB_BIN/.." && cpack -G RPM -B "$T/rpm" >/dev/null) &&
    rpm -qlp "$T"/rpm/fmbroker-0*.rpm >rfiles && rpm -qlp "$T"/rpm/fmbroker-node-0*.rpm >rnfiles &&
    has rfiles $broker_files && has rnfiles $node_files &&
    ! grep -qx -e /usr/sbin -e /usr/bin -e /etc rfiles rnfiles &&
    rpm -qp --scripts "$T"/rpm/fmbroker-0*.rpm >scripts && grep -q "systemd-sysusers fmbroker.conf" scripts &&
    grep -q "fmbrokerd --check-config" scripts &&
    rpm -qp --requires "$T"/rpm/fmbroker-0*.rpm | grep -q "^fmbroker-node = " &&
    rpm -qp --requires "$T"/rpm/fmbroker-node-0*.rpm | grep -qx "jq" &&
    rpm -qp --scripts "$T"/rpm/fmbroker-node-0*.rpm >nscripts &&
    grep -q "systemctl enable fmbroker-cxi-report.timer" nscripts &&
    grep -q "timers.target.wants/fmbroker-cxi-report.timer" nscripts &&
    grep -q "systemctl disable fmbroker-cxi-report.timer" nscripts &&
    rpm -qp --configfiles "$T"/rpm/fmbroker-node-0*.rpm | grep -qx /etc/default/fmbroker
'
expect_ok 'the man pages render cleanly' '
    for p in "$src"/doc/*.[158]; do
        grep -q "^\.so " "$p" && continue # a link: rendered below, installed
        out=$(MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) && test -z "$out" || { echo "$p: $out"; return 1; }
    done
'
expect_ok 'man finds each hook program by its own name, in the package' '
    MANWIDTH=80 man --warnings -M root/usr/share/man 8 fmbroker-slurm-cleanup >page 2>err &&
        test ! -s err && grep -q "fmbroker-slurm-cleanup" page && grep -q "end-job" page &&
    MANWIDTH=80 man --warnings -M root/usr/share/man 8 fmbroker-slurm-prolog >page 2>err &&
        test ! -s err && grep -q "fmbroker-slurm-prolog" page && grep -q "CXI services" page
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
expect_ok 'the README is self-contained: no path outside the repository, links that exist' '
    ! grep -n "\.\./[a-z]" "$src/README.md" &&
    for f in $(grep -o "](\([a-zA-Z0-9_./-]*\))" "$src/README.md" | sed "s/^](//; s/)$//" | grep -v "^http"); do
        test -e "$src/$f" || { echo "README links to missing $f"; return 1; }
    done
'
done_testing
