/* fmbroker-cxi: the node agent.  Creates and destroys a job's CXI services
 * on every Slingshot NIC of this node through libcxi, and prints the
 * job's environment.  Run as root by the resource manager's prolog,
 * epilog and housekeeping.
 *
 * Job facts (uid, VNIs, cores, TCs) come from --uid/--vnis/--ncores/--tcs,
 * else from this node's record of the job (written by prolog before it
 * creates anything, so a crash leaves enough to clean up), else from the
 * broker over its socket.  Services are found again by uid and exact VNI
 * set, never by service id.
 */
/* This file: the usage, the run's setup (configuration, broker target)
 * and the dispatch to one command; each command is a file of its own
 * (README). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent.h"
#include "clean.h"
#include "env.h"
#include "jobrecord.h"
#include "epilog.h"
#include "list.h"
#include "log.h"
#include "monotime.h"
#include "prolog.h"
#include "report.h"
#include "nodeservice.h"
#include "serve.h"
#include "slurmhook.h"
#include "validate.h"

static const char usage_text[] =
    "Usage: fmbroker-cxi [OPTIONS] COMMAND [COMMAND OPTIONS]\n"
    "Create and destroy a job's CXI services on this node's Slingshot NICs.\n"
    "\n"
    "Commands:\n"
    "  prolog --job ID [--ncores N] [--tcs MASK] [--uid UID --vnis V[,V...]]\n"
    "         (--tcs: traffic classes, names or 0xN, instead of the job's own\n"
    "         from the broker)\n"
    "         one service per NIC for the job; on -ENOSPC the reservations are\n"
    "         scaled back to what is free, with a warning; then writes the\n"
    "         job's environment record for env (owned by the job's uid, 0400)\n"
    "  prolog --job ID --run JSON [--ncores N]\n"
    "         make the job's RUN from this node first (Slurm's launch setup;\n"
    "         the broker needs [api] agent_run): JSON is the RUN body, its\n"
    "         \"nodes\" a Slurm host list; every node sends the same one\n"
    "         --report-later: the 'created' report is kept and sent by a detached\n"
    "         child after the prolog exits (a launcher waits for less)\n"
    "  epilog --job ID [--retry-busy SECONDS] [--no-report]\n"
    "         destroy the job's services (retrying EBUSY once a second for\n"
    "         SECONDS, default 5) and report to the broker; exit 1 = drain\n"
    "  housekeeping --job ID [--retry-busy SECONDS] [--no-report]\n"
    "         the epilog's second phase, for Flux's housekeeping or a site's\n"
    "         timer: retry destroying the job's leftover services for SECONDS\n"
    "         (default 300); exit 1, reporting 'failed' so that the broker\n"
    "         raises node_drain_requested, only if they are still there\n"
    "  env    --job ID [--format shell|json|slurm] [--lnx]\n"
    "         print the job's SLINGSHOT_* and FI_CXI_* variables from the record\n"
    "         the prolog wrote (STATE_DIR/JOB.env, readable by the job's user):\n"
    "         no broker, no token, no libcxi.  Only NICs with a service are\n"
    "         listed; none on this node: prints nothing, exit 1\n"
    "  list   [--json]   every NIC and its services\n"
    "  report --pending  deliver the node reports the broker missed (kept in\n"
    "                    STATE_DIR/reports; every prolog, epilog and clean also\n"
    "                    delivers them); exit 1 while some are still kept\n"
    "  serve [--listen PATH]  the node service (fmbroker-cxi.service): the node\n"
    "                    engine for every resource manager.  Makes each job's\n"
    "                    setup and end here when the SPANK plugin, the Flux job\n"
    "                    shell, fmbroker-slurm-prolog or the Flux epilog asks,\n"
    "                    with libcxi loaded and its broker connections kept\n"
    "                    open, each job on a thread of its own (a slow job holds\n"
    "                    no other); root may ask anything, a user only its own\n"
    "                    job's setup.  On PATH (default STATE_DIR/service.sock).\n"
    "                    Reads the configuration once, again on SIGHUP.  Takes\n"
    "                    -c, --libcxi, --socket, --broker-url, --state-dir, --node\n"
    "  clean [--all]     destroy job services of VNIs in [vni] pool that no job\n"
    "                    the broker has not released (active, lost, releasing)\n"
    "                    can own; never id 1 or system services.  It reads every\n"
    "                    such job, page by page; if it cannot (broker down,\n"
    "                    refused, bad answer) it destroys nothing, exit 1.\n"
    "                    --all (node-exclusive systems): every service but the\n"
    "                    default, system ones and those of unreleased jobs\n"
    "\n"
    "Without a command, run by slurmd as slurm.conf's Prolog= or Epilog=\n"
    "(SLURM_SCRIPT_CONTEXT prolog_slurmd or epilog_slurmd): the prolog or epilog\n"
    "of $SLURM_JOB_ID on $SLURMD_NODENAME, logged to syslog as well (slurmd keeps\n"
    "no hook output).  The prolog makes the job's RUN when this node's\n"
    "configuration has [api] node_run = true, and always exits 0: a failure is left "
    "in the\n"
    "job's record, for its steps to fail (policy=fail_closed) with the reason.\n"
    "The epilog exits 1 (slurmd drains the node) only when services stay.\n"
    "Slurm's launch setup needs no Prolog=: the node service (fmbroker-cxi serve)\n"
    "makes the job's setup for its first step, and its end when\n"
    "Epilog=/usr/sbin/fmbroker-slurm-prolog hands it over (a Prolog= of the same\n"
    "program hands it the prolog); that program runs this one where none answers.\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE     configuration (default " FMB_CONFIG_PATH
    ")\n"
    "      --libcxi PATH     libcxi to load (default [cxi] libcxi)\n"
    "      --socket PATH     the broker's socket (default [api] broker_url if set,\n"
    "                        else [api] socket)\n"
    "      --broker-url URL[,URL...]  replaces [api] broker_url: the broker's TLS\n"
    "                        listener, or an ordered list (active, standby) tried\n"
    "                        in turn when one cannot be reached\n"
    "      --state-dir DIR   this node's job records (default " JOBRECORD_DIR_DEFAULT
    ")\n"
    "      --node NAME       this node's name for reports (default: host name)\n"
    "  -n, --dry-run         print the descriptors, change nothing\n"
    "  -h, --help\n"
    "\n"
    "No NIC (or no libcxi and none in /sys/class/cxi): prolog and epilog succeed\n"
    "with nothing to do.  A chosen libcxi that does not load fails them.\n"
    "A report (created/destroyed/failed) the broker cannot take now is kept on\n"
    "the node and delivered later, so no VNI stays quarantined for want of it.\n"
    "A failed run's last line is its own job's reason (hooks show it to users).\n"
    "Exit status: 0 success, 1 failure (epilog: drain the node), 2 usage.\n";

/* The command's exit status. */
static int run_command (struct agent *ag)
{
    switch (ag->args.cmd) {
    case AGENT_PROLOG:
        return cmd_prolog (ag);
    case AGENT_EPILOG:
    case AGENT_HOUSEKEEPING:
        return cmd_epilog (ag);
    case AGENT_ENV:
        return cmd_env (ag);
    case AGENT_LIST:
        return cmd_list (ag);
    case AGENT_CLEAN:
        return cmd_clean (ag);
    case AGENT_REPORT:
        return cmd_report (ag);
    case AGENT_SERVE:
        return EXIT_USAGE; /* main() serves */
    }
    return EXIT_USAGE;
}

