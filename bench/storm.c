/* storm.c: fmb-storm, the full-machine storm benchmark (issue 49).
 *
 * Emulates N compute nodes, each with its own loopback source address
 * (127.x.y.z, bound before connect with IP_BIND_ADDRESS_NO_PORT) and its
 * own node token (node:NAME:HMAC-SHA256("fmbroker-node:NAME") under the
 * broker's node.key, as nodeauth.c makes it), doing what doc/slurm.md's
 * launch setup makes each node's service do over HTTPS: the job's RUN
 * when its first step starts there ([api] agent_run on the broker,
 * node_run on the nodes), and at the job's end its report
 * {"cxi":"destroyed"}.  Meanwhile an RM on the broker's Unix socket (as
 * root, the rm role) RUNs and CLEANs UP small jobs of its own, one after
 * another, and its RUN's latency is recorded.
 *
 * Phases, each timed, with the broker's CPU (/proc/PID/stat), peak and
 * current RSS (/proc/PID/status), and this program's own CPU beside:
 *   baseline  the RM alone (its RUN latency at rest; the broker's CPU per
 *             RM cycle, taken off the node figures of the later phases)
 *   warmup    (--mode warm) every node's connection opened and kept, as
 *             the resident node service opens it: the TLS handshake, then
 *             an authenticated GET /v1/health, so that the broker keeps it
 *             ([api] tcp_idle_timeout_s) with the shipped limits
 *   launch    every node's RUN of the job
 *   end       the RM's CLEANUP of the job, then every node's report, and
 *             the time until the job's VNIs leave quarantine (the
 *             vni_released event, polled on the socket every 50 ms)
 * Output: a readable summary and one "STORM phase=... key=value ..." line
 * per phase (bench/storm.sh makes its tables from those).
 *
 * Threads, so that what is timed on the socket waits for the broker only:
 *   the nodes    one epoll loop, every socket non-blocking (the main
 *                thread; --nice N lowers its priority, and only its)
 *   the RM       its RUN/CLEANUP cycle, blocking calls with timeouts on a
 *                thread of its own: its latencies never wait behind the
 *                nodes' TLS handshakes in the loop's queue.  Each call is
 *                counted in the phase the main thread had published (an
 *                atomic phase number) when the call began.
 *   the control  every other call on the socket (the job's CLEANUP, timed;
 *                the quarantine poll, timed; the checks between phases),
 *                blocking, on a third thread; the main thread waits for it
 *                or, for the poll, runs the nodes meanwhile.
 * OpenSSL (the nodes' thread only), libc and pthreads; every loop bounded
 * in count and by the global --deadline-s. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define NODES_MAX     1000000
#define HEAD_MAX      2048 /* an answer's header */
#define NODE_BODY_MAX 600  /* what a node keeps of an answer's body */
#define CTL_BODY_MAX  (32 * 1024 * 1024)
#define WRITE_PIECE   16384 /* one TLS record, as apiclient.c writes */
#define START_BATCH   256   /* calls started per loop turn */
#define POLL_MS       50    /* the quarantine poll */
#define RM_TIMEOUT_MS 30000 /* any call on the socket */
#define UNIX_RETRY_MS 2     /* a full Unix listen queue: connect again */

/* ---- options ------------------------------------------------------- */

enum mode { MODE_COLD, MODE_WARM };
enum form { FORM_ARRAY, FORM_HOSTLIST };
/* What each node does at launch: the job's RUN (Slurm's launch setup),
 * or its node view after the RM's one RUN (Flux: the jobtap plugin RUNs
 * at rank 0, each rank's node service reads the job) */
enum launch { LAUNCH_RUN, LAUNCH_VIEW };

static struct {
    char url[256], host[128], hostport[160];
    int port;
    const char *ca, *node_key, *sock, *prefix, *job;
    unsigned nodes, width, concurrency;
    unsigned long uid;
    enum mode mode;
    enum form form;
    enum launch launch;
    int timeout_ms, retries, backoff_ms, rm_interval_ms, deadline_s, baseline_ms;
    int gap_ms, release_wait_ms, spread_ms, nice;
    pid_t broker_pid;
} opt = {
    .prefix = "nid",
    .job = "storm1",
    .width = 5,
    .uid = 1000,
    .timeout_ms = 5000,
    .backoff_ms = 250,
    .rm_interval_ms = 20,
    .deadline_s = 120,
    .baseline_ms = 2000,
    .gap_ms = 1000,
    .release_wait_ms = 10000,
};

/* ---- small helpers ---------------------------------------------------- */

static double now_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die (const char *fmt, ...)
    __attribute__ ((format (printf, 1, 2), noreturn));
static void die (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    fputs ("fmb-storm: ", stderr);
    vfprintf (stderr, fmt, ap);
    fputc ('\n', stderr);
    va_end (ap);
    exit (1);
}

static void *xcalloc (size_t n, size_t s)
{
    void *p = calloc (n ? n : 1, s ? s : 1);
    if (!p)
        die ("out of memory");
    return p;
}

static int cmp_double (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) of v[0..n), sorted in place; 0 if none. */
static double quantile (double *v, unsigned n, double q, bool sorted)
{
    if (!n)
        return 0;
    if (!sorted)
        qsort (v, n, sizeof (*v), cmp_double);
    unsigned k = (unsigned)ceil (q * n);
    return v[k ? k - 1 : 0];
}

struct dvec {
    double *v;
    unsigned n, cap;
};

static void dvec_push (struct dvec *d, double x)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 256;
        d->v = realloc (d->v, d->cap * sizeof (*d->v));
        if (!d->v)
            die ("out of memory");
    }
    d->v[d->n++] = x;
}

/* ---- the broker process: CPU, memory; this host's steal --------------- */

static long clk_tck;

static double broker_cpu_s (void)
{
    char path[64], buf[1024];
    if (!opt.broker_pid)
        return -1;
    snprintf (path, sizeof (path), "/proc/%d/stat", (int)opt.broker_pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return -1;
    size_t n = fread (buf, 1, sizeof (buf) - 1, f);
    fclose (f);
    buf[n] = '\0';
    char *p = strrchr (buf, ')');
    unsigned long ut = 0, st = 0;
    /* after "pid (comm)": state, then fields 4..13, utime (14), stime (15) */
    if (!p || sscanf (p + 2,
                      "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                      &ut,
                      &st) != 2)
        return -1;
    return (double)(ut + st) / (double)clk_tck;
}

/* VmHWM and VmRSS of the broker, KiB (-1: unknown). */
static void broker_mem (long *hwm, long *rss)
{
    char path[64], line[256];
    *hwm = *rss = -1;
    if (!opt.broker_pid)
        return;
    snprintf (path, sizeof (path), "/proc/%d/status", (int)opt.broker_pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return;
    while (fgets (line, sizeof (line), f)) {
        if (!strncmp (line, "VmHWM:", 6))
            *hwm = strtol (line + 6, NULL, 10);
        else if (!strncmp (line, "VmRSS:", 6))
            *rss = strtol (line + 6, NULL, 10);
    }
    fclose (f);
}

/* The broker's open descriptors (-1: unknown): a kept connection costs
 * it 1 while parked, 3 while it has a request (tlsfront.c). */
static long broker_fds (void)
{
    char path[64];
    if (!opt.broker_pid)
        return -1;
    snprintf (path, sizeof (path), "/proc/%d/fd", (int)opt.broker_pid);
    DIR *d = opendir (path);
    if (!d)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir (d));)
        n += e->d_name[0] != '.';
    closedir (d);
    return n;
}

/* The most descriptors the broker held since the last reset: read every
 * 100 ms by a thread of its own (at the nodes' priority; reading 30,000
 * entries costs a few ms). */
static atomic_long fds_peak;
static atomic_bool fds_stop;

static void *fds_main (void *arg)
{
    (void)arg;
    (void)setpriority (PRIO_PROCESS, (id_t)syscall (SYS_gettid), opt.nice);
    while (!atomic_load (&fds_stop)) {
        long n = broker_fds (), peak = atomic_load (&fds_peak);
        while (n > peak && !atomic_compare_exchange_weak (&fds_peak, &peak, n))
            ;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep (&ts, NULL);
    }
    return NULL;
}

