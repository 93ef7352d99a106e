// The controller's durable state and its southbound side, on 127.0.0.1 with temp state files:
// persistence across a restart (same state, generation and health), the atomic write (a crash at any
// step of it leaves the old file whole), the agents' watch (answers on a change, 204 on timeout), acks
// and the report of who is behind, health reports bumping the generation.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadState, saveState, NODE_STORE_FS, type StoreFs, type StoredState } from '../controller/store.js';
import { ControllerState } from '../controller/state.js';
import { ApiError } from '../controller/document.js';
import { main as controllerMain } from '../controller/main.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'slbx-state-test-'));
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

/** node:fs with a crash injected at one step of the write. */
function crashingFs(step: 'write' | 'fsync' | 'rename'): StoreFs {
  let fd = -1;
  return {
    ...NODE_STORE_FS,
    openSync: (p, f, m) => {
      const x = NODE_STORE_FS.openSync(p, f, m);
      if (p.endsWith('.tmp')) fd = x;
      return x;
    },
    writeSync: (d, data) => {
      if (step === 'write' && d === fd) {
        fs.writeSync(d, data.subarray(0, Math.floor(data.length / 2))); // half the bytes reach the file
        throw Object.assign(new Error('simulated crash mid-write'), { code: 'EIO' });
      }
      return NODE_STORE_FS.writeSync(d, data);
    },
    fsyncSync: (d) => {
      if (step === 'fsync' && d === fd) throw new Error('simulated crash at fsync');
      NODE_STORE_FS.fsyncSync(d);
    },
    renameSync: (a, b) => {
      if (step === 'rename') throw new Error('simulated crash before rename');
      NODE_STORE_FS.renameSync(a, b);
    },
  };
}

