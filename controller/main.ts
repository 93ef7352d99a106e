#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --max-semi-space-size=1
// slbx-controller: the network controller with the SLB manager. See --help and docs/controller.md.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadOrCreateToken } from '../runtime/api-token.js';
import { formatConfigErrors, parseConfig, configSummary, type SlbxConfig } from '../shared/config.js';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../shared/args.js';
import { isMain, runCommandAsync } from '../runtime/command.js';
import { configureLog, log, logError, logInfo, logWarn, type LogLevel } from '../runtime/log.js';
import { isLoopback, parseListen, type ListenAddress } from '../runtime/status-server.js';
import { BATCH_INTERVAL_MS, ControllerState } from './state.js';
import { AgentRegistry } from './agents.js';
import { ControllerApi } from './api.js';
import { EtcdClient, parseEtcdUrl } from './etcd.js';
import { EtcdReplica, LEASE_TTL_S, replicaId } from './replica.js';
import { collectEvery, GC_INTERVAL_S } from './memory.js';

export const DEFAULT_LISTEN = '127.0.0.1:8480';

const OPTIONS: OptionSpec[] = [
  { name: 'state', value: 'FILE', help: 'the state file (JSON, replaced atomically on every change); created by --init' },
  {
    name: 'store',
    value: 'URL',
    help: 'etcd://HOST:PORT[,HOST:PORT...][/PREFIX] instead of --state: the state in etcd under PREFIX (default /slbx; one per cluster), shared by replicas, one of which leads (docs/controller.md, Replicas)',
  },
  {
    name: 'advertise',
    value: 'URL',
    help: 'with --store etcd: the URL the other replicas forward changes to (default: http:// and the first --listen address)',
  },
  { name: 'id', value: 'NAME', help: "with --store etcd: this replica's name (default HOSTNAME-PID-RANDOM)" },
  {
    name: 'lease-ttl-s',
    value: 'S',
    help: `with --store etcd: the leader's lease, 2..60 s (a dead leader is replaced after it; default ${LEASE_TTL_S})`,
  },
  {
    name: 'init',
    value: 'CONFIG',
    help: 'slbx config (YAML or JSON) that seeds a missing or empty state file; ignored when the state file has a state',
  },
  { name: 'listen', value: 'ADDR:PORT', help: `API address (repeatable: one server per address; default ${DEFAULT_LISTEN})`, repeat: true },
  {
    name: 'token-file',
    value: 'FILE',
    help: 'the API token (64 hex digits, mode 600); made when missing. Default: api-token next to the state file',
  },
  { name: 'no-token', help: 'run without authentication (anyone who reaches the API can change the state): for tests only' },
  { name: 'log-level', value: 'LEVEL', help: 'debug, info, warn or error', default: 'info' },
  {
    name: 'gc-interval-s',
    value: 'S',
    help: "a full garbage collection every S seconds, 0..3600 (0: V8's own schedule); keeps the resident memory flat (docs/controller.md, Memory)",
    default: String(GC_INTERVAL_S),
  },
  { name: 'help', help: 'show this help' },
];

const USAGE =
  'slbx-controller --state FILE [--init CONFIG.yaml] [--listen ADDR:PORT ...]\n' +
  '       slbx-controller --store etcd://HOST:PORT[,...][/PREFIX] --token-file FILE [--init CONFIG.yaml] [--listen ...] [--advertise URL]';
const ABOUT =
  'The slbx network controller. Holds the desired state (one slbx config document, a generation number\n' +
  'and the last known health) in a state file, serves the northbound API (JSON over HTTP: VIPs, rules,\n' +
  'pools, backends, probes, hosts, MUXes; every change validated as a whole and refused as a whole), and\n' +
  'pushes versioned policy to the MUXes and host agents, which watch it (a long poll they open) and ack\n' +
  'each generation they apply. Host agents report probe results here; a backend going down or coming\n' +
  'back makes a new generation for the MUXes. Logs are JSON lines on stdout, state changes only.\n\n' +
  'Changing the state, and every agent endpoint, needs the API token (Authorization: Bearer TOKEN): a\n' +
  'secret file readable only by root, made on first start; policies are signed with it. Reads do not\n' +
  'need it: listen on loopback or on a management network only.\n' +
  'signals: SIGTERM/SIGINT stop (open watches are ended; agents reconnect to the next controller);\n' +
  'SIGHUP is ignored (the state changes through the API only).';
const EXTRA =
  'examples:\n' +
  '  slbx-controller --state /var/lib/slbx/state.json --init examples/lab.yaml\n' +
  '  slbx-controller --store etcd://198.18.0.31:2379,198.18.0.32:2379,198.18.0.33:2379/slbx/lab --token-file /etc/slbx/api-token \\\n' +
  '      --listen 198.18.0.21:8480 --init examples/lab.yaml      (one of several replicas)\n' +
  '  curl -s http://127.0.0.1:8480/v1/state\n' +
  '  slbctl vip list; slbctl agents; slbctl backend drain web h1vm1\n' +
  'reference: docs/controller.md';

