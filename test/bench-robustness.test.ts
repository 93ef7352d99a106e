// The bench survives another machine (issue 19): a failed part is recorded with its reason and shown as
// failed (never as zeros) while the rest is reported; a row in which the path took everything offered is
// marked generator-limited, and a ratio against such a row is a bound, not a ratio; the fair baseline
// (--rps) is reported beside the headline one and the targets are judged on it.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  benchReport,
  failuresMarkdown,
  GENERATOR_LIMITED_SHARE,
  generatorLimitedNote,
  cpuPerPacketText,
  isGeneratorLimited,
  limitNote,
  parseFailures,
  ratioKind,
  ratioText,
  type RateRow,
} from '../scripts/bench/report-lib.js';

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

const HEAD = 'phase\tvariant\tround\tcase\treason\n';

const row = (variant: string, offered: number, delivered: number, baseline = false, processUsPerPacket?: number): RateRow => ({
  variant,
  baseline,
  offeredPps: { median: offered },
  deliveredPps: { median: delivered },
  deliveredShare: delivered / offered,
  ...(processUsPerPacket === undefined ? {} : { processUsPerPacket }),
});

describe('failed parts', () => {
  it("parses send-paths.sh's failures.tsv: one row per failed run or case, '-' for none", () => {
    const text = `${HEAD}tcp\ttcp-pcap\t1\t1r\tiperf3 exited 0: the server is busy running a test. try again later (see x.json)\nhost-agent\tkernel-vxlan-decap\t2\t-\ttrafgen exited at start: Flushing TX_RING failed: Resource temporarily unavailable! (log: y)\n`;
    expect(parseFailures(text, 'netns')).toEqual([
      {
        part: 'netns: tcp',
        variant: 'tcp-pcap',
        round: 1,
        case: '1r',
        reason: 'iperf3 exited 0: the server is busy running a test. try again later (see x.json)',
      },
      {
        part: 'netns: host-agent',
        variant: 'kernel-vxlan-decap',
        round: 2,
        case: '',
        reason: 'trafgen exited at start: Flushing TX_RING failed: Resource temporarily unavailable! (log: y)',
      },
    ]);
  });

  it("parses bench.sh's own rows (a whole part: no variant, round or case) and a header alone", () => {
    expect(parseFailures('part\tvariant\tround\tcase\treason\nmicro\t-\t-\t-\tscripts/bench/micro.ts exited 1\n')).toEqual([
      { part: 'micro', variant: '', round: null, case: '', reason: 'scripts/bench/micro.ts exited 1' },
    ]);
    expect(parseFailures(HEAD)).toEqual([]);
    expect(parseFailures('')).toEqual([]);
  });

  it('lists them in a table, escaping the pipe of a reason', () => {
    const md = failuresMarkdown(parseFailures(`${HEAD}latency\trr-ring\t3\tpersistent\tthe client said a | b\n`));
    expect(md).toContain('## Failed parts (1)');
    expect(md).toContain('| latency | rr-ring | 3 | persistent | the client said a \\| b |');
    expect(failuresMarkdown([])).toBe('');
  });
});

