# shellcheck shell=bash
# The CPU time of processes, for benches that charge work to the process that did it (sourced by
# benches/apiserver.sh and benches/h2load.sh).

# cpu_ticks PID...: the CPU time (user + system, every thread, in clock ticks) of each process, one
# per line, 0 for no PID.
cpu_ticks() {
    local pid stat fields
    for pid in "$@"; do
        if [ -z "$pid" ]; then echo 0; continue; fi
        stat=$(<"/proc/$pid/stat")
        stat=${stat##*) } # the fields after the command name, which may hold spaces
        read -r -a fields <<<"$stat"
        echo $((fields[11] + fields[12])) # utime and stime, fields 14 and 15 of stat(5)
    done
}
