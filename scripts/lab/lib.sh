# shellcheck shell=bash
# slbx lab library: builds one lab run (a set of network namespaces sharing a per-run prefix) from an
# slbx config, starts the backends and the daemons in it, and tears it all down again. Source it:
#
#   source scripts/lab/lib.sh
#
# Topology (docs/lab.md; `node dist/scripts/lab/plan.js --config F` prints it for a config):
#   clientK --eth0--[br0 router fab0]--[fabric: br0, MTU 1600]--fab0 muxN
#                                                              --fab0 hostN --PORT==eth0 NIC
# Namespaces are ${prefix}NODE: client1..N, router, fabric, one per mux, host and nic of the config.
# Nothing is created in, attached to or routed out of the root namespace; addresses come only from
# 198.18.0.0/15, 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32 (plan.ts checks).
#
# State of a lab NAME lives in runs/lab/NAME/: state.env (prefix, config, namespaces, every process
# started with what it is; removed by lab_down), config.yaml (the config the daemons read), plan.txt,
# logs/ (one log per process) and pcaps/. Logs and pcaps survive lab_down.
#
# Functions (all return non-zero on failure and print why on stderr; none calls exit, except
# lab_setup_scenario's traps):
#
#   lab_up [--name NAME] [--config FILE] [--clients N] [--muxes N] [--no-daemons] [--no-controller]
#       Creates a lab run: prefix slbx-XXXX- (random, unique among existing namespaces), namespaces,
#       bridges (bridge netfilter off), veths (checksum offload off), addresses, routes (the router
#       reaches each VIP through one multipath route over all muxes: static, or with a `bgp` section
#       learned by BIRD 2 from the muxes' BGP speakers, control socket RUN/bird.ctl, see lab_birdc),
#       backends (HTTP and UDP echo in each nic namespace), then unless --no-daemons the MUX and
#       host-agent daemons (host agents first), and waits until every daemon's GET /status says
#       "ready": true (20 s) and, with BGP, until the router routes every VIP over every mux.
#       --muxes N (1..8) replaces the config's muxes with mux1..muxN (198.18.0.11.., 2001:db8:f::11..;
#       scripts/lab/derive-config.ts; kept as RUN/derived.yaml).
#       NAME defaults to $LAB_NAME, else "default"; FILE to
#       examples/lab.yaml; N to 1 (at most 6; client k owns 198.51.100.(10+40(k-1)) and the 31 next,
#       and 32 from 2001:db8:c::(the same digits), in hex: client1 198.51.100.10-41, ::10-::2f).
#       Refuses a NAME that is up. On any failure it tears down what it made and returns 1. Sets
#       LAB_NAME and LAB_DIR. Environment: LAB_READY_TIMEOUT_S (20), LAB_MUX_JS, LAB_HOST_JS (the
#       daemons' entry points, default dist/mux/main.js and dist/host-agent/main.js), LAB_CONTROLLER_JS,
#       LAB_DAEMON_IO (pcap or ring: --io of every MUX and host agent started; empty: their default).
#       The controller (docs/controller.md): unless --no-controller (or --no-daemons), a `controller`
#       namespace on the fabric at .5 (198.18.0.5, 2001:db8:f::5) runs slbx-controller (API on
#       ADDR:8480 and 127.0.0.1:8480, state file RUN/controller-state.json seeded from the lab's
#       config) before the daemons, every daemon gets --controller http://198.18.0.5:8480 besides its
#       bootstrap --config, and lab_up also waits until every agent acked the controller's generation.
#       --no-controller: the daemons read the config file alone, as before the controller existed.
#   lab_down [NAME]
#       Stops the run's processes (recorded PIDs, only while they are inside the run's namespaces:
#       TERM, up to 3 s, then KILL; then anything else left in those namespaces), deletes the
#       namespaces (and with them every veth and bridge), removes state.env. Idempotent; safe after a
#       partial lab_up. NAME defaults to $LAB_NAME, else "default".
#   lab_use NAME            makes NAME the current lab of this shell (LAB_NAME, LAB_DIR)
#   lab_ns NODE             prints the namespace of a node (client1, router, fabric, mux1, host1, h1vm1)
#   lab_exec NODE CMD...    runs CMD in the node's namespace (ip netns exec)
#   lab_nodes [KIND]        prints the nodes (of a kind: client, router, fabric, mux, host, nic)
#   lab_derive_config --config FILE [--underlay ipv6] [--probe-interval-ms MS] [--max-flows N] ... [--out FILE]
#                           a variant of a config (scripts/lab/derive-config.ts; --help lists the options)
#   lab_json_get [--file F] [--lines] [--where P=V] [--type T] [--default V] PATH...
#                           a value of a JSON document or JSON-lines log (scripts/lab/json-get.ts): the lab
#                           never reads JSON with a regex; e.g. lab_daemon_status mux1 | lab_json_get generation
#   lab_status [NAME]       human-readable: namespaces and addresses, the router's VIP routes,
#                           processes alive, each daemon's /status summary
#   lab_daemon_status NODE  prints a daemon's GET /status JSON (mux: 127.0.0.1:9180, host: :9181)
#   lab_list                the labs of this checkout that have a state.env, with what is alive, and
#                           lab prefixes in `ip netns list` that no state.env accounts for (orphans)
#   lab_down_prefix PREFIX  takes down an orphan (its state.env was deleted): processes inside the
#                           PREFIX* namespaces, then the namespaces
#   lab_birdc ARGS...       birdc against the router's BIRD (labs whose config has a bgp section):
#                           lab_birdc show protocols; lab_birdc show route all 203.0.113.10/32
#   lab_router_nexthops VIP the next hops of the router's kernel route to VIP, sorted, one per line
#   lab_router_counters     the router's edge filter counters as JSON (nft, table inet slbx_edge;
#                           docs/security.md): edge_spoofed_source4, edge_not_vip4, edge_to_router4, ...
#   lab_wait_router [S]     waits until every VIP's route has exactly the running muxes as next hops
#   lab_mux_pid NODE        PID of the running mux daemon of NODE (status 1 when none runs)
#   lab_mux_stop NODE [SIG] stops the mux daemon of NODE with SIGTERM (graceful: BGP withdraw, Cease,
#                           grace) or KILL / INT, waits until it is gone, marks it stopped
#   lab_mux_start NODE      starts it again (or a mux lab_up left out); waits for ready and the route
#   lab_host_agent_pid NODE, lab_host_agent_stop NODE [SIG], lab_host_agent_start NODE: the same for
#                           the host agent of a host (with a controller, start waits for its generation);
#                           all six are _lab_daemon_{pid,stop,start} KIND NODE with KIND mux or host-agent
#   lab_slbctl ARGS...      slbctl in the controller's namespace: lab_slbctl agents; lab_slbctl backend
#                           drain web h1vm1 --wait (scripts/lab.sh exec controller node dist/cli/slbctl.js ...)
#   lab_controller_pid      PID of the running controller (status 1 when none runs)
#   lab_controller_stop [SIG]  stops the controller (TERM by default), waits until it is gone
#   lab_controller_start    starts it again from its state file; waits until its API answers
#   lab_backend_stop NIC http|udp
#                           stops the nic's HTTP (or UDP echo) backend process and waits until it is
#                           gone: its health probes then fail (connection refused)
#   lab_backend_start NIC http|udp
#                           starts it again with the command line lab_up used, waits for its ready line
#   lab_capture_start NODE IFACE NAME [FILTER...]
#       tcpdump -i IFACE -w pcaps/NAME.pcap --immediate-mode -s MTU+22 -B 32768 -Z root [FILTER] in the
#       node's namespace, recorded in state.env; returns once tcpdump is capturing (its "listening on"
#       line and the file exist). Prints the pcap path. --immediate-mode: without it libpcap hands
#       packets over in blocks up to 1 s late. -s: the snapshot length sizes each slot of libpcap's
#       ring; with -s 0 a veth with offloads gets 64 KiB slots, 512 in the 32 MiB of -B (KiB,
#       $LAB_CAPTURE_BUFFER_KB), and a capture that fell 512 frames behind on a busy machine dropped
#       packets; the interface's MTU + 22 (Ethernet header, two VLAN tags) gives about 20,000 slots and
#       cuts nothing ($LAB_CAPTURE_SNAPLEN overrides it). No -U: tcpdump buffers its writes and flushes
#       them when it stops, so it keeps up with fewer system calls.
#   lab_capture_stop NAME   stops one capture (SIGINT) and checks its drop counters (as below)
#   lab_capture_stop_all    stops every running capture of the lab and checks each: it first asks
#                           tcpdump for its counters (SIGUSR1), waits until it has written every
#                           packet its filter had received by then (it may be seconds behind on a busy
#                           machine), then sends SIGINT. Prints a warning per capture that dropped
#                           packets (kernel or interface), had not written everything received before
#                           the stop, holds a record cut short by the snapshot length or fewer records
#                           than tcpdump counted, or did not report its counters, and returns 1 if any
#                           did: a scenario fails on an incomplete capture. Packets that arrived after
#                           the stop began and were still in the ring are counted in its line, not
#                           written (they are after the traffic the scenario reasons about).
#   lab_check_send_errors   fails (naming daemon and counter) if a running MUX or host agent counted
#                           a send_error_*; LAB_SEND_ERRORS_EXPECTED="why" makes it a note
#   lab_setup_scenario NAME
#       For scenario scripts: LAB_NAME=NAME-$$, traps EXIT/INT/TERM to run lab_check_send_errors and
#       lab_down (keeping the script's exit status; send errors or a failed teardown turn success into
#       1), and checks that we are root and
#       can create namespaces; if not, prints why and exits 77 (skipped), or 1 when $CI is set.
#       Bash runs a trap only when the current foreground command ends: run long waits as
#       `cmd & wait $!` so that a TERM tears the lab down at once (Ctrl-C reaches the foreground
#       command too, so it is prompt anyway).
#
# Example scenario:
#   set -euo pipefail
#   source scripts/lab/lib.sh
#   lab_setup_scenario 01-http
#   lab_up
#   lab_capture_start mux1 fab0 mux1-fab0 >/dev/null
#   lab_exec client1 node dist/scripts/lab/client.js http --url http://203.0.113.10/ --count 100 --json "$LAB_DIR/http.json"
#   lab_capture_stop_all
#   ... decode "$LAB_DIR/pcaps/mux1-fab0.pcap" with the project's codecs ...
#
# Processes: daemons log to logs/NODE.log, backends to logs/NIC-http.log and logs/NIC-udp-echo.log,
# captures to logs/capture-NAME.log. Status endpoints listen on loopback inside their namespace.

SLBX_ROOT=${SLBX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
LAB_NAME=${LAB_NAME:-}
LAB_DIR=${LAB_DIR:-}
LAB_MUX_STATUS_PORT=9180
LAB_HOST_STATUS_PORT=9181
LAB_READY_TIMEOUT_S=${LAB_READY_TIMEOUT_S:-20}
LAB_BACKEND_TIMEOUT_S=${LAB_BACKEND_TIMEOUT_S:-10}
LAB_KILL_WAIT_S=3
LAB_CAPTURE_BUFFER_KB=${LAB_CAPTURE_BUFFER_KB:-32768}
# The daemons' entry points (overridable, e.g. to test the lab with stand-ins).
LAB_MUX_JS=${LAB_MUX_JS:-$SLBX_ROOT/dist/mux/main.js}
LAB_HOST_JS=${LAB_HOST_JS:-$SLBX_ROOT/dist/host-agent/main.js}
LAB_CONTROLLER_JS=${LAB_CONTROLLER_JS:-$SLBX_ROOT/dist/controller/main.js}
LAB_SLBCTL_JS=${LAB_SLBCTL_JS:-$SLBX_ROOT/dist/cli/slbctl.js}
# The daemons' capture and injection (their --io: pcap or ring); empty: their default (pcap).
LAB_DAEMON_IO=${LAB_DAEMON_IO:-}
# The host agents' --flow-snapshot-ms when set (e.g. LAB_FLOW_SNAPSHOT_MS=600000 lab_host_agent_start host1:
# no snapshot after the start's, so that its flows are in the flow journal only); empty: their default.
LAB_NODE=(node --enable-source-maps)
# shellcheck source=delay.sh
source "$SLBX_ROOT/scripts/lab/delay.sh"  # delay links: lab_up --delays FILE, lab_delay_set
# shellcheck source=prometheus.sh
source "$SLBX_ROOT/scripts/lab/prometheus.sh"  # a Prometheus scraping the daemons: LAB_PROMETHEUS=1, lab_prometheus_up
# shellcheck source=controllers.sh
source "$SLBX_ROOT/scripts/lab/controllers.sh"  # controller replicas on etcd: LAB_CONTROLLERS=N, lab_replica_stop K
# shellcheck source=vlan.sh
source "$SLBX_ROOT/scripts/lab/vlan.sh"  # VLAN nics: the VM's addresses on eth0.VLAN, its port a trunk (examples/lab-vlan.yaml)
# shellcheck source=routed.sh
source "$SLBX_ROOT/scripts/lab/routed.sh"  # a routed underlay: racks behind leaf routers (examples/lab-routed.yaml)
# shellcheck source=pids.sh
source "$SLBX_ROOT/scripts/lab/pids.sh"  # PID reuse: a new process drops the records of an earlier one with its PID
# shellcheck source=outbound.sh
source "$SLBX_ROOT/scripts/lab/outbound.sh"  # outbound NAT: the remote server (lab_snat_server_start) and client (examples/lab-outbound.yaml)
# shellcheck source=workers.sh
source "$SLBX_ROOT/scripts/lab/workers.sh"  # worker threads: LAB_MUX_WORKERS=N (--workers N on every MUX)

_lab_log() { printf '[lab] %s\n' "$*" >&2; }
_lab_err() { printf '[lab] error: %s\n' "$*" >&2; }
_lab_now() { printf '%s' "${EPOCHREALTIME/./}"; }  # microseconds
_lab_elapsed() { local us=$(( $(_lab_now) - $1 )); printf '%d.%02d' $((us / 1000000)) $((us % 1000000 / 10000)); }

_lab_default_name() { printf '%s' "${1:-${LAB_NAME:-default}}"; }
_lab_dir_of() { printf '%s/runs/lab/%s' "$SLBX_ROOT" "$1"; }

_lab_check_name() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]] || { _lab_err "bad lab name '$1': letters, digits, _ . - (at most 64)"; return 1; }
}

