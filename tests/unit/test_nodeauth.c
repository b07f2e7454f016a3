/* test_nodeauth.c: compute nodes' own tokens (nodeauth), the TCP
 * listener's bounds and failure tarpit (tcpguard), and the refusal
 * log's budget per caller (refusallog). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utime.h>

#include <openssl/hmac.h>

#include "nodeauth.h"
#include "refusallog.h"
#include "tcpguard.h"
#include "testutil.h"

static void config_in (struct fmb_config *cfg, const char *dir)
{
    fmb_config_defaults (cfg);
    snprintf (cfg->state_dir, sizeof (cfg->state_dir), "%s", dir);
}

static void a_token_is_the_hmac_of_the_node_name (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    struct fmb_config cfg;
    struct fmb_error e;
    struct nodeauth *na = NULL;
    char tok[NODEAUTH_TOKEN_MAX], node[NODE_NAME_MAX + 1];
    config_in (&cfg, dir);
    assert_int_equal (nodeauth_open (&cfg, false, &na, &e), -1); /* no key yet */
    assert_int_equal (nodeauth_open (&cfg, true, &na, &e), 0);
    char *keyfile = tu_path (dir, "node.key");
    struct stat st;
    assert_int_equal (stat (keyfile, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0600);
    assert_int_equal (nodeauth_token (na, "n1", tok, sizeof (tok), &e), 0);
    /* the documented derivation, computed here independently */
    size_t klen;
    char *key = tu_slurp (keyfile, &klen);
    unsigned char mac[32];
    unsigned mlen = 0;
    HMAC (EVP_sha256 (),
          key,
          64,
          (const unsigned char *)"fmbroker-node:n1",
          16,
          mac,
          &mlen);
    char want[NODEAUTH_TOKEN_MAX] = "node:n1:";
    for (unsigned i = 0; i < mlen; i++)
        snprintf (want + 8 + 2 * i, 3, "%02x", mac[i]);
    assert_string_equal (tok, want);
    assert_int_equal (nodeauth_verify (na, tok, "", 0, node), NODEAUTH_OK);
    assert_string_equal (node, "n1");
    /* another name, a changed digit, a short one, no prefix */
    char other[NODEAUTH_TOKEN_MAX];
    snprintf (other, sizeof (other), "node:n2:%s", tok + 8);
    assert_int_equal (nodeauth_verify (na, other, "", 0, node), NODEAUTH_BAD);
    snprintf (other, sizeof (other), "%s", tok);
    other[strlen (other) - 1] = other[strlen (other) - 1] == '0' ? '1' : '0';
    assert_int_equal (nodeauth_verify (na, other, "", 0, node), NODEAUTH_BAD);
    assert_int_equal (nodeauth_verify (na, "node:n1:abc", "", 0, node), NODEAUTH_BAD);
    assert_int_equal (nodeauth_verify (na, "rm-token-123", "", 0, node),
                      NODEAUTH_NOT_NODE);
    /* revoked, and not a node name */
    assert_int_equal (nodeauth_verify (na, tok, "n0,n1", 0, node), NODEAUTH_REVOKED);
    assert_int_equal (nodeauth_token (na, "-bad", tok, sizeof (tok), &e), -1);
    nodeauth_destroy (na);
    free (key);
    free (keyfile);
    tu_rmtree (dir);
}

static void a_rotated_key_keeps_the_old_tokens_for_the_grace (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    struct fmb_config cfg;
    struct fmb_error e;
    struct nodeauth *na = NULL;
    char old[NODEAUTH_TOKEN_MAX], cur[NODEAUTH_TOKEN_MAX], node[NODE_NAME_MAX + 1];
    config_in (&cfg, dir);
    cfg.node_key_grace_s = 100;
    assert_int_equal (nodeauth_open (&cfg, true, &na, &e), 0);
    assert_int_equal (nodeauth_token (na, "n7", old, sizeof (old), &e), 0);
    nodeauth_destroy (na);
    assert_int_equal (nodeauth_rotate (&cfg, &e), 0);
    char *keyfile = tu_path (dir, "node.key");
    struct utimbuf t = {1000000, 1000000}; /* rotated at 1,000,000 s */
    assert_int_equal (utime (keyfile, &t), 0);
    assert_int_equal (nodeauth_open (&cfg, false, &na, &e), 0);
    assert_int_equal (nodeauth_token (na, "n7", cur, sizeof (cur), &e), 0);
    assert_string_not_equal (old, cur);
    int64_t ms = 1000000 * 1000LL;
    assert_int_equal (nodeauth_verify (na, cur, "", ms, node), NODEAUTH_OK);
    assert_int_equal (nodeauth_verify (na, old, "", ms + 99000, node),
                      NODEAUTH_OK_PREVIOUS);
    assert_int_equal (nodeauth_verify (na, old, "", ms + 100000, node), NODEAUTH_BAD);
    nodeauth_destroy (na);
    free (keyfile);
    tu_rmtree (dir);
}

