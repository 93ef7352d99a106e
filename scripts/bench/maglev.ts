// Maglev table build time. Run after `npx tsc -p tsconfig.json`:
//   node dist/scripts/bench/maglev.js [--reps N] [--json FILE]
// Builds tables for 10, 100 and 1000 members at M = 65537 and M = 655373 (equal weights, random
// weights 1..1000, and equal weights with 10 % of the members unavailable), warms up, then times at
// least 20 builds of each and prints median / min / max in milliseconds.
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { buildMaglevTable, type MaglevMember } from '../../shared/maglev.js';

interface Row {
  size: number;
  members: number;
  weights: 'equal' | 'random' | 'equal-10pct-down';
  reps: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
}

const SIZES = [65537, 655373];
const MEMBER_COUNTS = [10, 100, 1000];
const WARMUP_REPS = 5;
const MIN_REPS = 20;

function usage(msg: string): never {
  process.stderr.write(`${msg}\nusage: node dist/scripts/bench/maglev.js [--reps N] [--json FILE]\n`);
  process.exit(2);
}

function parseArgs(argv: readonly string[]): { reps: number; json: string | null } {
  let reps = MIN_REPS;
  let json: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--json') {
      const v = argv[++i];
      if (v === undefined) usage('--json needs a file name');
      json = v;
    } else if (a === '--reps') {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < MIN_REPS) usage(`--reps must be an integer >= ${MIN_REPS}`);
      reps = v;
    } else {
      usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  return { reps, json };
}

// Deterministic weights so runs are comparable (xorshift32).
function makeMembers(n: number, weights: Row['weights']): MaglevMember[] {
  let x = 0x9e3779b9;
  const next = (): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
  return Array.from({ length: n }, (_, i) => ({
    id: `backend-${i}`,
    weight: weights === 'random' ? 1 + (next() % 1000) : 50,
    available: weights === 'equal-10pct-down' ? i % 10 !== 0 : true,
  }));
}

function measure(size: number, members: readonly MaglevMember[], reps: number): { median: number; min: number; max: number } {
  for (let i = 0; i < WARMUP_REPS; i++) buildMaglevTable(members, size);
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    buildMaglevTable(members, size);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const mid = times.length >> 1;
  const median = times.length % 2 === 1 ? times[mid]! : (times[mid - 1]! + times[mid]!) / 2;
  return { median, min: times[0]!, max: times[times.length - 1]! };
}

function main(): void {
  const { reps, json } = parseArgs(process.argv.slice(2));
  const rows: Row[] = [];
  const header = ['size', 'members', 'weights', 'reps', 'median ms', 'min ms', 'max ms'];
  const lines: string[][] = [];
  for (const size of SIZES) {
    for (const weights of ['equal', 'random', 'equal-10pct-down'] as const) {
      for (const n of MEMBER_COUNTS) {
        const r = measure(size, makeMembers(n, weights), reps);
        rows.push({ size, members: n, weights, reps, medianMs: r.median, minMs: r.min, maxMs: r.max });
        lines.push([String(size), String(n), weights, String(reps), r.median.toFixed(2), r.min.toFixed(2), r.max.toFixed(2)]);
      }
    }
  }
  const widths = header.map((h, c) => Math.max(h.length, ...lines.map((l) => l[c]!.length)));
  const fmt = (cells: readonly string[]): string =>
    cells.map((cell, c) => (c < 3 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  process.stdout.write(`maglev table build, node ${process.version}\n${fmt(header)}\n`);
  for (const l of lines) process.stdout.write(`${fmt(l)}\n`);
  if (json !== null) {
    writeFileSync(json, `${JSON.stringify({ bench: 'maglev', node: process.version, warmupReps: WARMUP_REPS, rows }, null, 2)}\n`);
    process.stdout.write(`wrote ${json}\n`);
  }
}

main();
