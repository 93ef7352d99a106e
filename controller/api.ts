// The controller's northbound API and the agents' southbound endpoints, JSON over HTTP. Every route,
// its methods, bodies and answers: docs/controller.md. In short:
//
//   GET  /v1/state                                   {stateId, generation, config}; PUT replaces the config
//   GET  /v1/{networks|muxes|hosts|nics|probes|pools|vips}           list; POST creates (201)
//   GET|PUT|PATCH|DELETE /v1/{collection}/{name}                     one object (a VIP by its address)
//   /v1/pools/{pool}/backends[/{nic}]    /v1/vips/{vip}/rules[/{rule}]   the same, nested
//   GET  /v1/health                                  probe states per (nic, probe)
//   GET  /v1/stats                                   requests refused, by reason (unauthorized)
//   GET  /v1/agents[/{kind}/{name}]                  applied generation, behind, last seen, last error
//   GET  /v1/generations[/{gen}]                     when each generation was made and who applied it
//   GET  /v1/agents/{kind}/{name}/policy?after=GEN   the agents' watch (long poll)
//   POST /v1/agents/{kind}/{name}/ack|status         apply results and heartbeats
//   POST /v1/agents/host/{name}/health               probe results
//   GET  /v1/snat                                    outbound NAT: ranges per host, ports per nic (docs/outbound.md)
//   POST /v1/agents/host/{name}/snat-demand          {nic, family, ports}: more ports for a nic
//   POST /v1/agents/host/{name}/snat-release         {chunks: [{ip, first}]}: on-demand chunks given back
//
// Writes answer {generation, changed, item}; errors {error, errors?: [{path, configPath, value, message}]}.
// With a token (runtime/api-token.ts) every write and every agent endpoint needs `Authorization: Bearer
// TOKEN` (401 otherwise, counted); policies are signed with it.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { ListenAddress } from '../runtime/status-server.js';
import { ApiError, COLLECTIONS, isCollection, readTarget, type ApiFieldError, type Target, type WriteMethod } from './document.js';
import { AGENT_KINDS, type AgentKind, type AgentRegistry } from './agents.js';
import { splitKey, type ControllerState, type HealthResultIn } from './state.js';
import { forwardsToLeader, forwardToLeader } from './forward.js';
import type { ReplicaView } from './replica.js';
import { authorized, sign, SIGNATURE_HEADER } from '../runtime/api-token.js';
import { writeProcessMetrics } from '../runtime/process-metrics.js';
import { PROM_CONTENT_TYPE, PromWriter } from '../shared/prom-text.js';
import { writeControllerMetrics, type ControllerHealthEntry } from './metrics.js';

export const API_PREFIX = '/v1';
/** Largest request body accepted (a whole config fits easily). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Longest watch or wait a client may ask for. */
export const MAX_WAIT_S = 120;
export const DEFAULT_WAIT_S = 25;

export type ApiLog = (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) => void;

interface Route {
  methods: readonly string[];
  handle(ctx: Ctx): Promise<void> | void;
}

interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  url: URL;
  seg: string[];
  /** When the request arrived (ms since the epoch): a new generation is dated from it. */
  atMs: number;
}

const JSON_TYPES = /^application\/(?:json|merge-patch\+json|[\w.+-]+\+json)\s*(?:;.*)?$/i;

export class ControllerApi {
  private readonly servers: Server[] = [];
  /** Open watches and waits: ended with 503 when the controller stops. */
  private readonly pending = new Set<() => void>();
  private closing = false;
  /** Requests refused, by reason (GET /v1/stats). */
  readonly refused: Record<string, number> = { unauthorized: 0 };

