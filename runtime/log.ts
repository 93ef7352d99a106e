// JSON-lines logging for the daemons: state changes only, never per packet. One object per line:
//   {"ts":"2026-11-29T22:50:01.123Z","daemon":"mux1","level":"info","event":"tables_installed","generation":2}
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

let daemonName = 'slbx';
let minLevel: LogLevel = 'info';
const ORDER: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

export function configureLog(name: string, level: LogLevel = 'info'): void {
  daemonName = name;
  minLevel = level;
}

/** The name and level configureLog set: a worker thread starts its own log with them (runtime/worker-pool.ts). */
export function logConfig(): { name: string; level: LogLevel } {
  return { name: daemonName, level: minLevel };
}

export function log(level: LogLevel, event: string, fields: Record<string, unknown> = {}): void {
  if (ORDER[level] < ORDER[minLevel]) return;
  const line = JSON.stringify({ ts: new Date().toISOString(), daemon: daemonName, level, event, ...fields });
  (level === 'error' || level === 'warn' ? process.stderr : process.stdout).write(`${line}\n`);
}

export const logInfo = (event: string, fields?: Record<string, unknown>) => log('info', event, fields);
export const logWarn = (event: string, fields?: Record<string, unknown>) => log('warn', event, fields);
export const logError = (event: string, fields?: Record<string, unknown>) => log('error', event, fields);
