// The controller's etcd store and election (controller/etcd.ts, controller/replica.ts) against a real
// etcd on loopback (test/helpers/etcd.ts: its own data directory and ports per run). Each test uses
// its own key prefix. What is checked is read back from etcd itself where it matters (the generation
// in PREFIX/state), not only from the replica that wrote it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startController, type ControllerHandle } from '../controller/main.js';
import { EtcdClient, parseEtcdUrl } from '../controller/etcd.js';
import { EtcdReplica } from '../controller/replica.js';
import { ApiError } from '../controller/document.js';
import type { StoredState } from '../controller/store.js';
import { configureLog } from '../runtime/log.js';
import { requestJson } from '../runtime/http-json.js';
import { PolicyClient, type AppliedPolicy } from '../runtime/policy-client.js';
import { runSlbctl } from '../cli/slbctl.js';
import { etcdMissing, startEtcd, type TestEtcd } from './helpers/etcd.js';
import { unmet } from './helpers/prerequisite.js';
import { labConfig } from './helpers/lab-config.js';

const newPrefix = () => `/slbx/test-${randomBytes(4).toString('hex')}`;

async function until<T>(what: string, f: () => T | null | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = f();
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The generation etcd holds under PREFIX/state, read with a client of our own. */
async function storedGeneration(endpoint: string, prefix: string): Promise<number> {
  const c = new EtcdClient([endpoint]);
  try {
    const kv = (await c.range(`${prefix}/state`)).kvs[0];
    if (kv === undefined) throw new Error('no state in etcd');
    return (JSON.parse(kv.value) as StoredState).generation;
  } finally {
    c.close();
  }
}

describe('parseEtcdUrl', () => {
  it('takes endpoints and a prefix, and names what is wrong', () => {
    expect(parseEtcdUrl('etcd://198.18.0.31:2379,[2001:db8:f::31]:2379/slbx/lab')).toEqual({
      endpoints: ['198.18.0.31:2379', '[2001:db8:f::31]:2379'],
      prefix: '/slbx/lab',
    });
    expect(parseEtcdUrl('etcd://127.0.0.1:2379')).toEqual({ endpoints: ['127.0.0.1:2379'], prefix: '/slbx' });
    expect(parseEtcdUrl('http://127.0.0.1:2379')).toMatch(/expected etcd:\/\/HOST:PORT/);
    expect(parseEtcdUrl('etcd://127.0.0.1')).toMatch(/is not HOST:PORT/);
    expect(parseEtcdUrl('etcd://127.0.0.1:2379/')).toMatch(/cannot be \/ alone/);
  });
});

describe.skipIf(unmet(etcdMissing(), 'the controller on etcd'))('the controller on etcd', () => {
  let etcd: TestEtcd;
  const handles: ControllerHandle[] = [];
  const replicas: EtcdReplica[] = [];

  beforeAll(async () => {
    configureLog('controller', 'error');
    etcd = await startEtcd();
  }, 60_000);

  afterAll(async () => {
    for (const h of handles) await h.stop().catch(() => undefined);
    for (const r of replicas) await r.stop().catch(() => undefined);
    await etcd?.cleanup();
  });

  const replica = (prefix: string, id: string, ttlS = 2, tickMs = 200) => {
    const r = new EtcdReplica(new EtcdClient([etcd.endpoint]), prefix, { id, url: 'http://127.0.0.1:1' }, () => {}, ttlS, tickMs);
    replicas.push(r);
    return r;
  };

  const controller = async (prefix: string, id: string) => {
    const h = await startController({
      statePath: '',
      init: labConfig(),
      listen: [{ host: '127.0.0.1', port: 0 }],
      token: null,
      etcd: { url: `etcd://${etcd.endpoint}${prefix}`, id },
    });
    handles.push(h);
    return h;
  };
  const urlOf = (h: ControllerHandle) => `http://127.0.0.1:${h.api.port()}`;

  it('seeds the state once; another replica reads that state; without --init an empty prefix is refused', async () => {
    const prefix = newPrefix();
    const a = await replica(prefix, 'a').open(labConfig());
    const b = await replica(prefix, 'b').open(labConfig());
    expect(a.ok && b.ok).toBe(true);
    if (!a.ok || !b.ok) return;
    expect([a.seeded, b.seeded]).toEqual([true, false]);
    expect(b.state.stateId).toBe(a.state.stateId);
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(1);
    const c = await replica(newPrefix(), 'c').open(null);
    expect(c.ok).toBe(false);
    if (!c.ok) expect(c.error).toMatch(/holds no state .*seed it with --init/);
  });

  it('one leader; a change sent to a follower is forwarded, acknowledged, and reaches the follower', async () => {
    const prefix = newPrefix();
    const [x, y] = [await controller(prefix, 'x'), await controller(prefix, 'y')];
    const leader = await until('a leader', () => [x, y].find((h) => h.replica!.isLeader()));
    const follower = leader === x ? y : x;
    await until('the follower knows the leader', () => follower.replica!.leader()?.id === leader.replica!.id);
    expect(follower.replica!.isLeader()).toBe(false);
    const r = await requestJson(new URL(`${urlOf(follower)}/v1/pools/web/backends/h1vm1`), { method: 'PATCH', body: { weight: 7 } });
    expect(r.status).toBe(200);
    expect(r.headers['slbx-forwarded-by']).toBe(follower.replica!.id);
    const gen = (r.body as { generation: number }).generation;
    expect(gen).toBe(2);
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(2);
    await until('the follower adopts generation 2', () => follower.state.generation === 2);
    const got = await requestJson(new URL(`${urlOf(follower)}/v1/pools/web/backends/h1vm1`));
    expect((got.body as { weight: number }).weight).toBe(7);
  });

  it('leader killed (its lease left to run out): another leads, generations go on from the last, every acknowledged change is kept', async () => {
    const prefix = newPrefix();
    const hs = [await controller(prefix, 'p'), await controller(prefix, 'q'), await controller(prefix, 'r')];
    await until('a leader', () => hs.find((h) => h.replica!.isLeader()));
    const nics = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
    const acked: { nic: string; weight: number; generation: number }[] = [];
    const alive = new Set(hs);
    let kills = 0;
    for (let i = 1; acked.length < 40; i++) {
      if (acked.length === 12 || acked.length === 26) {
        const l = [...alive].find((h) => h.replica!.isLeader());
        if (l !== undefined && kills < 2 && acked.length === (kills === 0 ? 12 : 26)) {
          kills++;
          alive.delete(l);
          await l.replica!.stop(false); // kill -9: the lease is not revoked
          await l.api.close();
        }
      }
      const nic = nics[i % nics.length]!;
      const weight = 10 + i;
      // a client with every replica's URL: the next one on an error (slbctl does this)
      for (const h of alive) {
        const r = await requestJson(new URL(`${urlOf(h)}/v1/pools/web/backends/${nic}`), { method: 'PATCH', body: { weight } }).catch(
          () => null,
        );
        if (r?.status === 200) {
          acked.push({ nic, weight, generation: (r.body as { generation: number }).generation });
          break;
        }
        expect([503, undefined]).toContain(r?.status);
      }
      if (acked.at(-1)?.weight !== weight) await new Promise((r) => setTimeout(r, 100));
    }
    expect(kills).toBe(2);
    // one generation per acknowledged change, strictly increasing, across both failovers
    expect(acked.map((a) => a.generation)).toEqual(acked.map((_, k) => 2 + k));
    const last = [...alive][0]!;
    await until('the survivor holds the last generation', () => last.state.generation === acked.at(-1)!.generation);
    const st = await requestJson(new URL(`${urlOf(last)}/v1/pools/web/backends`));
    const final = new Map((st.body as { nic: string; weight: number }[]).map((b) => [b.nic, b.weight]));
    const expected = new Map(acked.map((a) => [a.nic, a.weight])); // the last acknowledged weight of each nic
    for (const [nic, w] of expected) expect(final.get(nic), nic).toBe(w);
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(acked.at(-1)!.generation);
  }, 90_000);

  it('a replica whose lease was taken away cannot write, though it still believes it leads', async () => {
    const prefix = newPrefix();
    // ticks and keepalives far apart: it cannot notice the loss by itself within the test
    const a = replica(prefix, 'a', 60, 60_000);
    const oa = await a.open(labConfig());
    if (!oa.ok) throw new Error(oa.error);
    a.start();
    await until('a leads', () => a.isLeader());
    const c = new EtcdClient([etcd.endpoint]);
    const lease = (await c.range(`${prefix}/leader`)).kvs[0]!.lease;
    await c.leaseRevoke(lease);
    c.close();
    const b = replica(prefix, 'b');
    const ob = await b.open(null);
    if (!ob.ok) throw new Error(ob.error);
    b.start();
    await until('b leads', () => b.isLeader());
    expect(a.isLeader()).toBe(true);
    const err = await oa.state
      .writeAsync('PATCH', { coll: 'pools', key: 'web', sub: 'backends', subKey: 'h1vm1' }, { weight: 3 }, 'test')
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(503);
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(1);
    expect(oa.state.generation).toBe(1);
    // the new leader writes generation 2
    const w = await ob.state.writeAsync('PATCH', { coll: 'pools', key: 'web', sub: 'backends', subKey: 'h1vm1' }, { weight: 4 }, 'test');
    expect(w.generation).toBe(2);
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(2);
  });

  it('changes sent together: one etcd write per batch, each change its own generation, each answered once etcd holds it', async () => {
    const prefix = newPrefix();
    const a = replica(prefix, 'a');
    const oa = await a.open(labConfig());
    if (!oa.ok) throw new Error(oa.error);
    a.start();
    await until('a leads', () => a.isLeader());
    const nics = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
    const n = 40;
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        oa.state
          .writeAsync('PATCH', { coll: 'pools', key: 'web', sub: 'backends', subKey: nics[i % 4]! }, { weight: 100 + i }, `test ${i}`)
          .then(async (r) => ({ i, generation: r.generation, storedThen: await storedGeneration(etcd.endpoint, prefix) })),
      ),
    );
    // each its own generation, 2..n+1, in the order sent; each answered only once etcd held it
    expect(answers.map((x) => x.generation)).toEqual(Array.from({ length: n }, (_, i) => i + 2));
    for (const x of answers) expect(x.storedThen).toBeGreaterThanOrEqual(x.generation);
    // what etcd holds: the last weight of every backend
    const c = new EtcdClient([etcd.endpoint]);
    const kv = (await c.range(`${prefix}/state`)).kvs[0]!;
    c.close();
    const st = JSON.parse(kv.value) as StoredState;
    expect(st.generation).toBe(n + 1);
    const web = (st.config['pools'] as { name: string; backends: { nic: string; weight: number }[] }[]).find((p) => p.name === 'web')!;
    expect(Object.fromEntries(web.backends.map((b) => [b.nic, b.weight]))).toEqual({ h1vm1: 136, h1vm2: 137, h2vm1: 138, h2vm2: 139 });
    expect(st.history.filter((h) => h.cause.startsWith('test ')).length).toBe(n);
    // etcd's own count of writes to the key (its version, read through its gateway): the seed, then fewer than n
    const raw = await requestJson(new URL(`http://${etcd.endpoint}/v3/kv/range`), {
      method: 'POST',
      body: { key: Buffer.from(`${prefix}/state`).toString('base64') },
    });
    const version = Number((raw.body as { kvs: { version: string }[] }).kvs[0]!.version);
    expect(version).toBeGreaterThanOrEqual(2);
    expect(version - 1).toBeLessThan(n / 2);
  });

  it('a stream of changes under the group-commit pace: at most one etcd write per interval, none lost or reordered, each answered once stored', async () => {
    const prefix = newPrefix();
    const a = replica(prefix, 'a');
    const oa = await a.open(labConfig());
    if (!oa.ok) throw new Error(oa.error);
    a.start();
    await until('a leads', () => a.isLeader());
    const intervalMs = 250;
    oa.state.batchIntervalMs = intervalMs;
    const nics = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
    const n = 40;
    const t0 = Date.now();
    // one change every 10 ms (not all at once: a batch then forms without any pace), each waiting for its answer
    const answers = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        await new Promise((r) => setTimeout(r, i * 10));
        const r = await oa.state.writeAsync(
          'PATCH',
          { coll: 'pools', key: 'web', sub: 'backends', subKey: nics[i % 4]! },
          { weight: 200 + i },
          `pace ${i}`,
        );
        return { i, generation: r.generation, storedThen: await storedGeneration(etcd.endpoint, prefix) };
      }),
    );
    const spanMs = Date.now() - t0;
    // in the order sent, each its own generation, and each answered only once etcd held it
    expect(answers.map((x) => x.generation)).toEqual(Array.from({ length: n }, (_, i) => i + 2));
    for (const x of answers) expect(x.storedThen).toBeGreaterThanOrEqual(x.generation);
    const c = new EtcdClient([etcd.endpoint]);
    const kv = (await c.range(`${prefix}/state`)).kvs[0]!;
    c.close();
    const st = JSON.parse(kv.value) as StoredState;
    expect(st.generation).toBe(n + 1);
    const web = (st.config['pools'] as { name: string; backends: { nic: string; weight: number }[] }[]).find((p) => p.name === 'web')!;
    expect(Object.fromEntries(web.backends.map((b) => [b.nic, b.weight]))).toEqual({ h1vm1: 236, h1vm2: 237, h2vm1: 238, h2vm2: 239 });
    expect(st.history.filter((h) => h.cause.startsWith('pace ')).map((h) => h.cause)).toEqual(
      Array.from({ length: n }, (_, i) => `pace ${i}`),
    );
    // etcd's own count of writes to the key: the seed, then one per interval the stream lasted at most
    // (the count is bounded by the span actually measured, so a slow machine does not fail it)
    const raw = await requestJson(new URL(`http://${etcd.endpoint}/v3/kv/range`), {
      method: 'POST',
      body: { key: Buffer.from(`${prefix}/state`).toString('base64') },
    });
    const writes = Number((raw.body as { kvs: { version: string }[] }).kvs[0]!.version) - 1;
    expect(writes).toBe(oa.state.batchesStored);
    expect(writes).toBeLessThanOrEqual(Math.ceil(spanMs / intervalMs) + 1);
    expect(writes).toBeLessThan(n / 4);
  });

  it('a change computed from an older state is refused, and the newer one stays', async () => {
    const prefix = newPrefix();
    const a = replica(prefix, 'a');
    const oa = await a.open(labConfig());
    if (!oa.ok) throw new Error(oa.error);
    a.start();
    await until('a leads', () => a.isLeader());
    const old = oa.state.stored;
    await oa.state.writeAsync('PATCH', { coll: 'pools', key: 'web', sub: 'backends', subKey: 'h1vm1' }, { weight: 5 }, 'test');
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(2);
    const err = await a.save({ ...old, generation: 2, savedAt: new Date().toISOString() }, old).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as ApiError).status).toBe(503);
    expect((err as ApiError).message).toMatch(/the state changed under this change/);
    const c = new EtcdClient([etcd.endpoint]);
    const kv = (await c.range(`${prefix}/state`)).kvs[0]!;
    c.close();
    expect((JSON.parse(kv.value) as StoredState).config).toEqual(oa.state.document);
  });

  it('etcd down: a change is refused with a reason and nothing is changed; etcd back: the next change is the next generation', async () => {
    const prefix = newPrefix();
    const h = await controller(prefix, 'solo');
    await until('it leads', () => h.replica!.isLeader());
    await etcd.stop(true);
    const r = await requestJson(new URL(`${urlOf(h)}/v1/pools/web/backends/h2vm1`), { method: 'PATCH', body: { weight: 9 } });
    expect(r.status).toBe(503);
    expect((r.body as { error: string }).error).toMatch(/etcd|not the leader/);
    expect(h.state.generation).toBe(1);
    await etcd.restart();
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(1);
    await until('it leads again', () => h.replica!.isLeader(), 30_000);
    const ok = await requestJson(new URL(`${urlOf(h)}/v1/pools/web/backends/h2vm1`), { method: 'PATCH', body: { weight: 9 } });
    expect(ok.status).toBe(200);
    expect((ok.body as { generation: number }).generation).toBe(2);
    expect(await storedGeneration(etcd.endpoint, prefix)).toBe(2);
  }, 90_000);
  it('agents and slbctl with every replica: the leader killed, they move on, keep their policy, and health reaches the new leader', async () => {
    const prefix = newPrefix();
    const [x, y] = [await controller(prefix, 'x1'), await controller(prefix, 'y1')];
    const leader = await until('a leader', () => [x, y].find((h) => h.replica!.isLeader()));
    const other = leader === x ? y : x;
    await until('the other knows the leader', () => other.replica!.leader() !== null);
    const urls = [new URL(urlOf(leader)), new URL(urlOf(other))]; // the leader first: the client starts on it
    const events: string[] = [];
    const mk = (kind: 'mux' | 'host', name: string) => {
      const applied: AppliedPolicy[] = [];
      const c = new PolicyClient({
        url: urls[0]!,
        urls,
        kind,
        name,
        bootstrap: labConfig(),
        apply: (p) => void applied.push(p),
        waitS: 5,
        heartbeatMs: 200,
        backoffMinMs: 50,
        backoffMaxMs: 200,
        log: (_l, event) => void events.push(`${kind}/${name} ${event}`),
      });
      c.start();
      return { c, applied };
    };
    const mux = mk('mux', 'mux1');
    const host = mk('host', 'host1');
    try {
      await until('both applied generation 1', () => mux.c.status().appliedGeneration === 1 && host.c.status().appliedGeneration === 1);
      await leader.replica!.stop(false); // kill -9
      await leader.api.close();
      // the next health report goes through the survivor, which leads once the old lease ran out
      host.c.reportHealth([{ nic: 'h1vm1', probe: 'http80', state: 'down' }]);
      const p = await until(
        'the mux applies a policy with h1vm1 down',
        () => mux.applied.find((a) => a.health['h1vm1/http80'] === 'down'),
        20_000,
      );
      expect(p.generation).toBe(2);
      expect(other.replica!.isLeader()).toBe(true);
      expect(mux.c.status().url).toBe(urls[1]!.href);
      expect(events).toContain('mux/mux1 controller_failover');
      // the mux kept generation 1 in force until then: nothing was applied in between
      expect(mux.applied.map((a) => a.generation)).toEqual([1, 2]);
      // slbctl with the dead replica first
      let out = '';
      let err = '';
      const code = await runSlbctl(
        ['--controller', urls.map((u) => u.href.replace(/\/$/, '')).join(','), 'backend', 'set', 'web', 'h2vm1', '--weight', '33'],
        {
          out: (t) => void (out += t),
          err: (t) => void (err += t),
          env: {},
        },
      );
      expect(err).toBe('');
      expect(code).toBe(0);
      expect(await storedGeneration(etcd.endpoint, prefix)).toBe(3);
    } finally {
      mux.c.stop();
      host.c.stop();
    }
  }, 60_000);
});
