// The reports of scripts/bench.sh and of the end-to-end phases of scripts/bench/send-paths.sh (the
// command is scripts/bench/report.ts; this module has no side effects, so tests import it):
//
//   node dist/scripts/bench/report.js e2e --dir DIR
//     summarizes DIR/tcp.tsv, DIR/rr.tsv and DIR/newflows.tsv (written by scripts/bench/e2e-phases.sh):
//     medians with min-max over the runs, ratios against the baseline of the same run; prints Markdown,
//     writes DIR/e2e.json
//   node dist/scripts/bench/report.js bench --dir DIR
//     the whole bench: DIR/netns/ (send-paths.sh: results.json, e2e.json), DIR/micro.json,
//     DIR/maglev.json, DIR/machine.json -> DIR/results.json, DIR/results.md and DIR/chart.svg (a chart
//     drawn here, no plotting dependency), with every issue 4 target checked; prints the Markdown
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// ---- small statistics ------------------------------------------------------------------------------

export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function stat(xs: readonly number[]): Stat {
  if (xs.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return { median: s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2, min: s[0]!, max: s[s.length - 1]!, n: s.length };
}

function readTsv(file: string): Record<string, string>[] {
  if (!existsSync(file)) return [];
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  const head = lines.shift()?.split('\t') ?? [];
  return lines.map((l) => {
    const c = l.split('\t');
    return Object.fromEntries(head.map((h, i) => [h, c[i] ?? '']));
  });
}

const groupBy = <T>(xs: readonly T[], key: (x: T) => string): Map<string, T[]> => {
  const m = new Map<string, T[]>();
  for (const x of xs) {
    const k = key(x);
    const l = m.get(k);
    if (l === undefined) m.set(k, [x]);
    else l.push(x);
  }
  return m;
};

const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '-');
const kpps = (x: number) => (Number.isFinite(x) ? `${(x / 1000).toFixed(0)}k` : '-');
const gbps = (x: number) => (Number.isFinite(x) ? (x / 1e9).toFixed(2) : '-');
const range = (s: Stat, fmt: (x: number) => string) => (s.n === 0 ? '-' : `${fmt(s.median)} (${fmt(s.min)}-${fmt(s.max)})`);

// ---- failed parts ----------------------------------------------------------------------------------

/**
 * One failed measurement: a row of a failures.tsv (scripts/bench.sh writes one for its own parts,
 * scripts/bench/send-paths.sh one per results folder: phase, variant, round, case, reason). The other parts
 * went on; the report lists these and never shows them as zeros.
 */
export interface Failure {
  /** The bench part (micro, maglev, netns, ...) or the phase within a send-paths run (mux, tcp, ...), prefixed with its folder. */
  part: string;
  variant: string;
  round: number | null;
  /** The iperf3 case, latency mode or flow rate; '' for the whole run. */
  case: string;
  reason: string;
}

/** Parses a failures.tsv (a header line, then phase/part, variant, round, case, reason); `where` prefixes the part. */
export function parseFailures(text: string, where = ''): Failure[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  lines.shift();
  return lines.map((l) => {
    const [part = '', variant = '', round = '', kase = '', ...reason] = l.split('\t');
    const r = Number(round);
    return {
      part: where === '' ? part : `${where}: ${part}`,
      variant: variant === '-' ? '' : variant,
      round: round === '' || round === '-' || !Number.isInteger(r) ? null : r,
      case: kase === '-' ? '' : kase,
      reason: reason.join(' ').trim() || '(no reason given)',
    };
  });
}

function readFailures(file: string, where = ''): Failure[] {
  return existsSync(file) ? parseFailures(readFileSync(file, 'utf8'), where) : [];
}

export function failuresMarkdown(fs: readonly Failure[]): string {
  if (fs.length === 0) return '';
  const md = [
    `## Failed parts (${fs.length}): recorded, not measured; the rest of the bench went on`,
    '',
    '| part | variant | round | case | reason |',
    '|---|---|---|---|---|',
  ];
  const cell = (x: string) => x.replace(/\|/g, '\\|');
  for (const f of fs)
    md.push(`| ${cell(f.part)} | ${cell(f.variant) || '-'} | ${f.round ?? '-'} | ${cell(f.case) || '-'} | ${cell(f.reason)} |`);
  md.push('');
  return md.join('\n');
}

// ---- generator-limited rows ------------------------------------------------------------------------

/**
 * A packet-rate row is generator-limited when the path delivered at least this share of what the generator
 * offered (median of the runs): it took everything, so the generator, not the path, set the rate, and the
 * path's capacity is at least the rate shown. (Not 1.0: the receiving interface may also count a stray ARP
 * frame, and a run's window edges move a few packets.)
 */
export const GENERATOR_LIMITED_SHARE = 0.99;

export interface RateRow {
  variant: string;
  baseline: boolean;
  deliveredPps: { median: number };
  offeredPps: { median: number };
  /** Median over the runs of delivered / offered. */
  deliveredShare: number;
  /** CPU time of the process under test per delivered packet, µs (not for the kernel baselines). */
  processUsPerPacket?: number;
  /** The daemon's largest drop counter over the runs (from its /status after each run), if any. */
  topDrop?: { counter: string; count: number };
}

export function isGeneratorLimited(r: RateRow): boolean {
  return r.offeredPps.median > 0 && r.deliveredShare >= GENERATOR_LIMITED_SHARE;
}

/** The report's words for a generator-limited row, or null when the row is the path's own limit. */
export function generatorLimitedNote(r: RateRow): string | null {
  if (!isGeneratorLimited(r)) return null;
  const cost = r.processUsPerPacket === undefined ? '' : `; its process used ${f2(r.processUsPerPacket)} µs of CPU per packet`;
  return `generator-limited: offered ${kpps(r.offeredPps.median)}, delivered ~${kpps(r.deliveredPps.median)}; the DUT's capacity is higher${cost}`;
}

/**
 * Below this share of what was offered a row is not a rate: the path dropped nearly everything (a set-up
 * the daemon refuses by design, or a broken one), and its CPU per packet means nothing.
 */
export const NEARLY_NOTHING_SHARE = 0.01;

export function deliveredNearlyNothing(r: RateRow): boolean {
  return r.offeredPps.median > 0 && r.deliveredShare < NEARLY_NOTHING_SHARE;
}

