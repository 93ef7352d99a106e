# Worker threads of the lab's daemons (issue 19): LAB_MUX_WORKERS=N gives every MUX the lab starts
# --workers N, LAB_HOST_WORKERS=N every host agent (N >= 2 needs LAB_DAEMON_IO=ring: the kernel spreads
# flows over the workers' ring sockets by PACKET_FANOUT; a host agent's by PACKET_FANOUT_CBPF, both
# directions of a flow to one worker). Empty or 1: the daemons' default (one thread). Scenario 41 runs
# the MUXes this way, scenario 42 both.
LAB_MUX_WORKERS=${LAB_MUX_WORKERS:-}
LAB_HOST_WORKERS=${LAB_HOST_WORKERS:-}
# LAB_HOST_WORKERS_ON="host1 ...": only these host agents get LAB_HOST_WORKERS (and --io ring, whatever
# LAB_DAEMON_IO says); the others run as without LAB_HOST_WORKERS. Empty: every host agent. Scenario 38
# runs host1 with 2 workers and host2 with one thread, so both outbound NAT paths carry the same run.
LAB_HOST_WORKERS_ON=${LAB_HOST_WORKERS_ON:-}
# LAB_TEST_HOOKS=1: every MUX and host agent gets --test-hooks (POST /test/workers/<i>/exit on its status
# endpoint makes worker i exit; runtime/test-hooks.ts). Scenario 44 kills workers this way.
LAB_TEST_HOOKS=${LAB_TEST_HOOKS:-}

# _lab_host_workers_on NODE: whether LAB_HOST_WORKERS applies to host NODE (LAB_HOST_WORKERS_ON empty or naming it).
_lab_host_workers_on() {
  [ -n "$LAB_HOST_WORKERS" ] || return 1
  [ -z "$LAB_HOST_WORKERS_ON" ] && return 0
  case " $LAB_HOST_WORKERS_ON " in *" ${1:-} "*) return 0 ;; esac
  return 1
}

# _lab_workers_args KIND NODE: the --workers (and --test-hooks) arguments for a daemon of KIND (mux or host-agent) in NODE, or nothing.
_lab_workers_args() {
  case ${1:-} in
    mux) [ -z "$LAB_MUX_WORKERS" ] || printf -- '--workers %s\n' "$LAB_MUX_WORKERS" ;;
    host-agent) ! _lab_host_workers_on "${2:-}" || printf -- '--workers %s\n' "$LAB_HOST_WORKERS" ;;
  esac
  [ "$LAB_TEST_HOOKS" != 1 ] || printf -- '--test-hooks\n'
}

# _lab_daemon_io KIND NODE: the --io argument of a daemon of KIND in NODE: ring for a host agent that
# LAB_HOST_WORKERS_ON gives workers, else LAB_DAEMON_IO's (nothing when it is empty).
_lab_daemon_io() {
  if [ "${1:-}" = host-agent ] && [ -n "$LAB_HOST_WORKERS_ON" ] && _lab_host_workers_on "${2:-}"; then
    printf -- '--io\nring\n'
  elif [ -n "$LAB_DAEMON_IO" ]; then
    printf -- '--io\n%s\n' "$LAB_DAEMON_IO"
  fi
}

# lab_workers_env N: the lab's daemons with N worker threads each: every MUX and host agent --workers N on
# the ring path (LAB_DAEMON_IO=ring); set before lab_up.
lab_workers_env() {
  LAB_DAEMON_IO=ring
  LAB_MUX_WORKERS=$1
  LAB_HOST_WORKERS=$1
}

# _lab_test_hook NODE METHOD PATH: a test hook of NODE's daemon (needs LAB_TEST_HOOKS=1), its answer on stdout.
_lab_test_hook() {
  local port=$LAB_MUX_STATUS_PORT
  [ "$(_lab_node_kind "$1")" = host ] && port=$LAB_HOST_STATUS_PORT
  lab_exec "$1" curl -sf -m 5 -X "$2" "http://127.0.0.1:$port$3"
}

# lab_worker_exit NODE INDEX: worker INDEX of NODE's daemon exits (POST /test/workers/INDEX/exit); prints
# the answer (the worker and the thread id that exits).
lab_worker_exit() { _lab_test_hook "$1" POST "/test/workers/$2/exit"; }

# lab_worker_threads NODE: the thread id of each worker of NODE's daemon (GET /test/workers), as JSON.
lab_worker_threads() { _lab_test_hook "$1" GET /test/workers; }
