#!/usr/bin/env node
// Derives a lab config with N MUXes from a given one: the `muxes` list becomes mux1..muxN with provider
// addresses 198.18.0.11..(10+N) and 2001:db8:f::11..(10+N) (the lab's fabric); everything else, comments
// included, stays as it was. The result is validated like any config.
//
//   node dist/scripts/lab/derive-config.js --config examples/lab.yaml --muxes 4 --out runs/x/config.yaml
import { readFileSync, writeFileSync } from 'node:fs';
import { isSeq, parseDocument, YAMLSeq } from 'yaml';
import { formatConfigErrors, parseConfig } from '../../shared/config.js';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

export const LAB_MAX_MUXES = 8;

export interface LabMux {
  name: string;
  address: string;
  address6: string;
}

/** mux1..muxN on the lab fabric. */
export function labMuxes(n: number): LabMux[] {
  if (!Number.isInteger(n) || n < 1 || n > LAB_MAX_MUXES) throw new RangeError(`--muxes must be an integer 1..${LAB_MAX_MUXES}, got ${n}`);
  return Array.from({ length: n }, (_, i) => ({ name: `mux${i + 1}`, address: `198.18.0.${11 + i}`, address6: `2001:db8:f::${11 + i}` }));
}

/** The config text with its muxes replaced; { error } when the result is not a valid config. */
export function deriveConfigText(text: string, muxes: number, source = 'config'): { text: string } | { error: string } {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) return { error: `${source}: ${doc.errors[0]!.message}` };
  const list = labMuxes(muxes);
  const seq = doc.createNode(list) as YAMLSeq;
  const old = doc.get('muxes', true);
  if (isSeq(old)) seq.commentBefore = old.commentBefore;
  doc.set('muxes', seq);
  const out = doc.toString({ lineWidth: 0 });
  const r = parseConfig(out, `${source} with ${muxes} muxes`);
  if (!r.ok) return { error: formatConfigErrors(r.errors, `${source} with ${muxes} muxes`) };
  return { text: `# derived by scripts/lab/derive-config.ts from ${source}: muxes replaced by mux1..mux${muxes}\n${out}` };
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'config', value: 'FILE', help: 'the slbx config to start from' },
  { name: 'muxes', value: 'N', help: `MUXes, 1..${LAB_MAX_MUXES}` },
  { name: 'out', value: 'FILE', help: 'where to write the derived config (default: stdout)' },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'derive-config',
  usage: 'node dist/scripts/lab/derive-config.js --config FILE --muxes N [--out FILE]',
  options: OPTIONS,
  noPositional: true,
  about: 'Writes the config with N MUXes (mux1..muxN, 198.18.0.11.., 2001:db8:f::11..).',
};

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const file = one(args, 'config');
  const n = one(args, 'muxes');
  if (file === undefined || n === undefined) {
    process.stderr.write('derive-config: --config and --muxes are required\n');
    return 2;
  }
  if (!/^\d+$/.test(n) || Number(n) < 1 || Number(n) > LAB_MAX_MUXES) {
    process.stderr.write(`derive-config: --muxes must be an integer 1..${LAB_MAX_MUXES}, got ${n}\n`);
    return 2;
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    process.stderr.write(`derive-config: cannot read ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const r = deriveConfigText(text, Number(n), file);
  if ('error' in r) {
    process.stderr.write(`${r.error}\n`);
    return 1;
  }
  const out = one(args, 'out');
  if (out === undefined) process.stdout.write(r.text);
  else writeFileSync(out, r.text);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
