// The daemons' side of the controller (slbx-mux and slbx-host-agent with --controller URL).
//
// What it does, in the daemon's process, never crashing it:
//   * watches the policy: GET /v1/agents/{kind}/{name}/policy?after=GEN&applied=GEN&state=ID&waitS=25,
//     a long poll the agent opens (so the controller needs no way into the agents' namespaces, and a
//     restarted controller is simply reconnected to); controller down or answering garbage: the
//     current policy stays in force and the watch is retried with back-off (250 ms doubling to 5 s);
//   * takes a stream of generations as its newest one, a few times a second: after a policy the next
//     watch waits until POLICY_MIN_INTERVAL_MS after it arrived (a change after a quiet spell is taken
//     at once), so 50 changes a second cost a MUX about four table builds a second, not fifty;
//   * checks each new policy with validateConfig; a bad one is refused (the previous one stays), the
//     refusal logged and acked {generation, ok: false, error}; a good one is handed to `apply`, and
//     acked {generation, ok: true, applyMs} (or ok: false with the error `apply` threw);
//   * posts a status heartbeat every 2 s (POST .../status with what `heartbeat()` returns: the
//     daemon's /status, and a sample of flows on a MUX) so slbctl can show counters, flows and health;
//   * sends the host agent's probe results (below).
// A failing ack, heartbeat or health report is logged at warn once when it starts failing, at info
// once when it works again (with how many attempts failed and for how long), and at debug in between:
// one outage, two lines, whatever the retry rate.
//
// ---- For the host agent's prober: the health interface -------------------------------------------
//
//   import type { HealthReporter, ProbeResult } from '../runtime/policy-client.js';
//
//   interface ProbeResult { nic: string; probe: string; state: 'up' | 'down' | 'unknown'; detail?: string }
//   interface HealthReporter { reportHealth(results: readonly ProbeResult[]): void }
//
//   reportHealth(results) takes the FULL current set of this host's results (every (nic, probe) the
//   host probes, one entry each), not a delta: the controller replaces what this host reported before
//   with it (an entry left out is forgotten, i.e. unknown, which counts as up). Call it whenever a
//   state changes; calling it more often is cheap (the latest set is sent, older unsent sets are
//   dropped). It returns at once and never throws; sending, retrying after failures, resending every
//   10 s and after the controller comes back are the client's job. `detail` is free text for people
//   (`http 503`, `timeout`); at most 500 characters are kept. When a (nic, probe) is reported for
//   several address families, report it down if any family is down.
//
//   How the host agent gets one: runtime/daemon-main.ts creates the client when the daemon runs with
//   --controller and, once the daemon exists, calls `daemon.setHealthReporter?.(reporter)` (optional
//   method of the Daemon interface there). Without --controller it is never called: health then
//   stays local to the host agent. The MUX's side needs nothing: each policy carries the health
//   (`health: {"nic/probe": "up" | "down"}`), and the MUX is given a HealthView built from it
//   (isHealthy(nic, probe) = health[`${nic}/${probe}`] !== 'down').
// ------------------------------------------------------------------------------------------------
import { Agent } from 'node:http';
import { formatConfigErrors, plainConfig, validateConfig, type SlbxConfig } from '../shared/config.js';
import { joinUrl, requestJson, type JsonResponse } from './http-json.js';
import { bearer, signatureValid, SIGNATURE_HEADER } from './api-token.js';
import { log as defaultLog, type LogLevel } from './log.js';

export interface ProbeResult {
  nic: string;
  probe: string;
  state: 'up' | 'down' | 'unknown';
  detail?: string;
}

export interface HealthReporter {
  reportHealth(results: readonly ProbeResult[]): void;
}

/** The MUX's view of health (structurally mux/tables.ts HealthView). */
export interface PolicyHealthView {
  isHealthy(nic: string, probe: string): boolean;
}

/** A policy the client checked and hands to the daemon. */
export interface AppliedPolicy {
  stateId: string;
  generation: number;
  /** Validated; the same object as the previous policy's when the config did not change. */
  config: SlbxConfig;
  health: Readonly<Record<string, 'up' | 'down'>>;
  healthView: PolicyHealthView;
  /** The config differs from the one in force (the last applied, or the bootstrap config). */
  configChanged: boolean;
  /** What is down differs from the health in force. */
  healthChanged: boolean;
  /** Outbound NAT: every host's frontend port ranges (docs/outbound.md), [] when the state has none. */
  snat: readonly PolicySnatRange[];
  /** The ranges differ from those in force (a demand or release changes them alone). */
  snatChanged: boolean;
}

