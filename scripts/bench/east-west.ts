#!/usr/bin/env node
// The east-west bench's config and report (issue 14; scripts/bench/east-west.sh runs it, docs/east-west.md
// "Bench" explains it):
//
//   node dist/scripts/bench/east-west.js config --in LAB_EW.yaml --out BENCH.yaml
//     adds to a lab config derived with --east-west an internal VIP 198.19.0.101 (tenant-a) whose pool
//     `ew-bench` holds one backend, h2vm1 (host2), with two TCP rules: 7100 (the request/response server)
//     and 5201 (iperf3). One backend: every flow from h1cl1 (host1) crosses the fabric to host2.
//   node dist/scripts/bench/east-west.js report --dir DIR
//     reads DIR/rows/* (one directory per variant and round, written by east-west.sh), checks that each
//     variant took its path (from the kernel's interface counters and the daemons' counters, below), and
//     writes DIR/results.json and DIR/results.md (medians with min-max, ratios against the baselines of
//     the same run, the issue's goals said met or not). Exit 1 when a path check failed or a
//     measurement is missing; the goals never fail it (speed is not asserted).
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMap, isSeq, parseDocument } from 'yaml';
import { formatConfigErrors, parseConfig } from '../../shared/config.js';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

/** What `config` adds. */
export const EW_BENCH = {
  vip: '198.19.0.101',
  pool: 'ew-bench',
  backend: 'h2vm1',
  rrPort: 7100,
  iperfPort: 5201,
} as const;

export const VARIANTS = ['fastpath', 'through-mux', 'direct'] as const;
export type Variant = (typeof VARIANTS)[number];

/** The goals of issue 14's bench line. */
export const GOAL_LATENCY_RATIO = 1.2;
export const GOAL_THROUGHPUT_RATIO = 1.5;

/** Adds EW_BENCH to a config derived with --east-west; the new text or an error. */
export function addBenchVip(text: string, source: string): { text: string } | { error: string } {
  const doc = parseDocument(text);
  const pools = doc.get('pools', true);
  const vips = doc.get('vips', true);
  const nics = doc.get('nics', true);
  if (!isSeq(pools) || !isSeq(vips) || !isSeq(nics)) return { error: `${source}: needs pools, vips and nics (derive it with --east-west)` };
  const nic = nics.items
    .map((n) => (isMap(n) ? (n.toJSON() as { name: string; network?: string }) : null))
    .find((n) => n?.name === EW_BENCH.backend);
  if (nic == null || nic.network === undefined) return { error: `${source}: no nic ${EW_BENCH.backend} with a network` };
  const internal = vips.items.some((v) => isMap(v) && v.get('scope') === 'internal');
  if (!internal) return { error: `${source}: no internal VIP (derive it with: derive-config.js --east-west)` };
  pools.items.push(doc.createNode({ name: EW_BENCH.pool, backends: [{ nic: EW_BENCH.backend }] }));
  const rule = (name: string, port: number) => ({ name, protocol: 'tcp', frontendPort: port, backendPort: port, pool: EW_BENCH.pool });
  vips.items.push(
    doc.createNode({
      address: EW_BENCH.vip,
      scope: 'internal',
      network: nic.network,
      rules: [rule('ew-bench-rr', EW_BENCH.rrPort), rule('ew-bench-iperf3', EW_BENCH.iperfPort)],
    }),
  );
  const out = doc.toString({ lineWidth: 0 });
  const what = `${source} with the east-west bench's VIP ${EW_BENCH.vip}`;
  const r = parseConfig(out, what);
  if (!r.ok) return { error: formatConfigErrors(r.errors, what) };
  return { text: `# scripts/bench/east-west.ts: ${EW_BENCH.vip} (pool ${EW_BENCH.pool}: ${EW_BENCH.backend}) added\n${out}` };
}

type Counters = Record<string, number>;

/** One measurement (a variant in a round), as east-west.sh left it in DIR/rows/NAME. */
export interface RowInput {
  readonly name: string;
  readonly variant: Variant;
  readonly round: number;
  /** the daemons' GET /counters before and after, by node (mux1, mux2, host1, host2) */
  readonly before: Record<string, Counters>;
  readonly after: Record<string, Counters>;
  /** kernel interface counters before and after (tx packets: client_eth0, client_eth1, host1_ewd) */
  readonly ifBefore: Counters;
  readonly ifAfter: Counters;
  readonly rr: { count: number; errors: number; p50Us: number; p99Us: number; rate: number } | null;
  readonly iperf3: { bps: number; retransmits: number; error: string | null } | null;
  readonly loadavg: string;
}

