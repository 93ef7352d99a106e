#!/usr/bin/env bash
# 04-bad-traffic: while good traffic runs, malformed, truncated, wrong-port, not-load-balanced and
# non-VIP packets are injected at a MUX, and forged or malformed VXLAN at a host agent; a fragmented
# UDP datagram (3000 bytes, cut by the client's kernel) goes through the VIP and its echo comes back.
# Both daemons keep serving (every good request succeeds) and their counters show every injected
# frame under its drop reason (a non-VIP address inside vipRanges as drop_not_vip); frames to addresses outside
# vipRanges never reach the MUX process (its capture filter).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLBX_ROOT=$(pwd); export SLBX_ROOT
source scripts/lab/lib.sh
source scripts/scenarios/lib/common.sh
lab_setup_scenario sc04
lab_up
mac_of() { lab_exec "$1" cat "/sys/class/net/$2/address"; }
sc_verify gen-bad --out "$LAB_DIR" --mux-mac "$(mac_of mux1 fab0)" --host-mac "$(mac_of host1 fab0)" --router-mac "$(mac_of router fab0)" \
  --vip 203.0.113.10 --mux-pa 198.18.0.11 --host-pa 198.18.0.21 --nic-mac 02:00:c0:00:02:0a --client 198.51.100.10
lab_capture_start mux1 fab0 mux1 >/dev/null
sc_counters mux1 "$LAB_DIR/mux-before.json"
sc_counters mux2 "$LAB_DIR/mux2-before.json"
sc_counters host1 "$LAB_DIR/host-before.json"
rc=0
# good traffic all along
sc_client client1 http --url http://203.0.113.10/ --count 300 --concurrency 4 --json "$LAB_DIR/client-http.json" >"$LAB_DIR/client-http.out" 2>&1 &
good=$!
sc_wait_for "20 of the good requests' flows placed by the MUXes" 60 eval '[ "$(sc_mux_flows)" -ge 20 ]' || rc=1
sc_client router inject --interface fab0 --in "$LAB_DIR/bad-to-mux.pcap" || rc=1
# from mux1's own port: the frames carry its MAC (the host agent checks it; the bridge keeps learning it there)
sc_client mux1 inject --interface fab0 --in "$LAB_DIR/bad-to-host.pcap" || rc=1
# a datagram larger than the client's MTU: fragments through the MUX (3-tuple hash), reassembled and
# echoed by the backend, whose reply fragments return through the host agent's DSR
sc_client client1 udp --target 203.0.113.10:7 --flows 8 --size 3000 --sources 198.51.100.10 --json "$LAB_DIR/udp-frag.json" || rc=1
wait "$good" || rc=1
cat "$LAB_DIR/client-http.out"
# every injected frame judged: each expected drop counter of mux1 and host1 moved by at least its count
# (the verifier then checks it moved by exactly that), however far behind a loaded machine left them
judged() {
  sc_counters mux1 "$LAB_DIR/mux-after.json" && sc_counters host1 "$LAB_DIR/host-after.json" || return 1
  node -e 'const r=(f)=>JSON.parse(require("fs").readFileSync(f,"utf8"));const [e,mb,ma,hb,ha]=process.argv.slice(1).map(r);
    const ok=(x,b,a)=>Object.entries(x.expected).every(([k,n])=>(a[k]??0)-(b[k]??0)>=n);process.exit(ok(e.mux,mb,ma)&&ok(e.host,hb,ha)?0:1)' \
    "$LAB_DIR/bad-expected.json" "$LAB_DIR/mux-before.json" "$LAB_DIR/mux-after.json" "$LAB_DIR/host-before.json" "$LAB_DIR/host-after.json"
}
sc_wait_for "mux1 and host1 counting every injected frame" 60 judged || rc=1
lab_capture_stop_all
vrc=0
sc_verify bad-traffic --expected "$LAB_DIR/bad-expected.json" --mux-before "$LAB_DIR/mux-before.json" --mux-after "$LAB_DIR/mux-after.json" \
  --host-before "$LAB_DIR/host-before.json" --host-after "$LAB_DIR/host-after.json" --mux-capture "$LAB_DIR/pcaps/mux1.pcap" || vrc=$?
frag=$(node -e "const d=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));console.log(d.records.filter(r=>r.ok).length+'/'+d.records.length)" "$LAB_DIR/udp-frag.json")
# the fragments may take either MUX (the router's ECMP hash reads no ports in a later fragment, and its
# seed is per boot): a CI run sent all 8 flows' fragments by mux2 (mux1 +0), so both MUXes are summed
sc_counters mux2 "$LAB_DIR/mux2-after.json" || rc=1
fragments=$(node -e "const r=(f)=>JSON.parse(require('fs').readFileSync(f,'utf8')).fragments||0;const [a,b,c,d]=process.argv.slice(1);console.log(r(a)-r(b)+r(c)-r(d))" "$LAB_DIR/mux-after.json" "$LAB_DIR/mux-before.json" "$LAB_DIR/mux2-after.json" "$LAB_DIR/mux2-before.json")
if [ "$frag" = 8/8 ] && [ "$fragments" -gt 0 ]; then echo "PASS  fragmented datagrams went through the VIP and their echoes came back  ($frag echoes, MUXes' fragments +$fragments)"
else echo "FAIL  fragmented datagrams went through the VIP and their echoes came back  ($frag echoes, MUXes' fragments +$fragments)"; rc=1; fi
alive=1
for n in mux1 host1; do lab_daemon_status "$n" >/dev/null 2>&1 || alive=0; done
if [ $alive = 1 ]; then echo 'PASS  both daemons still serve their status endpoints'; else echo 'FAIL  a daemon died'; rc=1; fi
[ $vrc = 0 ] || rc=1
exit "$rc"
