/* slurmconf.h: what --check-config can tell from Slurm's slurm.conf:
 * whether Slurm's own switch/hpe_slingshot would hand out VNIs from the
 * broker's pool too (two owners of one VNI range share VNIs between jobs). */
#ifndef FMB_SLURMCONF_H
#define FMB_SLURMCONF_H

#include <stddef.h>

#define SLURMCONF_DEFAULT_PATH "/etc/slurm/slurm.conf"

/* Read 'path' (a slurm.conf).  1 with a warning in 'out' when it sets
 * SwitchType=switch/hpe_slingshot and its VNI range (SwitchParameters
 * vnis=, default 1024-65535) overlaps [pool_min, pool_max], or it calls
 * the FM itself (fm_url=); 0 when nothing to say; -1 when the file cannot
 * be read (errno). */
int slurmconf_check (
    const char *path, unsigned pool_min, unsigned pool_max, char *out, size_t len);

#endif