export interface Row {
  readonly name: string;
  readonly variant: Variant;
  readonly round: number;
  readonly p50Us: number | null;
  readonly p99Us: number | null;
  readonly exchanges: number;
  readonly bps: number | null;
  readonly retransmits: number | null;
  /** packets the client VM sent on the interface of the variant (eth0 toward the VIP, eth1 direct) */
  readonly clientTx: number;
  /** VXLAN from hosts placed by the MUXes (ew_from_host, both MUXes) */
  readonly muxEw: number;
  readonly redirectsSent: number;
  readonly redirectsAccepted: number;
  readonly fastpathOut: number;
  readonly toMux: number;
  /** share of the client's packets host1's agent sent on (to a MUX or the fast path): below 1 when its port's capture dropped some */
  readonly host1Seen: number | null;
  /** packets host1's kernel VXLAN device (the direct overlay) sent */
  readonly directTx: number;
  readonly sendErrors: string[];
  readonly loadavg1: number;
  /** what is wrong with the row: the path it took is not its variant's, or a measurement failed */
  readonly problems: string[];
}

const delta = (b: Record<string, Counters>, a: Record<string, Counters>, nodes: readonly string[], name: string): number =>
  nodes.reduce((s, n) => s + ((a[n]?.[name] ?? 0) - (b[n]?.[name] ?? 0)), 0);

/** Fraction of the client's packets a path must account for (ARP and the like are the rest). */
export const PATH_SHARE = 0.9;
/** At most this share of the client's packets may reach a MUX on the fast path (the handshakes). */
export const FASTPATH_MUX_SHARE = 0.05;
/** Enough packets for a measurement to mean something. */
export const MIN_CLIENT_PACKETS = 500;

