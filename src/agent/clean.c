/* clean.c: destroy stale job services (clean.h). */
#include "clean.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "jobset.h"
#include "log.h"
#include "svc.h"

/* Every job the broker has not released, every page of every such
 * state.  -1 when the set cannot be had whole: then nothing may go. */
static int unreleased_jobs (struct agent *ag,
                            struct job_set *set,
                            struct fmb_error *error)
{
    for (size_t st = 0; st < sizeof (jobset_states) / sizeof (jobset_states[0]); st++) {
        char after[JOB_ID_MAX + 1] = "";
        do {
            char path[256];
            json_t *page;
            snprintf (path,
                      sizeof (path),
                      "/v1/jobs?state=%s&limit=1000%s%s",
                      jobset_states[st],
                      after[0] ? "&after=" : "",
                      after);
            if (agent_broker_call (ag, "GET", path, NULL, &page, error) < 0)
                return -1;
            int rc = job_set_add_page (set, page, after, error);
            json_decref (page);
            if (rc < 0)
                return fmb_error_prefix (error, "GET %s", path);
        } while (after[0]);
    }
    return 0;
}

/* Is 'd' a candidate for clean: not the default or a system service, and
 * (without --all) a job service of a VNI in [vni] pool. */
static bool clean_candidate (struct agent *ag, const struct cxi_svc_desc *d)
{
    if (d->is_system_svc || d->svc_id == CXI_DEFAULT_SVC_ID)
        return false;
    if (ag->args.all)
        return true;
    bool in_pool = false;
    for (int v = 0; d->restricted_vnis && v < d->num_vld_vnis; v++)
        in_pool |= d->vnis[v] >= ag->cfg.vni_min && d->vnis[v] <= ag->cfg.vni_max;
    return in_pool;
}

/* The same service as before (the driver reuses ids). */
static bool same_service (const struct cxi_svc_desc *a, const struct cxi_svc_desc *b)
{
    return a->svc_id == b->svc_id && a->num_vld_vnis == b->num_vld_vnis &&
           a->restricted_members == b->restricted_members &&
           memcmp (a->vnis, b->vnis, sizeof (a->vnis)) == 0 &&
           memcmp (a->members, b->members, sizeof (a->members)) == 0;
}

/* Destroy on 'dev' the candidates of 'before' (the services that existed
 * before the job list was read) that no unreleased job claims and that
 * are still there, unchanged.  Returns the number that failed. */
static int clean_device (struct agent *ag,
                         struct cxil_dev *dev,
                         const struct cxil_svc_list *before,
                         const struct job_set *set)
{
    struct cxil_svc_list *now;
    int failures = 0;
    if (ag->lib.get_svc_list (dev, &now) < 0)
        return 1;
    for (unsigned s = 0; s < now->count; s++) {
        const struct cxi_svc_desc *d = &now->descs[s];
        bool existed = false;
        for (unsigned b = 0; b < before->count; b++)
            existed |= same_service (d, &before->descs[b]);
        if (!existed || !clean_candidate (ag, d) || job_set_claims (set, d))
            continue;
        if (ag->args.dry_run) {
            printf ("would destroy ");
            svc_print (stdout, dev->info.device_name, d);
            continue;
        }
        int r = devices_destroy_svc (ag, dev, d->svc_id, "(clean)");
        if (r < 0) {
            fmb_log (LOG_ERR,
                     "clean: %s: service %u: %s",
                     dev->info.device_name,
                     d->svc_id,
                     devices_errname (r));
            failures++;
        } else
            fmb_log (LOG_NOTICE,
                     "clean: %s: destroyed stale service %u",
                     dev->info.device_name,
                     d->svc_id);
    }
    free (now);
    return failures;
}

int cmd_clean (struct agent *ag)
{
    struct cxil_device_list *dl;
    struct fmb_error e;
    struct job_set set = {0};
    int failures = 0, rc = 0;
    if (devices_list (ag, &dl) < 0)
        return EXIT_FAIL;
    if (!dl)
        return 0;
    struct cxil_dev **devs = calloc (dl->count, sizeof (*devs));
    struct cxil_svc_list **before = calloc (dl->count, sizeof (*before));
    /* The services first, then the jobs: a service listed here was made
     * by a prolog after its job's RUN, so its job is in the listing. */
    for (unsigned i = 0; i < dl->count; i++)
        if (ag->lib.open_device (dl->info[i].dev_id, &devs[i]) < 0 ||
            ag->lib.get_svc_list (devs[i], &before[i]) < 0) {
            fmb_log (LOG_WARNING,
                     "clean: %s: cannot list services, skipping",
                     dl->info[i].device_name);
            before[i] = NULL;
        }
    /* Without the broker's word on every job it has not released, a
     * service may belong to a live job: touch nothing. */
    if (unreleased_jobs (ag, &set, &e) < 0) {
        fmb_log (LOG_ERR,
                 "clean: cannot get every job the broker has not released (%s); "
                 "not touching any service",
                 e.text);
        rc = EXIT_FAIL;
    } else
        fmb_log (LOG_INFO, "clean: %zu job(s) not released at the broker", set.n);
    for (unsigned i = 0; i < dl->count; i++) {
        if (rc == 0 && before[i])
            failures += clean_device (ag, devs[i], before[i], &set);
        free (before[i]);
        if (devs[i])
            ag->lib.close_device (devs[i]);
    }
    free (before);
    free (devs);
    job_set_clear (&set);
    ag->lib.free_device_list (dl);
    return rc ? rc : failures ? EXIT_FAIL : 0;
}
