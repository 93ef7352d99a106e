// Instructions per packet of two builds' data planes, counted by Valgrind (callgrind), not timed: the old
// and the new dist/ root each run micro-count-run.js (micro.js's paths, the same frames) under callgrind,
// V8 single-threaded and seeded (so its compilations happen at the same points in every run), and each
// measured stretch is one callgrind part. Per path: guest instructions per packet of each build (the
// stretch minus the empty one, over the iterations; the median over the rounds), and the change.
//
// Why count: on this machine one process of micro.js differs from the next by more than a 3 % bound even
// when idle, and any other load moves the times further (docs/performance.md). An instruction count does
// not depend on the load, and runs of one build agree to a fraction of a percent (--old and --new the
// same root is the A/A check). It is not time: a path can run the same instructions slower (cache
// misses, branch mispredictions), and Valgrind's CPU model makes V8 pick its generic code paths for the
// few features it lacks (the same for both builds). It answers "did the code get longer", the question
// a refactor that should change nothing asks.
//
// --cache adds callgrind's cache simulation (--cache-sim=yes) and reports, next to the instructions,
// each path's simulated D1 misses (reads + writes) and last-level data misses per packet: a measure of
// memory traffic that, like the count, does not depend on the machine's load (a layout change that
// should save cache lines asks that question). The caches are given, not detected (valgrind reads a
// 512 MiB LL on this VM): by default this VM's EPYC (Zen 5) L1D and, as the LL, its per-core L2. As
// 256 flows per path fit in the L1D, --cache runs micro.js's 4,096 flows per path unless --frames says
// otherwise. Valgrind simulates no prefetcher: a miss counted may be one the hardware hides.
//
//   node dist/scripts/bench/micro-count.js --old OLD/dist [--new NEW/dist] [--iters N] [--rounds R] [--limit PCT] [--only REGEX]
//     [--frames N] [--cache [--d1 SIZE,ASSOC,LINE] [--ll SIZE,ASSOC,LINE]] [--json FILE]
//
// Exit 0: no path over the limit; 1: some path is (named); 2: usage; 3: valgrind is missing.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';

// This VM's EPYC (Zen 5): L1D 48 KiB 12-way, L2 1 MiB 16-way per core (the LL here: the level after
// the L1, not the shared L3), L1I 32 KiB 8-way; 64-byte lines.
const D1_DEFAULT = '49152,12,64';
const LL_DEFAULT = '1048576,16,64';
const I1 = '32768,8,64';

