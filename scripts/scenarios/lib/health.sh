# shellcheck shell=bash
# Steps shared by the health scenarios (05-08), which need backend health to reach the MUXes: the lab
# runs the controller (lab_up's default), every daemon watches it. Source after scripts/lab/lib.sh and
# scripts/scenarios/lib/common.sh.
#
#   hc_ctl ARGS...            slbctl against the lab's controller (lab_slbctl), e.g. hc_ctl backend drain web h1vm1 --wait
#   hc_api PATH               GET PATH of the controller's API (JSON on stdout)
#   hc_wait_probes HOST NIC STATE [S]   until every probe of NIC on HOST's agent is STATE (up, down)
#   hc_wait_mux_candidates TABLE NICS [S]  until every MUX's pool table TABLE (web/http80) has exactly
#                             the candidates NICS (comma-separated, sorted); prints how long it took (ms)
#   hc_now_us                 wall clock in microseconds (the captures' clock)
#   hc_phase NAME START_US END_US CLIENT_JSON EXPECT...   appends a phase to RUN/phases.txt for
#                             scripts/scenarios/lib/phases.ts (see there for EXPECT)
#   hc_verify_phases ARGS...  runs that verifier on the lab's run directory
#   hc_probe_timing PROBE     "intervalMs timeoutMs upThreshold downThreshold" of a probe of the config
#   hc_timeline NIC STATE SINCE_US BOUND_MS   when the probes, and each MUX, saw NIC go STATE (logs)
#   hc_first_log_us LOG AFTER_US PREDICATE   time of the first JSON log line after AFTER_US matching a JS predicate
#   hc_check NAME OK DETAIL   prints a PASS/FAIL line like the verifiers; returns 1 on FAIL

HC_NODE=(node --enable-source-maps)

hc_now_us() { printf '%s' "${EPOCHREALTIME/./}"; }

hc_ctl() { lab_slbctl "$@"; }

hc_api() { lab_exec controller curl -sf -m 5 "http://127.0.0.1:8480$1"; }

# HOST NIC STATE [S]: every probe target of NIC on HOST's agent is in STATE.
hc_wait_probes() {
  local host=$1 nic=$2 want=$3 limit=${4:-20} t0
  t0=$(hc_now_us)
  until lab_daemon_status "$host" | "${HC_NODE[@]}" -e '
      let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
        const p = (JSON.parse(s).probes ?? []).filter((x) => x.nic === process.argv[1]);
        process.exit(p.length > 0 && p.every((x) => x.state === process.argv[2]) ? 0 : 1);
      });' "$nic" "$want" 2>/dev/null; do
    if [ $(( $(hc_now_us) - t0 )) -gt $(( limit * 1000000 )) ]; then
      _lab_err "probes of $nic on $host not $want after ${limit} s:"
      lab_daemon_status "$host" | "${HC_NODE[@]}" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.error(JSON.stringify(JSON.parse(s).probes,null,1)))' >&2
      return 1
    fi
    sleep 0.05
  done
}

# TABLE NICS [S]: every MUX's pool table TABLE has exactly the candidates NICS (a,b,c sorted).
hc_wait_mux_candidates() {
  local table=$1 want=$2 limit=${3:-20} t0 m ok
  t0=$(hc_now_us)
  while :; do
    ok=1
    for m in $(lab_nodes mux); do
      lab_daemon_status "$m" 2>/dev/null | "${HC_NODE[@]}" -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
          const t = (JSON.parse(s).pools ?? []).find((p) => p.table === process.argv[1]);
          process.exit(t !== undefined && [...t.candidates].sort().join(",") === process.argv[2] ? 0 : 1);
        });' "$table" "$want" || { ok=0; break; }
    done
    if [ "$ok" = 1 ]; then
      printf '%d\n' $(( ($(hc_now_us) - t0) / 1000 ))
      return 0
    fi
    if [ $(( $(hc_now_us) - t0 )) -gt $(( limit * 1000000 )) ]; then
      _lab_err "the MUXes' table $table does not have exactly the candidates $want after ${limit} s"
      for m in $(lab_nodes mux); do
        printf '  %s: %s\n' "$m" "$(lab_daemon_status "$m" | "${HC_NODE[@]}" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify((JSON.parse(s).pools??[]).find(p=>p.table===process.argv[1]))))' "$table")" >&2
      done
      return 1
    fi
    sleep 0.05
  done
}

