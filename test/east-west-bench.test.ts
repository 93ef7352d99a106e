// The east-west bench's verdicts (scripts/bench/east-west.ts): each measurement must have taken its
// variant's path, judged from the kernel's and the daemons' counter deltas; the ratios are medians over
// medians. The expected values here are worked out by hand from the rows, not by the code under test.
import { describe, expect, it } from 'vitest';
import { addBenchVip, judgeRow, summarize, type RowInput, type Variant } from '../scripts/bench/east-west.js';
import { deriveConfig } from '../scripts/lab/derive-config.js';
import { readFileSync } from 'node:fs';
import { parseConfig } from '../shared/config.js';

type Deltas = { clientTx: number; muxEw: number; sent: number; accepted: number; fast: number; toMux: number; direct: number };

function row(variant: Variant, round: number, d: Deltas, p50 = 100, bps = 1e9): RowInput {
  const eth = variant === 'direct' ? 'client_eth1' : 'client_eth0';
  return {
    name: `r0${round}-${variant}`,
    variant,
    round,
    before: {
      mux1: { ew_from_host: 1000, redirects_sent: 10, send_error_redirect: 0 },
      mux2: { ew_from_host: 500, redirects_sent: 5 },
      host1: { ew_to_mux: 2000, ew_fastpath_out: 3000, redirects_accepted: 7, send_error_fabric: 0 },
    },
    after: {
      mux1: { ew_from_host: 1000 + d.muxEw, redirects_sent: 10 + d.sent, send_error_redirect: 0 },
      mux2: { ew_from_host: 500, redirects_sent: 5 },
      host1: { ew_to_mux: 2000 + d.toMux, ew_fastpath_out: 3000 + d.fast, redirects_accepted: 7 + d.accepted, send_error_fabric: 0 },
    },
    ifBefore: { [eth]: 50, host1_ewd: 40 },
    ifAfter: { [eth]: 50 + d.clientTx, host1_ewd: 40 + d.direct },
    rr: { count: 5000, errors: 0, p50Us: p50, p99Us: p50 * 4, rate: 1000 },
    iperf3: { bps, retransmits: 3, error: null },
    loadavg: '7.5 6.0 5.0',
  };
}

const FAST: Deltas = { clientTx: 10000, muxEw: 6, sent: 3, accepted: 2, fast: 8500, toMux: 6, direct: 0 };
const MUX: Deltas = { clientTx: 10000, muxEw: 8400, sent: 0, accepted: 0, fast: 0, toMux: 8500, direct: 0 };
const DIRECT: Deltas = { clientTx: 10000, muxEw: 0, sent: 0, accepted: 0, fast: 0, toMux: 0, direct: 10002 };

describe('judgeRow: the path each variant took', () => {
  it('accepts each variant on its own path', () => {
    expect(judgeRow(row('fastpath', 1, FAST)).problems).toEqual([]);
    expect(judgeRow(row('through-mux', 1, MUX)).problems).toEqual([]);
    expect(judgeRow(row('direct', 1, DIRECT)).problems).toEqual([]);
    // host1 sent on 8,506 of the client's 10,000 packets
    expect(judgeRow(row('fastpath', 1, FAST)).host1Seen).toBeCloseTo(0.8506, 4);
  });
  it('refuses a Fastpath measurement whose packets went through a MUX', () => {
    const p = judgeRow(row('fastpath', 1, MUX)).problems;
    expect(p.some((x) => x.includes('0 of host1') && x.includes('on the fast path'))).toBe(true);
    expect(p.some((x) => x.includes('8400 packets through a MUX'))).toBe(true);
    expect(p).toContain('fastpath: host1 accepted no redirect');
  });
  it('refuses a through-MUX measurement that was redirected', () => {
    const p = judgeRow(row('through-mux', 1, FAST)).problems;
    expect(p).toContain('through-mux: 3 redirects sent, 8500 packets on the fast path (0 expected)');
  });
  it('refuses a direct measurement that reached the slbx daemons or not the overlay', () => {
    const p = judgeRow(row('direct', 1, { ...MUX, direct: 0 })).problems;
    expect(p.some((x) => x.startsWith("direct: host1's overlay device sent 0 packets"))).toBe(true);
    expect(p.some((x) => x.startsWith('direct: east-west packets at the slbx daemons (MUX 8400'))).toBe(true);
  });
  it('refuses failed measurements and send errors', () => {
    const r = row('direct', 1, DIRECT);
    const bad: RowInput = {
      ...r,
      rr: { count: 0, errors: 0, p50Us: 0, p99Us: 0, rate: 0 },
      iperf3: { bps: 0, retransmits: 0, error: 'unable to connect to server' },
      after: { ...r.after, host1: { ...r.after.host1, send_error_fabric: 2 } },
    };
    expect(judgeRow(bad).problems).toEqual([
      'no request/response samples',
      'iperf3: unable to connect to server',
      'send errors: host1 send_error_fabric 2',
    ]);
  });
});

