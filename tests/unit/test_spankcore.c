/* test_spankcore.c: the SPANK plugin's Slurm-free part: its plugstack
 * arguments, the users' options, what a step gets from the node's job
 * record (and the clear error when it gets nothing). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monotime.h"
#include "nodeservice.h"
#include "spankcore.h"
#include "testutil.h"

static void conf_defaults_and_arguments (void **state)
{
    (void)state;
    struct spank_conf c;
    struct fmb_error e;
    assert_int_equal (spank_conf_parse (&c, 0, NULL, &e), 0);
    assert_int_equal (c.policy, SPANK_FAIL_CLOSED); /* the safe default */
    assert_int_equal (c.allowed_tcs, SPANK_DEFAULT_TCS);
    assert_string_equal (c.state_dir, JOBRECORD_DIR_DEFAULT);
    assert_int_equal (c.step_timeout_s, 2);
    char *args[] = {"policy=fail_open",
                    "tcs=BEST_EFFORT",
                    "step_timeout=5",
                    "state_dir=/run/x-%n",
                    "config=/x.conf"};
    assert_int_equal (spank_conf_parse (&c, 5, args, &e), 0);
    assert_int_equal (c.policy, SPANK_FAIL_OPEN);
    assert_int_equal (c.allowed_tcs, 0x8);
    assert_int_equal (c.step_timeout_s, 5);
    assert_string_equal (c.state_dir, "/run/x-%n");
    assert_string_equal (c.config, "/x.conf");
}

static void conf_bad_arguments_are_named (void **state)
{
    (void)state;
    struct spank_conf c;
    struct fmb_error e;
    struct {
        char *arg;
        const char *says;
    } bad[] = {
        {"policy=maybe", "policy=maybe: fail_closed or fail_open"},
        {"tcs=FAST", "tcs=FAST: unknown traffic class 'FAST'"},
        {"step_timeout=0", "step_timeout=0: seconds, 1..30"},
        {"step_timeout=31", "step_timeout=31: seconds, 1..30"},
        {"step_timeout=2s", "step_timeout=2s: seconds"},
        {"run=node",
         "run=: no longer taken, delete it; the nodes make the job's RUN when "
         "their fmbroker.conf has [api] node_run = true"},
        /* the plugin's node hooks of before: what to do instead */
        {"prolog=/usr/share/fmbroker/slurm/prolog.sh",
         "prolog=: no longer taken; the node service fmbroker-cxi.service makes "
         "each job's setup, and slurm.conf's Epilog=/usr/sbin/fmbroker-slurm-prolog "
         "its end"},
        {"epilog=none", "epilog=: no longer taken"},
        {"hook_timeout=120", "hook_timeout=: no longer taken"},
        {"config=", "config=: a path"},
        {"colour=blue", "'colour=blue': unknown"},
        {"fail_open", "'fail_open': expected KEY=VALUE"},
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_int_equal (spank_conf_parse (&c, 1, &bad[i].arg, &e), -1);
        assert_int_equal (errno, EINVAL);
        if (!strstr (e.text, bad[i].says))
            fail_msg ("%s: got '%s'", bad[i].arg, e.text);
    }
}

static void options_hwcoll_and_vnis (void **state)
{
    (void)state;
    char hw[SPANK_HWCOLL_MAX];
    unsigned n = 99;
    struct fmb_error e;
    assert_int_equal (spank_parse_hwcoll ("off", hw, &e), 0);
    assert_string_equal (hw, "off");
    assert_int_equal (spank_parse_hwcoll ("on", hw, &e), 0);
    assert_int_equal (spank_parse_hwcoll ("auto", hw, &e), 0);
    const char *bad_hw[] = {"ON", "yes", "", "autox", NULL};
    for (int i = 0; i < 5; i++) {
        assert_int_equal (spank_parse_hwcoll (bad_hw[i], hw, &e), -1);
        assert_non_null (strstr (e.text, "on, off or auto"));
    }
    for (unsigned v = 0; v <= 4; v++) {
        char s[4];
        snprintf (s, sizeof (s), "%u", v);
        assert_int_equal (spank_parse_vni_count (s, &n, &e), 0);
        assert_int_equal (n, v);
    }
    const char *bad_n[] = {"5", "-1", "", "2x", " 2", "99999999999", NULL};
    for (int i = 0; i < 7; i++) {
        assert_int_equal (spank_parse_vni_count (bad_n[i], &n, &e), -1);
        assert_non_null (strstr (e.text, "the job's VNI count, 0..4"));
    }
}