/** The "limit" column: generator-limited, nearly nothing delivered (with the daemon's drop counter), or the path. */
export function limitNote(r: RateRow): string {
  const g = generatorLimitedNote(r);
  if (g !== null) return g;
  if (deliveredNearlyNothing(r))
    return `nearly nothing delivered (${(r.deliveredShare * 100).toFixed(2)} % of ${kpps(r.offeredPps.median)} offered): not a rate${r.topDrop === undefined ? '' : `; the daemon dropped them as ${r.topDrop.counter} (${r.topDrop.count} in its counters)`}`;
  return 'the path';
}

/**
 * The smoke run's floor for the DSR rows: in scripts/bench.sh --smoke the DSR phase's generator is paced
 * (send-paths.sh --dsr-rate), so a row under half of it whose daemon dropped the replies itself (its
 * largest drop counter at least SMOKE_DSR_DAEMON_DROP_S seconds' worth of the offered rate, e.g. replies
 * of flows it never recorded: drop_out_dsr_unsolicited) is a broken return path. On a busy machine a
 * working agent-dsr-ring delivered 60 % of a paced phase at load 14 with no drop counter of its own grown
 * (lost outside the daemon), so such a loss fails the smoke only under SMOKE_DSR_FLOOR_SHARE.
 */
export const SMOKE_DSR_MIN_SHARE = 0.5;
export const SMOKE_DSR_DAEMON_DROP_S = 0.1;
export const SMOKE_DSR_FLOOR_SHARE = 0.1;

/**
 * Why the smoke fails on the DSR rows (phase "dsr" or "dsr@SIZE"), one line per row that delivered under
 * `minShare` of what was offered with the daemon dropping them (or under SMOKE_DSR_FLOOR_SHARE whatever
 * dropped them), naming the daemon's largest drop counter; empty when all pass.
 */
export function smokeDsrProblems(rows: readonly (RateRow & { phase: string })[], minShare = SMOKE_DSR_MIN_SHARE): string[] {
  const out: string[] = [];
  for (const r of rows) {
    if (r.phase !== 'dsr' && !r.phase.startsWith('dsr@')) continue;
    const daemonDropped = r.topDrop !== undefined && r.topDrop.count >= SMOKE_DSR_DAEMON_DROP_S * r.offeredPps.median;
    const floor = daemonDropped ? minShare : SMOKE_DSR_FLOOR_SHARE;
    if (r.offeredPps.median > 0 && r.deliveredShare >= floor) continue;
    const drop =
      r.topDrop === undefined ? 'no drop counter of the daemon grew' : `its largest drop counter: ${r.topDrop.counter} ${r.topDrop.count}`;
    out.push(
      `${r.variant}: delivered ${(r.deliveredShare * 100).toFixed(1)} % of the ${r.offeredPps.median} packets/s offered (under ${(floor * 100).toFixed(0)} %); ${drop}`,
    );
  }
  return out;
}

/** The process's CPU per packet, '-' where there is none or the row is not a rate. */
export function cpuPerPacketText(r: RateRow): string {
  return r.processUsPerPacket === undefined || deliveredNearlyNothing(r) ? '-' : f2(r.processUsPerPacket);
}

/**
 * What a ratio against a baseline of the same run means when either side took everything offered: with
 * the variant generator-limited it is a lower bound of the true ratio, with the baseline generator-limited
 * an upper bound, with both it says nothing about either (the generator's rate over itself).
 */
export type RatioKind = 'measured' | 'lower bound' | 'upper bound' | 'both generator-limited';
export function ratioKind(variant: RateRow, baseline: RateRow): RatioKind {
  const v = isGeneratorLimited(variant);
  const b = isGeneratorLimited(baseline);
  return v && b ? 'both generator-limited' : v ? 'lower bound' : b ? 'upper bound' : 'measured';
}

/** A ratio with its kind: "1.05x", ">= 0.98x", "<= 1.20x" or "n/a (both generator-limited)". */
export function ratioText(ratio: number, kind: RatioKind): string {
  if (kind === 'both generator-limited') return 'n/a (both generator-limited)';
  return `${kind === 'lower bound' ? '>= ' : kind === 'upper bound' ? '<= ' : ''}${f2(ratio)}x`;
}

// ---- end-to-end phases -----------------------------------------------------------------------------

export interface TcpSummary {
  variant: string;
  case: string;
  bps: Stat;
  retransmits: Stat;
  muxCpuPct: Stat;
  agentCpuPct: Stat;
  loadavg: Stat;
  vsDirect: number | null;
}
export interface RrSummary {
  variant: string;
  mode: string;
  rate: Stat;
  p50: Stat;
  p90: Stat;
  p99: Stat;
  p999: Stat;
  errors: number;
  loadavg: Stat;
  addedP50: number | null;
  addedP99: number | null;
  addedP999: number | null;
}
export interface FlowSummary {
  variant: string;
  rate: number;
  offeredPps: Stat;
  deliveredPps: Stat;
  newFlowsPerS: Stat;
  flowTableFull: number;
  muxCpuPct: Stat;
  loadavg: Stat;
  /** Over each whole run (generator start to drained pipeline): packets offered and lost, summed over the runs. */
  totalOffered: number;
  lost: number;
  lossShare: number;
  /** Flows promoted to the main table per second (their second packet), and first packets the full untrusted table could not record. */
  promotedPerS: Stat;
  untrustedFull: number;
}
/**
 * The control-plane latency bound (docs/controller.md): the median time from a policy change at the API to
 * the last MUX's ack, at most this; scenario 09 asserts the same on every run.
 */
export const CP_MEDIAN_BOUND_MS = 300;

/** Control plane: per run the median (and p90, max) of the changes; summarized over the runs. */
export interface CpSummary {
  variant: string;
  changes: number;
  ackMsMedian: Stat;
  ackMsP90: Stat;
  ackMsMax: Stat;
  clientMsMedian: Stat;
  loadavg: Stat;
}
export interface E2eSummary {
  tcp: TcpSummary[];
  rr: RrSummary[];
  newflows: FlowSummary[];
  newflowsMaxWithoutDrops: Record<string, number | null>;
  cp: CpSummary[];
}

