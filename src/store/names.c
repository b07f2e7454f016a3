/* names.c: the names of the store's states (jobs, hwcoll, CXI services,
 * steps), as the database and the API spell them; the job states from
 * the one list in store.h (STORE_JOB_STATES). */
#include <stdbool.h>
#include <string.h>

#include "store_private.h"

static const char *const job_state_names[] = {
#define JOB_STATE_NAME(name, text, unreleased) [STORE_JOB_##name] = text,
    STORE_JOB_STATES (JOB_STATE_NAME)
#undef JOB_STATE_NAME
};
static const bool job_state_unreleased[] = {
#define JOB_STATE_UNRELEASED(name, text, unreleased) [STORE_JOB_##name] = unreleased,
    STORE_JOB_STATES (JOB_STATE_UNRELEASED)
#undef JOB_STATE_UNRELEASED
};
static const char *const hwcoll_state_names[] = {
    [STORE_HWCOLL_RESERVING] = "reserving",
    [STORE_HWCOLL_RESERVED] = "reserved",
    [STORE_HWCOLL_NOT_ELIGIBLE] = "not_eligible",
    [STORE_HWCOLL_UNAVAILABLE] = "unavailable",
    [STORE_HWCOLL_LOST] = "lost",
    [STORE_HWCOLL_RELEASED] = "released",
};
static const char *const cxi_state_names[] = {
    [STORE_CXI_PENDING] = "pending",
    [STORE_CXI_CREATED] = "created",
    [STORE_CXI_DESTROYED] = "destroyed",
    [STORE_CXI_FAILED] = "failed",
};
static const char *const step_state_names[] = {
    [STORE_STEP_CLEANING] = "cleaning",
    [STORE_STEP_CLEANED] = "cleaned",
    [STORE_STEP_FAILED] = "failed",
};

#define NAMEOF(table, v) \
    ((unsigned)(v) < sizeof (table) / sizeof (table[0]) ? table[v] : "?")

const char *store_job_state_name (enum store_job_state s)
{
    return NAMEOF (job_state_names, s);
}
const char *store_hwcoll_state_name (enum store_hwcoll_state s)
{
    return NAMEOF (hwcoll_state_names, s);
}
const char *store_cxi_state_name (enum store_cxi_state s)
{
    return NAMEOF (cxi_state_names, s);
}
const char *store_step_state_name (enum store_step_state s)
{
    return NAMEOF (step_state_names, s);
}

static int lookup (const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (name && strcmp (names[i], name) == 0)
            return i;
    return -1;
}

int store_job_state_parse (const char *name)
{
    return lookup (job_state_names, STORE_JOB_STATE_COUNT, name);
}

bool store_job_state_unreleased (enum store_job_state s)
{
    return (unsigned)s < STORE_JOB_STATE_COUNT && job_state_unreleased[s];
}

int store_job_state_next_unreleased (int after)
{
    for (int s = after < 0 ? 0 : after + 1; s < STORE_JOB_STATE_COUNT; s++)
        if (job_state_unreleased[s])
            return s;
    return -1;
}

#define PARSE(table, name) \
    lookup (table, (int)(sizeof (table) / sizeof (table[0])), name)

int store_hwcoll_state_parse (const char *name)
{
    return PARSE (hwcoll_state_names, name);
}
int store_cxi_state_parse (const char *name)
{
    return PARSE (cxi_state_names, name);
}
int store_step_state_parse (const char *name)
{
    return PARSE (step_state_names, name);
}
