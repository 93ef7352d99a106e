# shellcheck shell=bash
# The lab's process records and PID reuse (sourced by scripts/lab/lib.sh).
#
# The lab keys its records by PID: SLBX_LAB_PROCS ("PID KIND NODE WHAT...") and SLBX_LAB_STOPPED (PIDs
# stopped on purpose, so a later look-up skips them). PIDs are reused: with the kernel's default
# pid_max of 32768, a busy machine wraps within an hour. When a process the lab starts gets a PID that
# an earlier record holds, that earlier process is dead (the kernel hands out only free PIDs), so its
# records are dropped; otherwise the new process would look stopped (a one-hour soak lost its flapping
# backend that way: its stop found "no running http backend", the server kept port 80, and every
# later start failed with EADDRINUSE).

# _lab_pid_reused PID: forgets every record of PID (in this shell and in state.env), called right after
# the lab started a process that got PID and before that process is recorded.
_lab_pid_reused() {
  local pid=$1 e keep=() state=${LAB_DIR:-}/state.env changed=0
  for e in "${SLBX_LAB_STOPPED[@]}"; do if [ "$e" = "$pid" ]; then changed=1; else keep+=("$e"); fi; done
  SLBX_LAB_STOPPED=("${keep[@]}")
  keep=()
  for e in "${SLBX_LAB_PROCS[@]}"; do if [ "${e%% *}" = "$pid" ]; then changed=1; else keep+=("$e"); fi; done
  SLBX_LAB_PROCS=("${keep[@]}")
  [ -n "${LAB_DIR:-}" ] && [ -f "$state" ] || return 0
  # the file is the record of truth (lab_up's subshell records there only): rewrite both arrays from
  # it, appended (a later assignment replaces the earlier ones when the file is sourced)
  (
    SLBX_LAB_PROCS=() SLBX_LAB_STOPPED=()
    # shellcheck disable=SC1090
    source "$state" || exit 1
    keep=() found=0
    for e in "${SLBX_LAB_STOPPED[@]}"; do if [ "$e" = "$pid" ]; then found=1; else keep+=("$e"); fi; done
    stopped=("${keep[@]}")
    keep=()
    for e in "${SLBX_LAB_PROCS[@]}"; do if [ "${e%% *}" = "$pid" ]; then found=1; else keep+=("$e"); fi; done
    [ "$found" = 1 ] || exit 0
    printf 'SLBX_LAB_PROCS=('; [ ${#keep[@]} = 0 ] || printf ' %q' "${keep[@]}"; printf ' )\n'
    printf 'SLBX_LAB_STOPPED=('; [ ${#stopped[@]} = 0 ] || printf ' %q' "${stopped[@]}"; printf ' )\n'
  ) >>"$state.pids" || { rm -f "$state.pids"; _lab_err "could not read $state"; return 1; }
  if [ -s "$state.pids" ]; then cat "$state.pids" >>"$state"; changed=1; fi
  rm -f "$state.pids"
  [ "$changed" = 0 ] || _lab_log "pid $pid reused: the records of its earlier process dropped"
  return 0
}
