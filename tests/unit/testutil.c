/* testutil.c: see testutil.h. */
#include <fcntl.h>
#include <stdint.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

char *tu_mkdtemp (void)
{
    const char *tmp = getenv ("TMPDIR");
    char *path = tu_path (tmp && *tmp ? tmp : "/tmp", "fmbtest.XXXXXX");
    assert_non_null (mkdtemp (path));
    return path;
}

static int rm_one (const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove (p);
}

void tu_rmtree (char *path)
{
    if (path) {
        nftw (path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free (path);
    }
}

char *tu_path (const char *dir, const char *name)
{
    size_t n = strlen (dir) + strlen (name) + 2;
    char *p = malloc (n);
    assert_non_null (p);
    snprintf (p, n, "%s/%s", dir, name);
    return p;
}

void tu_write (const char *path, const char *text, unsigned mode)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true (fd >= 0);
    size_t len = strlen (text);
    assert_int_equal (write (fd, text, len), (ssize_t)len);
    assert_int_equal (fchmod (fd, mode), 0);
    close (fd);
}

char *tu_slurp (const char *path, size_t *len)
{
    FILE *f = fopen (path, "rb");
    assert_non_null (f);
    fseek (f, 0, SEEK_END);
    long n = ftell (f);
    fseek (f, 0, SEEK_SET);
    char *buf = malloc ((size_t)n + 1);
    assert_non_null (buf);
    assert_int_equal (fread (buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose (f);
    if (len)
        *len = (size_t)n;
    return buf;
}

int64_t tu_clock_now (void *arg)
{
    return ((struct tu_clock *)arg)->now_ms;
}
