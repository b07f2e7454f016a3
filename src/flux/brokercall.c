/* brokercall.c: fmbrokerd's REST API off the Flux reactor (brokercall.h). */
#include "brokercall.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct brokercall {
    flux_t *h;
    flux_watcher_t *w;
    int fds[2];            /* answers: pointers to finished requests */
    struct fmb_config cfg; /* a copy: the target points into it */
    struct api_target target;
    long timeout_s;
    pthread_mutex_t lock; /* closed, running, and writes to fds[1] */
    pthread_cond_t idle;  /* running dropped */
    int closed;           /* being destroyed: drop answers */
    int running;          /* call threads not yet finished */
};

struct request {
    struct brokercall *bc;
    char *method, *path, *body, *bearer;
    brokercall_f cb;
    void *arg;
    struct brokercall_result result;
};

static void request_free (struct request *req)
{
    if (!req)
        return;
    free (req->method);
    free (req->path);
    free (req->body);
    if (req->bearer) {
        explicit_bzero (req->bearer, strlen (req->bearer));
        free (req->bearer);
    }
    json_decref (req->result.body);
    free (req);
}

static void context_free (struct brokercall *bc)
{
    pthread_cond_destroy (&bc->idle);
    pthread_mutex_destroy (&bc->lock);
    close (bc->fds[0]);
    close (bc->fds[1]);
    api_target_clear (&bc->target);
    free (bc);
}

static void *call_thread (void *arg)
{
    struct request *req = arg;
    struct brokercall *bc = req->bc;
    struct api_reply reply = {0};
    struct fmb_error e;
    struct brokercall_result *r = &req->result;

    if (api_client_call (&bc->target,
                         NULL,
                         bc->timeout_s,
                         req->method,
                         req->path,
                         req->body,
                         req->bearer,
                         &reply,
                         &e) < 0) {
        r->outcome = api_outcome_of (-1, errno, 0, 0);
        snprintf (r->error, sizeof (r->error), "%s", e.text);
    } else {
        r->outcome = api_outcome_of (0, 0, reply.status, 0);
        const char *detail = json_string_value (json_object_get (reply.body, "detail"));
        r->reached = 1;
        r->status = reply.status;
        r->body = reply.body;
        if (detail)
            snprintf (r->error, sizeof (r->error), "%s", detail);
    }
    pthread_mutex_lock (&bc->lock);
    if (bc->closed || write (bc->fds[1], &req, sizeof (req)) != sizeof (req))
        request_free (req); /* else the reactor takes it from here */
    bc->running--;
    pthread_cond_broadcast (&bc->idle);
    /* The last thing this thread does with the context or this module's
     * code: brokercall_destroy waits for it before the plugin goes. */
    pthread_mutex_unlock (&bc->lock);
    return NULL;
}

static void answers_cb (flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
    struct brokercall *bc = arg;
    struct request *req;
    (void)r;
    (void)w;
    (void)revents;
    while (read (bc->fds[0], &req, sizeof (req)) == sizeof (req)) {
        req->cb (&req->result, req->arg);
        request_free (req);
    }
}

struct brokercall *brokercall_create (flux_t *h,
                                      const struct fmb_config *cfg,
                                      long timeout_s,
                                      struct fmb_error *error)
{
    struct brokercall *bc = calloc (1, sizeof (*bc));
    if (!bc) {
        fmb_errorf (error, "out of memory");
        return NULL;
    }
    if (pipe2 (bc->fds, O_CLOEXEC) < 0) {
        fmb_errorf (error, "pipe: %s", strerror (errno));
        free (bc);
        return NULL;
    }
    fcntl (bc->fds[0], F_SETFL, O_NONBLOCK);
    bc->w = flux_fd_watcher_create (
        flux_get_reactor (h), bc->fds[0], FLUX_POLLIN, answers_cb, bc);
    if (!bc->w) {
        fmb_errorf (error, "flux_fd_watcher_create: %s", strerror (errno));
        close (bc->fds[0]);
        close (bc->fds[1]);
        free (bc);
        return NULL;
    }
    pthread_mutex_init (&bc->lock, NULL);
    pthread_cond_init (&bc->idle, NULL);
    bc->h = h;
    bc->timeout_s = timeout_s;
    bc->cfg = *cfg;
    api_target_init (&bc->target, &bc->cfg, NULL);
    flux_watcher_start (bc->w);
    return bc;
}

void brokercall_destroy (struct brokercall *bc)
{
    struct request *req;
    if (!bc)
        return;
    flux_watcher_destroy (bc->w);
    bc->w = NULL;
    pthread_mutex_lock (&bc->lock);
    bc->closed = 1;
    while (read (bc->fds[0], &req, sizeof (req)) == sizeof (req))
        request_free (req);
    /* Calls still running end within their timeout; the module may be
     * unloaded right after this returns, so wait for them. */
    while (bc->running > 0)
        pthread_cond_wait (&bc->idle, &bc->lock);
    pthread_mutex_unlock (&bc->lock);
    context_free (bc);
}

static char *dup_or_null (const char *s, int *failed)
{
    char *copy = s ? strdup (s) : NULL;
    if (s && !copy)
        *failed = 1;
    return copy;
}

int brokercall_start (struct brokercall *bc,
                      const char *method,
                      const char *path,
                      const char *body,
                      const char *bearer,
                      brokercall_f cb,
                      void *arg)
{
    struct request *req = calloc (1, sizeof (*req));
    pthread_attr_t attr;
    pthread_t t;
    int failed = 0, rc;
    if (!req)
        return -ENOMEM;
    req->bc = bc;
    req->cb = cb;
    req->arg = arg;
    req->method = dup_or_null (method, &failed);
    req->path = dup_or_null (path, &failed);
    req->body = dup_or_null (body, &failed);
    req->bearer = dup_or_null (bearer, &failed);
    if (failed) {
        request_free (req);
        return -ENOMEM;
    }
    pthread_mutex_lock (&bc->lock);
    bc->running++;
    pthread_mutex_unlock (&bc->lock);
    pthread_attr_init (&attr);
    pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create (&t, &attr, call_thread, req);
    pthread_attr_destroy (&attr);
    if (rc != 0) {
        request_free (req);
        pthread_mutex_lock (&bc->lock);
        bc->running--;
        pthread_mutex_unlock (&bc->lock);
        return -rc;
    }
    return 0;
}

int brokercall_transient (const struct brokercall_result *r)
{
    return api_outcome_transient (r->outcome);
}

const char *brokercall_reason (const struct brokercall_result *r)
{
    if (r->error[0])
        return r->error;
    return r->reached ? "the broker refused it" : "no broker answered";
}
