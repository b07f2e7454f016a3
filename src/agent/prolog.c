/* prolog.c: the prolog (prolog.h). */
#include "prolog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "facts.h"
#include "jobrecord.h"
#include "log.h"
#include "report.h"
#include "svc.h"

struct created {
    struct cxil_dev *dev;
    unsigned svc;
};

/* Append "sep item" to a comma list in buf. */
static void list_add (char *buf, size_t len, const char *item)
{
    size_t used = strlen (buf);
    snprintf (buf + used, len - used, "%s%s", used ? "," : "", item);
}

/* The job's task environment on this node (<job>.env, readable by the
 * job's user): the broker's variables plus the devices that have a
 * service, aligned; none of them when no service was made ('reason'). */
static int write_env_record (struct agent *ag,
                             const struct job_facts *f,
                             json_t *broker_env,
                             const struct created *made,
                             int nmade,
                             const char *reason,
                             struct fmb_error *e)
{
    struct jobrecord r;
    if (nmade == 0)
        return jobrecord_write_reason (
            ag->args.state_dir, f->id, f->uid, reason ? reason : "no service", e);
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", f->id);
    r.uid = f->uid;
    r.nservices = (unsigned)nmade;
    r.env = json_object ();
    const char *name;
    json_t *value;
    json_object_foreach (broker_env, name, value)
    {
        const char *s = json_string_value (value);
        bool printable = s != NULL;
        for (const char *c = s; c && *c; c++)
            printable &= (unsigned char)*c >= 0x20 && *c != 0x7f;
        /* SLINGSHOT_* are this node's, set below. */
        if (strncmp (name, "SLINGSHOT_", 10) == 0)
            continue;
        /* The step id is the launcher's; anything unprintable is dropped
         * rather than trusted into a shell line. */
        if (!printable || !jobrecord_valid_name (name) ||
            strcmp (name, "FI_CXI_COLL_JOB_STEP_ID") == 0) {
            fmb_log (LOG_WARNING,
                     "job %s: not passing the broker's variable '%.64s' on",
                     f->id,
                     printable ? name : "(unprintable)");
            continue;
        }
        json_object_set (r.env, name, value);
    }
    char vnis[64] = "", devs[512] = "", ids[256] = "", item[32];
    for (unsigned i = 0; i < f->nvnis; i++) {
        snprintf (item, sizeof (item), "%u", f->vnis[i]);
        list_add (vnis, sizeof (vnis), item);
    }
    for (int i = 0; i < nmade; i++) {
        list_add (devs, sizeof (devs), made[i].dev->info.device_name);
        snprintf (item, sizeof (item), "%u", made[i].svc);
        list_add (ids, sizeof (ids), item);
    }
    snprintf (item, sizeof (item), "0x%x", f->tcs);
    json_object_set_new (r.env, "SLINGSHOT_VNIS", json_string (vnis));
    json_object_set_new (r.env, "SLINGSHOT_DEVICES", json_string (devs));
    json_object_set_new (r.env, "SLINGSHOT_SVC_IDS", json_string (ids));
    json_object_set_new (r.env, "SLINGSHOT_TCS", json_string (item));
    int rc = jobrecord_write (ag->args.state_dir, &r, e);
    jobrecord_clear (&r);
    return rc;
}

/* Create the job's service on device i; > 0 the svc id, 0 skipped (the
 * device cannot be opened, or dry run), < 0 failed with 'why' set. */
static int create_on_device (struct agent *ag,
                             const struct job_facts *f,
                             const struct cxil_devinfo *info,
                             struct cxil_dev **devp,
                             char *why,
                             size_t whylen)
{
    struct cxil_dev *dev;
    struct cxi_svc_desc d;
    int r = ag->lib.open_device (info->dev_id, &dev);
    if (r < 0) {
        fmb_log (LOG_WARNING,
                 "%s: cannot open: %s, ignoring",
                 info->device_name,
                 devices_errname (r));
        return 0;
    }
    svc_recipe (&ag->cfg, &dev->info, f, &d);
    if (ag->args.dry_run) {
        svc_print (stdout, dev->info.device_name, &d);
        ag->lib.close_device (dev);
        return 0;
    }
    for (int attempt = 0;; attempt++) {
        struct cxi_svc_fail_info fi;
        char change[160];
        memset (&fi, 0, sizeof (fi));
        r = ag->lib.alloc_svc (dev, &d, &fi);
        if (r > 0 || r != -ENOSPC || attempt > 2 * CXI_RSRC_TYPE_MAX)
            break;
        if (!svc_scale_back (&d, &fi, change, sizeof (change))) {
            snprintf (why,
                      whylen,
                      "%s: not enough NIC resources even at the minimum",
                      dev->info.device_name);
            break;
        }
        fmb_log (LOG_WARNING, "job %s: %s: %s", f->id, dev->info.device_name, change);
    }
    if (r > 0) {
        *devp = dev;
        fmb_log (LOG_INFO,
                 "job %s: %s: service %d (uid %u)",
                 f->id,
                 dev->info.device_name,
                 r,
                 f->uid);
        return r;
    }
    if (!why[0])
        snprintf (why,
                  whylen,
                  "%s: cxil_alloc_svc: %s",
                  dev->info.device_name,
                  devices_errname (r));
    ag->lib.close_device (dev);
    return -1;
}

/* This node's records of a job that gets no CXI services, and why: root's
 * says so too, for a fail-closed launcher takes its verdict from it, not
 * from the user's own record. */