static double self_cpu_s (void)
{
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

struct cpustat {
    unsigned long long total, steal;
};

static struct cpustat host_cpu (void)
{
    struct cpustat c = {0, 0};
    unsigned long long v[10] = {0};
    FILE *f = fopen ("/proc/stat", "r");
    if (!f)
        return c;
    if (fscanf (f,
                "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                &v[0],
                &v[1],
                &v[2],
                &v[3],
                &v[4],
                &v[5],
                &v[6],
                &v[7],
                &v[8],
                &v[9]) >= 8) {
        for (int i = 0; i < 8; i++) /* guest time is inside user time */
            c.total += v[i];
        c.steal = v[7];
    }
    fclose (f);
    return c;
}

/* ---- node names, addresses and tokens ---------------------------------- */

static char node_key[65];

static void node_name (unsigned i, char *out, size_t len)
{
    snprintf (out, len, "%s%0*u", opt.prefix, (int)opt.width, i + 1);
}

/* node i's source address: 127.(1 + b/256).(b%256).(1 + i%254), b = i/254:
 * no .0 or .255 host, never 127.0.0.x (the broker's own). */
static struct in_addr node_addr (unsigned i)
{
    unsigned b = i / 254, h = 1 + i % 254;
    struct in_addr a;
    a.s_addr = htonl ((127u << 24) | ((1 + b / 256) << 16) | ((b % 256) << 8) | h);
    return a;
}

static void load_node_key (const char *path)
{
    FILE *f = fopen (path, "r");
    char buf[128];
    if (!f)
        die ("--node-key %s: %s", path, strerror (errno));
    size_t n = fread (buf, 1, sizeof (buf) - 1, f);
    fclose (f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    if (n != 64 || strspn (buf, "0123456789abcdefABCDEF") != 64)
        die (
            "--node-key %s: expected 64 hexadecimal characters (the broker's "
            "node.key)",
            path);
    memcpy (node_key, buf, 65);
}

/* "node:NAME:HMAC", as nodeauth_token() makes it (the key is the file's
 * hex text, not the bytes it spells). */
static void node_token (const char *name, char *out, size_t len)
{
    char msg[128], hex[65];
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    int n = snprintf (msg, sizeof (msg), "fmbroker-node:%s", name);
    HMAC (EVP_sha256 (), node_key, 64, (unsigned char *)msg, (size_t)n, mac, &maclen);
    for (unsigned i = 0; i < maclen && i < 32; i++)
        snprintf (hex + 2 * i, 3, "%02x", mac[i]);
    hex[64] = '\0';
    snprintf (out, len, "node:%s:%s", name, hex);
}

/* ---- HTTP answers --------------------------------------------------- */

struct rx {
    char head[HEAD_MAX];
    unsigned hn;
    bool head_done, chunked, close, done;
    int status;
    long long clen; /* -1: none given */
    long long got;  /* body bytes (decoded) */
    int cst;        /* chunked: 0 size line, 1 data, 2 CRLF after data, 3 trailer */
    long long cleft;
    char cline[40];
    unsigned cll;
    char *body;
    size_t bn, bmax, bcap;
    unsigned long long raw; /* bytes received at all */
};

static void rx_keep (struct rx *r, const char *p, size_t n)
{
    r->got += (long long)n;
    if (!r->bmax || r->bn >= r->bmax)
        return;
    size_t take = n < r->bmax - r->bn ? n : r->bmax - r->bn;
    memcpy (r->body + r->bn, p, take);
    r->bn += take;
    r->body[r->bn] = '\0';
}

static int rx_head (struct rx *r)
{
    char *end = strstr (r->head, "\r\n\r\n");
    int maj, min;
    if (sscanf (r->head, "HTTP/%d.%d %d", &maj, &min, &r->status) != 3)
        return -1;
    r->clen = -1;
    r->close = maj == 1 && min == 0;
    for (char *h = strstr (r->head, "\r\n"); h && h < end; h = strstr (h + 2, "\r\n")) {
        const char *v = h + 2;
        if (!strncasecmp (v, "content-length:", 15))
            r->clen = strtoll (v + 15, NULL, 10);
        else if (!strncasecmp (v, "transfer-encoding:", 18)) {
            v += 18 + strspn (v + 18, " \t");
            r->chunked = !strncasecmp (v, "chunked", 7);
        } else if (!strncasecmp (v, "connection:", 11)) {
            v += 11 + strspn (v + 11, " \t");
            if (!strncasecmp (v, "close", 5))
                r->close = true;
            else if (!strncasecmp (v, "keep-alive", 10))
                r->close = false;
        }
    }
    if (r->status == 204 || r->status == 304 || r->status / 100 == 1)
        r->clen = 0, r->chunked = false;
    return 0;
}

/* Feed received bytes; -1 for an answer that is not HTTP. */
static int rx_feed (struct rx *r, const char *p, size_t n)
{
    r->raw += n;
    while (n && !r->done) {
        if (!r->head_done) {
            /* the header, byte by byte into head[] until its blank line */
            while (n && !r->head_done) {
                if (r->hn >= sizeof (r->head) - 1)
                    return -1;
                r->head[r->hn++] = *p++;
                n--;
                r->head[r->hn] = '\0';
                if (r->hn >= 4 && !memcmp (r->head + r->hn - 4, "\r\n\r\n", 4)) {
                    r->head_done = true;
                    if (rx_head (r) < 0)
                        return -1;
                    if (!r->chunked && r->clen == 0)
                        r->done = true;
                    else if (!r->chunked && r->clen < 0)
                        r->close = true; /* delimited by the close */
                }
            }
            continue;
        }
        if (!r->chunked) {
            size_t take = n;
            if (r->clen >= 0 && (long long)take > r->clen - r->got)
                take = (size_t)(r->clen - r->got);
            rx_keep (r, p, take);
            p += take;
            n -= take;
            if (r->clen >= 0 && r->got >= r->clen)
                r->done = true;
            if (n && r->done)
                r->close = true; /* bytes past the answer: not reusable */
            continue;
        }
        switch (r->cst) {
        case 0:
        case 2:
        case 3: { /* a line */
            char c = *p++;
            n--;
            if (c != '\n') {
                if (r->cll < sizeof (r->cline) - 1)
                    r->cline[r->cll++] = c;
                break;
            }
            r->cline[r->cll] = '\0';
            if (r->cll && r->cline[r->cll - 1] == '\r')
                r->cline[--r->cll] = '\0';
            if (r->cst == 0) {
                r->cleft = strtoll (r->cline, NULL, 16);
                r->cst = r->cleft > 0 ? 1 : 3;
            } else if (r->cst == 2)
                r->cst = 0;
            else if (r->cll == 0)
                r->done = true;
            r->cll = 0;
            break;
        }
        case 1: {
            size_t take = (long long)n < r->cleft ? n : (size_t)r->cleft;
            rx_keep (r, p, take);
            p += take;
            n -= take;
            r->cleft -= (long long)take;
            if (!r->cleft)
                r->cst = 2;
            break;
        }
        }
    }
    return 0;
}

/* ---- peers: the nodes ------------------------------------------------------ */

enum cstate { CS_NONE, CS_CONNECTING, CS_HANDSHAKE, CS_IDLE, CS_WRITE, CS_READ };
enum call { CALL_NONE, CALL_HANDSHAKE, CALL_RUN, CALL_VIEW, CALL_REPORT, CALL_PROBE };

/* Why a call failed. */
enum fail {
    F_TIMEOUT,
    F_REFUSED,
    F_RESET,
    F_CLOSED,
    F_TLS,
    F_OTHER,
    F_HTTP,
    F_DEADLINE,
    F_COUNT
};
static const char *const fail_name[F_COUNT] = {
    "timeout", "refused", "reset", "closed", "tls", "other", "http", "deadline"};

struct peer {
    uint8_t cs, call, tries, reused, stale_used, busy, active, waiting;
    int fd;
    uint32_t evmask, gen, cseq; /* cseq: which socket of the peer an event is for */
    SSL *ssl;
    double call_t0, try_t0;
    char *hdr;
    size_t hlen, wpos;
    const char *body;
    size_t blen;
    struct rx *rx;
    int err; /* errno of the last failure */
};

static struct peer *peers; /* the nodes, 0..N-1 */
static int ep = -1;
static SSL_CTX *tls;
static struct sockaddr_in dst;
static char scratch[65536];
static double g_deadline;   /* set before any thread starts, then only read */
static bool deadline_hit;   /* the nodes' thread's */
static unsigned inflight;   /* node attempts running */
static unsigned nodes_busy; /* node calls not over */
static unsigned *waitq;     /* nodes waiting for a slot (--concurrency) */
static unsigned wq_head, wq_tail, wq_cap;
static unsigned *startq; /* calls to start in batches this phase */
static unsigned sq_next, sq_len;
static double sq_t0;
static enum call sq_call;

static const char *run_body, *report_body = "{\"cxi\":\"destroyed\"}";
static size_t run_body_len, report_body_len;

/* ---- per-phase figures ------------------------------------------------- */

/* The phases' numbers, as the main thread publishes them (cur_id) for the
 * RM's thread; 0: between phases. */
enum { PH_NONE, PH_BASE, PH_WARM, PH_LAUNCH, PH_END, PH_COUNT };

struct phase {
    const char *name;
    int id;
    bool on, skipped;
    char skip_why[160];
    double t0, t1, wall0;
    double bcpu0, bcpu1, gcpu0, gcpu1;
    struct cpustat hc0, hc1;
    long hwm, rss;
    long fds, fds_peak; /* the broker's at the phase's end, and its most */
    unsigned calls, ok, failed, attempts, retried, handshakes, stale, idle_cut;
    unsigned fail[F_COUNT], tmo_stage[3], http[600];
    double t_last_ok, t_last;
    struct dvec lat;
    /* launch only: the job as the broker recorded it */
    double job_created_s, job_updated_s; /* after the phase began */
    char hwcoll[32];
    /* end only */
    double cleanup_ms;
    int cleanup_status;
    int released; /* 1 yes, 0 not seen */
    double release_s, release_event_s, release_after_last_s;
    long waiting_left;
    char release_why[200];
};

static struct phase ph_base = {.name = "baseline", .id = PH_BASE},
                    ph_warm = {.name = "warmup", .id = PH_WARM},
                    ph_launch = {.name = "launch", .id = PH_LAUNCH},
                    ph_end = {.name = "end", .id = PH_END};
static struct phase *cur; /* where completions are counted (the nodes' thread) */
static atomic_int cur_id; /* cur's number, for the RM's thread */
static char *http_samples[600];
static unsigned
    idle_cut_total; /* kept connections the broker closed, in a phase or not */
static char fail_sample[F_COUNT][200];
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER; /* fail_sample */
static double rm_cycle_cpu = -1; /* the broker's CPU per RM RUN+CLEANUP, baseline */

/* The RM's figures per phase (by the phase's number when the call began),
 * the RM's thread's own: read by the main thread once that thread has
 * ended, but for cycles, read also while it runs. */
static struct rmph {
    struct dvec lat, clean; /* the RUNs begun in the phase, the CLEANUPs */
    unsigned fail;
    char err[400];
    atomic_uint cycles; /* RUN + CLEANUP, by the RUN's phase */
} rmph[PH_COUNT];

static void phase_begin (struct phase *p)
{
    memset (&p->calls, 0, sizeof (*p) - offsetof (struct phase, calls));
    p->on = true;
    p->t0 = now_s ();
    p->wall0 = wall_ms ();
    p->bcpu0 = broker_cpu_s ();
    p->gcpu0 = self_cpu_s ();
    p->hc0 = host_cpu ();
    p->waiting_left = -1;
    atomic_store (&fds_peak, broker_fds ());
    cur = p;
    atomic_store (&cur_id, p->id);
}

/* Between phases: nothing is counted anywhere. */
static void phase_none (void)
{
    cur = NULL;
    atomic_store (&cur_id, PH_NONE);
}

static void phase_finish (struct phase *p)
{
    p->t1 = now_s ();
    p->bcpu1 = broker_cpu_s ();
    p->gcpu1 = self_cpu_s ();
    p->hc1 = host_cpu ();
    broker_mem (&p->hwm, &p->rss);
    p->fds = broker_fds ();
    p->fds_peak = atomic_load (&fds_peak);
    if (p->fds > p->fds_peak)
        p->fds_peak = p->fds;
}

/* ---- the timer heap ---------------------------------------------------- */

enum tkind { T_TIMEOUT, T_RETRY };
struct timer {
    double at;
    uint32_t peer, gen;
    uint8_t kind;
};
static struct timer *heap;
static unsigned hn, hcap;

static void timer_add (double at, uint32_t peer, uint32_t gen, uint8_t kind)
{
    if (hn == hcap) {
        hcap = hcap ? hcap * 2 : 1024;
        heap = realloc (heap, hcap * sizeof (*heap));
        if (!heap)
            die ("out of memory");
    }
    unsigned i = hn++;
    while (i && heap[(i - 1) / 2].at > at) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = (struct timer){at, peer, gen, kind};
}

static struct timer timer_pop (void)
{
    struct timer top = heap[0], last = heap[--hn];
    unsigned i = 0;
    for (;;) {
        unsigned c = 2 * i + 1;
        if (c >= hn)
            break;
        if (c + 1 < hn && heap[c + 1].at < heap[c].at)
            c++;
        if (heap[c].at >= last.at)
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (hn)
        heap[i] = last;
    return top;
}

/* ---- connections ---------------------------------------------------------- */

static uint32_t pidx (const struct peer *p)
{
    return (uint32_t)(p - peers);
}

static void set_mask (struct peer *p, uint32_t m)
{
    if (p->evmask == m || p->fd < 0)
        return;
    struct epoll_event e = {.events = m,
                            .data.u64 = (uint64_t)p->cseq << 32 | pidx (p)};
    int op = !m ? EPOLL_CTL_DEL : p->evmask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl (ep, op, p->fd, &e) < 0 && op != EPOLL_CTL_DEL)
        die ("epoll_ctl: %s", strerror (errno));
    p->evmask = m;
}

static void conn_close (struct peer *p)
{
    if (p->ssl) {
        SSL_free (p->ssl);
        p->ssl = NULL;
    }
    if (p->fd >= 0)
        close (p->fd); /* leaves the epoll set with it */
    p->fd = -1;
    p->evmask = 0;
    p->cs = CS_NONE;
}

static void rx_free (struct peer *p)
{
    if (p->rx) {
        free (p->rx->body);
        free (p->rx);
        p->rx = NULL;
    }
}

static void call_clear (struct peer *p)
{
    free (p->hdr);
    p->hdr = NULL;
    rx_free (p);
}

/* errno -> a failure kind */
static enum fail fail_of_errno (int e)
{
    switch (e) {
    case ECONNREFUSED:
        return F_REFUSED;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
        return F_RESET;
    case ETIMEDOUT:
        return F_TIMEOUT;
    default:
        return F_OTHER;
    }
}

static void note_fail (enum fail f, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
static void note_fail (enum fail f, const char *fmt, ...)
{
    pthread_mutex_lock (&fail_mu);
    if (!fail_sample[f][0]) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (fail_sample[f], sizeof (fail_sample[f]), fmt, ap);
        va_end (ap);
    }
    pthread_mutex_unlock (&fail_mu);
}

static void start_attempt (struct peer *p);

/* A node's call is over: count it in the current phase. */
static void node_done (struct peer *p, bool ok, enum fail f, int status)
{
    struct phase *ph = cur;
    double t = now_s ();
    if (p->busy)
        nodes_busy--;
    p->busy = 0;
    call_clear (p);
    /* cold: the connection goes with its call, as a program run per call
     * (fmbroker-cxi) closes it, and as a node service's went when the
     * broker cut it idle: the broker holds only the calls in flight */
    if (opt.mode == MODE_COLD && p->fd >= 0)
        conn_close (p);
    if (!ph)
        return;
    ph->calls++;
    ph->t_last = t - ph->t0;
    if (ok) {
        ph->ok++;
        ph->t_last_ok = t - ph->t0;
        dvec_push (&ph->lat, (t - p->call_t0) * 1000);
        return;
    }
    ph->failed++;
    ph->fail[f]++;
    if (f == F_HTTP && status >= 100 && status < 600)
        ph->http[status]++;
}

static void slot_free (struct peer *p)
{
    if (!p->active)
        return;
    p->active = 0;
    inflight--;
    /* a waiting node takes the slot */
    while (wq_head != wq_tail && (!opt.concurrency || inflight < opt.concurrency)) {
        struct peer *w = &peers[waitq[wq_head++ % wq_cap]];
        w->waiting = 0;
        start_attempt (w);
    }
}

static bool retryable (enum fail f, int status)
{
    return f != F_HTTP || status >= 500 || status == 429 || status == 408;
}

/* The attempt failed: retry after a back-off with jitter, or end the call. */
static void attempt_fail (struct peer *p, enum fail f, int status)
{
    if (p->call != CALL_PROBE && f == F_TIMEOUT && cur) {
        int st = p->cs == CS_CONNECTING ? 0 : p->cs == CS_HANDSHAKE ? 1 : 2;
        cur->tmo_stage[st]++;
    }
    if (f != F_HTTP)
        conn_close (p);
    p->gen++;
    slot_free (p);
    rx_free (p);
    if (p->tries <= opt.retries && retryable (f, status) && !deadline_hit) {
        double d = opt.backoff_ms * pow (2, p->tries - 1);
        if (d > 5000)
            d = 5000;
        d *= 0.5 + drand48 (); /* jitter: 0.5-1.5x */
        if (cur)
            cur->retried++;
        timer_add (now_s () + d / 1000, pidx (p), p->gen, T_RETRY);
        return;
    }
    node_done (p, false, f, status);
}

/* The answer is complete. */
static void attempt_answered (struct peer *p)
{
    struct rx *r = p->rx;
    int st = r->status;
    p->gen++;
    /* the node keeps its connection as the node service does, unless the
     * broker said it closes */
    if (r->close)
        conn_close (p);
    else {
        p->cs = CS_IDLE;
        set_mask (p, EPOLLIN | EPOLLRDHUP);
    }
    if (st / 100 != 2 && st >= 100 && st < 600 && !http_samples[st]) {
        http_samples[st] = strdup (r->body ? r->body : "");
    }
    slot_free (p);
    if (st / 100 == 2) {
        node_done (p, true, F_HTTP, st);
        return;
    }
    rx_free (p);
    attempt_fail (p, F_HTTP, st);
}

static void do_write (struct peer *p);
static void do_read (struct peer *p);
static void do_handshake (struct peer *p);

/* A kept connection that failed before any answer byte: the broker may
 * have closed it as it went idle; a new one, once, within the same
 * attempt (what apiclient.c does). */
static bool stale_again (struct peer *p)
{
    if (!p->reused || p->stale_used || (p->rx && p->rx->raw))
        return false;
    p->stale_used = 1;
    p->reused = 0;
    if (cur)
        cur->stale++;
    conn_close (p);
    rx_free (p);
    return true;
}

static void open_conn (struct peer *p);

static void io_failed (struct peer *p, enum fail f)
{
    if (stale_again (p)) {
        open_conn (p);
        return;
    }
    attempt_fail (p, f, 0);
}

enum { IO_WANT_READ = -1, IO_WANT_WRITE = -2, IO_EOF = -3, IO_ERR = -4 };

static long io_xfer (struct peer *p, bool wr, void *buf, size_t n)
{
    if (p->ssl) {
        ERR_clear_error ();
        errno = 0;
        int r = wr ? SSL_write (p->ssl, buf, (int)n) : SSL_read (p->ssl, buf, (int)n);
        if (r > 0)
            return r;
        int e = SSL_get_error (p->ssl, r);
        if (e == SSL_ERROR_WANT_READ)
            return IO_WANT_READ;
        if (e == SSL_ERROR_WANT_WRITE)
            return IO_WANT_WRITE;
        if (e == SSL_ERROR_ZERO_RETURN)
            return IO_EOF;
        if (e == SSL_ERROR_SYSCALL) {
            if (!errno)
                return IO_EOF;
            p->err = errno;
            return IO_ERR;
        }
        unsigned long le = ERR_peek_error ();
        if (ERR_GET_REASON (le) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
            return IO_EOF;
        p->err = EPROTO;
        note_fail (F_TLS, "TLS: %s", ERR_error_string (le, NULL));
        return IO_ERR;
    }
    ssize_t r = wr ? send (p->fd, buf, n, MSG_NOSIGNAL) : recv (p->fd, buf, n, 0);
    if (r > 0)
        return r;
    if (r == 0)
        return IO_EOF;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return wr ? IO_WANT_WRITE : IO_WANT_READ;
    p->err = errno;
    return IO_ERR;
}

static enum fail fail_of_io (struct peer *p, long r)
{
    if (r == IO_EOF)
        return F_CLOSED;
    if (p->err == EPROTO)
        return F_TLS;
    return fail_of_errno (p->err);
}

static void begin_write (struct peer *p)
{
    p->wpos = 0;
    p->cs = CS_WRITE;
    do_write (p);
}

static void do_handshake (struct peer *p)
{
    ERR_clear_error ();
    errno = 0;
    int r = SSL_connect (p->ssl);
    if (r == 1) {
        if (cur)
            cur->handshakes++;
        begin_write (p); /* warm-up: the service's first, authenticated, GET */
        return;
    }
    int e = SSL_get_error (p->ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
        set_mask (p, EPOLLIN);
        return;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        set_mask (p, EPOLLOUT);
        return;
    }
    unsigned long le = ERR_peek_error ();
    long vr = SSL_get_verify_result (p->ssl);
    if (e == SSL_ERROR_SYSCALL && errno) {
        p->err = errno;
        io_failed (p, fail_of_errno (errno));
    } else if ((e == SSL_ERROR_SYSCALL && !errno) || e == SSL_ERROR_ZERO_RETURN ||
               ERR_GET_REASON (le) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        note_fail (F_CLOSED,
                   "the broker closed the connection during the TLS handshake");
        io_failed (p, F_CLOSED);
    } else {
        note_fail (F_TLS,
                   "TLS handshake: %s%s%s",
                   le ? ERR_error_string (le, NULL) : "failed",
                   vr != X509_V_OK ? "; certificate: " : "",
                   vr != X509_V_OK ? X509_verify_cert_error_string (vr) : "");
        io_failed (p, F_TLS);
    }
}

static void connected (struct peer *p)
{
    int err = 0;
    socklen_t len = sizeof (err);
    if (getsockopt (p->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        p->err = err;
        note_fail (fail_of_errno (err), "connect: %s", strerror (err));
        io_failed (p, fail_of_errno (err));
        return;
    }
    p->ssl = SSL_new (tls);
    if (!p->ssl || SSL_set_fd (p->ssl, p->fd) != 1)
        die ("SSL_new: out of memory");
    X509_VERIFY_PARAM_set1_ip_asc (SSL_get0_param (p->ssl), opt.host);
    p->cs = CS_HANDSHAKE;
    do_handshake (p);
}

static void open_conn (struct peer *p)
{
    int one = 1;
    p->err = 0;
    p->cseq++;
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = node_addr (pidx (p))};
    p->fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        p->err = errno;
        note_fail (F_OTHER, "socket: %s (raise ulimit -n)", strerror (errno));
        attempt_fail (p, F_OTHER, 0);
        return;
    }
    setsockopt (p->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof (one));
    setsockopt (p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    if (bind (p->fd, (struct sockaddr *)&src, sizeof (src)) < 0 ||
        (connect (p->fd, (struct sockaddr *)&dst, sizeof (dst)) < 0 &&
         errno != EINPROGRESS)) {
        p->err = errno;
        note_fail (fail_of_errno (errno), "connect: %s", strerror (errno));
        attempt_fail (p, fail_of_errno (errno), 0);
        return;
    }
    p->cs = CS_CONNECTING;
    set_mask (p, EPOLLOUT);
}

static void do_write (struct peer *p)
{
    size_t total = p->hlen + p->blen;
    for (int turn = 0; turn < 64 && p->wpos < total; turn++) {
        /* the next piece of header+body, rebuilt from wpos each time (the
         * same bytes when a write is repeated) */
        size_t n = 0, pos = p->wpos;
        while (n < WRITE_PIECE && pos < total) {
            const char *src = pos < p->hlen ? p->hdr + pos : p->body + (pos - p->hlen);
            size_t avail = pos < p->hlen ? p->hlen - pos : total - pos;
            size_t take = avail < WRITE_PIECE - n ? avail : WRITE_PIECE - n;
            memcpy (scratch + n, src, take);
            n += take;
            pos += take;
        }
        long r = io_xfer (p, true, scratch, n);
        if (r > 0) {
            p->wpos += (size_t)r;
            continue;
        }
        if (r == IO_WANT_WRITE) {
            set_mask (p, EPOLLOUT);
            return;
        }
        if (r == IO_WANT_READ) {
            set_mask (p, EPOLLIN);
            return;
        }
        io_failed (p, fail_of_io (p, r));
        return;
    }
    if (p->wpos < total) { /* more next turn: others get theirs first */
        set_mask (p, EPOLLOUT);
        return;
    }
    p->cs = CS_READ;
    p->rx = xcalloc (1, sizeof (*p->rx));
    p->rx->bmax = NODE_BODY_MAX;
    p->rx->bcap = NODE_BODY_MAX + 1;
    p->rx->body = malloc (p->rx->bcap);
    if (!p->rx->body)
        die ("out of memory");
    p->rx->body[0] = '\0';
    set_mask (p, EPOLLIN | EPOLLRDHUP);
    do_read (p);
}

static void do_read (struct peer *p)
{
    for (int turn = 0; turn < 256; turn++) {
        long r = io_xfer (p, false, scratch, sizeof (scratch));
        if (r > 0) {
            if (rx_feed (p->rx, scratch, (size_t)r) < 0) {
                note_fail (F_OTHER, "an answer that is not HTTP");
                p->err = EBADMSG;
                attempt_fail (p, F_OTHER, 0);
                return;
            }
            if (p->rx->done) {
                attempt_answered (p);
                return;
            }
            continue;
        }
        if (r == IO_WANT_READ) {
            set_mask (p, EPOLLIN | EPOLLRDHUP);
            return;
        }
        if (r == IO_WANT_WRITE) {
            set_mask (p, EPOLLOUT);
            return;
        }
        if (r == IO_EOF && p->rx->head_done && !p->rx->chunked && p->rx->clen < 0) {
            p->rx->done = true; /* an answer delimited by the close */
            attempt_answered (p);
            return;
        }
        if (r == IO_EOF)
            note_fail (F_CLOSED, "the broker closed the connection before its answer");
        io_failed (p, fail_of_io (p, r));
        return;
    }
    /* more to read: level-triggered epoll comes back */
}

/* A kept connection with no call on it: the broker may close it (its
 * request timeout, libmicrohttpd's idle cut); TLS 1.3 tickets are read. */
static void idle_event (struct peer *p)
{
    for (int turn = 0; turn < 8; turn++) {
        long r = io_xfer (p, false, scratch, sizeof (scratch));
        if (r > 0)
            continue;
        if (r == IO_WANT_READ || r == IO_WANT_WRITE)
            return;
        if (cur)
            cur->idle_cut++;
        idle_cut_total++;
        conn_close (p);
        return;
    }
}

static void on_event (struct peer *p, uint32_t ev)
{
    (void)ev;
    switch (p->cs) {
    case CS_CONNECTING:
        p->cs = CS_NONE;
        connected (p);
        break;
    case CS_HANDSHAKE:
        do_handshake (p);
        break;
    case CS_WRITE:
        do_write (p);
        break;
    case CS_READ:
        do_read (p);
        break;
    case CS_IDLE:
        idle_event (p);
        break;
    default:
        set_mask (p, 0);
    }
}

/* ---- calls ---------------------------------------------------------------- */

static void build_node_request (struct peer *p)
{
    char name[96], tok[200], path[256];
    unsigned i = pidx (p);
    node_name (i, name, sizeof (name));
    node_token (name, tok, sizeof (tok));
    const char *method = "GET";
    p->body = "";
    p->blen = 0;
    if (p->call == CALL_RUN) {
        method = "PUT";
        snprintf (path, sizeof (path), "/v1/jobs/%s", opt.job);
        p->body = run_body;
        p->blen = run_body_len;
    } else if (p->call == CALL_VIEW) /* as facts.c asks: this node's view */
        snprintf (path, sizeof (path), "/v1/jobs/%s/nodes/%s", opt.job, name);
    else if (p->call == CALL_REPORT) {
        method = "PUT";
        snprintf (path, sizeof (path), "/v1/jobs/%s/nodes/%s", opt.job, name);
        p->body = report_body;
        p->blen = report_body_len;
    } else
        snprintf (path, sizeof (path), "/v1/health");
    free (p->hdr);
    p->hdr = malloc (768);
    if (!p->hdr)
        die ("out of memory");
    int n = snprintf (p->hdr,
                      768,
                      "%s %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n"
                      "Content-Type: application/json\r\nAuthorization: Bearer %s\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method,
                      path,
                      opt.hostport,
                      tok,
                      p->blen);
    p->hlen = (size_t)n;
}

static void start_attempt (struct peer *p)
{
    if (opt.concurrency && inflight >= opt.concurrency) {
        if (!p->waiting) {
            p->waiting = 1;
            waitq[wq_tail++ % wq_cap] = pidx (p);
        }
        return;
    }
    inflight++;
    p->active = 1;
    p->tries++;
    p->gen++;
    p->try_t0 = now_s ();
    if (p->tries == 1)
        p->call_t0 = p->try_t0;
    if (cur)
        cur->attempts++;
    p->stale_used = 0;
    timer_add (p->try_t0 + opt.timeout_ms / 1000.0, pidx (p), p->gen, T_TIMEOUT);
    if (p->cs == CS_IDLE && p->fd >= 0 && p->call != CALL_HANDSHAKE) {
        p->reused = 1;
        begin_write (p);
        return;
    }
    p->reused = 0;
    if (p->fd >= 0)
        conn_close (p);
    open_conn (p);
}

static void node_call (struct peer *p, enum call c)
{
    p->call = (uint8_t)c;
    if (!p->busy)
        nodes_busy++;
    p->busy = 1;
    p->tries = 0;
    build_node_request (p);
    start_attempt (p);
}

/* ---- the loop ------------------------------------------------------------ */

static void fire_timers (void)
{
    double t = now_s ();
    unsigned fired = 0;
    while (hn && heap[0].at <= t && fired++ < 100000) {
        struct timer tm = timer_pop ();
        struct peer *p = &peers[tm.peer];
        switch (tm.kind) {
        case T_TIMEOUT:
            if (p->gen == tm.gen && (p->busy)) {
                note_fail (
                    F_TIMEOUT, "no answer within --timeout-ms %d", opt.timeout_ms);
                p->err = ETIMEDOUT;
                attempt_fail (p, F_TIMEOUT, 0);
            }
            break;
        case T_RETRY:
            if (p->gen == tm.gen && p->busy)
                start_attempt (p);
            break;
        }
    }
}

/* Start the phase's calls in batches, so that the first answers are read
 * while the last calls start. */
static void start_batch (void)
{
    unsigned n = 0;
    double t = now_s ();
    while (sq_next < sq_len && n < START_BATCH) {
        unsigned i = sq_next;
        if (opt.spread_ms && t < sq_t0 + (double)opt.spread_ms / 1000 * i / sq_len)
            break;
        node_call (&peers[startq[i]], sq_call);
        sq_next++;
        n++;
    }
}

/* One turn: start calls, wait for events up to max_ms, handle them and
 * the timers that are due. */
static void loop_once (double max_ms)
{
    static struct epoll_event evs[1024];
    start_batch ();
    double t = now_s ();
    double wait = max_ms;
    if (hn && (heap[0].at - t) * 1000 < wait)
        wait = (heap[0].at - t) * 1000;
    if ((g_deadline - t) * 1000 < wait)
        wait = (g_deadline - t) * 1000;
    if (sq_next < sq_len)
        wait = opt.spread_ms ? (wait < 1 ? wait : 1) : 0;
    if (wait < 0)
        wait = 0;
    int n = epoll_wait (ep, evs, 1024, (int)ceil (wait));
    if (n < 0 && errno != EINTR)
        die ("epoll_wait: %s", strerror (errno));
    for (int i = 0; i < n; i++) {
        struct peer *p = &peers[(uint32_t)evs[i].data.u64];
        /* an event of a socket closed earlier in this batch is stale */
        if (p->fd >= 0 && p->cseq == (uint32_t)(evs[i].data.u64 >> 32))
            on_event (p, evs[i].events);
    }
    fire_timers ();
    if (now_s () >= g_deadline)
        deadline_hit = true;
}

/* Run until every node call of the phase is over (or the deadline). */
static void abort_node_calls (void)
{
    for (unsigned i = 0; i < opt.nodes; i++) {
        struct peer *p = &peers[i];
        if (p->busy) {
            p->gen++;
            conn_close (p);
            slot_free (p);
            if (p->waiting)
                p->waiting = 0;
            node_done (p, false, F_DEADLINE, 0);
        }
    }
    for (unsigned i = sq_next; i < sq_len; i++)
        if (cur) {
            cur->calls++;
            cur->failed++;
            cur->fail[F_DEADLINE]++;
        }
    sq_next = sq_len;
    wq_head = wq_tail;
}

static void run_nodes (enum call c)
{
    sq_call = c;
    sq_next = 0;
    sq_len = opt.nodes;
    sq_t0 = now_s ();
    for (unsigned long turn = 0; (sq_next < sq_len || nodes_busy) && turn < 100000000UL;
         turn++) {
        loop_once (100);
        if (deadline_hit) {
            abort_node_calls ();
            break;
        }
    }
}

/* Idle for ms while the RM goes on (on its thread). */
static void idle_for (double ms)
{
    double until = now_s () + ms / 1000;
    for (unsigned long turn = 0; now_s () < until && turn < 10000000UL && !deadline_hit;
         turn++)
        loop_once ((until - now_s ()) * 1000);
}

static void close_node_conns (void)
{
    for (unsigned i = 0; i < opt.nodes; i++)
        if (!peers[i].busy && peers[i].fd >= 0)
            conn_close (&peers[i]);
}

/* ---- a little JSON reading (fields of the broker's own answers) ---------- */

/* The text after "key": (whitespace skipped), or NULL. */
static const char *json_at (const char *s, const char *key)
{
    char pat[80];
    snprintf (pat, sizeof (pat), "\"%s\"", key);
    for (const char *p = s ? strstr (s, pat) : NULL; p; p = strstr (p + 1, pat)) {
        const char *q = p + strlen (pat);
        q += strspn (q, " \t\r\n");
        if (*q == ':')
            return q + 1 + strspn (q + 1, " \t\r\n");
    }
    return NULL;
}

static long long json_num (const char *s, const char *key, long long dflt)
{
    const char *p = json_at (s, key);
    return p && (*p == '-' || (*p >= '0' && *p <= '9')) ? strtoll (p, NULL, 10) : dflt;
}

static bool json_str (const char *s, const char *key, char *out, size_t len)
{
    const char *p = json_at (s, key);
    if (!p || *p != '"')
        return false;
    size_t n = 0;
    for (p++; *p && *p != '"' && n + 1 < len; p++)
        out[n++] = *p == '\\' && p[1] ? *++p : *p;
    out[n] = '\0';
    return true;
}

/* The end of the JSON value at s (an object or array, strings skipped). */
static const char *json_skip (const char *s)
{
    int depth = 0;
    bool str = false;
    for (const char *p = s; *p; p++) {
        if (str) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                str = false;
        } else if (*p == '"')
            str = true;
        else if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']') {
            if (--depth == 0)
                return p + 1;
        }
    }
    return NULL;
}

/* Does the events page have vni_released for the job?  Its time_ms. */
static bool events_released (const char *page, double *time_ms)
{
    const char *a = json_at (page, "events");
    if (!a || *a != '[')
        return false;
    const char *end = json_skip (a);
    for (const char *o = strchr (a + 1, '{'); o && end && o < end;) {
        const char *oe = json_skip (o);
        if (!oe)
            break;
        size_t n = (size_t)(oe - o);
        char *ev = strndup (o, n);
        char type[64] = "", job[160] = "";
        json_str (ev, "type", type, sizeof (type));
        json_str (ev, "job", job, sizeof (job));
        bool hit = !strcmp (type, "vni_released") && !strcmp (job, opt.job);
        if (hit)
            *time_ms = (double)json_num (ev, "time_ms", 0);
        free (ev);
        if (hit)
            return true;
        o = strchr (oe, '{');
    }
    return false;
}

/* ---- calls on the socket: blocking, one at a time, off the nodes' loop ---- */

/* One call's outcome. */
struct ucall {
    bool ok;     /* a 2xx answer */
    int status;  /* the HTTP status, 0: no answer */
    enum fail f; /* why not ok (F_HTTP: an answer, not 2xx; F_DEADLINE: --deadline-s) */
    int err;     /* errno of the failure */
    double t0, t1; /* monotonic, s */
    double lat_ms;
    char *out; /* the answer's body, NUL-terminated (up to the call's bmax bytes) */
    size_t outlen;
};

static void ucall_free (struct ucall *u)
{
    free (u->out);
    u->out = NULL;
    u->outlen = 0;
}

static void rx_grow (struct rx *r, size_t more)
{
    size_t need = r->bn + more < r->bmax ? r->bn + more : r->bmax, cap = r->bcap;
    if (need + 1 <= cap)
        return;
    while (cap < need + 1)
        cap *= 2;
    char *nb = realloc (r->body, cap);
    if (!nb)
        die ("out of memory");
    r->body = nb;
    r->bcap = cap;
}

/* Wait for ev on fd until `until` (monotonic s): 1 ready, 0 the time is up,
 * -1 an error. */
static int wait_fd (int fd, short ev, double until)
{
    for (;;) {
        double left = until - now_s ();
        if (left <= 0)
            return 0;
        struct pollfd pf = {.fd = fd, .events = ev};
        int r = poll (&pf, 1, (int)ceil (left * 1000));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static void sleep_s (double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* METHOD PATH with BODY (NULL: none) on the broker's socket, keeping up to
 * bmax bytes of the answer's body; within RM_TIMEOUT_MS and --deadline-s.
 * Thread-safe (its own buffers; note_fail locks).  who: "RM", "control". */
static void unix_http (const char *who,
                       const char *method,
                       const char *path,
                       const char *body,
                       size_t bmax,
                       struct ucall *u)
{
    char hdr[1024], buf[16384];
    ucall_free (u);
    memset (u, 0, sizeof (*u));
    u->t0 = now_s ();
    double tmo_at = u->t0 + RM_TIMEOUT_MS / 1000.0;
    double until = tmo_at < g_deadline ? tmo_at : g_deadline;
    size_t blen = body ? strlen (body) : 0;
    int hlen = snprintf (hdr,
                         sizeof (hdr),
                         "%s %s HTTP/1.1\r\nHost: fmbroker\r\nConnection: close\r\n"
                         "Accept: application/json\r\nContent-Type: "
                         "application/json\r\nContent-Length: %zu\r\n\r\n",
                         method,
                         path,
                         blen);
    struct rx r = {.bmax = bmax, .bcap = (bmax < 65536 ? bmax : 65536) + 1};
    r.body = malloc (r.bcap);
    if (!r.body)
        die ("out of memory");
    r.body[0] = '\0';
    enum fail f = F_OTHER;
    int fd = -1, w;
    struct sockaddr_un su = {.sun_family = AF_UNIX};
    snprintf (su.sun_path, sizeof (su.sun_path), "%s", opt.sock);
    /* connect; a full listen queue (EAGAIN): again shortly */
    for (;;) {
        fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            u->err = errno;
            goto fail;
        }
        if (connect (fd, (struct sockaddr *)&su, sizeof (su)) == 0)
            break;
        if (errno == EAGAIN) {
            close (fd);
            fd = -1;
            if (now_s () + UNIX_RETRY_MS / 1000.0 >= until)
                goto timeout;
            sleep_s (UNIX_RETRY_MS / 1000.0);
            continue;
        }
        if (errno == EINPROGRESS) {
            int err = 0;
            socklen_t len = sizeof (err);
            if ((w = wait_fd (fd, POLLOUT, until)) == 0)
                goto timeout;
            if (w < 0 || getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
            if (!err)
                break;
            errno = err;
        }
        u->err = errno;
        f = fail_of_errno (errno);
        goto fail;
    }
    /* the request */
    for (size_t pos = 0, total = (size_t)hlen + blen; pos < total;) {
        const char *src = pos < (size_t)hlen ? hdr + pos : body + (pos - (size_t)hlen);
        size_t n = pos < (size_t)hlen ? (size_t)hlen - pos : total - pos;
        ssize_t k = send (fd, src, n, MSG_NOSIGNAL);
        if (k > 0) {
            pos += (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            if ((w = wait_fd (fd, POLLOUT, until)) == 0)
                goto timeout;
            if (w > 0)
                continue;
        }
        u->err = errno;
        f = fail_of_errno (errno);
        goto fail;
    }
    /* the answer */
    for (;;) {
        ssize_t k = recv (fd, buf, sizeof (buf), 0);
        if (k > 0) {
            rx_grow (&r, (size_t)k);
            if (rx_feed (&r, buf, (size_t)k) < 0) {
                note_fail (F_OTHER, "an answer that is not HTTP");
                u->err = EBADMSG;
                goto fail;
            }
            if (r.done)
                break;
            continue;
        }
        if (k == 0) {
            if (r.head_done && !r.chunked && r.clen < 0) {
                r.done = true; /* an answer delimited by the close */
                break;
            }
            note_fail (F_CLOSED, "the broker closed the connection before its answer");
            f = F_CLOSED;
            goto fail;
        }
        if (errno == EAGAIN || errno == EINTR) {
            if ((w = wait_fd (fd, POLLIN, until)) == 0)
                goto timeout;
            if (w > 0)
                continue;
        }
        u->err = errno;
        f = fail_of_errno (errno);
        goto fail;
    }
    close (fd);
    u->t1 = now_s ();
    u->lat_ms = (u->t1 - u->t0) * 1000;
    u->status = r.status;
    u->ok = r.status / 100 == 2;
    u->f = F_HTTP;
    u->out = r.body;
    u->outlen = r.bn;
    return;
timeout:
    if (until < tmo_at) {
        f = F_DEADLINE;
    } else {
        f = F_TIMEOUT;
        u->err = ETIMEDOUT;
    }
fail:
    if (fd >= 0)
        close (fd);
    u->t1 = now_s ();
    u->lat_ms = (u->t1 - u->t0) * 1000;
    u->f = f;
    if (f != F_DEADLINE)
        note_fail (
            f, "%s on the socket: %s", who, u->err ? strerror (u->err) : fail_name[f]);
    free (r.body);
}

/* A condition variable on the monotonic clock, and a wait on it until
 * `until` (monotonic s). */
static void cond_init (pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init (&a);
    pthread_condattr_setclock (&a, CLOCK_MONOTONIC);
    pthread_cond_init (cv, &a);
    pthread_condattr_destroy (&a);
}

static void cond_wait_until (pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
    pthread_cond_timedwait (cv, mu, &ts);
}

static void thread_start (pthread_t *t, void *(*fn) (void *))
{
    int e = pthread_create (t, NULL, fn, NULL);
    if (e)
        die ("pthread_create: %s", strerror (e));
}

/* ---- the RM: a small job's RUN and CLEANUP, one after another, on its thread -- */

static char rm_body[256];
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 not yet, 1 cycles, 2 stop after the cycle in flight */
} rmc = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_t rm_thread, fds_thread;
/* every RM call, for the longest one overlapping each phase (the RM's
 * thread's; read once it has ended) */
static struct rmrec {
    double t0, t1;
    bool run;
} * rmrecs;
static unsigned rmrec_n, rmrec_cap;

static void rmrec_add (double t0, double t1, bool run)
{
    if (rmrec_n == rmrec_cap) {
        rmrec_cap = rmrec_cap ? rmrec_cap * 2 : 1024;
        rmrecs = realloc (rmrecs, rmrec_cap * sizeof (*rmrecs));
        if (!rmrecs)
            die ("out of memory");
    }
    rmrecs[rmrec_n++] = (struct rmrec){t0, t1, run};
}

/* The longest RM call (RUN or CLEANUP) that overlapped the phase, ms. */
static double rm_longest (const struct phase *p, bool *run)
{
    double best = 0;
    *run = true;
    for (unsigned i = 0; i < rmrec_n; i++)
        if (rmrecs[i].t0 < p->t1 && rmrecs[i].t1 > p->t0 &&
            (rmrecs[i].t1 - rmrecs[i].t0) * 1000 > best) {
            best = (rmrecs[i].t1 - rmrecs[i].t0) * 1000;
            *run = rmrecs[i].run;
        }
    return best;
}

static void *rm_main (void *arg)
{
    (void)arg;
    struct ucall u = {0};
    char path[160];
    unsigned k = 0;
    pthread_mutex_lock (&rmc.mu);
    while (!rmc.state)
        pthread_cond_wait (&rmc.cv, &rmc.mu);
    pthread_mutex_unlock (&rmc.mu);
    for (;;) {
        pthread_mutex_lock (&rmc.mu);
        bool go = rmc.state == 1;
        pthread_mutex_unlock (&rmc.mu);
        if (!go || now_s () >= g_deadline)
            break;
        snprintf (path, sizeof (path), "/v1/jobs/rm-%s-%u", opt.job, ++k);
        int id = atomic_load (&cur_id); /* the phase the RUN begins in */
        unix_http ("RM", "PUT", path, rm_body, NODE_BODY_MAX, &u);
        double run_t0 = u.t0;
        rmrec_add (u.t0, u.t1, true);
        struct rmph *ph = id ? &rmph[id] : NULL;
        if (u.f == F_DEADLINE) {
            /* a RUN still unanswered at the deadline counts with what it
             * waited so far */
            if (ph) {
                dvec_push (&ph->lat, u.lat_ms);
                if (!ph->err[0])
                    snprintf (ph->err,
                              sizeof (ph->err),
                              "a RUN still unanswered at the deadline after %.0f ms "
                              "(counted so)",
                              u.lat_ms);
            }
            break;
        }
        if (ph) {
            if (u.ok)
                dvec_push (&ph->lat, u.lat_ms);
            else {
                ph->fail++;
                if (!ph->err[0])
                    snprintf (ph->err,
                              sizeof (ph->err),
                              "RUN %.150s: HTTP %d %.100s",
                              path,
                              u.status,
                              u.out ? u.out : "(no answer)");
            }
        }
        /* its CLEANUP at once, whatever the RUN got */
        int cid = atomic_load (&cur_id);
        unix_http ("RM", "DELETE", path, NULL, NODE_BODY_MAX, &u);
        if (u.f == F_DEADLINE)
            break;
        rmrec_add (u.t0, u.t1, false);
        if (ph)
            atomic_fetch_add (&ph->cycles, 1);
        if (cid && u.ok)
            dvec_push (&rmph[cid].clean, u.lat_ms);
        /* the next RUN --rm-interval-ms after this one began */
        double next = run_t0 + opt.rm_interval_ms / 1000.0;
        pthread_mutex_lock (&rmc.mu);
        while (rmc.state == 1 && now_s () < next)
            cond_wait_until (&rmc.cv, &rmc.mu, next);
        pthread_mutex_unlock (&rmc.mu);
    }
    ucall_free (&u);
    return NULL;
}

static void rm_set (int state)
{
    pthread_mutex_lock (&rmc.mu);
    rmc.state = state;
    pthread_cond_broadcast (&rmc.cv);
    pthread_mutex_unlock (&rmc.mu);
}

/* ---- the control client: the other calls on the socket, on its thread ----- */

enum { TASK_NONE, TASK_CALL, TASK_POLL, TASK_QUIT };
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int task; /* set by the main thread, back to TASK_NONE when done */
    /* TASK_CALL */
    const char *method, *body;
    char path[256];
    /* TASK_POLL: GET /v1/events every POLL_MS from seq until the job's
     * vni_released, or stop */
    bool stop;
    long long seq;
    double t0, wall0; /* the phase's start */
    bool released;
    double release_s, release_event_s;
} cw = {.mu = PTHREAD_MUTEX_INITIALIZER};
static struct ucall
    ctl; /* the last TASK_CALL's outcome (the main thread's once done) */
static pthread_t ctl_thread;

static void ctl_poll (void)
{
    struct ucall u = {0};
    char path[256];
    pthread_mutex_lock (&cw.mu);
    long long seq = cw.seq;
    pthread_mutex_unlock (&cw.mu);
    double next = now_s ();
    for (unsigned long turn = 0; turn < 100000000UL; turn++) {
        pthread_mutex_lock (&cw.mu);
        while (!cw.stop && now_s () < next)
            cond_wait_until (&cw.cv, &cw.mu, next);
        bool stop = cw.stop;
        pthread_mutex_unlock (&cw.mu);
        if (stop || now_s () >= g_deadline)
            break;
        next = now_s () + POLL_MS / 1000.0;
        snprintf (path, sizeof (path), "/v1/events?after=%lld&limit=1000", seq);
        unix_http ("control", "GET", path, NULL, CTL_BODY_MAX, &u);
        double tm = 0;
        if (!u.ok || !u.out)
            continue;
        if (events_released (u.out, &tm)) {
            pthread_mutex_lock (&cw.mu);
            cw.released = true;
            cw.release_s = u.t1 - cw.t0; /* when the answer that showed it came */
            cw.release_event_s = (tm - cw.wall0) / 1000;
            pthread_mutex_unlock (&cw.mu);
            break;
        }
        long long last = json_num (u.out, "last_seq", seq);
        /* a full page: read on from its last event */
        if (last > seq && strstr (u.out, "\"seq\"")) {
            const char *lastev = u.out, *q;
            while ((q = strstr (lastev + 1, "\"seq\"")))
                lastev = q;
            long long s = json_num (lastev, "seq", seq);
            seq = s > seq ? s : seq;
            if (seq < last)
                next = now_s ();
        }
    }
    ucall_free (&u);
}

static void *ctl_main (void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock (&cw.mu);
        while (cw.task == TASK_NONE)
            pthread_cond_wait (&cw.cv, &cw.mu);
        int task = cw.task;
        pthread_mutex_unlock (&cw.mu);
        if (task == TASK_CALL)
            unix_http ("control", cw.method, cw.path, cw.body, CTL_BODY_MAX, &ctl);
        else if (task == TASK_POLL)
            ctl_poll ();
        pthread_mutex_lock (&cw.mu);
        cw.task = TASK_NONE;
        pthread_cond_broadcast (&cw.cv);
        pthread_mutex_unlock (&cw.mu);
        if (task == TASK_QUIT)
            return NULL;
    }
}

/* Give the control thread a task (it has none). */
static void ctl_post (int task)
{
    pthread_mutex_lock (&cw.mu);
    cw.task = task;
    pthread_cond_broadcast (&cw.cv);
    pthread_mutex_unlock (&cw.mu);
}

/* Wait until the control thread's task is done. */
static void ctl_wait (void)
{
    pthread_mutex_lock (&cw.mu);
    while (cw.task != TASK_NONE)
        pthread_cond_wait (&cw.cv, &cw.mu);
    pthread_mutex_unlock (&cw.mu);
}

/* A control call on the socket, waited for (the nodes have none in flight
 * then; their loop waits).  ctl holds the outcome. */
static bool ctl_sync (const char *method, const char *path, const char *body)
{
    cw.method = method;
    cw.body = body;
    snprintf (cw.path, sizeof (cw.path), "%s", path);
    ctl_post (TASK_CALL);
    ctl_wait ();
    if (now_s () >= g_deadline)
        deadline_hit = true;
    return ctl.ok;
}

/* ---- phases ------------------------------------------------------------- */

/* the storm job's path, for the RM's one RUN of it (--launch view) */
static const char *rm_run_path (void)
{
    static char path[256];
    snprintf (path, sizeof (path), "/v1/jobs/%s", opt.job);
    return path;
}

static void phase_nodes (struct phase *ph, enum call c)
{
    phase_begin (ph);
    run_nodes (c);
    phase_finish (ph);
}

static void phase_end (void)
{
    struct phase *ph = &ph_end;
    char path[256];
    long long seq = 0;
    /* the event cursor before the CLEANUP, outside the phase's figures */
    if (ctl_sync ("GET", "/v1/status", NULL)) {
        const char *ev = json_at (ctl.out, "events");
        seq = ev ? json_num (ev, "last_seq", 0) : 0;
    }
    phase_begin (ph);
    double wall0 = wall_ms ();
    snprintf (path, sizeof (path), "/v1/jobs/%s", opt.job);
    ctl_sync ("DELETE", path, NULL);
    ph->cleanup_ms = ctl.lat_ms;
    ph->cleanup_status = ctl.status;
    long vni = -1;
    if (ctl.ok && ctl.out) {
        const char *v = json_at (ctl.out, "vnis");
        if (v && *v == '[')
            vni = strtol (v + 1, NULL, 10);
    }
    if (!ctl.ok) {
        snprintf (ph->release_why,
                  sizeof (ph->release_why),
                  "CLEANUP answered %d: %.120s",
                  ctl.status,
                  ctl.out ? ctl.out : "(no answer)");
    }
    bool polling = ctl.ok && vni > 0;
    if (ctl.ok && vni <= 0)
        snprintf (ph->release_why, sizeof (ph->release_why), "the job holds no VNI");
    /* the socket polled for the release on the control thread, while
     * every node reports */
    if (polling) {
        pthread_mutex_lock (&cw.mu);
        cw.stop = false;
        cw.seq = seq;
        cw.t0 = ph->t0;
        cw.wall0 = wall0;
        cw.released = false;
        pthread_mutex_unlock (&cw.mu);
        ctl_post (TASK_POLL);
    }
    run_nodes (CALL_REPORT);
    if (polling) {
        /* the release, until --release-wait-ms after the last report; then
         * a poll in flight ends */
        double until = now_s () + opt.release_wait_ms / 1000.0;
        if (until > g_deadline)
            until = g_deadline;
        pthread_mutex_lock (&cw.mu);
        while (cw.task == TASK_POLL && now_s () < until)
            cond_wait_until (&cw.cv, &cw.mu, until);
        cw.stop = true;
        pthread_cond_broadcast (&cw.cv);
        while (cw.task != TASK_NONE)
            pthread_cond_wait (&cw.cv, &cw.mu);
        if (cw.released) {
            ph->released = 1;
            ph->release_s = cw.release_s;
            ph->release_event_s = cw.release_event_s;
        }
        pthread_mutex_unlock (&cw.mu);
        if (now_s () >= g_deadline)
            deadline_hit = true;
    }
    if (ph->released)
        ph->release_after_last_s = ph->release_s - ph->t_last;
    phase_finish (ph);
    /* who still holds the VNIs, if anyone (one page of /v1/vnis) */
    if (!ph->released && vni > 0) {
        snprintf (path, sizeof (path), "/v1/vnis?after=%ld&limit=1", vni - 1);
        if (ctl_sync ("GET", path, NULL) && ctl.out) {
            char job[160] = "", state[32] = "";
            long long v = json_num (ctl.out, "vni", -1);
            json_str (ctl.out, "job", job, sizeof (job));
            json_str (ctl.out, "state", state, sizeof (state));
            if (v == vni && !strcmp (job, opt.job)) {
                const char *w = json_at (ctl.out, "waiting_for");
                long cnt = 0;
                if (w && *w == '[') {
                    const char *we = json_skip (w);
                    for (const char *q = w; we && q < we; q++)
                        cnt += *q == '"';
                    cnt /= 2;
                }
                ph->waiting_left = cnt;
                snprintf (ph->release_why,
                          sizeof (ph->release_why),
                          "VNI %ld still %s, waiting for %ld node(s)",
                          vni,
                          state,
                          cnt);
            } else {
                ph->released = 1; /* free, and the event missed by the poll */
                ph->release_s = -1;
                snprintf (ph->release_why,
                          sizeof (ph->release_why),
                          "VNI %ld free when checked after the phase",
                          vni);
            }
        }
    }
}

/* ---- output ------------------------------------------------------------- */

static double bcpu (const struct phase *p)
{
    return p->bcpu0 >= 0 && p->bcpu1 >= 0 ? p->bcpu1 - p->bcpu0 : -1;
}

/* the broker's CPU less what the RM's cycles cost it (baseline) */
static double bcpu_net (const struct phase *p)
{
    double b = bcpu (p);
    if (b < 0)
        return -1;
    if (rm_cycle_cpu > 0)
        b -= rm_cycle_cpu * atomic_load (&rmph[p->id].cycles);
    return b < 0 ? 0 : b;
}

static double steal_pct (const struct phase *p)
{
    unsigned long long dt = p->hc1.total - p->hc0.total;
    return dt ? 100.0 * (double)(p->hc1.steal - p->hc0.steal) / (double)dt : 0;
}

static void http_list (const struct phase *p, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int s = 100; s < 600; s++)
        if (p->http[s])
            n += (size_t)snprintf (
                out + n, n < len ? len - n : 0, "%s%d:%u", n ? "," : "", s, p->http[s]);
    if (!n)
        snprintf (out, len, "-");
}

static void fails_text (const struct phase *p, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int f = 0; f < F_COUNT; f++) {
        if (!p->fail[f] || f == F_HTTP)
            continue;
        n += (size_t)snprintf (out + n,
                               n < len ? len - n : 0,
                               "%s%s %u",
                               n ? ", " : "",
                               fail_name[f],
                               p->fail[f]);
    }
    if (p->fail[F_HTTP]) {
        for (int s = 100; s < 600; s++)
            if (p->http[s])
                n += (size_t)snprintf (out + n,
                                       n < len ? len - n : 0,
                                       "%sHTTP %d x%u",
                                       n ? ", " : "",
                                       s,
                                       p->http[s]);
    }
    if (!n)
        snprintf (out, len, "none");
}

