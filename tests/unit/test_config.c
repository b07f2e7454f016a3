/* test_config.c: fmbroker.conf loading: defaults, every kind of bad value
 * and its message, rules across keys, and that a rejected file changes
 * nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config.h"
#include "testutil.h"

static void defaults_are_the_documented_ones (void **state)
{
    (void)state;
    struct fmb_config c;
    fmb_config_defaults (&c);
    assert_string_equal (c.cluster_name, "cluster");
    assert_string_equal (c.state_dir, "/var/lib/fmbroker");
    assert_int_equal (c.log_level, LOG_INFO);
    assert_int_equal (c.reconcile_interval_s, 30);
    assert_string_equal (c.socket, "/run/fmbroker/fmbroker.sock");
    assert_string_equal (c.tcp, "");
    assert_string_equal (c.rm_users, "root,slurm,flux");
    assert_string_equal (c.admin_users, "root");
    assert_string_equal (c.admin_groups, "");
    assert_string_equal (c.fm_url, "");
    assert_int_equal (c.fm_auth, FMB_AUTH_OAUTH);
    assert_string_equal (fmb_config_auth_dir (&c), "/etc/wlm-client-auth");
    assert_false (c.fm_insecure);
    assert_int_equal (c.fm_timeout_ms, 10000);
    assert_int_equal (c.fm_reserve_timeout_ms, 2000);
    assert_int_equal (c.fm_max_connections, 16);
    assert_int_equal (c.hwcoll_mode, FMB_HWCOLL_AUTO);
    assert_int_equal (c.hwcoll_min_nodes, 64);
    assert_int_equal (c.hwcoll_addrs_per_job, 0);
    assert_int_equal (c.hwcoll_total_addrs, 4086);
    assert_int_equal (c.hwcoll_system_nodes, 0);
    assert_int_equal (c.hwcoll_jobs_per_node, 1);
    assert_int_equal (c.vni_min, 1024);
    assert_int_equal (c.vni_max, 65535);
    assert_int_equal (c.vni_per_job, 1);
    assert_int_equal (c.vni_max_per_job, 4);
    assert_int_equal (c.vni_quarantine_s, 300);
    assert_int_equal (c.cxi_tcs, FMB_TC_LOW_LATENCY | FMB_TC_BEST_EFFORT);
    assert_int_equal (c.cxi_allowed_tcs,
                      FMB_TC_LOW_LATENCY | FMB_TC_BULK_DATA | FMB_TC_BEST_EFFORT);
    assert_string_equal (c.cxi_libcxi, "libcxi.so.1");
    /* the seed's table: txqs 1024/2 ... les 16384/16, acs 1022/2 */
    assert_int_equal (c.cxi_limits[0].max, 1024);
    assert_int_equal (c.cxi_limits[0].def, 2);
    assert_int_equal (c.cxi_limits[6].max, 16384);
    assert_int_equal (c.cxi_limits[6].def, 16);
    assert_int_equal (c.cxi_limits[7].max, 1022);
    assert_string_equal (fmb_cxi_rsrc_names[7], "acs");
}

static void empty_file_gives_defaults (void **state)
{
    (void)state;
    struct fmb_config c, d;
    struct fmb_error e;
    fmb_config_defaults (&d);
    assert_int_equal (fmb_config_load_string (&c, "t.conf", "# nothing\n", &e), 0);
    assert_int_equal (c.vni_min, d.vni_min);
    assert_string_equal (c.state_dir, d.state_dir);
}