/** Turns one measurement's files into a row and checks its path. */
export function judgeRow(r: RowInput): Row {
  const muxes = Object.keys(r.after).filter((n) => n.startsWith('mux'));
  const hostNodes = ['host1'];
  const clientTx =
    r.variant === 'direct'
      ? (r.ifAfter.client_eth1 ?? 0) - (r.ifBefore.client_eth1 ?? 0)
      : (r.ifAfter.client_eth0 ?? 0) - (r.ifBefore.client_eth0 ?? 0);
  const row = {
    name: r.name,
    variant: r.variant,
    round: r.round,
    p50Us: r.rr?.p50Us ?? null,
    p99Us: r.rr?.p99Us ?? null,
    exchanges: r.rr?.count ?? 0,
    bps: r.iperf3 !== null && r.iperf3.error === null ? r.iperf3.bps : null,
    retransmits: r.iperf3?.retransmits ?? null,
    clientTx,
    muxEw: delta(r.before, r.after, muxes, 'ew_from_host'),
    redirectsSent: delta(r.before, r.after, muxes, 'redirects_sent'),
    redirectsAccepted: delta(r.before, r.after, hostNodes, 'redirects_accepted'),
    fastpathOut: delta(r.before, r.after, hostNodes, 'ew_fastpath_out'),
    toMux: delta(r.before, r.after, hostNodes, 'ew_to_mux'),
    directTx: (r.ifAfter.host1_ewd ?? 0) - (r.ifBefore.host1_ewd ?? 0),
    host1Seen: null as number | null,
    sendErrors: Object.entries(r.after).flatMap(([n, c]) =>
      Object.entries(c)
        .filter(([k, v]) => k.startsWith('send_error_') && v !== 0)
        .map(([k, v]) => `${n} ${k} ${v}`),
    ),
    loadavg1: Number(r.loadavg.split(' ')[0]),
    problems: [] as string[],
  };
  const p = row.problems;
  if (r.rr === null || r.rr.count === 0) p.push('no request/response samples');
  else if (r.rr.errors > 0) p.push(`${r.rr.errors} request/response errors`);
  if (r.iperf3 === null) p.push('no iperf3 result');
  else if (r.iperf3.error !== null) p.push(`iperf3: ${r.iperf3.error}`);
  if (row.sendErrors.length > 0) p.push(`send errors: ${row.sendErrors.join(', ')}`);
  if (clientTx < MIN_CLIENT_PACKETS) p.push(`the client sent only ${clientTx} packets`);
  // What host1's agent sent on (to a MUX or on the fast path): less than the client sent when its port's
  // capture dropped packets on a busy machine (TCP sends them again), so the shares are of what it saw.
  const seen = row.toMux + row.fastpathOut;
  if (r.variant !== 'direct' && clientTx > 0) row.host1Seen = seen / clientTx;
  const pct = (x: number, of: number) => (of > 0 ? `${((100 * x) / of).toFixed(1)} %` : '-');
  switch (r.variant) {
    case 'fastpath':
      if (seen < MIN_CLIENT_PACKETS) p.push(`fastpath: host1 sent only ${seen} east-west packets`);
      if (row.fastpathOut < PATH_SHARE * seen)
        p.push(`fastpath: ${row.fastpathOut} of host1's ${seen} east-west packets on the fast path (${pct(row.fastpathOut, seen)})`);
      if (row.muxEw > FASTPATH_MUX_SHARE * seen)
        p.push(
          `fastpath: ${row.muxEw} packets through a MUX, ${pct(row.muxEw, seen)} of host1's ${seen} (bound ${100 * FASTPATH_MUX_SHARE} %)`,
        );
      if (row.redirectsAccepted === 0) p.push('fastpath: host1 accepted no redirect');
      break;
    case 'through-mux':
      if (row.toMux < MIN_CLIENT_PACKETS) p.push(`through-mux: host1 sent only ${row.toMux} packets to a MUX`);
      if (row.muxEw < PATH_SHARE * seen)
        p.push(`through-mux: ${row.muxEw} packets through a MUX, ${pct(row.muxEw, seen)} of host1's ${seen} east-west packets`);
      if (row.fastpathOut !== 0 || row.redirectsSent !== 0)
        p.push(`through-mux: ${row.redirectsSent} redirects sent, ${row.fastpathOut} packets on the fast path (0 expected)`);
      break;
    case 'direct':
      if (row.directTx < PATH_SHARE * clientTx)
        p.push(`direct: host1's overlay device sent ${row.directTx} packets, ${pct(row.directTx, clientTx)} of the client's ${clientTx}`);
      if (row.muxEw !== 0 || seen !== 0)
        p.push(`direct: east-west packets at the slbx daemons (MUX ${row.muxEw}, to MUX ${row.toMux}, fast path ${row.fastpathOut})`);
      break;
  }
  return row;
}