/**
 * "Without drops": at most this share of the packets offered in a whole run is lost (counted from the
 * generator's start to a drained pipeline, so no window edges; the slack is for the odd ARP frame the
 * receiving interface also counts).
 */
export const MAX_LOSS_SHARE = 0.0001;

export function summarizeE2e(dir: string): E2eSummary {
  const num = (r: Record<string, string>, k: string) => Number(r[k]);
  const tcpRows = readTsv(join(dir, 'tcp.tsv'));
  const tcp: TcpSummary[] = [...groupBy(tcpRows, (r) => `${r.variant}\t${r.case}`)].map(([, rows]) => ({
    variant: rows[0]!.variant!,
    case: rows[0]!.case!,
    bps: stat(rows.map((r) => num(r, 'bits_per_second'))),
    retransmits: stat(rows.map((r) => num(r, 'retransmits'))),
    muxCpuPct: stat(rows.map((r) => num(r, 'mux_cpu_pct'))),
    agentCpuPct: stat(rows.map((r) => num(r, 'agent_cpu_pct'))),
    loadavg: stat(rows.map((r) => num(r, 'loadavg_1m'))),
    vsDirect: null,
  }));
  for (const t of tcp) {
    const d = tcp.find((x) => x.variant === 'tcp-direct' && x.case === t.case);
    if (d !== undefined && d.bps.median > 0) t.vsDirect = t.bps.median / d.bps.median;
  }
  const rrRows = readTsv(join(dir, 'rr.tsv'));
  const rr: RrSummary[] = [...groupBy(rrRows, (r) => `${r.variant}\t${r.mode}`)].map(([, rows]) => ({
    variant: rows[0]!.variant!,
    mode: rows[0]!.mode!,
    rate: stat(rows.map((r) => num(r, 'rate'))),
    p50: stat(rows.map((r) => num(r, 'p50_us'))),
    p90: stat(rows.map((r) => num(r, 'p90_us'))),
    p99: stat(rows.map((r) => num(r, 'p99_us'))),
    p999: stat(rows.map((r) => num(r, 'p999_us'))),
    errors: rows.reduce((a, r) => a + num(r, 'errors'), 0),
    loadavg: stat(rows.map((r) => num(r, 'loadavg_1m'))),
    addedP50: null,
    addedP99: null,
    addedP999: null,
  }));
  for (const x of rr) {
    const d = rr.find((y) => y.variant === 'rr-direct' && y.mode === x.mode);
    if (d === undefined || x.variant === 'rr-direct') continue;
    x.addedP50 = x.p50.median - d.p50.median;
    x.addedP99 = x.p99.median - d.p99.median;
    x.addedP999 = x.p999.median - d.p999.median;
  }
  const flowRows = readTsv(join(dir, 'newflows.tsv'));
  const newflows: FlowSummary[] = [...groupBy(flowRows, (r) => `${r.variant}\t${r.rate}`)].map(([, rows]) => ({
    variant: rows[0]!.variant!,
    rate: num(rows[0]!, 'rate'),
    offeredPps: stat(rows.map((r) => num(r, 'offered_pps'))),
    deliveredPps: stat(rows.map((r) => num(r, 'delivered_pps'))),
    newFlowsPerS: stat(rows.map((r) => num(r, 'flow_new_per_s'))),
    flowTableFull: rows.reduce((a, r) => a + num(r, 'flow_table_full'), 0),
    muxCpuPct: stat(rows.map((r) => num(r, 'mux_cpu_pct'))),
    loadavg: stat(rows.map((r) => num(r, 'loadavg_1m'))),
    totalOffered: rows.reduce((a, r) => a + num(r, 'total_offered'), 0),
    lost: rows.reduce((a, r) => a + num(r, 'lost'), 0),
    lossShare: 0,
    promotedPerS: stat(rows.map((r) => (num(r, 'seconds') > 0 ? (Number(r.flow_promoted ?? 0) || 0) / num(r, 'seconds') : 0))),
    untrustedFull: rows.reduce((a, r) => a + (Number(r.flow_untrusted_full ?? 0) || 0), 0),
  }));
  for (const x of newflows) x.lossShare = x.totalOffered > 0 ? x.lost / x.totalOffered : 1;
  const newflowsMaxWithoutDrops: Record<string, number | null> = {};
  for (const [v, rows] of groupBy(newflows, (x) => x.variant)) {
    const ok = rows.filter((x) => x.lossShare <= MAX_LOSS_SHARE).map((x) => x.newFlowsPerS.median);
    newflowsMaxWithoutDrops[v] = ok.length > 0 ? Math.max(...ok) : null;
  }
  const cpRows = readTsv(join(dir, 'cp.tsv'));
  const cp: CpSummary[] = [...groupBy(cpRows, (r) => r.variant!)].map(([variant, rows]) => ({
    variant,
    changes: rows.reduce((a, r) => a + num(r, 'changes'), 0),
    ackMsMedian: stat(rows.map((r) => num(r, 'ack_ms_median'))),
    ackMsP90: stat(rows.map((r) => num(r, 'ack_ms_p90'))),
    ackMsMax: stat(rows.map((r) => num(r, 'ack_ms_max'))),
    clientMsMedian: stat(rows.map((r) => num(r, 'client_ms_median'))),
    loadavg: stat(rows.map((r) => num(r, 'loadavg_1m'))),
  }));
  return { tcp, rr, newflows, newflowsMaxWithoutDrops, cp };
}