static void good_file_sets_every_kind_of_value (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    const char *text =
        "[broker]\n"
        "cluster_name = perlmutter\n"
        "log_level = debug\n"
        "[api]\n"
        "rm_users = root, slurm\n"
        "tcp = 127.0.0.1:8443\n"
        "tls_cert = /etc/fmbroker/tls.crt\n"
        "tls_key = /etc/fmbroker/tls.key\n"
        "tokens_file = /etc/fmbroker/tokens\n"
        "[fabric_manager]\n"
        "url = https://api-gw-service-nmn.local/apis/fm/\n"
        "auth = BASIC\n"
        "insecure = yes\n"
        "[hwcoll]\n"
        "addrs_per_job = 26\n"
        "mode = request\n"
        "[vni]\n"
        "pool = 2000-2999 ; inline comment\n"
        "reserved = 1999, 3000-3010\n"
        "[cxi]\n"
        "tcs = TC_bulk_data:best_effort\n"
        "limits = def_les=8, max_txqs=100, res_eqs=10\n";
    assert_int_equal (fmb_config_load_string (&c, "t.conf", text, &e), 0);
    assert_string_equal (c.cluster_name, "perlmutter");
    assert_int_equal (c.log_level, LOG_DEBUG);
    assert_string_equal (c.rm_users, "root,slurm");
    assert_true (fmb_config_list_has (c.rm_users, "slurm"));
    assert_false (fmb_config_list_has (c.rm_users, "slur"));
    assert_false (fmb_config_list_has (c.rm_users, "flux"));
    /* trailing slash dropped: FM paths are appended to the base */
    assert_string_equal (c.fm_url, "https://api-gw-service-nmn.local/apis/fm");
    assert_int_equal (c.fm_auth, FMB_AUTH_BASIC);
    assert_string_equal (fmb_config_auth_dir (&c), "/etc/fmsim");
    assert_true (c.fm_insecure);
    assert_int_equal (c.hwcoll_mode, FMB_HWCOLL_REQUEST);
    assert_int_equal (fmb_config_mcast_limit (&c), 26);
    assert_int_equal (c.vni_min, 2000);
    assert_int_equal (c.vni_max, 2999);
    assert_string_equal (c.vni_reserved, "1999, 3000-3010"); /* outside the pool */
    assert_int_equal (c.cxi_tcs, FMB_TC_BULK_DATA | FMB_TC_BEST_EFFORT);
    assert_int_equal (c.cxi_limits[6].def, 8);
    assert_int_equal (c.cxi_limits[0].max, 100);
    assert_int_equal (c.cxi_limits[2].res, 10);
    assert_string_equal (c.cxi_limits_text, "def_les=8, max_txqs=100, res_eqs=10");
}

static void hpe_formula_sizes_the_reservation (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    /* El Capitan: M=4086, S=11136, s=64, j=1 gives 23 addresses per job */
    const char *text =
        "[fabric_manager]\nurl = https://127.0.0.1:1\n"
        "[hwcoll]\nsystem_nodes = 11136\nmin_nodes = 64\n";
    assert_int_equal (fmb_config_load_string (&c, "t.conf", text, &e), 0);
    assert_int_equal (fmb_config_mcast_limit (&c), 23);
    c.hwcoll_jobs_per_node = 2;
    assert_int_equal (fmb_config_mcast_limit (&c), 11);
}

struct bad_case {
    const char *text;
    const char *message; /* the whole error text */
};

