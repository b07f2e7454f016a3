/* jsonutil.c: see jsonutil.h. */
#include <errno.h>

#include "jsonutil.h"

json_t *fmb_json_load_object (const char *buf, size_t len, struct fmb_error *error)
{
    json_error_t jerr;
    json_t *v = json_loadb (buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        errno = EINVAL;
        fmb_errorf (error,
                    "invalid JSON at line %d column %d: %s",
                    jerr.line,
                    jerr.column,
                    jerr.text);
        return NULL;
    }
    if (!json_is_object (v)) {
        json_decref (v);
        errno = EINVAL;
        fmb_errorf (error, "invalid JSON: top level must be an object");
        return NULL;
    }
    return v;
}

char *fmb_json_dump (const json_t *value)
{
    char *s = json_dumps (value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s)
        errno = ENOMEM;
    return s;
}

static const char *type_name (json_type t)
{
    switch (t) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

int fmb_json_get (const json_t *obj,
                  const char *name,
                  json_type type,
                  json_t **ret,
                  struct fmb_error *error)
{
    json_t *v = json_object_get (obj, name);
    if (!v) {
        *ret = NULL;
        return 0;
    }
    json_type t = json_typeof (v);
    if (type == JSON_TRUE && t == JSON_FALSE)
        t = JSON_TRUE; /* JSON_TRUE stands for "a boolean" */
    if (t != type) {
        errno = EINVAL;
        return fmb_errorf (error, "%s: must be %s", name, type_name (type));
    }
    *ret = v;
    return 0;
}
