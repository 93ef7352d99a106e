// The bench's report (scripts/bench/report-lib.ts), without running a bench: statistics, the end-to-end
// summaries (ratios and added latency against the baseline of the same run, the highest new-flow rate
// without drops), the issue 4 targets, and the files it writes (JSON, Markdown, an SVG chart).
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchReport, chartSvg, MAX_LOSS_SHARE, stat, summarizeE2e } from '../scripts/bench/report-lib.js';

const made: string[] = [];
const tempDir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
};
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

const tsv = (head: string[], rows: (string | number)[][]) => `${[head.join('\t'), ...rows.map((r) => r.join('\t'))].join('\n')}\n`;

function e2eDir(): string {
  const d = tempDir('slbx-bench-report-');
  writeFileSync(
    join(d, 'tcp.tsv'),
    tsv(
      [
        'variant',
        'case',
        'round',
        'seconds',
        'bits_per_second',
        'retransmits',
        'gen_cpu_usr_sys_sirq_idle_steal',
        'dut_cpu_usr_sys_sirq_idle_steal',
        'mux_cpu_pct',
        'agent_cpu_pct',
        'loadavg_1m',
      ],
      [
        ['tcp-direct', '1', 1, 3, 4e9, 0, '', '', 0, 0, 0.5],
        ['tcp-direct', '1', 2, 3, 6e9, 0, '', '', 0, 0, 0.5],
        ['tcp-direct', '1', 3, 3, 5e9, 0, '', '', 0, 0, 0.5],
        ['tcp-ring', '1', 1, 3, 2e9, 3, '', '', 40, 30, 0.6],
        ['tcp-ring', '1', 2, 3, 2.5e9, 5, '', '', 41, 31, 0.6],
        ['tcp-ring', '1', 3, 3, 3e9, 4, '', '', 42, 32, 0.6],
      ],
    ),
  );
  writeFileSync(
    join(d, 'rr.tsv'),
    tsv(
      [
        'variant',
        'mode',
        'round',
        'count',
        'errors',
        'rate',
        'p50_us',
        'p90_us',
        'p99_us',
        'p999_us',
        'max_us',
        'mean_us',
        'dut_cpu_usr_sys_sirq_idle_steal',
        'loadavg_1m',
      ],
      [
        ['rr-direct', 'persistent', 1, 100, 0, 1000, 30, 40, 60, 90, 100, 33, '', 0.2],
        ['rr-ring', 'persistent', 1, 100, 0, 1000, 70, 90, 200, 400, 500, 80, '', 0.2],
      ],
    ),
  );
  writeFileSync(
    join(d, 'newflows.tsv'),
    tsv(
      [
        'variant',
        'rate',
        'round',
        'seconds',
        'offered',
        'offered_pps',
        'delivered',
        'delivered_pps',
        'flow_new',
        'flow_new_per_s',
        'flow_table_full',
        'mux_rx',
        'dut_cpu_usr_sys_sirq_idle_steal',
        'mux_cpu_pct',
        'loadavg_1m',
        'total_offered',
        'total_delivered',
        'lost',
      ],
      [
        ['newflows-ring', 100000, 1, 3, 300000, 100000, 300000, 100000, 300000, 100000, 0, 300000, '', 50, 0.3, 400000, 400000, 0],
        ['newflows-ring', 200000, 1, 3, 600000, 200000, 560000, 186000, 560000, 186000, 0, 560000, '', 99, 0.3, 800000, 740000, 60000],
      ],
    ),
  );
  return d;
}

