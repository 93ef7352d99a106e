// The program micro-count.ts runs under Valgrind's callgrind: one dist/ root's data planes on micro.js's
// paths (scripts/bench/paths.ts, the same frames for every build), warmed up like micro.js (every path,
// twice), then each path for --iters iterations, --rounds times. Between two measured stretches it calls
// process.memoryUsage.rss(), whose native uv_resident_set_memory is what callgrind is told to dump
// counts before (--dump-before), so each stretch is one callgrind part: part 1 is the start and the
// warm-up, part 2 an empty stretch (the cost of the boundary itself), then one part per (round, path) in
// the order of the "paths" line this program prints first.
//
//   valgrind --tool=callgrind --dump-before=uv_resident_set_memory ... \
//     node --single-threaded dist/scripts/bench/micro-count-run.js --dist ROOT [--iters N] [--rounds R] [--frames N] [--warm W] [--only REGEX]
//
// Without Valgrind it runs the same loops and counts nothing (a quick check of the harness).
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { forwardVerdict, loadPlanes, pathCases } from './paths.js';

type ConfigModule = typeof import('../../shared/config.js');

const OPTIONS: OptionSpec[] = [
  { name: 'dist', value: 'DIR', help: "the build's dist/ root whose data planes run (default: this one)" },
  { name: 'config', value: 'FILE', help: 'the config the tables are built from', default: 'examples/lab.yaml' },
  { name: 'iters', value: 'N', help: 'iterations of each path per round', default: '100000' },
  { name: 'rounds', value: 'R', help: 'rounds over every path', default: '2' },
  { name: 'frames', value: 'N', help: 'distinct flows per path, a power of two (micro.js uses 4096)', default: '256' },
  { name: 'warm', value: 'W', help: 'warm-up iterations of each path, twice over every path', default: '20000' },
  { name: 'only', value: 'REGEX', help: "measure only the paths whose 'plane path' matches (every path is still warmed up)" },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'micro-count-run',
  usage:
    'node --single-threaded dist/scripts/bench/micro-count-run.js [--dist DIR] [--iters N] [--rounds R] [--frames N] [--warm W] [--only REGEX]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Runs micro.js's data-plane paths of one build, marking each measured stretch with a call callgrind dumps before (micro-count.js runs it; see its --help).",
};

const DIST = fileURLToPath(new URL('../..', import.meta.url));

function positive(args: ParsedArgs, name: string, dflt: number): number {
  const v = Number(one(args, name) ?? String(dflt));
  if (!Number.isInteger(v) || v < 1) throw new Error(`micro-count-run: --${name} must be a positive integer`);
  return v;
}

let sink = 0;
function loop(fn: (i: number) => number, iters: number, start: number): void {
  let s = 0;
  for (let i = 0; i < iters; i++) s += fn(start + i);
  sink += s;
}

async function main(args: ParsedArgs): Promise<number> {
  const root = resolve(one(args, 'dist') ?? DIST);
  const iters = positive(args, 'iters', 100_000);
  const rounds = positive(args, 'rounds', 2);
  const warm = positive(args, 'warm', 20_000);
  const cfgFile = resolve(DIST, '..', one(args, 'config') ?? 'examples/lab.yaml');
  const configModule = (await import(pathToFileURL(join(root, 'shared/config.js')).href)) as ConfigModule;
  const parsed = configModule.parseConfig(readFileSync(cfgFile, 'utf8'), cfgFile);
  if (!parsed.ok) {
    process.stderr.write(`micro-count-run: ${root} refuses ${cfgFile}:\n${configModule.formatConfigErrors(parsed.errors, cfgFile)}\n`);
    return 1;
  }
  const planes = await loadPlanes(root);
  const cases = pathCases(parsed.config, planes, positive(args, 'frames', 256));
  for (const c of cases) {
    const v = c.step(0);
    if (v !== forwardVerdict(c, planes)) throw new Error(`${c.plane} ${c.path}: verdict ${v}, expected a forward`);
  }
  const only = one(args, 'only');
  const re = only === undefined ? null : new RegExp(only);
  const measured = re === null ? cases : cases.filter((c) => re.test(`${c.plane} ${c.path}`));
  if (measured.length === 0) throw new Error(`micro-count-run: no path matches --only ${only}`);
  process.stdout.write(`${JSON.stringify({ paths: measured.map((c) => ({ plane: c.plane, path: c.path })), iters, rounds })}\n`);
  for (let w = 0; w < 2; w++) for (const c of cases) loop(c.step, warm, 1);
  const mark = process.memoryUsage.rss;
  mark(); // end of part 1: start and warm-up
  mark(); // end of part 2: the boundary alone
  let at = 1 << 16;
  for (let r = 0; r < rounds; r++)
    for (const c of measured) {
      loop(c.step, iters, at);
      at += iters;
      mark();
    }
  process.stdout.write(`${JSON.stringify({ done: true, sink: sink % 2 })}\n`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = await runCommandAsync(COMMAND, process.argv.slice(2), main);