export function e2eMarkdown(e: E2eSummary): string {
  const md: string[] = [];
  if (e.tcp.length > 0) {
    md.push('### End-to-end TCP (iperf3, receiver throughput)', '');
    md.push('| variant | case | Gbit/s, median (min-max) | vs tcp-direct | retransmits | MUX CPU % | host agent CPU % | load avg |');
    md.push('|---|---|---|---|---|---|---|---|');
    for (const t of e.tcp) {
      md.push(
        `| ${t.variant} | ${t.case.endsWith('r') ? `${t.case.slice(0, -1)} stream(s), -R (backend sends)` : `${t.case} stream(s)`} | ${range(t.bps, gbps)} | ${t.vsDirect === null ? '-' : f2(t.vsDirect)} | ${f1(t.retransmits.median)} | ${f1(t.muxCpuPct.median)} | ${f1(t.agentCpuPct.median)} | ${f1(t.loadavg.median)} |`,
      );
    }
    md.push('');
  }
  if (e.rr.length > 0) {
    md.push('### Request/response latency (64-byte request and echo over TCP), µs', '');
    md.push('| variant | mode | requests/s | p50 | p90 | p99 | p99.9 | added p50 / p99 / p99.9 vs rr-direct | errors | load avg |');
    md.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const r of e.rr) {
      const added = r.addedP50 === null ? '-' : `${f1(r.addedP50)} / ${f1(r.addedP99!)} / ${f1(r.addedP999!)}`;
      md.push(
        `| ${r.variant} | ${r.mode} | ${f1(r.rate.median)} | ${range(r.p50, f1)} | ${range(r.p90, f1)} | ${range(r.p99, f1)} | ${range(r.p999, f1)} | ${added} | ${r.errors} | ${f1(r.loadavg.median)} |`,
      );
    }
    md.push('');
  }
  if (e.newflows.length > 0) {
    md.push('### New flows per second (paced; every flow two packets, so new flows/s = offered pps / 2)', '');
    md.push(
      '| variant | offered pps | delivered pps, median (min-max) | new flows/s (flow_new), median (min-max) | promoted/s | lost / offered, whole runs | untrusted_full | table_full | MUX CPU % | load avg |',
    );
    md.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const x of e.newflows) {
      md.push(
        `| ${x.variant} | ${kpps(x.offeredPps.median)} | ${range(x.deliveredPps, kpps)} | ${range(x.newFlowsPerS, kpps)} | ${kpps(x.promotedPerS.median)} | ${x.lost} / ${x.totalOffered} (${(x.lossShare * 100).toFixed(2)} %) | ${x.untrustedFull} | ${x.flowTableFull} | ${f1(x.muxCpuPct.median)} | ${f1(x.loadavg.median)} |`,
      );
    }
    md.push('');
    for (const [v, m] of Object.entries(e.newflowsMaxWithoutDrops)) {
      md.push(
        `- ${v}: ${m === null ? 'no offered rate was delivered without drops' : `${kpps(m)} new flows/s without drops (the highest offered rate losing at most ${MAX_LOSS_SHARE * 100} % of its packets)`}`,
      );
    }
    md.push('');
  }
  if (e.cp.length > 0) {
    md.push('### Control plane: a policy change at the controller API until the last MUX applied it (ms)', '');
    md.push(
      "| variant | changes | API -> last MUX ack: median of the runs' medians (min-max) | p90 | max | client-side (PATCH to the generation's answer) | load avg |",
    );
    md.push('|---|---|---|---|---|---|---|');
    for (const c of e.cp)
      md.push(
        `| ${c.variant} | ${c.changes} | ${range(c.ackMsMedian, f2)} | ${f2(c.ackMsP90.median)} | ${f2(c.ackMsMax.max)} | ${range(c.clientMsMedian, f2)} | ${f1(c.loadavg.median)} |`,
      );
    md.push('');
  }
  return md.join('\n');
}

// ---- the whole bench -------------------------------------------------------------------------------

interface PpsSummary {
  variant: string;
  phase: string;
  what: string;
  baseline: boolean;
  deliveredPps: { median: number; min: number; max: number; all: number[] };
  offeredPps: { median: number };
  deliveredShare: number;
  ratios: Record<string, number>;
  /**
   * CPU time of the process under test per delivered packet (µs, median of the runs): what it costs
   * whatever share of its core the process got (the machine may be shared). Not for the baselines.
   */
  processUsPerPacket?: number;
  /** Set by the report: the row took everything offered (isGeneratorLimited), with the report's words. */
  generatorLimited?: string | null;
  /** From send-paths.ts: the daemon's largest drop counter over the runs. */
  topDrop?: { counter: string; count: number };
  /** Set by the report: per baseline, what the ratio means (ratioKind). */
  ratioKinds?: Record<string, RatioKind>;
}

/** Marks generator-limited rows and the kind of every ratio (against the rows of the same run). */
function markLimits(pps: PpsSummary[]): void {
  for (const s of pps) s.generatorLimited = generatorLimitedNote(s);
  for (const s of pps) {
    s.ratioKinds = {};
    for (const b of Object.keys(s.ratios)) {
      const base = pps.find((x) => x.variant === b);
      if (base !== undefined) s.ratioKinds[b] = ratioKind(s, base);
    }
  }
}

/** A ratio target (variant against a kernel baseline of the same run), judged with the ratio's kind. */
function ratioTarget(name: string, pps: PpsSummary[], variants: string[], base: string, want: number, note: string): Target | null {
  const rows = variants.map((v) => pps.find((s) => s.variant === v)).filter((s): s is PpsSummary => s !== undefined);
  const s = rows.sort((a, b) => b.deliveredPps.median - a.deliveredPps.median)[0];
  const b = pps.find((x) => x.variant === base);
  if (s === undefined || b === undefined) return null;
  const r = s.ratios[base];
  if (r === undefined) return { name, target: `>= ${f2(want)}x`, measured: '-', met: null, note };
  const kind = ratioKind(s, b);
  // a lower bound that reaches the target meets it; an upper bound below it misses it; else it is open
  const met =
    kind === 'measured'
      ? r >= want
      : kind === 'lower bound'
        ? r >= want
          ? true
          : null
        : kind === 'upper bound'
          ? r < want
            ? false
            : null
          : null;
  return {
    name,
    target: `>= ${f2(want)}x`,
    measured: `${ratioText(r, kind)} (${s.variant} ${kpps(s.deliveredPps.median)}, ${base} ${kpps(b.deliveredPps.median)})`,
    met,
    note: `${note}${
      kind === 'measured'
        ? ''
        : `; ${kind}: ${[s, b]
            .filter((x) => x.generatorLimited)
            .map((x) => `${x.variant} took all ${kpps(x.offeredPps.median)} offered`)
            .join(', ')}`
    }`,
  };
}

interface PpsRun {
  variant: string;
  deliveredPps: number;
  dutProcessCpuPct: number;
}

function addProcessCost(pps: PpsSummary[], runs: PpsRun[]): void {
  for (const s of pps) {
    if (s.baseline) continue;
    const xs = runs
      .filter((r) => r.variant === s.variant && r.deliveredPps > 0 && r.dutProcessCpuPct > 0)
      .map((r) => ((r.dutProcessCpuPct / 100) * 1e6) / r.deliveredPps);
    if (xs.length > 0) s.processUsPerPacket = stat(xs).median;
  }
}

