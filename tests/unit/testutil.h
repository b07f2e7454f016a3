/* testutil.h: helpers shared by the cmocka unit tests. */
#ifndef FMB_TESTUTIL_H
#define FMB_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* A fresh directory under $TMPDIR (or /tmp); malloc'd path. */
char *tu_mkdtemp (void);
/* rm -rf 'path' and free it. */
void tu_rmtree (char *path);
/* malloc'd "dir/name". */
char *tu_path (const char *dir, const char *name);
/* Write 'text' to 'path' with 'mode'. */
void tu_write (const char *path, const char *text, unsigned mode);
/* Whole file contents (malloc'd, NUL-terminated); *len gets the size. */
char *tu_slurp (const char *path, size_t *len);

/* A clock the tests move by hand (for store_set_clock). */
struct tu_clock {
    int64_t now_ms;
};
int64_t tu_clock_now (void *arg);

#endif