export interface ControllerHandle {
  api: ControllerApi;
  state: ControllerState;
  agents: AgentRegistry;
  /** With an etcd store: this replica. */
  replica: EtcdReplica | null;
  stop(): Promise<void>;
}

export interface EtcdStoreOptions {
  url: string;
  id?: string;
  /** Where the other replicas forward changes to (default: http:// and the first listen address). */
  advertise?: string;
  leaseTtlS?: number;
}

/** Opens the state and starts the API (used by main and by tests). Throws with a message on failure. */
export async function startController(o: {
  statePath: string;
  init: SlbxConfig | null;
  listen: readonly ListenAddress[];
  token?: string | null;
  /** The state in etcd instead of the state file (statePath is then ignored). */
  etcd?: EtcdStoreOptions;
}): Promise<ControllerHandle> {
  if (o.etcd !== undefined) return startReplica({ ...o, etcd: o.etcd });
  const opened = ControllerState.open(o.statePath, o.init);
  if (!opened.ok) throw new Error(opened.error);
  const state = opened.state;
  if (opened.removedTmp)
    logWarn('state_tmp_removed', { path: `${o.statePath}.tmp`, reason: 'left by an interrupted write; the state file itself is whole' });
  logInfo(opened.seeded ? 'state_seeded' : 'state_loaded', {
    path: o.statePath,
    stateId: state.stateId,
    generation: state.generation,
    summary: configSummary(state.config),
    healthEntries: Object.keys(state.health).length,
  });
  const agents = new AgentRegistry(state);
  const api = new ControllerApi(state, agents, (level, event, fields) => log(level, event, fields), o.token ?? null);
  await api.listen(o.listen);
  return { api, state, agents, replica: null, stop: () => api.close() };
}

const urlOf = (l: ListenAddress) => `http://${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port}`;

/** A replica on etcd: reads (or seeds) the state, listens, then campaigns and follows. */
async function startReplica(o: {
  init: SlbxConfig | null;
  listen: readonly ListenAddress[];
  token?: string | null;
  etcd: EtcdStoreOptions;
}): Promise<ControllerHandle> {
  const p = parseEtcdUrl(o.etcd.url);
  if (typeof p === 'string') throw new Error(`--store: ${p}`);
  const client = new EtcdClient(p.endpoints);
  const first = o.listen[0];
  const replica = new EtcdReplica(
    client,
    p.prefix,
    { id: o.etcd.id ?? replicaId(), url: o.etcd.advertise ?? (first === undefined ? '' : urlOf(first)) },
    (level, event, fields) => log(level, event, fields),
    o.etcd.leaseTtlS ?? LEASE_TTL_S,
  );
  const opened = await replica.open(o.init);
  if (!opened.ok) {
    client.close();
    throw new Error(opened.error);
  }
  const state = opened.state;
  // one etcd transaction costs a round trip and a majority's disk write: let a stream of changes share it
  state.batchIntervalMs = BATCH_INTERVAL_MS;
  logInfo(opened.seeded ? 'state_seeded' : 'state_loaded', {
    store: replica.where,
    replica: replica.id,
    stateId: state.stateId,
    generation: state.generation,
    summary: configSummary(state.config),
  });
  const agents = new AgentRegistry(state);
  const api = new ControllerApi(state, agents, (level, event, fields) => log(level, event, fields), o.token ?? null, replica);
  try {
    await api.listen(o.listen);
  } catch (e) {
    await replica.stop();
    throw e;
  }
  // the API listens before the port is known (tests listen on port 0): advertise the real one
  if (o.etcd.advertise === undefined && first !== undefined && first.port === 0) replica.me.url = urlOf({ ...first, port: api.port() });
  replica.start();
  return {
    api,
    state,
    agents,
    replica,
    stop: async () => {
      await replica.stop();
      await api.close();
    },
  };
}

export function main(argv: readonly string[]): Promise<number> {
  return runCommandAsync({ program: 'slbx-controller', usage: USAGE, about: ABOUT, options: OPTIONS, extraHelp: EXTRA }, argv, runParsed);
}

