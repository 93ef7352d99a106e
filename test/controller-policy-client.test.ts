// The daemons' policy client (runtime/policy-client.ts) against a real controller on 127.0.0.1, with a
// stand-in daemon (the apply callback): first policy, live changes, health pushed by a host and
// reaching a MUX's health view, a bad policy refused with the previous one kept (from a fake
// controller), apply errors, a controller restart (no re-apply, resync to the same generation), and
// heartbeats.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { PolicyClient, type AppliedPolicy } from '../runtime/policy-client.js';
import { toPlainConfig } from '../controller/document.js';
import { labConfig } from './helpers/lab-config.js';
import { hostPolicyKey } from '../host-agent/main.js';
import { startTestController, type TestController } from './helpers/controller.js';

const quiet = () => {};
const until = async (what: string, f: () => boolean | Promise<boolean>, ms = 5000) => {
  const t0 = Date.now();
  while (!(await f())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('policy client', () => {
  let ctl: TestController;
  const clients: PolicyClient[] = [];
  beforeEach(async () => {
    ctl = await startTestController();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.stop();
    await ctl.cleanup();
  });

  function client(
    kind: 'mux' | 'host',
    name: string,
    o: { bootstrap?: boolean; apply?: (p: AppliedPolicy) => void; heartbeat?: () => unknown; minPolicyIntervalMs?: number } = {},
  ) {
    const applied: AppliedPolicy[] = [];
    const c = new PolicyClient({
      url: new URL(ctl.url),
      kind,
      name,
      bootstrap: o.bootstrap === false ? null : labConfig(),
      apply: (p) => {
        o.apply?.(p);
        applied.push(p);
      },
      heartbeat: o.heartbeat ?? (() => ({ status: { name, counters: { rx_packets: 1 } } })),
      waitS: 5,
      ...(o.minPolicyIntervalMs !== undefined ? { minPolicyIntervalMs: o.minPolicyIntervalMs } : {}),
      heartbeatMs: 200,
      backoffMinMs: 50,
      backoffMaxMs: 200,
      log: quiet,
    });
    clients.push(c);
    c.start();
    return { c, applied };
  }
  const agents = async () => (await ctl.req('GET', '/v1/agents')).body as any[];

  it('applies the first policy (nothing changed against the bootstrap config), acks it, then follows changes', async () => {
    const { c, applied } = client('mux', 'mux1');
    await until('first policy', () => applied.length === 1);
    expect(applied[0]).toMatchObject({ generation: 1, configChanged: false, healthChanged: false });
    await until('ack', async () => (await agents()).find((a) => a.name === 'mux1').appliedGeneration === 1);
    expect(c.status()).toMatchObject({ connection: 'connected', appliedGeneration: 1, seenGeneration: 1, lastRefused: null });
    const t0 = Date.now();
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: true });
    await until('second policy', () => applied.length === 2);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(applied[1]).toMatchObject({ generation: 2, configChanged: true, healthChanged: false });
    expect(applied[1]!.config.pools[0]!.backends[0]!.drain).toBe(true);
    await until('ack 2', async () => (await agents()).find((a) => a.name === 'mux1').appliedGeneration === 2);
    const rep = (await ctl.req('GET', '/v1/generations/2?kind=mux')).body as any;
    const m1 = rep.agents.find((a: any) => a.name === 'mux1');
    expect(m1.applied).toBe(true);
    expect(m1.ms).toBeLessThan(1000);
    expect(rep).toMatchObject({ complete: false, pending: ['mux/mux2'], lastMuxAckMs: null }); // mux2 never ran
  });

  it('without a bootstrap config the first policy is a config change; the heartbeat carries the status', async () => {
    const { applied } = client('host', 'host2', { bootstrap: false, heartbeat: () => ({ status: { name: 'host2', generation: 1 } }) });
    await until('first policy', () => applied.length === 1);
    expect(applied[0]!.configChanged).toBe(true);
    await until('heartbeat', async () => (await ctl.req('GET', '/v1/agents/host/host2/status')).status === 200);
    const s = (await ctl.req('GET', '/v1/agents/host/host2/status')).body as any;
    expect(s.status.status).toEqual({ name: 'host2', generation: 1 });
    expect(s.status.controller).toMatchObject({ connection: 'connected' });
  });

  it('a heartbeat given as a promise is awaited: what it resolves to is posted (the daemons await their workers first)', async () => {
    client('host', 'host2', {
      bootstrap: false,
      heartbeat: async () => {
        await new Promise((r) => setTimeout(r, 20));
        return { status: { name: 'host2', generation: 7 } };
      },
    });
    await until('heartbeat', async () => (await ctl.req('GET', '/v1/agents/host/host2/status')).status === 200);
    const s = (await ctl.req('GET', '/v1/agents/host/host2/status')).body as any;
    expect(s.status.status).toEqual({ name: 'host2', generation: 7 });
  });

  it('a host reports health; the MUX gets a policy whose health view has the backend down, then up', async () => {
    const mux = client('mux', 'mux1');
    const host = client('host', 'host1');
    await until('both applied', () => mux.applied.length === 1 && host.applied.length === 1);
    host.c.reportHealth([
      { nic: 'h1vm1', probe: 'http80', state: 'down', detail: 'refused' },
      { nic: 'h1vm2', probe: 'http80', state: 'up' },
    ]);
    await until('health policy', () => mux.applied.length === 2);
    const p = mux.applied[1]!;
    expect(p).toMatchObject({
      generation: 2,
      configChanged: false,
      healthChanged: true,
      health: { 'h1vm1/http80': 'down', 'h1vm2/http80': 'up' },
    });
    expect(p.config).toBe(mux.applied[0]!.config); // the same frozen config object: nothing to recompile but health
    expect(p.healthView.isHealthy('h1vm1', 'http80')).toBe(false);
    expect(p.healthView.isHealthy('h1vm2', 'http80')).toBe(true);
    expect(p.healthView.isHealthy('h2vm1', 'http80')).toBe(true); // unknown = up
    // the host got generation 2 too: no config change for it
    await until('host gen 2', () => host.applied.length === 2);
    expect(host.applied[1]).toMatchObject({ configChanged: false, healthChanged: true });
    host.c.reportHealth([
      { nic: 'h1vm1', probe: 'http80', state: 'up' },
      { nic: 'h1vm2', probe: 'http80', state: 'up' },
    ]);
    await until('health back', () => mux.applied.length === 3);
    expect(mux.applied[2]!.healthView.isHealthy('h1vm1', 'http80')).toBe(true);
    expect(host.c.status().health).toMatchObject({ results: 2, pending: false });
    const h = (await ctl.req('GET', '/v1/health')).body as any[];
    expect(h.find((x) => x.nic === 'h1vm1')).toMatchObject({ state: 'up', host: 'host1' });
  });

  it('a stream of generations is taken as its newest, a few at a time, in order, up to the last one', async () => {
    const { applied } = client('mux', 'mux1', { minPolicyIntervalMs: 1000 });
    await until('first policy', () => applied.length === 1);
    const nics = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
    const n = 40;
    let last = 0;
    // one change after the other, each stored (answered) before the next, none waiting for the agent
    for (let i = 0; i < n; i++) {
      const r = await ctl.req('PATCH', `/v1/pools/web/backends/${nics[i % 4]}`, { weight: 300 + i });
      expect(r.status).toBe(200);
      last = (r.body as { generation: number }).generation;
    }
    expect(last).toBe(n + 1);
    await until('the last generation', () => applied.at(-1)?.generation === last, 20_000);
    const gens = applied.map((p) => p.generation);
    // in order, never one twice, the last one reached with the last weights, and far fewer applies than generations
    for (let i = 1; i < gens.length; i++) expect(gens[i]!).toBeGreaterThan(gens[i - 1]!);
    const web = applied.at(-1)!.config.pools.find((p) => p.name === 'web')!;
    expect(Object.fromEntries(web.backends.map((b) => [b.nic, b.weight]))).toEqual({ h1vm1: 336, h1vm2: 337, h2vm1: 338, h2vm2: 339 });
    expect(applied.length - 1).toBeLessThan(n / 4);
  });

  it('an apply that throws is refused and acked with the error; the next generation is tried again', async () => {
    let fail = false;
    const { c, applied } = client('mux', 'mux2', {
      apply: () => {
        if (fail) throw new Error('mux "mux2" is not in the new config');
      },
    });
    await until('first', () => applied.length === 1);
    fail = true;
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { weight: 10 });
    await until('refusal', async () => (await agents()).find((a) => a.name === 'mux2').lastError !== null);
    const a = (await agents()).find((x) => x.name === 'mux2');
    expect(a).toMatchObject({
      appliedGeneration: 1,
      behind: true,
      lastError: { generation: 2, message: 'could not apply it: mux "mux2" is not in the new config' },
    });
    expect(c.status()).toMatchObject({ appliedGeneration: 1, seenGeneration: 2, lastRefused: { generation: 2 } });
    fail = false;
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { weight: 11 });
    await until('applied 3', async () => (await agents()).find((x) => x.name === 'mux2').appliedGeneration === 3);
    expect((await agents()).find((x) => x.name === 'mux2')).toMatchObject({ behind: false, lastError: null });
  });

  it('a controller restart: the client reconnects, applies nothing new, and the controller sees it at the same generation', async () => {
    const { c, applied } = client('mux', 'mux1');
    const host = client('host', 'host1');
    await until('first', () => applied.length === 1 && host.applied.length === 1);
    host.c.reportHealth([{ nic: 'h1vm1', probe: 'http80', state: 'down' }]);
    await until('health applied', () => applied.length === 2);
    const before = (await ctl.req('GET', '/v1/state')).body;
    await ctl.stop();
    await until('unreachable', () => c.status().connection === 'unreachable');
    await ctl.restart();
    await until('reconnected', () => c.status().connection === 'connected' && host.c.status().connection === 'connected');
    await until('agents resynced', async () => (await agents()).every((a) => a.name === 'mux2' || a.name === 'host2' || !a.behind));
    expect((await ctl.req('GET', '/v1/state')).body).toEqual(before);
    // the host resent its health: the same, so no new generation
    await until('health resent', async () =>
      ((await ctl.req('GET', '/v1/health')).body as any[]).some((x) => x.nic === 'h1vm1' && x.reported),
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(applied.length).toBe(2);
    expect(((await ctl.req('GET', '/v1/state')).body as any).generation).toBe(2);
  });
});

