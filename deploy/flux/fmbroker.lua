-- Flux job shell plugin (shell lua.d, every instance level): put the
-- job's SLINGSHOT_* and FI_CXI_* variables into its tasks' environment.
-- fmbroker-env.sh prints them: in the system instance from the job's
-- record on this node (no broker call), in a sub-instance from what the
-- instance inherited from its enclosing job (no broker call), plus
-- FI_CXI_COLL_JOB_STEP_ID, the job's id path.  Variables of those names
-- from the submitting environment are dropped first, so a job without a
-- service here gets none; under FMBROKER_POLICY=fail_open, why goes to
-- the job's stderr (fmbroker-env.sh).
local dir = os.getenv ("FMBROKER_FLUX_DIR") or "/usr/share/fmbroker/flux"
local function ours (name)
    return name:match ("^SLINGSHOT_") or name:match ("^FI_CXI_")
end
local env = shell.getenv ()
if type (env) == "table" then
    for name, _ in pairs (env) do
        if ours (name) then shell.unsetenv (name) end
    end
end
-- Quoted for sh; neither ever holds a quote, and if one did it is dropped.
local function q (s)
    return "'" .. tostring (s or ""):gsub ("'", "") .. "'"
end
-- The job is shell.info.jobid.  Not FLUX_JOB_ID nor FLUX_JOB_ID_PATH:
-- lua.d runs before the shell sets them for the job, so here they are
-- the submitter's (a job submitted from inside another job would get
-- that job's record and step id).  The id path is worked out from this
-- instance's jobid-path (fmb_job_path).
local cmd = "FLUX_JOB_ID=" .. q (shell.info.jobid)
            .. " FLUX_JOB_ID_PATH= " .. q (dir .. "/fmbroker-env.sh")
local f = io.popen (cmd)
if f then
    for line in f:lines () do
        local name, value = line:match ("^([A-Z_][A-Z0-9_]*)=(.*)$")
        if name and ours (name) and not value:match ("%c") then
            shell.setenv (name, value)
        end
    end
    f:close ()
end