/** One outbound NAT range of the policy (controller/snat-alloc.ts SnatRange): ports first..last of ip, held by host's nic. */
export interface PolicySnatRange {
  readonly ip: string;
  readonly first: number;
  readonly last: number;
  readonly host: string;
  readonly nic: string;
}

/** The policy's `snat` list checked for shape (the tables check the values), or why it is malformed. */
export function policySnatRanges(v: unknown): PolicySnatRange[] | string {
  if (v === undefined) return [];
  if (!Array.isArray(v)) return 'snat must be a list of {ip, first, last, host, nic}';
  const out: PolicySnatRange[] = [];
  for (const [i, r] of v.entries()) {
    const o = r as Record<string, unknown> | null;
    if (
      o === null ||
      typeof o !== 'object' ||
      typeof o.ip !== 'string' ||
      typeof o.host !== 'string' ||
      typeof o.nic !== 'string' ||
      !Number.isInteger(o.first) ||
      !Number.isInteger(o.last)
    )
      return `snat[${i}] must be {ip, first, last, host, nic} (got ${JSON.stringify(r)})`;
    out.push({ ip: o.ip, first: o.first as number, last: o.last as number, host: o.host, nic: o.nic });
  }
  return out;
}

export type AgentKindName = 'mux' | 'host';

export interface PolicyClientOptions {
  url: URL;
  /**
   * Every controller replica (docs/controller.md, Replicas), `url` first: on an error the client
   * moves to the next one (its policy stays in force meanwhile). Absent: `url` alone.
   */
  urls?: readonly URL[];
  kind: AgentKindName;
  name: string;
  /** Installs a policy; throw to refuse it (the previous one must then stay in force). */
  apply(policy: AppliedPolicy): void;
  /** The body of the status heartbeat (called every heartbeatMs; a promise is awaited). */
  heartbeat?(): unknown;
  /** The config in force before the controller answers (the daemon's --config), if any. */
  bootstrap?: SlbxConfig | null;
  waitS?: number;
  /**
   * The least time between two policies taken (POLICY_MIN_INTERVAL_MS): after a policy the next watch
   * waits until this long after it arrived, so a stream of generations is taken as its newest one a few
   * times a second rather than each in turn. A change after a quiet spell is taken at once.
   */
  minPolicyIntervalMs?: number;
  heartbeatMs?: number;
  healthResendMs?: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** Timeout of acks, heartbeats and health reports. */
  requestTimeoutMs?: number;
  /**
   * The controller's API token (runtime/api-token.ts): sent with every request, and a policy is taken
   * only with a good signature under it. Null or absent: no authentication either way.
   */
  token?: string | null;
  log?(level: LogLevel, event: string, fields: Record<string, unknown>): void;
}

export type ConnectionState = 'connecting' | 'connected' | 'unreachable' | 'stopped';

export interface PolicyClientStatus {
  /** The controller (replica) the client talks to now. */
  url: string;
  /** Every replica it may move to (the --controller list). */
  urls: string[];
  connection: ConnectionState;
  /** When the connection state last changed. */
  since: string;
  stateId: string | null;
  appliedGeneration: number | null;
  /** The newest generation received (applied or refused). */
  seenGeneration: number | null;
  lastPolicyAt: string | null;
  /** Why the controller is unreachable (while it is). */
  lastError: string | null;
  /** The last policy refused, while no newer one was applied. */
  lastRefused: { generation: number; error: string; at: string } | null;
  health: { results: number; sentAt: string | null; pending: boolean } | null;
  /** Whether requests carry the API token and policies must be signed with it. */
  authenticated: boolean;
  policiesUnsigned: number;
}

export const POLICY_WAIT_S = 25;
export const POLICY_MIN_INTERVAL_MS = 250;
export const HEARTBEAT_MS = 2000;
export const HEALTH_RESEND_MS = 10_000;
export const BACKOFF_MIN_MS = 250;
export const BACKOFF_MAX_MS = 5000;

/** The requests whose failures are logged once per outage (see the top of this file). */
export type ControlRequest = 'ack' | 'heartbeat' | 'health';
const FAILED_EVENT: Readonly<Record<ControlRequest, string>> = {
  ack: 'ack_failed',
  heartbeat: 'heartbeat_failed',
  health: 'health_send_failed',
};
const RECOVERED_EVENT: Readonly<Record<ControlRequest, string>> = {
  ack: 'ack_recovered',
  heartbeat: 'heartbeat_recovered',
  health: 'health_send_recovered',
};