static void report (struct phase *p, unsigned handshakes_for_cpu)
{
    if (!p->on)
        return;
    double wall = p->t1 - p->t0, b = bcpu (p), bn = bcpu_net (p);
    double g = p->gcpu1 - p->gcpu0;
    unsigned n = p->lat.n;
    qsort (p->lat.v, n, sizeof (double), cmp_double);
    double p50 = quantile (p->lat.v, n, 0.5, true),
           p99 = quantile (p->lat.v, n, 0.99, true), mx = n ? p->lat.v[n - 1] : 0;
    struct rmph *rp = &rmph[p->id]; /* the RM's thread has ended */
    unsigned rn = rp->lat.n, rcyc = atomic_load (&rp->cycles);
    qsort (rp->lat.v, rn, sizeof (double), cmp_double);
    double r50 = quantile (rp->lat.v, rn, 0.5, true),
           r99 = quantile (rp->lat.v, rn, 0.99, true), rmx = rn ? rp->lat.v[rn - 1] : 0;
    double c99 = quantile (rp->clean.v, rp->clean.n, 0.99, false);
    bool lrun;
    double longest = rm_longest (p, &lrun);
    bool nodes = p != &ph_base;
    double per_call = nodes && bn >= 0 && opt.nodes ? bn * 1000 / opt.nodes : -1;
    double per_hs = handshakes_for_cpu && bn >= 0 ? bn * 1000 / handshakes_for_cpu : -1;
    char fl[512], hl[256];
    fails_text (p, fl, sizeof (fl));
    http_list (p, hl, sizeof (hl));

    printf ("\n== %s: %.2f s%s\n", p->name, wall, p->skipped ? " (skipped)" : "");
    if (p->skipped) {
        printf ("   skipped: %s\n", p->skip_why);
        printf ("STORM phase=%s mode=%s form=%s nodes=%u skipped=1\n",
                p->name,
                opt.mode == MODE_WARM ? "warm" : "cold",
                opt.form == FORM_ARRAY ? "array" : "hostlist",
                opt.nodes);
        return;
    }
    if (nodes && !p->skipped) {
        printf ("   nodes: %u of %u answered (2xx), %u failed: %s\n",
                p->ok,
                opt.nodes,
                p->failed,
                fl);
        if (p->tmo_stage[0] + p->tmo_stage[1] + p->tmo_stage[2])
            printf (
                "   attempts that timed out: while connecting %u, in the TLS handshake "
                "%u, "
                "waiting for the answer %u\n",
                p->tmo_stage[0],
                p->tmo_stage[1],
                p->tmo_stage[2]);
        printf (
            "   time to the last answer %.3f s%s; per node p50 %.1f ms, p99 %.1f ms, "
            "max %.1f ms\n",
            p->t_last_ok,
            p->ok == opt.nodes ? " (every node answered)"
                               : " (not every node answered)",
            p50,
            p99,
            mx);
        printf (
            "   attempts %u (retries %u), TLS handshakes %u, kept connections found "
            "closed %u, cut while idle %u\n",
            p->attempts,
            p->retried,
            p->handshakes,
            p->stale,
            p->idle_cut);
    }
    if (p == &ph_launch && p->hwcoll[0])
        printf (
            "   the job: created %.3f s after the launch began, last updated (its "
            "reservation's outcome, hwcoll %s) at %.3f s\n",
            p->job_created_s,
            p->hwcoll,
            p->job_updated_s);
    if (p == &ph_end) {
        printf ("   CLEANUP on the socket: HTTP %d in %.1f ms\n",
                p->cleanup_status,
                p->cleanup_ms);
        if (p->released == 1 && p->release_s >= 0)
            printf (
                "   VNIs out of quarantine %.3f s after the CLEANUP began (seen by the "
                "50 ms poll; the broker's event %.3f s), %.3f s after the last "
                "report\n",
                p->release_s,
                p->release_event_s,
                p->release_after_last_s);
        else if (p->released == 1)
            printf ("   VNIs out of quarantine: %s\n", p->release_why);
        else
            printf ("   VNIs NOT out of quarantine %.1f s after the CLEANUP: %s\n",
                    wall,
                    p->release_why[0] ? p->release_why : "no vni_released event");
    }
    printf (
        "   RM on the socket: %u RUNs, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %u "
        "failed; CLEANUP p99 %.1f ms; its longest call overlapping the phase %.1f ms "
        "(a "
        "%s)%s%s\n",
        rn,
        r50,
        r99,
        rmx,
        rp->fail,
        c99,
        longest,
        lrun ? "RUN" : "CLEANUP",
        rp->err[0] ? "; first failure: " : "",
        rp->err);
    if (b >= 0)
        printf (
            "   broker CPU %.2f s (%.2f s net of the RM's %u cycles); peak RSS %.1f "
            "MiB, RSS after %.1f MiB\n",
            b,
            bn,
            rcyc,
            p->hwm / 1024.0,
            p->rss / 1024.0);
    if (per_call >= 0 && p != &ph_warm)
        printf ("   broker CPU per node call %.3f ms%s\n",
                per_call,
                p->handshakes && p != &ph_warm ? " (its TLS handshake included)" : "");
    if (per_hs >= 0)
        printf ("   broker CPU per TLS handshake %.3f ms\n", per_hs);
    if (p->fds >= 0)
        printf (
            "   broker descriptors %ld at the end, %ld at most\n", p->fds, p->fds_peak);
    printf (
        "   generator CPU %.2f s (%.0f%% of one core: near 100%% it is the "
        "bottleneck); "
        "host steal %.1f%%\n",
        g,
        wall > 0 ? 100 * g / wall : 0,
        steal_pct (p));
    if (p == &ph_base && rm_cycle_cpu >= 0)
        printf ("   broker CPU per RM cycle (RUN + CLEANUP) %.3f ms\n",
                rm_cycle_cpu * 1000);

    printf (
        "STORM phase=%s mode=%s form=%s nodes=%u skipped=%d wall_s=%.3f calls=%u "
        "answered=%u failed=%u",
        p->name,
        opt.mode == MODE_WARM ? "warm" : "cold",
        opt.form == FORM_ARRAY ? "array" : "hostlist",
        opt.nodes,
        p->skipped,
        wall,
        p->calls,
        p->ok,
        p->failed);
    for (int f = 0; f < F_COUNT; f++)
        printf (" f_%s=%u", fail_name[f], p->fail[f]);
    printf (
        " http=%s tmo_connect=%u tmo_tls=%u tmo_answer=%u t_last_ok_s=%.3f "
        "t_last_s=%.3f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f attempts=%u retries=%u "
        "handshakes=%u stale=%u idle_cut=%u rm_runs=%u rm_failed=%u rm_p50_ms=%.1f "
        "rm_p99_ms=%.1f rm_max_ms=%.1f rm_clean_p99_ms=%.1f rm_longest_ms=%.1f "
        "rm_cycles=%u "
        "broker_cpu_s=%.3f broker_cpu_net_s=%.3f cpu_per_call_ms=%.3f "
        "cpu_per_handshake_ms=%.3f hwm_kib=%ld rss_kib=%ld gen_cpu_s=%.3f "
        "gen_busy_pct=%.0f fds=%ld fds_peak=%ld "
        "steal_pct=%.1f",
        hl,
        p->tmo_stage[0],
        p->tmo_stage[1],
        p->tmo_stage[2],
        p->t_last_ok,
        p->t_last,
        p50,
        p99,
        mx,
        p->attempts,
        p->retried,
        p->handshakes,
        p->stale,
        p->idle_cut,
        rn,
        rp->fail,
        r50,
        r99,
        rmx,
        c99,
        longest,
        rcyc,
        b,
        bn,
        per_call,
        per_hs,
        p->hwm,
        p->rss,
        g,
        wall > 0 ? 100 * g / wall : 0,
        p->fds,
        p->fds_peak,
        steal_pct (p));
    if (p == &ph_end)
        printf (
            " cleanup_ms=%.1f cleanup_status=%d released=%d release_s=%.3f "
            "release_event_s=%.3f release_after_last_s=%.3f waiting_left=%ld",
            p->cleanup_ms,
            p->cleanup_status,
            p->released,
            p->release_s,
            p->release_event_s,
            p->release_after_last_s,
            p->waiting_left);
    if (p == &ph_base)
        printf (" rm_cycle_cpu_ms=%.3f", rm_cycle_cpu * 1000);
    if (p == &ph_launch)
        printf (" job_created_s=%.3f job_updated_s=%.3f hwcoll=%s",
                p->job_created_s,
                p->job_updated_s,
                p->hwcoll[0] ? p->hwcoll : "-");
    printf ("\n");
}