export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function stat(xs: readonly (number | null)[]): Stat | null {
  const v = xs.filter((x): x is number => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = v.length >> 1;
  const median = v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
  return { median, min: v[0]!, max: v[v.length - 1]!, n: v.length };
}

export interface Summary {
  variant: Variant;
  p50Us: Stat | null;
  p99Us: Stat | null;
  bps: Stat | null;
  retransmits: Stat | null;
  loadavg1: Stat | null;
}

export interface Results {
  rows: Row[];
  variants: Summary[];
  ratios: {
    p50FastpathVsDirect: number | null;
    p99FastpathVsDirect: number | null;
    p50ThroughMuxVsDirect: number | null;
    bpsFastpathVsThroughMux: number | null;
    bpsFastpathVsDirect: number | null;
  };
  goals: { latencyWithin20PctOfDirect: boolean | null; throughput1_5xThroughMux: boolean | null };
  problems: string[];
}

const ratio = (a: Stat | null | undefined, b: Stat | null | undefined): number | null =>
  a == null || b == null || b.median === 0 ? null : a.median / b.median;

export function summarize(rows: readonly Row[]): Results {
  const variants = VARIANTS.map((v): Summary => {
    const rs = rows.filter((r) => r.variant === v);
    return {
      variant: v,
      p50Us: stat(rs.map((r) => r.p50Us)),
      p99Us: stat(rs.map((r) => r.p99Us)),
      bps: stat(rs.map((r) => r.bps)),
      retransmits: stat(rs.map((r) => r.retransmits)),
      loadavg1: stat(rs.map((r) => r.loadavg1)),
    };
  });
  const by = (v: Variant) => variants.find((s) => s.variant === v);
  const ratios = {
    p50FastpathVsDirect: ratio(by('fastpath')?.p50Us, by('direct')?.p50Us),
    p99FastpathVsDirect: ratio(by('fastpath')?.p99Us, by('direct')?.p99Us),
    p50ThroughMuxVsDirect: ratio(by('through-mux')?.p50Us, by('direct')?.p50Us),
    bpsFastpathVsThroughMux: ratio(by('fastpath')?.bps, by('through-mux')?.bps),
    bpsFastpathVsDirect: ratio(by('fastpath')?.bps, by('direct')?.bps),
  };
  const problems = rows.flatMap((r) => r.problems.map((p) => `${r.name}: ${p}`));
  for (const v of VARIANTS) if (!rows.some((r) => r.variant === v)) problems.push(`no measurement of ${v}`);
  const lat =
    ratios.p50FastpathVsDirect === null || ratios.p99FastpathVsDirect === null
      ? null
      : ratios.p50FastpathVsDirect <= GOAL_LATENCY_RATIO && ratios.p99FastpathVsDirect <= GOAL_LATENCY_RATIO;
  const tput = ratios.bpsFastpathVsThroughMux === null ? null : ratios.bpsFastpathVsThroughMux >= GOAL_THROUGHPUT_RATIO;
  return { rows: [...rows], variants, ratios, goals: { latencyWithin20PctOfDirect: lat, throughput1_5xThroughMux: tput }, problems };
}

const us = (s: Stat | null) => (s === null ? '-' : `${Math.round(s.median)} (${Math.round(s.min)}-${Math.round(s.max)})`);
const gbps = (s: Stat | null) =>
  s === null ? '-' : `${(s.median / 1e9).toFixed(3)} (${(s.min / 1e9).toFixed(3)}-${(s.max / 1e9).toFixed(3)})`;
const x2 = (r: number | null) => (r === null ? '-' : `${r.toFixed(2)}x`);
const yes = (b: boolean | null) => (b === null ? 'not measured' : b ? 'met' : 'NOT met');

export function resultsMarkdown(r: Results): string {
  const md: string[] = [];
  md.push(
    '| variant | rr p50 µs, median (min-max) | rr p99 µs | iperf3 Gbit/s | retransmits | load avg (1 min) |',
    '|---|---|---|---|---|---|',
  );
  for (const s of r.variants)
    md.push(
      `| ${s.variant} | ${us(s.p50Us)} | ${us(s.p99Us)} | ${gbps(s.bps)} | ${s.retransmits === null ? '-' : Math.round(s.retransmits.median)} | ${s.loadavg1 === null ? '-' : `${s.loadavg1.median.toFixed(1)} (${s.loadavg1.min.toFixed(1)}-${s.loadavg1.max.toFixed(1)})`} |`,
    );
  md.push('');
  md.push(
    `Latency, Fastpath vs direct: p50 ${x2(r.ratios.p50FastpathVsDirect)}, p99 ${x2(r.ratios.p99FastpathVsDirect)} (goal <= ${GOAL_LATENCY_RATIO}x): ${yes(r.goals.latencyWithin20PctOfDirect)}; through the MUX vs direct: p50 ${x2(r.ratios.p50ThroughMuxVsDirect)}.`,
  );
  md.push(
    `Throughput, Fastpath vs through the MUX: ${x2(r.ratios.bpsFastpathVsThroughMux)} (goal >= ${GOAL_THROUGHPUT_RATIO}x): ${yes(r.goals.throughput1_5xThroughMux)}; Fastpath vs direct: ${x2(r.ratios.bpsFastpathVsDirect)}.`,
  );
  md.push('');
  md.push(
    '| row | p50 µs | p99 µs | exchanges | Gbit/s | client packets | host1 saw | through a MUX | fast path | redirects sent / accepted | direct overlay | load |',
  );
  md.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const x of r.rows)
    md.push(
      `| ${x.name} | ${x.p50Us ?? '-'} | ${x.p99Us ?? '-'} | ${x.exchanges} | ${x.bps === null ? '-' : (x.bps / 1e9).toFixed(3)} | ${x.clientTx} | ${x.host1Seen === null ? '-' : `${(100 * x.host1Seen).toFixed(1)} %`} | ${x.muxEw} | ${x.fastpathOut} | ${x.redirectsSent} / ${x.redirectsAccepted} | ${x.directTx} | ${x.loadavg1} |`,
    );
  md.push('');
  md.push(
    r.problems.length === 0 ? 'Every variant took its path (checks above).' : `PROBLEMS:\n${r.problems.map((p) => `- ${p}`).join('\n')}`,
  );
  return `${md.join('\n')}\n`;
}