interface MicroPath {
  plane: string;
  path: string;
  ns: number;
  nsMin: number;
  nsMax: number;
  wallNs: number;
  netNs?: number;
  copyNs?: number;
}
interface MicroOut {
  paths: MicroPath[];
  flowMemory: {
    family: number;
    flows: number;
    capacity: number;
    tableBytes: number;
    bytesPerFlow: number;
    rssPerFlow: number;
    insertNsPerFlow: number;
    lookupNsPerFlow: number;
  }[];
  quick: boolean;
}
interface MaglevRow {
  size: number;
  members: number;
  weights: string;
  medianMs: number;
  minMs: number;
  maxMs: number;
}

export interface Target {
  name: string;
  target: string;
  measured: string;
  met: boolean | null;
  note: string;
}

function readJson<T>(file: string): T | null {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : null;
}

function targets(
  pps: PpsSummary[],
  micro: MicroOut | null,
  maglev: MaglevRow[],
  e2e: E2eSummary | null,
  oneCpu: E2eSummary | null = null,
  fair: PpsSummary[] = [],
): Target[] {
  const t: Target[] = [];
  const get = (v: string) => pps.find((s) => s.variant === v);
  const best = (vs: string[]) =>
    vs
      .map(get)
      .filter((s): s is PpsSummary => s !== undefined)
      .sort((a, b) => b.deliveredPps.median - a.deliveredPps.median)[0];
  const mux = best(['mux-ring', 'mux-cap']);
  if (mux !== undefined) {
    t.push({
      name: 'MUX rate, 64-byte UDP',
      target: '>= 220,000 packets/s',
      measured: `${kpps(mux.deliveredPps.median)} (${mux.variant})`,
      met: mux.deliveredPps.median >= 220_000,
      note: '',
    });
    const h = ratioTarget(
      'MUX vs the kernel VXLAN device, same run (headline)',
      pps,
      ['mux-ring', 'mux-cap'],
      'kernel-vxlan',
      1.0,
      "the kernel baseline's receive work runs on the generator's core; issue 19 judges the fair baseline below",
    );
    if (h !== null) t.push(h);
  }
  const w2 = ratioTarget(
    'MUX with 2 workers vs 1 (issue 19: capacity)',
    pps,
    ['mux-ring-w2'],
    'mux-ring',
    1.7,
    "2 workers run on every CPU, the generator's included: on a 2-CPU machine a second worker gets at most what the generator and the kernel leave of CPU 0",
  );
  if (w2 !== null) t.push(w2);
  const fairNote = '--rps: the receive work of both on the DUT core (docs/io-paths.md)';
  for (const [name, vs, base] of [
    ['MUX vs the kernel VXLAN device, fair baseline', ['mux-ring', 'mux-cap'], 'kernel-vxlan'],
    ['host agent inbound vs the kernel VXLAN decapsulation, fair baseline', ['agent-ring', 'agent-capture'], 'kernel-vxlan-decap'],
    ['DSR return vs kernel forwarding, fair baseline', ['agent-dsr-ring', 'agent-dsr'], 'kernel-forward-return'],
  ] as const) {
    const x = ratioTarget(name, fair, [...vs], base, 1.0, fairNote);
    if (x !== null) t.push(x);
  }
  const agent = best(['agent-ring', 'agent-capture']);
  if (agent !== undefined)
    t.push({
      name: 'host agent inbound rate',
      target: '>= 300,000 packets/s',
      measured: `${kpps(agent.deliveredPps.median)} (${agent.variant})`,
      met: agent.deliveredPps.median >= 300_000,
      note: '',
    });
  if (micro !== null && micro.paths.length > 0) {
    const cost = (p: MicroPath) => p.netNs ?? p.ns;
    const worst = [...micro.paths].sort((a, b) => cost(b) - cost(a))[0]!;
    const main = micro.paths.find((p) => p.plane === 'mux' && p.path.startsWith('udp4 existing'));
    t.push({
      name: 'pure data-plane cost',
      target: '<= 150 ns per packet',
      measured: `${main ? `MUX udp4 existing flow ${f1(cost(main))} ns; ` : ''}worst path ${f1(cost(worst))} ns (${worst.plane} ${worst.path})`,
      met: micro.paths.every((p) => cost(p) <= 150),
      note: micro.quick ? 'quick (smoke) run' : '',
    });
  }
  if (e2e !== null) {
    for (const v of ['rr-ring', 'rr-pcap']) {
      const r = e2e.rr.find((x) => x.variant === v && x.mode === 'persistent');
      if (r === undefined || r.addedP50 === null) continue;
      t.push({
        name: `added latency, one connection (${v})`,
        target: 'p50 <= 50 µs, p99 <= 200 µs',
        measured: `p50 +${f1(r.addedP50)} µs, p99 +${f1(r.addedP99!)} µs`,
        met: r.addedP50 <= 50 && r.addedP99! <= 200,
        note: `at ${f1(r.rate.median)} requests/s; daemons on CPU 1, client and server on CPU 0`,
      });
    }
  }
  if (oneCpu !== null) {
    for (const v of ['rr-ring', 'rr-pcap']) {
      const r = oneCpu.rr.find((x) => x.variant === v && x.mode === 'persistent');
      if (r === undefined || r.addedP50 === null) continue;
      t.push({
        name: `added latency, one connection, all on one CPU (${v})`,
        target: 'p50 <= 50 µs, p99 <= 200 µs',
        measured: `p50 +${f1(r.addedP50)} µs, p99 +${f1(r.addedP99!)} µs`,
        met: r.addedP50 <= 50 && r.addedP99! <= 200,
        note: `at ${f1(r.rate.median)} requests/s; no cross-CPU wake-ups, like the direct baseline`,
      });
    }
  }
  const mg = maglev.find((r) => r.size === 65537 && r.members === 1000 && r.weights === 'equal');
  if (mg !== undefined)
    t.push({
      name: 'Maglev build, 1000 backends, M=65537',
      target: '< 5 ms',
      measured: `${f2(mg.medianMs)} ms (${f2(mg.minMs)}-${f2(mg.maxMs)})`,
      met: mg.medianMs < 5,
      note: '',
    });
  const cp = e2e?.cp.find((c) => c.variant === 'cp-propagation');
  t.push(
    cp === undefined
      ? {
          name: 'policy change at the controller API -> last MUX applied',
          target: '(measure)',
          measured: 'pending',
          met: null,
          note: 'not measured in this run (cp-propagation)',
        }
      : {
          name: 'policy change at the controller API -> last MUX applied',
          target: `median <= ${CP_MEDIAN_BOUND_MS} ms`,
          measured: `${f2(cp.ackMsMedian.median)} ms median, p90 ${f2(cp.ackMsP90.median)} ms (2 MUXes)`,
          met: cp.ackMsMedian.median <= CP_MEDIAN_BOUND_MS,
          note: `${cp.changes} weight changes; the controller's own figure (request arrival to last ack); scenario 09 asserts the same bound`,
        },
  );
  return t;
}

