#!/usr/bin/env bash
# 06-priority-failover: the pool gets two priority-1 backends (h1vm1, h2vm1) and two priority-2 ones
# (h1vm2, h2vm2), changed live through the controller (slbctl, no process restarted). All new flows go
# to priority 1. Both priority-1 HTTP servers are stopped: once their probes are down (within
# intervalMs x downThreshold + intervalMs) new flows go to priority 2, and not one request fails. They
# are started again: new flows return to priority 1. Verified from the captures (the MUXes' VXLAN, each
# backend's eth0; tshark cross-check) and the client's records; the timeline from the daemons' logs.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
REQUESTS=${REQUESTS:-500}
VIP=203.0.113.10
# each phase from its own client addresses: a connection never reuses the 5-tuple of an earlier phase,
# whose MUX flow entry may still point to a backend that is down now (see docs/probes.md, limits)
SRC_BEFORE=198.51.100.10-198.51.100.19 SRC_DOWN=198.51.100.20-198.51.100.29 SRC_UP=198.51.100.30-198.51.100.39
lab_setup_scenario sc06
lab_up
read -r INTERVAL _TIMEOUT UP DOWN < <(hc_probe_timing http80)
BOUND_DOWN=$(( INTERVAL * DOWN + INTERVAL ))
BOUND_UP=$(( INTERVAL * UP + INTERVAL ))
for n in $(lab_nodes nic); do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 20; done
hc_ctl backend set web h1vm2 --priority 2 --wait
hc_ctl backend set web h2vm2 --priority 2 --wait
hc_ctl backend list web
hc_wait_mux_candidates web/http80 h1vm1,h2vm1 10 >/dev/null
sc_capture_path
rc=0
ms_sleep() { sleep "$(printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )))" & wait $!; }

t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source "$SRC_BEFORE" --json "$LAB_DIR/priority1.json" || rc=1
hc_phase priority1 "$t0" "$(hc_now_us)" "$LAB_DIR/priority1.json" allok count="$REQUESTS" only=h1vm1,h2vm1

lab_backend_stop h1vm1 http
lab_backend_stop h2vm1 http
stopped=$(hc_now_us)
printf '[sc06] h1vm1 and h2vm1 http stopped; waiting the bound, %s ms\n' "$BOUND_DOWN"
ms_sleep "$BOUND_DOWN"
t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source "$SRC_DOWN" --json "$LAB_DIR/priority2.json" || rc=1
hc_phase priority2 "$t0" "$(hc_now_us)" "$LAB_DIR/priority2.json" allok count="$REQUESTS" only=h1vm2,h2vm2

lab_backend_start h1vm1 http
lab_backend_start h2vm1 http
started=$(hc_now_us)
printf '[sc06] h1vm1 and h2vm1 http started; waiting the bound, %s ms\n' "$BOUND_UP"
ms_sleep "$BOUND_UP"
t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source "$SRC_UP" --json "$LAB_DIR/restored.json" || rc=1
hc_phase restored "$t0" "$(hc_now_us)" "$LAB_DIR/restored.json" allok count="$REQUESTS" only=h1vm1,h2vm1

sleep 0.3
lab_capture_stop_all || rc=1
printf '\ntimeline (from the daemons'"'"' logs):\n'
for n in h1vm1 h2vm1; do hc_timeline "$n" down "$stopped" "$BOUND_DOWN" || rc=1; done
for n in h1vm1 h2vm1; do hc_timeline "$n" up "$started" "$BOUND_UP" || rc=1; done
printf '\ncaptures:\n'
hc_verify_phases --vip "$VIP" --port 80 || rc=1
exit "$rc"
