/* fmclient_private.h: the data fmclient's own files share; not for
 * callers (fmclient.h is the API).  Each file's verbs are in its own
 * header: fmc_request.h, fmc_session.h, fmc_reply.h, fmc_engine.h,
 * fmc_calls.h.
 */
#ifndef FMB_FMCLIENT_PRIVATE_H
#define FMB_FMCLIENT_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "fmclient.h"
#include "offloop.h"

#define FMC_SECRET_MAX    4096 /* credential files are one line */
#define FMC_MAX_SOCKETS   1024
#define FMC_TOKEN_TIMEOUT 10000 /* ms, as Slurm's token requests */
#define FMC_ERROR_MAX     256
#define FMC_SPARE_HANDLES 64 /* easy handles kept for reuse */

struct fmc_req {
    struct fmc *fmc;
    enum fmc_op op;
    const char *method;
    char *path; /* for messages: relative to the base URL */
    char *url;
    char *body; /* NULL: none; for FMC_OP_TOKEN it holds the secret */
    unsigned timeout_ms;
    int64_t deadline;        /* monotonic ms, 0: none beyond timeout_ms */
    int64_t started;         /* submitted; once it left, when it first left */
    unsigned long token_gen; /* which token it was sent with */
    bool auth_retried;
    CURL *easy;
    struct curl_slist *headers;
    char *resp;
    size_t resp_len, resp_cap;
    bool too_large;
    bool paused;      /* its answer stopped for this fmc_process (read_budget) */
    bool write_error; /* curl dropped part of the answer on a resume */
    char errbuf[CURL_ERROR_SIZE];
    /* FMC_OP_LIST: the answer is parsed on the parser thread (see
     * parse_listing), which owns the request until it hands it back. */
    struct offloop_job parse;
    long list_http;
    enum fmc_status list_status;
    char list_error[FMC_ERROR_MAX];
    const char **list_ids; /* one allocation: the pointers, then the ids */
    size_t list_n;
    fmc_done_f cb;
    void *arg;
    void (*arg_free) (void *); /* frees 'arg' if the call never completes */
    struct fmc_req *next;      /* in 'waiting' or 'held' */
    struct fmc_req *all_prev;  /* every live request, for fmc_destroy */
    struct fmc_req *all_next;
};

struct fmc {
    struct fmc_config cfg;
    char *url;
    char *multicast_url; /* fmc_multicast_url */
    char *auth_dir;
    char *ca_file;
    char *mtls_cert;
    char *mtls_key;
    char *passwd; /* basic */
    CURLM *multi;
    CURL *spare[FMC_SPARE_HANDLES]; /* reset easy handles, for the next calls */
    int nspare;
    /* OAuth */
    char *token;
    int64_t token_refresh_at; /* monotonic ms: fetch a new one from here on */
    unsigned long token_gen;
    bool token_fetching;
    unsigned long token_fetches;
    struct fmc_req *waiting; /* calls waiting for a token, FIFO */
    struct fmc_req *waiting_tail;
    struct fmc_req *all; /* every live request */
    /* loop integration */
    struct {
        curl_socket_t fd;
        short events;
    } socks[FMC_MAX_SOCKETS];
    int nsocks;
    int64_t timer_due; /* monotonic ms, -1: none */
    bool done_pending; /* transfers may have ended outside fmc_process */
    bool holding;      /* fmc_hold: calls that change the FM wait */
    struct fmc_req *held, *held_tail;
    struct fmc_req *kept, *kept_tail; /* fmc_keep_held: committed, not started */
    unsigned inflight;
    /* Listings parsed off the loop: a 100,000-entry answer is ~4 MB of
     * JSON, ~1 s of json_loadb and freeing on a loaded machine. */
    struct offloop *parser;
    unsigned parsing; /* handed to the parser, not yet back */
    unsigned long offloop_parses;
    /* What one fmc_process may read of the answers before it pauses
     * them for the next: a listing of 100,000 entries is megabytes, and
     * reading it at once held the loop for ~20 ms. */
    struct {
        int64_t until_us; /* monotonic; 0: outside fmc_process, no budget */
        size_t left;      /* bytes */
        bool paused;      /* some transfer waits for the next fmc_process */
        unsigned long pauses;
    } read_budget;
    fmc_observer_f observer;
    void *observer_arg;
};

#endif
