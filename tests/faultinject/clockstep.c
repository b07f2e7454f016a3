/* clockstep.c: an LD_PRELOAD library for tests.  CLOCK_REALTIME, as
 * clock_gettime(2) reads it, is shifted by the signed milliseconds written
 * in the file named by CLOCKSTEP_FILE (none, or no file: no shift): a
 * wall clock stepped by NTP or an admin while the program runs.  The
 * monotonic clocks are left alone, as a step leaves them. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*clock_gettime_f) (clockid_t, struct timespec *);

static long long shift_ms (void)
{
    const char *path = getenv ("CLOCKSTEP_FILE");
    long long ms = 0;
    FILE *f = path ? fopen (path, "re") : NULL;
    if (f) {
        if (fscanf (f, "%lld", &ms) != 1)
            ms = 0;
        fclose (f);
    }
    return ms;
}

int clock_gettime (clockid_t id, struct timespec *ts)
{
    static clock_gettime_f real;
    if (!real)
        real = (clock_gettime_f)dlsym (RTLD_NEXT, "clock_gettime");
    int rc = real (id, ts);
    if (rc != 0 || id != CLOCK_REALTIME)
        return rc;
    long long ns = (long long)ts->tv_nsec + shift_ms () * 1000000LL;
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ns %= 1000000000LL;
    if (ns < 0) {
        ns += 1000000000LL;
        ts->tv_sec--;
    }
    ts->tv_nsec = (long)ns;
    return 0;
}
