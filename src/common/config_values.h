/* config_values.h: the values of fmbroker.conf keys, checked and parsed
 * (inside src/common: config_keys.c's table names these; config.h has
 * the public parsers, fmb_config_parse_tcs and the like).  Each returns
 * 0, or -1 with the reason (no key name: the caller adds where). */
#ifndef FMB_COMMON_CONFIG_VALUES_H
#define FMB_COMMON_CONFIG_VALUES_H

#include <stdbool.h>

#include "config.h"

/* Checks of a string value; may normalise it in place. */
int cfg_check_cluster (char *value, struct fmb_error *error);
int cfg_check_abs_path (char *value, struct fmb_error *error);
int cfg_check_path_or_empty (char *value, struct fmb_error *error);
int cfg_check_url (char *value, struct fmb_error *error);
int cfg_check_names (char *value, struct fmb_error *error);
int cfg_check_hostport (char *value, struct fmb_error *error);
int cfg_check_https_url (char *value, struct fmb_error *error);
int cfg_check_https_urls (char *value, struct fmb_error *error);

/* [vni] reserved: "N" or "N-M" items, comma-separated, within 1-65535. */
int cfg_check_vni_list (char *value, struct fmb_error *error);
/* The next item of such a list at *cursor (advanced past it): 1 with
 * the item in *lo..*hi, 0 at the end, -1 with the reason. */
int cfg_vni_list_next (const char **cursor,
                       unsigned *lo,
                       unsigned *hi,
                       struct fmb_error *error);

/* A whole decimal number in [min, max]. */
int cfg_parse_uint (const char *value,
                    unsigned min,
                    unsigned max,
                    unsigned *out,
                    struct fmb_error *error);

/* true/false, yes/no, on/off, 1/0 */
int cfg_parse_bool (const char *value, bool *out, struct fmb_error *error);

/* [cxi] limits: def_/res_/max_<resource>=N tokens over the defaults. */
int cfg_parse_cxi_limits (const char *text,
                          struct fmb_cxi_limit out[FMB_CXI_NRSRC],
                          struct fmb_error *error);

#endif
