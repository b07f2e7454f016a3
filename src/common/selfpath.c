/* selfpath.c: see selfpath.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "selfpath.h"

int fmb_beside_self (const char *rel, char *out, size_t len)
{
    char exe[4096];
    ssize_t n = readlink ("/proc/self/exe", exe, sizeof (exe) - 1);
    char *slash;
    if (n <= 0)
        return -1;
    if ((size_t)n >= sizeof (exe) - 1) { /* perhaps cut short */
        errno = ENAMETOOLONG;
        return -1;
    }
    exe[n] = '\0';
    if (!(slash = strrchr (exe, '/'))) {
        errno = ENOENT;
        return -1;
    }
    *slash = '\0';
    if (snprintf (out, len, "%s/%s", exe, rel) >= (int)len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
