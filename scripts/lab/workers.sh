# Worker threads of the lab's daemons (issue 19): LAB_MUX_WORKERS=N gives every MUX the lab starts
# --workers N, LAB_HOST_WORKERS=N every host agent (N >= 2 needs LAB_DAEMON_IO=ring: the kernel spreads
# flows over the workers' ring sockets by PACKET_FANOUT; a host agent's by PACKET_FANOUT_CBPF, both
# directions of a flow to one worker). Empty or 1: the daemons' default (one thread). Scenario 41 runs
# the MUXes this way, scenario 42 both.
LAB_MUX_WORKERS=${LAB_MUX_WORKERS:-}
LAB_HOST_WORKERS=${LAB_HOST_WORKERS:-}

# _lab_workers_args KIND: the --workers arguments for a daemon of KIND (mux or host-agent), or nothing.
_lab_workers_args() {
  case ${1:-} in
    mux) [ -z "$LAB_MUX_WORKERS" ] || printf -- '--workers %s\n' "$LAB_MUX_WORKERS" ;;
    host-agent) [ -z "$LAB_HOST_WORKERS" ] || printf -- '--workers %s\n' "$LAB_HOST_WORKERS" ;;
  esac
}
