/* fmbroker-slurm-cleanup: slurmctld's EpilogSlurmctld, the job's CLEANUP
 * (DELETE /v1/jobs/JOB) in one process.
 *
 * Why a program of its own: slurmctld starts EpilogSlurmctld for every
 * job as its srun exits.  As epilog_slurmctld.sh running `fmbroker
 * end-job`, a CLEANUP took 3.0 ms of CPU, this program 1.3
 * (bench/hook-cpu.sh, bench/RESULTS.md §31): no shell, and no OpenSSL,
 * which a call to the broker's Unix socket does not use.  It makes the
 * one call that usually suffices, over the broker's Unix socket, and
 * loads libc, jansson and inih alone (apitls_none.c).
 *
 * Everything else is epilog_slurmctld.sh's, run in this process's place
 * with the same environment: a broker named by [api] broker_url (on
 * another host: TLS), any answer but 2xx, settings this program cannot
 * read as the shell would.  The script tries the CLEANUP again through
 * fmbroker end-job and does what it always did: says why in syslog (and
 * FMBROKER_HOOK_LOG), retries in the background while no broker answers,
 * names who ends the job otherwise.  When this program found no broker
 * (or a busy one) it says so in FMBROKER_CLEANUP_TRANSIENT, and the
 * script goes straight to its background retries rather than wait for
 * the broker a second time.  A second try costs nothing else: the broker
 * takes a CLEANUP twice as once.
 *
 * Settings as the script has them: /etc/default/fmbroker over the
 * environment over the defaults (FMBROKER_CONF, FMBROKER_HOOK_TIMEOUT,
 * FMBROKER_SHAREDIR).  Only a file of plain NAME=VALUE lines (and
 * comments) is read here; one with anything else in it (shell code) is
 * the script's to read, so the script runs, found by the environment or
 * beside this program.  FMBROKER_DEFAULTS names another file in its
 * place (tests; slurmctld gives its hooks no environment). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "apiclient.h"
#include "apiretry.h"
#include "argcheck.h"
#include "config.h"
#include "error.h"
#include "monotime.h"
#include "selfpath.h"
#include "validate.h"

#define SETTING_MAX 4096

struct settings {
    char conf[SETTING_MAX];
    char timeout[32];
    char sharedir[SETTING_MAX];
};

/* 'v' into out, if it fits; else out is "". */
static bool copy_setting (char *out, size_t len, const char *v)
{
    if (snprintf (out, len, "%s", v) < (int)len)
        return true;
    out[0] = '\0';
    return false;
}

/* A shell variable's name: letters, digits and '_', not a digit first. */
static bool shell_name (const char *n)
{
    static const char word[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";
    return *n && !(*n >= '0' && *n <= '9') && strspn (n, word) == strlen (n);
}

/* Is 'v' a value the shell reads as written: no quoting, expansion or
 * second word?  (Quoted values are unquoted by the caller first.) */
static bool plain_value (const char *v, bool quoted)
{
    return !strpbrk (v, quoted ? "$`\\\"'" : "$`\\\"' \t;&|<>(){}*?[]~#");
}

/* NAME=VALUE into 's' when NAME is one of ours.  false: a line the shell
 * may read otherwise than this does, or a value too long to keep. */
static bool assign (struct settings *s, char *line)
{
    char *eq = strchr (line, '=');
    if (!eq)
        return false;
    *eq = '\0';
    char *v = eq + 1;
    size_t n = strlen (v);
    bool quoted = n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0];
    if (quoted) {
        v[n - 1] = '\0';
        v++;
    }
    if (!shell_name (line) || !plain_value (v, quoted))
        return false;
    if (strcmp (line, "FMBROKER_CONF") == 0)
        return copy_setting (s->conf, sizeof (s->conf), v);
    if (strcmp (line, "FMBROKER_HOOK_TIMEOUT") == 0)
        return copy_setting (s->timeout, sizeof (s->timeout), v);
    if (strcmp (line, "FMBROKER_SHAREDIR") == 0)
        return copy_setting (s->sharedir, sizeof (s->sharedir), v);
    return true;
}

/* The defaults file's assignments over 's', all or none: 0 (or no such
 * file), or -1 with why when it holds a line the shell may read otherwise
 * (a line too long to read whole is one), and 's' is left as it was. */
static int read_defaults (struct settings *s, const char *path, char *why, size_t wlen)
{
    static struct settings next; /* large: not on the stack */
    FILE *f = fopen (path, "r");
    char line[SETTING_MAX + 64];
    unsigned lineno = 0;
    if (!f && errno == ENOENT)
        return 0;
    if (!f) {
        snprintf (why, wlen, "%s: %s", path, strerror (errno));
        return -1;
    }
    next = *s;
    while (fgets (line, sizeof (line), f)) {
        lineno++;
        size_t n = strlen (line);
        bool whole = (n > 0 && line[n - 1] == '\n') || feof (f);
        char *p = line + strspn (line, " \t");
        p[strcspn (p, "\n")] = '\0';
        if (whole && (*p == '\0' || *p == '#'))
            continue;
        if (!whole || !assign (&next, p)) {
            snprintf (why, wlen, "%s:%u: not a plain NAME=VALUE line", path, lineno);
            fclose (f);
            return -1;
        }
    }
    fclose (f);
    *s = next;
    return 0;
}

/* An environment variable into out: false when it is set but too long
 * (the shell would have used it whole). */
