#!/usr/bin/env bash
# 41-workers: the lab with --workers 2 on every MUX (--io ring: the kernel spreads the flows over the
# workers' ring sockets by PACKET_FANOUT, docs/io-paths.md).
#   1. Scenario 01's traffic and its verifier, unchanged: 1,000 HTTP requests, every packet followed
#      through the captures (MUX in, VXLAN out byte for byte, backend, direct server return).
#   2. A table change under traffic: 3,000 requests run while a backend is drained (slbctl ... --wait:
#      every MUX acked the new policy); then every worker of every MUX must show the MUX's generation in
#      /status, and 500 new connections made after that: none reaches the drained backend.
#   Over all captures at the backends' ports: no reordering within any TCP flow; each MUX's two workers
#   both forwarded frames. Every request of both runs succeeds (drained: established flows continue).
# Scenarios 11 (mux-crash) and 17 (syn-flood) run the same way with
#   LAB_DAEMON_IO=ring LAB_MUX_WORKERS=2 scripts/scenarios/11-mux-crash.sh   (and 17-syn-flood.sh)
# (their checks unchanged; not repeated here to keep this one near 2 minutes).
# The host agents run one thread (their --workers is not built yet).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
REQUESTS=${REQUESTS:-1000}
VIP=203.0.113.10
DRAIN=h2vm2
LAB_DAEMON_IO=ring
LAB_MUX_WORKERS=2
lab_setup_scenario sc41
lab_up
rc=0

echo "--- 1. scenario 01's checks, every MUX with 2 workers"
sc_capture_path
sc_client client1 http --url http://$VIP/ --count "$REQUESTS" --concurrency 8 --json "$LAB_DIR/client-http.json" || rc=1
sleep 0.3   # as scenario 01: the last replies reach every capture
lab_capture_stop_all
sc_verify north-south --run "$LAB_DIR" --vip $VIP --port 80 --requests "$REQUESTS" \
  --client-json "$LAB_DIR/client-http.json" --account "$LAB_DIR/account.json" || rc=1

echo "--- 2. a drain under traffic"
nics=$(lab_nodes nic)
for n in $nics; do lab_capture_start "$n" eth0 "$n-change" tcp port 80 >/dev/null; done
flows0=$(sc_mux_flows)
sc_client client1 http --url http://$VIP/ --count 3000 --concurrency 8 --json "$LAB_DIR/during.json" >"$LAB_DIR/during.out" 2>&1 &
client=$!
sc_wait_for "200 new flows through the MUXes" 60 eval '[ "$(sc_mux_flows)" -ge $((flows0 + 200)) ]' || rc=1
lab_slbctl backend drain web $DRAIN --wait >/dev/null || rc=1
echo "drained $DRAIN (every MUX acked)"
# every worker of every MUX at its MUX's generation (shared status word, read by /status)
workers_at_generation() {
  local m
  for m in $(lab_nodes mux); do
    lab_daemon_status "$m" | node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8"));
      process.exit((s.workers ?? []).length === 2 && s.workers.every((w) => w.alive && w.generation === s.generation) ? 0 : 1)' || return 1
  done
}
sc_wait_for "every worker at its MUX's generation" 60 workers_at_generation || rc=1
during_rc=0
wait "$client" || during_rc=$?
[ "$during_rc" = 0 ] || { echo "FAIL requests across the drain: the client exited $during_rc"; tail -n 5 "$LAB_DIR/during.out"; rc=1; }
echo "--- 3. new connections after every worker acknowledged"
for n in $nics; do lab_capture_stop "$n-change"; done
for n in $nics; do lab_capture_start "$n" eth0 "$n-after" tcp port 80 >/dev/null; done
# from addresses the earlier runs did not use (client1 has 198.51.100.10-41; the runs above used .10): a
# reused 4-tuple may still be in a MUX's flow table, which keeps it on its backend, drained or not
sc_client client1 http --url http://$VIP/ --count 500 --concurrency 8 --source 198.51.100.30-198.51.100.41 --json "$LAB_DIR/after.json" || rc=1
sleep 0.3
lab_capture_stop_all
statuses=()
for m in $(lab_nodes mux); do
  lab_daemon_status "$m" >"$LAB_DIR/status-$m.json"; statuses+=("$LAB_DIR/status-$m.json")
  lab_exec "$m" curl -s -m 2 "http://127.0.0.1:$LAB_MUX_STATUS_PORT/metrics" >"$LAB_DIR/metrics-$m.txt" || rc=1
done
join() { local IFS=,; echo "$*"; }
before=() after=()
for n in $nics; do before+=("$n" "$n-change"); after+=("$n-after"); done
sc_verify workers --run "$LAB_DIR" --port 80 --drained $DRAIN --before "$(join "${before[@]}")" --after "$(join "${after[@]}")" \
  --status "$(join "${statuses[@]}")" || rc=1
exit "$rc"
