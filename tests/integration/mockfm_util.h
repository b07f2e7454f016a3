/* mockfm_util.h: start a mockfm for a C test and talk to it. */
#ifndef FMB_MOCKFM_UTIL_H
#define FMB_MOCKFM_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

struct mockfm {
    pid_t pid;
    int port;
    char dir[512]; /* its private directory: port file, request log */
    char url[128]; /* http(s)://127.0.0.1:PORT */
    char log[600]; /* request log path */
    bool tls;
};

/* Start mockfm (from $FMB_BIN) in 'dir' with extra arguments (NULL-ended);
 * waits until it listens.  'tls' only changes the URL scheme. */
void mockfm_start (struct mockfm *m,
                   const char *dir,
                   bool tls,
                   const char *const *args);
void mockfm_stop (struct mockfm *m);

/* One blocking HTTP request with libcurl easy.  'auth' is a whole header
 * value or NULL; *resp (may be NULL) gets the body.  Returns the status,
 * or 0 on a transport error. */
long http_call (const char *method,
                const char *url,
                const char *auth,
                const char *body,
                char **resp);

/* GET /_mock/state (new reference). */
json_t *mockfm_state (struct mockfm *m);
/* POST/DELETE a control endpoint; asserts 200. */
void mockfm_ctl (struct mockfm *m,
                 const char *method,
                 const char *path,
                 const char *body);
/* Lines of the request log matching 'prefix' ("GET /fabric/..."). */
int mockfm_log_count (struct mockfm *m, const char *line_prefix);

#endif