static bool from_env (char *out, size_t len, const char *name, const char *fallback)
{
    const char *v = getenv (name);
    if (v && *v)
        return copy_setting (out, len, v);
    copy_setting (out, len, fallback);
    return true;
}

/* epilog_slurmctld.sh in this process's place, from 'sharedir' (the
 * settings'), else beside this program, else where it was built to go;
 * 'why' is what this program did not do ('transient': it found no broker,
 * or a busy one), 'job' as it may be logged. */
static int run_script (const char *sharedir,
                       const char *job,
                       const char *why,
                       bool transient)
{
    char dirs[3][SETTING_MAX], script[SETTING_MAX + 64];
    char *argv[] = {script, NULL};
    copy_setting (dirs[0], sizeof (dirs[0]), sharedir);
    if (fmb_beside_self (FMB_SHAREDIR_FROM_SBIN, dirs[1], sizeof (dirs[1])) < 0)
        dirs[1][0] = '\0';
    copy_setting (dirs[2], sizeof (dirs[2]), FMB_DATADIR "/fmbroker");
    if (transient)
        setenv ("FMBROKER_CLEANUP_TRANSIENT", why, 1);
    syslog (LOG_DEBUG, "job %s: %s: running epilog_slurmctld.sh", job, why);
    for (int i = 0; i < 3; i++) {
        if (!dirs[i][0] || snprintf (script,
                                     sizeof (script),
                                     "%s/slurm/epilog_slurmctld.sh",
                                     dirs[i]) >= (int)sizeof (script))
            continue;
        execv (script, argv);
        syslog (LOG_ERR, "cannot run %s: %m", script);
    }
    syslog (LOG_ERR,
            "job %s: %s, and no epilog_slurmctld.sh runs (FMBROKER_SHAREDIR): the "
            "job stays active at the broker until fmbroker-slurm-sweep.timer or "
            "'fmbroker end-job %s' ends it",
            job,
            why,
            job);
    return 1;
}

/* The CLEANUP over the broker's Unix socket: 0 once the broker took it;
 * -1 with why otherwise, and *transient when it may succeed later (no
 * broker answered, or one busy: apiretry.h's one rule). */
static int cleanup (
    const struct settings *s, const char *job, char *why, size_t wlen, bool *transient)
{
    struct fmb_config cfg;
    struct fmb_error e;
    struct api_target t;
    struct api_reply r = {0};
    char path[sizeof ("/v1/jobs/") + JOB_ID_MAX];
    *transient = false;
    long long timeout;
    /* whole seconds, as the CLI takes them (--timeout) */
    if (!cli_parse_number ("FMBROKER_HOOK_TIMEOUT", s->timeout, 1, 3600, &timeout)) {
        snprintf (
            why, wlen, "FMBROKER_HOOK_TIMEOUT=%s is no whole number of s", s->timeout);
        return -1;
    }
    fmb_config_defaults (&cfg);
    if (fmb_config_load_client (&cfg, s->conf, &e) < 0) {
        snprintf (why, wlen, "%s", e.text);
        return -1;
    }
    if (cfg.broker_url[0]) {
        snprintf (why, wlen, "the broker is at [api] broker_url (TLS)");
        return -1;
    }
    api_target_init (&t, &cfg, NULL);
    snprintf (path, sizeof (path), "/v1/jobs/%s", job);
    int64_t t0 = fmb_monotime_ms ();
    int rc = api_client_call (&t, NULL, timeout, "DELETE", path, NULL, NULL, &r, &e);
    int err = errno;
    json_decref (r.body);
    *transient = api_outcome_transient (
        api_outcome_of (rc, err, r.status, fmb_monotime_ms () - t0));
    if (rc < 0)
        snprintf (why, wlen, "%s", e.text);
    else if (r.status < 200 || r.status > 299)
        snprintf (why, wlen, "the broker answered %ld", r.status);
    return rc < 0 || r.status < 200 || r.status > 299 ? -1 : 0;
}

int main (void)
{
    static struct settings s; /* large: not on the stack */
    char why[FMB_ERROR_TEXT_MAX + 256] = "";
    const char *defaults = getenv ("FMBROKER_DEFAULTS");
    const char *job = getenv ("SLURM_JOB_ID");
    bool job_ok = job && cli_check_job_id ("EpilogSlurmctld", job);
    bool transient = false;
    openlog ("fmbroker-slurm-cleanup", LOG_PID, LOG_DAEMON);
    bool env_ok =
        from_env (s.conf, sizeof (s.conf), "FMBROKER_CONF", FMB_CONFIG_PATH) &&
        from_env (s.timeout, sizeof (s.timeout), "FMBROKER_HOOK_TIMEOUT", "5") &&
        from_env (s.sharedir, sizeof (s.sharedir), "FMBROKER_SHAREDIR", "");
    const char *file = defaults && *defaults ? defaults : "/etc/default/fmbroker";
    bool settings_ok = env_ok && read_defaults (&s, file, why, sizeof (why)) == 0;
    if (!env_ok)
        snprintf (why, sizeof (why), "a setting in the environment is too long");
    if (!job_ok)
        return run_script (s.sharedir, "?", "SLURM_JOB_ID is not a job id", false);
    if (!settings_ok)
        return run_script (s.sharedir, job, why, false);
    if (cleanup (&s, job, why, sizeof (why), &transient) < 0)
        return run_script (s.sharedir, job, why, transient);
    return 0;
}
