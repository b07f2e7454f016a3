/* config_keys.h: the table of every fmbroker.conf key (section, name,
 * type, bounds, default, where it goes in struct fmb_config) and what
 * is done by key: find it, apply a value to it, fill the defaults, say
 * where a value came from, dump them all.  Inside src/common only;
 * config.h is the public API. */
#ifndef FMB_COMMON_CONFIG_KEYS_H
#define FMB_COMMON_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

enum cfg_type {
    CFG_UINT,      /* decimal, min..max */
    CFG_BOOL,      /* true/false, yes/no, on/off, 1/0 */
    CFG_STRING,    /* char array; 'check' validates and may normalise */
    CFG_ENUM,      /* one of 'values', stored as its index (unsigned) */
    CFG_LOGLEVEL,  /* a syslog level name, stored as int */
    CFG_VNI_RANGE, /* "MIN-MAX"; stored in vni_min and vni_max */
    CFG_TCS,       /* traffic-class names, stored as a mask */
    CFG_CXI_LIMITS /* def_/res_/max_<resource>=N tokens */
};

typedef int (*cfg_check_f) (char *value, struct fmb_error *error);

struct cfg_key {
    const char *section;
    const char *key;
    enum cfg_type type;
    unsigned min;
    unsigned max;
    const char *def;
    size_t offset;
    size_t size;
    cfg_check_f check;
    const char *const *values; /* CFG_ENUM: NULL-terminated */
};

extern const struct cfg_key cfg_keys[];
extern const size_t cfg_nkeys;

/* [fabric_manager] auth's values, by enum fmb_auth. */
extern const char *const cfg_auth_values[];

/* The key [section] name, or NULL. */
const struct cfg_key *cfg_key_find (const char *section, const char *name);

/* Its index in cfg_keys (and in struct fmb_config's lines), or -1. */
int cfg_key_index (const char *section, const char *name);

/* Does any key live in [section]? */
bool cfg_section_known (const char *section);

/* Is [section] name a key the clients (CLI, agent, SPANK) read? */
bool cfg_client_key (const char *section, const char *name);

/* Store 'value' into the member 'k' describes; -1 with the reason. */
int cfg_key_apply (struct fmb_config *cfg,
                   const struct cfg_key *k,
                   const char *value,
                   struct fmb_error *error);

#endif
