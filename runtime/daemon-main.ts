// What every slbx daemon's main does the same way: strict arguments with --help, the config file read
// and validated (every problem listed, exit 2), JSON logs, a loopback status endpoint, SIGHUP to re-read
// the config (a bad one is refused, the old one stays), SIGTERM/SIGINT to stop in order.
//
// With --controller URL the policy comes from the slbx controller instead (runtime/policy-client.ts):
// --config becomes an optional bootstrap, used until the controller answers (without it the daemon is
// created from the first policy); each new generation is validated and applied (applyPolicy), a bad
// one refused with the old one kept; GET /status gains `controller` (connection, applied generation);
// SIGHUP is ignored (the controller owns the policy).
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { formatConfigErrors, parseConfig, configSummary, type SlbxConfig } from '../shared/config.js';
import { one, type OptionSpec, type ParsedArgs } from '../shared/args.js';
import { runCommandAsync } from './command.js';
import { configureLog, logError, logInfo, logWarn, type LogLevel } from './log.js';
import { isLoopback, parseListen, startStatusServer, TextBody, type StatusHandler } from './status-server.js';
import { PROM_CONTENT_TYPE, PromWriter } from '../shared/prom-text.js';
import { writeProcessMetrics } from './process-metrics.js';
import { parseControllerUrls } from './http-json.js';
import { readToken } from './api-token.js';
import { PolicyClient, type AppliedPolicy, type HealthReporter } from './policy-client.js';
import { TEST_HOOKS_HELP, testHookGet, testHookPost, type WorkerTestHooks } from './test-hooks.js';

/** The paths whose answer sums the workers' counters (Daemon.syncWorkersAsync first). */
const WORKER_SUMMED_PATHS: ReadonlySet<string> = new Set(['/status', '/counters', '/metrics']);

export interface Daemon {
  start(): void;
  stop(): void;
  applyConfig(config: SlbxConfig): void;
  /**
   * With --controller: called once with the reporter that sends probe results to the controller
   * (runtime/policy-client.ts explains the contract). Daemons without probes leave it out.
   */
  setHealthReporter?(reporter: HealthReporter): void;
  /**
   * The graceful first step of SIGTERM/SIGINT, awaited before stop(): the MUX withdraws its BGP routes,
   * sends Cease and keeps forwarding for a short grace (docs/bgp.md). Daemons without one leave it out.
   */
  drain?(): Promise<void>;
  /** --test-hooks (runtime/test-hooks.ts): worker i exits, and the workers' thread ids. Daemons without workers leave them out. */
  exitWorkerForTest?: WorkerTestHooks['exitWorkerForTest'];
  workerThreadIdsForTest?: WorkerTestHooks['workerThreadIdsForTest'];
  /**
   * --workers: the workers' counters brought up to date without blocking the event loop, awaited before
   * GET /status, /counters and /metrics answer (BGP and BFD share the loop). Daemons without workers leave it out.
   */
  syncWorkersAsync?(): Promise<void>;
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
  /**
   * Installs a policy from the controller (--controller). Default: applyConfig(policy.config) when the
   * config changed (a generation that only changed health is acked without touching the daemon).
   * Throw to refuse it.
   */
  applyPolicy?(daemon: Daemon, policy: AppliedPolicy): void;
}