interface Outage {
  /** When the first failure of the current outage happened, or null while it works. */
  sinceMs: number | null;
  failures: number;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function answerError(r: JsonResponse): string {
  const b = r.body as { error?: unknown } | null;
  return `controller answered ${r.status}${b !== null && typeof b === 'object' && typeof b.error === 'string' ? `: ${b.error}` : ''}`;
}

/** Two configs with the same key are the same normalized config. */
function configKeyOf(config: SlbxConfig): string {
  return JSON.stringify(plainConfig(config));
}

function downKey(health: Readonly<Record<string, string>>): string {
  return Object.keys(health)
    .filter((k) => health[k] === 'down')
    .sort()
    .join(',');
}

export class PolicyClient implements HealthReporter {
  private readonly o: PolicyClientOptions;
  private readonly log: NonNullable<PolicyClientOptions['log']>;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 4 });
  private readonly abort = new AbortController();
  private readonly base: string;
  private stopped = false;
  /** The replicas, and which one the client talks to now. */
  private readonly urls: readonly URL[];
  private urlIndex = 0;
  /** Policies refused because their signature did not check (a forged or foreign controller). */
  policiesUnsigned = 0;
  private started = false;
  private connection: ConnectionState = 'connecting';
  private connectionSince = Date.now();
  private lastError: string | null = null;
  private stateId: string | null = null;
  private seenGeneration: number | null = null;
  private appliedGeneration: number | null = null;
  private lastPolicyAtMs: number | null = null;
  private lastRefused: PolicyClientStatus['lastRefused'] = null;
  /** What is in force: the config (and its serialized form, to compare) and the down set. */
  private config: SlbxConfig | null;
  private configKey: string | null;
  private healthKey = '';
  private snatKey = '[]';
  private unsentAck: Record<string, unknown> | null = null;
  private timers: NodeJS.Timeout[] = [];
  private heartbeatBusy = false;
  private heartbeatAtMs = 0;
  private heartbeatQueued = false;
  /** The connection state the last heartbeat reported. */
  private heartbeatConnection: ConnectionState | null = null;
  // health
  private healthSet: ProbeResult[] | null = null;
  private healthDirty = false;
  private healthBusy = false;
  private healthSentAtMs: number | null = null;
  private healthRetry: NodeJS.Timeout | null = null;
  private healthBackoffMs = 0;
  private readonly outages: Record<ControlRequest, Outage> = {
    ack: { sinceMs: null, failures: 0 },
    heartbeat: { sinceMs: null, failures: 0 },
    health: { sinceMs: null, failures: 0 },
  };

  constructor(o: PolicyClientOptions) {
    this.o = o;
    this.urls = o.urls !== undefined && o.urls.length > 0 ? o.urls : [o.url];
    this.log = o.log ?? ((level, event, fields) => defaultLog(level, event, fields));
    this.base = `/v1/agents/${o.kind}/${encodeURIComponent(o.name)}`;
    this.config = o.bootstrap ?? null;
    this.configKey = this.config === null ? null : configKeyOf(this.config);
  }

  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    void this.watchLoop();
    const hb = setInterval(() => void this.sendHeartbeat(), this.o.heartbeatMs ?? HEARTBEAT_MS);
    hb.unref();
    const hr = setInterval(() => {
      if (this.healthSet !== null) {
        this.healthDirty = true;
        void this.sendHealth();
      }
    }, this.o.healthResendMs ?? HEALTH_RESEND_MS);
    hr.unref();
    this.timers.push(hb, hr);
  }

  /** Stops watching, heartbeats and health reports; in-flight requests are aborted. Idempotent. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.setConnection('stopped', null);
    for (const t of this.timers) clearInterval(t);
    if (this.healthRetry !== null) clearTimeout(this.healthRetry);
    this.abort.abort();
    this.agent.destroy();
  }

  status(): PolicyClientStatus {
    return {
      url: this.current.href,
      urls: this.urls.map((u) => u.href),
      connection: this.connection,
      since: iso(this.connectionSince)!,
      stateId: this.stateId,
      appliedGeneration: this.appliedGeneration,
      seenGeneration: this.seenGeneration,
      lastPolicyAt: iso(this.lastPolicyAtMs),
      lastError: this.lastError,
      lastRefused: this.lastRefused,
      health:
        this.healthSet === null ? null : { results: this.healthSet.length, sentAt: iso(this.healthSentAtMs), pending: this.healthDirty },
      authenticated: (this.o.token ?? null) !== null,
      policiesUnsigned: this.policiesUnsigned,
    };
  }

  /** See the top of this file. */
  reportHealth(results: readonly ProbeResult[]): void {
    try {
      if (this.o.kind !== 'host') return;
      this.healthSet = results.map((r) => {
        const x: ProbeResult = { nic: String(r.nic), probe: String(r.probe), state: r.state };
        if (r.detail !== undefined) x.detail = String(r.detail).slice(0, 500);
        return x;
      });
      this.healthDirty = true;
      void this.sendHealth();
    } catch (e) {
      this.log('warn', 'health_report_failed', { error: errorText(e) });
    }
  }

  // -------------------------------------------------------------------------------------------

  /** The replica requests go to now. */
  private get current(): URL {
    return this.urls[this.urlIndex % this.urls.length]!;
  }

  /** After an error: the next replica (watch, acks, heartbeats and health reports all follow). */
  private moveOn(error: string): void {
    if (this.urls.length < 2) return;
    const from = this.current.href;
    this.urlIndex = (this.urlIndex + 1) % this.urls.length;
    this.log('info', 'controller_failover', { from, to: this.current.href, error });
  }

  private url(path: string, query: Record<string, string | number | null> = {}): URL {
    const u = joinUrl(this.current, `${this.base}${path}`);
    for (const [k, v] of Object.entries(query)) if (v !== null) u.searchParams.set(k, String(v));
    return u;
  }

  private setConnection(c: ConnectionState, error: string | null): void {
    const was = this.connection;
    this.lastError = error;
    if (c === was) return;
    this.connection = c;
    this.connectionSince = Date.now();
    if (c === 'connected') {
      this.log('info', 'controller_connected', { url: this.current.href, generation: this.appliedGeneration });
      // it may have restarted or lost us: tell it again what it may have missed
      if (this.healthSet !== null) {
        this.healthDirty = true;
        void this.sendHealth();
      }
      if (this.unsentAck !== null) void this.sendAck(this.unsentAck);
      void this.sendHeartbeat();
    } else if (c === 'unreachable') {
      this.log('warn', 'controller_unreachable', {
        url: this.current.href,
        error,
        policy: this.appliedGeneration === null ? 'bootstrap config' : `generation ${this.appliedGeneration}`,
      });
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.stopped) {
        resolve();
        return;
      }
      const t = setTimeout(() => {
        this.abort.signal.removeEventListener('abort', done);
        resolve();
      }, ms);
      const done = () => {
        clearTimeout(t);
        resolve();
      };
      this.abort.signal.addEventListener('abort', done, { once: true });
    });
  }

  private async watchLoop(): Promise<void> {
    const min = this.o.backoffMinMs ?? BACKOFF_MIN_MS;
    const max = this.o.backoffMaxMs ?? BACKOFF_MAX_MS;
    const waitS = this.o.waitS ?? POLICY_WAIT_S;
    const pace = this.o.minPolicyIntervalMs ?? POLICY_MIN_INTERVAL_MS;
    let backoff = min;
    while (!this.stopped) {
      try {
        // a policy just taken: the next one no sooner than `pace` after it (what came meanwhile is
        // taken as the newest generation, in one apply)
        const early = this.lastPolicyAtMs === null ? 0 : this.lastPolicyAtMs + pace - Date.now();
        if (early > 0) await this.sleep(early);
        if (this.stopped) break;
        // until a watch has been answered, ask without waiting: being connected is known at once
        const wait = this.connection === 'connected' ? waitS : 0;
        const r = await requestJson(
          this.url('/policy', {
            after: this.seenGeneration,
            applied: this.appliedGeneration,
            state: this.stateId,
            waitS: wait,
          }),
          { timeoutMs: (wait + 15) * 1000, agent: this.agent, signal: this.abort.signal, headers: this.authHeaders() },
        );
        if (this.stopped) break;
        if (r.status !== 200 && r.status !== 204) throw new Error(answerError(r));
        this.setConnection('connected', null);
        backoff = min;
        if (r.status === 200) {
          const token = this.o.token ?? null;
          if (token !== null && !signatureValid(token, r.text, r.headers[SIGNATURE_HEADER])) {
            // not from the controller we share the token with: never applied
            this.policiesUnsigned++;
            throw new Error('a policy without a valid signature was refused (is this the controller, with the same API token?)');
          }
          this.onPolicy(r.body);
        }
      } catch (e) {
        if (this.stopped) break;
        this.setConnection('unreachable', errorText(e));
        this.moveOn(errorText(e));
        // jitter keeps a fleet of agents from reconnecting in lock step
        await this.sleep(Math.round(backoff * (0.75 + Math.random() * 0.5)));
        backoff = Math.min(max, backoff * 2);
      }
    }
  }

  private onPolicy(body: unknown): void {
    const b = body as { stateId?: unknown; generation?: unknown; config?: unknown; health?: unknown; snat?: unknown } | null;
    if (
      b === null ||
      typeof b !== 'object' ||
      typeof b.stateId !== 'string' ||
      !Number.isSafeInteger(b.generation) ||
      typeof b.health !== 'object' ||
      b.health === null ||
      Array.isArray(b.health)
    ) {
      throw new Error('the controller sent a malformed policy (expected {stateId, generation, config, health})');
    }
    const generation = b.generation as number;
    const stateId = b.stateId;
    if (stateId === this.stateId && this.seenGeneration !== null && generation <= this.seenGeneration) return;
    this.stateId = stateId;
    this.seenGeneration = generation;
    this.lastPolicyAtMs = Date.now();
    const health: Record<string, 'up' | 'down'> = {};
    for (const [k, v] of Object.entries(b.health as Record<string, unknown>)) if (v === 'up' || v === 'down') health[k] = v;
    const v = validateConfig(b.config, 'policy');
    if (!v.ok) {
      this.refuse(generation, `the policy's config is not valid:\n${formatConfigErrors(v.errors, `policy generation ${generation}`)}`);
      return;
    }
    const snat = policySnatRanges(b.snat);
    if (typeof snat === 'string') {
      this.refuse(generation, `the policy's ${snat}`);
      return;
    }
    const sk = JSON.stringify(snat);
    const key = configKeyOf(v.config);
    const configChanged = key !== this.configKey;
    const hk = downKey(health);
    const healthChanged = hk !== this.healthKey;
    const config = configChanged || this.config === null ? v.config : this.config;
    const policy: AppliedPolicy = {
      stateId,
      generation,
      config,
      health,
      healthView: { isHealthy: (nic, probe) => health[`${nic}/${probe}`] !== 'down' },
      configChanged,
      healthChanged,
      snat,
      snatChanged: sk !== this.snatKey,
    };
    const t0 = process.hrtime.bigint();
    try {
      this.o.apply(policy);
    } catch (e) {
      this.refuse(generation, `could not apply it: ${errorText(e)}`);
      return;
    }
    const applyMs = Math.round(Number(process.hrtime.bigint() - t0) / 1e4) / 100;
    this.config = config;
    this.configKey = key;
    this.healthKey = hk;
    this.snatKey = sk;
    const first = this.appliedGeneration === null;
    this.appliedGeneration = generation;
    this.lastRefused = null;
    this.log('info', 'policy_applied', {
      generation,
      stateId,
      configChanged,
      healthChanged,
      down: hk === '' ? [] : hk.split(','),
      applyMs,
    });
    void this.sendAck({ generation, ok: true, applyMs, stateId });
    // the status with the new generation soon (the daemon's own, once the first policy made it), but
    // not once per policy under a stream of them
    if (
      first ||
      this.heartbeatConnection !== this.connection ||
      Date.now() - this.heartbeatAtMs >= (this.o.heartbeatMs ?? HEARTBEAT_MS) / 2
    )
      void this.sendHeartbeat(true);
  }

  private refuse(generation: number, error: string): void {
    this.lastRefused = { generation, error, at: new Date().toISOString() };
    this.log('warn', 'policy_refused', {
      generation,
      error: error.split('\n'),
      inForce: this.appliedGeneration === null ? 'bootstrap config' : `generation ${this.appliedGeneration}`,
    });
    void this.sendAck({ generation, ok: false, error, stateId: this.stateId });
  }

  private async post(path: string, body: unknown): Promise<JsonResponse> {
    return requestJson(this.url(path), {
      method: 'POST',
      body,
      agent: this.agent,
      signal: this.abort.signal,
      timeoutMs: this.o.requestTimeoutMs ?? 5000,
      headers: this.authHeaders(),
    });
  }

  private authHeaders(): Record<string, string> {
    const t = this.o.token ?? null;
    return t === null ? {} : bearer(t);
  }

  /** A control request failed: warn on the first failure of an outage, debug on the others. */
  private requestFailed(what: ControlRequest, fields: Record<string, unknown>): void {
    if (this.stopped) return;
    const o = this.outages[what];
    o.failures++;
    if (o.sinceMs !== null) {
      this.log('debug', FAILED_EVENT[what], fields);
      return;
    }
    o.sinceMs = Date.now();
    this.log('warn', FAILED_EVENT[what], { ...fields, note: 'retried; logged again when it works' });
  }

  /** A control request worked: after an outage, say so once at info. */
  private requestWorked(what: ControlRequest): void {
    const o = this.outages[what];
    if (o.sinceMs === null) return;
    this.log('info', RECOVERED_EVENT[what], { failures: o.failures, outageMs: Date.now() - o.sinceMs });
    o.sinceMs = null;
    o.failures = 0;
  }

  private async sendAck(ack: Record<string, unknown>): Promise<void> {
    this.unsentAck = ack;
    try {
      const r = await this.post('/ack', ack);
      if (r.status !== 200) throw new Error(answerError(r));
      if (this.unsentAck === ack) this.unsentAck = null;
      this.requestWorked('ack');
    } catch (e) {
      this.requestFailed('ack', { generation: ack['generation'], error: errorText(e) });
    }
  }

  /** `queue`: when one is under way, send another after it (its status may be older than what is asked for). */
  private async sendHeartbeat(queue = false): Promise<void> {
    if (this.stopped || this.o.heartbeat === undefined) return;
    if (this.heartbeatBusy) {
      if (queue) this.heartbeatQueued = true;
      return;
    }
    this.heartbeatBusy = true;
    this.heartbeatQueued = false;
    this.heartbeatAtMs = Date.now();
    try {
      let body: unknown;
      try {
        body = await this.o.heartbeat();
      } catch (e) {
        body = { error: `status failed: ${errorText(e)}` };
      }
      if (this.stopped) return; // stopped while the body was awaited (a daemon's workers)
      const controller = this.status();
      this.heartbeatConnection = controller.connection;
      const r = await this.post('/status', {
        ...(typeof body === 'object' && body !== null ? body : { status: body }),
        controller,
      });
      if (r.status !== 200) throw new Error(answerError(r));
      this.requestWorked('heartbeat');
    } catch (e) {
      this.requestFailed('heartbeat', { error: errorText(e) });
    } finally {
      this.heartbeatBusy = false;
    }
    if (this.heartbeatQueued) void this.sendHeartbeat();
  }

  private async sendHealth(): Promise<void> {
    if (this.healthBusy || this.stopped || !this.healthDirty || this.healthSet === null) return;
    if (this.healthRetry !== null) {
      clearTimeout(this.healthRetry);
      this.healthRetry = null;
    }
    this.healthBusy = true;
    const set = this.healthSet;
    this.healthDirty = false;
    let ok = false;
    // a replica without a leader (503: an election is under way) is asked again soon, not after a doubled back-off
    let soon = false;
    try {
      const r = await this.post('/health', { results: set });
      soon = r.status === 503;
      if (r.status !== 200) throw new Error(answerError(r));
      ok = true;
      this.requestWorked('health');
      this.healthSentAtMs = Date.now();
      this.healthBackoffMs = 0;
      const ignored = (r.body as { ignored?: unknown[] } | null)?.ignored;
      if (Array.isArray(ignored) && ignored.length > 0) this.log('warn', 'health_results_ignored', { ignored });
    } catch (e) {
      if (this.healthSet === set) this.healthDirty = true;
      this.requestFailed('health', { error: errorText(e) });
    } finally {
      this.healthBusy = false;
    }
    if (this.stopped) return;
    if (ok) {
      if (this.healthDirty) void this.sendHealth(); // a newer set came in meanwhile
      return;
    }
    const min = this.o.backoffMinMs ?? BACKOFF_MIN_MS;
    this.healthBackoffMs = Math.min(
      this.o.backoffMaxMs ?? BACKOFF_MAX_MS,
      this.healthBackoffMs === 0 || soon ? min : this.healthBackoffMs * 2,
    );
    this.healthRetry = setTimeout(() => {
      this.healthRetry = null;
      void this.sendHealth();
    }, this.healthBackoffMs);
    this.healthRetry.unref();
  }
}