static void options_tcs_within_the_allowed_set (void **state)
{
    (void)state;
    unsigned m = 0;
    struct fmb_error e;
    assert_int_equal (spank_parse_tcs ("BULK_DATA", SPANK_DEFAULT_TCS, &m, &e), 0);
    assert_int_equal (m, 0x4);
    assert_int_equal (spank_parse_tcs ("low_latency,TC_BEST_EFFORT", 0xe, &m, &e), 0);
    assert_int_equal (m, 0xa);
    assert_int_equal (spank_parse_tcs ("DEDICATED_ACCESS", 0xe, &m, &e), -1);
    assert_string_equal (e.text,
                         "--fmb-tcs=DEDICATED_ACCESS: this cluster allows only "
                         "LOW_LATENCY,BULK_DATA,BEST_EFFORT");
    assert_int_equal (spank_parse_tcs ("FAST", 0xe, &m, &e), -1);
    assert_non_null (strstr (e.text, "unknown traffic class 'FAST'"));
    assert_int_equal (spank_parse_tcs ("", 0xe, &m, &e), -1);
    assert_int_equal (spank_parse_tcs ("0x4", 0xe, &m, &e), 0);
    assert_int_equal (m, 0x4);
}

/* ---- the step's record ---------------------------------------------- */

static int setup_dir (void **state)
{
    char *dir = tu_mkdtemp ();
    chmod (dir, 0755);
    *state = dir;
    return 0;
}

static int teardown_dir (void **state)
{
    tu_rmtree (*state);
    return 0;
}

static void write_record (const char *dir, unsigned nservices, const char *reason)
{
    struct jobrecord r;
    struct fmb_error e;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "42");
    r.uid = (uint32_t)geteuid ();
    r.nservices = nservices;
    r.env = nservices ? json_pack ("{s:s, s:s, s:s}",
                                   "SLINGSHOT_VNIS",
                                   "1024",
                                   "SLINGSHOT_DEVICES",
                                   "cxi0",
                                   "SLINGSHOT_SVC_IDS",
                                   "5")
                      : json_object ();
    if (reason)
        snprintf (r.reason, sizeof (r.reason), "%s", reason);
    assert_int_equal (jobrecord_write (dir, &r, &e), 0);
    jobrecord_clear (&r);
}

static void record_with_services_gives_the_env (void **state)
{
    struct jobrecord r;
    struct fmb_error e;
    write_record (*state, 1, NULL);
    assert_int_equal (spank_step_record (*state, "42", false, &r, &e), 1);
    assert_string_equal (
        json_string_value (json_object_get (r.env, "SLINGSHOT_SVC_IDS")), "5");
    jobrecord_clear (&r);
}

static void missing_record_is_a_clear_failure (void **state)
{
    struct jobrecord r;
    struct fmb_error e;
    errno = 0;
    assert_int_equal (spank_step_record (*state, "42", false, &r, &e), -1);
    assert_int_equal (errno, ENOENT);
    char *path = tu_path (*state, "42.env");
    if (!strstr (e.text, path) || !strstr (e.text, "the node prolog did not set up"))
        fail_msg ("got '%s'", e.text);
    free (path);
    jobrecord_clear (&r);
    /* a job that asked for no VNI needs none */
    assert_int_equal (spank_step_record (*state, "42", true, &r, &e), 0);
    jobrecord_clear (&r);
}

