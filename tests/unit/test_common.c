/* test_common.c: error chaining, log redaction and format, file helpers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fileutil.h"
#include "jsonutil.h"
#include "log.h"
#include "netaddr.h"
#include "testutil.h"

static void error_prefix_keeps_the_root_cause_and_errno (void **state)
{
    (void)state;
    struct fmb_error e;
    errno = ENOENT;
    assert_int_equal (fmb_errorf (&e, "job '%s' not found", "42"), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (fmb_error_prefix (&e, "store"), -1);
    assert_string_equal (e.text, "store: job '42' not found");
    assert_int_equal (errno, ENOENT);
    assert_int_equal (fmb_errorf (NULL, "ignored"), -1);
    char big[400];
    memset (big, 'x', sizeof (big) - 1);
    big[sizeof (big) - 1] = '\0';
    fmb_errorf (&e, "%s", big);
    assert_int_equal (e.text[sizeof (e.text) - 2], '+'); /* truncation shows */
}

static void redaction_masks_every_secret_form (void **state)
{
    (void)state;
    struct {
        const char *in, *out;
    } cases[] = {
        {"Authorization: Bearer abc.def-123 sent", "Authorization: Bearer *** sent"},
        {"{\"access_token\":\"s3cr3t\",\"expires_in\":300}",
         "{\"access_token\":\"***\",\"expires_in\":300}"},
        {"grant_type=client_credentials&client_id=me&client_secret=hunter2&scope="
         "openid",
         "grant_type=client_credentials&client_id=me&client_secret=***&scope=openid"},
        {"reply {\"sessionToken\": \"tok\"}", "reply {\"sessionToken\": \"***\"}"},
        {"nothing secret here", "nothing secret here"},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        char line[256];
        snprintf (line, sizeof (line), "%s", cases[i].in);
        fmb_log_redact (line);
        assert_string_equal (line, cases[i].out);
    }
}

static void log_lines_are_plain_outside_journald (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *path = tu_path (dir, "log");
    fflush (stderr);
    int saved = dup (2);
    FILE *f = freopen (path, "w", stderr);
    assert_non_null (f);
    fmb_log_init ("unit", LOG_INFO);
    fmb_log (LOG_ERR, "store: %s", "disk full");
    fmb_log (LOG_DEBUG, "not shown at info");
    fmb_log (LOG_WARNING, "token Bearer xyz rejected");
    fflush (stderr);
    dup2 (saved, 2);
    close (saved);
    char *text = tu_slurp (path, NULL);
    /* plain lines, no "<N>" prefix, outside journald */
    assert_string_equal (text,
                         "unit: error: store: disk full\n"
                         "unit: warning: token Bearer *** rejected\n");
    free (text);
    free (path);
    tu_rmtree (dir);
}

static void escaping_keeps_a_record_on_one_line (void **state)
{
    (void)state;
    char out[64];
    fmb_log_escape (out, sizeof (out), "step 0\n<2>fmbrokerd: CRIT forged");
    assert_string_equal (out, "step 0\\x0a<2>fmbrokerd: CRIT forged");
    fmb_log_escape (out, sizeof (out), "a\rb\tc\x7f d\x1b[31m");
    assert_string_equal (out, "a\\x0db\\x09c\\x7f d\\x1b[31m");
    /* C1 controls (NEL, CSI) are escaped; other UTF-8 is kept */
    fmb_log_escape (out, sizeof (out), "x\xc2\x85y \xc2\x9b \xc3\xa9\xc2\xa0");
    assert_string_equal (out, "x\\xc2\\x85y \\xc2\\x9b \xc3\xa9\xc2\xa0");
    /* never overflows, never cuts an escape in half */
    char small[6];
    assert_int_equal (fmb_log_escape (small, sizeof (small), "ab\ncd"), 2);
    assert_string_equal (small, "ab");
}

static void read_file_caps_and_strips (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *path = tu_path (dir, "secret");
    char *buf;
    size_t len;
    struct fmb_error e;
    tu_write (path, "s3cret\n\n", 0600);
    assert_int_equal (fmb_read_file (path, 100, true, &buf, &len, &e), 0);
    assert_string_equal (buf, "s3cret");
    assert_int_equal (len, 6);
    free (buf);
    assert_int_equal (fmb_read_file (path, 4, false, &buf, &len, &e), -1);
    assert_int_equal (errno, EFBIG);
    assert_int_equal (fmb_check_private_file (path, &e), 0);
    chmod (path, 0640);
    assert_int_equal (fmb_check_private_file (path, &e), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (e.text, "mode 0640 lets group or others read it"));
    free (path);
    tu_rmtree (dir);
}

