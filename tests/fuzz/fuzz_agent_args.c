/* fuzz_agent_args.c: fmbroker-cxi's command line.  The input is split at
 * NUL bytes into argv; whatever is accepted must be self-consistent. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "validate.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = malloc (size + 1);
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    struct agent_args a;
    struct fmb_error e;
    memcpy (text, data, size);
    text[size] = '\0';
    argv[argc++] = "fmbroker-cxi";
    for (size_t i = 0; i <= size && argc <= MAX_ARGS;) {
        argv[argc++] = text + i;
        i += strlen (text + i) + 1;
    }
    argv[argc] = NULL;
    if (agent_args_parse (argc, argv, &a, &e) == 0 && !a.help) {
        /* list, clean and report --pending work on every job; serve on
         * the jobs its callers name, never on one of its command line */
        bool job_optional =
            a.cmd == AGENT_LIST || a.cmd == AGENT_CLEAN || a.cmd == AGENT_REPORT;
        if (a.cmd == AGENT_SERVE && (a.job || a.have_facts || a.run))
            abort ();
        if (a.cmd != AGENT_SERVE && a.listen)
            abort ();
        if ((!job_optional && a.cmd != AGENT_SERVE && !a.job) ||
            (a.job && !valid_job_id (a.job)))
            abort ();
        if (a.have_facts != (a.nvnis > 0) || a.nvnis > CXI_SVC_MAX_VNIS)
            abort ();
        for (unsigned i = 0; i < a.nvnis; i++)
            if (a.vnis[i] == 0)
                abort ();
        if (a.tcs != -1 && (a.tcs < 1 || a.tcs > 0xf))
            abort ();
        if (a.node && !valid_node_name (a.node))
            abort ();
        if (a.retry_busy > AGENT_RETRY_BUSY_MAX || a.ncores > AGENT_NCORES_MAX)
            abort ();
    } else if (a.help == false && strlen (e.text) == 0) {
        abort (); /* a refusal always says why */
    }
    free (text);
    return 0;
}