static const struct bad_case bad_cases[] = {
    {"[nope]\nx = 1\n", "t.conf:2: [nope]: unknown section"},
    {"[vni]\nsize = 1\n", "t.conf:2: [vni] size: unknown key"},
    {"[vni]\nper_job = 1\nper_job = 2\n",
     "t.conf:3: [vni] per_job: set twice (first at line 2)"},
    {"[vni]\nper_job = five\n",
     "t.conf:2: [vni] per_job = five: must be a whole number 0..4"},
    {"[vni]\nper_job = -1\n",
     "t.conf:2: [vni] per_job = -1: must be a whole number 0..4"},
    {"[vni]\nper_job = 2x\n",
     "t.conf:2: [vni] per_job = 2x: must be a whole number 0..4"},
    {"[vni]\nmax_per_job = 9\n",
     "t.conf:2: [vni] max_per_job = 9: must be a whole number 0..4"},
    {"[vni]\nper_job = 99999999999999999999\n",
     "t.conf:2: [vni] per_job = 99999999999999999999: must be a whole number 0..4"},
    {"[vni]\nper_job =\n", "t.conf:2: [vni] per_job = : must be a whole number 0..4"},
    {"[fabric_manager]\ninsecure = maybe\n",
     "t.conf:2: [fabric_manager] insecure = maybe: must be true or false"},
    {"[fabric_manager]\nauth = kerberos\n",
     "t.conf:2: [fabric_manager] auth = kerberos: must be one of oauth|basic|none"},
    {"[broker]\nlog_level = loud\n",
     "t.conf:2: [broker] log_level = loud: must be one of "
     "error|warning|notice|info|debug"},
    {"[vni]\npool = 1024\n",
     "t.conf:2: [vni] pool = 1024: must be MIN-MAX, e.g. 1024-65535"},
    {"[vni]\npool = 3000-2000\n", "t.conf:2: [vni] pool = 3000-2000: MIN is above MAX"},
    {"[vni]\npool = 0-100\n",
     "t.conf:2: [vni] pool = 0-100: must be MIN-MAX within 1-65535"},
    {"[vni]\npool = 1-70000\n",
     "t.conf:2: [vni] pool = 1-70000: must be MIN-MAX within 1-65535"},
    {"[cxi]\ntcs = FAST\n",
     "t.conf:2: [cxi] tcs = FAST: unknown traffic class 'FAST' (DEDICATED_ACCESS, "
     "LOW_LATENCY, BULK_DATA, BEST_EFFORT)"},
    {"[cxi]\ntcs = ,\n",
     "t.conf:2: [cxi] tcs = ,: at least one traffic class is needed"},
    {"[cxi]\nallowed_tcs = 0x10\n",
     "t.conf:2: [cxi] allowed_tcs = 0x10: a mask of 0x1..0xf or traffic class names"},
    {"[cxi]\nlimits = les=3\n",
     "t.conf:2: [cxi] limits = les=3: 'les=3': expected def_R=N, res_R=N or max_R=N"},
    {"[cxi]\nlimits = def_foo=3\n",
     "t.conf:2: [cxi] limits = def_foo=3: 'def_foo': unknown resource (txqs tgqs eqs "
     "cts tles ptes les acs)"},
    {"[cxi]\nlimits = max_txqs=5000\n",
     "t.conf:2: [cxi] limits = max_txqs=5000: max_txqs: must be a whole number "
     "0..1024"},
    {"[cxi]\nlimits = max_eqs=5,res_eqs=6\n",
     "t.conf:2: [cxi] limits = max_eqs=5,res_eqs=6: res_eqs (6) exceeds max_eqs (5)"},
    {"[broker]\nstate_dir = var/lib\n",
     "t.conf:2: [broker] state_dir = var/lib: must be an absolute path"},
    {"[broker]\ncluster_name = my-cluster\n",
     "t.conf:2: [broker] cluster_name = my-cluster: only letters, digits and '_' are "
     "allowed"},
    {"[fabric_manager]\nurl = ftp://fm\n",
     "t.conf:2: [fabric_manager] url = ftp://fm: not an http(s) URL"},
    {"[fabric_manager]\nurl = https://\n",
     "t.conf:2: [fabric_manager] url = https://: URL has no host"},
    {"[fabric_manager]\nurl = https://fm/a b\n",
     "t.conf:2: [fabric_manager] url = https://fm/a b: URL must not contain spaces, "
     "'?' "
     "or '#'"},
    {"[api]\nrm_users = root,,slurm\n",
     "t.conf:2: [api] rm_users = root,,slurm: empty name in list"},
    {"[api]\nadmin_users = ro$ot\n",
     "t.conf:2: [api] admin_users = ro$ot: '$' cannot appear in a user or group name"},
    {"[api]\ntcp = localhost\n",
     "t.conf:2: [api] tcp = localhost: must be HOST:PORT (IPv6 as [ADDR]:PORT)"},
    {"[api]\ntcp = 127.0.0.1:99999\n",
     "t.conf:2: [api] tcp = 127.0.0.1:99999: port must be 0..65535"},
    {"[api]\nsocket = /run/fmbroker/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaa"
     ".sock\n",
     "t.conf:2: [api] socket = /run/fmbroker/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaa"
     ".sock: longer than 107 bytes"},
    /* credentials in a URL: refused, and not shown in the message */
    {"[fabric_manager]\nurl = https://cxi:s3cret@fm.example/apis\n",
     "t.conf:2: [fabric_manager] url = https://***@fm.example/apis: URL must not "
     "carry credentials (a user@ part): use [fabric_manager] auth and auth_dir, or a "
     "token file"},
    {"[api]\nbroker_url = https://rm:tok@b:8443\n",
     "t.conf:2: [api] broker_url = https://***@b:8443: URL must not carry credentials "
     "(a user@ part): use [fabric_manager] auth and auth_dir, or a token file"},
    {"socket = /run/x.sock\n[api]\n", "t.conf:1: socket: a key before any [section]"},
    {"[vni\n", "t.conf:1: syntax error"},
    {"[vni]\njust words\n", "t.conf:2: syntax error"},
    /* rules across keys: the message names the key and where it was set */
    {"[vni]\nmax_per_job = 2\nper_job = 3\n",
     "t.conf:3: [vni] per_job: 3 exceeds [vni] max_per_job (2)"},
    {"[vni]\npool = 5000-5001\n",
     "t.conf:2: [vni] pool: 5000-5001 holds fewer VNIs than [vni] max_per_job (4)"},
    /* the NICs' default service's VNIs, and the site's reserved ones */
    {"[vni]\npool = 1-10\n",
     "t.conf:2: [vni] pool: 1-10 holds VNI 1, which belongs to the NICs' default CXI "
     "service (VNIs 1 and 10): a job given it cannot get its CXI services; start the "
     "pool above 10 (the default is 1024-65535)"},
    {"[vni]\npool = 2-100\n",
     "t.conf:2: [vni] pool: 2-100 holds VNI 10, which belongs to the NICs' default CXI "
     "service (VNIs 1 and 10): a job given it cannot get its CXI services; start the "
     "pool above 10 (the default is 1024-65535)"},
    {"[vni]\npool = 2000-2999\nreserved = 100, 2500-2600\n",
     "t.conf:2: [vni] pool: 2000-2999 holds VNI 2500, which [vni] reserved (100, "
     "2500-2600) keeps for the site; choose a pool that leaves out every reserved VNI"},
    {"[vni]\nreserved = 1500,x\n",
     "t.conf:2: [vni] reserved = 1500,x: 'x' is not a VNI or MIN-MAX within 1-65535"},
    {"[vni]\nreserved = 30-20\n",
     "t.conf:2: [vni] reserved = 30-20: '30-20' is not a VNI or MIN-MAX within "
     "1-65535"},
    {"[fabric_manager]\nreserve_timeout_ms = 5000\ntimeout_ms = 1000\n",
     "t.conf:2: [fabric_manager] reserve_timeout_ms: 5000 exceeds [fabric_manager] "
     "timeout_ms (1000)"},
    {"[fabric_manager]\nmtls_cert = /etc/c.pem\n",
     "t.conf:2: [fabric_manager] mtls_cert: mtls_cert and mtls_key must be set "
     "together"},
    {"[fabric_manager]\ninsecure = true\nca_file = /etc/ca.pem\n",
     "t.conf:2: [fabric_manager] insecure: contradicts ca_file: verify with a CA, or "
     "do "
     "not verify"},
    {"[api]\ntcp = 127.0.0.1:1\n",
     "t.conf:2: [api] tcp: the TCP listener needs tls_cert, tls_key and tokens_file"},
    {"[fabric_manager]\nurl = http://fm\nauth = basic\n[hwcoll]\naddrs_per_job = 4\n",
     "t.conf:2: [fabric_manager] url: http://fm is plain http: auth = basic would send "
     "credentials and tokens in clear; use https, or set allow_plain_http = true"},
    {"[hwcoll]\nsystem_nodes = 10\nmin_nodes = 20\n",
     "t.conf:3: [hwcoll] min_nodes: 20 exceeds [hwcoll] system_nodes (10)"},
    {"[fabric_manager]\nurl = https://fm\n",
     "t.conf: [hwcoll] addrs_per_job (default): 0 needs [hwcoll] system_nodes for "
     "HPE's "
     "sizing formula; set one of them"},
    {"[fabric_manager]\nurl = https://fm\n[hwcoll]\ntotal_addrs = 10\nsystem_nodes = "
     "1000\nmin_nodes = 2\n",
     "t.conf:5: [hwcoll] system_nodes: HPE's formula (10 / (1000 / 2)) / 1 gives 0 "
     "addresses per job; set addrs_per_job"},
};