function readJson<T>(file: string): T | null {
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return null;
  }
}

function readCounters(dir: string): Record<string, Counters> {
  const out: Record<string, Counters> = {};
  if (!existsSync(dir)) return out;
  for (const f of readdirSync(dir)) if (f.endsWith('.json')) out[f.slice(0, -5)] = readJson<Counters>(join(dir, f)) ?? {};
  return out;
}

/** Reads DIR/rows/NAME (NAME = rNN-VARIANT). */
export function readRow(dir: string, name: string): RowInput {
  const m = /^r(\d+)-(.+)$/.exec(name);
  const variant = m?.[2] as Variant;
  if (m === null || !VARIANTS.includes(variant)) throw new Error(`${name}: not rNN-VARIANT (${VARIANTS.join(', ')})`);
  const d = join(dir, name);
  const rrRaw = readJson<{ count: number; errors: number; p50Us: number; p99Us: number; rate: number }>(join(d, 'rr.json'));
  const ip = readJson<{ error?: string; end?: { sum_received?: { bits_per_second?: number }; sum_sent?: { retransmits?: number } } }>(
    join(d, 'iperf3.json'),
  );
  const bps = ip?.end?.sum_received?.bits_per_second;
  const iperf3 =
    ip === null
      ? null
      : {
          bps: bps ?? 0,
          retransmits: ip.end?.sum_sent?.retransmits ?? 0,
          error: ip.error ?? (bps === undefined ? 'no sum_received' : null),
        };
  return {
    name,
    variant,
    round: Number(m[1]),
    before: readCounters(join(d, 'before')),
    after: readCounters(join(d, 'after')),
    ifBefore: readJson<Counters>(join(d, 'if-before.json')) ?? {},
    ifAfter: readJson<Counters>(join(d, 'if-after.json')) ?? {},
    rr: rrRaw,
    iperf3,
    loadavg: existsSync(join(d, 'loadavg')) ? readFileSync(join(d, 'loadavg'), 'utf8').trim() : '',
  };
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'in', value: 'FILE', help: 'config: the lab config derived with --east-west' },
  { name: 'out', value: 'FILE', help: 'config: where to write the bench config (default: stdout)' },
  { name: 'dir', value: 'DIR', help: 'report: the bench run directory (rows/ inside)' },
  { name: 'help', help: 'show this help' },
];

const SPEC: CommandSpec = {
  program: 'east-west',
  usage: 'node dist/scripts/bench/east-west.js config --in FILE [--out FILE] | report --dir DIR',
  about:
    'The east-west bench (scripts/bench/east-west.sh): `config` adds the bench VIP 198.19.0.101 (pool ew-bench: h2vm1; tcp 7100, 5201) to a lab config derived with --east-west; `report` checks each measurement took its path and writes results.json and results.md (exit 1 if a check failed).',
  options: OPTIONS,
};

function main(argv: readonly string[]): number {
  return runCommand(SPEC, argv, (args: ParsedArgs) => {
    const cmd = args.positional[0];
    if (cmd === 'config') {
      const file = one(args, 'in');
      if (file === undefined) throw new UsageError('config needs --in FILE');
      const r = addBenchVip(readFileSync(file, 'utf8'), file);
      if ('error' in r) {
        process.stderr.write(`east-west: ${r.error}\n`);
        return 1;
      }
      const out = one(args, 'out');
      if (out === undefined) process.stdout.write(r.text);
      else writeFileSync(out, r.text);
      return 0;
    }
    if (cmd === 'report') {
      const dir = one(args, 'dir');
      if (dir === undefined) throw new UsageError('report needs --dir DIR');
      const rowsDir = join(dir, 'rows');
      const names = existsSync(rowsDir) ? readdirSync(rowsDir).sort() : [];
      const results = summarize(names.map((n) => judgeRow(readRow(rowsDir, n))));
      writeFileSync(join(dir, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
      const md = resultsMarkdown(results);
      writeFileSync(join(dir, 'results.md'), md);
      process.stdout.write(md);
      return results.problems.length === 0 ? 0 : 1;
    }
    throw new UsageError(cmd === undefined ? 'a command is required: config or report' : `unknown command ${cmd} (config or report)`);
  });
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