  /**
   * `token`: the API token (runtime/api-token.ts); null runs without authentication (tests, or
   * slbx-controller --no-token). With a token, every write and every agent endpoint needs it, and
   * policies are signed with it.
   */
  constructor(
    private readonly state: ControllerState,
    private readonly agents: AgentRegistry,
    private readonly log: ApiLog = () => {},
    private readonly token: string | null = null,
    /** A replica on etcd (controller/replica.ts): a follower forwards changes to the leader. Null: the only controller. */
    private readonly replica: ReplicaView | null = null,
  ) {
    state.onGeneration(() => agents.wake());
  }

  /** Listens on every address; rejects (and closes what it opened) on the first failure. */
  async listen(addrs: readonly ListenAddress[]): Promise<void> {
    for (const a of addrs) {
      const server = createServer((req, res) => this.handle(req, res));
      server.keepAliveTimeout = 30_000;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(a.port, a.host, () => {
          server.off('error', reject);
          resolve();
        });
      }).catch(async (e) => {
        await this.close();
        throw e;
      });
      this.servers.push(server);
    }
  }

  /** The port of the first server (tests listen on port 0). */
  port(i = 0): number {
    const a = this.servers[i]?.address();
    return typeof a === 'object' && a !== null ? a.port : 0;
  }

  /** Ends open watches with 503, stops listening and closes every connection. Idempotent. */
  async close(): Promise<void> {
    this.closing = true;
    for (const end of [...this.pending]) end();
    await Promise.all(
      this.servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          }),
      ),
    );
    this.servers.length = 0;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const atMs = Date.now();
    res.setHeader('slbx-generation', String(this.state.generation));
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://controller');
    } catch {
      this.send(res, 400, { error: 'malformed request URL' });
      return;
    }
    const method = (req.method ?? 'GET').toUpperCase();
    let seg: string[];
    try {
      seg = url.pathname
        .split('/')
        .slice(1)
        .map((s) => decodeURIComponent(s));
    } catch {
      this.send(res, 400, { error: `malformed percent-encoding in ${url.pathname}` });
      return;
    }
    if (seg.length > 1 && seg[seg.length - 1] === '') seg.pop(); // a trailing slash
    const route = this.route(seg);
    if (route === null) {
      this.send(res, 404, { error: `no route ${method} ${url.pathname} (see GET ${API_PREFIX})` });
      return;
    }
    const allowed = route.methods.includes('GET') ? [...route.methods, 'HEAD'] : route.methods;
    if (!allowed.includes(method)) {
      res.setHeader('allow', allowed.join(', '));
      this.send(res, 405, { error: `${method} is not allowed on ${url.pathname}; allowed: ${allowed.join(', ')}` });
      return;
    }
    if (this.replica !== null && !this.replica.isLeader() && forwardsToLeader(method, seg)) {
      forwardToLeader(req, res, this.replica, `${url.pathname}${url.search}`);
      return;
    }
    // changing state, and everything agents do, needs the token; reading the desired state does not
    const needsToken = (method !== 'GET' && method !== 'HEAD') || (seg[1] === 'agents' && seg.length >= 5);
    if (this.token !== null && needsToken && !authorized(req.headers.authorization, this.token)) {
      this.refused.unauthorized = (this.refused.unauthorized ?? 0) + 1;
      this.log('warn', 'api_unauthorized', { method, path: url.pathname, from: req.socket.remoteAddress });
      res.setHeader('www-authenticate', 'Bearer realm="slbx"');
      this.send(res, 401, {
        error: `${method} ${url.pathname} needs the API token: Authorization: Bearer <the token in the controller's token file>`,
      });
      return;
    }
    const ctx: Ctx = { req, res, method: method === 'HEAD' ? 'GET' : method, url, seg, atMs };
    Promise.resolve()
      .then(() => route.handle(ctx))
      .catch((e: unknown) => this.fail(res, e));
  }

  private fail(res: ServerResponse, e: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (e instanceof ApiError) {
      const body: { error: string; errors?: ApiFieldError[] } = { error: e.message };
      if (e.errors !== undefined) body.errors = e.errors;
      this.send(res, e.status, body);
      return;
    }
    this.log('warn', 'internal_error', { error: (e as Error).stack ?? String(e) });
    this.send(res, 500, { error: `internal error: ${(e as Error).message}` });
  }

  /** The policy's text and signature, made once per stored state (every watcher of a generation gets the same). */
  private policyCache: { of: object; text: string; bytes: number; signature: string | null } | null = null;

  /** A policy, signed with the token so the agent knows it comes from this controller. */
  private sendPolicy(res: ServerResponse): void {
    if (res.headersSent || res.destroyed) return;
    const of = this.state.stored;
    if (this.policyCache?.of !== of) {
      const text = `${JSON.stringify(this.state.policy(), null, 2)}\n`;
      this.policyCache = { of, text, bytes: Buffer.byteLength(text), signature: this.token === null ? null : sign(this.token, text) };
    }
    const { text, bytes, signature } = this.policyCache;
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': bytes,
      'slbx-generation': String(this.state.generation),
    };
    if (signature !== null) headers[SIGNATURE_HEADER] = signature;
    res.writeHead(200, headers);
    res.end(text);
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    if (res.headersSent || res.destroyed) return;
    res.setHeader('slbx-generation', String(this.state.generation));
    if (status === 204 || body === undefined) {
      res.writeHead(status);
      res.end();
      return;
    }
    const text = `${JSON.stringify(body, null, 2)}\n`;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  // -------------------------------------------------------------------------------------------
  // routing

  private route(seg: string[]): Route | null {
    if (seg.length === 1 && seg[0] === '') return { methods: ['GET'], handle: (c) => this.index(c) };
    if (seg.length === 1 && seg[0] === 'metrics') return { methods: ['GET'], handle: (c) => this.metrics(c) };
    if (`/${seg[0]}` !== API_PREFIX) return null;
    const s = seg.slice(1);
    if (s.length === 0) return { methods: ['GET'], handle: (c) => this.index(c) };
    const [a, b, c, d, e] = s;
    if (a === 'state' && s.length === 1) return { methods: ['GET', 'PUT'], handle: (x) => this.stateRoute(x) };
    if (a === 'replica' && s.length === 1)
      return {
        methods: ['GET'],
        handle: (x) => this.send(x.res, 200, this.replica?.status() ?? { role: 'leader', store: this.state.path }),
      };
    if (a === 'health' && s.length === 1) return { methods: ['GET'], handle: (x) => this.send(x.res, 200, this.healthList()) };
    if (a === 'snat' && s.length === 1)
      return {
        methods: ['GET'],
        handle: (x) =>
          this.send(x.res, 200, { generation: this.state.generation, nics: this.state.snatNics(), ranges: this.state.snatRanges() }),
      };
    if (a === 'stats' && s.length === 1)
      return {
        methods: ['GET'],
        handle: (x) =>
          this.send(x.res, 200, { generation: this.state.generation, authentication: this.token !== null, refused: this.refused }),
      };
    if (a === 'generations') {
      if (s.length === 1) return { methods: ['GET'], handle: (x) => this.send(x.res, 200, this.generations()) };
      if (s.length === 2) return { methods: ['GET'], handle: (x) => this.generation(x, b!) };
      return null;
    }
    if (a === 'agents') return this.agentRoute(s);
    if (a !== undefined && isCollection(a)) {
      if (s.length > 5) return null;
      const t: Target = { coll: a };
      if (b !== undefined) t.key = b;
      if (c !== undefined) {
        if (!((a === 'pools' && c === 'backends') || (a === 'vips' && c === 'rules'))) return null;
        t.sub = c;
        if (d !== undefined) t.subKey = d;
      }
      if (e !== undefined) return null;
      const one = (t.sub === undefined ? t.key : t.subKey) !== undefined;
      return { methods: one ? ['GET', 'PUT', 'PATCH', 'DELETE'] : ['GET', 'POST'], handle: (x) => this.collection(x, t) };
    }
    return null;
  }

  private agentRoute(s: string[]): Route | null {
    if (s.length === 1) return { methods: ['GET'], handle: (x) => this.send(x.res, 200, this.agents.list()) };
    const kind = s[1]!;
    if (!(AGENT_KINDS as readonly string[]).includes(kind)) return null;
    if (s.length === 2) {
      return {
        methods: ['GET'],
        handle: (x) =>
          this.send(
            x.res,
            200,
            this.agents.list().filter((v) => v.kind === kind),
          ),
      };
    }
    const name = s[2]!;
    const k = kind as AgentKind;
    if (s.length === 3) return { methods: ['GET'], handle: (x) => this.agentOne(x, k, name) };
    if (s.length !== 4) return null;
    switch (s[3]) {
      case 'policy':
        return { methods: ['GET'], handle: (x) => this.watch(x, k, name) };
      case 'ack':
        return { methods: ['POST'], handle: (x) => this.ack(x, k, name) };
      case 'status':
        return { methods: ['GET', 'POST'], handle: (x) => this.status(x, k, name) };
      case 'health':
        return k === 'host' ? { methods: ['POST'], handle: (x) => this.health(x, name) } : null;
      case 'snat-demand':
        return k === 'host' ? { methods: ['POST'], handle: (x) => this.snatDemand(x, name) } : null;
      case 'snat-release':
        return k === 'host' ? { methods: ['POST'], handle: (x) => this.snatRelease(x, name) } : null;
      default:
        return null;
    }
  }

  private index(c: Ctx): void {
    this.send(c.res, 200, {
      api: 'slbx-controller',
      version: 1,
      stateId: this.state.stateId,
      generation: this.state.generation,
      routes: [
        'GET|PUT /v1/state',
        ...COLLECTIONS.map((x) => `GET|POST /v1/${x}, GET|PUT|PATCH|DELETE /v1/${x}/{${x === 'vips' ? 'address' : 'name'}}`),
        'GET|POST /v1/pools/{pool}/backends, GET|PUT|PATCH|DELETE /v1/pools/{pool}/backends/{nic}',
        'GET|POST /v1/vips/{vip}/rules, GET|PUT|PATCH|DELETE /v1/vips/{vip}/rules/{rule}',
        'GET /v1/health',
        'GET /v1/replica',
        'GET /metrics (the Prometheus text format)',
        'GET /v1/agents, GET /v1/agents/{mux|host}/{name}',
        'GET /v1/generations, GET /v1/generations/{gen|current}?waitS=S&kind=mux|host|all',
        'GET /v1/agents/{mux|host}/{name}/policy?after=GEN&applied=GEN&state=STATEID&waitS=S',
        'POST /v1/agents/{mux|host}/{name}/ack, GET|POST /v1/agents/{mux|host}/{name}/status',
        'POST /v1/agents/host/{name}/health',
        'GET /v1/snat, POST /v1/agents/host/{name}/snat-demand, POST /v1/agents/host/{name}/snat-release',
      ],
    });
  }

  // -------------------------------------------------------------------------------------------
  // bodies

  private async body(c: Ctx, required = true): Promise<unknown> {
    const type = c.req.headers['content-type'];
    const length = c.req.headers['content-length'];
    if (!required && (type === undefined || length === '0')) return undefined;
    if (type === undefined || !JSON_TYPES.test(type)) {
      // drain what was sent, so the connection stays usable
      c.req.resume();
      throw new ApiError(415, `${c.method} needs a JSON body: content-type application/json${type !== undefined ? ` (got ${type})` : ''}`);
    }
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const chunk of c.req) {
      n += (chunk as Buffer).length;
      if (n > MAX_BODY_BYTES) {
        c.res.setHeader('connection', 'close');
        throw new ApiError(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new ApiError(400, `the body is not JSON: ${(e as Error).message}`);
    }
  }

  // -------------------------------------------------------------------------------------------
  // northbound

  private async stateRoute(c: Ctx): Promise<void> {
    if (c.method === 'GET') {
      this.send(c.res, 200, this.state.snapshot());
      return;
    }
    const body = await this.body(c);
    if (typeof body !== 'object' || body === null || Array.isArray(body) || !('config' in body)) {
      throw new ApiError(400, 'PUT /v1/state takes {config: {...}, generation?: N}');
    }
    const b = body as { config: unknown; generation?: unknown };
    if (b.generation !== undefined && b.generation !== this.state.generation) {
      throw new ApiError(
        409,
        `the state is at generation ${this.state.generation}, not ${JSON.stringify(b.generation)}: re-read it and try again`,
      );
    }
    const generation = typeof b.generation === 'number' ? b.generation : undefined; // checked again when its turn comes
    const r = await this.state.replaceConfigAsync(b.config, `PUT ${c.url.pathname}`, c.atMs, generation);
    this.logWrite(r.changed, r.generation, `PUT ${c.url.pathname}`);
    this.send(c.res, 200, { generation: r.generation, changed: r.changed, item: r.item });
  }

  private async collection(c: Ctx, t: Target): Promise<void> {
    if (c.method === 'GET') {
      this.send(c.res, 200, readTarget(this.state.document, t));
      return;
    }
    const body = c.method === 'DELETE' ? await this.body(c, false) : await this.body(c);
    const cause = `${c.method} ${c.url.pathname}`;
    const r = await this.state.writeAsync(c.method as WriteMethod, t, body, cause, c.atMs);
    this.logWrite(r.changed, r.generation, cause);
    this.send(c.res, r.status, { generation: r.generation, changed: r.changed, item: r.item });
  }

  private logWrite(changed: boolean, generation: number, cause: string): void {
    if (changed) this.log('info', 'generation', { generation, cause });
  }

  /** Probe states: every reported (nic, probe), and every probed (nic, probe) of the config not reported yet. */
  private healthList(): unknown[] {
    const config = this.state.config;
    const nicHost = new Map(config.nics.map((n) => [n.name, n.host]));
    const expected = new Set<string>();
    const pools = new Map(config.pools.map((p) => [p.name, p]));
    for (const v of config.vips) {
      for (const r of v.rules) {
        if (r.probe === null) continue;
        for (const b of pools.get(r.pool)?.backends ?? []) expected.add(`${b.nic}/${r.probe}`);
      }
    }
    const health = this.state.health;
    const keys = [...new Set([...expected, ...Object.keys(health)])].sort();
    return keys.map((k) => {
      const [nic, probe] = splitKey(k);
      const e = health[k];
      return e === undefined
        ? {
            nic,
            probe,
            state: 'unknown',
            effective: 'up',
            host: nicHost.get(nic) ?? null,
            reported: false,
            detail: null,
            since: null,
            reportedAt: null,
          }
        : {
            nic,
            probe,
            state: e.state,
            effective: e.state === 'down' ? 'down' : 'up',
            host: e.host,
            reported: true,
            detail: e.detail,
            since: e.since,
            reportedAt: e.reportedAt,
          };
    });
  }

  /** GET /metrics: the Prometheus text format (docs/metrics.md); read-only like every GET, no token. */
  private metrics(c: Ctx): void {
    const w = new PromWriter();
    writeControllerMetrics(w, this.state, this.agents, this.healthList() as ControllerHealthEntry[], this.refused);
    writeProcessMetrics(w);
    const text = w.text();
    c.res.writeHead(200, { 'content-type': PROM_CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
    c.res.end(text);
  }

  private generations(): unknown {
    return { current: this.state.generation, stateId: this.state.stateId, history: [...this.state.history].reverse() };
  }

  private async generation(c: Ctx, genText: string): Promise<void> {
    const gen = genText === 'current' ? this.state.generation : Number(genText);
    if (!Number.isSafeInteger(gen) || gen < 1)
      throw new ApiError(400, `generation must be an integer >= 1 or "current", got ${JSON.stringify(genText)}`);
    if (gen > this.state.generation) throw new ApiError(404, `no generation ${gen} yet (current: ${this.state.generation})`);
    const kindText = c.url.searchParams.get('kind') ?? 'all';
    const kinds: AgentKind[] = kindText === 'all' ? [...AGENT_KINDS] : kindText === 'mux' || kindText === 'host' ? [kindText] : [];
    if (kinds.length === 0) throw new ApiError(400, `kind must be mux, host or all, got ${JSON.stringify(kindText)}`);
    const waitS = this.waitParam(c, 0);
    if (waitS === 0) {
      this.send(c.res, 200, this.agents.generationReport(gen, kinds));
      return;
    }
    const ac = new AbortController();
    const end = () => ac.abort();
    this.pending.add(end);
    c.res.on('close', end);
    const report = await this.agents.waitApplied(gen, kinds, waitS * 1000, ac.signal);
    this.pending.delete(end);
    if (this.closing) {
      this.send(c.res, 503, { error: 'the controller is stopping' });
      return;
    }
    this.send(c.res, 200, report);
  }

  private waitParam(c: Ctx, dflt: number): number {
    const t = c.url.searchParams.get('waitS');
    if (t === null) return dflt;
    const v = Number(t);
    if (!Number.isFinite(v) || v < 0 || v > MAX_WAIT_S)
      throw new ApiError(400, `waitS must be a number 0..${MAX_WAIT_S}, got ${JSON.stringify(t)}`);
    return v;
  }

  // -------------------------------------------------------------------------------------------
  // southbound: the agents

  private agentOne(c: Ctx, kind: AgentKind, name: string): void {
    const inConfig =
      kind === 'mux' ? this.state.config.muxes.some((m) => m.name === name) : this.state.config.hosts.some((h) => h.name === name);
    const view = this.agents.view(`${kind}/${name}`, inConfig);
    if (!inConfig && view.lastSeen === null) throw new ApiError(404, `no ${kind} ${name}`);
    this.send(c.res, 200, { ...view, status: this.agents.statusOf(kind, name) });
  }

  private intParam(c: Ctx, key: string): number | null {
    const t = c.url.searchParams.get(key);
    if (t === null || t === '') return null;
    const v = Number(t);
    if (!Number.isSafeInteger(v) || v < 0) throw new ApiError(400, `${key} must be an integer >= 0, got ${JSON.stringify(t)}`);
    return v;
  }

  /**
   * The watch: answers at once with the policy when the agent's `after` is older than the current
   * generation (or it names another state, or none), else holds until a new generation or waitS
   * (then 204).
   */
  private watch(c: Ctx, kind: AgentKind, name: string): void {
    const after = this.intParam(c, 'after');
    const applied = this.intParam(c, 'applied');
    const stateId = c.url.searchParams.get('state');
    const waitS = this.waitParam(c, DEFAULT_WAIT_S);
    this.agents.notePoll(kind, name, applied, stateId);
    const fresh = () => after === null || stateId !== this.state.stateId || this.state.generation > after;
    if (fresh() || waitS === 0) {
      if (fresh()) this.sendPolicy(c.res);
      else this.send(c.res, 204, undefined);
      return;
    }
    this.agents.watchOpened(kind, name);
    let done = false;
    const finish = (status: 200 | 204 | 503) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      off();
      this.pending.delete(stop);
      this.agents.watchClosed(kind, name);
      if (status === 200) this.sendPolicy(c.res);
      else if (status === 503) this.send(c.res, 503, { error: 'the controller is stopping' });
      else this.send(c.res, 204, undefined);
    };
    const stop = () => finish(503);
    const off = this.state.onGeneration(() => finish(200));
    const timer = setTimeout(() => finish(204), waitS * 1000);
    this.pending.add(stop);
    c.res.on('close', () => finish(204)); // the agent went away: nothing to send
  }

  private async ack(c: Ctx, kind: AgentKind, name: string): Promise<void> {
    const b = await this.body(c);
    const o = (typeof b === 'object' && b !== null && !Array.isArray(b) ? b : null) as Record<string, unknown> | null;
    const errors: ApiFieldError[] = [];
    const bad = (path: string, value: unknown, message: string) => errors.push({ path, configPath: path, value, message });
    if (o === null) throw new ApiError(400, 'the ack must be {generation, ok, error?, applyMs?, stateId?}');
    if (!Number.isSafeInteger(o['generation']) || (o['generation'] as number) < 1)
      bad('generation', o['generation'], 'must be an integer >= 1');
    if (typeof o['ok'] !== 'boolean') bad('ok', o['ok'], 'must be true or false');
    if (o['error'] !== undefined && typeof o['error'] !== 'string') bad('error', o['error'], 'must be a string');
    if (o['applyMs'] !== undefined && (typeof o['applyMs'] !== 'number' || o['applyMs'] < 0))
      bad('applyMs', o['applyMs'], 'must be a number >= 0');
    if (o['stateId'] !== undefined && typeof o['stateId'] !== 'string') bad('stateId', o['stateId'], 'must be a string');
    if (errors.length > 0) throw new ApiError(400, 'malformed ack', errors);
    const a: { generation: number; ok: boolean; error?: string; applyMs?: number; stateId?: string } = {
      generation: o['generation'] as number,
      ok: o['ok'] as boolean,
    };
    if (typeof o['error'] === 'string') a.error = o['error'].slice(0, 4000);
    if (typeof o['applyMs'] === 'number') a.applyMs = o['applyMs'];
    if (typeof o['stateId'] === 'string') a.stateId = o['stateId'];
    this.agents.ack(kind, name, a);
    if (!a.ok) this.log('warn', 'agent_refused_policy', { agent: `${kind}/${name}`, generation: a.generation, error: a.error });
    this.send(c.res, 200, this.agents.view(`${kind}/${name}`, true));
  }

  private async status(c: Ctx, kind: AgentKind, name: string): Promise<void> {
    if (c.method === 'GET') {
      const s = this.agents.statusOf(kind, name);
      if (s === null) throw new ApiError(404, `no status from ${kind} ${name} yet`);
      this.send(c.res, 200, s);
      return;
    }
    const b = await this.body(c);
    if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new ApiError(400, 'the status must be a JSON object');
    this.agents.setStatus(kind, name, b);
    this.send(c.res, 200, { generation: this.state.generation });
  }

  private async health(c: Ctx, host: string): Promise<void> {
    const b = await this.body(c);
    const o = (typeof b === 'object' && b !== null && !Array.isArray(b) ? b : null) as Record<string, unknown> | null;
    if (o === null || !Array.isArray(o['results'])) {
      throw new ApiError(400, 'health takes {results: [{nic, probe, state: "up"|"down"|"unknown", detail?}]}', [
        { path: 'results', configPath: 'results', value: o?.['results'], message: 'must be a list of {nic, probe, state, detail?}' },
      ]);
    }
    const errors: ApiFieldError[] = [];
    const results: HealthResultIn[] = [];
    (o['results'] as unknown[]).forEach((r, i) => {
      const at = `results[${i}]`;
      const bad = (f: string, v: unknown, m: string) => errors.push({ path: `${at}${f}`, configPath: `${at}${f}`, value: v, message: m });
      if (typeof r !== 'object' || r === null || Array.isArray(r)) {
        bad('', r, 'must be {nic, probe, state, detail?}');
        return;
      }
      const x = r as Record<string, unknown>;
      if (typeof x['nic'] !== 'string' || x['nic'] === '') bad('.nic', x['nic'], 'must be a nic name');
      if (typeof x['probe'] !== 'string' || x['probe'] === '') bad('.probe', x['probe'], 'must be a probe name');
      if (x['state'] !== 'up' && x['state'] !== 'down' && x['state'] !== 'unknown')
        bad('.state', x['state'], 'must be up, down or unknown');
      if (x['detail'] !== undefined && x['detail'] !== null && typeof x['detail'] !== 'string')
        bad('.detail', x['detail'], 'must be a string');
      if (
        typeof x['nic'] === 'string' &&
        typeof x['probe'] === 'string' &&
        (x['state'] === 'up' || x['state'] === 'down' || x['state'] === 'unknown')
      ) {
        results.push({
          nic: x['nic'],
          probe: x['probe'],
          state: x['state'],
          detail: typeof x['detail'] === 'string' ? x['detail'].slice(0, 500) : null,
        });
      }
    });
    if (errors.length > 0) throw new ApiError(400, 'malformed health report; nothing was changed', errors);
    const r = await this.state.reportHealthAsync(host, results, c.atMs);
    this.agents.notePoll('host', host, null, null);
    if (r.changed) this.log('info', 'generation', { generation: r.generation, cause: this.state.generationRecord(r.generation)?.cause });
    this.send(c.res, 200, r);
  }

  private async snatDemand(c: Ctx, host: string): Promise<void> {
    const b = await this.body(c);
    const o = (typeof b === 'object' && b !== null && !Array.isArray(b) ? b : {}) as Record<string, unknown>;
    const errors: ApiFieldError[] = [];
    const bad = (f: string, m: string) => errors.push({ path: f, configPath: f, value: o[f], message: m });
    if (typeof o['nic'] !== 'string' || o['nic'] === '') bad('nic', 'must be a nic name');
    if (o['family'] !== 4 && o['family'] !== 6) bad('family', 'must be 4 or 6');
    const ports = o['ports'];
    if (typeof ports !== 'number' || !Number.isInteger(ports) || ports < 1 || ports > 65535) bad('ports', 'must be an integer 1..65535');
    if (errors.length > 0) throw new ApiError(400, 'snat-demand takes {nic, family: 4|6, ports}; nothing was changed', errors);
    const r = await this.state.snatDemandAsync(host, o['nic'] as string, o['family'] as 4 | 6, ports as number, c.atMs);
    if (r.granted.length > 0)
      this.log('info', 'generation', {
        generation: this.state.generation,
        cause: this.state.generationRecord(this.state.generation)?.cause,
      });
    this.send(c.res, 200, { generation: this.state.generation, ...r });
  }

  private async snatRelease(c: Ctx, host: string): Promise<void> {
    const b = await this.body(c);
    const o = (typeof b === 'object' && b !== null && !Array.isArray(b) ? b : {}) as Record<string, unknown>;
    const list = o['chunks'];
    const errors: ApiFieldError[] = [];
    const chunks: { ip: string; first: number }[] = [];
    if (!Array.isArray(list)) errors.push({ path: 'chunks', configPath: 'chunks', value: list, message: 'must be a list of {ip, first}' });
    else
      list.forEach((x: unknown, i) => {
        const e = (typeof x === 'object' && x !== null ? x : {}) as Record<string, unknown>;
        if (typeof e['ip'] !== 'string' || typeof e['first'] !== 'number' || !Number.isInteger(e['first']))
          errors.push({ path: `chunks[${i}]`, configPath: `chunks[${i}]`, value: x, message: 'must be {ip: "ADDRESS", first: PORT}' });
        else chunks.push({ ip: e['ip'], first: e['first'] });
      });
    if (errors.length > 0) throw new ApiError(400, 'snat-release takes {chunks: [{ip, first}]}; nothing was changed', errors);
    const r = await this.state.snatReleaseAsync(host, chunks, c.atMs);
    this.send(c.res, 200, { generation: this.state.generation, ...r });
  }
}