describe('generator-limited rows', () => {
  it('marks a row that delivered everything offered, with the process CPU per packet', () => {
    // the example: MUX ring 228k of 228k offered at 94 % of its core = 0.94 s / 228,000 = 4.12 µs
    const mux = row('mux-ring', 228_000, 228_000, false, (0.94 * 1e6) / 228_000);
    expect(isGeneratorLimited(mux)).toBe(true);
    expect(generatorLimitedNote(mux)).toBe(
      "generator-limited: offered 228k, delivered ~228k; the DUT's capacity is higher; its process used 4.12 µs of CPU per packet",
    );
    // a kernel baseline (no process): no CPU figure
    expect(generatorLimitedNote(row('kernel-vxlan', 291_000, 290_000, true))).toBe(
      "generator-limited: offered 291k, delivered ~290k; the DUT's capacity is higher",
    );
  });

  it('does not mark a row that dropped what it could not take, nor a run that offered nothing', () => {
    // the fair run: mux-ring 137k of 224k offered
    expect(isGeneratorLimited(row('mux-ring', 224_000, 137_000))).toBe(false);
    expect(generatorLimitedNote(row('mux-ring', 224_000, 137_000))).toBeNull();
    expect(isGeneratorLimited(row('x', 100_000, 100_000 * GENERATOR_LIMITED_SHARE - 1))).toBe(false);
    expect(isGeneratorLimited({ ...row('x', 1, 1), offeredPps: { median: 0 } })).toBe(false);
  });

  it("says a row that delivered nearly nothing is no rate, naming the daemon's drop, and gives it no CPU per packet", () => {
    // the DSR phase since stateful DSR: 4 of 51,377 packets/s, every reply dropped as unsolicited
    const dsr = { ...row('agent-dsr-ring', 51_377, 4, false, 10_000), topDrop: { counter: 'drop_out_dsr_unsolicited', count: 148_532 } };
    expect(limitNote(dsr)).toBe(
      'nearly nothing delivered (0.01 % of 51k offered): not a rate; the daemon dropped them as drop_out_dsr_unsolicited (148532 in its counters)',
    );
    expect(cpuPerPacketText(dsr)).toBe('-');
    // a daemon at its limit (the --rps io-paths run: 33k of 388k, 8.5 %) is the path's rate
    const udp = row('mux-udp', 388_000, 33_000, false, 5.1);
    expect(limitNote(udp)).toBe('the path');
    expect(cpuPerPacketText(udp)).toBe('5.10');
    expect(limitNote(row('kernel-vxlan', 291_000, 291_000, true))).toMatch(/^generator-limited: /);
  });

  it('turns a ratio against such a row into a bound', () => {
    const limited = row('a', 200_000, 200_000);
    const dropping = row('b', 300_000, 150_000);
    expect(ratioKind(dropping, row('c', 300_000, 100_000))).toBe('measured');
    expect(ratioKind(limited, dropping)).toBe('lower bound');
    expect(ratioKind(dropping, limited)).toBe('upper bound');
    expect(ratioKind(limited, row('d', 200_000, 199_000))).toBe('both generator-limited');
    expect(ratioText(0.47, 'measured')).toBe('0.47x');
    expect(ratioText(1.333, 'lower bound')).toBe('>= 1.33x');
    expect(ratioText(0.75, 'upper bound')).toBe('<= 0.75x');
    expect(ratioText(1, 'both generator-limited')).toBe('n/a (both generator-limited)');
  });
});

