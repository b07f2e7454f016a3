/* refusallog.h: how many lines refusals and failed authentications may
 * write to the log, per caller (issue 51).
 *
 * One budget for all let one noisy caller (a node refused 30 times, a
 * token guesser) hide every other caller's first refusal for the rest
 * of the window.  Now each caller -- a node by its name, a TCP address
 * by its key (an IPv6 one's /64), a local user by uid -- has
 * REFUSALLOG_PER_KEY lines a window, its first line is always written,
 * and lines beyond a caller's first share REFUSALLOG_MAX in all, so a
 * flood from many addresses still writes a bounded log.  What was not
 * written is said when the window ends (refusallog_flush, which the
 * loop runs when refusallog_next_ms says), not with the next refusal,
 * which may never come.
 */
#ifndef FMB_REFUSALLOG_H
#define FMB_REFUSALLOG_H

#include <stdbool.h>
#include <stdint.h>

#define REFUSALLOG_WINDOW_MS 10000
#define REFUSALLOG_PER_KEY   5   /* lines per caller per window */
#define REFUSALLOG_MAX       100 /* lines past each caller's first, in all */
#define REFUSALLOG_KEY_MAX   96
#define REFUSALLOG_SAY_MAX   10 /* callers named when the window ends */

struct refusallog;

/* NULL when out of memory. */
struct refusallog *refusallog_create (void);
void refusallog_destroy (struct refusallog *rl);

/* May a line about caller 'key' be written at 'now_ms'?  If not, it is
 * counted for the window's end. */
bool refusallog_due (struct refusallog *rl, const char *key, int64_t now_ms);

/* The window ended: a line per caller whose lines were not all written
 * (the REFUSALLOG_SAY_MAX with most, then one for the rest), and a new
 * window.  Nothing before the window's end. */
void refusallog_flush (struct refusallog *rl, int64_t now_ms);

/* Until refusallog_flush has something to say (0: now), or -1. */
int64_t refusallog_next_ms (const struct refusallog *rl, int64_t now_ms);

#endif
