/* epilog.c: the epilog and housekeeping (epilog.h). */
#include "epilog.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "facts.h"
#include "jobrecord.h"
#include "log.h"
#include "nodeservice.h"
#include "report.h"
#include "svc.h"

/* Destroy the job's services on one NIC (none if it cannot be opened);
 * the number left behind, the last reason in 'why'. */
static int destroy_on_device (struct agent *ag,
                              const struct job_facts *f,
                              const struct cxil_devinfo *info,
                              char *why,
                              size_t whylen,
                              int *busy)
{
    int failures = 0;
    struct cxil_dev *dev;
    struct cxil_svc_list *sl;
    if (ag->lib.open_device (info->dev_id, &dev) < 0)
        return 0;
    int r = ag->lib.get_svc_list (dev, &sl);
    if (r < 0) {
        snprintf (why,
                  whylen,
                  "%s: cxil_get_svc_list: %s",
                  dev->info.device_name,
                  devices_errname (r));
        ag->lib.close_device (dev);
        return 1;
    }
    for (unsigned s = 0; s < sl->count; s++) {
        const struct cxi_svc_desc *d = &sl->descs[s];
        if (!svc_is_job (d, f->uid, f->vnis, f->nvnis))
            continue;
        if (ag->args.dry_run) {
            printf ("would destroy ");
            svc_print (stdout, dev->info.device_name, d);
            continue;
        }
        r = devices_destroy_svc (ag, dev, d->svc_id, f->id);
        if (r == -EBUSY && ag->in_service) {
            (*busy)++; /* fmbroker-cxi waits for it (cmd_epilog) */
            continue;
        }
        if (r < 0) {
            char window[48] = "";
            if (r == -EBUSY)
                snprintf (window,
                          sizeof (window),
                          " past the %u s retry window",
                          ag->args.retry_busy);
            snprintf (why,
                      whylen,
                      "%s: destroy service %u: %s%s",
                      dev->info.device_name,
                      d->svc_id,
                      devices_errname (r),
                      window);
            fmb_log (LOG_ERR, "job %s: %s", f->id, why);
            failures++;
        } else {
            fmb_log (LOG_INFO,
                     "job %s: %s: service %u destroyed",
                     f->id,
                     dev->info.device_name,
                     d->svc_id);
        }
    }
    free (sl);
    ag->lib.close_device (dev);
    return failures;
}

/* The job's end made by the node service, where one answers in the state
 * directory and this is a plain run (no --dry-run, no facts given): the
 * service has libcxi loaded and its broker connection open, and this
 * process then loads neither.  Its exit status, or -1: made here (no
 * service; its services still in use, which this run's retry window
 * waits for; or the service failed).  The service reports what it did,
 * even under --no-report: a 'destroyed' frees the VNIs sooner, and a
 * service in use it leaves unreported, as --no-report would. */
static int via_service (struct agent *ag)
{
    struct node_request r = {.op = NODE_OP_END};
    struct node_service_call c;
    struct fmb_error e;
    char line[FMB_ERROR_TEXT_MAX + 160];
    if (ag->in_service || ag->args.dry_run || ag->args.have_facts)
        return -1;
    snprintf (r.job, sizeof (r.job), "%s", ag->args.job);
    snprintf (r.node, sizeof (r.node), "%s", ag->args.node ? ag->args.node : "");
    int rc = node_service_call_start (&c, ag->args.state_dir, &r, &e);
    if (rc == 0)
        return -1;
    if (rc < 0 || node_service_call_finish (
                      &c, NODE_SERVICE_WAIT_MS, line, sizeof (line), &e) < 0) {
        fmb_log (LOG_WARNING, "job %s: %s: its end is made here", ag->args.job, e.text);
        return -1;
    }
    int status = atoi (line);
    const char *why = strchr (line, '\t');
    why = why && why[1] ? why + 1 : "";
    if (status == 0) {
        fmb_log (LOG_DEBUG, "job %s: its end made by the node service", ag->args.job);
        return 0;
    }
    if (status == EXIT_FAIL)
        return agent_fail_job (ag, "%s", why);
    if (status == NODE_SERVICE_BUSY)
        fmb_log (
            LOG_INFO,
            "job %s: its CXI services are still in use: this epilog waits for them",
            ag->args.job);
    else
        fmb_log (LOG_WARNING,
                 "job %s: the node service did not make its end (%s): made here",
                 ag->args.job,
                 why);
    return -1;
}