static void record_without_service_gives_the_prologs_reason (void **state)
{
    struct jobrecord r;
    struct fmb_error e;
    write_record (*state, 0, "broker at https://b:8443: Couldn't connect to server");
    assert_int_equal (spank_step_record (*state, "42", false, &r, &e), -1);
    assert_string_equal (e.text,
                         "no CXI service for job 42 on this node: broker at "
                         "https://b:8443: Couldn't connect to server");
    jobrecord_clear (&r);
    assert_int_equal (spank_step_record (*state, "42", true, &r, &e), 0);
    jobrecord_clear (&r);
}

static void bad_record_is_a_failure_naming_the_file (void **state)
{
    struct jobrecord r;
    struct fmb_error e;
    char *path = tu_path (*state, "42.env");
    tu_write (path,
              "{\"version\":1,\"job\":\"42\",\"uid\":0,\"services\":1,\"env\":{\"bad "
              "name\":\"x\"}}",
              0400);
    assert_int_equal (spank_step_record (*state, "42", false, &r, &e), -1);
    if (!strstr (e.text, path))
        fail_msg ("got '%s'", e.text);
    jobrecord_clear (&r);
    /* even a job without VNIs does not run on a record that lies */
    unlink (path);
    tu_write (path, "not json", 0400);
    assert_int_equal (spank_step_record (*state, "42", true, &r, &e), -1);
    assert_non_null (strstr (e.text, path));
    jobrecord_clear (&r);
    free (path);
}

/* The fail-closed verdict comes from root's record, whatever the job's
 * user wrote into its own. */
static void root_verdict_follows_roots_record (void **state)
{
    const char *dir = *state;
    char *path = tu_path (*state, "42.json");
    struct fmb_error e;
    if (geteuid () != 0)
        skip (); /* root's record must be owned by root */
    assert_int_equal (spank_root_verdict (dir, "42", &e), -1);
    assert_non_null (strstr (e.text, "the node prolog did not set up"));
    tu_write (path, "{\"vnis\":[1024],\"services\":[]}", 0600);
    assert_int_equal (spank_root_verdict (dir, "42", &e), -1);
    assert_non_null (strstr (e.text, "VNIs but no CXI service"));
    tu_write (path,
              "{\"vnis\":[1024],\"services\":[{\"device\":\"cxi0\",\"svc_id\":5}]}",
              0600);
    assert_int_equal (spank_root_verdict (dir, "42", &e), 0);
    tu_write (path, "{\"vnis\":[],\"services\":[]}", 0600);
    assert_int_equal (spank_root_verdict (dir, "42", &e), 0);
    tu_write (path,
              "{\"vnis\":[1024],\"services\":[{\"device\":\"cxi0\",\"svc_id\":5}]}",
              0666);
    assert_int_equal (spank_root_verdict (dir, "42", &e), -1);
    assert_non_null (strstr (e.text, "only root may change"));
    chmod (path, 0600);
    assert_int_equal (chown (path, 65534, 65534), 0);
    assert_int_equal (spank_root_verdict (dir, "42", &e), -1);
    tu_write (path, "not json", 0600);
    assert_int_equal (chown (path, 0, 0), 0);
    assert_int_equal (spank_root_verdict (dir, "42", &e), -1);
    assert_non_null (strstr (e.text, "not a job record"));
    free (path);
}

/* A listening socket at DIR/service.sock that accepts nothing itself,
 * with 'backlog' callers in line. */
static int listen_in (const char *dir, int backlog)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf (
        sa.sun_path, sizeof (sa.sun_path), "%s/%s", dir, JOBRECORD_SERVICE_SOCKET);
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    assert_int_equal (bind (fd, (struct sockaddr *)&sa, sizeof (sa)), 0);
    assert_int_equal (listen (fd, backlog), 0);
    return fd;
}