static void record_no_services (struct agent *ag,
                                const struct job_facts *f,
                                const char *why)
{
    struct fmb_error e;
    if (ag->args.dry_run)
        return;
    json_t *none = json_array ();
    facts_write_record (ag, f, none);
    json_decref (none);
    if (write_env_record (ag, f, NULL, NULL, 0, why, &e) < 0)
        fmb_log (LOG_WARNING, "job %s: %s", f->id, e.text);
}

/* A job that gets no CXI services here: an earlier run of the job id
 * (fails closed) or a job without VNIs.  Its exit status, or -1: neither,
 * the services are to be made. */
static int without_services (struct agent *ag, const struct job_facts *f)
{
    if (f->ended) {
        /* An earlier run of the job id, cleaned up by the RM (Slurm
         * requeues under the same id): its VNIs are not this run's, and
         * may be in quarantine for its nodes.  The RUN of this run did
         * not succeed; the job fails closed, saying why. */
        char why[256];
        snprintf (why,
                  sizeof (why),
                  "the broker has job %s as an ended run (its RUN for this run failed: "
                  "see the controller's log)",
                  f->id);
        record_no_services (ag, f, why);
        return agent_fail_job (ag, "%s: no CXI services created", why);
    }
    if (f->nvnis == 0) {
        fmb_log (LOG_NOTICE, "job %s has no VNIs: no CXI services to create", f->id);
        record_no_services (ag, f, "the job has no VNIs");
        return 0;
    }
    return -1;
}

/* All or nothing: remove what this run created, and tell the job's user
 * why in its record. */
static void undo_created (struct agent *ag,
                          const struct job_facts *f,
                          const struct created *made,
                          int nmade,
                          json_t *services,
                          const char *why)
{
    struct fmb_error e;
    agent_fail_job (ag, "job %s: %s", f->id, why);
    fmb_log (LOG_NOTICE, "job %s: removing the %d service(s) created", f->id, nmade);
    for (int i = 0; i < nmade; i++) {
        int r = ag->lib.destroy_svc (made[i].dev, made[i].svc);
        if (r < 0)
            fmb_log (LOG_ERR,
                     "job %s: %s: destroy service %u: %s",
                     f->id,
                     made[i].dev->info.device_name,
                     made[i].svc,
                     devices_errname (r));
    }
    json_array_clear (services);
    /* The job's user is told why, not left with a missing record. */
    if (write_env_record (ag, f, NULL, NULL, 0, why, &e) < 0)
        fmb_log (LOG_WARNING, "job %s: %s", f->id, e.text);
}

int cmd_prolog (struct agent *ag)
{
    struct job_facts f;
    struct fmb_error e;
    struct cxil_device_list *dl;
    json_t *broker_env = NULL;
    if (devices_list (ag, &dl) < 0)
        return EXIT_FAIL;
    if (!dl)
        return 0;
    if (facts_get (ag, &f, ag->args.have_facts ? NULL : &broker_env, &e) < 0) {
        ag->lib.free_device_list (dl);
        return agent_fail_job (ag, "%s", e.text);
    }
    if (ag->caller_uid > 0 && f.uid != (uint32_t)ag->caller_uid) {
        /* a user asking for another's job: nothing made, nothing written */
        json_decref (broker_env);
        ag->lib.free_device_list (dl);
        fmb_log (LOG_WARNING,
                 "job %s: uid %lld asked for its setup, but it is uid %u's: refused",
                 f.id,
                 (long long)ag->caller_uid,
                 f.uid);
        return agent_fail_job (ag, "job %s is not this user's", f.id);
    }
    int done = without_services (ag, &f);
    if (done >= 0) {
        json_decref (broker_env);
        ag->lib.free_device_list (dl);
        return done;
    }
    struct created *made = calloc (dl->count, sizeof (*made));
    json_t *services = json_array ();
    int nmade = 0, rc = 0;
    char why[256] = "";
    /* Intent first: the job's facts are on disk before any service
     * exists, so a crash in between can still be cleaned up. */
    if (!ag->args.dry_run)
        facts_write_record (ag, &f, services);
    for (unsigned i = 0; i < dl->count && rc == 0; i++) {
        struct cxil_dev *dev = NULL;
        int r = create_on_device (ag, &f, &dl->info[i], &dev, why, sizeof (why));
        if (r < 0)
            rc = EXIT_FAIL;
        else if (r > 0) {
            made[nmade].dev = dev;
            made[nmade++].svc = (unsigned)r;
            json_array_append_new (
                services,
                json_pack ("{s:s, s:i}", "device", dev->info.device_name, "svc_id", r));
        }
    }
    if (rc == 0 && !ag->args.dry_run) {
        facts_write_record (ag, &f, services);
        /* The tasks' environment only once every service exists. */
        if (write_env_record (
                ag, &f, broker_env, made, nmade, "no NIC could be opened", &e) < 0) {
            snprintf (why, sizeof (why), "%s", e.text);
            rc = EXIT_FAIL;
        }
    }
    if (rc != 0) {
        undo_created (ag, &f, made, nmade, services, why);
        report_state (ag, "failed", why);
    } else if (!ag->args.dry_run && ag->args.report_later && !ag->args.no_report)
        report_after_exit (ag, "created");
    else if (!ag->args.dry_run)
        report_state (ag, "created", NULL);
    for (int i = 0; i < nmade; i++)
        ag->lib.close_device (made[i].dev);
    json_decref (services);
    json_decref (broker_env);
    free (made);
    ag->lib.free_device_list (dl);
    return rc;
}
