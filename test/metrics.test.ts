// GET /metrics (docs/metrics.md): the exposition is read back by a strict parser written here from the
// text format's rules (Prometheus "Exposition formats", text format 0.0.4), not by the writer's code,
// and by Prometheus's own promtool (`promtool check metrics`, Debian's prometheus package) when it is
// installed. The MUX's per-backend counts are compared with the backends its data plane's VXLAN frames
// went to (their inner destination MAC, decoded by the dissector, mapped to the nic by the config).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { pkt } from '../shared/packet-builder.js';
import { dissect } from '../shared/dissect.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { IPV4_FLAG_MF } from '../shared/ipv4.js';
import { formatMac } from '../shared/addr.js';
import { PromWriter, formatPromValue, writeCounterFamilies } from '../shared/prom-text.js';
import { MuxDaemon } from '../mux/daemon.js';
import { MUX_COUNTER_NAMES } from '../mux/data-plane.js';
import { writeMuxMetrics } from '../mux/metrics.js';
import { HostDaemon } from '../host-agent/daemon.js';
import { HOST_COUNTER_NAMES } from '../host-agent/data-plane.js';
import { writeHostMetrics } from '../host-agent/metrics.js';
import { writeProcessMetrics } from '../runtime/process-metrics.js';
import { derivedMac } from '../cli/replay.js';
import { labConfig } from './helpers/lab-config.js';
import { learnReplyFlow } from '../host-agent/dsr-flows.js';
import { startTestController } from './helpers/controller.js';
import { skipBecause } from './helpers/prerequisite.js';

// ---------------------------------------------------------------------------------------------
// a strict reader of the text format

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface Family {
  type: string;
  help: string | null;
  samples: Sample[];
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';

function parseValue(t: string, line: number): number {
  if (t === 'NaN') return NaN;
  if (t === '+Inf') return Infinity;
  if (t === '-Inf') return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) throw new Error(`line ${line}: bad value ${JSON.stringify(t)}`);
  return Number(t);
}

/** Label pairs `a="x",b="y"`: a value holds any character but `"`, `\` and newline unless escaped as \\, \" or \n. */
function parseLabels(text: string, line: number): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const m = new RegExp(`^(${LABEL})="`).exec(text.slice(i));
    if (m === null) throw new Error(`line ${line}: bad label at ${JSON.stringify(text.slice(i))}`);
    const name = m[1]!;
    if (name.startsWith('__')) throw new Error(`line ${line}: reserved label name ${name}`);
    if (name in out) throw new Error(`line ${line}: label ${name} twice`);
    i += m[0].length;
    let v = '';
    for (;;) {
      const ch = text[i];
      if (ch === undefined || ch === '\n') throw new Error(`line ${line}: unterminated label value`);
      if (ch === '"') break;
      if (ch === '\\') {
        const e = text[i + 1];
        if (e === '\\') v += '\\';
        else if (e === '"') v += '"';
        else if (e === 'n') v += '\n';
        else throw new Error(`line ${line}: bad escape \\${e}`);
        i += 2;
      } else {
        v += ch;
        i++;
      }
    }
    out[name] = v;
    i++;
    if (i < text.length) {
      if (text[i] !== ',') throw new Error(`line ${line}: expected , after a label`);
      i++;
    }
  }
  return out;
}

