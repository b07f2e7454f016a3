-- Flux job shell: put the job's SLINGSHOT_* and FI_CXI_* variables into
-- every task's environment (fmbroker-cxi env), and the step id, which in
-- Flux is the job id path, unique within the reservation.
local id = shell.info.jobid
local f = io.popen ("fmbroker-cxi env --job " .. id .. " --format slurm 2>/dev/null")
if f then
    for line in f:lines () do
        local k, v = line:match ("^export ([%w_]+)=(.*)$")
        if k then shell.setenv (k, v) end
    end
    f:close ()
end
shell.setenv ("FI_CXI_COLL_JOB_STEP_ID", tostring (id))