static void every_kind_of_bad_value_is_named (void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof (bad_cases) / sizeof (bad_cases[0]); i++) {
        struct fmb_config c;
        struct fmb_error e = {""};
        fmb_config_defaults (&c);
        c.vni_per_job = 3; /* a sentinel a failed load must not touch */
        errno = 0;
        int rc = fmb_config_load_string (&c, "t.conf", bad_cases[i].text, &e);
        if (rc != -1 || strcmp (e.text, bad_cases[i].message) != 0)
            fail_msg ("case %zu: %s\n  got:  %s\n  want: %s",
                      i,
                      bad_cases[i].text,
                      e.text,
                      bad_cases[i].message);
        assert_int_equal (errno, EINVAL);
        assert_int_equal (c.vni_per_job, 3);
    }
}

static void long_lines_are_refused_not_split (void **state)
{
    (void)state;
    char text[512];
    struct fmb_config c;
    struct fmb_error e;
    snprintf (text, sizeof (text), "[api]\n# %0300d\nrm_users = root\n", 0);
    assert_int_equal (fmb_config_load_string (&c, "t.conf", text, &e), -1);
    assert_string_equal (e.text, "t.conf:2: line longer than 198 bytes");
}

static void file_errors_name_the_file (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    char *dir = tu_mkdtemp ();
    char *path = tu_path (dir, "fmbroker.conf");
    assert_int_equal (fmb_config_load (&c, path, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_non_null (strstr (e.text, "fmbroker.conf: No such file or directory"));
    tu_write (path, "[vni]\nper_job = 2\n", 0644);
    assert_int_equal (fmb_config_load (&c, path, &e), 0);
    assert_int_equal (c.vni_per_job, 2);
    assert_string_equal (c.source, path);
    free (path);
    tu_rmtree (dir);
}

/* The broker host's file, with a typo in a key only the broker reads:
 * the broker refuses it, the clients (hooks, CLI, agent) read their own
 * keys and go on; a bad value in a client's key stops them too. */
static void clients_read_their_keys_only (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    char *dir = tu_mkdtemp ();
    char *path = tu_path (dir, "fmbroker.conf");
    tu_write (
        path,
        "[api]\nsocket = /run/x.sock\nrm_users = root\n[vni]\nmni_nodes = 5\n"
        "pool = 2000-2999\nper_job = 9\n[nosuch]\nkey = 1\n[cxi]\nlibcxi = /opt/l.so\n",
        0644);
    assert_int_equal (fmb_config_load (&c, path, &e), -1);
    assert_non_null (strstr (e.text, "[vni] mni_nodes: unknown key"));
    assert_int_equal (fmb_config_load_client (&c, path, &e), 0);
    assert_string_equal (c.socket, "/run/x.sock");
    assert_int_equal (c.vni_min, 2000);
    assert_int_equal (c.vni_max, 2999);
    assert_int_equal (c.vni_per_job, 1); /* the broker's key: its default */
    assert_string_equal (c.cxi_libcxi, "/opt/l.so");
    /* a pool smaller than the default max_per_job, the broker's own key */
    tu_write (path, "[vni]\npool = 5000-5001\nmax_per_job = 2\n", 0644);
    assert_int_equal (fmb_config_load_client (&c, path, &e), 0);
    assert_int_equal (c.vni_max, 5001);
    tu_write (path, "[api]\nbroker_url = http://b:1\nclient_token_file = /t\n", 0644);
    assert_int_equal (fmb_config_load_client (&c, path, &e), -1);
    assert_non_null (strstr (e.text, "[api] broker_url"));
    tu_write (path, "[api]\nbroker_url = https://b:1\n", 0644);
    assert_int_equal (fmb_config_load_client (&c, path, &e), -1);
    assert_non_null (strstr (e.text, "needs client_token_file"));
    free (path);
    tu_rmtree (dir);
}

static void command_line_override_is_validated (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    fmb_config_defaults (&c);
    assert_int_equal (fmb_config_set (&c, "broker.state_dir=/tmp/x", &e), 0);
    assert_string_equal (c.state_dir, "/tmp/x");
    assert_int_equal (fmb_config_set (&c, "vni.per_job=9", &e), -1);
    assert_string_equal (
        e.text, "command line: [vni] per_job = 9: must be a whole number 0..4");
    assert_int_equal (fmb_config_set (&c, "vni.max_per_job=0", &e), -1);
    assert_string_equal (
        e.text,
        "command line: [vni] per_job (default): 1 exceeds [vni] max_per_job (0)");
    assert_int_equal (c.vni_max_per_job, 4);
    assert_int_equal (fmb_config_set (&c, "state_dir=/x", &e), -1);
    assert_string_equal (e.text, "'state_dir=/x': expected SECTION.KEY=VALUE");
    assert_int_equal (fmb_config_set (&c, "broker.nope=1", &e), -1);
    assert_string_equal (e.text, "command line: [broker] nope: unknown key");
}

static void broker_url_lists_are_normalised (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    fmb_config_defaults (&c);
    assert_int_equal (fmb_config_set (&c, "api.client_token_file=/etc/t", &e), 0);
    assert_int_equal (
        fmb_config_set (&c, "api.broker_url=https://a:1/ ,  https://b:2//", &e), 0);
    assert_string_equal (c.broker_url, "https://a:1,https://b:2");
    assert_int_equal (fmb_config_set (&c, "api.broker_url=https://a:1", &e), 0);
    assert_string_equal (c.broker_url, "https://a:1");
    assert_int_equal (fmb_config_set (&c, "api.broker_url=https://a:1,http://b:2", &e),
                      -1);
    assert_non_null (strstr (e.text, "http://b:2: not an https URL"));
    assert_int_equal (fmb_config_set (&c, "api.broker_url=https://a:1,,https://b", &e),
                      -1);
    assert_non_null (strstr (e.text, "an empty URL in the list"));
    assert_int_equal (
        fmb_config_set (&c,
                        "api.broker_url=https://1,https://2,https://3,https://4,"
                        "https://5,https://6,https://7,https://8,https://9",
                        &e),
        -1);
    assert_non_null (strstr (e.text, "more than 8 URLs"));
    assert_string_equal (c.broker_url, "https://a:1"); /* unchanged by a refusal */
}

static void overrides_are_validated_together (void **state)
{
    (void)state;
    struct fmb_config c;
    struct fmb_error e;
    /* The TCP listener needs three other keys; given after it, they count. */
    const char *sets[] = {"api.tcp=127.0.0.1:8443",
                          "api.tls_cert=/c.pem",
                          "api.tls_key=/c.key",
                          "api.tokens_file=/tokens"};
    assert_int_equal (fmb_config_load_with_sets (&c, NULL, sets, 4, &e), 0);
    assert_string_equal (c.tcp, "127.0.0.1:8443");
    assert_int_equal (fmb_config_load_with_sets (&c, NULL, sets, 3, &e), -1);
    assert_string_equal (e.text,
                         "command line: [api] tcp: the TCP listener needs tls_cert, "
                         "tls_key and tokens_file");
    const char *host[] = {"api.tcp=broker.example:8443"};
    assert_int_equal (fmb_config_load_with_sets (&c, NULL, host, 1, &e), -1);
    assert_string_equal (e.text,
                         "command line: [api] tcp = broker.example:8443: HOST must be "
                         "a numeric IPv4 or [IPv6] address, not a host name");
}

static void dump_round_trips (void **state)
{
    (void)state;
    struct fmb_config c, d;
    struct fmb_error e;
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal (
        fmb_config_load_string (&c,
                                "t.conf",
                                "[vni]\npool = 100-200\n[cxi]\ntcs = "
                                "BULK_DATA\n[broker]\nlog_level = warning\n",
                                &e),
        0);
    FILE *f = open_memstream (&buf, &len);
    fmb_config_dump (&c, f);
    fclose (f);
    assert_non_null (strstr (buf, "[vni]\npool = 100-200\n"));
    assert_non_null (strstr (buf, "tcs = BULK_DATA\n"));
    /* the dump skips its first comment line and parses back to the same */
    assert_int_equal (fmb_config_load_string (&d, "dump", buf, &e), 0);
    assert_int_equal (d.vni_min, 100);
    assert_int_equal (d.cxi_tcs, FMB_TC_BULK_DATA);
    assert_int_equal (d.log_level, LOG_WARNING);
    free (buf);
}

/* [cxi] tcs, RUN's tcs and Slurm's --fmb-tcs all read classes this way. */
static void traffic_classes_by_name_or_mask_within_a_set (void **state)
{
    (void)state;
    unsigned m = 0;
    struct fmb_error e;
    char names[96];
    assert_int_equal (fmb_config_parse_tcs ("0xa", &m, &e), 0);
    assert_int_equal (m, 0xa);
    assert_int_equal (fmb_config_parse_tcs ("0X1", &m, &e), 0);
    assert_int_equal (m, 0x1);
    assert_int_equal (fmb_config_parse_tcs ("0x0", &m, &e), -1);
    assert_int_equal (fmb_config_parse_tcs ("0x", &m, &e), -1);
    assert_int_equal (fmb_config_parse_tcs ("0x-1", &m, &e), -1);
    assert_int_equal (fmb_config_parse_tcs_within ("LOW_LATENCY", 0xe, &m, &e), 0);
    assert_int_equal (m, 0x2);
    assert_int_equal (fmb_config_parse_tcs_within ("0x3", 0xe, &m, &e), -1);
    assert_string_equal (e.text,
                         "this cluster allows only LOW_LATENCY,BULK_DATA,BEST_EFFORT");
    assert_int_equal (m, 0x2); /* untouched on failure */
    fmb_config_tcs_names (0x9, names, sizeof (names));
    assert_string_equal (names, "DEDICATED_ACCESS,BEST_EFFORT");
    fmb_config_tcs_names (0, names, sizeof (names));
    assert_string_equal (names, "none");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (defaults_are_the_documented_ones),
        cmocka_unit_test (empty_file_gives_defaults),
        cmocka_unit_test (good_file_sets_every_kind_of_value),
        cmocka_unit_test (hpe_formula_sizes_the_reservation),
        cmocka_unit_test (every_kind_of_bad_value_is_named),
        cmocka_unit_test (long_lines_are_refused_not_split),
        cmocka_unit_test (file_errors_name_the_file),
        cmocka_unit_test (clients_read_their_keys_only),
        cmocka_unit_test (command_line_override_is_validated),
        cmocka_unit_test (broker_url_lists_are_normalised),
        cmocka_unit_test (overrides_are_validated_together),
        cmocka_unit_test (dump_round_trips),
        cmocka_unit_test (traffic_classes_by_name_or_mask_within_a_set),
    };
    return cmocka_run_group_tests_name ("config", tests, NULL, NULL);
}