/* ---- set-up ------------------------------------------------------------- */

static void usage (int st)
{
    fputs (
        "Usage: fmb-storm --url https://127.0.0.1:PORT --ca FILE --node-key FILE "
        "--socket "
        "PATH\n"
        "                 [--nodes N] [--name-prefix nid] [--name-width 5] [--job ID] "
        "[--uid U]\n"
        "                 [--mode cold|warm] [--nodes-form array|hostlist] "
        "[--timeout-ms "
        "5000]\n"
        "                 [--retries 0] [--backoff-ms 250] [--concurrency 0 (all)]\n"
        "                 [--rm-interval-ms 20] [--broker-pid PID] [--deadline-s 120]\n"
        "                 [--baseline-ms 2000] [--gap-ms 1000] [--release-wait-ms "
        "10000]\n"
        "                 [--spread-ms 0] [--nice 0] [--launch run|view]\n"
        "N emulated compute nodes, each with its own 127.x.y.z address and node "
        "token,\n"
        "RUN a job over TLS and report its end, while an RM RUNs small jobs on the\n"
        "socket (on a thread of its own); see the head of bench/storm.c.\n"
        "--nice N lowers the nodes' thread's priority by N, and only its: the RM and\n"
        "the socket's other timed calls keep this process's.\n"
        "--launch view: the RM RUNs the job once on the socket first, and each node\n"
        "GETs its own view of it, /v1/jobs/J/nodes/NODE (Flux: the jobtap plugin's\n"
        "RUN, then each rank's node service).\n",
        st ? stderr : stdout);
    exit (st);
}

