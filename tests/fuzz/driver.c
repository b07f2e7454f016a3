/* driver.c: runs a libFuzzer harness without libFuzzer (gcc builds, ctest
 * smoke): every file of the given corpus directories, then random
 * mutations of them for a bounded number of rounds and seconds.  A crash
 * or sanitizer report fails the test.  Real fuzzing: build with
 * -DFMB_FUZZ=ON and clang (see doc/development.md). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define MAX_SEEDS      256
#define FUZZ_MAX_INPUT (64 * 1024)
#define ROUNDS         20000
#define SECONDS        5
#define INPUT_SECONDS  10 /* one input taking longer is a hang: a bug */

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;

static void load_dir (const char *dir)
{
    DIR *d = opendir (dir);
    struct dirent *e;
    if (!d) {
        perror (dir);
        exit (2);
    }
    while ((e = readdir (d)) && nseeds < MAX_SEEDS) {
        char path[4096];
        if (e->d_name[0] == '.')
            continue;
        snprintf (path, sizeof (path), "%s/%s", dir, e->d_name);
        FILE *f = fopen (path, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc (FUZZ_MAX_INPUT);
        size_t n = fread (buf, 1, FUZZ_MAX_INPUT, f);
        fclose (f);
        seeds[nseeds] = buf;
        seed_len[nseeds++] = n;
    }
    closedir (d);
}

/* The input being run, for the hang report. */
static const uint8_t *current;
static size_t current_len;

static void on_alarm (int sig)
{
    (void)sig;
    static const char msg[] =
        "an input ran for more than 10 s (a hang); written to "
        "./fuzz-hang-input\n";
    int fd = open ("fuzz-hang-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        (void)!write (fd, current, current_len);
        close (fd);
    }
    (void)!write (2, msg, sizeof (msg) - 1);
    abort ();
}

static void run_one (const uint8_t *data, size_t len)
{
    current = data;
    current_len = len;
    alarm (INPUT_SECONDS);
    LLVMFuzzerTestOneInput (data, len);
    alarm (0);
}

static size_t mutate (uint8_t *buf, size_t len)
{
    static const char tokens[][8] = {
        "{",       "}",    "[",  "]",     "\"",   ",",    ":", "%",  "%2F", "/",
        "\\u0000", "null", "-1", "99999", "\xc3", "\xff", "=", "\n", "[1-", "]"};
    int ops = 1 + rand () % 4;
    for (int i = 0; i < ops; i++) {
        size_t pos = len ? (size_t)rand () % (len + 1) : 0;
        switch (rand () % 4) {
        case 0: /* flip a byte */
            if (len)
                buf[pos % len] ^= (uint8_t)(1 << (rand () % 8));
            break;
        case 1: /* delete a run */
            if (len) {
                size_t n = (size_t)rand () % (len - pos % len) + 1;
                memmove (buf + pos % len, buf + pos % len + n, len - pos % len - n);
                len -= n;
            }
            break;
        case 2: { /* insert a token */
            const char *t = tokens[rand () % (sizeof (tokens) / sizeof (tokens[0]))];
            size_t n = strlen (t);
            if (len + n < FUZZ_MAX_INPUT) {
                memmove (buf + pos + n, buf + pos, len - pos);
                memcpy (buf + pos, t, n);
                len += n;
            }
            break;
        }
        default: /* duplicate a run */
            if (len && len * 2 < FUZZ_MAX_INPUT) {
                size_t n = (size_t)rand () % (len - pos % len) + 1;
                memmove (buf + pos % len + n, buf + pos % len, len - pos % len);
                len += n;
            }
        }
    }
    return len;
}

int main (int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        load_dir (argv[i]);
    if (nseeds == 0) {
        fprintf (stderr, "no seeds\n");
        return 2;
    }
    signal (SIGALRM, on_alarm);
    for (int i = 0; i < nseeds; i++)
        run_one (seeds[i], seed_len[i]);
    /* FUZZ_SEED=N repeats a run exactly */
    const char *env = getenv ("FUZZ_SEED");
    unsigned seed = env ? (unsigned)strtoul (env, NULL, 10) : (unsigned)time (NULL);
    printf ("FUZZ_SEED=%u\n", seed);
    fflush (stdout);
    srand (seed);
    uint8_t *buf = malloc (FUZZ_MAX_INPUT);
    time_t end = time (NULL) + SECONDS;
    long rounds = 0;
    for (; rounds < ROUNDS && time (NULL) < end; rounds++) {
        int s = rand () % nseeds;
        memcpy (buf, seeds[s], seed_len[s]);
        size_t len = mutate (buf, seed_len[s]);
        run_one (buf, len);
    }
    printf ("%d seeds, %ld mutated inputs, no crash\n", nseeds, rounds);
    free (buf);
    for (int i = 0; i < nseeds; i++)
        free (seeds[i]);
    return 0;
}