describe('state file', () => {
  it('is seeded by --init, then loaded as it is (--init ignored)', () => {
    const path = join(tmp, 'state.json');
    const a = ControllerState.open(path, labConfig());
    expect(a.ok).toBe(true);
    if (!a.ok) return;
    expect(a.seeded).toBe(true);
    const raw = JSON.parse(readFileSync(path, 'utf8')) as StoredState;
    expect(raw).toMatchObject({ format: 'slbx-controller-state', version: 1, generation: 1, stateId: a.state.stateId });
    const b = ControllerState.open(
      path,
      labConfig((r) => {
        r.pools[0].backends[0].weight = 1;
      }),
    );
    expect(b.ok && !b.seeded && b.state.stateId === a.state.stateId && b.state.document).toEqual(a.state.document);
    // no file and no --init: refused; a corrupt file: refused and left alone
    expect(ControllerState.open(join(tmp, 'none.json'), null)).toMatchObject({ ok: false, error: expect.stringMatching(/--init/) });
    writeFileSync(join(tmp, 'bad.json'), '{"format": "slbx-controller-state", "vers');
    const bad = ControllerState.open(join(tmp, 'bad.json'), labConfig());
    expect(bad).toMatchObject({ ok: false, error: expect.stringMatching(/not JSON/) });
    expect(readFileSync(join(tmp, 'bad.json'), 'utf8')).toBe('{"format": "slbx-controller-state", "vers');
    // an empty file counts as missing
    writeFileSync(join(tmp, 'empty.json'), '');
    expect(ControllerState.open(join(tmp, 'empty.json'), labConfig())).toMatchObject({ ok: true, seeded: true });
  });

  for (const step of ['write', 'fsync', 'rename'] as const) {
    it(`a crash at the ${step} step leaves the old file whole and the state unchanged`, () => {
      const path = join(tmp, 'state.json');
      const opened = ControllerState.open(path, labConfig());
      if (!opened.ok) throw new Error(opened.error);
      const before = readFileSync(path, 'utf8');
      // the same state object, now writing through a crashing fs
      const crashing = ControllerState.open(path, null, crashingFs(step));
      if (!crashing.ok) throw new Error(crashing.error);
      const s = crashing.state;
      let err: unknown;
      try {
        s.write('PATCH', { coll: 'pools', key: 'web', sub: 'backends', subKey: 'h1vm1' }, { drain: true }, 'test');
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(500);
      expect(s.generation).toBe(1);
      expect(readFileSync(path, 'utf8')).toBe(before);
      expect(existsSync(`${path}.tmp`)).toBe(false);
      const again = loadState(path);
      expect(again.kind).toBe('loaded');
    });
  }

  it('a FILE.tmp left by a crash is ignored and removed on load', () => {
    const path = join(tmp, 'state.json');
    const opened = ControllerState.open(path, labConfig());
    if (!opened.ok) throw new Error(opened.error);
    writeFileSync(`${path}.tmp`, '{"half": ');
    const r = loadState(path);
    expect(r).toMatchObject({ kind: 'loaded', removedTmp: true });
    expect(existsSync(`${path}.tmp`)).toBe(false);
  });

  it('saveState writes whole JSON, readable by loadState', () => {
    const path = join(tmp, 's.json');
    const opened = ControllerState.open(path, labConfig());
    if (!opened.ok) throw new Error(opened.error);
    const r = loadState(path);
    if (r.kind !== 'loaded') throw new Error(r.kind);
    saveState(path, { ...r.state, generation: 9 });
    expect((loadState(path) as { state: StoredState }).state.generation).toBe(9);
  });

  it('slbx-controller main: --help, usage errors (exit 2), a bad --init (exit 2)', async () => {
    const out: string[] = [];
    const w1 = process.stdout.write;
    const w2 = process.stderr.write;
    process.stdout.write = ((s: string) => {
      out.push(s);
      return true;
    }) as typeof process.stdout.write;
    process.stderr.write = ((s: string) => {
      out.push(s);
      return true;
    }) as typeof process.stderr.write;
    try {
      expect(await controllerMain(['--help'])).toBe(0);
      expect(out.join('')).toContain('usage: slbx-controller --state FILE');
      out.length = 0;
      expect(await controllerMain([])).toBe(2);
      expect(out.join('')).toContain('--state FILE is required');
      expect(await controllerMain(['--state', join(tmp, 'x.json'), '--listen', 'nope'])).toBe(2);
      writeFileSync(join(tmp, 'bad.yaml'), 'networks: 3\n');
      out.length = 0;
      expect(await controllerMain(['--state', join(tmp, 'x.json'), '--init', join(tmp, 'bad.yaml')])).toBe(2);
      expect(out.join('')).toMatch(/bad\.yaml:1:11: networks: must be a list/);
      out.length = 0;
      expect(await controllerMain(['--state', join(tmp, 'y.json')])).toBe(1);
      expect(out.join('')).toMatch(/seed it with --init/);
    } finally {
      process.stdout.write = w1;
      process.stderr.write = w2;
    }
    expect(existsSync(LAB_YAML_PATH)).toBe(true);
  });
});

describe('controller: restart, watch, acks, health', () => {
  let ctl: TestController;
  beforeEach(async () => {
    ctl = await startTestController();
  });
  afterEach(async () => {
    await ctl.cleanup();
  });

  const get = async (p: string) => (await ctl.req('GET', p)).body as any;

  it('a restart from the state file keeps the state, the generation, the history and the health', async () => {
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: true });
    await ctl.req('POST', '/v1/vips/203.0.113.10/rules', {
      name: 'extra',
      protocol: 'tcp',
      frontendPort: 81,
      backendPort: 8081,
      pool: 'web',
    });
    await ctl.req('POST', '/v1/agents/host/host1/health', {
      results: [{ nic: 'h1vm2', probe: 'http80', state: 'down', detail: 'http 503' }],
    });
    const state = await get('/v1/state');
    const health = await get('/v1/health');
    const policy = await get('/v1/agents/mux/mux1/policy');
    expect(state.generation).toBe(4);
    await ctl.restart();
    expect(await get('/v1/state')).toEqual(state);
    expect(await get('/v1/health')).toEqual(health);
    expect(await get('/v1/agents/mux/mux1/policy')).toEqual(policy);
    expect((await get('/v1/generations')).history.map((h: { generation: number }) => h.generation)).toEqual([4, 3, 2, 1]);
  });

  it('the watch answers at once when behind, holds until a change, and answers 204 on timeout', async () => {
    const first = await ctl.req('GET', '/v1/agents/mux/mux1/policy');
    expect(first.status).toBe(200);
    const p = first.body as { stateId: string; generation: number; config: unknown; health: unknown };
    expect(p).toMatchObject({ generation: 1, health: {} });
    // up to date: 204 after waitS
    let t0 = Date.now();
    const idle = await ctl.req('GET', `/v1/agents/mux/mux1/policy?after=1&applied=1&state=${p.stateId}&waitS=0.5`);
    expect(idle.status).toBe(204);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    // a change while it waits: answered at once with the new generation
    t0 = Date.now();
    const held = ctl.req('GET', `/v1/agents/mux/mux1/policy?after=1&applied=1&state=${p.stateId}&waitS=20`);
    await new Promise((r) => setTimeout(r, 200));
    expect((await get('/v1/agents')).find((a: any) => a.name === 'mux1').watching).toBe(1);
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { weight: 10 });
    const r = await held;
    expect(r.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r.body).toMatchObject({ generation: 2, stateId: p.stateId });
    // another state (the controller's file was replaced): answered at once
    const other = await ctl.req('GET', '/v1/agents/mux/mux1/policy?after=2&state=0123456789abcdef&waitS=20');
    expect(other.status).toBe(200);
    // bad parameters
    expect((await ctl.req('GET', '/v1/agents/mux/mux1/policy?after=x')).status).toBe(400);
    expect((await ctl.req('GET', '/v1/agents/mux/mux1/policy?waitS=1000')).status).toBe(400);
    expect((await ctl.req('GET', '/v1/agents/router/r1/policy')).status).toBe(404);
  });

  it('open watches are ended with 503 when the controller stops', async () => {
    const p = await get('/v1/agents/host/host1/policy');
    const held = ctl.req('GET', `/v1/agents/host/host1/policy?after=${p.generation}&state=${p.stateId}&waitS=30`);
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    await ctl.stop();
    const r = await held.catch((e: Error) => e);
    if (!(r instanceof Error)) expect(r.status).toBe(503);
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('acks, refusals and the report of who is behind; generation ack times', async () => {
    let agents = await get('/v1/agents');
    expect(agents.map((a: any) => [a.kind, a.name, a.behind, a.appliedGeneration])).toEqual([
      ['mux', 'mux1', true, null],
      ['mux', 'mux2', true, null],
      ['host', 'host1', true, null],
      ['host', 'host2', true, null],
    ]);
    const stateId = (await get('/v1/state')).stateId;
    const beforePatch = Date.now();
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: true });
    for (const [k, n] of [
      ['mux', 'mux1'],
      ['host', 'host1'],
      ['host', 'host2'],
    ]) {
      expect((await ctl.req('POST', `/v1/agents/${k}/${n}/ack`, { generation: 2, ok: true, applyMs: 1.5, stateId })).status).toBe(200);
    }
    const refused = await ctl.req('POST', '/v1/agents/mux/mux2/ack', {
      generation: 2,
      ok: false,
      error: 'mux "mux2" is not in the new config',
      stateId,
    });
    expect(refused.status).toBe(200);
    agents = await get('/v1/agents');
    const m2 = agents.find((a: any) => a.name === 'mux2');
    expect(m2).toMatchObject({
      behind: true,
      appliedGeneration: null,
      lastError: { generation: 2, message: 'mux "mux2" is not in the new config' },
    });
    expect(agents.filter((a: any) => a.behind).map((a: any) => a.name)).toEqual(['mux2']);
    let rep = await get('/v1/generations/2');
    expect(rep).toMatchObject({ generation: 2, complete: false, pending: ['mux/mux2'], cause: 'PATCH /v1/pools/web/backends/h1vm1' });
    expect(rep.agents.find((a: any) => a.name === 'mux1')).toMatchObject({ applied: true, applyMs: 1.5 });
    // the ack time is the ack's arrival minus the generation's creation, both inside this test's own clock readings
    const createdMs = Date.parse(rep.createdAt);
    expect(createdMs).toBeGreaterThanOrEqual(beforePatch);
    const mux1 = rep.agents.find((a: any) => a.name === 'mux1');
    expect(Date.parse(mux1.ackedAt) - createdMs).toBe(mux1.ms);
    expect(mux1.ms).toBeGreaterThanOrEqual(0);
    expect(mux1.ms).toBeLessThanOrEqual(Date.now() - createdMs);
    expect(rep.lastMuxAckMs).toBeNull(); // mux2 has not acked generation 2
    // a wait that completes when mux2 acks
    const waiting = ctl.req('GET', '/v1/generations/current?waitS=10&kind=mux');
    await new Promise((r) => setTimeout(r, 100));
    const beforeAck = Date.now();
    await ctl.req('POST', '/v1/agents/mux/mux2/ack', { generation: 2, ok: true, stateId });
    const afterAck = Date.now();
    rep = (await waiting).body;
    expect(rep).toMatchObject({ generation: 2, complete: true, pending: [] });
    // the slowest MUX ack is mux2's, which the test sent between beforeAck and afterAck
    expect(rep.lastMuxAckMs).toBe(rep.agents.find((a: any) => a.name === 'mux2').ms);
    expect(rep.lastMuxAckMs).toBeGreaterThanOrEqual(beforeAck - createdMs);
    expect(rep.lastMuxAckMs).toBeLessThanOrEqual(afterAck - createdMs);
    expect(rep.lastHostAckMs).toBeNull();
    expect((await get('/v1/agents')).find((a: any) => a.name === 'mux2')).toMatchObject({
      behind: false,
      lastError: null,
      appliedGeneration: 2,
    });
    // a wait that times out says who is missing
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: false });
    rep = (await ctl.req('GET', '/v1/generations/3?waitS=0.3')).body;
    expect(rep).toMatchObject({ complete: false, pending: ['mux/mux1', 'mux/mux2', 'host/host1', 'host/host2'] });
    // a restarted controller learns the applied generation from the next watch
    await ctl.restart();
    expect((await get('/v1/agents')).every((a: any) => a.behind)).toBe(true);
    await ctl.req('GET', `/v1/agents/mux/mux1/policy?after=3&applied=3&state=${stateId}&waitS=0`);
    expect((await get('/v1/agents')).find((a: any) => a.name === 'mux1')).toMatchObject({ behind: false, appliedGeneration: 3 });
    // malformed acks
    const bad = await ctl.req('POST', '/v1/agents/mux/mux1/ack', { generation: 'x', ok: 1 });
    expect(bad.status).toBe(400);
    expect((bad.body as any).errors.map((e: any) => e.path)).toEqual(['generation', 'ok']);
  });

  it('status heartbeats are kept per agent', async () => {
    expect((await ctl.req('GET', '/v1/agents/mux/mux1/status')).status).toBe(404);
    await ctl.req('POST', '/v1/agents/mux/mux1/status', { status: { counters: { rx_packets: 5 } }, flows: [] });
    const s = await get('/v1/agents/mux/mux1/status');
    expect(s.status).toEqual({ status: { counters: { rx_packets: 5 } }, flows: [] });
    expect((await get('/v1/agents/mux/mux1')).status.status).toEqual(s.status);
    expect((await ctl.req('GET', '/v1/agents/mux/nosuch')).status).toBe(404);
  });

  it('health reports: a change of what is down bumps the generation and reaches the policy; the rest does not', async () => {
    const post = (host: string, results: unknown) => ctl.req('POST', `/v1/agents/host/${host}/health`, { results });
    // first reports, all up: no new generation (unknown already counts as up)
    let r = await post('host1', [
      { nic: 'h1vm1', probe: 'http80', state: 'up', detail: 'http 200' },
      { nic: 'h1vm2', probe: 'http80', state: 'up' },
    ]);
    expect(r.body).toMatchObject({ generation: 1, changed: false, accepted: 2, ignored: [] });
    r = await post('host1', [
      { nic: 'h1vm1', probe: 'http80', state: 'down', detail: 'refused' },
      { nic: 'h1vm2', probe: 'http80', state: 'up' },
    ]);
    expect(r.body).toMatchObject({ generation: 2, changed: true });
    expect((await get('/v1/generations/2')).cause).toBe('health h1vm1/http80 down (host1)');
    const pol = await get('/v1/agents/mux/mux1/policy');
    expect(pol).toMatchObject({ generation: 2, health: { 'h1vm1/http80': 'down', 'h1vm2/http80': 'up' } });
    // the same again: nothing new
    r = await post('host1', [
      { nic: 'h1vm1', probe: 'http80', state: 'down', detail: 'timeout' },
      { nic: 'h1vm2', probe: 'http80', state: 'up' },
    ]);
    expect(r.body).toMatchObject({ generation: 2, changed: false });
    const h = (await get('/v1/health')).find((x: any) => x.nic === 'h1vm1');
    expect(h).toMatchObject({ state: 'down', effective: 'down', host: 'host1', detail: 'timeout', reported: true });
    // a nic of another host, an unknown nic or probe: ignored and listed
    r = await post('host1', [
      { nic: 'h2vm1', probe: 'http80', state: 'down' },
      { nic: 'zz', probe: 'http80', state: 'down' },
      { nic: 'h1vm1', probe: 'nope', state: 'down' },
      { nic: 'h1vm1', probe: 'http80', state: 'down' },
    ]);
    expect((r.body as any).ignored.map((i: any) => i.reason)).toEqual([
      'nic h2vm1 is on host host2, not host1',
      'no nic zz',
      'no probe nope',
    ]);
    // left out of the full set = forgotten (unknown = up): h1vm1 comes back
    r = await post('host1', []);
    expect(r.body).toMatchObject({ generation: 3, changed: true });
    expect((await get('/v1/agents/mux/mux1/policy')).health).toEqual({});
    // malformed: 400 naming the field, nothing changed
    r = await post('host1', [{ nic: 'h1vm1', probe: 'http80', state: 'sideways' }]);
    expect(r.status).toBe(400);
    expect((r.body as any).errors[0].path).toBe('results[0].state');
    expect((await ctl.req('POST', '/v1/agents/host/host9/health', { results: [] })).status).toBe(404);
    expect((await ctl.req('POST', '/v1/agents/mux/mux1/health', { results: [] })).status).toBe(404);
    // a deleted nic's health goes with it
    await post('host2', [{ nic: 'h2vm2', probe: 'http80', state: 'down' }]);
    const g = (await get('/v1/state')).generation;
    await ctl.req('DELETE', '/v1/pools/web/backends/h2vm2');
    await ctl.req('DELETE', '/v1/nics/h2vm2');
    expect((await get('/v1/state')).generation).toBe(g + 2);
    expect((await get('/v1/agents/mux/mux1/policy')).health).toEqual({});
  });
});