static void atomic_write_and_mkdir (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *sub = tu_path (dir, "a/b/c");
    char *file = tu_path (dir, "a/b/c/f");
    struct fmb_error e;
    struct stat sb;
    assert_int_equal (fmb_mkdir_p (sub, 0700, &e), 0);
    assert_int_equal (fmb_mkdir_p (sub, 0700, &e), 0); /* again: fine */
    assert_int_equal (fmb_write_file_atomic (file, 0600, "1234\n", 5, &e), 0);
    assert_int_equal (fmb_write_file_atomic (file, 0600, "99\n", 3, &e), 0);
    char *text = tu_slurp (file, NULL);
    assert_string_equal (text, "99\n");
    free (text);
    assert_int_equal (stat (file, &sb), 0);
    assert_int_equal (sb.st_mode & 0777, 0600);
    assert_int_equal (fmb_mkdir_p (file, 0700, &e), -1); /* a file is in the way */
    assert_int_equal (errno, ENOTDIR);
    free (sub);
    free (file);
    tu_rmtree (dir);
}

static void json_loader_is_strict (void **state)
{
    (void)state;
    struct fmb_error e;
    json_t *o = fmb_json_load_object ("{\"a\":1}", 7, &e);
    assert_non_null (o);
    assert_int_equal (json_integer_value (json_object_get (o, "a")), 1);
    char *s = fmb_json_dump (o);
    assert_string_equal (s, "{\"a\":1}");
    free (s);
    json_decref (o);
    assert_null (fmb_json_load_object ("{\"a\":1,\"a\":2}", 13, &e));
    assert_non_null (strstr (e.text, "duplicate"));
    assert_null (fmb_json_load_object ("[1]", 3, &e));
    assert_string_equal (e.text, "invalid JSON: top level must be an object");
    assert_null (fmb_json_load_object ("{\"a\":", 5, &e));
    assert_int_equal (errno, EINVAL);
}

/* A file read to its end in a few reads (not one per byte): a record
 * of many pages whole, one over the cap refused, not cut short. */
static void json_fd_loader_reads_whole_files_within_a_cap (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *path = tu_path (dir, "rec.json");
    struct fmb_error e;
    size_t n = 20000;
    char *text = malloc (n + 16);
    assert_non_null (text);
    memcpy (text, "{\"a\":\"", 6);
    memset (text + 6, 'x', n - 8);
    memcpy (text + n - 2, "\"}", 3);
    tu_write (path, text, 0600);
    int fd = open (path, O_RDONLY);
    json_t *o = fmb_json_load_fd (fd, n, &e);
    close (fd);
    assert_non_null (o);
    assert_int_equal (json_string_length (json_object_get (o, "a")), n - 8);
    json_decref (o);
    fd = open (path, O_RDONLY);
    assert_null (fmb_json_load_fd (fd, n - 1, &e));
    close (fd);
    assert_int_equal (errno, EFBIG);
    assert_non_null (strstr (e.text, "larger than"));
    tu_write (path, "{\"a\":1,\"a\":2}", 0600);
    fd = open (path, O_RDONLY);
    assert_null (fmb_json_load_fd (fd, n, &e));
    close (fd);
    assert_non_null (strstr (e.text, "duplicate"));
    free (text);
    free (path);
    tu_rmtree (dir);
}

/* Failed authentications are counted per IPv4 address and per IPv6
 * /64: one host that has a /64 must not pass the tarpit by moving
 * through its addresses. */
static void guesses_count_per_ipv4_address_or_ipv6_64 (void **state)
{
    (void)state;
    char a[64], b[64];
    fmb_addr_guess_key ("192.0.2.7", a, sizeof (a));
    assert_string_equal (a, "192.0.2.7");
    fmb_addr_guess_key ("::ffff:192.0.2.7", b, sizeof (b));
    assert_string_equal (b, "192.0.2.7"); /* IPv4-mapped: the same client */
    fmb_addr_guess_key ("2001:db8:1:2::1", a, sizeof (a));
    fmb_addr_guess_key ("2001:db8:1:2:ffff:ee:dd:cc", b, sizeof (b));
    assert_string_equal (a, "2001:db8:1:2::/64");
    assert_string_equal (a, b);
    fmb_addr_guess_key ("2001:db8:1:3::1", b, sizeof (b));
    assert_string_equal (b, "2001:db8:1:3::/64"); /* the next /64: another */
    fmb_addr_guess_key ("?", a, sizeof (a));
    assert_string_equal (a, "?");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (error_prefix_keeps_the_root_cause_and_errno),
        cmocka_unit_test (redaction_masks_every_secret_form),
        cmocka_unit_test (log_lines_are_plain_outside_journald),
        cmocka_unit_test (escaping_keeps_a_record_on_one_line),
        cmocka_unit_test (read_file_caps_and_strips),
        cmocka_unit_test (atomic_write_and_mkdir),
        cmocka_unit_test (json_loader_is_strict),
        cmocka_unit_test (json_fd_loader_reads_whole_files_within_a_cap),
        cmocka_unit_test (guesses_count_per_ipv4_address_or_ipv6_64),
    };
    return cmocka_run_group_tests_name ("common", tests, NULL, NULL);
}
