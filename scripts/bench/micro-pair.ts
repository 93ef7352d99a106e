// Old build against new build on micro.js's data-plane paths, timed in ONE process, in pairs: both builds'
// data planes are loaded side by side (scripts/bench/paths.ts loadPlanes, the same frames from this build's
// packet builder), every path of both is warmed up, then each round times every selected path of the old
// build and of the new one back to back (the order alternating), a few milliseconds apart. The verdict is
// the median of the rounds' new/old ratios, so a machine whose speed drifts between seconds (another
// guest on the host, a frequency change) weighs on both halves of every pair alike.
//
// Why, next to micro-ab.js (one process per build, 20 s each, alternating): on this VM an A/A run of
// micro-ab.js differed by up to 28 % on one path while the host was busy, more than any change measured;
// a pair 10 ms apart does not see that drift. What pairing does not remove: the compiled code itself. Two
// copies of one build in one process differ by up to 10 % on a path, steadily (quartiles of the pairs
// within 3 %): where V8 placed and how it inlined each copy's code. So the comparison runs in --processes
// separate processes (default 4), half of them loading the new build first, and the verdict per path is
// the median over the processes of each one's median ratio, with their min-max: an A/A run shows how
// far apart that leaves two identical builds.
//
//   node dist/scripts/bench/micro-pair.js --old OLD/dist [--new NEW/dist] [--only REGEX] [--processes P] [--rounds N]
//     [--iters N] [--frames N] [--limit PCT] [--json FILE]
//
// Exit 0: no selected path slower than --limit (default: not judged); 1: some path is (named); 2: usage.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { FRAMES, forwardVerdict, loadPlanes, pathCases, type Case, type Planes } from './paths.js';
import type { SlbxConfig } from '../../shared/config.js';

type ConfigModule = typeof import('../../shared/config.js');

