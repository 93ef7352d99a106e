#!/usr/bin/env bash
# 33-metrics-prometheus: a real Prometheus (Debian's `prometheus`, in its own namespace on the fabric)
# scrapes GET /metrics of every MUX, host agent and the controller (scripts/lab.sh up --prometheus;
# docs/metrics.md). The pool's weights are set uneven (10/20/30/40), then the lab client sends FLOWS UDP
# flows of one datagram each to the VIP's echo rule and records which backend answered each. What must hold, from Prometheus's HTTP API (answers kept in
# RUN/prom/) against the client's records:
#   * per backend, sum by (backend) (increase(slbx_mux_backend_packets_total[W])) over a range that
#     holds the traffic window (and the scrapes before it), and the raw counters' growth between a sample
#     before and one after it, agree with the client's count within 5 %;
#   * the same growth of the new series (issue 21): per backend the MUXes' new flows
#     (slbx_mux_backend_new_flows_total), the frames its host agent delivered to it and the replies it
#     sent by DSR (slbx_host_backend_{delivered,dsr}_packets_total) against the client's flows answered
#     by it, within 5 %; per VIP rule (slbx_mux_vip_{packets,new_flows}_total{vip,rule}) the echo rule
#     against the flows the client sent, and no other rule of the VIP moved;
#   * a MUX killed with SIGKILL is down in up{} and its session is gone from slbx_mux_bgp_session_up
#     while the other's stays up; docs/metrics.md's "BGP down" query names it; the controller's
#     slbx_controller_agent_connected drops it.
# Waits are for evidence (a scrape after the traffic, the failed scrape), with generous deadlines.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
VIP=203.0.113.10
FLOWS=${FLOWS:-3000}
KILLED=mux1
lab_setup_scenario sc33
command -v prometheus >/dev/null || {
  why='Debian package prometheus is not installed (apt-get install prometheus; scripts/lab.sh up installs it)'
  echo "[sc33] $why" >&2
  [ -n "${SLBX_SKIP_REASON_FILE:-}" ] && echo "$why" >"$SLBX_SKIP_REASON_FILE"
  [ -n "${CI:-}" ] && exit 1
  exit 77
}
export LAB_PROMETHEUS=1 LAB_PROMETHEUS_SCRAPE_S=1
# increase() extrapolates from the samples in its range to the range's end: by up to a scrape interval
# of the rate over the span of samples. With the counters flat at 0 before the traffic (no extrapolation
# below zero at the start) and at least SAMPLES_BEFORE scrapes before it, that is below 1.1/SAMPLES_BEFORE
# (under 3 % with 40): the 5 % left over is the agreement itself
SAMPLES_BEFORE=${SAMPLES_BEFORE:-40}
lab_up
lab_prometheus_up
mkdir -p "$LAB_DIR/prom"
rc=0

# prom_save FILE EXPR [TIME]: an instant query's answer into RUN/prom/FILE
prom_save() { lab_prometheus_api /api/v1/query "query=$2" ${3:+"time=$3"} >"$LAB_DIR/prom/$1"; }
# prom_series EXPR: how many series an instant query answers (-1 when it cannot be asked)
prom_series() {
  local n
  n=$(lab_prometheus_api /api/v1/query "query=$1" 2>/dev/null |
    node -e 'let t="";process.stdin.on("data",d=>t+=d).on("end",()=>{try{console.log(JSON.parse(t).data.result.length)}catch{console.log(-1)}})') || n=-1
  printf '%s\n' "$n"
}
now_s() { printf '%s' "${EPOCHREALTIME}"; }
nmux=$(lab_nodes mux | wc -l)
# uneven weights (10/20/30/40 %): a count booked to the wrong backend is then far off, not within 5 %
for bw in h1vm1:10 h1vm2:20 h2vm1:30 h2vm2:40; do
  lab_slbctl backend set web "${bw%%:*}" --weight "${bw#*:}" --wait >/dev/null || rc=1
done
sc_wait_for "every MUX's BGP session up in slbx_mux_bgp_session_up" 60 \
  eval '[ "$(prom_series "slbx_mux_bgp_session_up == 1")" = "$nmux" ]' || rc=1

sc_wait_for "$SAMPLES_BEFORE scrapes of every MUX before the traffic" 120 \
  eval '[ "$(prom_series "count_over_time(up{job=\"slbx-mux\"}[5m]) >= $SAMPLES_BEFORE")" = "$nmux" ]' || rc=1