function defaultApplyPolicy(daemon: Daemon, policy: AppliedPolicy): void {
  if (policy.configChanged) daemon.applyConfig(policy.config);
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
    {
      name: 'config',
      value: 'FILE',
      help: 'slbx config (YAML or JSON); SIGHUP re-reads it. With --controller: the bootstrap config, used until the controller answers (optional)',
    },
    { name: 'name', value: 'NAME', help: `which ${p.program === 'slbx-mux' ? 'mux' : 'host'} of the config this is` },
    {
      name: 'controller',
      value: 'URL',
      help: 'take policy from the slbx controller (http://ADDR:PORT; replicas: URL,URL,... tried in turn on an error): watch it, apply and ack each generation, send status heartbeats',
    },
    {
      name: 'controller-token-file',
      value: 'FILE',
      help: "the controller's API token (mode 600): sent with every request; policies must be signed with it. Without it the controller must run with --no-token",
    },
    ...p.options,
    { name: 'status', value: 'ADDR:PORT', help: 'status endpoint (read-only JSON over HTTP)', default: p.defaultStatus },
    { name: 'status-any', help: 'allow a non-loopback status address' },
    {
      name: 'metrics',
      value: 'ADDR:PORT',
      help: 'a second listener that answers only GET /metrics (read-only counters and states, no tables), e.g. on the fabric address for a Prometheus in another namespace (docs/metrics.md); GET /metrics is also on the status endpoint',
    },
    { name: 'log-level', value: 'LEVEL', help: 'debug, info, warn or error', default: 'info' },
    { name: 'test-hooks', help: TEST_HOOKS_HELP },
    { name: 'help', help: 'show this help' },
  ];
  const about = `${p.about}\n\nsignals: SIGHUP re-reads the config (a bad one is refused and the old one stays; ignored with --controller); SIGTERM/SIGINT stop.`;
  return runCommandAsync({ program: p.program, usage: p.usage, about, options, extraHelp: p.extraHelp }, argv, (args) =>
    runParsed(p, args),
  );
}

