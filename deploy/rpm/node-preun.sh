# fmbroker-node %preun: stop and disable its units on erase ($1 = 0), not
# on upgrade.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl disable --now fmbroker-cxi-report.timer >/dev/null 2>&1 || true
    systemctl stop fmbroker-slurm-events.service >/dev/null 2>&1 || true
    systemctl disable --now fmbroker-slurm-sweep.timer fmbroker-flux-sweep.timer >/dev/null 2>&1 || true
fi
