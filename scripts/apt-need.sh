# apt-need.sh: sourced (POSIX sh) by install-deps.sh and the third-party
# build scripts: apt_need PACKAGE... installs those not installed yet
# (apt-get update first, only then), asking nothing; messages to stderr.
apt_need () {
    _missing=
    for _p in "$@"; do
        dpkg-query -W -f='${Status}' "$_p" 2>/dev/null | grep -q "install ok installed" ||
            _missing="$_missing $_p"
    done
    [ -n "$_missing" ] || return 0
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 &&
        # shellcheck disable=SC2086
        apt-get install -y -q --no-install-recommends $_missing >&2
}
