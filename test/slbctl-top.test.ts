// slbctl top's pure parts (cli/top.ts): rates between two heartbeats, the human rate format, and the
// screen drawn from a config, health and the agents' rates. Expected values are worked out by hand here.
// The live view itself runs in tmux against a lab in test/slbctl-top-lab.test.ts.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { humanRate, parseBeat, ratesBetween, renderTop, type AgentView, type Beat } from '../cli/top.js';
import { parseConfig } from '../shared/config.js';

const beat = (at: number, counters: Record<string, number>, backends: [string, number, number][] = []): Beat => ({
  at,
  counters,
  backends: new Map(backends.map(([n, packets, bytes]) => [n, { packets, bytes }])),
  status: {},
});

describe('ratesBetween', () => {
  it('divides each counter delta by the seconds between the heartbeats', () => {
    const r = ratesBetween(
      beat(1000, { rx_packets: 100, rx_bytes: 10_000 }, [['h1vm1', 50, 5000]]),
      beat(3000, { rx_packets: 700, rx_bytes: 70_000 }, [['h1vm1', 350, 35_000]]),
    )!;
    expect(r.rates['rx_packets']).toBe(300); // 600 packets in 2 s
    expect(r.rates['rx_bytes']).toBe(30_000);
    expect(r.backends.get('h1vm1')).toEqual({ pps: 150, bps: 120_000 }); // 30,000 bytes in 2 s = 15,000 B/s = 120,000 bit/s
  });
  it('a counter that went down (a restarted daemon) is a rate of 0, and the same heartbeat twice is no rate', () => {
    expect(ratesBetween(beat(0, { rx_packets: 500 }), beat(2000, { rx_packets: 20 }))!.rates['rx_packets']).toBe(0);
    expect(ratesBetween(beat(2000, {}), beat(2000, {}))).toBeNull();
  });
});

describe('parseBeat', () => {
  it("reads the API's heartbeat answer: {status: {status: {...counters, backends}}, at}", () => {
    const b = parseBeat({
      status: { status: { counters: { rx_packets: 7 }, backends: [{ backend: 'h1vm1', vni: 5001, packets: 3, bytes: 300 }] } },
      at: '2026-12-01T15:00:02.000Z',
    })!;
    expect(b.at).toBe(Date.UTC(2026, 11, 1, 15, 0, 2));
    expect(b.counters).toEqual({ rx_packets: 7 });
    expect(b.backends.get('h1vm1')).toEqual({ packets: 3, bytes: 300 });
    expect(parseBeat(null)).toBeNull();
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
  const mux = (name: string, pps: Record<string, number>, rx: number): AgentView => ({
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
    backendRates: new Map(Object.entries(pps).map(([n, p]) => [n, { pps: p, bps: p * 800 }])),
  });
  const agents = [mux('mux1', { h1vm1: 100, h2vm1: 20 }, 120), mux('mux2', { h1vm1: 50, h1vm2: 130 }, 180)];
  const health = [
    { nic: 'h1vm1', probe: 'http80', state: 'up', effective: 'up', reported: true },
    { nic: 'h1vm2', probe: 'http80', state: 'down', effective: 'down', reported: true },
  ];
  const screen = renderTop(r.config, 3, health, agents, Date.UTC(2026, 11, 1, 15, 0, 12), 2).join('\n');
  const line = (re: RegExp) => screen.split('\n').find((l) => re.test(l)) ?? '';

  it('sums each backend over the MUXes and gives its share of the pool', () => {
    // h1vm1 100 + 50 = 150 of 300 packets/s in the pool
    expect(
      line(/^\s+-> h1vm1 /)
        .trim()
        .split(/\s+/),
    ).toEqual(['->', 'h1vm1', 'up', '50', '1', 'new', 'flows', '150', '120.0k', '50.0%']);
    expect(line(/^\s+-> h1vm2 /)).toMatch(/ down .* 130 .* 43\.3%$/);
    // h2vm2: no MUX forwarded to it, and it is not a candidate; its health was never reported
    expect(line(/^\s+-> h2vm2 /)).toMatch(/unknown .* no new flows +- +- +-$/);
    expect(line(/^pool web /)).toMatch(/ 300 +240\.0k +for 203\.0\.113\.10:80\/tcp /);
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
