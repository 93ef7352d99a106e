#!/usr/bin/env bash
# 38-outbound-snat (issue 15, "What it must show", first bullet; examples/lab-outbound.yaml; the lab:
# docs/lab.md, 'The outbound NAT lab'): the four backends each open TCP connections (500 by default,
# each exchanging data for several seconds) and UDP flows (500) of their own to the remote server on the
# client side (client2, 198.51.100.50, scripts/lab/snat-server.ts), and h1vm1 a few over IPv6 too. From
# the server's capture (slbx's codecs and tshark) and records: only the frontend IPs (203.0.113.200,
# 2001:db8:ff::200) as source, no two live flows on one (frontend IP, port, server endpoint); from the
# client tool's records (scripts/lab/snat-client.ts): every connection and flow completed, each on its
# own nic's ports, every byte echoed back to the DIP that sent it; from the MUXes' status: no flow placed,
# their flow tables not grown, the replies forwarded by the range table (snat_forwarded); from the hosts'
# counters: translated both ways, nothing dropped. host1's host agent runs with 2 worker threads
# (--workers 2 --io ring: LAB_HOST_WORKERS_ON, scripts/lab/workers.sh; docs/outbound.md "Workers"),
# host2's with one, so both paths carry the same run: from host1's status after the traffic, both workers
# held outbound NAT flows, and the snat section sums theirs.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
TCP=${SNAT_TCP:-500} UDP=${SNAT_UDP:-500} TCP6=${SNAT_TCP6:-50} UDP6=${SNAT_UDP6:-50} SECONDS_EACH=${SNAT_SECONDS:-6}
FE4=203.0.113.200 FE6=2001:db8:ff::200 SRV4=198.51.100.50 SRV6=2001:db8:c::50
lab_setup_scenario sc38
LAB_HOST_WORKERS=2 LAB_HOST_WORKERS_ON=host1
lab_up --config examples/lab-outbound.yaml --clients 2
lab_snat_server_start client2
# the frontend IPs are routed over both MUXes (announced by BGP like a VIP)
both_muxes() { [ "$(lab_router_nexthops "$1" | wc -l)" = 2 ]; }
sc_wait_for "$FE4 routed over both MUXes" 60 both_muxes "$FE4"
sc_wait_for "$FE6 routed over both MUXes" 60 both_muxes "$FE6"
lab_slbctl snat --json >"$LAB_DIR/snat.json"
lab_capture_start client2 eth0 server "tcp port $LAB_SNAT_TCP_PORT or udp port $LAB_SNAT_UDP_PORT" >/dev/null
for m in $(lab_nodes mux); do lab_daemon_status "$m" >"$LAB_DIR/$m-before.json"; done
for h in $(lab_nodes host); do sc_counters "$h" "$LAB_DIR/$h-before.json"; done
rc=0
# each connection sends a 64-byte message every 2 s and gets it echoed, each flow one exchange every 2 s
# (retried every 2 s up to 20 times: at load 20-25 on the 2-core machine the host agents' captures lose
# datagrams at the backends' ports, TCP retransmits its own), all started over 5 s
common=(--tcp-port "$LAB_SNAT_TCP_PORT" --udp-port "$LAB_SNAT_UDP_PORT" --seconds "$SECONDS_EACH" --interval-ms 2000 --ramp-ms 5000
  --udp-interval-ms 2000 --udp-retries 20 --udp-retry-ms 2000 --timeout-ms 120000)
pids=() clients=()
for n in $(lab_nodes nic); do
  lab_snat_client "$n" --server "$SRV4" --tcp "$TCP" --udp "$UDP" "${common[@]}" --json "$LAB_DIR/client-$n.json" >"$LAB_DIR/logs/snat-client-$n.log" 2>&1 &
  pids+=($!) clients+=("$n=$LAB_DIR/client-$n.json")
done
lab_snat_client h1vm1 --server "$SRV6" --tcp "$TCP6" --udp "$UDP6" "${common[@]}" --json "$LAB_DIR/client6-h1vm1.json" >"$LAB_DIR/logs/snat-client6-h1vm1.log" 2>&1 &
pids+=($!)
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ "$rc" = 0 ] || echo "[scenario] a client tool failed: $(tail -n 3 "$LAB_DIR"/logs/snat-client*.log)" >&2
# host1's workers' outbound NAT flows (TIME-WAIT keeps the closed ones SNAT_TIME_WAIT_S): before they age out
lab_daemon_status host1 >"$LAB_DIR/host1-status.json"
lab_snat_server_stop >/dev/null || rc=1
lab_capture_stop_all || rc=1
for m in $(lab_nodes mux); do lab_daemon_status "$m" >"$LAB_DIR/$m-after.json"; done
for h in $(lab_nodes host); do sc_counters "$h" "$LAB_DIR/$h-after.json"; done
sc_verify outbound-snat --run "$LAB_DIR" --clients "$(IFS=,; echo "${clients[*]}")" --client6 "h1vm1=$LAB_DIR/client6-h1vm1.json" \
  --server-records "$LAB_DIR/snat-server.json" --snat "$LAB_DIR/snat.json" --frontend4 "$FE4" --frontend6 "$FE6" \
  --server4 "$SRV4" --server6 "$SRV6" --tcp-port "$LAB_SNAT_TCP_PORT" --udp-port "$LAB_SNAT_UDP_PORT" \
  --tcp "$TCP" --udp "$UDP" --tcp6 "$TCP6" --udp6 "$UDP6" \
  --muxes "$(lab_nodes mux | paste -sd,)" --hosts "$(lab_nodes host | paste -sd,)" \
  --workers-status "host1=$LAB_DIR/host1-status.json" || rc=1
exit "$rc"
