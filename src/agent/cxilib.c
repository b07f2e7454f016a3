/* cxilib.c: see cxilib.h. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "cxilib.h"

static const struct {
    const char *name;
    size_t offset;
    bool optional;
} syms[] = {
    {"cxil_get_device_list", offsetof (struct cxilib, get_device_list), false},
    {"cxil_free_device_list", offsetof (struct cxilib, free_device_list), false},
    {"cxil_open_device", offsetof (struct cxilib, open_device), false},
    {"cxil_close_device", offsetof (struct cxilib, close_device), false},
    {"cxil_alloc_svc", offsetof (struct cxilib, alloc_svc), false},
    {"cxil_destroy_svc", offsetof (struct cxilib, destroy_svc), false},
    {"cxil_get_svc_list", offsetof (struct cxilib, get_svc_list), false},
    {"cxil_free_svc_list", offsetof (struct cxilib, free_svc_list), false},
    {"cxil_get_svc", offsetof (struct cxilib, get_svc), true},
    {"cxil_update_svc", offsetof (struct cxilib, update_svc), true},
    {"cxil_svc_enable", offsetof (struct cxilib, svc_enable), true},
};

int cxilib_open (const char *path, struct cxilib *lib, struct fmb_error *error)
{
    memset (lib, 0, sizeof (*lib));
    lib->handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        const char *why = dlerror (); /* before errno is set: it may touch it */
        fmb_errorf (error, "%s: cannot load: %s", path, why);
        errno = EOPNOTSUPP;
        return -1;
    }
    for (size_t i = 0; i < sizeof (syms) / sizeof (syms[0]); i++) {
        void *p = dlsym (lib->handle, syms[i].name);
        if (!p && !syms[i].optional) {
            cxilib_close (lib);
            errno = ELIBBAD;
            return fmb_errorf (
                error, "%s: no symbol %s: not a usable libcxi", path, syms[i].name);
        }
        memcpy ((char *)lib + syms[i].offset, &p, sizeof (p));
    }
    return 0;
}

void cxilib_close (struct cxilib *lib)
{
    if (lib->handle)
        dlclose (lib->handle);
    memset (lib, 0, sizeof (*lib));
}
