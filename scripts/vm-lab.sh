#!/usr/bin/env bash
# slbx VM lab: Debian virtual machines under QEMU (software emulation, TCG) running slbx installed from
# its npm package with its systemd units: a router (BIRD), a controller, two MUXes, two hosts (each with
# a backend in a network namespace) and a client. Their network is TAP devices on bridges inside one
# network namespace of the lab's own: nothing reaches the root namespace or leaves the machine. Root only.
#   scripts/vm-lab.sh up [--name N]            build or reuse the image, boot the VMs, install, wait for the route
#   scripts/vm-lab.sh status [--name N]        each VM's QEMU, its slbx units, the router's VIP route
#   scripts/vm-lab.sh exec [--name N] VM CMD   run CMD in VM as root (ssh over the management bridge)
#   scripts/vm-lab.sh down [--name N]          stop the VMs (their QEMUs, by PID), remove the namespace
#   scripts/vm-lab.sh test [--name N] [--keep] up, the checks of scripts/vm/test.sh, down; exit 0 only when every verdict holds
# --name: the lab's name and namespace (default slbx-vm). The image is cached in $SLBX_VM_CACHE
# (default /var/cache/slbx-vm); logs, pcaps and results in runs/vm-lab/NAME/. docs/deploy.md explains.
set -euo pipefail
SLBX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SLBX_ROOT
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
cmd=${1:-}
[ -n "$cmd" ] || { usage >&2; exit 2; }
shift
keep=0 args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --name) VM_NAME=${2:?--name NAME}; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done
case $cmd in -h|--help) usage; exit 0 ;; esac
VM_NAME=${VM_NAME:-slbx-vm}
case $VM_NAME in *[!A-Za-z0-9_-]*|'') echo "vm-lab: --name takes letters, digits, - and _ (got '$VM_NAME')" >&2; exit 2 ;; esac
[ "${#VM_NAME}" -le 15 ] || { echo "vm-lab: --name is at most 15 characters (got ${#VM_NAME})" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "vm-lab: needs root (namespaces, TAP devices, QEMU)" >&2; exit 2; }
# shellcheck source=vm/lib.sh
source "$SLBX_ROOT/scripts/vm/lib.sh"
vm_paths
case $cmd in
  up) [ "${#args[@]}" = 0 ] || { usage >&2; exit 2; }; vm_up ;;
  down) vm_down ;;
  status) vm_status ;;
  exec)
    [ "${#args[@]}" -ge 2 ] || { echo "usage: scripts/vm-lab.sh exec [--name N] VM CMD [ARGS...]" >&2; exit 2; }
    vm_exec "${args[0]}" "${args[@]:1}" ;;
  test)
    rc=0
    if ! vm_up; then rc=1; vm_err "up failed"; fi
    [ "$rc" = 0 ] && { bash "$SLBX_ROOT/scripts/vm/test.sh" --name "$VM_NAME" || rc=$?; }
    [ "$keep" = 1 ] || vm_down
    [ "$rc" = 0 ] && vm_log "PASS (results: $VM_RUN/results.txt)" || vm_log "FAIL (results: $VM_RUN/results.txt, consoles: $VM_RUN/console-*.log)"
    exit "$rc" ;;
  *) echo "vm-lab: unknown command '$cmd'" >&2; usage >&2; exit 2 ;;
esac
