# fmbroker %post: the service user (sysusers), its directories; on upgrade
# ($1 > 1) a running broker restarts on the new binary.
systemd-sysusers fmbroker.conf >/dev/null 2>&1 || true
systemd-tmpfiles --create fmbroker.conf >/dev/null 2>&1 || true
install -d -m 0700 -o fmbroker -g fmbroker /var/lib/fmbroker 2>/dev/null || true
install -d -m 0755 /etc/fmbroker
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    [ "$1" -gt 1 ] && systemctl try-restart fmbrokerd.service >/dev/null 2>&1 || true
fi
