/* fmbroker-slurm-prolog: slurmd's Prolog= and Epilog= when the node
 * service runs.
 *
 * Why a program of its own: slurmd starts the prolog for every job on
 * every node before its first step, and the launch waits for it; the
 * epilog starts as the job's last step ends, on the cores srun and the
 * next job's steps use.  This one loads nothing but libc: it hands
 * Slurm's variables to the node service (fmbroker-cxi serve, serve.h),
 * as a request that names no resource manager (nodeproto.h); the
 * service has libcxi loaded and its broker connection already open.  A
 * prolog returns once the service has taken the job (the step's
 * slurmstepd and the epilog wait for the job's setup: nodeservice.h); an
 * epilog returns the service's exit status once the job's CXI services
 * are destroyed (1: slurmd drains the node).  Where the service does not
 * answer (not installed, stopped, gone mid-request, or no answer within
 * ANSWER_WAIT_MS: a long line of prologs behind a slow broker), or says
 * the job's services are still in use (NODE_SERVICE_BUSY: fmbroker-cxi's
 * epilog waits for them), it runs fmbroker-cxi itself, the same hook,
 * only slower, and says so in syslog; the service makes no prolog whose
 * caller has gone.  Run in any other way (by hand), it is fmbroker-cxi.
 *
 * FMBROKER_CXI_SERVICE and FMBROKER_CXI_PROGRAM replace the service's
 * socket and the agent's path, for a wrapper (tests): slurmd builds the
 * hooks' environment itself, and a job's user can set neither. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "jobrecord.h"
#include "nodeservice.h"
#include "selfpath.h"

/* A hook's broker calls take 5 s at most each: this is a line of them.
 * With fmbroker-cxi's own run after it (an epilog's: its wait for the
 * service, 60 s at most, and 30 s of busy retries), within the two
 * minutes or more doc/slurm.md asks of PrologEpilogTimeout. */
#define ANSWER_WAIT_MS (30 * 1000)

static const char *setting (const char *name, const char *fallback)
{
    const char *v = getenv (name);
    return v && *v ? v : fallback;
}

/* fmbroker-cxi in this process's place: the same prolog or epilog, or
 * whatever else an admin asked for.  Where it cannot run, a prolog exits
 * 0 (the job's steps find no record: fail_closed refuses them), an
 * epilog 1 (the job's services may stay: slurmd drains the node). */
/* fmbroker-cxi beside this program: both are installed by one package
 * into one directory, which need not be the one this was built for (the
 * README's build configures /usr/local, the packages install in /usr).
 * The build's directory only if this program's own cannot be read. */
static const char *agent_beside (char *buf, size_t len)
{
    return fmb_beside_self ("fmbroker-cxi", buf, len) < 0 ? FMB_SBINDIR "/fmbroker-cxi"
                                                          : buf;
}

static int run_agent (char **argv)
{
    char beside[4096];
    const char *agent =
        setting ("FMBROKER_CXI_PROGRAM", agent_beside (beside, sizeof (beside)));
    const char *ctx = getenv ("SLURM_SCRIPT_CONTEXT");
    argv[0] = (char *)agent;
    execv (agent, argv);
    syslog (LOG_ERR, "cannot run %s: %m", agent);
    return ctx && strcmp (ctx, "prolog_slurmd") == 0 ? 0 : 1;
}

/* Slurm's variable 'name' into out (len bytes); one with a newline or too
 * long is left out (the service then says what is missing). */
static void slurm_var (char *out, size_t len, const char *name)
{
    const char *v = getenv (name);
    if (v && !strchr (v, '\n') && strlen (v) < len)
        strcpy (out, v);
}

/* The job's setup (Prolog=, answered once taken) or its end (Epilog=)
 * from Slurm's variables, as a request that names no resource manager
 * (nodeproto.h); sent. */
