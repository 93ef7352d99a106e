// The preamble every slbx program shares: its arguments parsed strictly (shared/args.ts), --help
// printed to stdout (exit 0), a usage error printed as "PROGRAM: message" to stderr (exit 2), and the
// check whether a module is the program node was started with.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { formatHelp, parseArgs, UsageError, type OptionSpec, type ParsedArgs } from '../shared/args.js';

export interface CommandSpec {
  /** The prefix of every error message ("slbx-replay: --plane must be ..."). */
  readonly program: string;
  /** The help's usage line (after "usage: "). */
  readonly usage: string;
  /** The help's paragraph under the usage line. */
  readonly about: string;
  readonly options: readonly OptionSpec[];
  /** Text after the options in --help. */
  readonly extraHelp?: string;
  /** Written after the message of a usage error, e.g. " (see --help)". */
  readonly errorSuffix?: string;
  /** Refuses any positional argument ("unexpected argument X"), even next to --help. */
  readonly noPositional?: boolean;
}

/** The --help text of a command. */
export function commandHelp(spec: CommandSpec): string {
  return formatHelp(spec.usage, spec.about, spec.options, spec.extraHelp);
}

function refuse(spec: CommandSpec, e: UsageError): number {
  process.stderr.write(`${spec.program}: ${e.message}${spec.errorSuffix ?? ''}\n`);
  return 2;
}

/**
 * Parses argv against spec.options: the parsed arguments, or the exit code when there is nothing more
 * to do (--help or -h printed the help: 0; a bad argument printed "PROGRAM: message": 2).
 */
function parseCommand(spec: CommandSpec, argv: readonly string[]): ParsedArgs | number {
  let args: ParsedArgs;
  try {
    args = parseArgs(argv, spec.options);
    if (spec.noPositional && args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  } catch (e) {
    if (e instanceof UsageError) return refuse(spec, e);
    throw e;
  }
  if (args.flags.has('help')) {
    process.stdout.write(commandHelp(spec));
    return 0;
  }
  return args;
}

/**
 * A program with a synchronous body: --help (or -h) prints the help and returns 0; a bad argument
 * prints "PROGRAM: message" and returns 2. Otherwise returns what body returns; body refuses an
 * argument by throwing UsageError (the same message, exit code 2); any other error goes through.
 */
export function runCommand(spec: CommandSpec, argv: readonly string[], body: (args: ParsedArgs) => number): number {
  const args = parseCommand(spec, argv);
  if (typeof args === 'number') return args;
  try {
    return body(args);
  } catch (e) {
    if (e instanceof UsageError) return refuse(spec, e);
    throw e;
  }
}

/** runCommand for a program whose body is asynchronous (a daemon, a traffic generator). */
export async function runCommandAsync(
  spec: CommandSpec,
  argv: readonly string[],
  body: (args: ParsedArgs) => Promise<number>,
): Promise<number> {
  const args = parseCommand(spec, argv);
  if (typeof args === 'number') return args;
  try {
    return await body(args);
  } catch (e) {
    if (e instanceof UsageError) return refuse(spec, e);
    throw e;
  }
}

/** True when the module at `url` is the program node was started with (also through a bin symlink). */
export function isMain(url: string): boolean {
  const argv1 = process.argv[1];
  if (argv1 === undefined) return false;
  try {
    return realpathSync(argv1) === realpathSync(fileURLToPath(url));
  } catch {
    return false;
  }
}