const OPTIONS: OptionSpec[] = [
  { name: 'old', value: 'DIR', help: "the old build's dist/ root" },
  { name: 'new', value: 'DIR', help: "the new build's dist/ root (default: the dist/ this script runs from)" },
  { name: 'iters', value: 'N', help: 'iterations of each path per round', default: '50000' },
  { name: 'rounds', value: 'R', help: 'rounds over every path (the median is taken)', default: '3' },
  {
    name: 'limit',
    value: 'PCT',
    help: 'how many more instructions per packet (new against old, in percent) a path may take',
    default: '3',
  },
  { name: 'only', value: 'REGEX', help: "count only the paths whose 'plane path' matches, e.g. 'host-out tcp4' (all are still warmed up)" },
  { name: 'frames', value: 'N', help: 'distinct flows per path, a power of two (default: 256; with --cache 4096, as micro.js)' },
  {
    name: 'cache',
    help: 'also simulate the caches (callgrind --cache-sim=yes, about 2x slower): D1 and LL data misses per packet, old and new',
  },
  { name: 'd1', value: 'SIZE,ASSOC,LINE', help: 'the simulated L1 data cache (with --cache)', default: D1_DEFAULT },
  { name: 'll', value: 'SIZE,ASSOC,LINE', help: 'the simulated last-level cache (with --cache)', default: LL_DEFAULT },
  { name: 'json', value: 'FILE', help: 'write the counts and the table as JSON' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'micro-count',
  usage:
    'node dist/scripts/bench/micro-count.js --old OLD/dist [--new NEW/dist] [--iters N] [--rounds R] [--limit PCT] [--only REGEX] [--frames N] [--cache [--d1 S,A,L] [--ll S,A,L]] [--json FILE]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Counts the instructions per packet of two builds' data-plane paths under Valgrind's callgrind (both builds at once, a few minutes each) and compares them per path; with --cache also the simulated D1 and last-level data misses per packet (load-independent memory traffic). Needs valgrind (Debian: apt-get install valgrind). Exit 0: no path over --limit percent more instructions; 1: some path is (misses are reported, not judged).",
};

const DIST = fileURLToPath(new URL('../..', import.meta.url));

export interface CountRow {
  plane: string;
  path: string;
  oldIr: number;
  newIr: number;
  /** (new - old) / old, percent */
  changePct: number;
  /** the largest distance of a round from the median, percent of the median (both builds) */
  spreadPct: number;
  /** with --cache: simulated L1 data misses per packet (reads + writes), medians over the rounds */
  oldD1?: number;
  newD1?: number;
  /** with --cache: simulated last-level data misses per packet (reads + writes) */
  oldLL?: number;
  newLL?: number;
}

interface Counted {
  paths: { plane: string; path: string }[];
  /** per path: instructions per packet of each round */
  perPacket: number[][];
  /** with --cache, per path and round: D1 and LL data misses per packet */
  d1PerPacket?: number[][];
  llPerPacket?: number[][];
}

/** One callgrind part's totals: instructions, and with the cache simulation the data misses. */
interface Part {
  ir: number;
  d1: number;
  ll: number;
}

interface CacheSim {
  d1: string;
  ll: string;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * The callgrind parts of one run, in order: out.PID.1, out.PID.2, ..., then out.PID (the last one). The
 * summary line holds one total per name of the events line (Ir alone; with the cache simulation also
 * Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw).
 */
function readParts(dir: string, base: string): Part[] {
  const files = readdirSync(dir).filter((f) => f === base || f.startsWith(`${base}.`));
  const part = (f: string) => (f === base ? Number.MAX_SAFE_INTEGER : Number(f.slice(base.length + 1)));
  files.sort((a, b) => part(a) - part(b));
  return files.map((f) => {
    const text = readFileSync(join(dir, f), 'utf8');
    const ev = /^events: (.+)$/m.exec(text);
    const m = /^summary: ([\d ]+)$/m.exec(text);
    if (ev === null || m === null) throw new Error(`micro-count: no events or summary line in ${f}`);
    const names = ev[1]!.trim().split(/\s+/);
    const totals = m[1]!.trim().split(/\s+/).map(Number);
    const at = (name: string) => {
      const i = names.indexOf(name);
      return i < 0 ? 0 : (totals[i] ?? 0);
    };
    return { ir: at('Ir'), d1: at('D1mr') + at('D1mw'), ll: at('DLmr') + at('DLmw') };
  });
}

function count(
  root: string,
  dir: string,
  tag: string,
  iters: number,
  rounds: number,
  only: string | undefined,
  frames: number,
  cache: CacheSim | null,
): Promise<Counted> {
  const base = `${tag}.out`;
  const args = [
    '--tool=callgrind',
    ...(cache === null ? [] : ['--cache-sim=yes', `--I1=${I1}`, `--D1=${cache.d1}`, `--LL=${cache.ll}`]),
    '--dump-before=uv_resident_set_memory',
    `--callgrind-out-file=${join(dir, base)}`,
    process.execPath,
    '--single-threaded',
    '--hash-seed=1',
    '--random-seed=1',
    join(DIST, 'scripts/bench/micro-count-run.js'),
    '--dist',
    root,
    '--iters',
    String(iters),
    '--rounds',
    String(rounds),
    '--frames',
    String(frames),
    ...(only === undefined ? [] : ['--only', only]),
  ];
  return new Promise((ok, fail) => {
    const child = spawn('valgrind', args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: join(DIST, '..') });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => {
      if (code !== 0) return fail(new Error(`micro-count: callgrind of ${root} exited ${code}\n${err.slice(-2000)}`));
      const head = JSON.parse(out.split('\n')[0]!) as { paths: { plane: string; path: string }[] };
      const parts = readParts(dir, base);
      const n = head.paths.length;
      // part 0: start and warm-up; part 1: the empty stretch; then rounds x paths; then the exit.
      if (parts.length < 2 + rounds * n)
        return fail(new Error(`micro-count: ${parts.length} parts from ${root}, expected ${2 + rounds * n}+`));
      const empty = parts[1]!;
      const per = (field: keyof Part) =>
        head.paths.map((_, k) => Array.from({ length: rounds }, (_, r) => (parts[2 + r * n + k]![field] - empty[field]) / iters));
      if (cache === null) ok({ paths: head.paths, perPacket: per('ir') });
      else ok({ paths: head.paths, perPacket: per('ir'), d1PerPacket: per('d1'), llPerPacket: per('ll') });
    });
  });
}

