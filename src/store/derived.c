/* derived.c: the schema's tables, indexes and triggers held against what
 * the migrations make.
 *
 * An index holds nothing of its own (it is made from its table), nor does
 * a trigger (the counts it keeps can be counted again).  A file changed
 * outside fmbroker -- a hand edit, a dump loaded without them, sqlite3's
 * .recover -- may lack one, or carry another definition under its name,
 * and SQLite's integrity check does not mind: a missing index is no
 * damage to it.  The broker minds: a query that names its index (INDEXED
 * BY) fails, node reports and retention among them; one that only uses
 * it reads the whole table on the loop; a count whose trigger is gone
 * drifts from what it counts.  So each object of the file is compared, by
 * type, name and SQL text, with those of a database in memory that the
 * same migrations made (released migrations are never edited, so the
 * texts match).  --check-db reports each one missing or different;
 * start-up and --recount make the indexes and triggers again.  A table is
 * only looked for, not compared (SQLite rewrites its text on ALTER TABLE)
 * and never made: a missing table's rows are gone, and start-up refuses.
 * The comparison costs start-up 1-2 ms whatever the size of
 * the store; making an index again reads its table (0.8 s for the nodes
 * of a million jobs), only when one is missing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_private.h"

/* One object the migrations make: its type ("table", "index",
 * "trigger"), name and SQL text, and the file's text for it (NULL: the
 * file has none). */
struct object {
    const char *type, *name, *want, *found;
};
/* Called for each; negative stops the walk. */
typedef int (*object_f) (struct store *st,
                         const struct object *o,
                         void *arg,
                         struct fmb_error *error);

static const char SQL_OBJECTS[] =
    "SELECT type, name, sql FROM sqlite_schema"
    " WHERE type IN ('table', 'index', 'trigger') AND sql IS NOT NULL"
    " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name";
static const char SQL_OBJECT[] =
    "SELECT sql FROM main.sqlite_schema WHERE type = ?1 AND name = ?2";

/* A database in memory at the file's schema version. */
static int reference_open (int version, sqlite3 **ret, struct fmb_error *error)
{
    sqlite3 *ref;
    int rc = sqlite3_open_v2 (":memory:",
                              &ref,
                              SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                  SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                              NULL);
    for (int v = 0; rc == SQLITE_OK && v < version; v++)
        rc = sqlite3_exec (ref, store_migration (v), NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        fmb_errorf (error,
                    "the schema's reference copy: %s",
                    ref ? sqlite3_errmsg (ref) : sqlite3_errstr (rc));
        sqlite3_close (ref);
        errno = ENOMEM;
        return -1;
    }
    *ret = ref;
    return 0;
}

