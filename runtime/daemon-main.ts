// What every slbx daemon's main does the same way: strict arguments with --help, the config file read
// and validated (every problem listed, exit 2), JSON logs, a loopback status endpoint, SIGHUP to re-read
// the config (a bad one is refused, the old one stays), SIGTERM/SIGINT to stop in order.
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { formatConfigErrors, parseConfig, configSummary, type SlbxConfig } from '../shared/config.js';
import { formatHelp, one, parseArgs, UsageError, type OptionSpec, type ParsedArgs } from '../cli/args.js';
import { configureLog, logError, logInfo, logWarn, type LogLevel } from './log.js';
import { isLoopback, parseListen, startStatusServer, type StatusHandler } from './status-server.js';

export interface Daemon {
  start(): void;
  stop(): void;
  applyConfig(config: SlbxConfig): void;
}

export interface DaemonProgram {
  program: string;
  usage: string;
  about: string;
  /** Options beyond the common ones (config, name, status, status-any, log-level, help). */
  options: OptionSpec[];
  defaultStatus: string;
  extraHelp: string;
  /**
   * Checks the program's own options before the config is read; returns an error message to refuse
   * with (exit 2) or null. Values that need the config or the namespace are checked in create().
   */
  checkArgs?(args: ParsedArgs): string | null;
  /** Builds the daemon (not started); return a string to refuse with that message (exit 2). */
  create(args: ParsedArgs, config: SlbxConfig, name: string, configPath: string): Daemon | string;
  routes(daemon: Daemon): StatusHandler;
}

export function readConfigFile(path: string): { config: SlbxConfig } | { error: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    return { error: `cannot read ${path}: ${(e as Error).message}` };
  }
  const r = parseConfig(text, path);
  return r.ok ? { config: r.config } : { error: formatConfigErrors(r.errors, path) };
}

export async function runDaemon(p: DaemonProgram, argv: readonly string[]): Promise<number> {
  const options: OptionSpec[] = [
    { name: 'config', value: 'FILE', help: 'slbx config (YAML or JSON); SIGHUP re-reads it' },
    { name: 'name', value: 'NAME', help: `which ${p.program === 'slbx-mux' ? 'mux' : 'host'} of the config this is` },
    ...p.options,
    { name: 'status', value: 'ADDR:PORT', help: 'status endpoint (read-only JSON over HTTP)', default: p.defaultStatus },
    { name: 'status-any', help: 'allow a non-loopback status address' },
    { name: 'log-level', value: 'LEVEL', help: 'debug, info, warn or error', default: 'info' },
    { name: 'help', help: 'show this help' },
  ];
  const err = (m: string, code = 2) => { process.stderr.write(`${p.program}: ${m}\n`); return code; };
  let args: ParsedArgs;
  try { args = parseArgs(argv, options); } catch (e) {
    if (e instanceof UsageError) return err(e.message);
    throw e;
  }
  if (args.flags.has('help')) {
    process.stdout.write(formatHelp(p.usage, `${p.about}\n\nsignals: SIGHUP re-reads the config (a bad one is refused and the old one stays); SIGTERM/SIGINT stop.`, options, p.extraHelp));
    return 0;
  }
  const cfgPath = one(args, 'config');
  const name = one(args, 'name');
  if (!cfgPath || !name) return err('--config and --name are required (see --help)');
  const argError = p.checkArgs?.(args) ?? null;
  if (argError !== null) return err(argError);
  const level = one(args, 'log-level') as LogLevel;
  if (!['debug', 'info', 'warn', 'error'].includes(level)) return err('--log-level must be debug, info, warn or error');
  configureLog(name, level);
  const listen = parseListen(one(args, 'status')!);
  if (typeof listen === 'string') return err(`--status: ${listen}`);
  if (!isLoopback(listen.host) && !args.flags.has('status-any')) return err(`--status ${listen.host} is not a loopback address; add --status-any to mean it`);

  const loaded = readConfigFile(cfgPath);
  if ('error' in loaded) { process.stderr.write(`${loaded.error}\n`); return 2; }
  let daemon: Daemon | string;
  try {
    daemon = p.create(args, loaded.config, name, cfgPath);
  } catch (e) {
    return err((e as Error).message);
  }
  if (typeof daemon === 'string') return err(daemon);
  try {
    daemon.start();
  } catch (e) {
    return err(`cannot start: ${(e as Error).message}`, 1);
  }
  logInfo('config_loaded', { path: cfgPath, summary: configSummary(loaded.config) });
  let server: Server;
  try {
    server = await startStatusServer(listen, p.routes(daemon));
  } catch (e) {
    daemon.stop();
    return err(`status endpoint ${listen.host}:${listen.port}: ${(e as Error).message}`, 1);
  }
  logInfo('status_listening', { address: `${listen.host}:${listen.port}` });
  const d = daemon;
  process.on('SIGHUP', () => {
    const r = readConfigFile(cfgPath);
    if ('error' in r) { logWarn('config_refused', { path: cfgPath, errors: r.error.split('\n') }); return; }
    try {
      d.applyConfig(r.config);
      logInfo('config_reloaded', { path: cfgPath, summary: configSummary(r.config) });
    } catch (e) {
      logWarn('config_refused', { path: cfgPath, errors: [(e as Error).message] });
    }
  });
  return new Promise((resolve) => {
    const stop = (signal: string) => {
      logInfo('stopping', { signal });
      d.stop();
      server.close();
      resolve(0);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/** Runs main and exits with its code; a thrown error is logged as fatal (exit 1). */
export function exitWith(main: Promise<number>): void {
  main.then((code) => process.exit(code), (e) => {
    logError('fatal', { error: (e as Error).stack ?? String(e) });
    process.exit(1);
  });
}