# Appends one shell assignment to the state file (values quoted with %q).
_lab_state_add() {  # FILE VAR VALUE [append-to-array]
  local file=$1 var=$2 value=$3 mode=${4:-}
  if [ "$mode" = array ]; then printf '%s+=(%q)\n' "$var" "$value" >>"$file"
  else printf '%s=%q\n' "$var" "$value" >>"$file"; fi
}

# Loads runs/lab/NAME/state.env into the SLBX_LAB_* globals; 1 when the lab has no state.
_lab_load() {
  local name
  name=$(_lab_default_name "${1:-}")
  _lab_check_name "$name" || return 1
  SLBX_LAB_NAME='' SLBX_LAB_PREFIX='' SLBX_LAB_PREFIX_CLAIMED=0 SLBX_LAB_CONFIG='' SLBX_LAB_CONFIG_SOURCE=''
  SLBX_LAB_CLIENTS='' SLBX_LAB_DAEMONS='' SLBX_LAB_STARTED='' SLBX_LAB_STATE='' SLBX_LAB_CONTROLLER_URL=''
  SLBX_LAB_NODES=() SLBX_LAB_NAMESPACES=() SLBX_LAB_PROCS=() SLBX_LAB_STOPPED=()
  LAB_NAME=$name
  LAB_DIR=$(_lab_dir_of "$name")
  [ -f "$LAB_DIR/state.env" ] || return 1
  # shellcheck disable=SC1091
  source "$LAB_DIR/state.env"
}

_lab_require_up() {
  _lab_load "${1:-}" || { _lab_err "lab '$(_lab_default_name "${1:-}")' is not up (no $(_lab_dir_of "$(_lab_default_name "${1:-}")")/state.env); start it with scripts/lab.sh up"; return 1; }
}

_lab_pid_alive() {  # PID: exists and is not a zombie
  local st
  [ -r "/proc/$1/stat" ] || return 1
  st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# True when PID is alive and in one of the lab's namespaces (so a recycled PID is never signalled).
_lab_pid_ours() {
  local pid=$1 ino ns
  _lab_pid_alive "$pid" || return 1
  ino=$(stat -L -c '%d:%i' "/proc/$pid/ns/net" 2>/dev/null) || return 1
  for ns in "${SLBX_LAB_NAMESPACES[@]}"; do
    [ "$(stat -L -c '%d:%i' "/run/netns/$ns" 2>/dev/null)" = "$ino" ] && return 0
  done
  return 1
}

_lab_node_known() {
  local n
  for n in "${SLBX_LAB_NODES[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

# Prints the plan line of a node of KIND (mux, host, nic, client), fields separated by spaces.
_lab_plan_line() { awk -v k="$1" -v n="$2" '$1 == k && $2 == n { print; exit }' "$LAB_DIR/plan.txt"; }

_lab_node_kind() {
  case $1 in
    router|fabric|controller) printf '%s' "$1"; return 0 ;;
  esac
  awk -v n="$1" '($1 == "client" || $1 == "mux" || $1 == "host" || $1 == "nic") && $2 == n { print $1; exit }' "$LAB_DIR/plan.txt"
}

# Loads the current lab ($LAB_NAME, else "default") unless it is already loaded in this shell.
_lab_ensure_loaded() {
  if [ -z "${SLBX_LAB_PREFIX:-}" ] || [ "${SLBX_LAB_NAME:-}" != "$(_lab_default_name)" ] || [ -z "${LAB_DIR:-}" ]; then
    _lab_require_up || return 1
  fi
  return 0
}

lab_use() {
  _lab_require_up "${1:-}"
}

lab_ns() {
  local node=${1:-}
  [ -n "$node" ] || { _lab_err 'usage: lab_ns NODE'; return 2; }
  _lab_ensure_loaded || return 1
  _lab_node_known "$node" || { _lab_err "lab '$LAB_NAME' has no node '$node' (nodes: ${SLBX_LAB_NODES[*]})"; return 1; }
  printf '%s%s\n' "$SLBX_LAB_PREFIX" "$node"
}

lab_exec() {
  local ns
  [ $# -ge 2 ] || { _lab_err 'usage: lab_exec NODE CMD [ARGS...]'; return 2; }
  _lab_ensure_loaded || return 1
  ns=$(lab_ns "$1") || return 1
  shift
  # slbctl finds the controller's API token here (runs/lab/NAME/api-token, mode 600)
  SLBX_TOKEN_FILE=${SLBX_TOKEN_FILE:-$LAB_DIR/api-token} ip netns exec "$ns" "$@"
}

lab_nodes() {
  local n
  _lab_ensure_loaded || return 1
  for n in "${SLBX_LAB_NODES[@]}"; do
    if [ -z "${1:-}" ] || [ "$(_lab_node_kind "$n")" = "$1" ]; then printf '%s\n' "$n"; fi
  done
  return 0
}

# ---------------------------------------------------------------------------------------------
# lab_up

# lab_derive_config ARGS...: a config variant for a scenario (scripts/lab/derive-config.ts: --muxes,
# --underlay, --probe-interval-ms, the flow table's sizes; --out FILE). Fails when the result is no
# valid config (the checker's message names the field).
lab_derive_config() { "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/derive-config.js" "$@"; }

# lab_json_get ARGS...: one value of JSON (stdin or --file; --lines for a JSON-lines log), by path, of a
# checked type (scripts/lab/json-get.ts; --help). Status 1 when the input is no JSON or has no such value.
lab_json_get() { "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/json-get.js" "$@"; }

lab_up() {
  local name='' config="$SLBX_ROOT/examples/lab.yaml" clients=1 daemons=1 muxes='' controller=1
  while [ $# -gt 0 ]; do
    case $1 in
      --name) name=${2:-}; shift 2 || { _lab_err '--name needs a value'; return 2; } ;;
      --name=*) name=${1#*=}; shift ;;
      --config) config=${2:-}; shift 2 || { _lab_err '--config needs a value'; return 2; } ;;
      --config=*) config=${1#*=}; shift ;;
      --clients) clients=${2:-}; shift 2 || { _lab_err '--clients needs a value'; return 2; } ;;
      --clients=*) clients=${1#*=}; shift ;;
      --no-daemons) daemons=0; shift ;;
      --no-controller) controller=0; shift ;;
      --muxes) muxes=${2:-}; shift 2 || { _lab_err '--muxes needs a value'; return 2; } ;;
      --muxes=*) muxes=${1#*=}; shift ;;
      --delays) LAB_DELAYS=${2:-}; shift 2 || { _lab_err '--delays needs a value'; return 2; } ;;  # scripts/lab/delay.sh
      *) _lab_err "lab_up: unknown argument '$1' (lab_up [--name NAME] [--config FILE] [--clients N] [--muxes N] [--no-daemons] [--no-controller])"; return 2 ;;
    esac
  done
  name=$(_lab_default_name "$name")
  _lab_check_name "$name" || return 2
  [[ $clients =~ ^[1-9][0-9]*$ ]] || { _lab_err "--clients must be a number 1..6, got '$clients'"; return 2; }
  [ -z "$muxes" ] || [[ $muxes =~ ^[1-8]$ ]] || { _lab_err "--muxes must be a number 1..8, got '$muxes'"; return 2; }
  local t0 dir state
  t0=$(_lab_now)
  dir=$(_lab_dir_of "$name")
  state=$dir/state.env

  [ "$(id -u)" = 0 ] || { _lab_err 'lab_up needs root (network namespaces)'; return 1; }
  local tool
  for tool in ip node curl ethtool sysctl; do
    command -v "$tool" >/dev/null || { _lab_err "'$tool' is not installed (scripts/lab.sh up installs what is missing)"; return 1; }
  done
  [ -f "$config" ] || { _lab_err "no config file '$config'"; return 1; }
  config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
  local f
  for f in plan backend client bird-conf derive-config router-filter json-get; do
    [ -f "$SLBX_ROOT/dist/scripts/lab/$f.js" ] || { _lab_err "dist/scripts/lab/$f.js is missing: build first (npx tsc -p tsconfig.json, or scripts/lab.sh up)"; return 1; }
  done
  if [ "$daemons" = 1 ]; then
    [ "$controller" = 1 ] && [ ! -f "$LAB_CONTROLLER_JS" ] && { _lab_err "${LAB_CONTROLLER_JS#"$SLBX_ROOT"/} is missing: build it, or bring the lab up without it (--no-controller)"; return 1; }
    for f in "$LAB_MUX_JS" "$LAB_HOST_JS"; do
      [ -f "$f" ] || { _lab_err "${f#"$SLBX_ROOT"/} is missing: build the daemons, or bring the lab up without them (--no-daemons)"; return 1; }
    done
  fi

  # One lab per name: refuse if it is up; a state.env whose namespaces are all gone is stale.
  if _lab_load "$name"; then
    local ns alive=0
    for ns in "${SLBX_LAB_NAMESPACES[@]}"; do [ -e "/run/netns/$ns" ] && alive=1; done
    if [ "$alive" = 1 ]; then
      _lab_err "lab '$name' is already up (prefix $SLBX_LAB_PREFIX); take it down first: scripts/lab.sh down --name $name"
      return 1
    fi
    _lab_log "lab '$name': removing a stale state.env (none of its namespaces exists)"
    rm -f "$state"
  fi

  # The plan, before anything is created: a bad config fails here and leaves nothing behind.
  # --muxes N: the same config with mux1..muxN (scripts/lab/derive-config.ts), kept as derived.yaml
  if [ -n "$muxes" ]; then
    mkdir -p "$dir" || return 1
    "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/derive-config.js" --config "$config" --muxes "$muxes" --out "$dir/derived.yaml" || {
      _lab_err "cannot derive a config with $muxes muxes from $config"; return 1; }
    config=$dir/derived.yaml
  fi
  local plan
  plan=$("${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/plan.js" --config "$config" --clients "$clients") || {
    _lab_err "the config does not make a lab (see above): $config"; return 1; }

  mkdir -p "$dir/logs" "$dir/pcaps" || return 1
  ( set -C; : >"$state" ) 2>/dev/null || { _lab_err "lab '$name' is being brought up by someone else ($state exists)"; return 1; }
  LAB_NAME=$name
  LAB_DIR=$dir
  printf '%s\n' "$plan" >"$dir/plan.txt"
  printf '%s\n' "$plan" | sed -n 's/^warning /[lab] warning: /p' >&2
  if [ "$config" != "$dir/config.yaml" ]; then cp "$config" "$dir/config.yaml" || { rm -f "$state"; return 1; }; fi

  # Everything else runs in a subshell with errexit, so one failing command stops the build; the
  # caller's own errexit is off meanwhile, so the cleanup below always runs.
  local had_e=0 rc
  case $- in *e*) had_e=1 ;; esac
  set +e
  (
    set -eEuo pipefail
    trap 'rc=$?; [[ $BASH_COMMAND == return* ]] || _lab_err "lab_up: command failed (exit $rc): $BASH_COMMAND"' ERR
    _lab_build "$name" "$config" "$clients" "$daemons" "$controller"
  )
  rc=$?
  if [ "$rc" != 0 ]; then
    _lab_err "lab_up '$name' failed; tearing down what was built"
    lab_down "$name" >&2
    [ "$had_e" = 1 ] && set -e
    return 1
  fi
  [ "$had_e" = 1 ] && set -e
  _lab_load "$name" || return 1
  local nprocs=${#SLBX_LAB_PROCS[@]}
  _lab_log "lab '$name' up in $(_lab_elapsed "$t0") s: prefix $SLBX_LAB_PREFIX, ${#SLBX_LAB_NAMESPACES[@]} namespaces, $nprocs processes$([ "$daemons" = 1 ] || printf ' (no daemons)')"
}

