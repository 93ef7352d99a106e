// slbx fuzzer: random and mutation-based inputs (seeded, so a run can be repeated) to every parser of
// untrusted bytes (packets, BGP, BFD), both data planes, the BGP session FSM, the controller's API writes
// and the config validator (scripts/fuzz/targets.ts). Every input must end accepted or refused
// under a name; an exception is a crash, a data-plane verdict that no named drop counter explains is
// an unnamed drop (targets.ts verdictOutcome), and an input slower than --hang-ms on each of three runs is
// a hang (one slow run is a GC pause or a busy machine, not the input). Such inputs are written to
// test/corpus/ (kept forever: the test suite and every fuzzer run replay them) and fail the run.
// `--seed random` draws a new seed, printed first, so that a failure can be replayed with `--seed N`.
//   node dist/scripts/fuzz/fuzz.js [--inputs N] [--seed S|random] [--target NAME]... [--hang-ms MS] [--corpus DIR] [--json FILE]
import { readFileSync, readdirSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { createHash, randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../shared/config.js';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';
import { makeTargets, UnnamedDrop, type Target } from './targets.js';
import { Rng } from './rng.js';

/** The checkout: the nearest folder above this module with a package.json (works from src and dist). */
function findRoot(): string {
  let dir = fileURLToPath(new URL('.', import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the slbx checkout (no package.json above this file)');
    dir = up;
  }
  return dir;
}
const ROOT = findRoot();

export interface TargetReport {
  target: string;
  inputs: number;
  accepted: number;
  rejections: Record<string, number>;
  crashes: number;
  /** Data-plane verdicts that no named drop counter explains (targets.ts verdictOutcome). */
  unnamed: number;
  hangs: number;
  slowestMs: number;
  seconds: number;
}

const OPTIONS: OptionSpec[] = [
  { name: 'inputs', value: 'N', help: 'inputs per target', default: '1000000' },
  {
    name: 'seed',
    value: 'S',
    help: 'seed of the generator (uint32), or `random`: a new one, printed first (replay with --seed N)',
    default: '1',
  },
  { name: 'seed-file', value: 'FILE', help: 'write the seed used to FILE (one line: seed N (replay: --seed N))' },
  { name: 'no-corpus-replay', help: 'do not replay the kept inputs (--corpus) before fuzzing' },
  { name: 'target', value: 'NAME', help: 'only this target', repeat: true },
  { name: 'hang-ms', value: 'MS', help: 'an input that takes longer on each of 3 runs is a hang', default: '250' },
  { name: 'corpus', value: 'DIR', help: 'where crashing and hanging inputs are kept', default: 'test/corpus' },
  { name: 'json', value: 'FILE', help: 'write the reports as JSON' },
  { name: 'list', help: 'list the targets' },
  { name: 'help', help: 'show this help' },
];

export function fuzzTarget(t: Target, inputs: number, seed: number, hangMs: number, corpus: string | null): TargetReport {
  const rng = new Rng((seed ^ hashName(t.name)) >>> 0);
  const r: TargetReport = {
    target: t.name,
    inputs,
    accepted: 0,
    rejections: {},
    crashes: 0,
    unnamed: 0,
    hangs: 0,
    slowestMs: 0,
    seconds: 0,
  };
  const t0 = performance.now();
  let kept = 0;
  for (let i = 0; i < inputs; i++) {
    const x = t.make(rng);
    const copy = t.raw ? (x as Uint8Array).slice() : x; // the data planes rewrite packets in place
    const s = performance.now();
    let outcome: string;
    try {
      outcome = t.run(x);
    } catch (e) {
      if (e instanceof UnnamedDrop) r.unnamed++;
      else r.crashes++;
      if (kept++ < KEEP_PER_TARGET) keep(corpus, t, copy, e instanceof UnnamedDrop ? 'unnamed' : 'crash', e);
      continue;
    }
    let ms = performance.now() - s;
    // over the limit: a hang only if it is slow every time (a GC pause or a busy machine is not)
    for (let again = 0; again < HANG_RETRIES && ms > hangMs; again++)
      ms = Math.min(ms, timeRun(t, t.raw ? (copy as Uint8Array).slice() : copy));
    if (ms > r.slowestMs) r.slowestMs = ms;
    if (ms > hangMs) {
      r.hangs++;
      if (kept++ < KEEP_PER_TARGET) keep(corpus, t, copy, 'hang', `${ms.toFixed(0)} ms, every one of ${HANG_RETRIES + 1} runs`);
    }
    if (outcome === 'accepted') r.accepted++;
    else r.rejections[outcome] = (r.rejections[outcome] ?? 0) + 1;
  }
  r.seconds = (performance.now() - t0) / 1000;
  if (kept > KEEP_PER_TARGET)
    process.stderr.write(`fuzz ${t.name}: ${kept - KEEP_PER_TARGET} more failing inputs not kept (the first ${KEEP_PER_TARGET} are)\n`);
  return r;
}

/** Failing inputs kept per target and run: a systematic bug fails every other input, and ten show it. */
const KEEP_PER_TARGET = 10;

/** Re-runs of an input that took longer than the hang limit before it counts as a hang. */
const HANG_RETRIES = 2;

function timeRun(t: Target, x: unknown): number {
  const s = performance.now();
  try {
    t.run(x);
  } catch {
    /* a crash is reported by the first run */
  }
  return performance.now() - s;
}

function hashName(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

function keep(corpus: string | null, t: Target, x: unknown, why: string, detail: unknown): void {
  const b = t.bytes(x);
  const name = `${t.name}-${why}-${createHash('sha256').update(b).digest('hex').slice(0, 12)}.bin`;
  process.stderr.write(`fuzz ${t.name}: ${why}: ${detail instanceof Error ? detail.stack : String(detail)}\n  input kept as ${name}\n`);
  if (corpus === null) return;
  mkdirSync(corpus, { recursive: true });
  writeFileSync(join(corpus, name), b);
}

export function loadTargets(): Target[] {
  const text = readFileSync(join(ROOT, 'examples/lab.yaml'), 'utf8');
  const r = parseConfig(text, 'examples/lab.yaml');
  if (!r.ok) throw new Error('examples/lab.yaml does not validate');
  return makeTargets(r.config, text);
}

/** The targets a kept input belongs to: <target>-<why>-<hash>.bin, or any-<what>.bin for every raw-bytes target. */
export function corpusTargets(file: string, targets: readonly Target[]): Target[] {
  if (file.startsWith('any-')) return targets.filter((t) => t.raw);
  const t = [...targets].sort((a, b) => b.name.length - a.name.length).find((x) => file.startsWith(`${x.name}-`));
  return t === undefined ? [] : [t];
}

/**
 * Replays every kept input of `dir` through its targets: each must end accepted or refused under a name.
 * Returns one line per failure (a crash, an unnamed drop, a file that names no target).
 */
export function replayCorpus(
  dir: string,
  targets: readonly Target[],
  all: readonly Target[],
): { files: number; runs: number; failures: string[] } {
  const out = { files: 0, runs: 0, failures: [] as string[] };
  if (!existsSync(dir)) return out;
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()) {
    const mine = corpusTargets(file, all).filter((t) => targets.includes(t));
    if (corpusTargets(file, all).length === 0) {
      out.failures.push(`${file}: names no target`);
      continue;
    }
    if (mine.length === 0) continue;
    out.files++;
    const b = new Uint8Array(readFileSync(join(dir, file)));
    for (const t of mine) {
      out.runs++;
      try {
        const outcome = t.run(t.fromBytes(b.slice()));
        if (/internal_error|unnamed/.test(outcome)) out.failures.push(`${file} (${t.name}): ${outcome}`);
      } catch (e) {
        out.failures.push(`${file} (${t.name}): ${e instanceof UnnamedDrop ? 'unnamed drop' : 'crash'}: ${(e as Error).message}`);
      }
    }
  }
  return out;
}

const COMMAND: CommandSpec = {
  program: 'fuzz',
  usage: 'node dist/scripts/fuzz/fuzz.js [options]',
  options: OPTIONS,
  about:
    'Fuzzes every parser of untrusted bytes (packets, BGP, BFD), both data planes, the BGP FSM, the API writes and the config validator.',
};

export const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const all = loadTargets();
  let targets = all;
  if (args.flags.has('list')) {
    process.stdout.write(`${targets.map((t) => t.name).join('\n')}\n`);
    return 0;
  }
  const only = args.values.get('target');
  if (only !== undefined) {
    const unknown = only.filter((n) => !targets.some((t) => t.name === n));
    if (unknown.length > 0) {
      process.stderr.write(`fuzz: no target ${unknown.join(', ')} (see --list)\n`);
      return 2;
    }
    targets = targets.filter((t) => only.includes(t.name));
  }
  const inputs = Number(one(args, 'inputs'));
  const seedText = one(args, 'seed')!;
  const seed = seedText === 'random' ? randomInt(1, 0x100000000) : Number(seedText);
  const hangMs = Number(one(args, 'hang-ms'));
  if (!Number.isInteger(inputs) || inputs < 1) {
    process.stderr.write('fuzz: --inputs must be a positive integer\n');
    return 2;
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    process.stderr.write(`fuzz: --seed must be an integer from 0 to 4294967295, or random (got ${seedText})\n`);
    return 2;
  }
  // the seed first, so that a run that dies half-way can still be replayed
  process.stdout.write(
    `fuzz: seed ${seed}${seedText === 'random' ? ' (random)' : ''}; replay with: node dist/scripts/fuzz/fuzz.js --seed ${seed} --inputs ${inputs}${only === undefined ? '' : only.map((n) => ` --target ${n}`).join('')}\n`,
  );
  const seedFile = one(args, 'seed-file');
  if (seedFile !== undefined) writeFileSync(seedFile, `seed ${seed} (replay: --seed ${seed})\n`);
  const corpus = join(ROOT, one(args, 'corpus')!);
  let corpusFailures = 0;
  if (!args.flags.has('no-corpus-replay')) {
    const c = replayCorpus(corpus, targets, all);
    corpusFailures = c.failures.length;
    for (const f of c.failures.slice(0, 20)) process.stdout.write(`FAIL corpus ${f}\n`);
    if (c.failures.length > 20) process.stdout.write(`FAIL corpus ... and ${c.failures.length - 20} more\n`);
    process.stdout.write(
      `${corpusFailures === 0 ? 'ok  ' : 'FAIL'} corpus           ${c.files} kept inputs of ${one(args, 'corpus')} replayed (${c.runs} runs), ${corpusFailures} failed\n`,
    );
  }
  const reports: TargetReport[] = [];
  for (const t of targets) {
    // the YAML target parses whole documents: a tenth of the inputs
    const n = t.name === 'config-yaml' ? Math.max(1, Math.floor(inputs / 10)) : inputs;
    const r = fuzzTarget(t, n, seed, hangMs, corpus);
    reports.push(r);
    const top = Object.entries(r.rejections)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    process.stdout.write(
      `${r.crashes + r.unnamed + r.hangs === 0 ? 'ok  ' : 'FAIL'} ${t.name.padEnd(16)} ${String(n).padStart(8)} inputs  ${r.seconds.toFixed(1).padStart(6)} s  accepted ${r.accepted}  refused ${n - r.accepted - r.crashes - r.unnamed} (${Object.keys(r.rejections).length} reasons: ${top}${Object.keys(r.rejections).length > 4 ? ', ...' : ''})  crashes ${r.crashes}  unnamed drops ${r.unnamed}  hangs ${r.hangs}  slowest ${r.slowestMs.toFixed(1)} ms\n`,
    );
  }
  const json = one(args, 'json');
  if (json !== undefined) writeFileSync(json, `${JSON.stringify({ seed, inputs, reports }, null, 2)}\n`);
  const failed = corpusFailures > 0 || reports.some((r) => r.crashes + r.unnamed + r.hangs > 0);
  if (failed)
    process.stdout.write(`fuzz: FAILED (seed ${seed}; replay with --seed ${seed}; failing inputs kept in ${one(args, 'corpus')})\n`);
  return failed ? 1 : 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