describe('policy client against a controller that sends a bad policy', () => {
  let server: Server;
  let port = 0;
  const acks: any[] = [];
  let policy: unknown;
  beforeEach(async () => {
    acks.length = 0;
    server = createServer((req, res) => {
      if (req.method === 'POST') {
        let t = '';
        req
          .on('data', (d) => (t += d))
          .on('end', () => {
            if (req.url!.endsWith('/ack')) acks.push(JSON.parse(t));
            res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
          });
        return;
      }
      const after = new URL(req.url!, 'http://x').searchParams.get('after');
      const gen = (policy as { generation: number }).generation;
      if (after !== null && Number(after) >= gen) {
        setTimeout(() => res.writeHead(204).end(), 200);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(policy));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('refuses it (validateConfig), keeps the previous policy, and acks ok:false naming the field', async () => {
    const good = toPlainConfig(labConfig());
    policy = { stateId: 'aaaaaaaaaaaaaaaa', generation: 1, config: good, health: {} };
    const applied: AppliedPolicy[] = [];
    const c = new PolicyClient({
      url: new URL(`http://127.0.0.1:${port}`),
      kind: 'mux',
      name: 'mux1',
      apply: (p) => {
        applied.push(p);
      },
      waitS: 1,
      backoffMinMs: 50,
      log: quiet,
    });
    c.start();
    try {
      await until('good ack', () => acks.length === 1);
      expect(acks[0]).toMatchObject({ generation: 1, ok: true });
      const bad = structuredClone(good) as any;
      bad.pools[0].backends[0].weight = 0;
      policy = { stateId: 'aaaaaaaaaaaaaaaa', generation: 2, config: bad, health: {} };
      await until('bad ack', () => acks.length === 2);
      expect(acks[1]).toMatchObject({ generation: 2, ok: false });
      expect(acks[1].error).toMatch(/pools\[0\]\.backends\[0\]\.weight: must be an integer 1\.\.1000/);
      expect(applied).toHaveLength(1);
      expect(c.status()).toMatchObject({ appliedGeneration: 1, seenGeneration: 2, lastRefused: { generation: 2 } });
      // garbage (not a policy at all) is not applied either; the client keeps retrying
      policy = { generation: 3, nonsense: true };
      await until('unreachable', () => c.status().connection === 'unreachable');
      expect(c.status().lastError).toMatch(/malformed policy/);
      expect(applied).toHaveLength(1);
    } finally {
      c.stop();
    }
  });
});

describe('host agent: which policy changes it applies', () => {
  it('ignores what only the MUXes use (drain, weight, priority, enabled, distribution, hash settings), not the rest', () => {
    const base = hostPolicyKey(labConfig());
    const muxOnly = labConfig((r) => {
      r.pools[0].backends[0].drain = true;
      r.pools[0].backends[1].weight = 7;
      r.pools[0].backends[2].priority = 2;
      r.pools[0].backends[3].enabled = false;
      r.pools[0].latencySensitivityMs = 5;
      r.vips[0].rules[1].distribution = '2-tuple';
      r.hashSeed = 1;
      r.maglevTableSize = 7;
      r.flowTable = { maxFlows: 10 };
    });
    expect(hostPolicyKey(muxOnly)).toBe(base);
    for (const edit of [
      (r: any) => {
        r.vips[0].rules[2].backendPort = 8001;
      },
      (r: any) => {
        r.pools[0].backends.pop();
      },
      (r: any) => {
        r.probes[0].intervalMs = 2000;
      },
      (r: any) => {
        r.vips[0].rules[0].probe = 'tcp80';
      },
      (r: any) => {
        r.networks[0].gateway = '192.0.2.254';
      },
    ]) {
      expect(hostPolicyKey(labConfig(edit))).not.toBe(base);
    }
  });
});