/* The file's SQL text for (type, name), malloc'd; NULL when it has none. */
static int file_object (struct store *st,
                        sqlite3_stmt *s,
                        const char *type,
                        const char *name,
                        char **ret_found,
                        struct fmb_error *error)
{
    sqlite3_reset (s);
    sqlite3_bind_text (s, 1, type, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    *ret_found = NULL;
    if (rc == SQLITE_ROW && store_column_strdup (s, 0, ret_found) < 0)
        return fmb_errorf (error, "read the schema: out of memory");
    if (rc == SQLITE_ROW)
        return 0;
    if (rc != SQLITE_DONE)
        return store_fail (
            st, sqlite3_extended_errcode (st->db), error, "read the schema");
    return 0;
}

/* Call 'fn' for every table, index and trigger the migrations make at
 * the file's version, with the file's own text for it. */
static int walk (struct store *st, object_f fn, void *arg, struct fmb_error *error)
{
    sqlite3 *ref;
    sqlite3_stmt *want = NULL, *have = NULL;
    int rc = -1;
    if (reference_open (st->file_version, &ref, error) < 0)
        return -1;
    if (sqlite3_prepare_v2 (ref, SQL_OBJECTS, -1, &want, NULL) != SQLITE_OK) {
        fmb_errorf (error, "the schema's reference copy: %s", sqlite3_errmsg (ref));
        goto out;
    }
    if (sqlite3_prepare_v2 (st->db, SQL_OBJECT, -1, &have, NULL) != SQLITE_OK) {
        store_fail (st, sqlite3_extended_errcode (st->db), error, "read the schema");
        goto out;
    }
    int step;
    while ((step = sqlite3_step (want)) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text (want, 0);
        const char *name = (const char *)sqlite3_column_text (want, 1);
        const char *text = (const char *)sqlite3_column_text (want, 2);
        char *found;
        if (file_object (st, have, type, name, &found, error) < 0)
            goto out;
        struct object o = {type, name, text, found};
        int r = fn (st, &o, arg, error);
        free (found);
        if (r < 0)
            goto out;
    }
    if (step != SQLITE_DONE) {
        fmb_errorf (error, "the schema's reference copy: %s", sqlite3_errmsg (ref));
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize (have);
    sqlite3_finalize (want);
    sqlite3_close (ref);
    return rc;
}

/* What is wrong with 'o', and what to do about it, in 'line'; false when
 * nothing is.  A table is only looked for. */
static bool object_problem (const struct object *o, char *line, size_t size)
{
    bool table = strcmp (o->type, "table") == 0;
    if (o->found && (table || strcmp (o->want, o->found) == 0))
        return false;
    snprintf (line,
              size,
              "%s %s: %s (%s)",
              o->type,
              o->name,
              o->found ? "differs from fmbroker's" : "missing",
              table ? "its rows are lost: restore a backup"
                    : "fmbrokerd --recount, or the next start, makes it again");
    return true;
}

struct check {
    store_problem_f cb;
    void *arg;
    int n, tables;
};

static int check_one (struct store *st,
                      const struct object *o,
                      void *arg,
                      struct fmb_error *error)
{
    struct check *c = arg;
    char line[256];
    (void)st;
    if (!object_problem (o, line, sizeof (line)))
        return 0;
    if (c->n++ == 0)
        fmb_errorf (error, "%s", line);
    c->tables += strcmp (o->type, "table") == 0;
    if (c->cb)
        c->cb (line, c->arg);
    return 0;
}

int store_derived_check (struct store *st,
                         store_problem_f cb,
                         void *arg,
                         int *ret_tables,
                         struct fmb_error *error)
{
    struct check c = {.cb = cb, .arg = arg};
    if (walk (st, check_one, &c, error) < 0)
        return -1;
    *ret_tables = c.tables;
    return c.n;
}

struct rebuild {
    char *made;
    size_t size;
    unsigned n, triggers;
};

static int rebuild_one (struct store *st,
                        const struct object *o,
                        void *arg,
                        struct fmb_error *error)
{
    struct rebuild *r = arg;
    char drop[128], line[256];
    if (!object_problem (o, line, sizeof (line)))
        return 0;
    if (strcmp (o->type, "table") == 0) {
        errno = EPROTO;
        return fmb_errorf (error, "%s", line);
    }
    /* the names are the migrations' own: plain identifiers */
    snprintf (drop, sizeof (drop), "DROP %s IF EXISTS \"%s\"", o->type, o->name);
    if (sqlite3_exec (st->db, drop, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec (st->db, o->want, NULL, NULL, NULL) != SQLITE_OK) {
        store_fail (st, sqlite3_extended_errcode (st->db), error, "make it again");
        return fmb_error_prefix (error, "%s %s", o->type, o->name);
    }
    size_t used = strlen (r->made);
    if (used < r->size)
        snprintf (r->made + used,
                  r->size - used,
                  "%s%s %s (%s)",
                  used ? ", " : "",
                  o->type,
                  o->name,
                  o->found ? "different" : "missing");
    r->n++;
    r->triggers += strcmp (o->type, "trigger") == 0;
    return 0;
}

int store_derived_rebuild (struct store *st,
                           char *made,
                           size_t size,
                           unsigned *ret_triggers,
                           struct fmb_error *error)
{
    struct rebuild r = {.made = made, .size = size};
    if (size)
        made[0] = '\0';
    if (walk (st, rebuild_one, &r, error) < 0)
        return -1;
    *ret_triggers = r.triggers;
    return (int)r.n;
}
