# fmbroker-node %post: enable the report timer on a first install ($1 = 1;
# it does nothing until a report is kept); on upgrade ($1 > 1) restart
# what runs, as the Debian package does.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ "$1" -eq 1 ]; then
        systemctl enable --now fmbroker-cxi-report.timer >/dev/null 2>&1 || true
    else
        systemctl try-restart fmbroker-cxi-report.timer fmbroker-slurm-events.service \
            fmbroker-slurm-sweep.timer fmbroker-flux-sweep.timer >/dev/null 2>&1 || true
    fi
fi