async function runParsed(p: DaemonProgram, args: ParsedArgs): Promise<number> {
  const err = (m: string, code = 2) => {
    process.stderr.write(`${p.program}: ${m}\n`);
    return code;
  };
  const cfgPath = one(args, 'config');
  const name = one(args, 'name');
  const controllerText = one(args, 'controller');
  if (!name || (!cfgPath && controllerText === undefined))
    return err('--config and --name are required (or --controller URL and --name; see --help)');
  let controllerUrl: URL | null = null;
  let controllerUrls: URL[] = [];
  if (controllerText !== undefined) {
    const u = parseControllerUrls(controllerText);
    if (typeof u === 'string') return err(`--controller: ${u}`);
    controllerUrls = u;
    controllerUrl = u[0]!;
  }
  const argError = p.checkArgs?.(args) ?? null;
  if (argError !== null) return err(argError);
  const level = one(args, 'log-level') as LogLevel;
  if (!['debug', 'info', 'warn', 'error'].includes(level)) return err('--log-level must be debug, info, warn or error');
  configureLog(name, level);
  const listen = parseListen(one(args, 'status')!);
  if (typeof listen === 'string') return err(`--status: ${listen}`);
  if (!isLoopback(listen.host) && !args.flags.has('status-any'))
    return err(`--status ${listen.host} is not a loopback address; add --status-any to mean it`);
  const metricsText = one(args, 'metrics');
  const metricsListen = metricsText === undefined ? null : parseListen(metricsText);
  if (typeof metricsListen === 'string') return err(`--metrics: ${metricsListen}`);

  let daemon: Daemon | null = null;
  let bootstrap: SlbxConfig | null = null;
  if (cfgPath) {
    const loaded = readConfigFile(cfgPath);
    if ('error' in loaded) {
      process.stderr.write(`${loaded.error}\n`);
      return 2;
    }
    let created: Daemon | string;
    try {
      created = p.create(args, loaded.config, name, cfgPath);
    } catch (e) {
      return err((e as Error).message);
    }
    if (typeof created === 'string') return err(created);
    try {
      created.start();
    } catch (e) {
      return err(`cannot start: ${(e as Error).message}`, 1);
    }
    daemon = created;
    bootstrap = loaded.config;
    logInfo('config_loaded', {
      path: cfgPath,
      summary: configSummary(loaded.config),
      ...(controllerUrl !== null ? { role: 'bootstrap until the controller answers' } : {}),
    });
  }

  let client: PolicyClient | null = null;
  let routes: StatusHandler | null = daemon !== null ? p.routes(daemon) : null;
  const kind = p.program === 'slbx-mux' ? 'mux' : 'host';
  const handler: StatusHandler = (path, q) => {
    if (path === '/metrics') {
      // the daemon's own families (its routes answer a PromWriter), then the policy client's and the process's
      const own = routes?.('/metrics', q);
      const w = own instanceof PromWriter ? own : new PromWriter();
      const prefix = kind === 'mux' ? 'slbx_mux' : 'slbx_host';
      if (routes === null) w.add(`${prefix}_ready`, 'gauge', 'The daemon serves traffic (GET /status ready).', {}, 0);
      if (client !== null) writePolicyClientMetrics(w, prefix, client.status());
      writeProcessMetrics(w);
      return new TextBody(w.text(), PROM_CONTENT_TYPE);
    }
    if (routes === null) {
      return path === '/status'
        ? {
            daemon: kind === 'mux' ? 'mux' : 'host-agent',
            name,
            ready: false,
            waiting: 'for the first policy from the controller',
            controller: client?.status(),
          }
        : undefined;
    }
    const body = routes(path, q);
    if (path === '/status' && client !== null && typeof body === 'object' && body !== null) return { ...body, controller: client.status() };
    return body;
  };
  // --test-hooks: fault injection for tests (runtime/test-hooks.ts); without it its paths are unknown (404)
  const hooks = args.flags.has('test-hooks');
  const hooked = (f: typeof testHookGet, path: string): unknown => {
    const d = daemon;
    return hooks && d?.exitWorkerForTest !== undefined && d.workerThreadIdsForTest !== undefined
      ? f(d as WorkerTestHooks, path)
      : undefined;
  };
  const getHandler: StatusHandler = (path, q) => {
    if (path.startsWith('/test/')) return hooked(testHookGet, path);
    const d = daemon;
    if (d?.syncWorkersAsync !== undefined && WORKER_SUMMED_PATHS.has(path)) return d.syncWorkersAsync().then(() => handler(path, q));
    return handler(path, q);
  };
  let server: Server;
  try {
    // POST only with --test-hooks: without it the endpoint stays read-only (405, scenario 18)
    server = await startStatusServer(listen, getHandler, hooks ? (path) => hooked(testHookPost, path) : undefined);
  } catch (e) {
    daemon?.stop();
    return err(`status endpoint ${listen.host}:${listen.port}: ${(e as Error).message}`, 1);
  }
  logInfo('status_listening', { address: `${listen.host}:${listen.port}` });
  let metricsServer: Server | null = null;
  if (metricsListen !== null) {
    try {
      // the counters as on the status endpoint: the workers' answers awaited first (syncWorkersAsync)
      metricsServer = await startStatusServer(metricsListen, (path, q) =>
        path === '/metrics' ? (daemon?.syncWorkersAsync?.() ?? Promise.resolve()).then(() => handler(path, q)) : undefined,
      );
    } catch (e) {
      server.close();
      daemon?.stop();
      return err(`metrics endpoint ${metricsListen.host}:${metricsListen.port}: ${(e as Error).message}`, 1);
    }
    logInfo('metrics_listening', { address: `${metricsListen.host}:${metricsListen.port}` });
  }

  if (controllerUrl !== null) {
    const tokenPath = one(args, 'controller-token-file');
    let token: string | null = null;
    if (tokenPath !== undefined) {
      const t = readToken(tokenPath);
      if (typeof t !== 'string') {
        daemon?.stop();
        return err(t.error, 2);
      }
      token = t;
    } else {
      logWarn('controller_without_token', { note: 'policies are not authenticated; the controller must run with --no-token' });
    }
    const c: PolicyClient = new PolicyClient({
      url: controllerUrl,
      urls: controllerUrls,
      kind,
      name,
      bootstrap,
      token,
      apply: (policy) => {
        if (daemon === null) {
          // no --config: the first policy creates the daemon
          const d = p.create(args, policy.config, name, `the controller's policy (generation ${policy.generation})`);
          if (typeof d === 'string') throw new Error(d);
          d.start();
          daemon = d;
          routes = p.routes(d);
          d.setHealthReporter?.(c);
          logInfo('config_loaded', { from: controllerUrl!.href, generation: policy.generation, summary: configSummary(policy.config) });
          // what creating it did not take from the policy (its health, outbound NAT's ranges) goes in as
          // for any later policy; without it they waited for their next change
          (p.applyPolicy ?? defaultApplyPolicy)(d, { ...policy, configChanged: false });
          return;
        }
        (p.applyPolicy ?? defaultApplyPolicy)(daemon, policy);
      },
      // --workers: the workers' answers are awaited, never waited for on this thread (BGP and BFD share
      // its loop): /status's counters as GET /status takes them (syncWorkersAsync first), /flows a promise
      heartbeat: async () => {
        await daemon?.syncWorkersAsync?.();
        const status = handler('/status', new URLSearchParams());
        const flows = await routes?.('/flows', new URLSearchParams('limit=100'));
        return flows === undefined ? { status } : { status, flows };
      },
    });
    client = c;
    daemon?.setHealthReporter?.(c);
    c.start();
    logInfo('controller_watch', {
      url: controllerUrl.href,
      policy: bootstrap !== null ? `bootstrap ${cfgPath}` : 'none until the controller answers',
    });
  }

  process.on('SIGHUP', () => {
    if (client !== null) {
      logInfo('sighup_ignored', { reason: 'the policy comes from the controller (--controller)' });
      return;
    }
    const r = readConfigFile(cfgPath!);
    if ('error' in r) {
      logWarn('config_refused', { path: cfgPath, errors: r.error.split('\n') });
      return;
    }
    try {
      daemon!.applyConfig(r.config);
      logInfo('config_reloaded', { path: cfgPath, summary: configSummary(r.config) });
    } catch (e) {
      logWarn('config_refused', { path: cfgPath, errors: [(e as Error).message] });
    }
  });
  return new Promise((resolve) => {
    const stop = (signal: string) => {
      logInfo('stopping', { signal });
      const d = daemon;
      void Promise.resolve()
        .then(() => d?.drain?.())
        .catch((e: unknown) => logWarn('drain_failed', { error: (e as Error).message }))
        .then(() => {
          client?.stop();
          daemon?.stop();
          server.close();
          metricsServer?.close();
          resolve(0);
        });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/** The agent's side of the policy push: the generation it applied and its connection to the controller. */
function writePolicyClientMetrics(w: PromWriter, prefix: string, s: ReturnType<PolicyClient['status']>): void {
  w.add(
    `${prefix}_policy_generation`,
    'gauge',
    "The controller's policy generation this daemon applied (-1: none yet).",
    {},
    s.appliedGeneration ?? -1,
  );
  w.add(
    `${prefix}_policy_seen_generation`,
    'gauge',
    'The newest generation the controller offered (-1: none yet).',
    {},
    s.seenGeneration ?? -1,
  );
  w.add(
    `${prefix}_controller_connected`,
    'gauge',
    '1 while the watch on the controller is connected.',
    {},
    s.connection === 'connected' ? 1 : 0,
  );
  const at = s.lastPolicyAt === null ? NaN : Date.parse(s.lastPolicyAt) / 1000;
  w.add(
    `${prefix}_policy_last_applied_timestamp_seconds`,
    'gauge',
    'When the last policy arrived from the controller (Unix time; NaN: none yet).',
    {},
    at,
  );
}

/** Runs main and exits with its code; a thrown error is logged as fatal (exit 1). */
export function exitWith(main: Promise<number>): void {
  main.then(
    (code) => process.exit(code),
    (e) => {
      logError('fatal', { error: (e as Error).stack ?? String(e) });
      process.exit(1);
    },
  );
}