/* The step's and the epilog's wait for the node service: no service is
 * no wait; one that does not answer is an error naming it, after the
 * time given and not before; one that answers ends the wait. */
/* A service that closed first (it died) is an error for the caller, not
 * a SIGPIPE that kills it: the epilog program would be killed before it
 * could run fmbroker-cxi in the service's place. */
static void send_to_a_service_gone_is_an_error (void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close (sv[1]);
    assert_int_equal (node_service_send (sv[0], "SLURM_JOB_ID=1\n\n", 16), -1);
    assert_int_equal (errno, EPIPE);
    close (sv[0]);
}

static void service_wait_outcomes (void **state)
{
    const char *dir = *state;
    struct fmb_error e;
    assert_int_equal (node_service_wait (dir, "42", 200, &e), 0);
    int lfd = listen_in (dir, 4);
    int64_t t0 = fmb_monotime_ms ();
    assert_int_equal (node_service_wait (dir, "42", 300, &e), -1);
    assert_true (fmb_monotime_ms () - t0 >= 300);
    assert_non_null (strstr (e.text, "service.sock did not answer"));
    close (accept (lfd, NULL, NULL)); /* the caller that gave up */
    /* one caller in line, then answered: the request names the job */
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        char buf[256] = "";
        int fd = accept (lfd, NULL, NULL);
        ssize_t n = read (fd, buf, sizeof (buf) - 1);
        bool ok = n > 0 && strcmp (buf, "fmbroker-node/1 wait\njob=42\n\n") == 0;
        if (ok)
            (void)!write (fd, "0\t\n", 3);
        _exit (ok ? 0 : 1);
    }
    assert_int_equal (node_service_wait (dir, "42", 5000, &e), 1);
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_int_equal (status, 0);
    /* a service that dies before answering */
    pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0)
        _exit (close (accept (lfd, NULL, NULL)));
    assert_int_equal (node_service_wait (dir, "42", 5000, &e), -1);
    assert_non_null (strstr (e.text, "closed the connection without an answer"));
    waitpid (pid, NULL, 0);
    close (lfd);
}

/* A step's setup request: the typed request (nodeproto.h) sent at once
 * and answered later (the plugin reads the answer in another callback);
 * a value with a newline is refused, not sent; no service is 0; a line
 * of callers that is full is an error that says so (the call does not
 * hang). */
static void service_setup_request (void **state)
{
    const char *dir = *state;
    struct fmb_error e;
    struct node_service_call c;
    char line[64];
    struct node_request req = {
        .op = NODE_OP_SETUP, .job = "42", .have_uid = true, .uid = 65534};
    assert_int_equal (node_service_call_start (&c, dir, &req, &e), 0);
    /* backlog 0: one caller waits in line, the next finds it full */
    int lfd = listen_in (dir, 0);
    assert_int_equal (node_service_call_start (&c, dir, &req, &e), 1);
    struct node_service_call full;
    assert_int_equal (node_service_call_start (&full, dir, &req, &e), -1);
    assert_non_null (strstr (e.text, "its line of callers is full"));
    int fd = accept (lfd, NULL, NULL);
    char buf[256] = "";
    assert_true (read (fd, buf, sizeof (buf) - 1) > 0);
    assert_string_equal (buf, "fmbroker-node/1 setup\njob=42\nuid=65534\n\n");
    assert_int_equal (write (fd, "0\t\n", 3), 3);
    assert_int_equal (node_service_call_finish (&c, 1000, line, sizeof (line), &e), 0);
    assert_string_equal (line, "0\t");
    assert_int_equal (c.fd, -1);
    close (fd);
    struct node_request bad = {
        .op = NODE_OP_SETUP, .job = "42", .nodes = "n1\nFMB_WAIT=1"};
    assert_int_equal (node_service_call_start (&c, dir, &bad, &e), -1);
    assert_non_null (strstr (e.text, "nodes holds a newline"));
    close (lfd);
}

