/* fileutil.h: small file helpers: capped reads, atomic writes, private
 * file checks, directory creation. */
#ifndef FMB_FILEUTIL_H
#define FMB_FILEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* Read 'fd' to its end into a NUL-terminated malloc'd buffer (caller
 * frees), in a few read(2)s.  Fails with EFBIG if there is more than
 * 'cap' bytes; what was read is wiped on failure (credentials).  The
 * message names no file: the caller's prefix does. */
int fmb_read_fd (
    int fd, size_t cap, char **ret_buf, size_t *ret_len, struct fmb_error *error);

/* Read the whole of 'path' into a NUL-terminated malloc'd buffer (caller
 * frees).  Fails with EFBIG if the file is larger than 'cap'.  If
 * 'strip_newlines', trailing \r and \n are removed (credential files). */
int fmb_read_file (const char *path,
                   size_t cap,
                   bool strip_newlines,
                   char **ret_buf,
                   size_t *ret_len,
                   struct fmb_error *error);

/* Write 'len' bytes to 'path' through a temporary file in the same
 * directory and rename(2), so readers see the old or the new content,
 * never a mix.  The file gets 'mode'. */
int fmb_write_file_atomic (const char *path,
                           mode_t mode,
                           const void *data,
                           size_t len,
                           struct fmb_error *error);

/* The same, the file owned by 'owner' ((uid_t)-1: the caller) from the
 * start, so it is never readable by anyone else on the way. */
int fmb_write_file_atomic_owned (const char *path,
                                 mode_t mode,
                                 uid_t owner,
                                 const void *data,
                                 size_t len,
                                 struct fmb_error *error);

/* As fmb_write_file_atomic_owned, without waiting for the disk: readers
 * and a process that dies still see the old or the new content, but a
 * crash of the machine may lose it.  For what such a crash ends anyway:
 * a node's job records describe CXI services, which do not outlive the
 * node's kernel (and are on tmpfs, /run, by default); waiting for the
 * disk there cost each job's setup some 3 ms (bench/RESULTS.md). */
int fmb_write_file_replace_owned (const char *path,
                                  mode_t mode,
                                  uid_t owner,
                                  const void *data,
                                  size_t len,
                                  struct fmb_error *error);

/* Fail with EPERM if 'path' (an open fd's file) can be read or written by
 * group or others: secrets must be private to the service user. */
int fmb_check_private_fd (int fd, const char *path, struct fmb_error *error);
int fmb_check_private_file (const char *path, struct fmb_error *error);

/* mkdir -p with 'mode' for directories it creates. */
int fmb_mkdir_p (const char *path, mode_t mode, struct fmb_error *error);

#endif
