// slbctl top's pure parts (cli/top.ts): rates between two heartbeats, the human rate format, and the
// screen drawn from a config, health and the agents' rates. Expected values are worked out by hand here.
// The live view itself runs in tmux against a lab in test/slbctl-top-lab.test.ts.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { humanRate, parseBeat, ratesBetween, renderTop, type AgentView, type Beat } from '../cli/top.js';
import { parseConfig } from '../shared/config.js';

const beat = (at: number, counters: Record<string, number>, backends: [string, number, number, number?][] = []): Beat => ({
  at,
  counters,
  backends: new Map(backends.map(([n, packets, bytes, newFlows]) => [n, { packets, bytes, newFlows: newFlows ?? 0 }])),
  rules: new Map(),
  hostBackends: new Map(),
  status: {},
});

describe('ratesBetween', () => {
  it('divides each counter delta by the seconds between the heartbeats', () => {
    const a = beat(1000, { rx_packets: 100, rx_bytes: 10_000 }, [['h1vm1', 50, 5000, 10]]);
    const b = beat(3000, { rx_packets: 700, rx_bytes: 70_000 }, [['h1vm1', 350, 35_000, 50]]);
    a.rules.set('203.0.113.10 echo', { packets: 0, bytes: 0, newFlows: 0 });
    b.rules.set('203.0.113.10 echo', { packets: 40, bytes: 4000, newFlows: 40 });
    a.hostBackends.set('h1vm1', { delivered: 10, dsr: 8 });
    b.hostBackends.set('h1vm1', { delivered: 30, dsr: 28 });
    const r = ratesBetween(a, b)!;
    expect(r.rates['rx_packets']).toBe(300); // 600 packets in 2 s
    expect(r.rates['rx_bytes']).toBe(30_000);
    // 30,000 bytes in 2 s = 15,000 B/s = 120,000 bit/s; 40 new flows in 2 s
    expect(r.backends.get('h1vm1')).toEqual({ pps: 150, bps: 120_000, nfps: 20 });
    expect(r.rules.get('203.0.113.10 echo')).toEqual({ pps: 20, bps: 16_000, nfps: 20 });
    expect(r.hostBackends.get('h1vm1')).toEqual({ delivered: 10, dsr: 10 });
  });
  it('a counter that went down (a restarted daemon) is a rate of 0, and the same heartbeat twice is no rate', () => {
    expect(ratesBetween(beat(0, { rx_packets: 500 }), beat(2000, { rx_packets: 20 }))!.rates['rx_packets']).toBe(0);
    expect(ratesBetween(beat(2000, {}), beat(2000, {}))).toBeNull();
  });
});

describe('parseBeat', () => {
  it("reads the API's heartbeat answer: {status: {status: {...counters, backends, rules}}, at}", () => {
    const b = parseBeat({
      status: {
        status: {
          counters: { rx_packets: 7 },
          backends: [{ backend: 'h1vm1', vni: 5001, packets: 3, bytes: 300, newFlows: 2 }],
          rules: [{ vip: '203.0.113.10', rule: 'echo', packets: 3, bytes: 250, newFlows: 2 }],
        },
      },
      at: '2026-12-01T15:00:02.000Z',
    })!;
    expect(b.at).toBe(Date.UTC(2026, 11, 1, 15, 0, 2));
    expect(b.counters).toEqual({ rx_packets: 7 });
    expect(b.backends.get('h1vm1')).toEqual({ packets: 3, bytes: 300, newFlows: 2 });
    expect(b.rules.get('203.0.113.10 echo')).toEqual({ packets: 3, bytes: 250, newFlows: 2 });
    expect(parseBeat(null)).toBeNull();
  });
  it("reads a host agent's per-backend counts, and an older MUX's backends without new flows", () => {
    const h = parseBeat({
      status: { status: { backends: [{ backend: 'h1vm1', deliveredPackets: 9, deliveredBytes: 900, dsrPackets: 8, dsrBytes: 800 }] } },
      at: '2026-12-01T15:00:02.000Z',
    })!;
    expect(h.hostBackends.get('h1vm1')).toEqual({ delivered: 9, dsr: 8 });
    expect(h.backends.size).toBe(0);
    const m = parseBeat({
      status: { status: { backends: [{ backend: 'h1vm1', packets: 3, bytes: 300 }] } },
      at: '2026-12-01T15:00:02.000Z',
    })!;
    expect(m.backends.get('h1vm1')).toEqual({ packets: 3, bytes: 300, newFlows: 0 });
  });
});

describe('humanRate', () => {
  it.each([
    [null, '-'],
    [4.2, '4.2'],
    [560, '560'],
    [9999, '9999'],
    [12_345, '12.3k'],
    [2_500_000, '2.50M'],
    [3e9, '3.00G'],
  ])('%s -> %s', (v, text) => expect(humanRate(v)).toBe(text));
});