// ---- chart -----------------------------------------------------------------------------------------

interface Bar {
  label: string;
  median: number;
  min: number;
  max: number;
  baseline: boolean;
  note?: string;
}
interface Panel {
  title: string;
  unit: string;
  fmt: (x: number) => string;
  bars: Bar[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Horizontal bars, one panel per measurement, each with its own scale; whiskers show min-max. */
export function chartSvg(title: string, subtitle: string, panels: Panel[]): string {
  const W = 900;
  const labelW = 250;
  const barW = W - labelW - 130;
  const rowH = 20;
  let y = 56;
  const out: string[] = [];
  for (const p of panels) {
    if (p.bars.length === 0) continue;
    out.push(`<text x="10" y="${y}" class="panel">${esc(p.title)} (${esc(p.unit)})</text>`);
    y += 10;
    const max = Math.max(...p.bars.map((b) => (Number.isFinite(b.max) ? b.max : b.median)), 1e-9);
    for (const b of p.bars) {
      const w = Math.max(1, (b.median / max) * barW);
      const cy = y + rowH / 2;
      out.push(`<text x="${labelW - 8}" y="${cy + 4}" class="label" text-anchor="end">${esc(b.label)}</text>`);
      out.push(`<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" class="${b.baseline ? 'base' : 'bar'}"/>`);
      if (Number.isFinite(b.min) && Number.isFinite(b.max) && b.max > b.min) {
        const x0 = labelW + (b.min / max) * barW;
        const x1 = labelW + (b.max / max) * barW;
        out.push(`<line x1="${x0.toFixed(1)}" y1="${cy}" x2="${x1.toFixed(1)}" y2="${cy}" class="whisker"/>`);
        out.push(
          `<line x1="${x0.toFixed(1)}" y1="${cy - 4}" x2="${x0.toFixed(1)}" y2="${cy + 4}" class="whisker"/><line x1="${x1.toFixed(1)}" y1="${cy - 4}" x2="${x1.toFixed(1)}" y2="${cy + 4}" class="whisker"/>`,
        );
      }
      out.push(
        `<text x="${labelW + Math.max(w, Number.isFinite(b.max) ? (b.max / max) * barW : 0) + 6}" y="${cy + 4}" class="value">${esc(p.fmt(b.median))}${b.note ? ` ${esc(b.note)}` : ''}</text>`,
      );
      y += rowH;
    }
    y += 18;
  }
  const H = y + 10;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">
<style>
  .title { font-size: 16px; font-weight: bold; } .sub { font-size: 11px; fill: #555; } .panel { font-size: 13px; font-weight: bold; }
  .label { font-size: 11px; } .value { font-size: 11px; fill: #222; }
  .bar { fill: #3b78c4; } .base { fill: #a9a9a9; } .whisker { stroke: #111; stroke-width: 1; }
</style>
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" class="title">${esc(title)}</text>
<text x="10" y="38" class="sub">${esc(subtitle)}</text>
${out.join('\n')}
</svg>
`;
}

function ppsPanels(pps: PpsSummary[]): Panel[] {
  const phases = [...new Set(pps.map((s) => s.phase))];
  const names: Record<string, string> = {
    mux: 'MUX, 64-byte UDP',
    'host-agent': 'host agent inbound (VXLAN in -> backend), 64-byte inner',
    dsr: 'DSR return (backend -> host agent -> router), 64-byte',
  };
  return phases.map((ph) => {
    const [base, size] = ph.split('@');
    const title = size === undefined ? (names[base!] ?? ph) : `${(names[base!] ?? base!).replace('64-byte', `${size}-byte`)}`;
    return {
      title,
      unit: 'packets/s delivered; grey = kernel baseline',
      fmt: kpps,
      bars: pps
        .filter((s) => s.phase === ph)
        .map((s) => ({
          label: s.variant,
          median: s.deliveredPps.median,
          min: s.deliveredPps.min,
          max: s.deliveredPps.max,
          baseline: s.baseline,
          note: s.baseline
            ? ''
            : Object.entries(s.ratios)
                .map(([b, r]) => `${f2(r)}x ${b.replace(/@.*/, '')}`)
                .join(', '),
        })),
    };
  });
}

/** One phase's packet-rate rows: delivered, offered, ratios with their kind, CPU per packet, the generator-limited mark. */
function ppsTable(rows: PpsSummary[]): string {
  const bases = [...new Set(rows.flatMap((s) => Object.keys(s.ratios)))];
  const md = [
    `| variant | delivered pps, median (min-max) | offered pps | delivered / offered | ${bases.map((b) => `vs ${b}`).join(' | ')} | process CPU µs per packet | limit |`,
    `|---|---|---|---|${bases.map(() => '---|').join('')}---|---|`,
  ];
  for (const s of rows) {
    const ratio = (b: string) => (s.ratios[b] === undefined ? '-' : ratioText(s.ratios[b]!, s.ratioKinds?.[b] ?? 'measured'));
    md.push(
      `| ${s.variant}${s.baseline ? ' (baseline)' : ''} | ${kpps(s.deliveredPps.median)} (${kpps(s.deliveredPps.min)}-${kpps(s.deliveredPps.max)}) | ${kpps(s.offeredPps.median)} | ${(s.deliveredShare * 100).toFixed(0)} % | ${bases.map(ratio).join(' | ')} | ${cpuPerPacketText(s)} | ${limitNote(s)} |`,
    );
  }
  return md.join('\n');
}

/** The headline baseline (receive work on the generator's core) and the fair one (--rps) side by side. */
function sideBySide(headline: PpsSummary[], fair: PpsSummary[]): string {
  const md = [
    '## Headline and fair baselines side by side',
    '',
    "Headline: the namespaces' receive work in the generator core's softirq (the kernel baselines do their work there for free). Fair (`send-paths.sh --rps`): the receive processing of the mux's and the host's fabric interfaces on the DUT core, so the kernel baselines and the daemons pay for the same work on one core; issue 19 judges its targets on the fair one.",
    '',
    '| phase | variant | headline pps | headline ratio | fair pps | fair ratio | fair: limit |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const f of fair) {
    const h = headline.find((x) => x.variant === f.variant);
    const ratios = (s: PpsSummary | undefined) =>
      s === undefined
        ? '-'
        : Object.entries(s.ratios)
            .filter(([b]) => b !== s.variant)
            .map(([b, r]) => `${ratioText(r, s.ratioKinds?.[b] ?? 'measured')} ${b.replace(/@.*/, '')}`)
            .join(', ') || (s.baseline ? '(baseline)' : '-');
    md.push(
      `| ${f.phase} | ${f.variant} | ${h === undefined ? '-' : kpps(h.deliveredPps.median)} | ${ratios(h)} | ${kpps(f.deliveredPps.median)} | ${ratios(f)} | ${limitNote(f)} |`,
    );
  }
  md.push('');
  return md.join('\n');
}

export function benchReport(dir: string): void {
  const machine = readJson<Record<string, unknown>>(join(dir, 'machine.json')) ?? {};
  const netns = readJson<{
    summaries?: PpsSummary[];
    runs?: PpsRun[];
    runsPerVariant?: number;
    measuredS?: number;
    warmupS?: number;
    setup?: string;
  }>(join(dir, 'netns', 'results.json'));
  const pps = netns?.summaries ?? [];
  addProcessCost(pps, netns?.runs ?? []);
  markLimits(pps);
  // the fair baseline (send-paths.sh --rps): the packet-rate variants again, their receive work on the DUT core
  const rpsRun = readJson<{ summaries?: PpsSummary[]; runs?: PpsRun[] }>(join(dir, 'netns-rps', 'results.json'));
  const fair = rpsRun?.summaries ?? [];
  addProcessCost(fair, rpsRun?.runs ?? []);
  markLimits(fair);
  const failures = [
    ...readFailures(join(dir, 'failures.tsv')),
    ...readFailures(join(dir, 'netns', 'failures.tsv'), 'netns'),
    ...readFailures(join(dir, 'netns-rps', 'failures.tsv'), 'netns --rps'),
    ...readFailures(join(dir, 'netns-1cpu', 'failures.tsv'), 'netns one CPU'),
  ];
  const e2e =
    existsSync(join(dir, 'netns', 'tcp.tsv')) || existsSync(join(dir, 'netns', 'newflows.tsv')) ? summarizeE2e(join(dir, 'netns')) : null;
  const oneCpu = existsSync(join(dir, 'netns-1cpu', 'rr.tsv')) ? summarizeE2e(join(dir, 'netns-1cpu')) : null;
  const micro = readJson<MicroOut>(join(dir, 'micro.json'));
  const maglev = readJson<{ rows: MaglevRow[] }>(join(dir, 'maglev.json'))?.rows ?? [];
  const tg = targets(pps, micro, maglev, e2e, oneCpu, fair);
  const md: string[] = [];
  const m = machine as Record<string, string>;
  md.push(`# slbx bench, ${m.started ?? ''}`, '');
  md.push(
    `Machine: ${m.cpu ?? '?'} (${m.cpus ?? '?'} CPUs), kernel ${m.kernel ?? '?'}, Node ${m.node ?? '?'}, trafgen ${m.trafgen ?? '?'}, iperf3 ${m.iperf3 ?? '?'}.`,
  );
  md.push(
    `Load average at start ${m.loadavgStart ?? '?'}, at the end ${m.loadavgEnd ?? '?'}${m.mode === 'smoke' ? '. **Smoke run: checks the harness, the numbers mean nothing.**' : '.'}`,
    '',
  );
  if (netns?.setup) md.push(`Packet rates: ${netns.setup}.`, '');
  if (failures.length > 0) md.push(failuresMarkdown(failures));
  md.push('## Targets (issues 4 and 19)', '', '| target | wanted | measured | met | note |', '|---|---|---|---|---|');
  for (const x of tg)
    md.push(`| ${x.name} | ${x.target} | ${x.measured} | ${x.met === null ? '-' : x.met ? 'yes' : '**no**'} | ${x.note} |`);
  md.push('');
  if (pps.length > 0) {
    md.push('## Packet rates (delivered packets/s, kernel counters of the receiving interface)', '');
    for (const ph of [...new Set(pps.map((s) => s.phase))]) {
      const rows = pps.filter((s) => s.phase === ph);
      md.push(`### ${ph}`, '');
      md.push(ppsTable(rows), '');
    }
    md.push(
      '"process CPU µs per packet": the process under test\'s CPU time (user + system, from /proc/PID/stat) over the measured seconds divided by the packets delivered, median of the runs: its cost per packet whatever share of the core it got on a shared machine (the softirq work the kernel does for it outside its syscalls is not in it). Per-run CPU shares (user/system/softirq/idle/steal of both CPUs), the process\'s CPU and the load average: `netns/runs.tsv`.',
      '',
      `"generator-limited": the path delivered at least ${GENERATOR_LIMITED_SHARE * 100} % of what trafgen offered, so trafgen set the rate and the path's capacity is higher than the row shows; a ratio is then a bound, never the path's ratio: ">= " when the variant took everything (a lower bound), "<= " when its baseline did (an upper bound), "n/a" when both did.`,
      '',
    );
  }
  if (pps.length > 0 && fair.length > 0) md.push(sideBySide(pps, fair));
  if (e2e !== null) md.push(e2eMarkdown(e2e));
  if (oneCpu !== null) {
    md.push('### Latency with everything on one CPU (client, servers and daemons on CPU 0: no cross-CPU wake-ups)', '');
    md.push(e2eMarkdown({ ...oneCpu, tcp: [], newflows: [], cp: [], newflowsMaxWithoutDrops: {} }).replace(/^### .*\n\n/, ''));
  }
  if (micro !== null) {
    md.push('## Pure data-plane cost (ns per packet, CPU time, median of the rounds)', '');
    md.push('| plane | path | ns (min-max) | wall-clock ns | host agent: restore copy / net |', '|---|---|---|---|---|');
    for (const p of micro.paths)
      md.push(
        `| ${p.plane} | ${p.path} | ${f1(p.ns)} (${f1(p.nsMin)}-${f1(p.nsMax)}) | ${f1(p.wallNs)} | ${p.netNs !== undefined ? `${f1(p.copyNs!)} / ${f1(p.netNs)}` : '-'} |`,
      );
    md.push(
      '',
      '## Flow table memory',
      '',
      '| family | flows | capacity (slots) | table bytes per flow | RSS growth per flow | insert ns | lookup ns |',
      '|---|---|---|---|---|---|---|',
    );
    for (const f of micro.flowMemory)
      md.push(
        `| IPv${f.family} | ${f.flows} | ${f.capacity} | ${f1(f.bytesPerFlow)} | ${f1(f.rssPerFlow)} | ${f1(f.insertNsPerFlow)} | ${f1(f.lookupNsPerFlow)} |`,
      );
    md.push('');
  }
  if (maglev.length > 0) {
    md.push('## Maglev table build (ms, median (min-max))', '', '| M | backends | weights | ms |', '|---|---|---|---|');
    for (const r of maglev) md.push(`| ${r.size} | ${r.members} | ${r.weights} | ${f2(r.medianMs)} (${f2(r.minMs)}-${f2(r.maxMs)}) |`);
    md.push('');
  }
  if (e2e === null || e2e.cp.length === 0)
    md.push('## Control plane propagation', '', 'Not measured in this run (the cp-propagation variant).', '');
  const text = md.join('\n');
  // chart
  const panels: Panel[] = [...ppsPanels(pps)];
  if (e2e !== null) {
    for (const c of [...new Set(e2e.tcp.map((t) => t.case))]) {
      panels.push({
        title: `TCP, iperf3 ${c.endsWith('r') ? `${c.slice(0, -1)} stream(s), -R` : `${c} stream(s)`}`,
        unit: 'Gbit/s; grey = direct routing',
        fmt: gbps,
        bars: e2e.tcp
          .filter((t) => t.case === c)
          .map((t) => ({
            label: t.variant,
            median: t.bps.median,
            min: t.bps.min,
            max: t.bps.max,
            baseline: t.variant === 'tcp-direct',
            note: t.vsDirect === null || t.variant === 'tcp-direct' ? '' : `${f2(t.vsDirect)}x`,
          })),
      });
    }
    const rrSets: [string, RrSummary[]][] = [
      ['', e2e.rr],
      [' (all on one CPU)', oneCpu?.rr ?? []],
    ];
    for (const [suffix, rrs] of rrSets)
      for (const mode of [...new Set(rrs.map((r) => r.mode))]) {
        const rows = rrs.filter((r) => r.mode === mode);
        panels.push({
          title: `latency, ${mode === 'persistent' ? 'one connection' : 'a new connection per request'}${suffix}: p50 and p99`,
          unit: 'µs; grey = direct routing',
          fmt: (x) => `${x.toFixed(0)} µs`,
          bars: rows.flatMap((r) => [
            { label: `${r.variant} p50`, median: r.p50.median, min: r.p50.min, max: r.p50.max, baseline: r.variant === 'rr-direct' },
            { label: `${r.variant} p99`, median: r.p99.median, min: r.p99.min, max: r.p99.max, baseline: r.variant === 'rr-direct' },
          ]),
        });
      }
    if (e2e.newflows.length > 0) {
      panels.push({
        title: 'new flows per second delivered (every packet a new flow)',
        unit: 'flows/s at each offered rate',
        fmt: kpps,
        bars: e2e.newflows.map((x) => ({
          label: `${x.variant} @ ${kpps(x.rate)}`,
          median: x.newFlowsPerS.median,
          min: x.newFlowsPerS.min,
          max: x.newFlowsPerS.max,
          baseline: false,
          note: `${(x.lossShare * 100).toFixed(2)} % lost`,
        })),
      });
    }
  }
  if (micro !== null) {
    panels.push({
      title: 'pure data-plane cost',
      unit: 'ns per packet (host agent: net of the restore copy); target 150',
      fmt: (x) => `${x.toFixed(0)} ns`,
      bars: micro.paths.map((p) => ({ label: `${p.plane} ${p.path}`, median: p.netNs ?? p.ns, min: NaN, max: NaN, baseline: false })),
    });
  }
  if (maglev.length > 0) {
    panels.push({
      title: 'Maglev build, equal weights',
      unit: 'ms; target < 5 ms for 1000 backends at M=65537',
      fmt: (x) => `${x.toFixed(1)} ms`,
      bars: maglev
        .filter((r) => r.weights === 'equal')
        .map((r) => ({ label: `M=${r.size}, ${r.members} backends`, median: r.medianMs, min: r.minMs, max: r.maxMs, baseline: false })),
    });
  }
  const svg = chartSvg(
    `slbx bench ${m.started ?? ''}${m.mode === 'smoke' ? ' (smoke run)' : ''}`,
    `${m.cpu ?? ''}, ${m.cpus ?? '?'} CPUs, kernel ${m.kernel ?? '?'}, Node ${m.node ?? '?'}; load average ${m.loadavgStart ?? '?'} -> ${m.loadavgEnd ?? '?'}; whiskers: min-max of the runs`,
    panels,
  );
  writeFileSync(join(dir, 'chart.svg'), svg);
  writeFileSync(join(dir, 'results.md'), `${text}\n![chart](chart.svg)\n`);
  writeFileSync(
    join(dir, 'results.json'),
    `${JSON.stringify({ machine, failures, targets: tg, packetRates: pps, packetRatesFair: fair, e2e, latencyOneCpu: oneCpu?.rr ?? null, micro, maglev, netnsSetup: netns?.setup ?? null }, null, 2)}\n`,
  );
  process.stdout.write(`${text}\n`);
}
