#!/usr/bin/env bash
# 05-probe-failover: the HTTP server of one backend (h1vm1) is stopped. Its host agent's probe (http80:
# GET /health every intervalMs) sees it, the controller tells the MUXes, and within
# intervalMs x downThreshold + intervalMs no new connection reaches it: the 1,000 requests made after
# that point all succeed, on the three others. Started again, it gets new connections again within
# intervalMs x upThreshold + intervalMs. Verified from the captures (the MUXes' VXLAN, each backend's
# eth0; tshark cross-check) and the client's records; the timeline from the daemons' logs.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
source scripts/scenarios/lib/health.sh
REQUESTS=${REQUESTS:-1000}
VIP=203.0.113.10
# each phase from its own client addresses: a connection never reuses the 5-tuple of an earlier phase,
# whose MUX flow entry may still point to a backend that is down now (see docs/probes.md, limits)
SRC_BEFORE=198.51.100.10-198.51.100.19 SRC_DOWN=198.51.100.20-198.51.100.29 SRC_UP=198.51.100.30-198.51.100.39
lab_setup_scenario sc05
lab_up
read -r INTERVAL _TIMEOUT UP DOWN < <(hc_probe_timing http80)
BOUND_DOWN=$(( INTERVAL * DOWN + INTERVAL ))
BOUND_UP=$(( INTERVAL * UP + INTERVAL ))
for n in $(lab_nodes nic); do hc_wait_probes "$(_lab_plan_line nic "$n" | awk '{ print $3 }')" "$n" up 20; done
hc_wait_mux_candidates web/http80 h1vm1,h1vm2,h2vm1,h2vm2 20 >/dev/null
sc_capture_path
rc=0

t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count 200 --concurrency 8 --source "$SRC_BEFORE" --json "$LAB_DIR/before.json" || rc=1
hc_phase before "$t0" "$(hc_now_us)" "$LAB_DIR/before.json" allok count=200 only=h1vm1,h1vm2,h2vm1,h2vm2

lab_backend_stop h1vm1 http
stopped=$(hc_now_us)
printf '[sc05] h1vm1 http stopped; waiting the bound, %s ms x %s + %s ms = %s ms\n' "$INTERVAL" "$DOWN" "$INTERVAL" "$BOUND_DOWN"
sleep "$(printf '%d.%03d' $(( BOUND_DOWN / 1000 )) $(( BOUND_DOWN % 1000 )))" & wait $!
t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source "$SRC_DOWN" --json "$LAB_DIR/down.json" || rc=1
hc_phase down "$t0" "$(hc_now_us)" "$LAB_DIR/down.json" allok count="$REQUESTS" only=h1vm2,h2vm1,h2vm2

lab_backend_start h1vm1 http
started=$(hc_now_us)
printf '[sc05] h1vm1 http started; waiting the bound, %s ms x %s + %s ms = %s ms\n' "$INTERVAL" "$UP" "$INTERVAL" "$BOUND_UP"
sleep "$(printf '%d.%03d' $(( BOUND_UP / 1000 )) $(( BOUND_UP % 1000 )))" & wait $!
t0=$(hc_now_us)
sc_client client1 http --url "http://$VIP/" --count "$REQUESTS" --concurrency 8 --source "$SRC_UP" --json "$LAB_DIR/up.json" || rc=1
hc_phase up "$t0" "$(hc_now_us)" "$LAB_DIR/up.json" allok count="$REQUESTS" only=h1vm1,h1vm2,h2vm1,h2vm2

sleep 0.3
lab_capture_stop_all || rc=1
printf '\ntimeline (from the daemons'"'"' logs):\n'
hc_timeline h1vm1 down "$stopped" "$BOUND_DOWN" || rc=1
hc_timeline h1vm1 up "$started" "$BOUND_UP" || rc=1
printf '\ncaptures:\n'
hc_verify_phases --vip "$VIP" --port 80 || rc=1
exit "$rc"
