// Verifier of scenario 33-metrics-prometheus: a real Prometheus (Debian's) scraped every daemon's
// GET /metrics during the run; its HTTP API's answers, saved by the scenario, are compared with the lab
// client's own records. From the run's files:
//   RUN/udp.json                    the lab client's UDP flows (one datagram each) and the backend that answered each
//   RUN/prom/window.txt             T0 T1 W: before the traffic, after a scrape of every MUX that followed it, the range (s)
//   RUN/prom/total-t0.json, total-t1.json   sum by (backend) (slbx_mux_backend_packets_total) at T0 and at T1
//   RUN/prom/increase.json          sum by (backend) (increase(slbx_mux_backend_packets_total[W])) at T1
//   RUN/prom/rate.json              sum by (backend) (rate(slbx_mux_backend_packets_total[W])) at T1
//   RUN/prom/new-flows-t0.json, -t1  sum by (backend) (slbx_mux_backend_new_flows_total) at T0 and T1
//   RUN/prom/delivered-t0.json, -t1  sum by (backend) (slbx_host_backend_delivered_packets_total)
//   RUN/prom/dsr-t0.json, -t1        sum by (backend) (slbx_host_backend_dsr_packets_total)
//   RUN/prom/vip-packets-t0.json, -t1, vip-new-flows-t0.json, -t1   sum by (vip, rule) (slbx_mux_vip_{packets,new_flows}_total)
//   RUN/prom/bgp-before.json        slbx_mux_bgp_session_up before the kill
//   RUN/prom/up-after.json          up{job="slbx-mux"} once the killed MUX's scrape failed
//   RUN/prom/alert-after.json       up{job="slbx-mux"} == 0 or slbx_mux_bgp_session_up == 0 (docs/metrics.md's "BGP down")
//   RUN/prom/bgp-after.json         slbx_mux_bgp_session_up after the kill
//   RUN/prom/controller-after.json  slbx_controller_agent_connected{kind="mux"} after the kill
// Claims (issue 21): per backend, what Prometheus computes from the MUXes' counters agrees with the
// client's count within 5 % (increase() over the window, and the raw counters' difference); so do the
// growth of each backend's new flows at the MUXes, of the frames its host agent delivered to it and of
// its replies sent by DSR (each flow is one datagram and its echo, from a source port of its own); per
// VIP rule, the rule the client used grew by the flows it sent (packets and new flows) and the VIP's
// other rules did not move; a killed MUX is down in up{} and its BGP session is gone from the BGP
// metric while the other's stays up.
// Usage: verify.js metrics-prometheus --run R --killed MUX --muxes N --vip VIP --rule RULE
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Checks, flagsOf, need } from './check.js';

/** The agreement the issue asks for between Prometheus and the client. */
export const AGREEMENT = 0.05;

interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

/** The vector of an instant query's answer; throws on an answer that is not a successful vector. */
export function promVector(text: string, what: string): PromSample[] {
  const j = JSON.parse(text) as { status?: string; data?: { resultType?: string; result?: PromSample[] } };
  if (j.status !== 'success' || j.data?.resultType !== 'vector' || !Array.isArray(j.data.result))
    throw new Error(`${what}: not a successful vector answer: ${text.slice(0, 200)}`);
  return j.data.result;
}

function byLabel(v: readonly PromSample[], label: string): Map<string, number> {
  return new Map(v.map((s) => [s.metric[label] ?? '', Number(s.value[1])]));
}

/** |got - want| / want, or 0 when both are 0. */
export function relativeError(got: number, want: number): number {
  if (want === 0) return got === 0 ? 0 : Infinity;
  return Math.abs(got - want) / want;
}