static long num_arg (const char *name, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long n = strtol (v, &end, 10);
    if (errno || *end || end == v || n < lo || n > hi) {
        fprintf (
            stderr, "fmb-storm: %s: expected a number from %ld to %ld\n", name, lo, hi);
        exit (2);
    }
    return n;
}

/* The options that take a plain int within a range. */
static const struct {
    int key;
    const char *name;
    int *value;
    long lo, hi;
} int_opts[] = {
    {'t', "--timeout-ms", &opt.timeout_ms, 1, 600000},
    {'r', "--retries", &opt.retries, 0, 20},
    {'b', "--backoff-ms", &opt.backoff_ms, 1, 60000},
    {'i', "--rm-interval-ms", &opt.rm_interval_ms, 0, 600000},
    {'d', "--deadline-s", &opt.deadline_s, 1, 86400},
    {'B', "--baseline-ms", &opt.baseline_ms, 0, 600000},
    {'G', "--gap-ms", &opt.gap_ms, 0, 600000},
    {'R', "--release-wait-ms", &opt.release_wait_ms, 0, 600000},
    {'S', "--spread-ms", &opt.spread_ms, 0, 600000},
    {'N', "--nice", &opt.nice, 0, 19},
};

static void int_option (int key, const char *arg)
{
    for (size_t i = 0; i < sizeof (int_opts) / sizeof (int_opts[0]); i++)
        if (int_opts[i].key == key) {
            *int_opts[i].value =
                (int)num_arg (int_opts[i].name, arg, int_opts[i].lo, int_opts[i].hi);
            return;
        }
    usage (2);
}

