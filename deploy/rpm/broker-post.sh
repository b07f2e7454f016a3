# fmbroker %post: the service user (sysusers), its directories; on upgrade
# ($1 > 1) a running broker restarts on the new binary, but only into a
# configuration the new binary takes (`fmbrokerd --check-config`, run as
# root, checks as the service user): restarted into one it refuses, the
# broker would exit 2 and stay down (RestartPreventExitStatus=2).  Left
# alone, the old broker keeps serving until the admin fixes what the
# check names (doc/install.md, "Upgrading") and restarts it.
systemd-sysusers fmbroker.conf >/dev/null 2>&1 || true
systemd-tmpfiles --create fmbroker.conf >/dev/null 2>&1 || true
install -d -m 0700 -o fmbroker -g fmbroker /var/lib/fmbroker 2>/dev/null || true
install -d -m 0755 /etc/fmbroker
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ "$1" -gt 1 ] && systemctl is-active --quiet fmbrokerd.service; then
        if out=$(fmbrokerd --check-config 2>&1); then
            systemctl try-restart fmbrokerd.service >/dev/null 2>&1 || true
        else
            echo "fmbroker: fmbrokerd NOT restarted on the new version: its configuration fails the new version's checks:" >&2
            printf '%s\n' "$out" | sed 's/^/fmbroker:   /' >&2
            echo "fmbroker: the broker still running is the old version, serving as before; fix what is named above" >&2
            echo "fmbroker: (/usr/share/doc/fmbroker/doc/install.md, Upgrading), run 'fmbrokerd --check-config' until it passes," >&2
            echo "fmbroker: then 'systemctl restart fmbrokerd'" >&2
        fi
    fi
fi