async function runParsed(args: ParsedArgs): Promise<number> {
  const err = (m: string, code = 2) => {
    process.stderr.write(`slbx-controller: ${m}\n`);
    return code;
  };
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]} (see --help)`);
  const statePath = one(args, 'state');
  const storeUrl = one(args, 'store');
  if (statePath === undefined && storeUrl === undefined)
    return err('--state FILE is required (or --store etcd://... for replicas; see --help)');
  if (statePath !== undefined && storeUrl !== undefined) return err('--state and --store are exclusive: the state is in a file or in etcd');
  let etcd: EtcdStoreOptions | undefined;
  if (storeUrl !== undefined) {
    const p = parseEtcdUrl(storeUrl);
    if (typeof p === 'string') return err(`--store: ${p}`);
    etcd = { url: storeUrl };
    const id = one(args, 'id');
    if (id !== undefined) {
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(id)) return err(`--id: ${JSON.stringify(id)} must be 1..64 letters, digits, '.', '_' or '-'`);
      etcd.id = id;
    }
    const adv = one(args, 'advertise');
    if (adv !== undefined) {
      try {
        const u = new URL(adv);
        if (u.protocol !== 'http:' || u.pathname !== '/') throw new Error('not http://ADDR:PORT');
      } catch {
        return err(`--advertise: ${JSON.stringify(adv)} must be http://ADDR:PORT, where the other replicas reach this one`);
      }
      etcd.advertise = adv;
    }
    const ttl = one(args, 'lease-ttl-s');
    if (ttl !== undefined) {
      const n = Number(ttl);
      if (!Number.isInteger(n) || n < 2 || n > 60) return err(`--lease-ttl-s: ${JSON.stringify(ttl)} must be an integer 2..60 (seconds)`);
      etcd.leaseTtlS = n;
    }
    if (!args.flags.has('no-token') && one(args, 'token-file') === undefined)
      return err(
        '--store etcd:// needs --token-file FILE (the same token file for every replica: agents check policies from any of them) or --no-token',
      );
  } else {
    for (const o of ['id', 'advertise', 'lease-ttl-s'])
      if (one(args, o) !== undefined) return err(`--${o} goes with --store etcd://... only`);
  }
  const gcText = one(args, 'gc-interval-s')!;
  const gcIntervalS = Number(gcText);
  if (!Number.isInteger(gcIntervalS) || gcIntervalS < 0 || gcIntervalS > 3600)
    return err(`--gc-interval-s: ${JSON.stringify(gcText)} must be an integer 0..3600 (seconds; 0: no collection of our own)`);
  const level = one(args, 'log-level') as LogLevel;
  if (!['debug', 'info', 'warn', 'error'].includes(level)) return err('--log-level must be debug, info, warn or error');
  const listen: ListenAddress[] = [];
  for (const text of args.values.get('listen') ?? [DEFAULT_LISTEN]) {
    const l = parseListen(text);
    if (typeof l === 'string') return err(`--listen: ${l}`);
    listen.push(l);
  }
  configureLog('controller', level);
  let init: SlbxConfig | null = null;
  const initPath = one(args, 'init');
  if (initPath !== undefined) {
    let text: string;
    try {
      text = readFileSync(initPath, 'utf8');
    } catch (e) {
      return err(`cannot read ${initPath}: ${(e as Error).message}`);
    }
    const r = parseConfig(text, initPath);
    if (!r.ok) {
      process.stderr.write(`${formatConfigErrors(r.errors, initPath)}\n`);
      return 2;
    }
    init = r.config;
  }
  let token: string | null = null;
  if (!args.flags.has('no-token')) {
    const tokenPath = one(args, 'token-file') ?? join(dirname(statePath!), 'api-token');
    const t = loadOrCreateToken(tokenPath);
    if (typeof t !== 'string') return err(t.error, 1);
    token = t;
    logInfo('api_token', { path: tokenPath });
  } else {
    logWarn('api_without_token', { note: 'anyone who reaches the API can change the state (--no-token)' });
  }
  let h: ControllerHandle;
  try {
    h = await startController({ statePath: statePath ?? '', init, listen, token, ...(etcd === undefined ? {} : { etcd }) });
  } catch (e) {
    return err((e as Error).message, 1);
  }
  collectEvery(gcIntervalS, (ms) => log('debug', 'full_gc', { ms: Math.round(ms * 10) / 10 }));
  for (const l of listen) {
    logInfo('api_listening', { address: `${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port}` });
    if (!isLoopback(l.host) && token === null)
      logWarn('api_not_loopback', { address: l.host, note: 'the API has no authentication (--no-token)' });
  }
  return new Promise((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logInfo('stopping', { signal, generation: h.state.generation });
      h.stop().then(
        () => resolve(0),
        (e) => {
          logError('stop_failed', { error: String(e) });
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    // nothing to re-read: the state file is the controller's own (and SIGHUP must not kill it)
    process.on('SIGHUP', () => logInfo('sighup_ignored', { reason: 'the state changes through the API only' }));
  });
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      logError('fatal', { error: (e as Error).stack ?? String(e) });
      process.exit(1);
    },
  );
}