describe('summarize: medians and ratios of the same run', () => {
  it('takes medians per variant and the ratios of the issue', () => {
    const rows = [
      judgeRow(row('fastpath', 1, FAST, 120, 3e8)),
      judgeRow(row('fastpath', 2, FAST, 140, 5e8)),
      judgeRow(row('fastpath', 3, FAST, 300, 4e8)),
      judgeRow(row('through-mux', 1, MUX, 200, 2e8)),
      judgeRow(row('through-mux', 2, MUX, 220, 2e8)),
      judgeRow(row('through-mux', 3, MUX, 210, 1e8)),
      judgeRow(row('direct', 1, DIRECT, 100, 1e9)),
      judgeRow(row('direct', 2, DIRECT, 120, 1e9)),
      judgeRow(row('direct', 3, DIRECT, 110, 1e9)),
    ];
    const s = summarize(rows);
    expect(s.problems).toEqual([]);
    // medians: fastpath p50 140, bps 4e8; through-mux p50 210, bps 2e8; direct p50 110
    expect(s.variants.find((v) => v.variant === 'fastpath')!.p50Us).toEqual({ median: 140, min: 120, max: 300, n: 3 });
    expect(s.ratios.p50FastpathVsDirect).toBeCloseTo(140 / 110, 9);
    expect(s.ratios.p99FastpathVsDirect).toBeCloseTo(560 / 440, 9);
    expect(s.ratios.bpsFastpathVsThroughMux).toBeCloseTo(2, 9);
    expect(s.goals).toEqual({ latencyWithin20PctOfDirect: false, throughput1_5xThroughMux: true });
  });
  it('names a variant that was never measured', () => {
    expect(summarize([judgeRow(row('direct', 1, DIRECT))]).problems).toEqual([
      'no measurement of fastpath',
      'no measurement of through-mux',
    ]);
  });
});

describe('addBenchVip', () => {
  it('adds the internal VIP with one backend, a valid config', () => {
    const derived = deriveConfig(readFileSync('examples/lab.yaml', 'utf8'), { eastWest: true }, 'examples/lab.yaml');
    if ('error' in derived) throw new Error(derived.error);
    const r = addBenchVip(derived.text, 'lab-east-west.yaml');
    if ('error' in r) throw new Error(r.error);
    const c = parseConfig(r.text, 'bench');
    if (!c.ok) throw new Error('not valid');
    const vip = c.config.vips.find((v) => v.address.text === '198.19.0.101')!;
    expect(vip.scope).toBe('internal');
    expect(vip.rules.map((x) => [x.frontendPort, x.backendPort])).toEqual([
      [7100, 7100],
      [5201, 5201],
    ]);
    expect(c.config.pools.find((p) => p.name === 'ew-bench')!.backends.map((b) => b.nic)).toEqual(['h2vm1']);
  });
  it('refuses a config without an internal VIP', () => {
    const r = addBenchVip(readFileSync('examples/lab.yaml', 'utf8'), 'examples/lab.yaml');
    expect(r).toEqual({ error: 'examples/lab.yaml: no internal VIP (derive it with: derive-config.js --east-west)' });
  });
});