/* The command, and the reports kept from earlier runs; its status. */
static int run (struct agent *ag)
{
    /* OpenSSL initialises itself at the first broker call:
     * prolog and epilog given all facts never pay for it. */
    ag->retry_deadline_ms = fmb_monotime_ms () + (int64_t)ag->args.retry_busy * 1000;
    int rc = run_command (ag);
    /* Reports earlier runs could not deliver go now, unless this run
     * already found the broker away (in the node service: after its
     * answers, serve.c). */
    if ((ag->args.cmd == AGENT_PROLOG || ag->args.cmd == AGENT_EPILOG ||
         ag->args.cmd == AGENT_HOUSEKEEPING || ag->args.cmd == AGENT_CLEAN) &&
        !ag->args.dry_run && !ag->args.no_report && !ag->broker_down &&
        !ag->delivery_detached && !ag->in_service)
        report_deliver_pending (ag, false);
    /* The job's own reason last (ag->final_reason). */
    if (rc != 0 && ag->final_reason[0])
        fmb_log (LOG_ERR, "%s", ag->final_reason);
    return rc;
}

/* The command line parsed, the configuration read, the command run;
 * the exit status.  Run by slurmd (hook->active), the prolog makes the
 * job's RUN when this node's configuration says so. */
static int parse_and_run (struct agent *ag,
                          struct slurm_hook *hook,
                          int argc,
                          char **argv)
{
    struct fmb_error e;
    if (agent_args_parse (argc, argv, &ag->args, &e) < 0) {
        if (!hook->active) {
            fprintf (stderr, "fmbroker-cxi: %s\nTry 'fmbroker-cxi --help'.\n", e.text);
            return EXIT_USAGE;
        }
        fmb_log (LOG_ERR, "%s", e.text);
        agent_fail_job (ag, "%s", e.text);
        return EXIT_USAGE;
    }
    if (ag->args.help) {
        fputs (usage_text, stdout);
        return 0;
    }
    if (agent_setup (ag, NULL) < 0)
        return EXIT_USAGE;
    if (hook->prolog && ag->cfg.api_node_run) {
        if (slurm_hook_run (hook, &e) < 0) {
            fmb_log (LOG_ERR, "job %s: %s", ag->args.job, e.text);
            return agent_fail_job (ag, "job %s: %s", ag->args.job, e.text);
        }
        ag->args.run = hook->run;
    }
    return ag->args.cmd == AGENT_SERVE ? cmd_serve (ag) : run (ag);
}

int main (int argc, char **argv)
{
    static struct agent agent; /* large: not on the stack */
    struct agent *ag = &agent;
    struct slurm_hook hook;
    struct fmb_error e;
    int rc;
    fmb_log_init ("fmbroker-cxi", LOG_INFO);
    /* Run by slurmd as Prolog=/Epilog=: the job's command line from
     * Slurm's variables (slurmhook.h). */
    if (slurm_hook_args (argc, argv, NULL, &hook, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        agent_fail_job (ag, "%s", e.text);
        rc = EXIT_USAGE;
    } else if (hook.active)
        rc = parse_and_run (ag, &hook, hook.argc, hook.argv);
    else
        rc = parse_and_run (ag, &hook, argc, argv);
    if (hook.active)
        rc = slurm_hook_finish (ag, &hook, rc);
    cxilib_close (&ag->lib);
    api_target_clear (&ag->target);
    slurm_hook_clear (&hook);
    return rc;
}