/* The request's wire form decodes to the same request; what is wrong is
 * named, and a newer client's unknown keys pass. */
static void request_round_trip (void **state)
{
    (void)state;
    struct fmb_error e;
    struct node_request in = {.op = NODE_OP_SETUP,
                              .job = "7",
                              .node = "n1",
                              .early = true,
                              .have_uid = true,
                              .uid = 1000,
                              .user = "alice",
                              .nodes = "n[1-2]",
                              .ncores = 8,
                              .hwcoll = "on",
                              .vni_count = "2",
                              .tcs = "0x3"};
    struct node_request out;
    char buf[1024];
    int n = node_request_encode (&in, buf, sizeof (buf), &e);
    assert_true (n > 0);
    assert_string_equal (buf + n - 2, "\n\n");
    buf[n - 1] = '\0';
    assert_int_equal (node_request_decode (buf, &out, &e), 0);
    assert_memory_equal (&in, &out, sizeof (in));
    char unknown[] = "fmbroker-node/1 end\njob=7\nfuture=1";
    assert_int_equal (node_request_decode (unknown, &out, &e), 0);
    assert_int_equal (out.op, NODE_OP_END);
    char other[] = "SLURM_JOB_ID=7\nFMB_WAIT=1";
    assert_int_equal (node_request_decode (other, &out, &e), -1);
    assert_non_null (strstr (e.text, "not a node service request"));
    char op[] = "fmbroker-node/1 destroy-everything\njob=7";
    assert_int_equal (node_request_decode (op, &out, &e), -1);
    assert_non_null (strstr (e.text, "unknown node service operation"));
    char uid[] = "fmbroker-node/1 setup\njob=7\nuid=-1";
    assert_int_equal (node_request_decode (uid, &out, &e), -1);
    assert_non_null (strstr (e.text, "uid"));
    char noeq[] = "fmbroker-node/1 setup\njob";
    assert_int_equal (node_request_decode (noeq, &out, &e), -1);
    assert_int_equal (node_request_encode (&in, buf, 40, &e), -1);
    assert_non_null (strstr (e.text, "longer than 40 bytes"));
}

/* The credential's CPU list of this node, counted. */
static void cpu_lists_counted (void **state)
{
    (void)state;
    assert_int_equal (spank_cpu_count ("0"), 1);
    assert_int_equal (spank_cpu_count ("0-3,8,10-11"), 7);
    assert_int_equal (spank_cpu_count ("5-5"), 1);
    assert_int_equal (spank_cpu_count (""), -1);
    assert_int_equal (spank_cpu_count (NULL), -1);
    assert_int_equal (spank_cpu_count ("3-1"), -1);
    assert_int_equal (spank_cpu_count ("0,"), -1);
    assert_int_equal (spank_cpu_count ("0-"), -1);
    assert_int_equal (spank_cpu_count ("a"), -1);
    assert_int_equal (spank_cpu_count ("0 1"), -1);
    assert_int_equal (spank_cpu_count ("0-1048576"), -1);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (conf_defaults_and_arguments),
        cmocka_unit_test (conf_bad_arguments_are_named),
        cmocka_unit_test (options_hwcoll_and_vnis),
        cmocka_unit_test (options_tcs_within_the_allowed_set),
        cmocka_unit_test (cpu_lists_counted),
        cmocka_unit_test (request_round_trip),
        cmocka_unit_test_setup_teardown (
            record_with_services_gives_the_env, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown (
            missing_record_is_a_clear_failure, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown (
            record_without_service_gives_the_prologs_reason, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown (
            bad_record_is_a_failure_naming_the_file, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown (
            root_verdict_follows_roots_record, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown (
            service_wait_outcomes, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown (
            service_setup_request, setup_dir, teardown_dir),
        cmocka_unit_test (send_to_a_service_gone_is_an_error),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
