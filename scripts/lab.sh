#!/usr/bin/env bash
# slbx lab: bring a lab up from a config and leave it running, look at it, run commands in its
# namespaces, take it down (like containerlab, over scripts/lab/lib.sh). Root only.
#   scripts/lab.sh up [--name N] [--config F] [--clients N] [--muxes N] [--no-daemons] [--no-controller] [--prometheus]
#   scripts/lab.sh status [--name N]
#   scripts/lab.sh exec [--name N] NODE CMD [ARGS...]
#   scripts/lab.sh list
#   scripts/lab.sh birdc [--name N] ARGS...  (the router's BIRD: birdc -s runs/lab/N/bird.ctl ARGS)
#   scripts/lab.sh down [--name N]          (or --prefix slbx-XXXX- for an orphan, see list)
# Every subcommand takes --help. The lab name defaults to "default".
set -euo pipefail
SLBX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SLBX_ROOT
# shellcheck source=lab/lib.sh
source "$SLBX_ROOT/scripts/lab/lib.sh"

usage_main() {
  cat <<'EOF'
usage: scripts/lab.sh COMMAND [options]      (scripts/lab.sh COMMAND --help)

Network-namespace labs of slbx: client(s), a router, a fabric bridge, the MUXes, the hosts (host
agents) and one namespace per backend nic, all derived from one slbx config.

commands:
  up      bring a lab up (installs and builds what is missing first) and leave it running
  status  namespaces, addresses, the router's VIP routes, processes, daemon status
  exec    run a command in a node's namespace (curl, tcpdump, ip, the lab client ...)
  birdc   the router's BIRD (labs with BGP): birdc show protocols, show route all ...
  delay   set a delay link live (labs up with --delays F): scripts/lab.sh delay mux1 host1 40
  list    the labs that are up
  down    take a lab down (processes, namespaces, veths); logs and pcaps stay in runs/lab/NAME/

nodes: client1..N, router, fabric, and the config's muxes, hosts and nics (mux1, host1, h1vm1, ...)
EOF
}

usage_up() {
  cat <<'EOF'
usage: scripts/lab.sh up [--name N] [--config F] [--clients N] [--muxes N] [--no-daemons] [--no-controller] [--prometheus]
                         [--controllers N]

Builds a lab from an slbx config and leaves it running: namespaces with a random per-run prefix
(slbx-XXXX-), the fabric (MTU from the config), the router's routes to every VIP via all MUXes (BIRD 2
and the MUXes' BGP when the config has a bgp section, else static multipath routes), HTTP and UDP-echo backends in every nic namespace, and the MUX and host-agent daemons
(waits until each says ready on GET /status). State, logs and pcaps: runs/lab/NAME/.

options:
  --name N       lab name (default: default); several labs can be up at once
  --config F     slbx config (default: examples/lab.yaml)
  --clients N    client namespaces, 1..6 (default 1); client1 has 198.51.100.10-41 and 2001:db8:c::10-2f
  --muxes N      replace the config's MUXes with mux1..muxN, 1..8 (198.18.0.11.., 2001:db8:f::11..)
  --delays F     lab-only delay links (YAML: delays: [{ between: [mux1, host1], ms: 40 }]): adds ms of
                 round trip between two nodes, changeable live (lab_delay_set A B MS); docs/lab.md "Delay links"

With a bgp section in the config (examples/lab.yaml has one) the router runs BIRD 2 and learns the
VIP routes from the MUXes' BGP speakers (docs/bgp.md); `scripts/lab.sh birdc show route` asks it.
  --no-daemons   topology and backends only
  --prometheus   also run Debian's prometheus in its own namespace (198.18.0.9:9090), scraping GET
                 /metrics of every MUX, host agent and the controller (docs/metrics.md); status prints its URL
  --no-controller  no controller namespace: the daemons take their policy from the config file alone
                 (default: slbx-controller at 198.18.0.5:8480, every daemon watching it; slbctl runs in
                 its namespace: scripts/lab.sh exec controller node dist/cli/slbctl.js agents)
  --controllers N  N (2..5) controller replicas on an N-member etcd cluster instead of one controller
                 with a state file: replica K and etcd member K in namespace controller (K=1, 198.18.0.5)
                 or controllerK (198.18.0.(4+K)); every daemon and slbctl gets all N URLs; status shows
                 the leader (docs/controller.md, Replicas; scripts/lab/controllers.sh)
EOF
}

