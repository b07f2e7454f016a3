/* selfpath.h: a path beside this program's own executable, for programs
 * that find their companions where one package installed them all (the
 * README's build configures /usr/local, the packages install in /usr:
 * a path fixed at build time would be the wrong one).  libc alone. */
#ifndef FMB_SELFPATH_H
#define FMB_SELFPATH_H

#include <stddef.h>

/* "DIR/rel" into out (len bytes), DIR the directory of /proc/self/exe;
 * -1 when that cannot be read or the path does not fit. */
int fmb_beside_self (const char *rel, char *out, size_t len);

#endif