describe('the whole report with failed parts and both baselines', () => {
  const summary = (
    variant: string,
    phase: string,
    offered: number,
    delivered: number,
    baseline: boolean,
    ratios: Record<string, number> = {},
  ) => ({
    variant,
    phase,
    what: variant,
    baseline,
    deliveredPps: { median: delivered, min: delivered, max: delivered, all: [delivered] },
    offeredPps: { median: offered },
    deliveredShare: delivered / offered,
    ratios,
  });
  const run = (variant: string, deliveredPps: number, dutProcessCpuPct: number) => ({ variant, deliveredPps, dutProcessCpuPct });

  function benchDir(): string {
    const d = mkdtempSync(join(tmpdir(), 'slbx-bench-robust-'));
    made.push(d);
    for (const sub of ['netns', 'netns-rps']) mkdirSync(join(d, sub));
    writeFileSync(join(d, 'machine.json'), JSON.stringify({ started: 'T', mode: 'full', cpu: 'c', cpus: 2 }));
    writeFileSync(join(d, 'failures.tsv'), `part\tvariant\tround\tcase\treason\nmaglev\t-\t-\t-\tthe Maglev timing exited 1\n`);
    // headline: every row took all of trafgen's 230k (the other machine)
    writeFileSync(
      join(d, 'netns', 'results.json'),
      JSON.stringify({
        setup: 'headline',
        summaries: [
          summary('kernel-vxlan', 'mux', 230_000, 230_000, true),
          summary('mux-ring', 'mux', 230_000, 229_000, false, { 'kernel-vxlan': 0.996 }),
        ],
        runs: [run('mux-ring', 229_000, 94)],
      }),
    );
    writeFileSync(join(d, 'netns', 'failures.tsv'), `${HEAD}tcp\ttcp-pcap\t1\t1r\tthe server is busy running a test\n`);
    // fair: the kernel takes 291k of 300k, the MUX 137k of 224k (the numbers); the host agent
    // took everything, the DSR baseline too
    writeFileSync(
      join(d, 'netns-rps', 'results.json'),
      JSON.stringify({
        summaries: [
          // send-paths.ts gives a baseline its ratio against itself (1.0): not shown beside the other run
          summary('kernel-vxlan', 'mux', 300_000, 291_000, true, { 'kernel-vxlan': 1 }),
          summary('mux-ring', 'mux', 224_000, 137_000, false, { 'kernel-vxlan': 137 / 291 }),
          summary('kernel-vxlan-decap', 'host-agent', 300_000, 250_000, true),
          summary('agent-ring', 'host-agent', 260_000, 260_000, false, { 'kernel-vxlan-decap': 260 / 250 }),
          summary('kernel-forward-return', 'dsr', 240_000, 240_000, true),
          summary('agent-dsr-ring', 'dsr', 300_000, 180_000, false, { 'kernel-forward-return': 0.75 }),
        ],
        runs: [run('mux-ring', 137_000, 89)],
      }),
    );
    return d;
  }

  it('lists every failure, marks the rows, and judges the fair targets with the ratio kinds', () => {
    const d = benchDir();
    const w = process.stdout.write.bind(process.stdout);
    process.stdout.write = (() => true) as typeof process.stdout.write;
    try {
      benchReport(d);
    } finally {
      process.stdout.write = w;
    }
    const r = JSON.parse(readFileSync(join(d, 'results.json'), 'utf8'));
    expect(r.failures.map((f: { part: string; variant: string }) => `${f.part} ${f.variant}`)).toEqual(['maglev ', 'netns: tcp tcp-pcap']);
    const t = (name: string) => r.targets.find((x: { name: string }) => x.name === name);
    // headline: both took everything offered: no verdict
    const h = t('MUX vs the kernel VXLAN device, same run (headline)');
    expect(h.measured).toContain('n/a (both generator-limited)');
    expect(h.met).toBeNull();
    // fair, measured on both sides: 137 / 291 = 0.47
    const fm = t('MUX vs the kernel VXLAN device, fair baseline');
    expect(fm.measured).toMatch(/^0\.47x \(mux-ring 137k, kernel-vxlan 291k\)/);
    expect(fm.met).toBe(false);
    // the agent took all it was offered: 1.04 is a lower bound, and it reaches 1.0: met
    const fa = t('host agent inbound vs the kernel VXLAN decapsulation, fair baseline');
    expect(fa.measured).toMatch(/^>= 1\.04x/);
    expect(fa.met).toBe(true);
    // the DSR baseline took everything: 0.75 is an upper bound, below 1.0: not met
    const fd = t('DSR return vs kernel forwarding, fair baseline');
    expect(fd.measured).toMatch(/^<= 0\.75x/);
    expect(fd.met).toBe(false);
    const mux = r.packetRates.find((s: { variant: string }) => s.variant === 'mux-ring');
    expect(mux.generatorLimited).toBe(
      "generator-limited: offered 230k, delivered ~229k; the DUT's capacity is higher; its process used 4.10 µs of CPU per packet",
    );
    expect(r.packetRatesFair.find((s: { variant: string }) => s.variant === 'mux-ring').generatorLimited).toBeNull();
    const md = readFileSync(join(d, 'results.md'), 'utf8');
    expect(md).toContain('## Failed parts (2)');
    expect(md).toContain('| netns: tcp | tcp-pcap | 1 | 1r | the server is busy running a test |');
    expect(md).toContain('## Headline and fair baselines side by side');
    expect(md).toContain('| mux | kernel-vxlan | 230k | (baseline) | 291k | (baseline) | the path |');
    expect(md).toContain('| mux | mux-ring | 229k | n/a (both generator-limited) kernel-vxlan | 137k | 0.47x kernel-vxlan | the path |');
  });
});
