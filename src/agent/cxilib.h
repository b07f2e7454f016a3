/* cxilib.h: libcxi, loaded with dlopen as one unit.
 *
 * Every required symbol is resolved at load; if one is missing the
 * library is closed and loading fails with ELIBBAD naming the symbol.
 * Newer symbols (cxil_svc_enable, LIBCXI_1.9) are optional: NULL when
 * absent, and callers check.  No library at all is EOPNOTSUPP: a node
 * without Slingshot NICs, where the agent has nothing to do.
 */
#ifndef FMB_CXILIB_H
#define FMB_CXILIB_H

#include "cxi_abi.h"
#include "error.h"

struct cxilib {
    void *handle;
    cxil_get_device_list_fn *get_device_list;
    cxil_free_device_list_fn *free_device_list;
    cxil_open_device_fn *open_device;
    cxil_close_device_fn *close_device;
    cxil_alloc_svc_fn *alloc_svc;
    cxil_destroy_svc_fn *destroy_svc;
    cxil_get_svc_list_fn *get_svc_list;
    cxil_free_svc_list_fn *free_svc_list;
    cxil_get_svc_fn *get_svc;       /* optional (LIBCXI_1.2) */
    cxil_update_svc_fn *update_svc; /* optional (LIBCXI_1.2) */
    cxil_svc_enable_fn *svc_enable; /* optional (LIBCXI_1.9, SHS >= 13.1) */
};

/* Load 'path' (a name like "libcxi.so.1" or an absolute path). */
int cxilib_open (const char *path, struct cxilib *lib, struct fmb_error *error);
void cxilib_close (struct cxilib *lib);

#endif