int cmd_epilog (struct agent *ag)
{
    int made = via_service (ag);
    if (made >= 0)
        return made;
    struct job_facts f;
    struct fmb_error e;
    struct cxil_device_list *dl;
    char why[256] = "";
    int failures = 0, busy = 0;
    /* If the node service took a prolog that may still be making this
     * job's services (nodeservice.h), they are destroyed once it is done,
     * or one made after would outlive the job with its VNIs.  A service
     * that never answers leaves the node to the admin (drained).  In the
     * service itself, every prolog taken before is made. */
    int waited = ag->args.dry_run || ag->in_service
                     ? 0
                     : node_service_wait (
                           ag->args.state_dir, ag->args.job, NODE_SERVICE_WAIT_MS, &e);
    if (waited < 0)
        fmb_log (LOG_ERR,
                 "job %s: %s: its CXI services may still be in the making; "
                 "not destroying them now",
                 ag->args.job,
                 e.text);
    /* The job's tasks are gone whatever happens to its services (and a
     * requeued run of the same id must not read this one's record). */
    if (!ag->args.dry_run &&
        jobrecord_remove (ag->args.state_dir, ag->args.job, &e) < 0)
        fmb_log (LOG_WARNING, "job %s: %s", ag->args.job, e.text);
    if (waited < 0)
        return EXIT_FAIL;
    if (devices_list (ag, &dl) < 0)
        return EXIT_FAIL;
    if (!dl) {
        report_state (ag, "destroyed", "no Slingshot NICs");
        return 0;
    }
    if (facts_get (ag, &f, NULL, &e) < 0) {
        ag->lib.free_device_list (dl);
        /* No record here and no broker to ask (unreachable, or a token
         * it may not send): prolog created nothing on this node (it
         * records the job before creating anything), so there is nothing
         * known to destroy; draining would be wrong. */
        if (errno == EHOSTUNREACH || errno == ENOENT || errno == EACCES) {
            fmb_log (LOG_WARNING,
                     "%s; no record of the job on this node: nothing to destroy",
                     e.text);
            /* Said, so that the broker does not wait for this node; kept
             * for later if the broker is away. */
            report_state (ag,
                          "destroyed",
                          "no record of the job on this node: nothing was created");
            return 0;
        }
        return agent_fail_job (ag, "%s", e.text);
    }
    for (unsigned i = 0; i < dl->count; i++)
        failures += destroy_on_device (ag, &f, &dl->info[i], why, sizeof (why), &busy);
    ag->lib.free_device_list (dl);
    if (ag->args.dry_run)
        return 0;
    if (busy) {
        /* The node service does not wait: fmbroker-cxi, run by its
         * caller, destroys what is left within its retry window and
         * reports; the job's facts stay for it. */
        fmb_log (LOG_NOTICE,
                 "job %s: %d CXI service(s) still in use: left to fmbroker-cxi's "
                 "epilog, which waits for them",
                 f.id,
                 busy);
        return NODE_SERVICE_BUSY;
    }
    if (failures) {
        report_state (ag, "failed", why); /* the broker raises node_drain_requested */
        return agent_fail_job (
            ag,
            "job %s: %d service(s) left behind (%s): this node should be "
            "drained",
            f.id,
            failures,
            why);
    }
    char path[PATH_MAX];
    facts_record_path (ag, path, sizeof (path));
    unlink (path);
    report_state (ag, "destroyed", NULL);
    return 0;
}
