/* lfclient_shim.h: libfabric's own fabric-manager client, the part of a
 * collective join and of fi_close() on a multicast object that rank 0 of
 * the group runs, reached on a host with no Slingshot NIC.
 *
 * lfclient_shim.c compiles prov/cxi/src/cxip_coll.c of libfabric 2.6.0
 * into itself (its FM calls are static) and links the rest of the
 * provider from the cached libfabric.a (scripts/build-libfabric.sh).  Plain
 * C types only, so that the driver needs no libfabric header.  Each
 * function returns 0 or -errno with the reason in err.
 */
#ifndef LFCLIENT_SHIM_H
#define LFCLIENT_SHIM_H

#include <stddef.h>
#include <stdint.h>

/* The collective variables as the provider read them when it loaded. */
struct lfc_env {
    const char *job_id;  /* FI_CXI_COLL_JOB_ID, or NULL */
    const char *step_id; /* FI_CXI_COLL_JOB_STEP_ID, or NULL */
    const char *url;     /* FI_CXI_COLL_FABRIC_MGR_URL, NULL if unset or refused */
    int token_set;       /* FI_CXI_COLL_MCAST_TOKEN set */
    int collectives;     /* the provider's curl and json-c initialised */
};

/* Load the CXI provider (fi_getinfo): it parses its environment then. */
int lfc_load (struct lfc_env *env, char *err, size_t errlen);

/* An endpoint of VNI vni (its auth key's) and the av_set of the NIC
 * addresses nics[0..count-1] in that order; this process is member 0. */
struct lfc_group;
int lfc_group_create (const uint32_t *nics,
                      size_t count,
                      unsigned vni,
                      struct lfc_group **ret,
                      char *err,
                      size_t errlen);

/* What the provider's create callback decided: prov_errno is the join's
 * error (FI_CXI_ERRNO_JOIN_*, 0 on success); on success, the FM's
 * mcastID and the av_set index of the hwRoot it named. */
struct lfc_join_result {
    int prov_errno;
    int mcast_id;
    int hwroot_idx;
};

/* The FM step of fi_join_collective on member 0: the POST, the provider's
 * progress until its callback has run (409s retried as it retries them),
 * the result.  On success *ret_mc is the multicast object, to be closed
 * with lfc_mc_close or left open (a task that ends without closing it).
 * -ETIMEDOUT if the callback has not run within timeout_ms. */
struct lfc_mc;
int lfc_join (struct lfc_group *g,
              int timeout_ms,
              struct lfc_join_result *res,
              struct lfc_mc **ret_mc,
              char *err,
              size_t errlen);

/* fi_close() on the multicast object as member 0 runs it: the DELETE, and
 * fi_close's own wait.  *close_ret is fi_close's value (0, or 2052
 * FI_CXI_ERRNO_JOIN_CURL_FAILED when the FM did not answer 200/201).
 * The object is freed either way. */
int lfc_mc_close (struct lfc_mc *mc, int *close_ret);

#endif /* LFCLIENT_SHIM_H */