export function verifyMetricsPrometheus(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const killed = need(f, 'killed');
  const muxes = Number(need(f, 'muxes'));
  const vip = need(f, 'vip');
  const usedRule = need(f, 'rule');
  const c = new Checks();
  const prom = (name: string) => promVector(readFileSync(join(run, 'prom', name), 'utf8'), name);

  // the client's own count: datagrams answered, per backend (each flow is one datagram to the VIP)
  const client = JSON.parse(readFileSync(join(run, 'udp.json'), 'utf8')) as {
    records: { backend: string | null; ok: boolean }[];
  };
  const want = new Map<string, number>();
  for (const r of client.records) if (r.ok && r.backend !== null) want.set(r.backend, (want.get(r.backend) ?? 0) + 1);
  const sent = client.records.length;
  const answered = [...want.values()].reduce((a, b) => a + b, 0);
  c.check(answered >= sent * 0.95, 'the client got answers to (nearly) every flow', `${answered} of ${sent}`);
  c.check(want.size >= 2, 'the flows were spread over several backends', [...want].map(([b, n]) => `${b} ${n}`).join(', '));

  const [t0, t1, w] = readFileSync(join(run, 'prom', 'window.txt'), 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  c.note(`window: T0 ${t0}, T1 ${t1} (${((t1! - t0!) as number).toFixed(1)} s), range [${w}s]`);
  const before = byLabel(prom('total-t0.json'), 'backend');
  const after = byLabel(prom('total-t1.json'), 'backend');
  const inc = byLabel(prom('increase.json'), 'backend');
  const rate = byLabel(prom('rate.json'), 'backend');
  for (const [backend, n] of [...want].sort()) {
    const delta = (after.get(backend) ?? NaN) - (before.get(backend) ?? 0);
    const e1 = relativeError(delta, n);
    c.check(
      e1 <= AGREEMENT,
      `${backend}: the MUXes' counter grew by what the client counted (Prometheus samples at T1 minus T0)`,
      `${delta} vs ${n}: ${(e1 * 100).toFixed(2)} %`,
    );
    const got = inc.get(backend) ?? NaN;
    const e2 = relativeError(got, n);
    c.check(
      e2 <= AGREEMENT,
      `${backend}: sum by (backend) (increase(slbx_mux_backend_packets_total[${w}s])) agrees with the client within 5 %`,
      `${got.toFixed(1)} vs ${n}: ${(e2 * 100).toFixed(2)} %`,
    );
    c.note(
      `${backend}: rate over [${w}s] ${(rate.get(backend) ?? NaN).toFixed(2)}/s (x ${w} s = ${((rate.get(backend) ?? NaN) * w!).toFixed(1)})`,
    );
  }
  const extra = [...inc.keys()].filter((b) => !want.has(b) && (inc.get(b) ?? 0) > 0);
  c.check(extra.length === 0, 'no backend the client never reached shows traffic', extra.join(', ') || 'none');

  // the per-backend series of issue 21's second part: growth between T0 and T1 against the client
  const growth = (name: string, label: string | string[]) => {
    const key = (s: PromSample) => (Array.isArray(label) ? label.map((l) => s.metric[l] ?? '').join(' ') : (s.metric[label] ?? ''));
    const at0 = new Map(prom(`${name}-t0.json`).map((s) => [key(s), Number(s.value[1])]));
    const out = new Map<string, number>();
    for (const s of prom(`${name}-t1.json`)) out.set(key(s), Number(s.value[1]) - (at0.get(key(s)) ?? 0));
    return out;
  };
  const series: [string, string][] = [
    ['new-flows', 'slbx_mux_backend_new_flows_total (new flows the MUXes placed on it)'],
    ['delivered', 'slbx_host_backend_delivered_packets_total (frames its host agent delivered to it)'],
    ['dsr', 'slbx_host_backend_dsr_packets_total (its replies its host agent sent by DSR)'],
  ];
  for (const [name, what] of series) {
    const g = growth(name, 'backend');
    for (const [backend, n] of [...want].sort()) {
      const got = g.get(backend) ?? NaN;
      const e = relativeError(got, n);
      c.check(
        e <= AGREEMENT,
        `${backend}: ${what} grew by the flows the client counted, within 5 %`,
        `${got} vs ${n}: ${(e * 100).toFixed(2)} %`,
      );
    }
    const others = [...g].filter(([b, v]) => !want.has(b) && v > 0);
    c.check(
      others.length === 0,
      `${name}: no backend the client never reached grew`,
      others.map(([b, v]) => `${b} ${v}`).join(', ') || 'none',
    );
  }
  // per VIP rule: the rule the client used grew by the flows it sent, the VIP's other rules stayed
  for (const [name, what] of [
    ['vip-packets', 'slbx_mux_vip_packets_total'],
    ['vip-new-flows', 'slbx_mux_vip_new_flows_total'],
  ] as const) {
    const g = growth(name, ['vip', 'rule']);
    const got = g.get(`${vip} ${usedRule}`) ?? NaN;
    const e = relativeError(got, sent);
    c.check(
      e <= AGREEMENT,
      `${name === 'vip-packets' ? 'packets' : 'new flows'} under ${vip} rule ${usedRule} (${what}) grew by the flows the client sent, within 5 %`,
      `${got} vs ${sent}: ${(e * 100).toFixed(2)} %`,
    );
    const rules = [...g].filter(([k]) => k.startsWith(`${vip} `));
    c.check(rules.length >= 2, `${what} has a series for each rule of ${vip}`, rules.map(([k]) => k.slice(vip.length + 1)).join(', '));
    const moved = rules.filter(([k, v]) => k !== `${vip} ${usedRule}` && v !== 0);
    c.check(moved.length === 0, `${what}: no other rule of ${vip} moved`, moved.map(([k, v]) => `${k} ${v}`).join(', ') || 'none');
  }

  // the killed MUX
  const bgpBefore = prom('bgp-before.json');
  c.check(
    bgpBefore.filter((s) => s.value[1] === '1').length === muxes,
    `before the kill, every MUX's BGP session is up in slbx_mux_bgp_session_up`,
    bgpBefore.map((s) => `${s.metric.node} ${s.value[1]}`).join(', '),
  );
  const up = byLabel(prom('up-after.json'), 'node');
  c.check(up.get(killed) === 0, `up{node="${killed}"} is 0 after the kill`, [...up].map(([n, v]) => `${n} ${v}`).join(', '));
  c.check(
    [...up].filter(([n, v]) => n !== killed && v === 1).length === muxes - 1,
    'every other MUX stays up in up{}',
    [...up].map(([n, v]) => `${n} ${v}`).join(', '),
  );
  const alert = prom('alert-after.json');
  c.check(
    alert.length > 0 && alert.every((s) => s.metric.node === killed),
    `the "BGP down" query of docs/metrics.md names ${killed} and nothing else`,
    alert.map((s) => `${s.metric.__name__ ?? 'up'}{node=${s.metric.node}} ${s.value[1]}`).join(', ') || 'empty',
  );
  const bgpAfter = prom('bgp-after.json');
  c.check(
    !bgpAfter.some((s) => s.metric.node === killed && s.value[1] === '1'),
    `the BGP metric no longer shows ${killed}'s session up (its series went stale with the failed scrape)`,
    bgpAfter.map((s) => `${s.metric.node} ${s.value[1]}`).join(', '),
  );
  c.check(
    bgpAfter.filter((s) => s.metric.node !== killed && s.value[1] === '1').length === muxes - 1,
    'the other MUXes keep their BGP sessions up',
    bgpAfter.map((s) => `${s.metric.node} ${s.value[1]}`).join(', '),
  );
  const ctl = byLabel(prom('controller-after.json'), 'agent');
  c.check(
    ctl.get(killed) === 0,
    `the controller's slbx_controller_agent_connected shows ${killed} gone`,
    [...ctl].map(([n, v]) => `${n} ${v}`).join(', '),
  );
  return c;
}
