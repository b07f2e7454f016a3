#!/bin/sh
# slurm-plugin-version.sh PLUGIN.so: print the Slurm release a SPANK plugin
# was built for, as Slurm's loader reads it (plugin_version, major.minor.micro),
# and its plugin_type; exit 1 when it has none.  Loads the plugin lazily
# in a throw-away helper: its spank_* / slurm_* calls stay unresolved.
set -eu
so=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/v.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main (int argc, char **argv)
{
    void *h = dlopen (argc > 1 ? argv[1] : "", RTLD_LAZY | RTLD_LOCAL);
    const unsigned *v = h ? dlsym (h, "plugin_version") : NULL;
    const char *type = h ? dlsym (h, "plugin_type") : NULL;
    if (!v || !type) {
        fprintf (stderr, "%s: %s\n", argv[1], h ? "no plugin_version/plugin_type" : dlerror ());
        return 1;
    }
    printf ("%u.%02u.%u %s\n", *v >> 16 & 255, *v >> 8 & 255, *v & 255, type);
    return 0;
}
C
cc -o "$tmp/v" "$tmp/v.c" -ldl && "$tmp/v" "$so"
