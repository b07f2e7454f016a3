# fmbroker %preun: stop the broker on erase ($1 = 0), not on upgrade.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl stop fmbrokerd.service >/dev/null 2>&1 || true
fi