/** Reads a whole exposition; throws naming the line on anything the format does not allow. */
function parseExposition(text: string): Map<string, Family> {
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const fams = new Map<string, Family>();
  const closed = new Set<string>();
  let current: string | null = null;
  const seen = new Set<string>();
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((l, idx) => {
    const n = idx + 1;
    const meta = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(l);
    if (meta !== null) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (closed.has(name) || (current !== name && fams.get(name)?.samples.length))
        throw new Error(`line ${n}: ${name} again after its samples`);
      if (current !== null && current !== name) closed.add(current);
      current = name;
      const f = fams.get(name) ?? { type: 'untyped', help: null, samples: [] };
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) throw new Error(`line ${n}: bad type ${rest}`);
        if (fams.has(name) && f.type !== 'untyped') throw new Error(`line ${n}: a second TYPE for ${name}`);
        if (f.samples.length > 0) throw new Error(`line ${n}: TYPE after the samples of ${name}`);
        f.type = rest;
      } else {
        if (f.help !== null) throw new Error(`line ${n}: a second HELP for ${name}`);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) throw new Error(`line ${n}: bad escape in HELP`);
        f.help = rest;
      }
      fams.set(name, f);
      return;
    }
    if (l.startsWith('#')) return; // a comment
    const m = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`).exec(l);
    if (m === null) throw new Error(`line ${n}: not a sample: ${JSON.stringify(l)}`);
    const name = m[1]!;
    const fam = fams.get(name);
    // this writer writes no histograms or summaries: a sample's name is its family's
    if (fam === undefined) throw new Error(`line ${n}: sample ${name} without a TYPE line`);
    if (current !== name) throw new Error(`line ${n}: the samples of ${name} are not together`);
    if (fam.type === 'counter' && !name.endsWith('_total')) throw new Error(`line ${n}: counter ${name} without _total`);
    const labels = m[2] === undefined ? {} : parseLabels(m[2], n);
    const key = `${name}{${Object.entries(labels)
      .sort()
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(',')}}`;
    if (seen.has(key)) throw new Error(`line ${n}: ${key} twice`);
    seen.add(key);
    const value = parseValue(m[3]!, n);
    if (fam.type === 'counter' && !(value >= 0)) throw new Error(`line ${n}: counter ${name} is ${value}`);
    fam.samples.push({ name, labels, value });
  });
  return fams;
}

function sampleOf(f: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  return f.get(name)?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

/** promtool's verdict on a text, or null when promtool is not installed. */
function promtool(text: string): { status: number; output: string } | null {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error !== undefined) return null;
  return { status: r.status ?? -1, output: `${r.stdout}${r.stderr}` };
}
const NO_PROMTOOL = "promtool is missing (Debian's prometheus package: apt-get install prometheus)";

// ---------------------------------------------------------------------------------------------

describe('the exposition writer', () => {
  it('label values with a backslash, a quote and a newline come back as they were', () => {
    const w = new PromWriter();
    const odd = 'a\\b"c\nd';
    w.add('slbx_test_total', 'counter', 'A help with a \\ and a\nnewline.', { reason: odd, other: 'plain' }, 3);
    const f = parseExposition(w.text());
    expect(f.get('slbx_test_total')!.samples[0]!.labels).toEqual({ reason: odd, other: 'plain' });
    expect(f.get('slbx_test_total')!.help).toBe('A help with a \\\\ and a\\nnewline.');
  });

  it('NaN and the infinities are spelled as the format does', () => {
    const w = new PromWriter();
    w.family('slbx_g', 'gauge', 'g');
    for (const [i, v] of [NaN, Infinity, -Infinity, 0.25, 1e21].entries()) w.sample('slbx_g', { i }, v);
    const got = parseExposition(w.text())
      .get('slbx_g')!
      .samples.map((s) => s.value);
    expect(got).toEqual([NaN, Infinity, -Infinity, 0.25, 1e21]);
    expect(formatPromValue(Infinity)).toBe('+Inf');
  });

  it('refuses what the format or its conventions do not allow', () => {
    const w = new PromWriter();
    expect(() => w.family('1bad', 'gauge', '')).toThrow(/bad metric name/);
    expect(() => w.family('slbx_packets', 'counter', '')).toThrow(/_total/);
    w.family('slbx_c_total', 'counter', '');
    expect(() => w.family('slbx_c_total', 'gauge', '')).toThrow(/declared as counter/);
    w.family('slbx_x', 'gauge', '');
    expect(() => w.sample('slbx_x', { __name: 'a' }, 1)).toThrow(/bad label name/);
    expect(() => w.sample('slbx_x', { 'a-b': 'a' }, 1)).toThrow(/bad label name/);
    w.sample('slbx_x', { a: '1' }, 1);
    expect(() => w.sample('slbx_x', { a: '1' }, 2)).toThrow(/duplicate/);
    expect(() => w.sample('slbx_y', {}, 1)).toThrow(/no family/);
  });

  it('a family added in two places stays one group', () => {
    const w = new PromWriter();
    w.add('slbx_a', 'gauge', 'a', { k: '1' }, 1);
    w.add('slbx_b', 'gauge', 'b', {}, 1);
    w.add('slbx_a', 'gauge', 'a', { k: '2' }, 2);
    expect(parseExposition(w.text()).get('slbx_a')!.samples).toHaveLength(2);
  });

  it('every counter of a daemon becomes a series: drops and send errors under one metric with a reason', () => {
    for (const [prefix, names] of [
      ['slbx_mux', MUX_COUNTER_NAMES],
      ['slbx_host', HOST_COUNTER_NAMES],
    ] as const) {
      const counters = Object.fromEntries(names.map((n, i) => [n, i]));
      const w = new PromWriter();
      writeCounterFamilies(w, prefix, counters);
      const f = parseExposition(w.text());
      const drops = names.filter((n) => n.startsWith('drop_'));
      const sendErrors = names.filter((n) => n.startsWith('send_error_'));
      expect(
        f
          .get(`${prefix}_drops_total`)!
          .samples.map((s) => s.labels.reason)
          .sort(),
      ).toEqual(drops.map((n) => n.slice(5)).sort());
      expect(
        f
          .get(`${prefix}_send_errors_total`)!
          .samples.map((s) => s.labels.reason)
          .sort(),
      ).toEqual(sendErrors.map((n) => n.slice(11)).sort());
      const series = [...f.values()].reduce((a, x) => a + x.samples.length, 0);
      expect(series).toBe(names.length);
      for (const n of names) {
        const v = counters[n]!;
        if (n.startsWith('drop_')) expect(sampleOf(f, `${prefix}_drops_total`, { reason: n.slice(5) })).toBe(v);
        else if (!n.startsWith('send_error_')) expect(sampleOf(f, `${prefix}_${n}_total`)).toBe(v);
      }
    }
  });
});

describe("the MUX's GET /metrics", () => {
  const config = labConfig();
  const nicByMac = new Map(config.nics.map((n) => [formatMac(n.mac), n.name]));

  function muxWithFrames(): { d: MuxDaemon; want: Map<string, number>; bytes: Map<string, number>; bad: number } {
    // the daemon as slbx-mux builds it, not started (no capture: its sends fail and are counted as such)
    const d = new MuxDaemon({
      config,
      name: 'mux1',
      iface: 'hG-no-such-if',
      mac: derivedMac(config.muxes[0]!.address.words[0]!),
      bgp: false,
    });
    for (const h of d.ctx.tables.hosts.values()) {
      h.mac.set(derivedMac(h.pa4));
      h.macKnown = true;
    }
    d.ctx.nowS = 1;
    const want = new Map<string, number>();
    const bytes = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const frame = pkt()
        .eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11' })
        .ipv4({ src: `198.51.100.${10 + (i % 32)}`, dst: '203.0.113.10' })
        .udp({ sport: 20000 + i, dport: 7 })
        .payload(`flow ${i}`)
        .build();
      d.onFrame(frame, frame.length);
      // where the data plane sent it: the inner Ethernet destination of the VXLAN frame it wrote
      const out = dissect(d.ctx.out.subarray(0, d.ctx.outLen), 1);
      const vx = out.layers.findIndex((l) => l.layer === 'vxlan');
      const inner = out.layers.slice(vx).find((l) => l.layer === 'eth') as { dst: string };
      const nic = nicByMac.get(inner.dst)!;
      want.set(nic, (want.get(nic) ?? 0) + 1);
      bytes.set(nic, (bytes.get(nic) ?? 0) + d.ctx.outLen);
    }
    // frames that are not IP: dropped as not_ip
    const arpish = pkt().eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11', type: 0x88b5 }).payload('not ip').build();
    for (let i = 0; i < 7; i++) d.onFrame(arpish, arpish.length);
    return { d, want, bytes, bad: 7 };
  }

  it('per-backend frames and bytes are those the data plane sent to each backend; drops by reason; flows by kind', () => {
    const { d, want, bytes, bad } = muxWithFrames();
    const text = writeMuxMetrics(d).text();
    const f = parseExposition(text);
    expect(want.size).toBeGreaterThanOrEqual(2);
    for (const nic of config.nics.map((n) => n.name)) {
      expect(sampleOf(f, 'slbx_mux_backend_packets_total', { backend: nic }), nic).toBe(want.get(nic) ?? 0);
      expect(sampleOf(f, 'slbx_mux_backend_bytes_total', { backend: nic }), nic).toBe(bytes.get(nic) ?? 0);
    }
    expect(sampleOf(f, 'slbx_mux_drops_total', { reason: 'not_ip' })).toBe(bad);
    expect(sampleOf(f, 'slbx_mux_packets_total', { direction: 'rx' })).toBe(400 + bad);
    // not started: every send failed, and says so
    expect(sampleOf(f, 'slbx_mux_send_errors_total', { reason: 'cap' })).toBe(400);
    expect(sampleOf(f, 'slbx_mux_flows', { kind: 'untrusted', family: 'ipv4' })).toBe(400);
    expect(sampleOf(f, 'slbx_mux_flows', { kind: 'trusted', family: 'ipv4' })).toBe(0);
    expect(f.get('slbx_mux_bgp_session_up')!.samples).toHaveLength(0);
  });

  it('new flows per backend and per rule, packets and bytes per (VIP, rule): from the flows this test sent and where their frames went', () => {
    const d = new MuxDaemon({
      config,
      name: 'mux1',
      iface: 'hG-no-such-if',
      mac: derivedMac(config.muxes[0]!.address.words[0]!),
      bgp: false,
    });
    for (const h of d.ctx.tables.hosts.values()) {
      h.mac.set(derivedMac(h.pa4));
      h.macKnown = true;
    }
    d.ctx.nowS = 1;
    // the expectation, kept here: each flow by its 5-tuple (a flow is new at its first packet), the rule
    // by the destination port the test chose, the backend by the inner MAC of the frame the MUX wrote
    const newFlows = new Map<string, number>();
    const rules = new Map<string, { packets: number; bytes: number; newFlows: number }>();
    const seen = new Set<string>();
    const send = (rule: string, dport: number, tcp: boolean, sport: number, flags = TCP_SYN) => {
      let b = pkt()
        .eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11' })
        .ipv4({ src: `198.51.100.${10 + (sport % 32)}`, dst: '203.0.113.10' });
      b = tcp ? b.tcp({ sport, dport, flags }) : b.udp({ sport, dport });
      const frame = b.payload(`flow ${sport}`).build();
      d.onFrame(frame, frame.length);
      const out = dissect(d.ctx.out.subarray(0, d.ctx.outLen), 1);
      const vx = out.layers.findIndex((l) => l.layer === 'vxlan');
      const nic = nicByMac.get((out.layers.slice(vx).find((l) => l.layer === 'eth') as { dst: string }).dst)!;
      const key = `${tcp ? 6 : 17} ${sport} ${dport}`;
      const first = !seen.has(key);
      seen.add(key);
      if (first) newFlows.set(nic, (newFlows.get(nic) ?? 0) + 1);
      const r = rules.get(rule) ?? { packets: 0, bytes: 0, newFlows: 0 };
      r.packets++;
      r.bytes += frame.length;
      r.newFlows += first ? 1 : 0;
      rules.set(rule, r);
    };
    // 300 UDP echo flows, a third of them with a second datagram (not new); 120 TCP connections to 80
    // (SYN, then ACK: one new flow each); 50 UDP flows to 7003
    for (let i = 0; i < 300; i++) send('echo', 7, false, 30000 + i);
    for (let i = 0; i < 300; i += 3) send('echo', 7, false, 30000 + i);
    for (let i = 0; i < 120; i++) send('web-http', 80, true, 40000 + i, TCP_SYN);
    for (let i = 0; i < 120; i++) send('web-http', 80, true, 40000 + i, TCP_ACK);
    for (let i = 0; i < 50; i++) send('echo-3tuple', 7003, false, 50000 + i);
    // dropped, not counted under any rule: no rule for port 9, and a frame that is not IP
    const noRule = pkt().eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11' }).ipv4({ src: '198.51.100.9', dst: '203.0.113.10' });
    const f9 = noRule.udp({ sport: 1, dport: 9 }).payload('x').build();
    d.onFrame(f9, f9.length);

    const f = parseExposition(writeMuxMetrics(d).text());
    expect(newFlows.size).toBeGreaterThanOrEqual(2);
    for (const nic of config.nics.map((n) => n.name))
      expect(sampleOf(f, 'slbx_mux_backend_new_flows_total', { backend: nic }), nic).toBe(newFlows.get(nic) ?? 0);
    for (const [rule, want] of rules) {
      const l = { vip: '203.0.113.10', rule };
      expect(sampleOf(f, 'slbx_mux_vip_packets_total', l), rule).toBe(want.packets);
      expect(sampleOf(f, 'slbx_mux_vip_bytes_total', l), rule).toBe(want.bytes);
      expect(sampleOf(f, 'slbx_mux_vip_new_flows_total', l), rule).toBe(want.newFlows);
    }
    // every rule of the config has its series (zeros included), and nothing else
    const labels = f.get('slbx_mux_vip_packets_total')!.samples.map((s) => `${s.labels.vip} ${s.labels.rule}`);
    expect(labels.sort()).toEqual(config.vips.flatMap((v) => v.rules.map((r) => `${v.address.text} ${r.name}`)).sort());
    expect(sampleOf(f, 'slbx_mux_vip_packets_total', { vip: '203.0.113.10', rule: 'web-alt' })).toBe(0);
    expect(sampleOf(f, 'slbx_mux_drops_total', { reason: 'no_rule' })).toBe(1);
  });

  it('every forwarded frame is counted under a rule and a backend, whatever path placed it: IPv6, fragments, ICMP errors, random bytes', () => {
    const d = new MuxDaemon({
      config,
      name: 'mux1',
      iface: 'hG-no-such-if',
      mac: derivedMac(config.muxes[0]!.address.words[0]!),
      bgp: false,
    });
    for (const h of d.ctx.tables.hosts.values()) {
      h.mac.set(derivedMac(h.pa4));
      h.macKnown = true;
    }
    d.ctx.nowS = 1;
    const eth = () => pkt().eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11' });
    const frames: Buffer[] = [];
    for (let i = 0; i < 20; i++)
      frames.push(
        eth()
          .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
          .udp({ sport: 30000 + i, dport: 7 })
          .build(),
      );
    for (let i = 0; i < 20; i++)
      frames.push(
        eth()
          .ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' })
          .udp({ sport: 31000 + i, dport: 7 })
          .payload('v6')
          .build(),
      );
    // a datagram in two fragments: the first with the UDP header, the later one without ports
    frames.push(
      eth()
        .ipv4({ src: '198.51.100.11', dst: '203.0.113.10', id: 77, flags: IPV4_FLAG_MF })
        .udp({ sport: 32000, dport: 7 })
        .payload('a'.repeat(32))
        .build(),
    );
    frames.push(
      eth().ipv4({ src: '198.51.100.11', dst: '203.0.113.10', id: 77, fragOffset: 5, protocol: 17 }).payload('b'.repeat(16)).build(),
    );
    // an ICMP error about a flow of the echo rule (it quotes VIP:7 -> client:30000)
    const quote = pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).udp({ sport: 7, dport: 30000 }).payload('abc').build();
    frames.push(eth().ipv4({ src: '198.51.100.1', dst: '203.0.113.10' }).icmp({ type: 3, code: 3 }).payload(quote).build());
    // random bytes, and random bytes behind a valid Ethernet and IPv4 header to the VIP
    let seed = 12345;
    const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 24;
    for (let i = 0; i < 200; i++) frames.push(Buffer.from(Array.from({ length: 20 + (i % 80) }, rnd)));
    for (let i = 0; i < 200; i++) {
      const f = eth()
        .ipv4({ src: '198.51.100.12', dst: '203.0.113.10', protocol: [6, 17, 1][i % 3] })
        .payload('x'.repeat(40))
        .build();
      for (let j = 34; j < f.length; j++) f[j] = rnd();
      frames.push(f);
    }
    for (const f of frames) d.onFrame(f, f.length);

    const f = parseExposition(writeMuxMetrics(d).text());
    // not started: every frame the data plane forwarded failed at the capture's send, and was counted there
    const forwarded = sampleOf(f, 'slbx_mux_send_errors_total', { reason: 'cap' })!;
    const sum = (name: string) => f.get(name)!.samples.reduce((a, s) => a + s.value, 0);
    expect(forwarded).toBeGreaterThanOrEqual(20 + 20 + 2 + 1);
    expect(sum('slbx_mux_vip_packets_total')).toBe(forwarded);
    expect(sum('slbx_mux_backend_packets_total')).toBe(forwarded);
    expect(sum('slbx_mux_vip_new_flows_total')).toBe(sampleOf(f, 'slbx_mux_flow_new_total'));
    expect(sampleOf(f, 'slbx_mux_drops_total', { reason: 'internal_error' })).toBe(0);
    expect(sampleOf(f, 'slbx_mux_vip_packets_total', { vip: '2001:db8:ff::10', rule: 'echo' })).toBe(20);
    // the two fragments and the ICMP error fall under the echo rule of 203.0.113.10, with its 20 flows
    expect(sampleOf(f, 'slbx_mux_vip_packets_total', { vip: '203.0.113.10', rule: 'echo' })).toBeGreaterThanOrEqual(23);
    expect(sampleOf(f, 'slbx_mux_icmp_errors_forwarded_total')).toBe(1);
  });

  it('the counts of a backend carry over a new config, and a backend added later starts at 0', () => {
    const { d, want } = muxWithFrames();
    const next = labConfig((raw) => {
      raw.nics.push({ ...raw.nics[0], name: 'h1vm9', mac: '02:00:c0:00:02:19', addresses: ['192.0.2.19'], port: 'h1vm9' });
    });
    d.applyConfig(next);
    const f = parseExposition(writeMuxMetrics(d).text());
    expect(sampleOf(f, 'slbx_mux_backend_packets_total', { backend: 'h1vm1' })).toBe(want.get('h1vm1') ?? 0);
    expect(sampleOf(f, 'slbx_mux_backend_packets_total', { backend: 'h1vm9' })).toBe(0);
  });

  it('promtool check metrics accepts the MUX, host agent and process exposition (and refuses a bad one)', (ctx) => {
    const bad = promtool('# TYPE slbx_bad counter\nslbx_bad 1\n');
    if (bad === null) skipBecause(ctx, NO_PROMTOOL);
    expect(bad.status, 'promtool must refuse a counter without _total').not.toBe(0);
    const { d } = muxWithFrames();
    const mux = writeMuxMetrics(d);
    writeProcessMetrics(mux);
    const h = new HostDaemon({ config, name: 'host1', iface: 'hG-no-such-if', dsrVia4: null, dsrVia6: null, nftables: false });
    const host = writeHostMetrics(h);
    for (const w of [mux, host]) {
      const r = promtool(w.text())!;
      expect(r.output).toBe('');
      expect(r.status).toBe(0);
      parseExposition(w.text());
    }
  });
});

describe("the host agent's per-backend series", () => {
  it("a backend's replies sent by DSR are counted on its slot, and stay its own when a new config renumbers the nics", () => {
    const config = labConfig();
    // the daemon as slbx-host-agent builds it, not started: no raw socket, so each DSR send fails (and is counted)
    const d = new HostDaemon({ config, name: 'host1', iface: 'hG-no-such-if', dsrVia4: null, dsrVia6: null, nftables: false });
    const nic = (name: string) => config.nics.find((n) => n.name === name)!;
    const sent = new Map<string, { packets: number; bytes: number }>();
    const reply = (name: string, dport: number) => {
      const n = nic(name);
      const port = d.ctx.tables.nics.findIndex((x) => x.name === name);
      const frame = pkt()
        .eth({ src: formatMac(n.mac), dst: '00:00:00:00:00:00' })
        .ipv4({ src: n.addresses[0]!.text, dst: '198.51.100.10' })
        .udp({ sport: 7, dport })
        .payload(`echo ${dport}`)
        .build();
      learnReplyFlow(frame, frame.length, port, d.ctx); // as if the client's datagram had come in (host-agent/dsr-flows.ts)
      d.onPortFrame(frame, frame.length, port);
      // the IP packet leaves by DSR, as long as it came (the NAT rewrites addresses and ports only)
      const s = sent.get(name) ?? { packets: 0, bytes: 0 };
      s.packets++;
      s.bytes += frame.length - 14;
      sent.set(name, s);
    };
    for (let i = 0; i < 5; i++) reply('h1vm1', 41000 + i);
    for (let i = 0; i < 3; i++) reply('h1vm2', 42000 + i);
    const check = () => {
      const f = parseExposition(writeHostMetrics(d).text());
      for (const [name, s] of sent) {
        expect(sampleOf(f, 'slbx_host_backend_dsr_packets_total', { backend: name }), name).toBe(s.packets);
        expect(sampleOf(f, 'slbx_host_backend_dsr_bytes_total', { backend: name }), name).toBe(s.bytes);
        expect(sampleOf(f, 'slbx_host_backend_delivered_packets_total', { backend: name }), name).toBe(0);
      }
      const total = [...sent.values()].reduce((a, s) => a + s.packets, 0);
      expect(sampleOf(f, 'slbx_host_out_dsr_total')).toBe(total);
      expect(sampleOf(f, 'slbx_host_send_errors_total', { reason: 'dsr_unavailable' })).toBe(total);
      return f;
    };
    check();
    // a nic added before the others on host1: h1vm1 and h1vm2 move to other port numbers
    const next = labConfig((raw) => {
      raw.nics.unshift({ ...raw.nics[0], name: 'h1vm0', mac: '02:00:c0:00:02:09', addresses: ['192.0.2.9'], port: 'h1vm0' });
    });
    d.applyConfig(next);
    expect(d.ctx.tables.nics.map((n) => n.name)).toEqual(['h1vm0', 'h1vm1', 'h1vm2']);
    for (let i = 0; i < 2; i++) reply('h1vm1', 43000 + i);
    const f = check();
    expect(sampleOf(f, 'slbx_host_backend_dsr_packets_total', { backend: 'h1vm0' })).toBe(0);
  });
});

describe("the controller's GET /metrics", () => {
  it('answers the text format without a token: generation, every agent of the config, health per backend', async (ctx) => {
    const ctl = await startTestController({ token: 'a'.repeat(64) });
    try {
      const { status, type, body } = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
        request(`${ctl.url}/metrics`, (res) => {
          let t = '';
          res.setEncoding('utf8');
          res
            .on('data', (c: string) => (t += c))
            .on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body: t }));
        })
          .on('error', reject)
          .end();
      });
      expect(status).toBe(200);
      expect(type).toBe('text/plain; version=0.0.4; charset=utf-8');
      const f = parseExposition(body);
      const config = labConfig();
      expect(sampleOf(f, 'slbx_controller_policy_generation')).toBeGreaterThanOrEqual(1);
      const agents = f.get('slbx_controller_agent_applied_generation')!.samples.map((s) => `${s.labels.kind}/${s.labels.agent}`);
      expect(agents.sort()).toEqual([...config.muxes.map((m) => `mux/${m.name}`), ...config.hosts.map((h) => `host/${h.name}`)].sort());
      // no agent connected in this test: none applied anything
      expect(f.get('slbx_controller_agent_connected')!.samples.every((s) => s.value === 0)).toBe(true);
      expect(
        f
          .get('slbx_controller_backend_healthy')!
          .samples.map((s) => s.labels.backend)
          .sort(),
      ).toEqual([...new Set(config.pools.flatMap((p) => p.backends.map((b) => b.nic)))].sort());
      expect(sampleOf(f, 'process_resident_memory_bytes')).toBeGreaterThan(0);
      const r = promtool(body);
      if (r === null) skipBecause(ctx, NO_PROMTOOL);
      expect(r.output).toBe('');
      expect(r.status).toBe(0);
    } finally {
      await ctl.cleanup();
    }
  });
});
