#!/bin/bash
# Build flux-security and flux-core from the unmodified release tarballs in
# ../shared/thirdparty/ into a cache directory outside the repository, once
# per machine (keyed by the tarballs' checksums).  Prints the prefix.
#
#   scripts/build-flux.sh [--deps]     --deps: apt-get install what they need
#
# FMB_THIRDPARTY  where the tarballs are (default: ../shared/thirdparty next
#                 to the repository)
# FMB_CACHE       the cache (default: /var/cache/fmbroker-test)
# Exit 0 and the prefix on stdout; exit 77 with the reason on stderr when the
# tarballs are absent (the tests that need Flux then skip, or fail under CI).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tp=${FMB_THIRDPARTY:-$here/../shared/thirdparty}
cache=${FMB_CACHE:-/var/cache/fmbroker-test}
core=$tp/flux-core-0.88.0.tar.gz
sec=$tp/flux-security-0.15.0.tar.gz
for f in "$core" "$sec"; do
    if [ ! -r "$f" ]; then
        echo "build-flux: $f is missing (flux-core 0.88.0 and flux-security 0.15.0 release tarballs)" >&2
        exit 77
    fi
done
if [ "${1:-}" = --deps ]; then
    . "$here/scripts/apt-need.sh"
    apt_need libzmq3-dev liblz4-dev libarchive-dev libhwloc-dev lua5.3 liblua5.3-dev \
        lua-posix python3-cffi python3-ply libsodium-dev libjansson-dev libsqlite3-dev \
        uuid-dev python3-dev python3-yaml libsystemd-dev libmunge-dev munge \
        build-essential pkg-config
fi
key=$(cat "$core" "$sec" | sha256sum | cut -c1-16)
prefix=$cache/flux-$key
# $cache/flux names the newest build: cmake takes it (src/flux).
if [ -x "$prefix/bin/flux" ] && [ -f "$prefix/.complete" ]; then
    ln -sfn "flux-$key" "$cache/flux"
    echo "$prefix"
    exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf "$prefix"
log=$cache/build-flux.log # kept: the reason when a build fails
{
    tar -C "$work" -xzf "$sec"
    tar -C "$work" -xzf "$core"
    (cd "$work/flux-security-0.15.0" &&
        ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" --disable-docs &&
        make -j"$(nproc)" && make install)
    (cd "$work/flux-core-0.88.0" &&
        PKG_CONFIG_PATH=$prefix/lib/pkgconfig ./configure --prefix="$prefix" \
            --with-flux-security --disable-docs \
            LUA=/usr/bin/lua5.3 PYTHON=/usr/bin/python3 CPPFLAGS=-I"$prefix/include" &&
        make -j"$(nproc)" && make install)
} >"$log" 2>&1 || {
    echo "build-flux: build failed; the last lines of its log:" >&2
    tail -30 "$log" >&2
    echo "build-flux: the whole log: $log" >&2
    exit 1
}
# make install clears the IMP's setuid bit
chown root:root "$prefix/libexec/flux/flux-imp"
chmod 4755 "$prefix/libexec/flux/flux-imp"
touch "$prefix/.complete"
ln -sfn "flux-$key" "$cache/flux"
echo "$prefix"
