/* jobset.c: see jobset.h. */
#include "jobset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const jobset_states[3] = {"active", "lost", "releasing"};

#define bad(error, ...) (errno = EPROTO, fmb_errorf ((error), __VA_ARGS__))

/* uid and VNIs of one listed job, strictly typed. */
static int job_from_json (const json_t *o, struct job_facts *f)
{
    const json_t *id = json_object_get (o, "id");
    const json_t *uid = json_object_get (o, "uid");
    const json_t *vnis = json_object_get (o, "vnis");
    size_t i;
    const json_t *v;
    memset (f, 0, sizeof (*f));
    if (!json_is_string (id) || !json_is_integer (uid) ||
        json_integer_value (uid) < 0 || json_integer_value (uid) > UID_MAX_VALID ||
        !json_is_array (vnis) || json_array_size (vnis) > CXI_SVC_MAX_VNIS)
        return -1;
    snprintf (f->id, sizeof (f->id), "%s", json_string_value (id));
    f->uid = (uint32_t)json_integer_value (uid);
    json_array_foreach (vnis, i, v)
    {
        if (!json_is_integer (v) || json_integer_value (v) < 1 ||
            json_integer_value (v) > 65535)
            return -1;
        f->vnis[f->nvnis++] = (uint16_t)json_integer_value (v);
    }
    return 0;
}

int job_set_add_page (struct job_set *set,
                      const json_t *page,
                      char after[JOB_ID_MAX + 1],
                      struct fmb_error *error)
{
    const json_t *jobs = json_object_get (page, "jobs");
    const json_t *next = json_object_get (page, "next_after");
    size_t i;
    const json_t *job;
    if (!json_is_array (jobs))
        return bad (error, "the broker's job list has no \"jobs\" array");
    if (set->n + json_array_size (jobs) > set->cap) {
        size_t cap = set->cap ? set->cap : 1024;
        while (cap < set->n + json_array_size (jobs))
            cap *= 2;
        struct job_facts *grown = realloc (set->jobs, cap * sizeof (*grown));
        if (!grown)
            return fmb_errorf (error, "out of memory");
        set->jobs = grown;
        set->cap = cap;
    }
    json_array_foreach (jobs, i, job)
    {
        if (job_from_json (job, &set->jobs[set->n]) < 0)
            return bad (error,
                        "the broker's job list has a job without a valid uid or vnis");
        set->n++;
    }
    if (!next) {
        after[0] = '\0';
        return 0;
    }
    /* Pages go forward in job id order; anything else could loop. */
    if (!json_is_string (next) || !valid_job_id (json_string_value (next)) ||
        strcmp (json_string_value (next), after) <= 0)
        return bad (error, "the broker's job list has a bad next_after");
    snprintf (after, JOB_ID_MAX + 1, "%s", json_string_value (next));
    return 0;
}

bool job_set_claims (const struct job_set *set, const struct cxi_svc_desc *d)
{
    for (size_t j = 0; j < set->n; j++) {
        const struct job_facts *f = &set->jobs[j];
        if (svc_is_job (d, f->uid, f->vnis, f->nvnis))
            return true;
        for (unsigned v = 0; v < f->nvnis; v++)
            for (int k = 0; k < d->num_vld_vnis && k < CXI_SVC_MAX_VNIS; k++)
                if (d->restricted_vnis && d->vnis[k] == f->vnis[v])
                    return true;
    }
    return false;
}

void job_set_clear (struct job_set *set)
{
    free (set->jobs);
    memset (set, 0, sizeof (*set));
}
