/* background.c: background work in slices (background.h). */
#include <stdbool.h>
#include <stdlib.h>

#include "background.h"
#include "pass.h"
#include "timer.h"

struct background {
    struct pass *pass;
    struct timer *timer;
    struct background_ops ops;
    void *arg;
    int64_t waits_since; /* pass_defer_background */
};

static int64_t background_timer (void *arg, int64_t now)
{
    struct background *bg = arg;
    int64_t wait = bg->ops.due ? bg->ops.due (bg->arg, now) : 0;
    if (wait != 0)
        return wait;
    if (pass_defer_background (bg->pass, &bg->waits_since, now))
        return 1;
    return bg->ops.slice (bg->arg, now);
}

struct background *background_create (struct pass *pass,
                                      struct timers *timers,
                                      const char *name,
                                      int64_t first_ms,
                                      const struct background_ops *ops,
                                      void *arg)
{
    struct background *bg = calloc (1, sizeof (*bg));
    if (!bg)
        return NULL;
    bg->pass = pass;
    bg->ops = *ops;
    bg->arg = arg;
    if (!(bg->timer = timer_add (timers, name, first_ms, background_timer, bg))) {
        free (bg);
        return NULL;
    }
    return bg;
}

void background_destroy (struct background *bg)
{
    free (bg);
}

void background_wake (struct background *bg, int64_t delay_ms)
{
    if (bg)
        timer_wake (bg->timer, delay_ms);
}
