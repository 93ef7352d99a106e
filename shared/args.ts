// A small, strict argument parser shared by the slbx commands: --name value / --name=value / --flag,
// unknown options and missing values are errors that name the option and point at --help. Pure: the
// program around it (reading argv, writing help, exit codes) is runtime/command.ts.

export interface OptionSpec {
  readonly name: string;
  readonly value?: string; // placeholder shown in help; absent = a flag
  readonly help: string;
  readonly repeat?: boolean;
  readonly default?: string;
}

export class UsageError extends Error {}

export type ParsedArgs = { flags: Set<string>; values: Map<string, string[]>; positional: string[] };

export function parseArgs(argv: readonly string[], specs: readonly OptionSpec[]): ParsedArgs {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const flags = new Set<string>();
  const values = new Map<string, string[]>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!a.startsWith('--')) {
      if (a.startsWith('-') && a !== '-' && a !== '-h') throw new UsageError(`unknown option ${a} (options are long: --name; see --help)`);
      if (a === '-h') {
        flags.add('help');
        continue;
      }
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    const spec = byName.get(name);
    if (spec === undefined) throw new UsageError(`unknown option --${name} (see --help)`);
    if (spec.value === undefined) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      flags.add(name);
      continue;
    }
    let v: string | undefined;
    if (eq >= 0) v = a.slice(eq + 1);
    else {
      v = argv[i + 1];
      if (v === undefined || (v.startsWith('--') && v.length > 2)) throw new UsageError(`--${name} needs a value: --${name} ${spec.value}`);
      i++;
    }
    const list = values.get(name) ?? [];
    if (list.length > 0 && !spec.repeat) throw new UsageError(`--${name} given twice`);
    list.push(v);
    values.set(name, list);
  }
  for (const s of specs) if (s.default !== undefined && !values.has(s.name)) values.set(s.name, [s.default]);
  return { flags, values, positional };
}

export function formatHelp(usage: string, about: string, specs: readonly OptionSpec[], extra = ''): string {
  const rows = specs.map(
    (s) =>
      [
        `  --${s.name}${s.value ? ` ${s.value}` : ''}`,
        `${s.help}${s.default !== undefined ? ` (default ${s.default})` : ''}${s.repeat ? ' (repeatable)' : ''}`,
      ] as const,
  );
  const w = Math.max(...rows.map((r) => r[0].length)) + 2;
  return `usage: ${usage}\n\n${about}\n\noptions:\n${rows.map(([a, b]) => a.padEnd(w) + b).join('\n')}\n${extra ? `\n${extra}\n` : ''}`;
}

export function one(args: ParsedArgs, name: string): string | undefined {
  return args.values.get(name)?.[0];
}