static void parse_args (int argc, char **argv)
{
    static const struct option lo[] = {
        {"url", required_argument, NULL, 'u'},
        {"ca", required_argument, NULL, 'c'},
        {"node-key", required_argument, NULL, 'k'},
        {"socket", required_argument, NULL, 's'},
        {"nodes", required_argument, NULL, 'n'},
        {"name-prefix", required_argument, NULL, 'P'},
        {"name-width", required_argument, NULL, 'W'},
        {"job", required_argument, NULL, 'j'},
        {"uid", required_argument, NULL, 'U'},
        {"mode", required_argument, NULL, 'm'},
        {"nodes-form", required_argument, NULL, 'f'},
        {"timeout-ms", required_argument, NULL, 't'},
        {"retries", required_argument, NULL, 'r'},
        {"backoff-ms", required_argument, NULL, 'b'},
        {"concurrency", required_argument, NULL, 'C'},
        {"rm-interval-ms", required_argument, NULL, 'i'},
        {"broker-pid", required_argument, NULL, 'p'},
        {"deadline-s", required_argument, NULL, 'd'},
        {"baseline-ms", required_argument, NULL, 'B'},
        {"gap-ms", required_argument, NULL, 'G'},
        {"release-wait-ms", required_argument, NULL, 'R'},
        {"spread-ms", required_argument, NULL, 'S'},
        {"nice", required_argument, NULL, 'N'},
        {"launch", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    bool width_given = false;
    opt.nodes = 1000;
    while ((c = getopt_long (argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'u':
            snprintf (opt.url, sizeof (opt.url), "%s", optarg);
            break;
        case 'c':
            opt.ca = optarg;
            break;
        case 'k':
            opt.node_key = optarg;
            break;
        case 's':
            opt.sock = optarg;
            break;
        case 'n':
            opt.nodes = (unsigned)num_arg ("--nodes", optarg, 1, NODES_MAX);
            break;
        case 'P':
            opt.prefix = optarg;
            break;
        case 'W':
            opt.width = (unsigned)num_arg ("--name-width", optarg, 1, 12);
            width_given = true;
            break;
        case 'j':
            opt.job = optarg;
            break;
        case 'U':
            opt.uid = (unsigned long)num_arg ("--uid", optarg, 0, 2147483647L);
            break;
        case 'm':
            if (!strcmp (optarg, "cold"))
                opt.mode = MODE_COLD;
            else if (!strcmp (optarg, "warm"))
                opt.mode = MODE_WARM;
            else
                usage (2);
            break;
        case 'L':
            if (!strcmp (optarg, "run"))
                opt.launch = LAUNCH_RUN;
            else if (!strcmp (optarg, "view"))
                opt.launch = LAUNCH_VIEW;
            else
                usage (2);
            break;
        case 'f':
            if (!strcmp (optarg, "array"))
                opt.form = FORM_ARRAY;
            else if (!strcmp (optarg, "hostlist"))
                opt.form = FORM_HOSTLIST;
            else
                usage (2);
            break;
        case 'C':
            opt.concurrency = (unsigned)num_arg ("--concurrency", optarg, 0, NODES_MAX);
            break;
        case 'p':
            opt.broker_pid = (pid_t)num_arg ("--broker-pid", optarg, 1, 1L << 30);
            break;
        case 'h':
            usage (0);
            break;
        default:
            int_option (c, optarg);
        }
    }
    if (optind < argc || !opt.url[0] || !opt.ca || !opt.node_key || !opt.sock)
        usage (2);
    /* the width grows to fit the last name */
    unsigned digits = 1;
    for (unsigned v = opt.nodes; v >= 10; v /= 10)
        digits++;
    if (digits > opt.width) {
        if (width_given)
            fprintf (stderr,
                     "fmb-storm: --name-width %u is too small for %u nodes: %u\n",
                     opt.width,
                     opt.nodes,
                     digits);
        opt.width = digits;
    }
    if (strlen (opt.job) > 100 ||
        strspn (opt.job,
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvw"
                "xyz0123456789._-") != strlen (opt.job))
        die ("--job: [A-Za-z0-9._-], at most 100 characters");
    /* https://HOST:PORT */
    const char *h = !strncmp (opt.url, "https://", 8) ? opt.url + 8 : NULL;
    const char *colon = h ? strrchr (h, ':') : NULL;
    if (!h || !colon || colon == h || (size_t)(colon - h) >= sizeof (opt.host))
        die ("--url: expected https://HOST:PORT");
    memcpy (opt.host, h, (size_t)(colon - h));
    opt.host[colon - h] = '\0';
    char port[16];
    snprintf (port, sizeof (port), "%.*s", (int)strcspn (colon + 1, "/"), colon + 1);
    opt.port = (int)num_arg ("--url's port", port, 1, 65535);
    snprintf (opt.hostport, sizeof (opt.hostport), "%s:%d", opt.host, opt.port);
    dst.sin_family = AF_INET;
    dst.sin_port = htons ((uint16_t)opt.port);
    if (inet_pton (AF_INET, opt.host, &dst.sin_addr) != 1)
        die ("--url: the host must be an IPv4 address (the nodes bind 127.x.y.z)");
}

static void build_bodies (void)
{
    char name[96];
    size_t cap = (size_t)opt.nodes * (strlen (opt.prefix) + opt.width + 4) + 256, n = 0;
    char *b = xcalloc (1, cap);
    n += (size_t)snprintf (b + n, cap - n, "{\"uid\":%lu,\"nodes\":", opt.uid);
    if (opt.form == FORM_ARRAY) {
        b[n++] = '[';
        for (unsigned i = 0; i < opt.nodes; i++) {
            node_name (i, name, sizeof (name));
            n += (size_t)snprintf (b + n, cap - n, "%s\"%s\"", i ? "," : "", name);
        }
        b[n++] = ']';
    } else if (opt.nodes == 1) {
        node_name (0, name, sizeof (name));
        n += (size_t)snprintf (b + n, cap - n, "\"%s\"", name);
    } else
        n += (size_t)snprintf (b + n,
                               cap - n,
                               "\"%s[%0*u-%0*u]\"",
                               opt.prefix,
                               (int)opt.width,
                               1u,
                               (int)opt.width,
                               opt.nodes);
    n += (size_t)snprintf (b + n, cap - n, ",\"hwcoll\":\"auto\"}");
    run_body = b;
    run_body_len = n;
    report_body_len = strlen (report_body);
    snprintf (rm_body,
              sizeof (rm_body),
              "{\"uid\":%lu,\"nodes\":[\"rmnode\"],\"hwcoll\":\"off\",\"vni_count\":1}",
              opt.uid);
}

static void setup_tls (void)
{
    tls = SSL_CTX_new (TLS_client_method ());
    if (!tls)
        die ("SSL_CTX_new failed");
    SSL_CTX_set_min_proto_version (tls, TLS1_2_VERSION);
    SSL_CTX_set_verify (tls, SSL_VERIFY_PEER, NULL);
    /* each node its own process in reality: no session is resumed */
    SSL_CTX_set_session_cache_mode (tls, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode (tls,
                      SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_load_verify_locations (tls, opt.ca, NULL) != 1)
        die ("--ca %s: %s", opt.ca, ERR_error_string (ERR_get_error (), NULL));
}

int main (int argc, char **argv)
{
    setvbuf (stdout, NULL, _IOLBF, 0);
    signal (SIGPIPE, SIG_IGN);
    clk_tck = sysconf (_SC_CLK_TCK);
    parse_args (argc, argv);
    double t_start = now_s ();
    g_deadline = t_start + opt.deadline_s;
    srand48 ((long)getpid () ^ (long)wall_ms ());
    struct rlimit rl;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit (RLIMIT_NOFILE, &rl);
    }
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < opt.nodes + 64)
        fprintf (stderr,
                 "fmb-storm: warning: the file limit (%lu) is below the nodes' %u "
                 "connections: raise ulimit -n\n",
                 (unsigned long)rl.rlim_cur,
                 opt.nodes);
    load_node_key (opt.node_key);
    build_bodies ();
    setup_tls ();
    ep = epoll_create1 (EPOLL_CLOEXEC);
    if (ep < 0)
        die ("epoll_create1: %s", strerror (errno));
    peers = xcalloc (opt.nodes, sizeof (*peers));
    for (unsigned i = 0; i < opt.nodes; i++)
        peers[i].fd = -1;
    wq_cap = opt.nodes + 1;
    waitq = xcalloc (wq_cap, sizeof (*waitq));
    startq = xcalloc (opt.nodes, sizeof (*startq));
    for (unsigned i = 0; i < opt.nodes; i++)
        startq[i] = i;

    char first[96], last[96];
    node_name (0, first, sizeof (first));
    node_name (opt.nodes - 1, last, sizeof (last));
    printf (
        "fmb-storm: %u nodes (%s..%s, 127.1.0.1..), job %s, uid %lu, %s mode, nodes "
        "as %s (RUN body %zu bytes), timeout %d ms, retries %d, concurrency %s, RM "
        "every %d ms, deadline %d s\n",
        opt.nodes,
        first,
        last,
        opt.job,
        opt.uid,
        opt.mode == MODE_WARM ? "warm" : "cold",
        opt.form == FORM_ARRAY ? "a JSON array" : "a hostlist string",
        run_body_len,
        opt.timeout_ms,
        opt.retries,
        opt.concurrency ? "capped" : "all",
        opt.rm_interval_ms,
        opt.deadline_s);
    if (!opt.broker_pid)
        printf ("fmb-storm: no --broker-pid: no broker CPU or memory figures\n");

    /* the RM's and the control client's threads, at this process's
     * priority (a thread takes its creator's); then the nodes' thread's
     * lowered, and only its */
    cond_init (&rmc.cv);
    cond_init (&cw.cv);
    thread_start (&rm_thread, rm_main);
    thread_start (&fds_thread, fds_main);
    thread_start (&ctl_thread, ctl_main);
    if (opt.nice) {
        errno = 0;
        int base = getpriority (PRIO_PROCESS, 0);
        if (setpriority (PRIO_PROCESS, (id_t)syscall (SYS_gettid), base + opt.nice) < 0)
            fprintf (stderr,
                     "fmb-storm: warning: --nice %d: setpriority: %s\n",
                     opt.nice,
                     strerror (errno));
        else
            printf (
                "fmb-storm: the nodes' thread at nice %d, the RM's and the control "
                "client's threads at nice %d\n",
                base + opt.nice,
                base);
    }

    /* the socket answers, and one node's TLS call does */
    if (!ctl_sync ("GET", "/v1/health", NULL) && ctl.status != 503)
        die ("the broker's socket %s does not answer GET /v1/health (%s)",
             opt.sock,
             ctl.status ? "an HTTP error" : fail_sample[ctl.f]);
    node_call (&peers[0], CALL_PROBE);
    for (unsigned long turn = 0; peers[0].busy && turn < 1000000UL && !deadline_hit;
         turn++)
        loop_once (50);
    conn_close (&peers[0]);
    if (!cur) { /* the probe counted nowhere; its outcome from the samples */
        bool bad = false;
        for (int f = 0; f < F_COUNT; f++)
            if (fail_sample[f][0]) {
                fprintf (stderr,
                         "fmb-storm: a node's TLS call to %s failed: %s\n",
                         opt.url,
                         fail_sample[f]);
                bad = true;
            }
        for (int s = 400; s < 600; s++)
            if (http_samples[s] && s != 503) {
                fprintf (stderr,
                         "fmb-storm: a node's GET /v1/health over TLS: HTTP %d %s\n",
                         s,
                         http_samples[s]);
                bad = true;
            }
        if (bad)
            exit (1);
        pthread_mutex_lock (&fail_mu);
        memset (fail_sample, 0, sizeof (fail_sample));
        pthread_mutex_unlock (&fail_mu);
        for (int s = 0; s < 600; s++) {
            free (http_samples[s]);
            http_samples[s] = NULL;
        }
    }

    /* baseline: the RM alone */
    phase_begin (&ph_base);
    rm_set (1);
    idle_for (opt.baseline_ms);
    phase_finish (&ph_base);
    unsigned base_cycles = atomic_load (&rmph[PH_BASE].cycles);
    if (base_cycles && bcpu (&ph_base) >= 0)
        rm_cycle_cpu = bcpu (&ph_base) / base_cycles;
    phase_none ();

    if (opt.mode == MODE_WARM) {
        phase_nodes (&ph_warm, CALL_HANDSHAKE);
        phase_none ();
    }
    if (opt.launch == LAUNCH_VIEW && !ctl_sync ("PUT", rm_run_path (), run_body))
        die ("the RM's RUN of the storm's job failed");
    phase_nodes (&ph_launch, opt.launch == LAUNCH_VIEW ? CALL_VIEW : CALL_RUN);
    phase_none ();
    /* when the broker made the job and recorded its reservation's outcome
     * (the nodes' RUNs wait for it): one node's view, constant in size */
    if (!deadline_hit) {
        char path[256], name[96], hw[32] = "";
        node_name (0, name, sizeof (name));
        snprintf (path, sizeof (path), "/v1/jobs/%s/nodes/%s", opt.job, name);
        if (ctl_sync ("GET", path, NULL) && ctl.out) {
            long long c = json_num (ctl.out, "created_ms", 0),
                      u = json_num (ctl.out, "updated_ms", 0);
            const char *h = json_at (ctl.out, "hwcoll");
            if (h && json_str (h, "state", hw, sizeof (hw)) && c && u) {
                snprintf (ph_launch.hwcoll, sizeof (ph_launch.hwcoll), "%s", hw);
                ph_launch.job_created_s = (c - ph_launch.wall0) / 1000;
                ph_launch.job_updated_s = (u - ph_launch.wall0) / 1000;
            }
        }
    }
    if (ph_launch.ok == 0) {
        ph_end.on = true;
        ph_end.skipped = true;
        snprintf (ph_end.skip_why,
                  sizeof (ph_end.skip_why),
                  "no node's RUN succeeded, so there is no job to end");
    } else if (deadline_hit) {
        ph_end.on = true;
        ph_end.skipped = true;
        snprintf (ph_end.skip_why,
                  sizeof (ph_end.skip_why),
                  "the --deadline-s was reached during the launch");
    } else {
        /* the job runs: a cold node's connection is gone by its end (the
         * broker's idle cut); a warm one keeps it */
        if (opt.mode == MODE_COLD)
            close_node_conns ();
        idle_for (opt.gap_ms);
        phase_end ();
        phase_none ();
    }
    /* the RM's last cycle ends (its job cleaned up), or the deadline (a RUN
     * still unanswered then counts with what it waited so far) */
    rm_set (2);
    pthread_join (rm_thread, NULL);
    atomic_store (&fds_stop, true);
    pthread_join (fds_thread, NULL);
    ctl_post (TASK_QUIT);
    pthread_join (ctl_thread, NULL);

    printf ("\nfmb-storm: %u nodes, %s, nodes as %s%s\n",
            opt.nodes,
            opt.mode == MODE_WARM ? "warm" : "cold",
            opt.form == FORM_ARRAY ? "a JSON array" : "a hostlist string",
            deadline_hit ? " -- the --deadline-s was reached: calls still open were "
                           "counted as failed (deadline)"
                         : "");
    report (&ph_base, 0);
    if (opt.mode == MODE_WARM)
        report (&ph_warm, ph_warm.handshakes);
    report (&ph_launch, 0);
    report (&ph_end, 0);
    for (int f = 0; f < F_COUNT; f++)
        if (fail_sample[f][0])
            printf ("first %s failure: %s\n", fail_name[f], fail_sample[f]);
    for (int s = 100; s < 600; s++)
        if (http_samples[s])
            printf ("first HTTP %d answer: %.300s\n", s, http_samples[s]);
    if (opt.form == FORM_HOSTLIST && ph_launch.http[400])
        printf (
            "NOTE: the broker refused the RUN with the node list as a hostlist string "
            "(HTTP 400 x%u): this broker takes \"nodes\" only as a JSON array; the "
            "hostlist form needs the broker change that accepts it\n",
            ph_launch.http[400]);
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    printf (
        "STORM phase=total nodes=%u mode=%s wall_s=%.3f gen_cpu_s=%.3f "
        "gen_maxrss_kib=%ld "
        "deadline_hit=%d idle_cut_total=%u\n",
        opt.nodes,
        opt.mode == MODE_WARM ? "warm" : "cold",
        now_s () - t_start,
        self_cpu_s (),
        ru.ru_maxrss,
        deadline_hit,
        idle_cut_total);
    return 0;
}
