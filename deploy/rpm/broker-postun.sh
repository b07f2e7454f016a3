# fmbroker %postun: /var/lib/fmbroker (reservations, token key) is kept.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
