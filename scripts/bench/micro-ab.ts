// Old build against new build on the data-plane paths of micro.js, in one run: micro.js --paths-only of
// each dist/ root in its own process, alternating (old, new, then new, old, ...) for --runs rounds, so a
// machine that gets busier or quieter meanwhile weighs on both alike. Per path: the median over the runs
// of each build (each run's figure is itself micro.js's median of its rounds, CPU time per packet), the
// change new/old, and whether it is within --limit percent. The host agent's figures include micro.js's
// restore copy of the frame (the same in both builds); the change of its net figure is printed too.
//
//   node dist/scripts/bench/micro-ab.js --old OLD/dist [--new NEW/dist] [--runs N] [--limit PCT] [--quick] [--json FILE]
//
// Exit 0: no path slower than the limit; 1: some path is (named); 2: usage.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';
import type { PathResult } from './micro.js';

const OPTIONS: OptionSpec[] = [
  { name: 'old', value: 'DIR', help: "the old build's dist/ root" },
  { name: 'new', value: 'DIR', help: "the new build's dist/ root (default: the dist/ this script runs from)" },
  { name: 'runs', value: 'N', help: 'runs of micro.js --paths-only per build, alternating', default: '6' },
  { name: 'limit', value: 'PCT', help: 'how much slower (new against old, in percent) a path may be', default: '3' },
  { name: 'quick', help: 'micro.js --quick: fewer iterations (2 rounds of 50,000; about an eighth of the time, on a loaded machine)' },
  { name: 'json', value: 'FILE', help: "write every run's figures and the table as JSON" },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'micro-ab',
  usage: 'node dist/scripts/bench/micro-ab.js --old OLD/dist [--new NEW/dist] [--runs N] [--limit PCT] [--quick] [--json FILE]',
  options: OPTIONS,
  noPositional: true,
  about:
    'Runs micro.js --paths-only of two builds alternately and compares the medians per path. Exit 0: no path slower than --limit percent; 1: some path is.',
};

const DIST = fileURLToPath(new URL('../..', import.meta.url));

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function runMicro(root: string, json: string, quick: boolean): PathResult[] {
  const extra = quick ? ['--quick'] : [];
  const r = spawnSync(process.execPath, ['--expose-gc', join(root, 'scripts/bench/micro.js'), '--paths-only', ...extra, '--json', json], {
    encoding: 'utf8',
    cwd: join(root, '..'),
  });
  if (r.status !== 0) throw new Error(`micro.js of ${root}: exit ${r.status}\n${r.stderr}`);
  return (JSON.parse(readFileSync(json, 'utf8')) as { paths: PathResult[] }).paths;
}

export interface AbRow {
  plane: string;
  path: string;
  oldNs: number;
  newNs: number;
  /** (new - old) / old, percent */
  changePct: number;
  oldNetNs?: number;
  newNetNs?: number;
  netChangePct?: number;
}

function main(args: ParsedArgs): number {
  const oldRoot = one(args, 'old');
  if (oldRoot === undefined) {
    process.stderr.write('micro-ab: --old is required (see --help)\n');
    return 2;
  }
  const roots = { old: resolve(oldRoot), new: resolve(one(args, 'new') ?? DIST) };
  const runs = Number(one(args, 'runs') ?? '6');
  const limit = Number(one(args, 'limit') ?? '3');
  if (!Number.isInteger(runs) || runs < 1 || runs > 100) {
    process.stderr.write('micro-ab: --runs must be an integer 1..100\n');
    return 2;
  }
  if (!Number.isFinite(limit) || limit < 0) {
    process.stderr.write('micro-ab: --limit must be a percentage >= 0\n');
    return 2;
  }
  const dir = mkdtempSync(join(tmpdir(), 'micro-ab-'));
  const results: { old: PathResult[][]; new: PathResult[][] } = { old: [], new: [] };
  try {
    for (let r = 0; r < runs; r++) {
      const order: ('old' | 'new')[] = r % 2 === 0 ? ['old', 'new'] : ['new', 'old'];
      for (const which of order) {
        results[which].push(runMicro(roots[which], join(dir, `${which}-${r}.json`), args.flags.has('quick')));
        process.stderr.write(`micro-ab: run ${r + 1}/${runs}, ${which} done\n`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const first = results.old[0]!;
  const rows: AbRow[] = first.map((p, k) => {
    const o = results.old.map((run) => run[k]!);
    const n = results.new.map((run) => run[k]!);
    if (n.some((x) => x.path !== p.path) || o.some((x) => x.path !== p.path))
      throw new Error(`the two builds' micro.js measure different paths at ${k}`);
    const oldNs = median(o.map((x) => x.ns));
    const newNs = median(n.map((x) => x.ns));
    const row: AbRow = { plane: p.plane, path: p.path, oldNs, newNs, changePct: ((newNs - oldNs) / oldNs) * 100 };
    if (p.netNs !== undefined) {
      row.oldNetNs = median(o.map((x) => x.netNs!));
      row.newNetNs = median(n.map((x) => x.netNs!));
      row.netChangePct = ((row.newNetNs - row.oldNetNs) / row.oldNetNs) * 100;
    }
    return row;
  });
  const f1 = (x: number) => x.toFixed(1);
  const sign = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)} %`;
  process.stdout.write(
    `micro.js --paths-only, old ${roots.old} vs new ${roots.new}: ${runs} runs each, alternating; medians of CPU ns per packet (node ${process.version})\n`,
  );
  process.stdout.write(
    `| plane | path | old ns | new ns | change | net old | net new | net change |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n`,
  );
  for (const r of rows) {
    process.stdout.write(
      `| ${r.plane} | ${r.path} | ${f1(r.oldNs)} | ${f1(r.newNs)} | ${sign(r.changePct)} | ${r.oldNetNs !== undefined ? f1(r.oldNetNs) : ''} | ${r.newNetNs !== undefined ? f1(r.newNetNs) : ''} | ${r.netChangePct !== undefined ? sign(r.netChangePct) : ''} |\n`,
    );
  }
  const slower = rows.filter((r) => r.changePct > limit);
  const json = one(args, 'json');
  if (json !== undefined)
    writeFileSync(
      json,
      `${JSON.stringify({ bench: 'micro-ab', node: process.version, roots, runs, limitPct: limit, rows, runsOld: results.old, runsNew: results.new }, null, 2)}\n`,
    );
  if (slower.length > 0) {
    process.stdout.write(`SLOWER than ${limit} %: ${slower.map((r) => `${r.plane} ${r.path} (${sign(r.changePct)})`).join('; ')}\n`);
    return 1;
  }
  process.stdout.write(`no path slower by more than ${limit} %\n`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = runCommand(COMMAND, process.argv.slice(2), main);