static int send_request (int fd, bool prolog)
{
    static struct node_request r; /* large: not on the stack */
    static char buf[NODE_SERVICE_REQUEST_MAX];
    struct fmb_error e;
    char uid[16] = "", cpus[32] = "";
    r.op = prolog ? NODE_OP_SETUP : NODE_OP_END;
    r.early = prolog;
    slurm_var (r.job, sizeof (r.job), "SLURM_JOB_ID");
    slurm_var (r.node, sizeof (r.node), "SLURMD_NODENAME");
    if (prolog) {
        char *end;
        slurm_var (uid, sizeof (uid), "SLURM_JOB_UID");
        unsigned long u = strtoul (uid, &end, 10);
        r.have_uid = uid[0] && !*end && u < 4294967295ul;
        r.uid = (uint32_t)u;
        slurm_var (r.user, sizeof (r.user), "SLURM_JOB_USER");
        slurm_var (r.nodes, sizeof (r.nodes), "SLURM_NODELIST");
        /* "8" or "8(x2)": this node's (every node's) count */
        slurm_var (cpus, sizeof (cpus), "SLURM_JOB_CPUS_PER_NODE");
        unsigned long n = strtoul (cpus, NULL, 10);
        r.ncores = n <= (1ul << 20) ? (unsigned)n : 0;
        slurm_var (r.hwcoll, sizeof (r.hwcoll), "SPANK_FMB_HWCOLL");
        slurm_var (r.vni_count, sizeof (r.vni_count), "SPANK_FMB_VNIS");
        slurm_var (r.tcs, sizeof (r.tcs), "SPANK_FMB_TCS");
    }
    int n = node_request_encode (&r, buf, sizeof (buf), &e);
    if (n < 0) {
        syslog (LOG_ERR, "job %.128s: %s", r.job, e.text);
        return -1;
    }
    return node_service_send (fd, buf, (size_t)n);
}

static int prolog_status (const char *job, int status, const char *reason)
{
    if (reason)
        fprintf (stderr, "fmbroker-slurm-prolog: job %s: %s\n", job, reason);
    return status;
}

/* What slurmd does after the job's epilog: 0 go on, 1 drain the node;
 * fmbroker-cxi run here where the service did not make it. */
static int epilog_status (const char *job, int status, const char *reason, char **argv)
{
    if (status == 0 && !reason) {
        /* a service older than the epilog answers "0" and makes none
         * (an upgrade with the service not yet restarted) */
        syslog (LOG_NOTICE,
                "job %.128s: the node service does not make epilogs (restart "
                "fmbroker-cxi.service after an upgrade): running fmbroker-cxi itself",
                job);
        return run_agent (argv);
    }
    if (status == NODE_SERVICE_BUSY) {
        syslog (LOG_INFO,
                "job %.128s: its CXI services are still in use: fmbroker-cxi's "
                "epilog waits for them",
                job);
        return run_agent (argv);
    }
    if (status == 0)
        return 0;
    /* slurmd keeps no output of its hooks */
    syslog (LOG_ERR,
            "job %.128s: the node service's epilog: %s",
            job,
            reason ? reason : "failed (see fmbroker-cxi.service's log)");
    if (status != 1) {
        /* not the job's services left behind (a request it refused):
         * no node is drained for it, as fmbroker-cxi's own epilog */
        return 0;
    }
    return 1;
}

int main (int argc, char **argv)
{
    const char *ctx = getenv ("SLURM_SCRIPT_CONTEXT");
    const char *job = setting ("SLURM_JOB_ID", "?");
    char answer[4096];
    if (argc > 1 || !ctx ||
        (strcmp (ctx, "prolog_slurmd") != 0 && strcmp (ctx, "epilog_slurmd") != 0))
        return run_agent (argv);
    bool prolog = strcmp (ctx, "prolog_slurmd") == 0;
    openlog ("fmbroker-slurm-prolog", LOG_PID, LOG_DAEMON);
    const char *path = setting ("FMBROKER_CXI_SERVICE",
                                JOBRECORD_DIR_DEFAULT "/" JOBRECORD_SERVICE_SOCKET);
    int fd = node_service_connect (path, false);
    if (fd < 0) {
        syslog (LOG_NOTICE,
                "job %.128s: the node service is not answering at %s (%m): running "
                "fmbroker-cxi itself, slower; start fmbroker-cxi.service",
                job,
                path);
        return run_agent (argv);
    }
    if (send_request (fd, prolog) < 0 ||
        node_service_answer (fd, ANSWER_WAIT_MS, answer, sizeof (answer)) < 0) {
        /* Closed first: the service makes no prolog whose caller has
         * gone.  One it had begun (it died in it) may leave services the
         * epilog finds by the job's uid and VNIs all the same; an epilog
         * run twice destroys what is left. */
        close (fd);
        syslog (LOG_WARNING,
                "job %.128s: no answer from the node service at %s: running "
                "fmbroker-cxi itself; see fmbroker-cxi.service's log",
                job,
                path);
        return run_agent (argv);
    }
    close (fd);
    int status = atoi (answer);
    char *reason = strchr (answer, '\t');
    reason = reason && reason[1] ? reason + 1 : NULL;
    return prolog ? prolog_status (job, status, reason)
                  : epilog_status (job, status, reason, argv);
}