usage_status() { printf 'usage: scripts/lab.sh status [--name N]\n\nShows a lab: namespaces and addresses, the router'"'"'s routes to the VIPs, processes, daemon status.\n'; }
usage_down() { printf 'usage: scripts/lab.sh down [--name N]\n       scripts/lab.sh down --prefix slbx-XXXX-\n\nStops the lab'"'"'s processes, deletes its namespaces (and veths). Logs and pcaps stay in runs/lab/NAME/.\n--prefix: an orphan run whose state.env is gone (scripts/lab.sh list shows them).\n'; }
usage_list() { printf 'usage: scripts/lab.sh list\n\nLists the labs of this checkout that are up (or half up), with live namespaces and processes.\n'; }
usage_exec() {
  cat <<'EOF'
usage: scripts/lab.sh exec [--name N] NODE CMD [ARGS...]

Runs CMD inside NODE's namespace (ip netns exec), in the current directory, with SLBX_TOKEN_FILE set to
the lab's API token (runs/lab/NAME/api-token) unless it is set already, so slbctl can make changes and
read what the agents report. Examples:
  scripts/lab.sh exec client1 curl -s http://203.0.113.10/
  scripts/lab.sh exec client1 curl -s 'http://[2001:db8:ff::10]/'
  scripts/lab.sh exec client1 node dist/scripts/lab/client.js http --url http://203.0.113.10/ --count 100 --concurrency 8
  scripts/lab.sh exec client1 node dist/scripts/lab/client.js udp --target 203.0.113.10:7 --flows 64 --sources 198.51.100.10-198.51.100.41
  scripts/lab.sh exec mux1 tcpdump -ni fab0 -c 20
  scripts/lab.sh exec router ip route
  scripts/lab.sh exec host1 curl -s 127.0.0.1:9181/status
  scripts/lab.sh exec controller node dist/cli/slbctl.js agents
  scripts/lab.sh exec controller node dist/cli/slbctl.js backend drain web h1vm1 --wait
EOF
}

