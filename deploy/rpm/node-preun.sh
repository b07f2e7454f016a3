# fmbroker-node %preun: stop and disable its units on erase ($1 = 0), not
# on upgrade; disabled also where systemd does not run.
if [ "$1" -eq 0 ]; then
    systemctl disable fmbroker-cxi-report.timer fmbroker-cxi.service >/dev/null 2>&1 || true
    rm -f /etc/systemd/system/timers.target.wants/fmbroker-cxi-report.timer
    if [ -d /run/systemd/system ]; then
        systemctl stop fmbroker-cxi-report.timer >/dev/null 2>&1 || true
        systemctl stop fmbroker-slurm-events.service >/dev/null 2>&1 || true
        systemctl disable --now fmbroker-slurm-sweep.timer fmbroker-flux-sweep.timer \
            fmbroker-cxi.service >/dev/null 2>&1 || true
    fi
fi