describe('renderTop', () => {
  const r = parseConfig(readFileSync(join(__dirname, '..', 'examples', 'lab.yaml'), 'utf8'), 'examples/lab.yaml');
  if (!r.ok) throw new Error('examples/lab.yaml does not parse');
  const mux = (name: string, pps: Record<string, number>, rx: number, web: number): AgentView => ({
    kind: 'mux',
    name,
    beat: {
      ...beat(Date.UTC(2026, 11, 1, 15, 0, 10), {}),
      status: {
        pools: [{ candidates: ['h1vm1', 'h1vm2', 'h2vm1'] }],
        flows: { ipv4: 5, ipv6: 1 },
        bgp: { peers: [{ state: 'Established' }] },
      },
    },
    rates: { rx_packets: rx, rx_bytes: 1000, flow_new: 7, flow_replaced: 1, drop_no_rule: 2, drop_not_vip: 0.5 },
    // a tenth of the packets are new flows; the rule web-http carries `web` packets/s
    backendRates: new Map(Object.entries(pps).map(([n, p]) => [n, { pps: p, bps: p * 800, nfps: p / 10 }])),
    ruleRates: new Map([['203.0.113.10 web-http', { pps: web, bps: web * 800, nfps: web / 10 }]]),
  });
  const host = (name: string, nics: Record<string, [number, number]>): AgentView => ({
    kind: 'host',
    name,
    beat: beat(Date.UTC(2026, 11, 1, 15, 0, 10), {}),
    rates: { in_packets: 1 },
    backendRates: null,
    hostRates: new Map(Object.entries(nics).map(([n, [delivered, dsr]]) => [n, { delivered, dsr }])),
  });
  const agents = [
    mux('mux1', { h1vm1: 100, h2vm1: 20 }, 120, 120),
    mux('mux2', { h1vm1: 50, h1vm2: 130 }, 180, 180),
    host('host1', { h1vm1: [150, 140], h1vm2: [130, 120] }),
    host('host2', { h2vm1: [20, 19] }),
  ];
  const health = [
    { nic: 'h1vm1', probe: 'http80', state: 'up', effective: 'up', reported: true },
    { nic: 'h1vm2', probe: 'http80', state: 'down', effective: 'down', reported: true },
  ];
  const screen = renderTop(r.config, 3, health, agents, Date.UTC(2026, 11, 1, 15, 0, 12), 2).join('\n');
  const line = (re: RegExp) => screen.split('\n').find((l) => re.test(l)) ?? '';

  it("sums each backend over the MUXes, gives its share of the pool and its host agent's rates", () => {
    // h1vm1 100 + 50 = 150 of 300 packets/s in the pool, 10 + 5 new flows/s; host1 delivered 150/s, 140 DSR/s
    expect(
      line(/^\s+-> h1vm1 /)
        .trim()
        .split(/\s+/),
    ).toEqual(['->', 'h1vm1', 'up', '50', '1', 'new', 'flows', '150', '120.0k', '15', '50.0%', '150', '140']);
    expect(line(/^\s+-> h1vm2 /)).toMatch(/ down .* 130 .* 13 +43\.3% +130 +120$/);
    // h2vm2: no MUX forwarded to it, and it is not a candidate; its health was never reported
    expect(line(/^\s+-> h2vm2 /)).toMatch(/unknown .* no new flows +- +- +- +- +- +-$/);
    // 30 new flows/s; delivered 150 + 130 + 20, DSR 140 + 120 + 19
    expect(line(/^pool web /)).toMatch(/ 300 +240\.0k +30 +300 +279 +for 203\.0\.113\.10:80\/tcp /);
  });
  it('shows per VIP rule the packets, bits and new flows per second summed over the MUXes', () => {
    expect(
      line(/^203\.0\.113\.10:80\/tcp /)
        .trim()
        .split(/\s+/),
    ).toEqual(['203.0.113.10:80/tcp', 'web-http', 'web', '300', '240.0k', '30']);
    // no MUX reported the echo rule: dashes
    expect(line(/^203\.0\.113\.10:7\/udp /)).toMatch(/ echo +web +- +- +-$/);
  });
  it('shows per MUX packets, bits (bytes x 8), new flows (new + replaced) and drops per second, flows, BGP and heartbeat age', () => {
    expect(
      line(/^mux1 /)
        .trim()
        .split(/\s+/),
    ).toEqual(['mux1', '120', '8000', '8.0', '6', '2.5', 'Established', '2s']);
    expect(screen).toMatch(/^slbctl top - 15:00:12 UTC  generation 3  every 2 s/);
  });
});
