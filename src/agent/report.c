/* report.c: node reports, durable (report.h). */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileutil.h"
#include "log.h"
#include "monotime.h"
#include "spool.h"

void report_this_node (struct agent *ag, char *node, size_t len)
{
    if (ag->args.node)
        snprintf (node, len, "%s", ag->args.node);
    else {
        gethostname (node, len);
        node[len - 1] = '\0';
        node[strcspn (node, ".")] = '\0';
    }
}

enum sent { SENT, SEND_LATER, SEND_NEVER };

/* PUT one report's state; as send_report answers. */
static enum sent put_state (struct agent *ag,
                            const struct spooled_report *r,
                            const char *cxi,
                            const char *detail,
                            struct fmb_error *e)
{
    char path[512];
    snprintf (path, sizeof (path), "/v1/jobs/%s/nodes/%s", r->job, r->node);
    json_t *o = json_pack ("{s:s}", "cxi", cxi);
    if (detail[0])
        json_object_set_new (o, "detail", json_string (detail));
    char *body = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    int rc = agent_broker_call (ag, "PUT", path, body, NULL, e);
    free (body);
    if (rc == 0)
        return SENT;
    if (api_outcome_transient (ag->broker_outcome) ||
        ag->broker_outcome == API_OUTCOME_NOT_SENT)
        return SEND_LATER;
    return SEND_NEVER;
}

/* PUT the report; SEND_LATER when the broker could not take it now
 * (apiretry.h's transient: unreachable, 408, 429, 5xx) or the call was
 * not made (no client token this node may read: kept until the admin
 * mends it), SEND_NEVER when the broker refused it for good.  One kept
 * 'after_created' is the 'created' it supersedes, then itself: a 'created'
 * sent twice is the same state again. */
static enum sent send_report (struct agent *ag,
                              const struct spooled_report *r,
                              struct fmb_error *e)
{
    if (r->after_created && put_state (ag, r, "created", "", e) == SEND_LATER)
        return SEND_LATER;
    return put_state (ag, r, r->cxi, r->detail, e);
}

void report_state (struct agent *ag, const char *cxi, const char *detail)
{
    struct spooled_report r;
    struct fmb_error e;
    if (ag->args.no_report || ag->args.dry_run)
        return;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", ag->args.job);
    report_this_node (ag, r.node, sizeof (r.node));
    snprintf (r.cxi, sizeof (r.cxi), "%s", cxi);
    snprintf (r.detail, sizeof (r.detail), "%s", detail ? detail : "");
    r.at_ms = fmb_realtime_ms ();
    int lock = spool_lock (ag->args.state_dir, r.job, r.node, true);
    /* A failure after a 'created' still kept (a job that ended within
     * moments of its setup): sent after it, now or when kept (the broker
     * reads a live job's failure after 'created' as the services' end
     * failing, and asks for a drain; after nothing, as their setup's). */
    struct spooled_report kept;
    if (strcmp (cxi, "failed") == 0 &&
        spool_get (ag->args.state_dir, r.job, r.node, &kept, NULL) > 0)
        r.after_created = !strcmp (kept.cxi, "created") || kept.after_created;
    enum sent sent = send_report (ag, &r, &e);
    if (sent == SEND_LATER) {
        struct fmb_error se;
        ag->broker_down = true;
        if (spool_put (ag->args.state_dir, &r, &se) < 0)
            fmb_log (LOG_ERR,
                     "job %s: reporting '%s' to the broker failed (%s), and keeping "
                     "it failed too: %s",
                     r.job,
                     cxi,
                     e.text,
                     se.text);
        else
            fmb_log (LOG_WARNING,
                     "job %s: reporting '%s' to the broker failed: %s; kept in "
                     "%s/reports for the next agent run or 'fmbroker-cxi report "
                     "--pending'",
                     r.job,
                     cxi,
                     e.text,
                     ag->args.state_dir);
    } else {
        if (sent == SEND_NEVER)
            fmb_log (LOG_WARNING,
                     "job %s: the broker refused the report '%s': %s",
                     r.job,
                     cxi,
                     e.text);
        /* Either way an older kept report of this job is superseded. */
        if (spool_drop (ag->args.state_dir, r.job, r.node, &e) < 0)
            fmb_log (LOG_WARNING, "%s", e.text);
    }
    spool_unlock (lock);
}

/* prolog --report-later: the 'created' report is kept (durably, as any
 * report the broker could not take) and delivered by a detached child
 * after this process has exited: the job's launch waits for the prolog,
 * not for the report.  The child has no output (the hook's pipe must
 * close); what it could not deliver stays kept for the next run. */
