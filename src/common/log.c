/* log.c: journald records with fields under systemd, plain stderr lines
 * otherwise; see log.h. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX  2048
#define JOB_FIELD_MAX 1040 /* a step id (256 bytes) escaped, with room */

static char log_ident[64] = "fmbroker";
static int log_level = LOG_INFO;

void fmb_log_init (const char *ident, int level)
{
    snprintf (log_ident, sizeof (log_ident), "%s", ident);
    log_level = level;
}

void fmb_log_set_level (int level)
{
    log_level = level;
}

/* Words after which the next token is a secret.  The token ends at white
 * space, a quote, '&', ',' or the end of the line. */
static const char *const secret_markers[] = {
    "Bearer ",
    "access_token",
    "client_secret=",
    "sessionToken",
    "session_token",
    "password",
    "passwd=",
};

static char *skip_to_value (char *p)
{
    /* Skip separators such as `":"`, `=`, `: ` that sit between a JSON or
     * form key and its value. */
    while (*p == '"' || *p == ':' || *p == '=' || *p == ' ')
        p++;
    return p;
}

void fmb_log_redact (char *line)
{
    for (size_t i = 0; i < sizeof (secret_markers) / sizeof (secret_markers[0]); i++) {
        const char *m = secret_markers[i];
        char *p = line;
        while ((p = strcasestr (p, m))) {
            char *v = skip_to_value (p + strlen (m));
            char *end = v;
            while (*end && !strchr (" \t\"'&,}\n", *end))
                end++;
            if (end > v) {
                /* Replace the value with "***" and close the gap. */
                memmove (v + 3, end, strlen (end) + 1);
                memcpy (v, "***", 3);
                end = v + 3;
            }
            p = end;
        }
    }
}

size_t fmb_log_escape (char *out, size_t outsize, const char *in)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (outsize == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        /* C0 and DEL, and C1 (U+0080..U+009F, 0xc2 0x80..0x9f in UTF-8):
         * both its bytes are escaped, so no terminal or parser sees it */
        bool c1 = (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) ||
                  (p > (const unsigned char *)in && p[-1] == 0xc2 && *p >= 0x80 &&
                   *p <= 0x9f);
        if (*p < 0x20 || *p == 0x7f || c1) {
            if (o + 4 >= outsize)
                break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        } else {
            if (o + 1 >= outsize)
                break;
            out[o++] = (char)*p;
        }
    }
    out[o] = '\0';
    return o;
}

static bool stderr_is_journal;
static bool log_to_syslog;

void fmb_log_syslog (void)
{
    openlog (log_ident, LOG_PID, LOG_DAEMON);
    log_to_syslog = true;
}

static pthread_once_t stderr_checked = PTHREAD_ONCE_INIT;

static void check_stderr (void)
{
    const char *js = getenv ("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    stderr_is_journal = js && sscanf (js, "%llu:%llu", &dev, &ino) == 2 &&
                        fstat (STDERR_FILENO, &st) == 0 &&
                        (unsigned long long)st.st_dev == dev &&
                        (unsigned long long)st.st_ino == ino;
}

/* Is stderr the journal stream systemd connected ($JOURNAL_STREAM is
 * "DEV:INO" of it)?  Checked once, by whichever thread logs first: a
 * program's stderr does not change. */
static bool to_journal (void)
{
    pthread_once (&stderr_checked, check_stderr);
    return stderr_is_journal;
}

/* libsystemd's sd_journal_send, loaded the first time a record goes to
 * the journal.  Not linked: it brings six more libraries (libgcrypt,
 * liblzma, libzstd, ...) into every start of the node agent and the CLI,
 * which a job's launch waits for (prolog), while only a program that
 * systemd started logs to the journal.  NULL when it cannot be loaded:
 * the lines go to stderr, which systemd also keeps. */
typedef int (*sd_journal_send_f) (const char *format, ...);

static sd_journal_send_f journal_send_fn;
static pthread_once_t journal_loaded = PTHREAD_ONCE_INIT;

static void load_journal (void)
{
    void *lib = dlopen ("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib)
        *(void **)&journal_send_fn = dlsym (lib, "sd_journal_send");
}

/* Once per process, whichever thread logs first (the Flux plugins and
 * the store's checkpointer run threads). */
static sd_journal_send_f journal_sender (void)
{
    pthread_once (&journal_loaded, load_journal);
    return journal_send_fn;
}

/* One journald record; -1 if journald did not take it. */
static int journal_send (int level, const struct fmb_log_fields *f, const char *line)
{
    sd_journal_send_f sd_journal_send = journal_sender ();
    if (!sd_journal_send)
        return -1;
    char job[JOB_FIELD_MAX], step[JOB_FIELD_MAX], node[JOB_FIELD_MAX], call[64];
    const char *v[4] = {f ? f->job : NULL,
                        f ? f->step : NULL,
                        f ? f->node : NULL,
                        f ? f->fm_call : NULL};
    char *out[4] = {job, step, node, call};
    size_t len[4] = {sizeof (job), sizeof (step), sizeof (node), sizeof (call)};
    static const char *const names[4] = {"JOB", "STEP", "NODE", "FM_CALL"};
    char field[4][JOB_FIELD_MAX + 16];
    const char *extra[4] = {NULL, NULL, NULL, NULL};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (!v[i])
            continue;
        fmb_log_escape (out[i], len[i], v[i]); /* untrusted: one line */
        snprintf (field[n], sizeof (field[n]), "%s=%s", names[i], out[i]);
        extra[n] = field[n];
        n++;
    }
    /* sd_journal_send takes its fields as arguments; absent ones repeat
     * a harmless one (an empty list ends at the first NULL). */
    return sd_journal_send ("MESSAGE=%s",
                            line,
                            "PRIORITY=%d",
                            level & 7,
                            "SYSLOG_IDENTIFIER=%s",
                            log_ident,
                            extra[0] ? "%s" : NULL,
                            extra[0],
                            extra[1] ? "%s" : NULL,
                            extra[1],
                            extra[2] ? "%s" : NULL,
                            extra[2],
                            extra[3] ? "%s" : NULL,
                            extra[3],
                            NULL) < 0
               ? -1
               : 0;
}

__attribute__ ((format (printf, 3, 0))) static void log_va (
    int level, const struct fmb_log_fields *f, const char *fmt, va_list ap)
{
    if (level > log_level)
        return;
    int saved = errno;
    char raw[LOG_LINE_MAX], line[LOG_LINE_MAX * 4];
    vsnprintf (raw, sizeof (raw), fmt, ap);
    fmb_log_redact (raw);
    /* The one place untrusted text (step ids, node reports, FM errors,
     * peers' requests) is made safe: a record is one line, whatever its
     * arguments hold. */
    fmb_log_escape (line, sizeof (line), raw);
    if (!to_journal () || journal_send (level, f, line) < 0)
        fprintf (stderr, "%s: %s: %s\n", log_ident, fmb_log_level_name (level), line);
    if (log_to_syslog)
        syslog (level, "%s", line);
    errno = saved;
}

void fmb_log (int level, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    log_va (level, NULL, fmt, ap);
    va_end (ap);
}

void fmb_logf (int level, const struct fmb_log_fields *fields, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    log_va (level, fields, fmt, ap);
    va_end (ap);
}