const OPTIONS: OptionSpec[] = [
  { name: 'old', value: 'DIR', help: "the old build's dist/ root" },
  { name: 'new', value: 'DIR', help: "the new build's dist/ root (default: the dist/ this script runs from)" },
  { name: 'processes', value: 'P', help: 'separate processes, half of them loading the new build first', default: '4' },
  { name: 'only', value: 'REGEX', help: "time only the paths whose 'plane path' matches (every path of both builds is still warmed up)" },
  { name: 'rounds', value: 'N', help: 'pairs per path', default: '31' },
  { name: 'iters', value: 'N', help: 'iterations per timed stretch', default: '100000' },
  { name: 'frames', value: 'N', help: 'distinct flows per path, a power of two', default: String(FRAMES) },
  { name: 'config', value: 'FILE', help: 'the config the tables are built from', default: 'examples/lab.yaml' },
  { name: 'limit', value: 'PCT', help: 'exit 1 when a selected path is slower than this (median ratio, percent)' },
  { name: 'json', value: 'FILE', help: "write every process's rows and the table as JSON" },
  { name: 'child', value: 'ORDER', help: '(internal) measure in this process: ORDER old-first or new-first, rows as JSON to --json' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'micro-pair',
  usage:
    'node dist/scripts/bench/micro-pair.js --old OLD/dist [--new NEW/dist] [--only REGEX] [--processes P] [--rounds N] [--iters N] [--frames N] [--limit PCT] [--json FILE]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Times two builds' data-plane paths side by side in each of --processes processes, in back-to-back pairs, and reports per path the median over the processes of the pairs' median new/old ratio (robust to a machine whose speed drifts). Exit 1: a path slower than --limit.",
};

const DIST = fileURLToPath(new URL('../..', import.meta.url));

export interface PairRow {
  plane: string;
  path: string;
  oldNs: number;
  newNs: number;
  /** The median of the pairs' new/old ratios, and its quartiles. */
  ratio: number;
  ratioQ1: number;
  ratioQ3: number;
  /** host agent: both builds net of the restore copy (each build's own copy timing), medians. */
  oldNetNs?: number;
  newNetNs?: number;
  netRatio?: number;
}

let sink = 0;
function timeLoop(fn: (i: number) => number, iters: number, start: number): number {
  const c0 = process.cpuUsage();
  let s = 0;
  for (let i = 0; i < iters; i++) s += fn(start + i);
  const c = process.cpuUsage(c0);
  sink += s;
  return ((c.user + c.system) * 1000) / iters;
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const p = (s.length - 1) * q;
  const lo = Math.floor(p);
  const hi = Math.ceil(p);
  return s[lo]! + (s[hi]! - s[lo]!) * (p - lo);
}
const median = (xs: readonly number[]): number => quantile(xs, 0.5);

function positive(args: ParsedArgs, name: string, dflt: number): number {
  const v = Number(one(args, name) ?? String(dflt));
  if (!Number.isInteger(v) || v < 1) throw new Error(`micro-pair: --${name} must be a positive integer`);
  return v;
}

async function buildCases(root: string, cfgFile: string, frames: number): Promise<{ planes: Planes; cases: Case[] }> {
  const configModule = (await import(pathToFileURL(join(root, 'shared/config.js')).href)) as ConfigModule;
  const parsed = configModule.parseConfig(readFileSync(cfgFile, 'utf8'), cfgFile);
  if (!parsed.ok) throw new Error(`micro-pair: ${root} refuses ${cfgFile}:\n${configModule.formatConfigErrors(parsed.errors, cfgFile)}`);
  const planes = await loadPlanes(root);
  const cases = pathCases(parsed.config as SlbxConfig, planes, frames);
  for (const c of cases) {
    const v = c.step(0);
    if (v !== forwardVerdict(c, planes)) throw new Error(`micro-pair: ${root}: ${c.plane} ${c.path}: verdict ${v}, expected a forward`);
  }
  return { planes, cases };
}

/** One process's measurement (--child): both builds loaded (in `order`), warmed, timed in pairs. */
async function measure(roots: { old: string; new: string }, order: 'old-first' | 'new-first', args: ParsedArgs): Promise<PairRow[]> {
  const rounds = positive(args, 'rounds', 31);
  const iters = positive(args, 'iters', 100_000);
  const frames = positive(args, 'frames', FRAMES);
  const cfgFile = resolve(DIST, '..', one(args, 'config') ?? 'examples/lab.yaml');
  const first = await buildCases(order === 'old-first' ? roots.old : roots.new, cfgFile, frames);
  const second = await buildCases(order === 'old-first' ? roots.new : roots.old, cfgFile, frames);
  const [a, b] = order === 'old-first' ? [first, second] : [second, first];
  const only = one(args, 'only');
  const re = only === undefined ? null : new RegExp(only);
  const pairs: [Case, Case][] = [];
  for (const c of a.cases) {
    const d = b.cases.find((x) => x.plane === c.plane && x.path === c.path);
    if (d === undefined) continue; // a path one build has not (a build before outbound NAT)
    if (re === null || re.test(`${c.plane} ${c.path}`)) pairs.push([c, d]);
  }
  if (pairs.length === 0) throw new Error(`micro-pair: no path of both builds matches${only === undefined ? '' : ` --only ${only}`}`);
  // warm-up as micro.js: every path of both builds, twice, so each build's code sees every path's feedback
  for (let w = 0; w < 2; w++)
    for (const c of [...a.cases, ...b.cases]) {
      timeLoop(c.step, 100_000, 1);
      if (c.copy) timeLoop(c.copy, 100_000, 1);
    }
  const t = pairs.map(() => ({
    old: [] as number[],
    new: [] as number[],
    ratio: [] as number[],
    oldCopy: [] as number[],
    newCopy: [] as number[],
  }));
  let at = frames * 16;
  for (let r = 0; r < rounds; r++) {
    pairs.forEach(([o, n], k) => {
      const rec = t[k]!;
      const oldFirst = (r + k) % 2 === 0;
      for (const which of oldFirst ? (['old', 'new'] as const) : (['new', 'old'] as const)) {
        const c = which === 'old' ? o : n;
        rec[which].push(timeLoop(c.step, iters, at));
        if (c.copy) rec[which === 'old' ? 'oldCopy' : 'newCopy'].push(timeLoop(c.copy, iters, at));
      }
      rec.ratio.push(rec.new[rec.new.length - 1]! / rec.old[rec.old.length - 1]!);
      at += iters;
    });
  }
  return pairs.map(([o], k) => {
    const rec = t[k]!;
    const row: PairRow = {
      plane: o.plane,
      path: o.path,
      oldNs: median(rec.old),
      newNs: median(rec.new),
      ratio: median(rec.ratio),
      ratioQ1: quantile(rec.ratio, 0.25),
      ratioQ3: quantile(rec.ratio, 0.75),
    };
    if (rec.oldCopy.length > 0) {
      row.oldNetNs = row.oldNs - median(rec.oldCopy);
      row.newNetNs = row.newNs - median(rec.newCopy);
      row.netRatio = row.newNetNs / row.oldNetNs;
    }
    return row;
  });
}

/** Per path over the processes: the median of each figure, and the min-max of the ratios. */
export interface PairSummary {
  plane: string;
  path: string;
  oldNs: number;
  newNs: number;
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  oldNetNs?: number;
  newNetNs?: number;
  netRatio?: number;
}

export function summarize(perProcess: readonly (readonly PairRow[])[]): PairSummary[] {
  if (perProcess.length === 0) throw new Error('micro-pair: no process reported');
  const first = perProcess[0]!;
  // Every process times the same paths in the same order (the same --only over the same builds); a process
  // that reports another list would have its figures summarized with another path's: refuse it.
  perProcess.forEach((rs, i) => {
    const same = rs.length === first.length && rs.every((r, k) => r.plane === first[k]!.plane && r.path === first[k]!.path);
    if (!same) throw new Error(`micro-pair: process ${i} timed other paths than process 0 (${rs.length} rows against ${first.length})`);
  });
  return first.map((p, k) => {
    const rows = perProcess.map((rs) => rs[k]!);
    const ratios = rows.map((r) => r.ratio);
    const s: PairSummary = {
      plane: p.plane,
      path: p.path,
      oldNs: median(rows.map((r) => r.oldNs)),
      newNs: median(rows.map((r) => r.newNs)),
      ratio: median(ratios),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
    };
    if (p.netRatio !== undefined) {
      s.oldNetNs = median(rows.map((r) => r.oldNetNs!));
      s.newNetNs = median(rows.map((r) => r.newNetNs!));
      s.netRatio = median(rows.map((r) => r.netRatio!));
    }
    return s;
  });
}

async function main(args: ParsedArgs): Promise<number> {
  const oldRoot = one(args, 'old');
  if (oldRoot === undefined) {
    process.stderr.write('micro-pair: --old is required (see --help)\n');
    return 2;
  }
  const roots = { old: resolve(oldRoot), new: resolve(one(args, 'new') ?? DIST) };
  const child = one(args, 'child');
  if (child !== undefined) {
    if (child !== 'old-first' && child !== 'new-first') throw new Error('micro-pair: --child must be old-first or new-first');
    const rows = await measure(roots, child, args);
    writeFileSync(one(args, 'json')!, JSON.stringify(rows));
    return 0;
  }
  const limitArg = one(args, 'limit');
  const limit = limitArg === undefined ? null : Number(limitArg);
  if (limit !== null && (!Number.isFinite(limit) || limit < 0)) {
    process.stderr.write('micro-pair: --limit must be a percentage >= 0\n');
    return 2;
  }
  const processes = positive(args, 'processes', 4);
  const rounds = positive(args, 'rounds', 31);
  const iters = positive(args, 'iters', 100_000);
  const pass: string[] = ['--old', roots.old, '--new', roots.new, '--rounds', String(rounds), '--iters', String(iters)];
  for (const o of ['only', 'frames', 'config']) {
    const v = one(args, o);
    if (v !== undefined) pass.push(`--${o}`, v);
  }
  const dir = mkdtempSync(join(tmpdir(), 'micro-pair-'));
  const perProcess: PairRow[][] = [];
  try {
    for (let p = 0; p < processes; p++) {
      const order = p % 2 === 0 ? 'old-first' : 'new-first';
      const out = join(dir, `p${p}.json`);
      const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...pass, '--child', order, '--json', out], {
        encoding: 'utf8',
        cwd: join(DIST, '..'),
      });
      if (r.status !== 0) throw new Error(`micro-pair: process ${p + 1} (${order}) exited ${r.status}\n${r.stderr}`);
      perProcess.push(JSON.parse(readFileSync(out, 'utf8')) as PairRow[]);
      process.stderr.write(`micro-pair: process ${p + 1}/${processes} (${order}) done\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const rows = summarize(perProcess);
  const f1 = (x: number) => x.toFixed(1);
  const pct = (x: number) => `${x >= 1 ? '+' : ''}${((x - 1) * 100).toFixed(1)} %`;
  process.stdout.write(
    `micro-pair: old ${roots.old} vs new ${roots.new}: ${processes} processes, each ${rounds} pairs of ${iters} iterations per path; CPU ns per packet, medians over the processes (node ${process.version})\n`,
  );
  process.stdout.write(
    '| plane | path | old ns | new ns | new/old | min .. max over processes | net old | net new | net new/old |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n',
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r.plane} | ${r.path} | ${f1(r.oldNs)} | ${f1(r.newNs)} | ${pct(r.ratio)} | ${pct(r.ratioMin)} .. ${pct(r.ratioMax)} | ${r.oldNetNs !== undefined ? f1(r.oldNetNs) : ''} | ${r.newNetNs !== undefined ? f1(r.newNetNs) : ''} | ${r.netRatio !== undefined ? pct(r.netRatio) : ''} |\n`,
    );
  const json = one(args, 'json');
  if (json !== undefined)
    writeFileSync(
      json,
      `${JSON.stringify({ bench: 'micro-pair', node: process.version, roots, processes, rounds, iters, rows, perProcess, sink: sink % 2 }, null, 2)}\n`,
    );
  if (limit === null) return 0;
  const slower = rows.filter((r) => (r.ratio - 1) * 100 > limit);
  if (slower.length > 0) {
    process.stdout.write(`SLOWER than ${limit} %: ${slower.map((r) => `${r.plane} ${r.path} (${pct(r.ratio)})`).join('; ')}\n`);
    return 1;
  }
  process.stdout.write(`no selected path slower by more than ${limit} %\n`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = await runCommandAsync(COMMAND, process.argv.slice(2), main);