async function main(args: ParsedArgs): Promise<number> {
  const oldRoot = one(args, 'old');
  if (oldRoot === undefined) {
    process.stderr.write('micro-count: --old is required (see --help)\n');
    return 2;
  }
  const roots = { old: resolve(oldRoot), new: resolve(one(args, 'new') ?? DIST) };
  const iters = Number(one(args, 'iters') ?? '50000');
  const rounds = Number(one(args, 'rounds') ?? '3');
  const limit = Number(one(args, 'limit') ?? '3');
  if (!Number.isInteger(iters) || iters < 1000) {
    process.stderr.write('micro-count: --iters must be an integer >= 1000\n');
    return 2;
  }
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) {
    process.stderr.write('micro-count: --rounds must be an integer 1..20\n');
    return 2;
  }
  if (!Number.isFinite(limit) || limit < 0) {
    process.stderr.write('micro-count: --limit must be a percentage >= 0\n');
    return 2;
  }
  const onlyRe = one(args, 'only');
  if (onlyRe !== undefined) {
    try {
      new RegExp(onlyRe);
    } catch {
      process.stderr.write(`micro-count: --only is not a regular expression: ${onlyRe}\n`);
      return 2;
    }
  }
  const cacheOn = args.flags.has('cache');
  const geometry = /^\d+,\d+,\d+$/;
  const d1 = one(args, 'd1') ?? D1_DEFAULT;
  const ll = one(args, 'll') ?? LL_DEFAULT;
  if (!geometry.test(d1) || !geometry.test(ll)) {
    process.stderr.write('micro-count: --d1 and --ll are SIZE,ASSOC,LINE in bytes, e.g. 49152,12,64\n');
    return 2;
  }
  const cache: CacheSim | null = cacheOn ? { d1, ll } : null;
  const frames = Number(one(args, 'frames') ?? (cacheOn ? '4096' : '256'));
  if (!Number.isInteger(frames) || frames < 1 || (frames & (frames - 1)) !== 0) {
    process.stderr.write('micro-count: --frames must be a power of two\n');
    return 2;
  }
  const dir = mkdtempSync(join(tmpdir(), 'micro-count-'));
  let counted: [Counted, Counted];
  try {
    process.stderr.write(
      `micro-count: counting ${roots.old} and ${roots.new} under callgrind${cache === null ? '' : ' with the cache simulation'} (a few minutes)\n`,
    );
    counted = await Promise.all([
      count(roots.old, dir, 'old', iters, rounds, onlyRe, frames, cache),
      count(roots.new, dir, 'new', iters, rounds, onlyRe, frames, cache),
    ]);
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    if (/ENOENT/.test(msg)) {
      process.stderr.write('micro-count: valgrind not found (Debian: apt-get install valgrind)\n');
      return 3;
    }
    throw e;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const [o, n] = counted;
  const rows: CountRow[] = o.paths.map((p, k) => {
    const q = n.paths[k];
    if (q === undefined || q.path !== p.path || q.plane !== p.plane) throw new Error(`the two runs count different paths at ${k}`);
    const oldIr = median(o.perPacket[k]!);
    const newIr = median(n.perPacket[k]!);
    const spread = Math.max(
      ...o.perPacket[k]!.map((x) => Math.abs(x - oldIr) / oldIr),
      ...n.perPacket[k]!.map((x) => Math.abs(x - newIr) / newIr),
    );
    const row: CountRow = {
      plane: p.plane,
      path: p.path,
      oldIr,
      newIr,
      changePct: ((newIr - oldIr) / oldIr) * 100,
      spreadPct: spread * 100,
    };
    if (cache !== null) {
      row.oldD1 = median(o.d1PerPacket![k]!);
      row.newD1 = median(n.d1PerPacket![k]!);
      row.oldLL = median(o.llPerPacket![k]!);
      row.newLL = median(n.llPerPacket![k]!);
    }
    return row;
  });
  const sign = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(2)} %`;
  process.stdout.write(
    `instructions per packet (callgrind, node ${process.version} --single-threaded), old ${roots.old} vs new ${roots.new}: ${iters} packets per path over ${frames} flows, median of ${rounds} rounds\n`,
  );
  if (cache !== null)
    process.stdout.write(
      `simulated data misses per packet (reads + writes; no prefetcher): D1 ${cache.d1}, LL ${cache.ll} (SIZE,ASSOC,LINE in bytes)\n`,
    );
  const miss = (x: number | undefined) => (x === undefined ? '' : x.toFixed(2));
  process.stdout.write(
    cache === null
      ? `| plane | path | old | new | change | rounds' spread |\n| --- | --- | ---: | ---: | ---: | ---: |\n`
      : `| plane | path | old | new | change | rounds' spread | D1 old | D1 new | LL old | LL new |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n`,
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r.plane} | ${r.path} | ${r.oldIr.toFixed(0)} | ${r.newIr.toFixed(0)} | ${sign(r.changePct)} | ${r.spreadPct.toFixed(2)} % |${
        cache === null ? '' : ` ${miss(r.oldD1)} | ${miss(r.newD1)} | ${miss(r.oldLL)} | ${miss(r.newLL)} |`
      }\n`,
    );
  const json = one(args, 'json');
  if (json !== undefined)
    writeFileSync(
      json,
      `${JSON.stringify({ bench: 'micro-count', node: process.version, roots, iters, rounds, frames, cache, limitPct: limit, rows, old: o, new: n }, null, 2)}\n`,
    );
  const over = rows.filter((r) => r.changePct > limit);
  if (over.length > 0) {
    process.stdout.write(`MORE than ${limit} %: ${over.map((r) => `${r.plane} ${r.path} (${sign(r.changePct)})`).join('; ')}\n`);
    return 1;
  }
  process.stdout.write(`no path takes more than ${limit} % more instructions\n`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = await runCommandAsync(COMMAND, process.argv.slice(2), main);