void report_after_exit (struct agent *ag, const char *cxi)
{
    struct spooled_report r;
    struct fmb_error e;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", ag->args.job);
    report_this_node (ag, r.node, sizeof (r.node));
    snprintf (r.cxi, sizeof (r.cxi), "%s", cxi);
    r.at_ms = fmb_realtime_ms ();
    int lock = spool_lock (ag->args.state_dir, r.job, r.node, true);
    int rc = spool_put (ag->args.state_dir, &r, &e);
    spool_unlock (lock);
    if (rc < 0) {
        fmb_log (LOG_WARNING, "job %s: %s; reporting now", r.job, e.text);
        report_state (ag, cxi, NULL);
        return;
    }
    if (ag->in_service) {
        /* the node service delivers it after its answer (serve.c) */
        ag->delivery_detached = true;
        return;
    }
    fflush (NULL);
    pid_t pid = fork ();
    if (pid < 0) {
        report_deliver_pending (ag, false); /* the hook's own process */
        return;
    }
    if (pid == 0) {
        if (fork () == 0) {
            int null = open ("/dev/null", O_RDWR);
            setsid ();
            /* Bookkeeping yields to the job's tasks, which start now
             * (nice 10: still delivered on a node whose cores they keep
             * busy, unlike an idle-only class). */
            (void)setpriority (PRIO_PROCESS, 0, 10);
            if (null >= 0) {
                dup2 (null, STDIN_FILENO);
                dup2 (null, STDOUT_FILENO);
                dup2 (null, STDERR_FILENO);
            }
            report_deliver_pending (ag, true); /* detached: it may wait */
        }
        _exit (0);
    }
    while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
    ag->delivery_detached = true;
}

struct pending_ctx {
    struct agent *ag;
    bool wait; /* for a lock another run holds, rather than skip it */
    unsigned delivered, refused, left;
};

static int deliver_locked (struct pending_ctx *pc, const struct spooled_report *r)
{
    struct agent *ag = pc->ag;
    struct fmb_error e;
    enum sent sent = send_report (ag, r, &e);
    if (sent == SEND_LATER) {
        fmb_log (LOG_WARNING,
                 "job %s: kept report '%s' of node %s still not delivered: %s",
                 r->job,
                 r->cxi,
                 r->node,
                 e.text);
        return 1; /* the broker is away: the rest waits too */
    }
    if (sent == SENT) {
        pc->delivered++;
        fmb_log (LOG_NOTICE,
                 "job %s: delivered the kept report '%s' of node %s",
                 r->job,
                 r->cxi,
                 r->node);
    } else {
        pc->refused++;
        fmb_log (LOG_WARNING,
                 "job %s: the broker refused the kept report '%s' of node %s: %s; "
                 "dropping it",
                 r->job,
                 r->cxi,
                 r->node,
                 e.text);
    }
    if (spool_drop (ag->args.state_dir, r->job, r->node, &e) < 0)
        fmb_log (LOG_WARNING, "%s", e.text);
    return 0;
}

/* A kept report, sent under its job's lock and as it is then: a run
 * that superseded or sent it since (it held the lock) is not undone.
 * One whose lock another run holds (making or sending a report of that
 * job, or of one sharing its byte) is waited for in the background, and
 * by a hook run skipped, and still counted as kept. */
static int deliver_one (const struct spooled_report *listed, void *arg)
{
    struct pending_ctx *pc = arg;
    struct spooled_report kept;
    int rc = 0;
    int lock = spool_lock (pc->ag->args.state_dir, listed->job, listed->node, pc->wait);
    if (lock != -EAGAIN &&
        spool_get (pc->ag->args.state_dir, listed->job, listed->node, &kept, NULL) > 0)
        rc = deliver_locked (pc, &kept);
    spool_unlock (lock);
    return rc;
}

static int count_one (const struct spooled_report *r, void *arg)
{
    (void)r;
    ((struct pending_ctx *)arg)->left++;
    return 0;
}

unsigned report_deliver_pending (struct agent *ag, bool wait)
{
    struct pending_ctx pc = {.ag = ag, .wait = wait};
    struct fmb_error e;
    if (spool_each (ag->args.state_dir, deliver_one, &pc, &e) < 0)
        fmb_log (LOG_WARNING, "%s", e.text);
    spool_each (ag->args.state_dir, count_one, &pc, &e);
    return pc.left;
}

/* report --pending: for a timer or housekeeping. */
int cmd_report (struct agent *ag)
{
    unsigned left = report_deliver_pending (ag, true);
    if (left) {
        fmb_log (LOG_ERR,
                 "%u node report(s) still not delivered (kept in %s/reports)",
                 left,
                 ag->args.state_dir);
        return EXIT_FAIL;
    }
    return 0;
}