_lab_prefix_in_use() {
  local ns _
  while read -r ns _; do [[ $ns == "$1"* ]] && return 0; done < <(ip netns list 2>/dev/null)
  return 1
}

# Runs inside lab_up's errexit subshell. Each step records what it created in state.env first.
_lab_build() {
  local name=$1 config=$2 clients=$3 daemons=$4 controller=${5:-1}
  local state=$LAB_DIR/state.env plan=$LAB_DIR/plan.txt
  # the controller runs only with the daemons; its URL goes to every daemon (--controller)
  [ "$daemons" = 1 ] || controller=0
  SLBX_LAB_CONTROLLER_URL=''
  if [ "$controller" = 1 ]; then
    SLBX_LAB_CONTROLLER_URL=$(awk '$1 == "controller" { print "http://" $2 ":" $6; exit }' "$plan")
    [ -n "$SLBX_LAB_CONTROLLER_URL" ] || { _lab_err "the plan has no controller line"; return 1; }
    _lab_controllers_plan "$state" || return 1  # LAB_CONTROLLERS=N: the replicas' URLs (scripts/lab/controllers.sh)
  fi
  printf '# slbx lab state, sourced by scripts/lab/lib.sh (lab_down removes it)\n' >>"$state"
  _lab_state_add "$state" SLBX_LAB_NAME "$name"
  _lab_state_add "$state" SLBX_LAB_CONFIG "$LAB_DIR/config.yaml"
  _lab_state_add "$state" SLBX_LAB_CONFIG_SOURCE "$config"
  _lab_state_add "$state" SLBX_LAB_CLIENTS "$clients"
  _lab_state_add "$state" SLBX_LAB_DAEMONS "$daemons"
  _lab_state_add "$state" SLBX_LAB_CONTROLLER_URL "$SLBX_LAB_CONTROLLER_URL"
  _lab_state_add "$state" SLBX_LAB_STARTED "$(date -Is)"

  # Claim a prefix: creating ${prefix}router is atomic (it fails if the name exists), so once it
  # succeeds every name with this prefix is ours, even against a concurrent lab_up.
  local prefix='' try cand
  for try in 1 2 3 4 5 6 7 8; do
    cand="slbx-$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')-"
    _lab_prefix_in_use "$cand" && continue
    if ip netns add "${cand}router" 2>/dev/null; then prefix=$cand; break; fi
  done
  [ -n "$prefix" ] || { _lab_err 'could not find a free namespace prefix'; return 1; }
  _lab_state_add "$state" SLBX_LAB_PREFIX "$prefix"
  _lab_state_add "$state" SLBX_LAB_PREFIX_CLAIMED 1
  _lab_state_add "$state" SLBX_LAB_NAMESPACES "${prefix}router" array
  SLBX_LAB_PREFIX=$prefix

  # Nodes, in the order they are built.
  local nodes=(router fabric) kind n
  [ "$controller" = 1 ] && nodes+=(controller)
  while read -r -u 3 kind n _; do
    case $kind in client|mux|host|nic) nodes+=("$n") ;; esac
  done 3<"$plan"
  printf 'SLBX_LAB_NODES=(%s)\n' "${nodes[*]}" >>"$state"

  # --- namespaces and their sysctls
  local common=(net.ipv6.conf.all.keep_addr_on_down=1 net.ipv6.conf.default.keep_addr_on_down=1
    net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0)
  local fwd_off=(net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0)
  for n in "${nodes[@]}"; do
    local ns=$prefix$n
    if [ "$n" != router ]; then
      ip netns add "$ns"
      _lab_state_add "$state" SLBX_LAB_NAMESPACES "$ns" array
    fi
    ip -n "$ns" link set lo up
    case $n in
      router)
        # ECMP on the 5-tuple (policy 3, fields 0x37: addresses, protocol, ports), as a hardware router
        # hashes. Policy 1 would take the hash the client's socket set (sk_txhash, kept across the veth),
        # which TCP draws again at each SYN or RTO retransmission: a retransmission then changed MUX
        # (docs/bgp.md "A lab finding"; scenario 10 checks every flow against `ip route get`).
        ip netns exec "$ns" sysctl -q -w "${common[@]}" net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
          net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
          net.ipv4.fib_multipath_hash_policy=3 net.ipv4.fib_multipath_hash_fields=0x37 \
          net.ipv6.fib_multipath_hash_policy=3 net.ipv6.fib_multipath_hash_fields=0x37 ;;
      fabric)  # pure L2: no IPv6 on the bridge or its ports (no link-local chatter in captures)
        ip netns exec "$ns" sysctl -q -w "${common[@]}" "${fwd_off[@]}" \
          net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 ;;
      *)
        ip netns exec "$ns" sysctl -q -w "${common[@]}" "${fwd_off[@]}" ;;
    esac
    case $n in router|fabric) _lab_bridge_nf_off "$ns" ;; esac
  done

  local R=${prefix}router F=${prefix}fabric
  local fabric_mtu r_c4 r_c6 r_f4 r_f6 r_port r_fmac r_cmac
  read -r _ fabric_mtu < <(awk '$1 == "fabric"' "$plan")
  read -r _ r_c4 r_c6 r_f4 r_f6 r_port r_fmac r_cmac < <(awk '$1 == "router"' "$plan")

  # --- the fabric: one bridge, a veth per router / mux / host (fab0 on the node's side)
  ip -n "$F" link add br0 type bridge forward_delay 0 stp_state 0 mcast_snooping 0
  ip -n "$F" link set br0 mtu "$fabric_mtu" up
  local fab_ports=()
  _lab_fabric_link() {  # NODE PORT MAC ADDR4 ADDR6|-
    local ns=$prefix$1
    ip -n "$F" link add "$2" mtu "$fabric_mtu" type veth peer name fab0 address "$3" mtu "$fabric_mtu" netns "$ns"
    ip -n "$F" link set "$2" master br0 up
    fab_ports+=("$2")
    ip -n "$ns" addr add "$4/24" dev fab0
    if [ "$5" != - ]; then ip -n "$ns" addr add "$5/64" dev fab0 nodad; fi
    ip -n "$ns" link set fab0 up
  }
  _lab_fabric_link router "$r_port" "$r_fmac" "$r_f4" "$r_f6"
  local a4 a6 port mac
  while read -r -u 3 kind n a4 a6 port mac; do
    case $kind in mux|host) _lab_fabric_link "$n" "$port" "$mac" "$a4" "$a6" ;; esac
  done 3<"$plan"
  if [ "$controller" = 1 ]; then
    read -r _ a4 a6 port mac _ < <(awk '$1 == "controller"' "$plan")
    _lab_fabric_link controller "$port" "$mac" "$a4" "$a6"
    _lab_tx_off "${prefix}controller" fab0
  fi
  _lab_tx_off "$F" "${fab_ports[@]}"

  # --- hosts: default routes to the router (the DSR return path)
  while read -r -u 3 kind n _; do
    [ "$kind" = host ] || continue
    _lab_routed_racked "$n" && continue  # behind a leaf: its route comes with the rack (routed.sh)
    ip -n "$prefix$n" route add default via "$r_f4" dev fab0
    if [ "$r_f6" != - ]; then ip -n "$prefix$n" -6 route add default via "$r_f6" dev fab0; fi
  done 3<"$plan"
  while read -r -u 3 kind n _; do
    case $kind in mux|host) _lab_tx_off "$prefix$n" fab0 ;; esac
  done 3<"$plan"
  _lab_routed_build "$prefix" "$state"  # racks behind leaf routers, if the plan has any (routed.sh)

  # --- the client segment: a bridge in the router, a veth per client
  ip -n "$R" link add br0 address "$r_cmac" type bridge forward_delay 0 stp_state 0 mcast_snooping 0
  ip -n "$R" addr add "$r_c4/24" dev br0
  ip -n "$R" addr add "$r_c6/64" dev br0 nodad
  ip -n "$R" link set br0 up
  local router_ports=(fab0) addrs4 addrs6 a
  while read -r -u 3 kind n port mac addrs4 addrs6; do
    [ "$kind" = client ] || continue
    local C=$prefix$n
    ip -n "$R" link add "$port" type veth peer name eth0 address "$mac" netns "$C"
    ip netns exec "$R" sysctl -q -w "net/ipv6/conf/$port/disable_ipv6=1"
    ip -n "$R" link set "$port" master br0 up
    router_ports+=("$port")
    {
      for a in ${addrs4//,/ }; do printf 'addr add %s/24 dev eth0\n' "$a"; done
      # IPv6 lists the newest address first: add the client's own (first) address last
      local v6=(${addrs6//,/ }) j
      for ((j = ${#v6[@]} - 1; j >= 0; j--)); do printf 'addr add %s/64 dev eth0 nodad\n' "${v6[$j]}"; done
      printf 'link set eth0 up\n'
      # the first address of each family is the client's own: the default routes prefer it
      printf 'route add default via %s dev eth0 src %s\n' "$r_c4" "${addrs4%%,*}"
      printf 'route add default via %s dev eth0 src %s\n' "$r_c6" "${addrs6%%,*}"
    } | ip -n "$C" -batch -
    _lab_tx_off "$C" eth0
  done 3<"$plan"
  _lab_tx_off "$R" "${router_ports[@]}"

  # --- the router's edge filter (scripts/lab/router-filter.ts, docs/security.md): from the outside
  # only VIPs, no forged source of ours, nothing to the router but ICMP; strict uRPF on the fabric side
  command -v nft >/dev/null || { _lab_err "nftables is not installed (apt-get install nftables)"; return 1; }
  "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/router-filter.js" --config "$LAB_DIR/config.yaml" --clients "$clients" >"$LAB_DIR/router.nft"
  ip netns exec "$R" nft -f "$LAB_DIR/router.nft"

  # --- the router's routes to the VIPs: with a bgp section, BIRD learns them from the muxes (one
  # multipath route per VIP, docs/bgp.md); without, one static multipath route over every mux
  if grep -q '^bgp ' "$plan"; then
    _lab_bird_start "$clients"
  else
    local vip plen hops h
    while read -r -u 3 kind vip plen hops; do
      [ "$kind" = vip ] || continue
      [ "$hops" != - ] || continue
      local args=()
      for h in ${hops//,/ }; do args+=(nexthop via "$h" dev fab0); done
      if [ "${#args[@]}" = 5 ]; then args=(via "${hops}" dev fab0); fi
      ip -n "$R" route add "$vip/$plen" "${args[@]}"
    done 3<"$plan"
  fi

  # --- hosts and nics: a veth per nic, the host side named like the port (no address, no IPv6)
  local host gw4 gw6 tcp udp
  while read -r -u 3 kind n host port mac a4 a6 gw4 gw6 tcp udp; do
    [ "$kind" = nic ] || continue
    local H=$prefix$host N=$prefix$n
    ip -n "$H" link add "$port" type veth peer name eth0 address "$mac" netns "$N"
    ip netns exec "$H" sysctl -q -w "net/ipv6/conf/$port/disable_ipv6=1"
    ip -n "$H" link set "$port" up
    {
      if [ "$a4" != - ]; then printf 'addr add %s/24 dev eth0\n' "$a4"; fi
      if [ "$a6" != - ]; then printf 'addr add %s/64 dev eth0 nodad\n' "$a6"; fi
      printf 'link set eth0 up\n'
      if [ "$gw4" != - ]; then printf 'route add default via %s dev eth0 onlink\n' "$gw4"; fi
      if [ "$gw6" != - ]; then printf 'route add default via %s dev eth0 onlink\n' "$gw6"; fi
    } | ip -n "$N" -batch -
    _lab_tx_off "$H" "$port"
    _lab_tx_off "$N" eth0
  done 3<"$plan"
  _lab_vlan_build "$prefix" "$plan"  # nics of vlan networks: eth0.VLAN in the VM (vlan.sh)

  # --- backends: HTTP and UDP echo in every nic namespace (before the daemons: they are probed)
  local backend_pids=() backend_logs=()
  while read -r -u 3 kind n host port mac a4 a6 gw4 gw6 tcp udp; do
    [ "$kind" = nic ] || continue
    _lab_spawn "$n" backend "$n http" "$LAB_DIR/logs/$n-http.log" \
      "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/backend.js" http --name "$n" --ports "$tcp"
    backend_pids+=("$LAB_SPAWNED_PID") backend_logs+=("$LAB_DIR/logs/$n-http.log")
    _lab_spawn "$n" backend "$n udp-echo" "$LAB_DIR/logs/$n-udp-echo.log" \
      "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/backend.js" udp-echo --name "$n" --ports "$udp"
    backend_pids+=("$LAB_SPAWNED_PID") backend_logs+=("$LAB_DIR/logs/$n-udp-echo.log")
  done 3<"$plan"
  _lab_wait_backends backend_pids backend_logs

  _lab_delay_build  # delay links of lab_up --delays FILE, before any daemon sends (scripts/lab/delay.sh)
  [ "$daemons" = 1 ] || { _lab_state_add "$state" SLBX_LAB_STATE up; return 0; }

  # --- the controller first (the daemons watch it), then the daemons: host agents first (they serve
  # what the muxes send), then the muxes
  if [ "$controller" = 1 ]; then
    rm -f "$LAB_DIR/controller-state.json" "$LAB_DIR/controller-state.json.tmp" "$LAB_DIR/api-token"  # a new lab: a new state and token
    _lab_controller_spawn
  fi
  rm -rf "$LAB_DIR/state"  # a new lab: no flow snapshot of an earlier one (the host agents' --state-dir)
  local daemon_nodes=()
  while read -r -u 3 kind n _; do
    [ "$kind" = host ] || continue
    _lab_daemon_spawn host-agent "$n"
    daemon_nodes+=("$n:$LAB_SPAWNED_PID:$LAB_HOST_STATUS_PORT")
  done 3<"$plan"
  while read -r -u 3 kind n _; do
    [ "$kind" = mux ] || continue
    _lab_daemon_spawn mux "$n"
    daemon_nodes+=("$n:$LAB_SPAWNED_PID:$LAB_MUX_STATUS_PORT")
  done 3<"$plan"
  _lab_wait_daemons "${daemon_nodes[@]}"
  [ "$controller" = 1 ] && _lab_wait_agents
  # with BGP: until the router routes every VIP over every mux (their sessions are up and announced)
  if grep -q '^bgp ' "$plan"; then
    _lab_load "$name"
    lab_wait_router
  fi
  _lab_state_add "$state" SLBX_LAB_STATE up
}

# The bridges must be plain wires. With br_netfilter loaded (as here), a new namespace starts with
# bridge-nf-call-iptables=1, and the bridge then silently drops bridged IPv4 frames it finds malformed
# (IHL, total length, header checksum: br_validate_ipv4) before any MUX could see and count them.
_lab_bridge_nf_off() {
  ip netns exec "$1" sh -c '[ ! -d /proc/sys/net/bridge ] || sysctl -q -w net.bridge.bridge-nf-call-iptables=0 \
    net.bridge.bridge-nf-call-ip6tables=0 net.bridge.bridge-nf-call-arptables=0'
}

# ethtool -K IF tx off for each interface, in one exec: otherwise captures show incomplete checksums
# and 64 KB segments (checksum offload on veths).
_lab_tx_off() {
  local ns=$1
  shift
  [ $# -gt 0 ] || return 0
  ip netns exec "$ns" sh -c 'for i do ethtool -K "$i" tx off >/dev/null || { echo "ethtool -K $i tx off failed" >&2; exit 1; }; done' sh "$@"
}

# Starts CMD in NODE's namespace in the background, output to LOG; records the PID (LAB_SPAWNED_PID).
# `ip netns exec` execs CMD after setns, so the recorded PID is CMD's own.
_lab_spawn() {  # NODE KIND WHAT LOG CMD...
  local node=$1 kind=$2 what=$3 log=$4
  shift 4
  ip netns exec "$SLBX_LAB_PREFIX$node" "$@" >"$log" 2>&1 </dev/null &
  LAB_SPAWNED_PID=$!
  disown "$LAB_SPAWNED_PID" 2>/dev/null || true
  _lab_pid_reused "$LAB_SPAWNED_PID"
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_PROCS "$LAB_SPAWNED_PID $kind $node $what" array
}

_lab_tail() {  # LOG: the end of a log, indented
  if [ -s "$1" ]; then tail -n 15 "$1" | sed 's/^/    | /' >&2; else printf '    | (%s is empty)\n' "$1" >&2; fi
  return 0
}

# Waits until every backend printed its ready line (array names of pids and logs).
_lab_wait_backends() {
  local -n _pids=$1 _logs=$2
  local deadline=$(( $(_lab_now) + LAB_BACKEND_TIMEOUT_S * 1000000 )) i late files idx got
  local -A ready=()
  while :; do
    # one pass starting after the deadline decides, so a slow pass cannot miss a backend that was ready
    late=0; [ "$(_lab_now)" -gt "$deadline" ] && late=1
    files=() idx=()
    for i in "${!_pids[@]}"; do [ -n "${ready[$i]:-}" ] || { files+=(--file "${_logs[$i]}"); idx+=("$i"); }; done
    [ ${#idx[@]} = 0 ] && return 0
    # the first line of each log with "event": "ready" (one reader for all of them: a pass is one process)
    mapfile -t got < <(lab_json_get --lines --where event=ready --default - "${files[@]}" event 2>/dev/null)
    for i in "${!idx[@]}"; do
      [ "${got[$i]:-}" = ready ] && { ready[${idx[$i]}]=1; continue; }
      if ! _lab_pid_alive "${_pids[${idx[$i]}]}"; then
        _lab_err "backend ${_logs[${idx[$i]}]##*/} exited before it was ready:"
        _lab_tail "${_logs[${idx[$i]}]}"
        return 1
      fi
    done
    local pending=0
    for i in "${!_pids[@]}"; do [ -n "${ready[$i]:-}" ] || pending=$((pending + 1)); done
    [ "$pending" = 0 ] && return 0
    if [ "$late" = 1 ]; then
      _lab_err "$pending backend(s) not ready after ${LAB_BACKEND_TIMEOUT_S} s"
      for i in "${!_pids[@]}"; do [ -n "${ready[$i]:-}" ] || _lab_tail "${_logs[$i]}"; done
      return 1
    fi
    sleep 0.05
  done
}

# Waits until every daemon (NODE:PID:PORT) answers GET /status with "ready": true.
_lab_wait_daemons() {
  local deadline=$(( $(_lab_now) + LAB_READY_TIMEOUT_S * 1000000 )) d node pid port pending late i files got
  local left=("$@") dir=$LAB_DIR/.ready
  mkdir -p "$dir" || return 1
  while [ ${#left[@]} -gt 0 ]; do
    # one pass starting after the deadline decides, so a slow pass cannot miss a daemon that was ready
    late=0; [ "$(_lab_now)" -gt "$deadline" ] && late=1
    files=()
    for d in "${left[@]}"; do
      IFS=: read -r node pid port <<<"$d"
      if ! _lab_pid_alive "$pid"; then
        _lab_err "daemon $node (pid $pid) exited before it was ready; logs/$node.log:"
        _lab_tail "$LAB_DIR/logs/$node.log"
        return 1
      fi
      rm -f "$dir/$node.json"
      ip netns exec "$SLBX_LAB_PREFIX$node" curl -s -m 1 -o "$dir/$node.json" "http://127.0.0.1:$port/status" 2>/dev/null || true
      files+=(--file "$dir/$node.json")
    done
    # each status's "ready" (one reader for all of them; a status not fetched or cut short: false)
    mapfile -t got < <(lab_json_get --type boolean --default false "${files[@]}" ready 2>/dev/null)
    pending=()
    for i in "${!left[@]}"; do [ "${got[$i]:-}" = true ] || pending+=("${left[$i]}"); done
    left=("${pending[@]}")
    [ ${#left[@]} = 0 ] && { rm -rf "$dir"; return 0; }
    if [ "$late" = 1 ]; then
      for d in "${left[@]}"; do
        IFS=: read -r node pid port <<<"$d"
        _lab_err "daemon $node not ready after ${LAB_READY_TIMEOUT_S} s (GET http://127.0.0.1:$port/status in its namespace); logs/$node.log:"
        _lab_tail "$LAB_DIR/logs/$node.log"
      done
      return 1
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------------------------------------
# lab_down

lab_down() {
  local name t0
  name=$(_lab_default_name "${1:-}")
  t0=$(_lab_now)
  if ! _lab_load "$name"; then
    _lab_log "lab '$name' is not up (no state.env): nothing to do"
    return 0
  fi
  local self=" $$ ${BASHPID:-$$} " entry pid rest victims=() ns
  # 1. recorded processes, while they are inside our namespaces
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid rest <<<"$entry"
    [[ $self == *" $pid "* ]] && continue
    _lab_pid_ours "$pid" && victims+=("$pid")
  done
  local failed=0
  _lab_stop_pids TERM "${victims[@]}" || failed=1
  # 2. anything else still inside our namespaces (a child of a daemon, a shell from lab_exec)
  victims=()
  for ns in "${SLBX_LAB_NAMESPACES[@]}"; do
    [ -e "/run/netns/$ns" ] || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      [[ $self == *" $pid "* ]] && continue
      victims+=("$pid")
    done
  done
  if [ ${#victims[@]} -gt 0 ]; then
    _lab_log "lab '$name': stopping ${#victims[@]} unrecorded process(es) left in its namespaces: ${victims[*]}"
    _lab_stop_pids TERM "${victims[@]}" || failed=1
  fi
  # 3. the namespaces: recorded ones, and (once the prefix was claimed) any other with our prefix
  local all=("${SLBX_LAB_NAMESPACES[@]}")
  if [ "${SLBX_LAB_PREFIX_CLAIMED:-0}" = 1 ] && [ -n "$SLBX_LAB_PREFIX" ]; then
    while read -r ns _; do
      [[ $ns == "$SLBX_LAB_PREFIX"* ]] && all+=("$ns")
    done < <(ip netns list 2>/dev/null)
  fi
  local left=()
  for ns in "${all[@]}"; do
    [ -e "/run/netns/$ns" ] || continue
    ip netns del "$ns" 2>/dev/null || { [ -e "/run/netns/$ns" ] && { _lab_err "could not delete namespace $ns"; failed=1; }; }
  done
  if [ -n "$SLBX_LAB_PREFIX" ]; then
    while read -r ns _; do [[ $ns == "$SLBX_LAB_PREFIX"* ]] && left+=("$ns"); done < <(ip netns list 2>/dev/null)
  fi
  if [ ${#left[@]} -gt 0 ]; then _lab_err "namespaces left: ${left[*]}"; failed=1; fi
  if [ "$failed" = 1 ]; then
    _lab_err "lab '$name' is not completely down; state.env kept: run lab_down again"
    return 1
  fi
  rm -f "$LAB_DIR/state.env"
  local prefix=$SLBX_LAB_PREFIX
  SLBX_LAB_PREFIX='' SLBX_LAB_NAME='' SLBX_LAB_NAMESPACES=() SLBX_LAB_PROCS=()
  _lab_log "lab '$name'${prefix:+ ($prefix)} down in $(_lab_elapsed "$t0") s (logs and pcaps kept in ${LAB_DIR#"$SLBX_ROOT"/})"
}

# Signals PIDs (SIG), waits up to LAB_KILL_WAIT_S for them to go, then KILLs the rest.
_lab_stop_pids() {
  local sig=$1 pid deadline left
  shift
  [ $# -gt 0 ] || return 0
  for pid in "$@"; do kill -s "$sig" "$pid" 2>/dev/null || true; done
  deadline=$(( $(_lab_now) + LAB_KILL_WAIT_S * 1000000 ))
  while :; do
    left=()
    for pid in "$@"; do _lab_pid_alive "$pid" && left+=("$pid"); done
    [ ${#left[@]} = 0 ] && return 0
    [ "$(_lab_now)" -gt "$deadline" ] && break
    sleep 0.05
  done
  _lab_log "still running after ${LAB_KILL_WAIT_S} s, sending KILL: ${left[*]}"
  for pid in "${left[@]}"; do kill -s KILL "$pid" 2>/dev/null || true; done
  deadline=$(( $(_lab_now) + 2000000 ))
  while [ "$(_lab_now)" -lt "$deadline" ]; do
    left=()
    for pid in "$@"; do _lab_pid_alive "$pid" && left+=("$pid"); done
    [ ${#left[@]} = 0 ] && return 0
    sleep 0.05
  done
  _lab_err "processes survived KILL: ${left[*]}"
  return 1
}

# ---------------------------------------------------------------------------------------------
# status

lab_daemon_status() {
  local node=${1:-} kind port ns
  [ -n "$node" ] || { _lab_err 'usage: lab_daemon_status NODE (a mux or host)'; return 2; }
  _lab_ensure_loaded || return 1
  ns=$(lab_ns "$node") || return 1
  kind=$(_lab_node_kind "$node")
  case $kind in
    mux) port=$LAB_MUX_STATUS_PORT ;;
    host) port=$LAB_HOST_STATUS_PORT ;;
    *) _lab_err "$node is a $kind, not a mux or host: it runs no daemon"; return 1 ;;
  esac
  ip netns exec "$ns" curl -s -m 2 "http://127.0.0.1:$port/status"
}

lab_status() {
  _lab_require_up "${1:-}" || return 1
  local n ns kind entry pid rest alive
  printf 'lab %s: prefix %s, config %s (from %s), clients %s, daemons %s, up since %s\n' \
    "$LAB_NAME" "$SLBX_LAB_PREFIX" "${SLBX_LAB_CONFIG#"$SLBX_ROOT"/}" "${SLBX_LAB_CONFIG_SOURCE#"$SLBX_ROOT"/}" \
    "$SLBX_LAB_CLIENTS" "$([ "$SLBX_LAB_DAEMONS" = 1 ] && echo yes || echo no)" "$SLBX_LAB_STARTED"
  [ "${SLBX_LAB_STATE:-}" = up ] || printf 'WARNING: lab_up did not finish (state %s)\n' "${SLBX_LAB_STATE:-building}"
  printf '\nnodes (namespace: interface address [+N more]):\n'
  for n in "${SLBX_LAB_NODES[@]}"; do
    ns=$SLBX_LAB_PREFIX$n
    if [ ! -e "/run/netns/$ns" ]; then printf '  %-8s %-22s MISSING\n' "$n" "$ns"; continue; fi
    printf '  %-8s %-22s %s\n' "$n" "$ns" "$(ip -n "$ns" -o addr show scope global 2>/dev/null | awk '
      { split($4, a, "/"); fam = ($3 == "inet6") ? 6 : 4; k = $2 " " fam
        if (!(k in first)) { first[k] = $4; order[++n] = k } else more[k]++ }
      END { for (i = 1; i <= n; i++) { k = order[i]; split(k, p, " ")
              printf "%s%s %s%s", (i > 1 ? ", " : ""), p[1], first[k], (more[k] ? " [+" more[k] "]" : "") } }')"
  done
  printf '\nrouter routes to the VIPs:\n'
  local vip plen _h fam routes
  while read -r -u 3 kind vip plen _h; do
    [ "$kind" = vip ] || continue
    fam=-4; [[ $vip == *:* ]] && fam=-6
    routes=$(ip -n "${SLBX_LAB_PREFIX}router" "$fam" route show "$vip/$plen" 2>/dev/null || true)
    if [ -n "$routes" ]; then printf '%s\n' "$routes" | sed 's/^/  /'; else printf '  %s/%s: NO ROUTE\n' "$vip" "$plen"; fi
  done 3<"$LAB_DIR/plan.txt"
  if [ -S "$LAB_DIR/bird.ctl" ]; then
    printf '\nrouter BGP (BIRD, lab_birdc / scripts/lab.sh birdc):\n'
    lab_birdc show protocols 2>/dev/null | sed -n '/^Name/,$p' | sed 's/^/  /'
  fi
  printf '\nprocesses:\n'
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid rest <<<"$entry"
    if _lab_pid_ours "$pid"; then alive=alive; else alive=gone; fi
    printf '  %-7s %-5s %s\n' "$pid" "$alive" "$rest"
  done
  [ ${#SLBX_LAB_PROCS[@]} -gt 0 ] || printf '  (none)\n'
  if [ "$SLBX_LAB_DAEMONS" = 1 ]; then
    printf '\ndaemons (GET /status):\n'
    for n in "${SLBX_LAB_NODES[@]}"; do
      kind=$(_lab_node_kind "$n")
      [ "$kind" = mux ] || [ "$kind" = host ] || continue
      printf '  %-8s %s\n' "$n" "$(lab_daemon_status "$n" 2>/dev/null | "${LAB_NODE[@]}" -e '
        let t = ""; process.stdin.on("data", (d) => (t += d)).on("end", () => {
          try {
            const s = JSON.parse(t); const c = s.counters ?? {};
            const nz = Object.entries(c).filter(([, v]) => typeof v === "number" && v !== 0);
            const top = nz.slice(0, 8).map(([k, v]) => `${k} ${v}`).join(", ");
            console.log(`ready ${s.ready}; ${nz.length} of ${Object.keys(c).length} counters non-zero${top ? ": " + top : ""}${nz.length > 8 ? ", ..." : ""}`);
          } catch { console.log(t === "" ? "no answer" : "not JSON: " + t.slice(0, 80)); }
        });')"
    done
  fi
  if [ -n "${SLBX_LAB_CONTROLLER_URL:-}" ]; then
    printf '\ncontroller %s (slbctl agents):\n' "$SLBX_LAB_CONTROLLER_URL"
    lab_slbctl agents 2>&1 | sed 's/^/  /'
  fi
  return 0
}

lab_list() (  # a subshell: loading each lab must not change this shell's current lab
  local d found=0 ns n_ns alive_ns procs alive_procs entry pid rest
  for d in "$SLBX_ROOT"/runs/lab/*/; do
    [ -f "$d/state.env" ] || continue
    _lab_load "$(basename "$d")" || continue
    found=1
    n_ns=${#SLBX_LAB_NAMESPACES[@]} alive_ns=0 procs=${#SLBX_LAB_PROCS[@]} alive_procs=0
    for ns in "${SLBX_LAB_NAMESPACES[@]}"; do [ -e "/run/netns/$ns" ] && alive_ns=$((alive_ns + 1)); done
    for entry in "${SLBX_LAB_PROCS[@]}"; do read -r pid rest <<<"$entry"; _lab_pid_ours "$pid" && alive_procs=$((alive_procs + 1)); done
    printf '%-20s %-12s namespaces %s/%s  processes %s/%s  since %s  config %s\n' "$LAB_NAME" "$SLBX_LAB_PREFIX" \
      "$alive_ns" "$n_ns" "$alive_procs" "$procs" "$SLBX_LAB_STARTED" "${SLBX_LAB_CONFIG_SOURCE#"$SLBX_ROOT"/}"
  done
  [ "$found" = 1 ] || printf 'no labs up (scripts/lab.sh up)\n'
  # lab namespaces that no state.env of this checkout accounts for
  local known=" " p orphans
  for d in "$SLBX_ROOT"/runs/lab/*/; do
    [ -f "$d/state.env" ] && _lab_load "$(basename "$d")" && known+="$SLBX_LAB_PREFIX "
  done
  orphans=$(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^\(slbx-[0-9a-f]\{4\}-\).*/\1/p' | sort | uniq -c)
  while read -r n p; do
    [ -n "${p:-}" ] || continue
    [[ $known == *" $p "* ]] && continue
    printf 'orphan prefix %s: %s namespace(s), no state.env here (scripts/lab.sh down --prefix %s)\n' "$p" "$n" "$p"
  done <<<"$orphans"
  return 0
)

# Takes down a run whose state.env is gone, by its prefix: every process inside a namespace named
# PREFIX* (TERM, then KILL), then those namespaces. Only for orphans: the prefix must not belong to
# a lab of this checkout that has a state.env (use lab_down NAME for those).
lab_down_prefix() {
  local prefix=${1:-} d ns pid victims=() all=()
  [[ $prefix =~ ^slbx-[0-9a-f]{4}-$ ]] || { _lab_err "lab_down_prefix: expected a prefix like slbx-1a2b-, got '$prefix'"; return 2; }
  for d in "$SLBX_ROOT"/runs/lab/*/; do
    if [ -f "$d/state.env" ] && grep -qx "SLBX_LAB_PREFIX=$prefix" "$d/state.env"; then
      _lab_err "$prefix belongs to lab '$(basename "$d")': scripts/lab.sh down --name $(basename "$d")"; return 1
    fi
  done
  while read -r ns _; do [[ $ns == "$prefix"* ]] && all+=("$ns"); done < <(ip netns list 2>/dev/null)
  [ ${#all[@]} -gt 0 ] || { _lab_log "no namespace with prefix $prefix"; return 0; }
  for ns in "${all[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do [ "$pid" != "$$" ] && [ "$pid" != "${BASHPID:-$$}" ] && victims+=("$pid"); done
  done
  local failed=0
  _lab_stop_pids TERM "${victims[@]}" || failed=1
  for ns in "${all[@]}"; do ip netns del "$ns" 2>/dev/null || { _lab_err "could not delete $ns"; failed=1; }; done
  [ "$failed" = 0 ] || return 1
  _lab_log "orphan $prefix down: ${#victims[@]} process(es), ${#all[@]} namespace(s)"
}

# ---------------------------------------------------------------------------------------------
# backends: stop and start one nic's HTTP or UDP echo process (health probe scenarios)

# Prints the PID of the running backend process of a nic (KIND http or udp-echo), or nothing.
_lab_backend_pid() {
  local nic=$1 kind=$2 entry pid k node n what s stopped found=''
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid k node n what <<<"$entry"
    [ "$k" = backend ] && [ "$node" = "$nic" ] && [ "$what" = "$kind" ] || continue
    stopped=0
    for s in "${SLBX_LAB_STOPPED[@]}"; do [ "$s" = "$pid" ] && stopped=1; done
    [ "$stopped" = 0 ] && _lab_pid_ours "$pid" && found=$pid
  done
  [ -n "$found" ] && printf '%s\n' "$found"
  return 0
}

_lab_backend_args() {  # NIC KIND -> sets _lab_bk_kind (http|udp-echo) or fails
  local nic=${1:-} kind=${2:-}
  [ -n "$nic" ] && [ -n "$kind" ] || { _lab_err "usage: ${FUNCNAME[1]} NIC http|udp"; return 2; }
  case $kind in
    http) _lab_bk_kind=http ;;
    udp|udp-echo) _lab_bk_kind=udp-echo ;;
    *) _lab_err "${FUNCNAME[1]}: the kind is http or udp, not '$kind'"; return 2 ;;
  esac
  _lab_ensure_loaded || return 1
  [ "$(_lab_node_kind "$nic")" = nic ] || { _lab_err "lab '$LAB_NAME' has no nic '$nic' (nics: $(lab_nodes nic | tr '\n' ' '))"; return 1; }
}

# lab_backend_stop NIC http|udp: stops that backend process (TERM, then KILL after 3 s) and waits
# until it is gone; the nic's kernel then refuses connections to its ports (or answers UDP with ICMP).
lab_backend_stop() {
  local _lab_bk_kind pid
  _lab_backend_args "$@" || return $?
  pid=$(_lab_backend_pid "$1" "$_lab_bk_kind")
  [ -n "$pid" ] || { _lab_err "lab_backend_stop: no running $_lab_bk_kind backend in $1"; return 1; }
  _lab_stop_pids TERM "$pid" || return 1
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_STOPPED "$pid" array
  SLBX_LAB_STOPPED+=("$pid")
  _lab_log "backend $1 $_lab_bk_kind (pid $pid) stopped"
}

# lab_backend_start NIC http|udp: starts that backend again with the command line lab_up used and
# waits for its ready line (LAB_BACKEND_TIMEOUT_S); the previous log is kept as NIC-KIND.log.N.
lab_backend_start() {
  local _lab_bk_kind pid line ports log i kind n host port mac a4 a6 gw4 gw6 tcp udp
  _lab_backend_args "$@" || return $?
  pid=$(_lab_backend_pid "$1" "$_lab_bk_kind")
  [ -z "$pid" ] || { _lab_err "lab_backend_start: the $_lab_bk_kind backend of $1 is running (pid $pid)"; return 1; }
  line=$(_lab_plan_line nic "$1")
  read -r kind n host port mac a4 a6 gw4 gw6 tcp udp <<<"$line"
  if [ "$_lab_bk_kind" = http ]; then ports=$tcp; else ports=$udp; fi
  log=$LAB_DIR/logs/$1-$_lab_bk_kind.log
  if [ -e "$log" ]; then i=1; while [ -e "$log.$i" ]; do i=$((i + 1)); done; mv "$log" "$log.$i"; fi
  _lab_spawn "$1" backend "$1 $_lab_bk_kind" "$log" \
    "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/backend.js" "$_lab_bk_kind" --name "$1" --ports "$ports"
  SLBX_LAB_PROCS+=("$LAB_SPAWNED_PID backend $1 $1 $_lab_bk_kind")
  local pids=("$LAB_SPAWNED_PID") logs=("$log")
  _lab_wait_backends pids logs || return 1
  _lab_log "backend $1 $_lab_bk_kind started (pid $LAB_SPAWNED_PID)"
}

# ---------------------------------------------------------------------------------------------
# BGP: the router's BIRD, and MUX daemons stopped and started one by one (docs/bgp.md)

# Writes bird.conf from the config (scripts/lab/bird-conf.ts), checks it, starts BIRD in the router's
# namespace (foreground, recorded like any process; its log is logs/bird.log) with its control socket
# at RUN/bird.ctl, and waits until birdc answers.
_lab_bird_start() {  # CLIENTS
  local R=${SLBX_LAB_PREFIX}router conf=$LAB_DIR/bird.conf ctl=$LAB_DIR/bird.ctl deadline
  command -v bird >/dev/null && command -v birdc >/dev/null || { _lab_err "bird2 is not installed (apt-get install bird2)"; return 1; }
  "${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/bird-conf.js" --config "$LAB_DIR/config.yaml" --clients "$1" >"$conf"
  ip netns exec "$R" bird -p -c "$conf" || { _lab_err "BIRD refuses $conf"; return 1; }
  rm -f "$ctl"
  _lab_spawn router bird "bird" "$LAB_DIR/logs/bird.log" bird -f -c "$conf" -s "$ctl" -P "$LAB_DIR/bird.pid"
  deadline=$(( $(_lab_now) + 5000000 ))
  until [ -S "$ctl" ] && ip netns exec "$R" birdc -s "$ctl" show status >/dev/null 2>&1; do
    _lab_pid_alive "$LAB_SPAWNED_PID" || { _lab_err "bird exited:"; _lab_tail "$LAB_DIR/logs/bird.log"; return 1; }
    [ "$(_lab_now)" -lt "$deadline" ] || { _lab_err "birdc does not answer on $ctl after 5 s"; return 1; }
    sleep 0.05
  done
}

# lab_birdc ARGS...: runs birdc against the lab router's BIRD (e.g. lab_birdc show route all;
# lab_birdc show protocols all mux1). By hand: scripts/lab.sh birdc show route.
lab_birdc() {
  _lab_ensure_loaded || return 1
  [ -S "$LAB_DIR/bird.ctl" ] || { _lab_err "lab '$LAB_NAME' runs no BIRD (its config has no bgp section)"; return 1; }
  ip netns exec "${SLBX_LAB_PREFIX}router" birdc -s "$LAB_DIR/bird.ctl" "$@"
}

# lab_router_counters: the router's edge filter counters (docs/security.md) as JSON, one object
# {"edge_spoofed_source4": {"packets": N, "bytes": N}, ...} (nft -j list counters table inet slbx_edge).
lab_router_counters() {
  _lab_ensure_loaded || return 1
  ip netns exec "${SLBX_LAB_PREFIX}router" nft -j list counters table inet slbx_edge | "${LAB_NODE[@]}" -e '
    let t = ""; process.stdin.on("data", (d) => { t += d; }).on("end", () => {
      const o = {};
      for (const x of JSON.parse(t).nftables) if (x.counter) o[x.counter.name] = { packets: x.counter.packets, bytes: x.counter.bytes };
      process.stdout.write(JSON.stringify(o) + "\n");
    });'
}

# lab_router_nexthops VIP: the next hops of the router's kernel route to VIP (/32 or /128), one per
# line, sorted; nothing when there is no route.
lab_router_nexthops() {
  local vip=${1:-} fam=-4 plen=32
  [ -n "$vip" ] || { _lab_err 'usage: lab_router_nexthops VIP'; return 2; }
  _lab_ensure_loaded || return 1
  [[ $vip == *:* ]] && fam=-6 plen=128
  ip -n "${SLBX_LAB_PREFIX}router" "$fam" -o route show "$vip/$plen" 2>/dev/null \
    | tr '\t' '\n' | sed -n 's/.*\bvia \(inet6 \)\{0,1\}\([0-9a-fA-F.:]*\) .*/\2/p' | sort
}

# Running daemons of one kind (mux or host-agent): "NODE PID" lines (recorded, alive, in our
# namespaces, not stopped).
_lab_running_daemons() {  # mux|host-agent
  local entry pid k node n what s stopped
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid k node n what <<<"$entry"
    [ "$k" = daemon ] && [ "$n" = "$1" ] || continue
    stopped=0
    for s in "${SLBX_LAB_STOPPED[@]}"; do [ "$s" = "$pid" ] && stopped=1; done
    [ "$stopped" = 0 ] && _lab_pid_ours "$pid" && printf '%s %s\n' "$node" "$pid"
  done
  return 0
}
_lab_running_muxes() { _lab_running_daemons mux; }

# lab_wait_router [TIMEOUT_S]: waits until, for every VIP, the router's kernel route has exactly the
# running muxes (their provider address of the VIP's family) as next hops; prints what differs on
# timeout (default LAB_READY_TIMEOUT_S) and returns 1.
lab_wait_router() {
  local timeout=${1:-$LAB_READY_TIMEOUT_S} deadline kind vip plen _h n pid a4 a6 want got bad
  _lab_ensure_loaded || return 1
  deadline=$(( $(_lab_now) + timeout * 1000000 ))
  local -A run=()
  while read -r n pid; do run[$n]=1; done < <(_lab_running_muxes)
  while :; do
    bad=''
    while read -r -u 3 kind vip plen _h; do
      [ "$kind" = vip ] || continue
      want=$(while read -r k n a4 a6 _; do
        [ "$k" = mux ] && [ -n "${run[$n]:-}" ] || continue
        if [ "$plen" = 32 ]; then echo "$a4"; elif [ "$a6" != - ]; then echo "$a6"; fi
      done <"$LAB_DIR/plan.txt" | sort)
      got=$(lab_router_nexthops "$vip")
      [ "$want" = "$got" ] || bad+="$vip: router has [${got//$'\n'/ }], running muxes are [${want//$'\n'/ }]; "
    done 3<"$LAB_DIR/plan.txt"
    [ -z "$bad" ] && return 0
    if [ "$(_lab_now)" -gt "$deadline" ]; then _lab_err "the router's VIP routes do not match the running muxes after ${timeout} s: $bad"; return 1; fi
    sleep 0.05
  done
}

# ---------------------------------------------------------------------------------------------
# the packet daemons stopped and started one by one: one family for both kinds. KIND is mux (in a mux
# node; BGP scenarios) or host-agent (in a host node; scenario 19: the return path is a function of
# policy, so a restarted host agent serves the connections its predecessor carried, docs/reliability.md).
# The public lab_mux_* and lab_host_agent_* functions are these with KIND filled in.

# _lab_daemon_kind KIND: sets _lab_dk_js (entry point), _lab_dk_port (status port), _lab_dk_node (the
# plan's node kind), _lab_dk_label (for messages) and _lab_dk_fn (the public function prefix).
_lab_daemon_kind() {
  case ${1:-} in
    mux) _lab_dk_js=$LAB_MUX_JS _lab_dk_port=$LAB_MUX_STATUS_PORT _lab_dk_node=mux _lab_dk_label='mux' _lab_dk_fn=lab_mux ;;
    host-agent) _lab_dk_js=$LAB_HOST_JS _lab_dk_port=$LAB_HOST_STATUS_PORT _lab_dk_node=host _lab_dk_label='host agent' _lab_dk_fn=lab_host_agent ;;
    *) _lab_err "unknown daemon kind '${1:-}' (mux or host-agent)"; return 2 ;;
  esac
}

# _lab_daemon_spawn KIND NODE: starts the daemon in its namespace (as lab_up does); LAB_SPAWNED_PID is
# its PID.
_lab_daemon_spawn() {
  _lab_daemon_kind "$1" || return
  _lab_spawn "$2" daemon "$1 $2" "$LAB_DIR/logs/$2.log" "${LAB_NODE[@]}" "$_lab_dk_js" \
    --config "$LAB_DIR/config.yaml" --name "$2" --status "127.0.0.1:$_lab_dk_port" $(_lab_daemon_io "$1" "$2") \
    ${SLBX_LAB_CONTROLLER_URL:+--controller "$SLBX_LAB_CONTROLLER_URL" --controller-token-file "$LAB_DIR/api-token"} \
    $(_lab_prometheus_daemon_args "$1" "$2") $(_lab_workers_args "$1" "$2") \
    $([ "$1" != host-agent ] || printf '%s\n' --state-dir "$LAB_DIR/state" ${LAB_FLOW_SNAPSHOT_MS:+--flow-snapshot-ms "$LAB_FLOW_SNAPSHOT_MS"})
}

# _lab_daemon_pid KIND NODE: the PID of the KIND daemon running in NODE, or nothing (status 1).
_lab_daemon_pid() {
  local kind=${1:-} node=${2:-} n pid
  _lab_daemon_kind "$kind" || return
  [ -n "$node" ] || { _lab_err "usage: ${_lab_dk_fn}_pid NODE"; return 2; }
  _lab_ensure_loaded || return 1
  while read -r n pid; do [ "$n" = "$node" ] && { printf '%s\n' "$pid"; return 0; }; done < <(_lab_running_daemons "$kind")
  return 1
}

# _lab_daemon_stop KIND NODE [SIGNAL]: sends SIGNAL (default TERM; a MUX then withdraws its VIPs, sends
# Cease and stops after its grace; KILL after 3 s) to the KIND daemon of NODE and waits until it has
# exited; KILL kills at once. The daemon is marked stopped (_lab_daemon_start starts it again).
_lab_daemon_stop() {
  local kind=${1:-} node=${2:-} sig=${3:-TERM} pid deadline
  _lab_daemon_kind "$kind" || return
  [ -n "$node" ] || { _lab_err "usage: ${_lab_dk_fn}_stop NODE [TERM|KILL|INT]"; return 2; }
  _lab_ensure_loaded || return 1
  pid=$(_lab_daemon_pid "$kind" "$node") || { _lab_err "${_lab_dk_fn}_stop: no $_lab_dk_label daemon runs in '$node'"; return 1; }
  if [ "$sig" = KILL ]; then
    kill -s KILL "$pid" 2>/dev/null || true
    deadline=$(( $(_lab_now) + 2000000 ))
    while _lab_pid_alive "$pid" && [ "$(_lab_now)" -lt "$deadline" ]; do sleep 0.01; done
  else
    _lab_stop_pids "$sig" "$pid" || return 1
  fi
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_STOPPED "$pid" array
  SLBX_LAB_STOPPED+=("$pid")
  _lab_log "$_lab_dk_label $node (pid $pid) stopped with SIG$sig"
}

# _lab_daemon_start KIND NODE: starts the KIND daemon of NODE again (after _lab_daemon_stop, or a mux
# lab_up left out), as lab_up does, and waits until its status says ready; then a MUX waits, with BGP,
# until the router routes every VIP over it too, and a host agent, with a controller, until it applied
# the current generation. The previous log is kept as NODE.log.N.
_lab_daemon_start() {
  local kind=${1:-} node=${2:-} log i
  _lab_daemon_kind "$kind" || return
  [ -n "$node" ] || { _lab_err "usage: ${_lab_dk_fn}_start NODE"; return 2; }
  _lab_ensure_loaded || return 1
  [ "$(_lab_node_kind "$node")" = "$_lab_dk_node" ] || { _lab_err "lab '$LAB_NAME' has no $_lab_dk_node '$node'"; return 1; }
  if _lab_daemon_pid "$kind" "$node" >/dev/null; then _lab_err "${_lab_dk_fn}_start: the $_lab_dk_label daemon of $node is running"; return 1; fi
  log=$LAB_DIR/logs/$node.log
  if [ -e "$log" ]; then i=1; while [ -e "$log.$i" ]; do i=$((i + 1)); done; mv "$log" "$log.$i"; fi
  _lab_daemon_spawn "$kind" "$node"
  SLBX_LAB_PROCS+=("$LAB_SPAWNED_PID daemon $node $kind $node")
  _lab_wait_daemons "$node:$LAB_SPAWNED_PID:$_lab_dk_port" || return 1
  case $kind in
    mux) if [ -S "$LAB_DIR/bird.ctl" ]; then lab_wait_router || return 1; fi ;;
    host-agent) [ -z "${SLBX_LAB_CONTROLLER_URL:-}" ] || _lab_wait_agents || return 1 ;;
  esac
  _lab_log "$_lab_dk_label $node started (pid $LAB_SPAWNED_PID)"
}

lab_mux_pid() { _lab_daemon_pid mux "$@"; }
lab_mux_stop() { _lab_daemon_stop mux "$@"; }
lab_mux_start() { _lab_daemon_start mux "$@"; }
lab_host_agent_pid() { _lab_daemon_pid host-agent "$@"; }
lab_host_agent_stop() { _lab_daemon_stop host-agent "$@"; }
lab_host_agent_start() { _lab_daemon_start host-agent "$@"; }

# ---------------------------------------------------------------------------------------------
# the controller (docs/controller.md): its namespace is on the fabric at .5; the daemons watch it

# Starts slbx-controller in the controller namespace: state file RUN/controller-state.json (seeded
# from the lab's config when it does not exist yet), API on the fabric address and on loopback (so
# slbctl's default URL works inside the namespace); waits until GET /v1/state answers.
_lab_controller_spawn() {
  local a4 port url state=$LAB_DIR/controller-state.json deadline init=()
  if [ "${SLBX_LAB_CONTROLLERS:-1}" -gt 1 ]; then _lab_controllers_spawn; return; fi  # replicas on etcd (controllers.sh)
  read -r _ a4 _ _ _ port < <(awk '$1 == "controller"' "$LAB_DIR/plan.txt")
  [ -e "$state" ] || init=(--init "$LAB_DIR/config.yaml")
  # --max-semi-space-size=1, MALLOC_ARENA_MAX=2: the controller's memory stays flat (docs/controller.md, Memory)
  _lab_spawn controller daemon controller "$LAB_DIR/logs/controller.log" env MALLOC_ARENA_MAX=2 "${LAB_NODE[@]}" --max-semi-space-size=1 "$LAB_CONTROLLER_JS" \
    --state "$state" "${init[@]}" --listen "$a4:$port" --listen "127.0.0.1:$port" --token-file "$LAB_DIR/api-token"
  url="http://127.0.0.1:$port/v1/state"
  deadline=$(( $(_lab_now) + LAB_READY_TIMEOUT_S * 1000000 ))
  until ip netns exec "${SLBX_LAB_PREFIX}controller" curl -sf -m 1 -o /dev/null "$url" 2>/dev/null; do
    _lab_pid_alive "$LAB_SPAWNED_PID" || { _lab_err "the controller (pid $LAB_SPAWNED_PID) exited; logs/controller.log:"; _lab_tail "$LAB_DIR/logs/controller.log"; return 1; }
    [ "$(_lab_now)" -lt "$deadline" ] || { _lab_err "the controller does not answer GET $url after ${LAB_READY_TIMEOUT_S} s"; _lab_tail "$LAB_DIR/logs/controller.log"; return 1; }
    sleep 0.05
  done
}

# Waits until every mux and host agent of the config acked the controller's current generation.
_lab_wait_agents() {
  local out
  if ! out=$(ip netns exec "${SLBX_LAB_PREFIX}controller" "${LAB_NODE[@]}" "$LAB_SLBCTL_JS" wait --wait-s "$LAB_READY_TIMEOUT_S" 2>&1); then
    _lab_err "not every agent applied the controller's generation within ${LAB_READY_TIMEOUT_S} s:"
    printf '%s\n' "$out" | sed 's/^/    | /' >&2
    return 1
  fi
}

# lab_slbctl ARGS...: slbctl inside the controller's namespace (its default URL, 127.0.0.1:8480).
lab_slbctl() {
  _lab_ensure_loaded || return 1
  [ -n "${SLBX_LAB_CONTROLLER_URL:-}" ] || { _lab_err "lab '$LAB_NAME' runs no controller (it was brought up with --no-controller or --no-daemons)"; return 1; }
  SLBX_TOKEN_FILE=$LAB_DIR/api-token ip netns exec "${SLBX_LAB_PREFIX}controller" "${LAB_NODE[@]}" "$LAB_SLBCTL_JS" "$@"
}

# lab_controller_pid: the PID of the running controller, or nothing (status 1).
lab_controller_pid() {
  local entry pid k node n s stopped
  _lab_ensure_loaded || return 1
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid k node n _ <<<"$entry"
    [ "$k" = daemon ] && [ "$node" = controller ] || continue
    stopped=0
    for s in "${SLBX_LAB_STOPPED[@]}"; do [ "$s" = "$pid" ] && stopped=1; done
    [ "$stopped" = 0 ] && _lab_pid_ours "$pid" && { printf '%s\n' "$pid"; return 0; }
  done
  return 1
}

# lab_controller_stop [SIGNAL]: stops the controller (TERM: it ends the agents' watches and exits;
# KILL after 3 s) and waits until it is gone; the agents keep their policy and retry.
lab_controller_stop() {
  local sig=${1:-TERM} pid
  _lab_ensure_loaded || return 1
  pid=$(lab_controller_pid) || { _lab_err "lab_controller_stop: no controller runs in lab '$LAB_NAME'"; return 1; }
  _lab_stop_pids "$sig" "$pid" || return 1
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_STOPPED "$pid" array
  SLBX_LAB_STOPPED+=("$pid")
  _lab_log "controller (pid $pid) stopped with SIG$sig"
}

# lab_controller_start: starts the controller again from its state file (the previous log is kept as
# controller.log.N) and waits until its API answers.
lab_controller_start() {
  local log i
  _lab_ensure_loaded || return 1
  [ -n "${SLBX_LAB_CONTROLLER_URL:-}" ] || { _lab_err "lab '$LAB_NAME' runs no controller"; return 1; }
  if lab_controller_pid >/dev/null; then _lab_err "lab_controller_start: the controller is running"; return 1; fi
  log=$LAB_DIR/logs/controller.log
  if [ -e "$log" ]; then i=1; while [ -e "$log.$i" ]; do i=$((i + 1)); done; mv "$log" "$log.$i"; fi
  _lab_controller_spawn || return 1
  SLBX_LAB_PROCS+=("$LAB_SPAWNED_PID daemon controller controller")
  _lab_log "controller started (pid $LAB_SPAWNED_PID)"
}

# ---------------------------------------------------------------------------------------------
# captures

lab_capture_start() {
  local node=${1:-} iface=${2:-} cname=${3:-} ns pcap log deadline mtu snaplen
  [ -n "$node" ] && [ -n "$iface" ] && [ -n "$cname" ] || { _lab_err 'usage: lab_capture_start NODE IFACE NAME [FILTER...]'; return 2; }
  shift 3
  [[ $cname =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || { _lab_err "bad capture name '$cname'"; return 2; }
  _lab_ensure_loaded || return 1
  ns=$(lab_ns "$node") || return 1
  command -v tcpdump >/dev/null || { _lab_err 'tcpdump is not installed'; return 1; }
  pcap=$LAB_DIR/pcaps/$cname.pcap
  log=$LAB_DIR/logs/capture-$cname.log
  # the snapshot length sets the size of each slot of libpcap's ring: -s 0 on a veth with offloads
  # makes 64 KiB slots (512 in 32 MiB); the MTU + 22 (Ethernet header, two VLAN tags) makes ~1.6 KiB
  # slots (about 20,000), and no frame on the link is longer (the stop checks that none was cut)
  snaplen=${LAB_CAPTURE_SNAPLEN:-}
  if [ -z "$snaplen" ]; then
    mtu=$(ip netns exec "$ns" cat "/sys/class/net/$iface/mtu" 2>/dev/null) || { _lab_err "no interface $iface in $node"; return 1; }
    snaplen=$((mtu + 22))
  fi
  rm -f "$pcap"
  ip netns exec "$ns" tcpdump -i "$iface" -w "$pcap" --immediate-mode -s "$snaplen" -B "$LAB_CAPTURE_BUFFER_KB" -Z root -n "$@" >"$log" 2>&1 </dev/null &
  local pid=$!
  disown "$pid" 2>/dev/null || true
  _lab_pid_reused "$pid"
  _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_PROCS "$pid capture $node $cname" array
  SLBX_LAB_PROCS+=("$pid capture $node $cname")
  # "listening on" is printed after the pcap handle and the output file are open
  deadline=$(( $(_lab_now) + 5000000 ))
  until grep -q 'listening on' "$log" 2>/dev/null && [ -e "$pcap" ]; do
    if ! _lab_pid_alive "$pid"; then _lab_err "tcpdump on $node $iface exited:"; _lab_tail "$log"; return 1; fi
    if [ "$(_lab_now)" -gt "$deadline" ]; then _lab_err "tcpdump on $node $iface did not start within 5 s:"; _lab_tail "$log"; return 1; fi
    sleep 0.02
  done
  sleep 0.1
  printf '%s\n' "$pcap"
}

# tcpdump's counters as "CAPTURED RECEIVED DROPPED IFDROPPED" from its last statistics line in LOG
# (the SIGUSR1 line "N packets captured, N packets received by filter, N packets dropped by kernel[, N
# packets dropped by interface]" or the lines it prints when it stops); empty if there is none yet.
_lab_capture_counters() {
  local log=$1 line c r d i
  if [ "${2:-}" = final ]; then
    c=$(sed -n 's/^\([0-9][0-9]*\) packets\{0,1\} captured$/\1/p' "$log" | tail -n 1)
    r=$(sed -n 's/^\([0-9][0-9]*\) packets\{0,1\} received by filter$/\1/p' "$log" | tail -n 1)
    d=$(sed -n 's/^\([0-9][0-9]*\) packets\{0,1\} dropped by kernel$/\1/p' "$log" | tail -n 1)
    i=$(sed -n 's/^\([0-9][0-9]*\) packets\{0,1\} dropped by interface$/\1/p' "$log" | tail -n 1)
  else
    line=$(grep -E '^tcpdump: [0-9]+ packets? captured, ' "$log" | tail -n 1)
    [[ $line =~ ([0-9]+)\ packets?\ captured,\ ([0-9]+)\ packets?\ received\ by\ filter,\ ([0-9]+)\ packets?\ dropped\ by\ kernel ]] || return 0
    c=${BASH_REMATCH[1]} r=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]} i=0
    [[ $line =~ ([0-9]+)\ packets?\ dropped\ by\ interface ]] && i=${BASH_REMATCH[1]}
  fi
  [ -n "$c" ] && [ -n "$r" ] && [ -n "$d" ] && printf '%s %s %s %s\n' "$c" "$r" "$d" "${i:-0}"
  return 0
}

# Asks a running tcpdump for its counters (SIGUSR1) and waits for the new line; prints them as above.
_lab_capture_ask() {
  local pid=$1 log=$2 n deadline
  n=$(grep -cE '^tcpdump: [0-9]+ packets? captured, ' "$log" 2>/dev/null || :)
  kill -s USR1 "$pid" 2>/dev/null || return 1
  deadline=$(( $(_lab_now) + 5000000 ))
  while [ "$(grep -cE '^tcpdump: [0-9]+ packets? captured, ' "$log" 2>/dev/null)" -le "$n" ]; do
    [ "$(_lab_now)" -lt "$deadline" ] && _lab_pid_alive "$pid" || return 1
    sleep 0.02
  done
  _lab_capture_counters "$log"
}

# Stops captures by PID list; checks tcpdump's own counters and the files. Returns 1 if any capture
# dropped a packet, did not write everything it had received when the stop began, cut a packet short
# or reported nothing. The stop drains first: tcpdump is asked for its counters (SIGUSR1) to mark
# what its filter had received by then, and only once it has written all of that (a busy machine can
# leave it seconds behind, with the rest in libpcap's ring) does it get SIGINT. Packets that arrive
# after the mark (the lab's own chatter: BGP, probes, ARP) may still be in the ring at SIGINT and are
# not written: they are reported, and they cannot belong to traffic that ended before the stop.
_lab_capture_stop_pids() {
  local bad=0 entry pid kind node cname log deadline c r d i mr md late pcap out f n t longest last since
  local -A want=() mark=() recs=() stalled=()
  local caps=() pcaps=()
  for pid in "$@"; do want[$pid]=1; done
  sleep 0.1  # let the last packets of the scenario's traffic reach the captures
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid kind node cname <<<"$entry"
    [ "$kind" = capture ] && [ -n "${want[$pid]:-}" ] || continue
    caps+=("$pid $node $cname")
    _lab_pid_ours "$pid" || continue
    # the mark: what the filter had received (and the kernel dropped) when the stop began
    read -r c r d i < <(_lab_capture_ask "$pid" "$LAB_DIR/logs/capture-$cname.log") && mark[$pid]="$r $d"
  done
  for entry in "${caps[@]}"; do  # the drain: until each has written everything it had at the mark
    read -r pid node cname <<<"$entry"
    [ -n "${mark[$pid]:-}" ] || continue
    read -r mr md <<<"${mark[$pid]}"
    log=$LAB_DIR/logs/capture-$cname.log
    deadline=$(( $(_lab_now) + 30000000 ))
    read -r c r d i < <(_lab_capture_counters "$log") || c=0
    last="$c $r" since=$(_lab_now)
    while [ "${c:-0}" -lt $((mr - md)) ] && [ "$(_lab_now)" -lt "$deadline" ]; do
      sleep 0.05
      # one unanswered ask (5 s on a busy machine) does not end the drain: only a dead tcpdump, the
      # deadline or a stall does
      if ! read -r c r d i < <(_lab_capture_ask "$pid" "$log"); then _lab_pid_alive "$pid" || break; continue; fi
      if [ "$c $r" != "$last" ]; then last="$c $r" since=$(_lab_now); continue; fi
      # A stall: tcpdump answers, yet neither its count nor the kernel's moves. Seen in CI runs of
      # scenarios 19, 26, 36 and 37: 1 or 2 packets counted as received by the filter and never handed to
      # tcpdump, for the whole 30 s drain and after SIGINT; in scenario 36 the next hop's capture held
      # every frame the MUXes' captures had written (10,938 of 10,938), so they never left the MUX.
      # Waiting longer does not bring them: after 5 s still, at most 2 missing, the drain ends and the
      # check below reports them apart (a loud line, not a failure); more than 2 still fail it.
      if [ $(( $(_lab_now) - since )) -ge 5000000 ] && [ $((mr - md - c)) -le 2 ]; then stalled[$pid]=$((mr - md - c)); break; fi
    done
  done
  for entry in "${caps[@]}"; do
    read -r pid node cname <<<"$entry"
    if _lab_pid_ours "$pid"; then kill -s INT "$pid" 2>/dev/null || true; fi
  done
  for entry in "${caps[@]}"; do
    read -r pid node cname <<<"$entry"
    deadline=$(( $(_lab_now) + 5000000 ))
    while _lab_pid_alive "$pid" && [ "$(_lab_now)" -lt "$deadline" ]; do sleep 0.02; done
    if _lab_pid_alive "$pid"; then _lab_err "capture $cname: tcpdump did not stop on SIGINT; killing it"; kill -s KILL "$pid" 2>/dev/null || true; fi
    _lab_state_add "$LAB_DIR/state.env" SLBX_LAB_STOPPED "$pid" array
    SLBX_LAB_STOPPED+=("$pid")
    [ -s "$LAB_DIR/pcaps/$cname.pcap" ] && pcaps+=("$LAB_DIR/pcaps/$cname.pcap")
  done
  # the files: every record whole (the snapshot length fits the link), as many as tcpdump wrote
  if [ ${#pcaps[@]} -gt 0 ]; then
    out=$("${LAB_NODE[@]}" "$SLBX_ROOT/dist/scripts/lab/pcap-records.js" "${pcaps[@]}" 2>&1) || { _lab_err "pcap-records: $out"; bad=1; }
    while read -r f n t longest; do [ -n "${f:-}" ] && [ -n "${longest:-}" ] && recs[$f]="$n $t $longest"; done <<<"$out"
  fi
  for entry in "${caps[@]}"; do
    read -r pid node cname <<<"$entry"
    log=$LAB_DIR/logs/capture-$cname.log
    pcap=$LAB_DIR/pcaps/$cname.pcap
    c='' r='' d='' i=''
    read -r c r d i < <(_lab_capture_counters "$log" final) || c=''
    n=0 t=0
    [ -z "${recs[$pcap]:-}" ] || read -r n t longest <<<"${recs[$pcap]}"
    if [ -z "$c" ]; then
      printf '[lab] WARNING: capture %s (%s): tcpdump reported no counters; the capture may be incomplete (%s)\n' "$cname" "$node" "${log#"$SLBX_ROOT"/}" >&2
      bad=1
    elif [ "$d" != 0 ] || [ "$i" != 0 ]; then
      printf '[lab] WARNING: capture %s (%s): %s packets dropped by kernel, %s by interface (%s captured): incomplete\n' "$cname" "$node" "$d" "$i" "$c" >&2
      bad=1
    elif [ -z "${mark[$pid]:-}" ]; then
      printf '[lab] WARNING: capture %s (%s): tcpdump did not report its counters before the stop (SIGUSR1): whether it wrote everything is unknown\n' "$cname" "$node" >&2
      bad=1
    elif read -r mr md <<<"${mark[$pid]}" && [ "$c" -lt $((mr - md)) ] && [ -n "${stalled[$pid]:-}" ] && [ "$c" -ge $((mr - md - 2)) ]; then
      printf '[lab] WARNING: capture %s (%s): %s packets, none dropped; %s more counted by the kernel as received by its filter, never handed to tcpdump (its counts stood still for 5 s before the stop: not a slow drain; docs/lab.md, "Scenarios")\n' "$cname" "$node" "$c" "$((mr - md - c))" >&2
    elif [ "$c" -lt $((mr - md)) ]; then
      printf '[lab] WARNING: capture %s (%s): %s packets had passed its filter when the stop began, only %s were written: incomplete\n' "$cname" "$node" "$((mr - md))" "$c" >&2
      bad=1
    elif [ "$n" != "$c" ] || [ "$t" != 0 ]; then
      printf '[lab] WARNING: capture %s (%s): the file holds %s records (%s cut short by the snapshot length), tcpdump wrote %s: incomplete\n' "$cname" "$node" "$n" "$t" "$c" >&2
      bad=1
    else
      late=$((r - d - c))
      if [ "$late" -gt 0 ]; then
        printf '[lab] capture %s (%s): %s packets, none dropped; every packet received before the stop began (%s) was written, %s that arrived after it were not\n' "$cname" "$node" "$c" "$((mr - md))" "$late" >&2
      else
        printf '[lab] capture %s (%s): %s packets, none dropped\n' "$cname" "$node" "$c" >&2
      fi
    fi
  done
  return "$bad"
}

_lab_running_captures() {  # prints PIDs of captures not yet stopped (optionally only NAME)
  local entry pid kind node cname s stopped
  for entry in "${SLBX_LAB_PROCS[@]}"; do
    read -r pid kind node cname <<<"$entry"
    [ "$kind" = capture ] || continue
    [ -z "${1:-}" ] || [ "$cname" = "$1" ] || continue
    stopped=0
    for s in "${SLBX_LAB_STOPPED[@]}"; do [ "$s" = "$pid" ] && stopped=1; done
    [ "$stopped" = 0 ] && printf '%s\n' "$pid"
  done
  return 0
}

lab_capture_stop() {
  [ -n "${1:-}" ] || { _lab_err 'usage: lab_capture_stop NAME'; return 2; }
  _lab_require_up || return 1
  local pids
  mapfile -t pids < <(_lab_running_captures "$1")
  [ ${#pids[@]} -gt 0 ] || { _lab_err "no running capture named '$1'"; return 1; }
  _lab_capture_stop_pids "${pids[@]}"
}

lab_capture_stop_all() {
  _lab_require_up || return 1
  local pids
  mapfile -t pids < <(_lab_running_captures)
  [ ${#pids[@]} -gt 0 ] || return 0
  _lab_capture_stop_pids "${pids[@]}"
}

# ---------------------------------------------------------------------------------------------
# scenarios

# Prints why this machine cannot run a lab, or nothing.
_lab_cannot_run() {
  [ "$(id -u)" = 0 ] || { echo "not root (network namespaces need root)"; return 0; }
  command -v ip >/dev/null || { echo "iproute2 (ip) is not installed"; return 0; }
  local probe
  probe="slbx-probe$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
  if ! ip netns add "$probe" 2>/dev/null; then echo "cannot create a network namespace (ip netns add failed)"; return 0; fi
  ip netns del "$probe" 2>/dev/null || { echo "cannot delete the probe namespace $probe"; return 0; }
  return 0
}

# lab_check_send_errors: every MUX and host agent running in the lab (not one a scenario stopped on
# purpose: those are marked stopped; a restarted one is checked under its new PID) is asked for GET
# /counters, and any send_error_* counter that is not 0 (a send the kernel refused, docs/reliability.md)
# is an error naming the daemon and the counter: status 1. A scenario that makes sends fail on purpose
# sets LAB_SEND_ERRORS_EXPECTED="why" and the errors are printed as a note instead. A daemon that does
# not answer (one a scenario hangs on purpose) is named, not judged. lab_setup_scenario's EXIT trap
# runs it before the lab goes down, so every scenario is covered.
lab_check_send_errors() {
  _lab_ensure_loaded || return 1
  local kind port node pid json out st failed=0 checked=0
  for kind in mux host-agent; do
    port=$LAB_MUX_STATUS_PORT
    [ "$kind" = host-agent ] && port=$LAB_HOST_STATUS_PORT
    while read -r node pid; do
      [ -n "$node" ] || continue
      if ! json=$(ip netns exec "$(lab_ns "$node")" curl -sf -m 3 "http://127.0.0.1:$port/counters" 2>/dev/null); then
        _lab_log "send errors: $kind $node (pid $pid) did not answer GET /counters: not checked"
        continue
      fi
      st=0
      out=$(printf '%s' "$json" | node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
          let c; try { c = JSON.parse(s); } catch { console.log("its /counters is not JSON"); process.exit(3); }
          const names = Object.keys(c).filter((n) => n.startsWith("send_error_"));
          if (names.length === 0) { console.log("its /counters has no send_error_ counters"); process.exit(3); }
          const bad = names.filter((n) => c[n] !== 0);
          console.log(bad.map((n) => `${n} ${c[n]}`).join(", "));
          process.exit(bad.length > 0 ? 1 : 0);
        });') || st=$?
      checked=$((checked + 1))
      [ "$st" = 0 ] && continue
      if [ "$st" = 1 ] && [ -n "${LAB_SEND_ERRORS_EXPECTED:-}" ]; then
        _lab_log "send errors (expected: $LAB_SEND_ERRORS_EXPECTED): $kind $node (pid $pid): $out"
      else
        _lab_err "send errors: $kind $node (pid $pid): $out"
        failed=1
      fi
    done < <(_lab_running_daemons "$kind")
  done
  [ "$failed" = 0 ] && _lab_log "send errors: none in the $checked running daemon(s)"
  return "$failed"
}

_lab_scenario_exit() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "${LAB_NAME:-}" ] && [ -f "$(_lab_dir_of "$LAB_NAME")/state.env" ]; then
    _lab_delay_report  # scripts/lab/delay.sh: how each delay link kept its time
    if ! lab_check_send_errors; then
      _lab_err "a daemon counted send errors (sends the kernel refused); set LAB_SEND_ERRORS_EXPECTED=\"why\" in a scenario that expects them"
      [ "$rc" = 0 ] && rc=1
    fi
    if ! lab_down "$LAB_NAME"; then
      _lab_err "teardown of lab '$LAB_NAME' failed"
      [ "$rc" = 0 ] && rc=1
    fi
  fi
  exit "$rc"
}

lab_setup_scenario() {
  local name=${1:-}
  [ -n "$name" ] || { _lab_err 'usage: lab_setup_scenario NAME'; exit 2; }
  _lab_check_name "$name-$$" || exit 2
  local why
  why=$(_lab_cannot_run)
  if [ -n "$why" ]; then
    if [ -n "${CI:-}" ] && [ "${CI:-}" != false ] && [ "${CI:-}" != 0 ]; then
      printf 'FAIL %s: cannot run here: %s (CI is set, so this is a failure, not a skip)\n' "$name" "$why" >&2
      exit 1
    fi
    printf 'SKIP %s: cannot run here: %s\n' "$name" "$why" >&2
    [ -z "${SLBX_SKIP_REASON_FILE:-}" ] || printf 'cannot run here: %s\n' "$why" >"$SLBX_SKIP_REASON_FILE" # run-all.sh lists it
    exit 77
  fi
  LAB_NAME=$name-$$
  LAB_DIR=$(_lab_dir_of "$LAB_NAME")
  trap _lab_scenario_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