# Parses --name N (and --help) off the front of the arguments; the rest stays in REST.
parse_name() {
  NAME=default
  REST=()
  while [ $# -gt 0 ]; do
    case $1 in
      --name) [ $# -ge 2 ] || { echo "--name needs a value" >&2; exit 2; }; NAME=$2; shift 2 ;;
      --name=*) NAME=${1#*=}; shift ;;
      -h|--help) HELP=1; shift ;;
      *) REST=("$@"); break ;;
    esac
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
HELP=0
case $cmd in
  ''|-h|--help|help)
    usage_main
    [ -n "$cmd" ] || exit 2
    exit 0 ;;
  up)
    args=()
    name=default
    while [ $# -gt 0 ]; do
      case $1 in
        -h|--help) usage_up; exit 0 ;;
        --name) [ $# -ge 2 ] || { echo "--name needs a value" >&2; exit 2; }; name=$2; args+=(--name "$2"); shift 2 ;;
        --name=*) name=${1#*=}; args+=("$1"); shift ;;
        --config|--clients|--muxes|--delays) [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }; args+=("$1" "$2"); shift 2 ;;
        --config=*|--clients=*|--muxes=*|--no-daemons|--no-controller) args+=("$1"); shift ;;
        --prometheus) export LAB_PROMETHEUS=1; shift ;;  # scripts/lab/prometheus.sh
        --controllers) [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }; export LAB_CONTROLLERS=$2; shift 2 ;;  # scripts/lab/controllers.sh
        *) echo "scripts/lab.sh up: unknown argument '$1' (see scripts/lab.sh up --help)" >&2; exit 2 ;;
      esac
    done
    [ "$(id -u)" = 0 ] || { echo "scripts/lab.sh up: needs root (network namespaces)" >&2; exit 1; }
    # shellcheck source=lib/setup.sh
    source "$SLBX_ROOT/scripts/lib/setup.sh"
    here=$PWD
    slbx_setup
    cd "$here"
    # interrupted half way: take down what was built (lab_up cleans up after its own failures)
    trap 'trap - INT TERM; echo >&2; lab_down "$name" >&2; exit 130' INT TERM
    lab_up "${args[@]}"
    if [ "${LAB_PROMETHEUS:-0}" = 1 ]; then lab_prometheus_up || { lab_down "$name" >&2; exit 1; }; fi
    trap - INT TERM
    n=''; [ "$name" = default ] || n=" --name $name"
    vip4=$(awk '$1 == "vip" && $2 !~ /:/ { print $2; exit }' "$LAB_DIR/plan.txt")
    vip6=$(awk '$1 == "vip" && $2 ~ /:/ { print $2; exit }' "$LAB_DIR/plan.txt")
    echo
    echo "lab '$name' is up. Try:"
    [ -z "$vip4" ] || echo "  scripts/lab.sh exec$n client1 curl -s http://$vip4/"
    [ -z "$vip6" ] || echo "  scripts/lab.sh exec$n client1 curl -s 'http://[$vip6]/'"
    [ -z "$vip4" ] || echo "  scripts/lab.sh exec$n client1 node dist/scripts/lab/client.js http --url http://$vip4/ --count 100 --concurrency 8"
    [ "${LAB_PROMETHEUS:-0}" = 1 ] && echo "  scripts/lab.sh exec$n prometheus curl -s '$(lab_prometheus_url)/api/v1/query?query=up'"
    echo "  scripts/lab.sh status$n"
    echo "  scripts/lab.sh exec$n router ip route"
    echo "  scripts/lab.sh down$n"
    ;;
  down)
    if [ "${1:-}" = --prefix ]; then
      [ $# = 2 ] || { echo "usage: scripts/lab.sh down --prefix slbx-XXXX-" >&2; exit 2; }
      [ "$(id -u)" = 0 ] || { echo "scripts/lab.sh down: needs root" >&2; exit 1; }
      lab_down_prefix "$2"
      exit
    fi
    parse_name "$@"
    [ "$HELP" = 0 ] || { usage_down; exit 0; }
    [ ${#REST[@]} = 0 ] || { echo "scripts/lab.sh down: unexpected argument '${REST[0]}'" >&2; exit 2; }
    [ "$(id -u)" = 0 ] || { echo "scripts/lab.sh down: needs root" >&2; exit 1; }
    lab_down "$NAME"
    ;;
  status)
    parse_name "$@"
    [ "$HELP" = 0 ] || { usage_status; exit 0; }
    [ ${#REST[@]} = 0 ] || { echo "scripts/lab.sh status: unexpected argument '${REST[0]}'" >&2; exit 2; }
    lab_status "$NAME"
    lab_prometheus_status
    lab_controllers_status
    ;;
  list)
    case ${1:-} in -h|--help) usage_list; exit 0 ;; '') ;; *) echo "scripts/lab.sh list: unexpected argument '$1'" >&2; exit 2 ;; esac
    lab_list
    ;;
  birdc)
    parse_name "$@"
    [ "$HELP" = 0 ] || { printf 'usage: scripts/lab.sh birdc [--name N] ARGS...\n\nRuns birdc against the lab router'"'"'s BIRD (control socket runs/lab/N/bird.ctl), e.g.\n  scripts/lab.sh birdc show protocols\n  scripts/lab.sh birdc show route all\n  scripts/lab.sh birdc show protocols all mux1\nThe same by hand: scripts/lab.sh exec router birdc -s runs/lab/N/bird.ctl show route\n'; exit 0; }
    [ "$(id -u)" = 0 ] || { echo "scripts/lab.sh birdc: needs root" >&2; exit 1; }
    LAB_NAME=$NAME
    lab_use "$NAME"
    lab_birdc "${REST[@]}"
    ;;
  exec)
    parse_name "$@"
    [ "$HELP" = 0 ] || { usage_exec; exit 0; }
    [ ${#REST[@]} -ge 2 ] || { echo "usage: scripts/lab.sh exec [--name N] NODE CMD [ARGS...] (see --help)" >&2; exit 2; }
    LAB_NAME=$NAME
    lab_use "$NAME"
    node=${REST[0]}
    ns=$(lab_ns "$node")
    # as lab_exec does: slbctl finds the controller's API token here (runs/lab/NAME/api-token, mode 600)
    SLBX_TOKEN_FILE=${SLBX_TOKEN_FILE:-$LAB_DIR/api-token} exec ip netns exec "$ns" "${REST[@]:1}"
    ;;
  delay)  # delay links (scripts/lab/delay.sh; docs/lab.md "Delay links")
    parse_name "$@"
    [ "$HELP" = 0 ] || { printf 'usage: scripts/lab.sh delay [--name N] A B MS\n       scripts/lab.sh delay [--name N] status\n\nSets the delay link between lab nodes A and B to MS ms of round trip (MS/2 each way), live, and\nwaits until it applies; status prints the device'"'"'s settings and counters. The lab must have been\nbrought up with --delays FILE naming the pair (0 ms is fine).\n'; exit 0; }
    [ "$(id -u)" = 0 ] || { echo "scripts/lab.sh delay: needs root" >&2; exit 1; }
    lab_use "$NAME"
    if [ "${REST[*]}" = status ]; then lab_delay_status; exit; fi
    [ ${#REST[@]} = 3 ] || { echo "usage: scripts/lab.sh delay [--name N] A B MS | status (see --help)" >&2; exit 2; }
    lab_delay_set "${REST[@]}"
    ;;
  *)
    echo "scripts/lab.sh: unknown command '$cmd' (up, down, status, exec, birdc, list; see --help)" >&2
    exit 2 ;;
esac
