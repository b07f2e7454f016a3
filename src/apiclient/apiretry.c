/* apiretry.c: one retry rule for every client of the broker (apiretry.h). */
#include "apiretry.h"

#include <errno.h>

enum api_outcome api_outcome_of (int rc, int err, long status, int64_t waited_ms)
{
    if (rc < 0) {
        if (err == EACCES)
            return API_OUTCOME_NOT_SENT;
        return waited_ms >= API_BUSY_WAIT_MS ? API_OUTCOME_BUSY : API_OUTCOME_AWAY;
    }
    if (status >= 200 && status <= 299)
        return API_OUTCOME_DONE;
    if (status == 429)
        return API_OUTCOME_BUSY;
    if (status == 408 || (status >= 500 && status <= 599))
        return API_OUTCOME_AWAY;
    return API_OUTCOME_REFUSED;
}

bool api_outcome_transient (enum api_outcome o)
{
    return o == API_OUTCOME_BUSY || o == API_OUTCOME_AWAY;
}

int api_outcome_exit (enum api_outcome o)
{
    switch (o) {
    case API_OUTCOME_DONE:
        return API_EXIT_OK;
    case API_OUTCOME_REFUSED:
        return API_EXIT_REFUSED;
    case API_OUTCOME_NOT_SENT:
        return API_EXIT_USAGE;
    case API_OUTCOME_BUSY:
    case API_OUTCOME_AWAY:
        return API_EXIT_TEMPFAIL;
    }
    return API_EXIT_REFUSED;
}