describe('bench report', () => {
  it('computes medians with min and max', () => {
    expect(stat([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3, n: 3 });
    expect(stat([4, 1, 3, 2])).toEqual({ median: 2.5, min: 1, max: 4, n: 4 });
    expect(stat([]).n).toBe(0);
  });

  it('summarizes the end-to-end phases against the baselines of the same run', () => {
    const e = summarizeE2e(e2eDir());
    const ring = e.tcp.find((t) => t.variant === 'tcp-ring')!;
    expect(ring.bps).toEqual({ median: 2.5e9, min: 2e9, max: 3e9, n: 3 });
    expect(ring.vsDirect).toBeCloseTo(0.5);
    const rr = e.rr.find((x) => x.variant === 'rr-ring')!;
    expect([rr.addedP50, rr.addedP99, rr.addedP999]).toEqual([40, 140, 310]);
    expect(e.newflows.find((x) => x.rate === 200000)!.lossShare).toBeGreaterThan(MAX_LOSS_SHARE);
    expect(e.newflowsMaxWithoutDrops['newflows-ring']).toBe(100000);
  });

  it('writes results.json, results.md and a chart, and checks the targets', () => {
    const d = tempDir('slbx-bench-all-');
    const netns = join(d, 'netns');
    mkdirSync(netns);
    const src = e2eDir();
    for (const f of ['tcp.tsv', 'rr.tsv', 'newflows.tsv']) writeFileSync(join(netns, f), readFileSync(join(src, f)));
    mkdirSync(join(d, 'netns-1cpu'));
    writeFileSync(join(d, 'netns-1cpu', 'rr.tsv'), readFileSync(join(src, 'rr.tsv')));
    const pps = (variant: string, phase: string, median: number, baseline: boolean, ratios: Record<string, number> = {}) => ({
      variant,
      phase,
      what: variant,
      baseline,
      deliveredPps: { median, min: median - 1000, max: median + 1000, all: [median] },
      offeredPps: { median: 500000 },
      deliveredShare: 0.9,
      ratios,
    });
    writeFileSync(
      join(netns, 'results.json'),
      JSON.stringify({
        setup: 'test',
        summaries: [
          pps('kernel-vxlan', 'mux', 400000, true),
          pps('mux-ring', 'mux', 420000, false, { 'kernel-vxlan': 1.05 }),
          pps('agent-ring', 'host-agent', 250000, false),
        ],
      }),
    );
    writeFileSync(
      join(d, 'micro.json'),
      JSON.stringify({
        quick: false,
        paths: [
          { plane: 'mux', path: 'udp4 existing flow, 64 B', ns: 120, nsMin: 110, nsMax: 130, wallNs: 125 },
          { plane: 'host-in', path: 'udp4, 64 B inner', ns: 200, nsMin: 190, nsMax: 210, wallNs: 205, copyNs: 20, netNs: 180 },
        ],
        flowMemory: [
          {
            family: 4,
            flows: 1e6,
            capacity: 2 ** 21,
            tableBytes: 58720256,
            bytesPerFlow: 58.7,
            rssPerFlow: 60,
            insertNsPerFlow: 100,
            lookupNsPerFlow: 80,
          },
        ],
      }),
    );
    writeFileSync(
      join(d, 'maglev.json'),
      JSON.stringify({ rows: [{ size: 65537, members: 1000, weights: 'equal', medianMs: 3.5, minMs: 3, maxMs: 4 }] }),
    );
    writeFileSync(join(d, 'machine.json'), JSON.stringify({ started: 'T', mode: 'full', cpu: 'test <cpu>', cpus: 2 }));
    const out: string[] = [];
    const w = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((s: string) => {
      out.push(s);
      return true;
    }) as typeof process.stdout.write;
    try {
      benchReport(d);
    } finally {
      process.stdout.write = w;
    }
    const r = JSON.parse(readFileSync(join(d, 'results.json'), 'utf8'));
    const t = (name: string) => r.targets.find((x: { name: string }) => x.name.startsWith(name));
    expect(t('MUX rate').met).toBe(true);
    expect(t('MUX vs the kernel VXLAN').met).toBe(true);
    expect(t('host agent inbound').met).toBe(false);
    expect(t('pure data-plane cost').met).toBe(false); // 180 ns net on the host agent path
    expect(t('added latency, one connection (rr-ring)').met).toBe(true); // +40 / +140 µs
    expect(t('added latency, one connection, all on one CPU (rr-ring)').measured).toBe('p50 +40.0 µs, p99 +140.0 µs');
    expect(readFileSync(join(d, 'results.md'), 'utf8')).toContain('### Latency with everything on one CPU');
    expect(t('Maglev build').met).toBe(true);
    expect(t('policy change').measured).toBe('pending'); // no cp.tsv here
    const md = readFileSync(join(d, 'results.md'), 'utf8');
    expect(md).toContain('| host agent inbound rate | >= 300,000 packets/s | 250k (agent-ring) | **no** |');
    const svg = readFileSync(join(d, 'chart.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('test &lt;cpu&gt;');
    expect(svg).not.toContain('NaN');
    expect((svg.match(/<rect /g) ?? []).length).toBeGreaterThan(8);
  });

  it('draws a panel per measurement, each on its own scale, escaping text', () => {
    const svg = chartSvg('t', 's', [
      {
        title: 'a <b>',
        unit: 'u',
        fmt: String,
        bars: [
          { label: 'x', median: 5, min: 4, max: 6, baseline: true },
          { label: 'y', median: 10, min: NaN, max: NaN, baseline: false },
        ],
      },
    ]);
    expect(svg).toContain('a &lt;b&gt; (u)');
    expect(svg).toContain('class="base"');
    expect(svg).toContain('class="bar"');
    expect(svg).toContain('class="whisker"');
  });
});