hc_phase() {
  local name=$1 start=$2 end=$3 json=$4
  shift 4
  printf '%s %s %s %s %s\n' "$name" "$start" "$end" "$json" "$*" >>"$LAB_DIR/phases.txt"
}

hc_verify_phases() {
  "${HC_NODE[@]}" "$SLBX_ROOT/dist/scripts/scenarios/lib/phases.js" --run "$LAB_DIR" "$@"
}

# PROBE: prints "intervalMs timeoutMs upThreshold downThreshold" of a probe of the lab's config.
hc_probe_timing() {
  "${HC_NODE[@]}" --input-type=module -e '
    import { readFileSync } from "node:fs";
    import { parseConfig } from "'"$SLBX_ROOT"'/dist/shared/config.js";
    const r = parseConfig(readFileSync(process.argv[1], "utf8"));
    if (!r.ok) process.exit(1);
    const p = r.config.probes.find((x) => x.name === process.argv[2]);
    if (!p) { console.error(`no probe ${process.argv[2]}`); process.exit(1); }
    console.log(`${p.intervalMs} ${p.timeoutMs} ${p.upThreshold} ${p.downThreshold}`);
  ' "$LAB_DIR/config.yaml" "$1"
}

# LOG AFTER_US PREDICATE: the time (us) of the first JSON log line after AFTER_US for which the JS
# predicate over `e` holds (e.g. 'e.event === "probe_state" && e.to === "down"'); nothing if none.
hc_first_log_us() {
  "${HC_NODE[@]}" -e '
    const [file, after, pred] = process.argv.slice(1);
    const f = new Function("e", `return (${pred});`);
    for (const l of require("fs").readFileSync(file, "utf8").split("\n")) {
      if (!l.startsWith("{")) continue;
      let e; try { e = JSON.parse(l); } catch { continue; }
      const us = Date.parse(e.ts) * 1000;
      if (us >= Number(after) && f(e)) { console.log(us); break; }
    }
  ' "$1" "$2" "$3"
}

# NAME OK DETAIL: prints one check line like the verifiers do; returns 1 when not OK.
hc_check() {
  if [ "$2" = 1 ]; then printf 'PASS  %s  (%s)\n' "$1" "$3"; return 0; fi
  printf 'FAIL  %s  (%s)\n' "$1" "$3"
  return 1
}

# What happened between STOP_US and now for NIC going STATE (down|up): when its host agent's probes
# said so, when the controller made the generation, when each MUX applied it. Checks each MUX applied
# it within BOUND_MS of STOP_US. Returns 1 when one did not.
hc_timeline() {
  local nic=$1 state=$2 since=$3 bound=$4 host probe_us mux us rc=0 key target
  host=$(_lab_plan_line nic "$nic" | awk '{ print $3 }')
  key="$nic/"
  local targets=()
  mapfile -t targets < <(lab_daemon_status "$host" | "${HC_NODE[@]}" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const p of JSON.parse(s).probes??[])if(p.nic===process.argv[1])console.log(p.target)})' "$nic")
  for target in "${targets[@]}"; do
    probe_us=$(hc_first_log_us "$LAB_DIR/logs/$host.log" "$since" "e.event === 'probe_state' && e.nic === '$nic' && e.target === '$target' && e.to === '$state'")
    printf '      %s: the probe of %s %s went %s after %s ms\n' "$host" "$nic" "$target" "$state" "$([ -n "$probe_us" ] && echo $(( (probe_us - since) / 1000 )) || echo '(not logged)')"
  done
  for mux in $(lab_nodes mux); do
    if [ "$state" = down ]; then
      us=$(hc_first_log_us "$LAB_DIR/logs/$mux.log" "$since" "e.event === 'policy_applied' && (e.down || []).some((k) => k.startsWith('$key'))")
    else
      us=$(hc_first_log_us "$LAB_DIR/logs/$mux.log" "$since" "e.event === 'policy_applied' && e.healthChanged && !(e.down || []).some((k) => k.startsWith('$key'))")
    fi
    if [ -z "$us" ]; then hc_check "$mux applied the health change ($nic $state)" 0 'no policy_applied line' || rc=1; continue; fi
    local what="stopped choosing $nic for new flows"
    [ "$state" = down ] || what="took $nic back for new flows"
    hc_check "$mux $what within ${bound} ms" "$([ $(( (us - since) / 1000 )) -le "$bound" ] && echo 1 || echo 0)" \
      "$(( (us - since) / 1000 )) ms" || rc=1
  done
  return "$rc"
}