static void tcp_connections_are_bounded_per_address_and_unauthenticated (void **state)
{
    (void)state;
    struct tcpguard_limits lim = {
        .max_total = 6, .per_addr = 3, .max_unauth = 4, .per_addr_unauth = 2};
    struct tcpguard *g = tcpguard_create (&lim);
    const char *why = NULL;
    assert_int_equal (tcpguard_admit (g, "10.0.0.1", &why), TCPGUARD_ADMITTED);
    assert_int_equal (tcpguard_admit (g, "10.0.0.1", &why), TCPGUARD_ADMITTED);
    /* an address's unauthenticated ones are few: refused, not evicting */
    assert_int_equal (tcpguard_admit (g, "10.0.0.1", &why), TCPGUARD_REFUSED);
    assert_string_equal (why, "tcp_max_unauthenticated_per_address");
    tcpguard_authenticated (g, "10.0.0.1"); /* one shows a token */
    assert_int_equal (tcpguard_admit (g, "10.0.0.1", &why), TCPGUARD_ADMITTED);
    assert_int_equal (tcpguard_admit (g, "10.0.0.1", &why), TCPGUARD_REFUSED);
    assert_non_null (strstr (why, "per address"));
    assert_int_equal (tcpguard_admit (g, "10.0.0.2", &why), TCPGUARD_ADMITTED);
    assert_int_equal (tcpguard_admit (g, "10.0.0.2", &why), TCPGUARD_ADMITTED);
    /* 4 unauthenticated: the next one is in only if one is evicted */
    assert_int_equal (tcpguard_admit (g, "10.0.0.3", &why), TCPGUARD_EVICT);
    assert_string_equal (why, "tcp_max_unauthenticated");
    tcpguard_release (g, "10.0.0.2", false); /* the evicted one goes */
    tcpguard_authenticated (g, "10.0.0.3");
    assert_int_equal (tcpguard_admit (g, "10.0.0.4", &why), TCPGUARD_ADMITTED);
    assert_int_equal (tcpguard_open (g), 6);
    assert_int_equal (tcpguard_admit (g, "10.0.0.5", &why), TCPGUARD_EVICT);
    assert_string_equal (why, "tcp_max_connections");
    tcpguard_release (g, "10.0.0.5", false);
    assert_int_equal (tcpguard_open (g), 6);
    tcpguard_destroy (g);
}

static void failures_cost_more_and_more_in_turn (void **state)
{
    (void)state;
    struct tcpguard_limits lim = {.max_total = 4, .per_addr = 4, .max_unauth = 4};
    struct tcpguard *g = tcpguard_create (&lim);
    struct tcpguard_verdict v;
    int64_t now = 1000000;
    for (int i = 0; i < TCPGUARD_FREE_FAILS; i++) {
        tcpguard_auth_failed (g, "10.0.0.1", now, &v);
        assert_int_equal (v.answer_at_ms, 0);
        assert_int_equal (v.log, i == 0);
    }
    tcpguard_auth_failed (g, "10.0.0.1", now, &v);
    assert_int_equal (v.answer_at_ms, now + TCPGUARD_STEP_MS);
    assert_true (v.log);                           /* the first one slowed is said */
    tcpguard_auth_failed (g, "10.0.0.1", now, &v); /* queued behind it */
    assert_int_equal (v.answer_at_ms, now + 3 * TCPGUARD_STEP_MS);
    assert_false (v.log);
    /* another address pays nothing */
    tcpguard_auth_failed (g, "10.0.0.2", now, &v);
    assert_int_equal (v.answer_at_ms, 0);
    /* a flood of guesses is cut once its queue passes the bound */
    bool cut = false;
    for (int i = 0; i < 100 && !cut; i++) {
        tcpguard_auth_failed (g, "10.0.0.1", now, &v);
        cut = v.cut;
    }
    assert_true (cut);
    /* a quiet minute forgets */
    tcpguard_auth_failed (g, "10.0.0.1", now + TCPGUARD_FAIL_WINDOW_MS + 40000, &v);
    assert_int_equal (v.fails, 1);
    tcpguard_destroy (g);
}

/* One noisy caller spends its own budget only; the window's end is
 * due by itself and starts a new one. */
static void refusal_lines_are_budgeted_per_caller (void **state)
{
    (void)state;
    struct refusallog *rl = refusallog_create ();
    int64_t now = 5000000;
    unsigned written = 0;
    assert_int_equal (refusallog_next_ms (rl, now), -1);
    for (int i = 0; i < 30; i++)
        written += refusallog_due (rl, "node n1", now);
    assert_int_equal (written, REFUSALLOG_PER_KEY);
    assert_true (refusallog_due (rl, "node n3", now + 1));
    assert_true (refusallog_due (rl, "10.0.0.7", now + 2));
    /* many callers: each one's first line, the rest within the cap */
    char key[32];
    for (int i = 0; i < 300; i++) {
        snprintf (key, sizeof (key), "10.1.%d.%d", i / 250, i % 250);
        assert_true (refusallog_due (rl, key, now + 3));
    }
    assert_int_equal (refusallog_next_ms (rl, now + 4), REFUSALLOG_WINDOW_MS - 4);
    refusallog_flush (rl, now + REFUSALLOG_WINDOW_MS);
    assert_int_equal (refusallog_next_ms (rl, now + REFUSALLOG_WINDOW_MS), -1);
    assert_true (refusallog_due (rl, "node n1", now + REFUSALLOG_WINDOW_MS + 1));
    refusallog_destroy (rl);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (a_token_is_the_hmac_of_the_node_name),
        cmocka_unit_test (a_rotated_key_keeps_the_old_tokens_for_the_grace),
        cmocka_unit_test (tcp_connections_are_bounded_per_address_and_unauthenticated),
        cmocka_unit_test (failures_cost_more_and_more_in_turn),
        cmocka_unit_test (refusal_lines_are_budgeted_per_caller),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
