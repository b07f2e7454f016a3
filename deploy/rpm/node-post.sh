# fmbroker-node %post: enable the report timer on a first install ($1 = 1;
# it does nothing until a report is kept), whether or not systemd runs (an
# image built in a chroot: `systemctl enable` only links files, and
# without systemctl the link is made here); start it where systemd runs.
# On upgrade ($1 > 1) restart what runs, as the Debian package does.
if [ "$1" -eq 1 ]; then
    systemctl enable fmbroker-cxi-report.timer >/dev/null 2>&1 || true
    want=/etc/systemd/system/timers.target.wants/fmbroker-cxi-report.timer
    if [ ! -e "$want" ] && [ ! -L "$want" ]; then
        for dir in /usr/lib/systemd/system /lib/systemd/system; do
            if [ -e "$dir/fmbroker-cxi-report.timer" ]; then
                mkdir -p "${want%/*}" && ln -s "$dir/fmbroker-cxi-report.timer" "$want"
                break
            fi
        done
    fi
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ "$1" -eq 1 ]; then
        systemctl start fmbroker-cxi-report.timer >/dev/null 2>&1 || true
    else
        systemctl try-restart fmbroker-cxi-report.timer fmbroker-cxi.service fmbroker-slurm-events.service \
            fmbroker-slurm-sweep.timer fmbroker-flux-sweep.timer >/dev/null 2>&1 || true
    fi
fi