t0=$(now_s)
sc_client client1 udp --target "$VIP:7" --flows "$FLOWS" --sources 198.51.100.10-198.51.100.41 --concurrency 32 \
  --json "$LAB_DIR/udp.json" | tail -n 6 || rc=1
t_end=$(now_s)
# T1: once every MUX and host agent was scraped after the traffic ended
nhost=$(lab_nodes host | wc -l)
sc_wait_for "a scrape of every MUX after the traffic" 60 \
  eval '[ "$(prom_series "timestamp(slbx_mux_ready{job=\"slbx-mux\"}) > $t_end")" = "$nmux" ]' || rc=1
sc_wait_for "a scrape of every host agent after the traffic" 60 \
  eval '[ "$(prom_series "timestamp(slbx_host_ready{job=\"slbx-host\"}) > $t_end")" = "$nhost" ]' || rc=1
t1=$(now_s)
# the range: the traffic window and the scrapes before it (all of the series' life so far)
w=$(awk -v a="$t0" -v b="$t1" -v n="$SAMPLES_BEFORE" 'BEGIN { printf "%d", b - a + 2 * n }')
echo "$t0 $t1 $w" >"$LAB_DIR/prom/window.txt"
prom_save total-t0.json 'sum by (backend) (slbx_mux_backend_packets_total)' "$t0" || rc=1
prom_save total-t1.json 'sum by (backend) (slbx_mux_backend_packets_total)' "$t1" || rc=1
prom_save increase.json "sum by (backend) (increase(slbx_mux_backend_packets_total[${w}s]))" "$t1" || rc=1
prom_save rate.json "sum by (backend) (rate(slbx_mux_backend_packets_total[${w}s]))" "$t1" || rc=1
# the per-backend and per-rule series, raw, at T0 and T1 (the verifier takes the growth)
for t in t0 t1; do
  at=$t0
  [ "$t" = t1 ] && at=$t1
  prom_save "new-flows-$t.json" 'sum by (backend) (slbx_mux_backend_new_flows_total)' "$at" || rc=1
  prom_save "delivered-$t.json" 'sum by (backend) (slbx_host_backend_delivered_packets_total)' "$at" || rc=1
  prom_save "dsr-$t.json" 'sum by (backend) (slbx_host_backend_dsr_packets_total)' "$at" || rc=1
  prom_save "vip-packets-$t.json" 'sum by (vip, rule) (slbx_mux_vip_packets_total)' "$at" || rc=1
  prom_save "vip-new-flows-$t.json" 'sum by (vip, rule) (slbx_mux_vip_new_flows_total)' "$at" || rc=1
done
prom_save bgp-before.json 'slbx_mux_bgp_session_up' || rc=1

# a MUX dies: SIGKILL, no BGP Cease; its next scrape fails
lab_mux_stop "$KILLED" KILL || rc=1
echo "[sc33] $KILLED killed; waiting for Prometheus to see it"
sc_wait_for "up{node=\"$KILLED\"} == 0" 60 eval '[ "$(prom_series "up{job=\"slbx-mux\",node=\"$KILLED\"} == 0")" = 1 ]' || rc=1
sc_wait_for "$KILLED's session gone from slbx_mux_bgp_session_up" 60 \
  eval '[ "$(prom_series "slbx_mux_bgp_session_up{node=\"$KILLED\"}")" = 0 ]' || rc=1
sc_wait_for "the controller's slbx_controller_agent_connected{agent=\"$KILLED\"} == 0" 60 \
  eval '[ "$(prom_series "slbx_controller_agent_connected{kind=\"mux\",agent=\"$KILLED\"} == 0")" = 1 ]' || rc=1
prom_save up-after.json 'up{job="slbx-mux"}' || rc=1
prom_save alert-after.json 'up{job="slbx-mux"} == 0 or slbx_mux_bgp_session_up == 0' || rc=1
prom_save bgp-after.json 'slbx_mux_bgp_session_up' || rc=1
prom_save controller-after.json 'slbx_controller_agent_connected{kind="mux"}' || rc=1

sc_verify metrics-prometheus --run "$LAB_DIR" --killed "$KILLED" --muxes "$nmux" --vip "$VIP" --rule echo || rc=1
exit "$rc"
