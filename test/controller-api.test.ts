// The controller's northbound API on 127.0.0.1 with a temp state file (no namespaces): CRUD of every
// collection and of the nested backends and rules, the rejections the issue lists (each a 4xx naming
// the field), HTTP's own 404/405/409/413/415, refusals that change nothing, and the generation.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { serializeConfig, validateConfig } from '../shared/config.js';
import { toPlainConfig } from '../controller/document.js';
import { labConfig } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

let ctl: TestController;
beforeEach(async () => {
  ctl = await startTestController();
});
afterEach(async () => {
  await ctl.cleanup();
});

const gen = async () => ((await ctl.req('GET', '/v1/state')).body as { generation: number }).generation;
const stateBody = async () => (await ctl.req('GET', '/v1/state')).body;

interface FieldError {
  path: string;
  configPath: string;
  value?: unknown;
  message: string;
}
const errorsOf = (body: unknown) => (body as { errors: FieldError[] }).errors;

/** A write that must be refused: status, the field named, and nothing changed. */
async function refused(method: string, path: string, body: unknown, status: number, field?: string | RegExp, message?: RegExp) {
  const before = await stateBody();
  const r = await ctl.req(method, path, body);
  expect(r.status, `${method} ${path}: ${r.text}`).toBe(status);
  const b = r.body as { error: string; errors?: FieldError[] };
  expect(typeof b.error).toBe('string');
  if (field !== undefined) {
    expect(b.errors, r.text).toBeDefined();
    const hit = b.errors!.find((e) => (typeof field === 'string' ? e.path === field : field.test(e.path)));
    expect(hit, `no error at ${String(field)} in ${r.text}`).toBeDefined();
    if (message !== undefined) expect(hit!.message).toMatch(message);
  }
  expect(await stateBody()).toEqual(before);
  return b;
}

describe('controller API: state', () => {
  it('serves the seeded config, normalized, at generation 1', async () => {
    const r = await ctl.req('GET', '/v1/state');
    expect(r.status).toBe(200);
    const s = r.body as { stateId: string; generation: number; config: unknown };
    expect(s.generation).toBe(1);
    expect(s.stateId).toMatch(/^[0-9a-f]{16}$/);
    expect(s.config).toEqual(toPlainConfig(labConfig()));
    expect(validateConfig(s.config).ok).toBe(true);
    // the document is exactly what serializeConfig writes as YAML
    expect(s.config).toEqual(parseYaml(serializeConfig(labConfig())));
    expect(r.headers['slbx-generation']).toBe('1');
    const idx = await ctl.req('GET', '/v1');
    expect((idx.body as { routes: string[] }).routes.length).toBeGreaterThan(5);
  });

  it('PUT /v1/state replaces the whole config, validated, optionally only at a given generation', async () => {
    const cfg = toPlainConfig(
      labConfig((raw) => {
        raw.pools[0].backends[0].weight = 10;
      }),
    );
    const stale = await ctl.req('PUT', '/v1/state', { config: cfg, generation: 7 });
    expect(stale.status).toBe(409);
    const r = await ctl.req('PUT', '/v1/state', { config: cfg, generation: 1 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ generation: 2, changed: true });
    const same = await ctl.req('PUT', '/v1/state', { config: cfg });
    expect(same.body).toMatchObject({ generation: 2, changed: false });
    const bad = structuredClone(cfg) as { maglevTableSize: number };
    bad.maglevTableSize = 65536;
    await refused('PUT', '/v1/state', { config: bad }, 400, 'maglevTableSize', /prime/);
  });
});

describe('controller API: every collection', () => {
  it('networks: create, read, replace, patch, delete', async () => {
    let r = await ctl.req('POST', '/v1/networks', { name: 'tenant-b', vni: 5002 });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ generation: 2, changed: true, item: { name: 'tenant-b', vni: 5002 } });
    expect((await ctl.req('GET', '/v1/networks')).body).toHaveLength(2);
    r = await ctl.req('PUT', '/v1/networks/tenant-b', { vni: 5003, gateway: '192.0.2.1' });
    expect(r.body).toMatchObject({ generation: 3, item: { name: 'tenant-b', vni: 5003, gateway: '192.0.2.1' } });
    r = await ctl.req('PATCH', '/v1/networks/tenant-b', { gateway: null, gateway6: '2001:db8:d::1' });
    expect((r.body as { item: unknown }).item).toEqual({ name: 'tenant-b', vni: 5003, gateway6: '2001:db8:d::1' });
    expect((await ctl.req('GET', '/v1/networks/tenant-b')).body).toEqual({ name: 'tenant-b', vni: 5003, gateway6: '2001:db8:d::1' });
    r = await ctl.req('DELETE', '/v1/networks/tenant-b');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ generation: 5, item: { name: 'tenant-b' } });
    expect((await ctl.req('GET', '/v1/networks/tenant-b')).status).toBe(404);
  });

  it('muxes and hosts', async () => {
    let r = await ctl.req('POST', '/v1/muxes', { name: 'mux3', address: '198.18.0.13' });
    expect(r.status).toBe(201);
    r = await ctl.req('PATCH', '/v1/muxes/mux3', { address6: '2001:DB8:F:0::13' });
    expect((r.body as { item: unknown }).item).toEqual({ name: 'mux3', address: '198.18.0.13', address6: '2001:db8:f::13' });
    expect((await ctl.req('DELETE', '/v1/muxes/mux3')).status).toBe(200);
    r = await ctl.req('POST', '/v1/hosts', { name: 'host3', address: '198.18.0.23' });
    expect(r.status).toBe(201);
    r = await ctl.req('PUT', '/v1/hosts/host3', { name: 'host3', address: '198.18.0.24' });
    expect((r.body as { item: unknown }).item).toEqual({ name: 'host3', address: '198.18.0.24' });
    expect((await ctl.req('GET', '/v1/hosts')).body).toHaveLength(3);
    expect((await ctl.req('DELETE', '/v1/hosts/host3')).status).toBe(200);
    // the last mux cannot go: the config needs one
    expect((await ctl.req('DELETE', '/v1/muxes/mux2')).status).toBe(200);
    await refused('DELETE', '/v1/muxes/mux1', undefined, 400, 'muxes', /at least one/);
  });

  it('a ninth MUX is refused: one controller takes at most eight (the seed: eight MUX instances per SLB manager)', async () => {
    for (let i = 3; i <= 8; i++)
      expect((await ctl.req('POST', '/v1/muxes', { name: `mux${i}`, address: `198.18.0.${10 + i}` })).status).toBe(201);
    expect((await ctl.req('GET', '/v1/muxes')).body).toHaveLength(8);
    await refused('POST', '/v1/muxes', { name: 'mux9', address: '198.18.0.19' }, 400, '', /at most 8 MUXes.*remove mux9 from muxes/);
    expect((await ctl.req('GET', '/v1/muxes')).body).toHaveLength(8);
  });

  it('nics and probes, and references that keep them', async () => {
    let r = await ctl.req('POST', '/v1/nics', {
      name: 'h1vm3',
      host: 'host1',
      network: 'tenant-a',
      mac: '02:00:c0:00:02:0e',
      addresses: ['192.0.2.14'],
    });
    expect(r.status).toBe(201);
    expect((r.body as { item: unknown }).item).toEqual({
      name: 'h1vm3',
      host: 'host1',
      network: 'tenant-a',
      port: 'h1vm3',
      mac: '02:00:c0:00:02:0e',
      addresses: ['192.0.2.14'],
    });
    r = await ctl.req('PATCH', '/v1/nics/h1vm3', { addresses: ['192.0.2.14', '2001:db8:d::14'] });
    expect(r.status).toBe(200);
    // a host with nics cannot be deleted
    const b = await refused('DELETE', '/v1/hosts/host1', undefined, 409);
    expect(b.error).toMatch(/host host1 is still used by nic h1vm1/);
    r = await ctl.req('POST', '/v1/probes', { name: 'tcp8000', protocol: 'tcp', port: 8000 });
    expect((r.body as { item: unknown }).item).toEqual({
      name: 'tcp8000',
      protocol: 'tcp',
      port: 8000,
      intervalMs: 5000,
      timeoutMs: 2000,
      upThreshold: 2,
      downThreshold: 2,
    });
    // the stored probe has its defaults written out (timeoutMs 2000): a shorter interval needs a timeout too
    await refused('PATCH', '/v1/probes/tcp8000', { intervalMs: 500 }, 400, 'timeoutMs', /intervalMs/);
    r = await ctl.req('PATCH', '/v1/probes/tcp8000', { intervalMs: 500, timeoutMs: 400 });
    expect((r.body as { item: { timeoutMs: number } }).item.timeoutMs).toBe(400);
    await refused('DELETE', '/v1/probes/http80', undefined, 409); // rules use it
    expect((await ctl.req('DELETE', '/v1/probes/tcp8000')).status).toBe(200);
    expect((await ctl.req('DELETE', '/v1/nics/h1vm3')).status).toBe(200);
    await refused('DELETE', '/v1/nics/h1vm1', undefined, 409); // pool web uses it
  });

  it('pools and their backends', async () => {
    let r = await ctl.req('POST', '/v1/pools', { name: 'alt', backends: [{ nic: 'h1vm1' }] });
    expect(r.status).toBe(201);
    expect((r.body as { item: unknown }).item).toEqual({
      name: 'alt',
      latencySensitivityMs: 0,
      backends: [{ nic: 'h1vm1', priority: 1, weight: 50, enabled: true, drain: false }],
    });
    r = await ctl.req('POST', '/v1/pools/alt/backends', { nic: 'h2vm1', weight: 7, priority: 2 });
    expect(r.status).toBe(201);
    expect((r.body as { item: unknown }).item).toEqual({ nic: 'h2vm1', priority: 2, weight: 7, enabled: true, drain: false });
    expect((await ctl.req('GET', '/v1/pools/alt/backends')).body).toHaveLength(2);
    r = await ctl.req('PUT', '/v1/pools/alt/backends/h2vm1', { weight: 3 }); // PUT replaces: priority back to 1
    expect((r.body as { item: unknown }).item).toEqual({ nic: 'h2vm1', priority: 1, weight: 3, enabled: true, drain: false });
    r = await ctl.req('PATCH', '/v1/pools/alt/backends/h2vm1', { drain: true });
    expect((r.body as { item: unknown }).item).toEqual({ nic: 'h2vm1', priority: 1, weight: 3, enabled: true, drain: true });
    expect((await ctl.req('GET', '/v1/pools/alt/backends/h2vm1')).body).toMatchObject({ drain: true });
    expect((await ctl.req('DELETE', '/v1/pools/alt/backends/h2vm1')).status).toBe(200);
    await refused('DELETE', '/v1/pools/alt/backends/h1vm1', undefined, 400, /backends$/, /at least one/);
    r = await ctl.req('PUT', '/v1/pools/alt', { backends: [{ nic: 'h2vm2' }], latencySensitivityMs: 5 });
    expect((r.body as { item: unknown }).item).toMatchObject({ name: 'alt', latencySensitivityMs: 5, backends: [{ nic: 'h2vm2' }] });
    expect((await ctl.req('DELETE', '/v1/pools/alt')).status).toBe(200);
    expect((await ctl.req('GET', '/v1/pools/alt')).status).toBe(404);
    expect((await ctl.req('GET', '/v1/pools/alt/backends')).status).toBe(404);
  });

  it('vips and their rules, IPv6 addresses in any text form', async () => {
    let r = await ctl.req('POST', '/v1/vips', {
      address: '203.0.113.20',
      rules: [{ protocol: 'tcp', frontendPort: 80, backendPort: 8081, pool: 'web' }],
    });
    expect(r.status).toBe(201);
    expect((r.body as { item: unknown }).item).toEqual({
      address: '203.0.113.20',
      rules: [
        { name: 'tcp-80', protocol: 'tcp', frontendPort: 80, backendPort: 8081, pool: 'web', distribution: '5-tuple', allDown: 'drop' },
      ],
    });
    r = await ctl.req('POST', '/v1/vips/203.0.113.20/rules', {
      name: 'dns',
      protocol: 'udp',
      frontendPort: 53,
      pool: 'web',
      distribution: '2-tuple',
    });
    expect(r.status).toBe(201);
    r = await ctl.req('PATCH', '/v1/vips/203.0.113.20/rules/dns', { distribution: '3-tuple', probe: 'tcp80', allDown: 'spread' });
    expect((r.body as { item: unknown }).item).toEqual({
      name: 'dns',
      protocol: 'udp',
      frontendPort: 53,
      backendPort: 53,
      pool: 'web',
      distribution: '3-tuple',
      probe: 'tcp80',
      allDown: 'spread',
    });
    r = await ctl.req('PATCH', '/v1/vips/203.0.113.20/rules/dns', { allDown: 'open' });
    expect(r.status).toBe(400);
    expect((r.body as { errors: { path: string; message: string }[] }).errors[0]).toMatchObject({
      path: 'allDown',
      message: expect.stringMatching(/must be one of drop, spread/),
    });
    r = await ctl.req('PATCH', '/v1/vips/203.0.113.20/rules/dns', { probe: null });
    expect((r.body as { item: Record<string, unknown> }).item['probe']).toBeUndefined();
    r = await ctl.req('PUT', '/v1/vips/203.0.113.20/rules/dns', { protocol: 'udp', frontendPort: 5353, pool: 'web' });
    expect((r.body as { item: unknown }).item).toEqual({
      name: 'dns',
      protocol: 'udp',
      frontendPort: 5353,
      backendPort: 5353,
      pool: 'web',
      distribution: '5-tuple',
      allDown: 'drop',
    });
    expect((await ctl.req('GET', '/v1/vips/203.0.113.20/rules')).body).toHaveLength(2);
    expect((await ctl.req('DELETE', '/v1/vips/203.0.113.20/rules/dns')).status).toBe(200);
    expect((await ctl.req('GET', '/v1/vips/203.0.113.20/rules/dns')).status).toBe(404);
    // IPv6: the URL may use any form of the address
    expect((await ctl.req('GET', '/v1/vips/2001:DB8:FF:0:0::10')).body).toMatchObject({ address: '2001:db8:ff::10' });
    expect((await ctl.req('GET', `/v1/vips/${encodeURIComponent('2001:db8:ff::10')}/rules/web-http`)).body).toMatchObject({
      frontendPort: 80,
    });
    r = await ctl.req('PATCH', '/v1/vips/203.0.113.20', {
      rules: [{ name: 'only', protocol: 'tcp', frontendPort: 81, backendPort: 8081, pool: 'web' }],
    });
    expect((r.body as { item: { rules: unknown[] } }).item.rules).toHaveLength(1);
    expect((await ctl.req('DELETE', '/v1/vips/203.0.113.20')).status).toBe(200);
    expect((await ctl.req('GET', '/v1/vips')).body).toHaveLength(2);
  });
});

describe('controller API: rejections name the field and change nothing', () => {
  it('unknown VIP: 404', async () => {
    for (const [m, p, b] of [
      ['GET', '/v1/vips/203.0.113.99', undefined],
      ['PATCH', '/v1/vips/203.0.113.99', { rules: [] }],
      ['DELETE', '/v1/vips/203.0.113.99', undefined],
      ['POST', '/v1/vips/203.0.113.99/rules', { protocol: 'tcp', frontendPort: 81, pool: 'web' }],
      ['GET', '/v1/vips/203.0.113.99/rules/web-http', undefined],
    ] as const) {
      const body = await refused(m, p, b, 404);
      expect(body.error).toBe('no vip 203.0.113.99');
    }
    expect((await refused('GET', '/v1/vips/not-an-address', undefined, 404)).error).toMatch(/not an IP address/);
    expect((await refused('DELETE', '/v1/vips/203.0.113.10/rules/nope', undefined, 404)).error).toBe('no rule nope in vip 203.0.113.10');
  });

  it('port out of range', async () => {
    await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { protocol: 'tcp', frontendPort: 70000, pool: 'web' },
      400,
      'frontendPort',
      /1\.\.65535/,
    );
    await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { protocol: 'tcp', frontendPort: 81, backendPort: 0, pool: 'web' },
      400,
      'backendPort',
      /1\.\.65535/,
    );
    await refused('PATCH', '/v1/vips/203.0.113.10/rules/web-http', { frontendPort: -1 }, 400, 'frontendPort');
    await refused('POST', '/v1/probes', { name: 'p', protocol: 'tcp', port: 65536 }, 400, 'port', /1\.\.65535/);
    const b = await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { protocol: 'tcp', frontendPort: '81', pool: 'web' },
      400,
      'frontendPort',
    );
    expect(b.errors![0]!.configPath).toBe('vips[0].rules[5].frontendPort');
    expect(b.errors![0]!.value).toBe('81');
  });

  it('weight 0 or 1001, priority 6', async () => {
    const w0 = await refused('PATCH', '/v1/pools/web/backends/h1vm1', { weight: 0 }, 400, 'weight', /1\.\.1000.*drain/);
    expect(w0.errors![0]).toMatchObject({ configPath: 'pools[0].backends[0].weight', value: 0 });
    await refused('PATCH', '/v1/pools/web/backends/h1vm1', { weight: 1001 }, 400, 'weight', /1\.\.1000/);
    await refused('PATCH', '/v1/pools/web/backends/h2vm2', { priority: 6 }, 400, 'priority', /1\.\.5/);
    await refused(
      'POST',
      '/v1/pools',
      {
        name: 'p2',
        backends: [
          { nic: 'h1vm1', weight: 1001 },
          { nic: 'h1vm2', priority: 6 },
        ],
      },
      400,
      'backends[0].weight',
    );
    const both = errorsOf(
      (
        await ctl.req('POST', '/v1/pools', {
          name: 'p2',
          backends: [
            { nic: 'h1vm1', weight: 1001 },
            { nic: 'h1vm2', priority: 6 },
          ],
        })
      ).body,
    );
    expect(both.map((e) => e.path).sort()).toEqual(['backends[0].weight', 'backends[1].priority']);
  });

  it('address of the wrong family', async () => {
    await refused('POST', '/v1/muxes', { name: 'mux3', address: '2001:db8:f::13' }, 400, 'address', /IPv4.*address6/);
    await refused('PATCH', '/v1/networks/tenant-a', { gateway6: '192.0.2.1' }, 400, 'gateway6', /IPv6/);
    await refused(
      'POST',
      '/v1/nics',
      { name: 'x', host: 'host1', network: 'tenant-a', mac: '02:00:c0:00:02:0f', addresses: ['192.0.2.15', '192.0.2.16'] },
      400,
      'addresses[1]',
    );
    // an IPv6 VIP over a pool whose nic has no IPv6 address
    expect(
      (
        await ctl.req('POST', '/v1/nics', {
          name: 'v4only',
          host: 'host1',
          network: 'tenant-a',
          mac: '02:00:c0:00:02:0f',
          addresses: ['192.0.2.15'],
        })
      ).status,
    ).toBe(201);
    expect((await ctl.req('POST', '/v1/pools', { name: 'p4', backends: [{ nic: 'v4only' }] })).status).toBe(201);
    await refused(
      'POST',
      '/v1/vips',
      { address: '2001:db8:ff::20', rules: [{ protocol: 'tcp', frontendPort: 80, backendPort: 9000, pool: 'p4' }] },
      400,
      'rules[0].pool',
      /mixed families/,
    );
  });

  it('duplicate rule, VIP, pool and backend', async () => {
    // the same (protocol, frontendPort) under another name
    await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { name: 'again', protocol: 'tcp', frontendPort: 80, pool: 'web' },
      400,
      'frontendPort',
      /already taken by rules\[0\]/,
    );
    // the same name
    const dupName = await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { name: 'web-http', protocol: 'tcp', frontendPort: 81, pool: 'web' },
      409,
    );
    expect(dupName.error).toBe('rule web-http already exists in vip 203.0.113.10');
    // 'all' overlaps tcp/80
    await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { name: 'both', protocol: 'all', frontendPort: 80, pool: 'web' },
      400,
      'frontendPort',
    );
    expect((await refused('POST', '/v1/vips', { address: '203.0.113.10', rules: [] }, 409)).error).toBe('vip 203.0.113.10 already exists');
    expect((await refused('POST', '/v1/pools', { name: 'web', backends: [{ nic: 'h1vm1' }] }, 409)).error).toBe('pool web already exists');
    expect((await refused('POST', '/v1/pools/web/backends', { nic: 'h1vm1' }, 409)).error).toBe('backend h1vm1 already exists in pool web');
  });

  it('unknown references, unknown fields, renames, references that block a delete', async () => {
    await refused(
      'POST',
      '/v1/vips/203.0.113.10/rules',
      { protocol: 'tcp', frontendPort: 81, pool: 'wbe' },
      400,
      'pool',
      /unknown pool 'wbe' \(did you mean 'web'\?\)/,
    );
    await refused('PATCH', '/v1/pools/web/backends/h1vm1', { weigth: 10 }, 400, 'weigth', /did you mean 'weight'/);
    await refused('PUT', '/v1/pools/web', { name: 'www', backends: [{ nic: 'h1vm1' }] }, 400, 'name', /renaming is not supported/);
    await refused('PATCH', '/v1/vips/203.0.113.10', { address: '203.0.113.11' }, 400, 'address');
    const b = await refused('DELETE', '/v1/pools/web', undefined, 409);
    expect(b.error).toMatch(/^pool web is still used by rule web-http of vip 203\.0\.113\.10/);
    // a VIP that is another thing's address
    await refused(
      'POST',
      '/v1/vips',
      { address: '198.18.0.11', rules: [{ protocol: 'tcp', frontendPort: 80, backendPort: 9000, pool: 'web' }] },
      400,
      'address',
      /provider address of mux mux1/,
    );
    // the stateless DSR rule: backend port 80 already serves 203.0.113.10:80
    await refused(
      'POST',
      '/v1/vips',
      { address: '203.0.113.21', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'web' }] },
      400,
      'rules[0].backendPort',
      /direct server return/,
    );
    expect(await gen()).toBe(1);
  });

  it('HTTP: 404 routes, 405 methods, 415 content type, 400 bad JSON, 413 too large, a no-op write', async () => {
    expect((await ctl.req('GET', '/v1/nothing')).status).toBe(404);
    expect((await ctl.req('GET', '/v2/state')).status).toBe(404);
    const m = await ctl.req('DELETE', '/v1/vips');
    expect(m.status).toBe(405);
    expect(m.headers['allow']).toBe('GET, POST, HEAD');
    expect((await ctl.req('POST', '/v1/vips/203.0.113.10', {})).status).toBe(405);
    expect((await ctl.req('POST', '/v1/agents/mux/mux1/policy', {})).status).toBe(405);
    const t = await ctl.req('POST', '/v1/pools', { name: 'x' }, { 'content-type': 'text/plain' });
    expect(t.status).toBe(415);
    // a raw, malformed JSON body
    const { request } = await import('node:http');
    const bad = await new Promise<number>((resolve, reject) => {
      const rq = request(
        { host: '127.0.0.1', port: ctl.port, path: '/v1/pools', method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      rq.on('error', reject);
      rq.end('{"name": ');
    });
    expect(bad).toBe(400);
    const big = await ctl.req('POST', '/v1/pools', { name: 'x', pad: 'y'.repeat(5 * 1024 * 1024) });
    expect(big.status).toBe(413);
    await refused('POST', '/v1/pools', [1, 2], 400, '', /JSON object/);
    const same = await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { weight: 50 });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ generation: 1, changed: false });
    expect(await gen()).toBe(1);
  });
});

describe('controller API: vipRanges (every VIP inside a prefix delegated to the load balancer)', () => {
  const rule = { protocol: 'tcp', frontendPort: 80, backendPort: 9000, pool: 'web' };

  it('a VIP outside the ranges is refused, naming the ranges and the fix; inside, it is created', async () => {
    // examples/lab.yaml delegates 203.0.113.0/24 and 2001:db8:ff::/48
    const b = await refused(
      'POST',
      '/v1/vips',
      { address: '198.51.100.200', rules: [rule] },
      400,
      'address',
      /^VIP 198\.51\.100\.200 is outside vipRanges \(203\.0\.113\.0\/24, 2001:db8:ff::\/48\), the prefixes the router accepts from the MUXes, so no client could reach it: take an address inside one, or add a prefix that holds it to vipRanges/,
    );
    expect(errorsOf(b)).toHaveLength(1);
    expect(errorsOf(b)[0]).toMatchObject({ configPath: 'vips[2].address', value: '198.51.100.200' });
    // one bit outside the IPv6 /48
    await refused('POST', '/v1/vips', { address: '2001:db8:fe:ffff::20', rules: [rule] }, 400, 'address', /outside vipRanges/);
    expect(await gen()).toBe(1);
    const ok = await ctl.req('POST', '/v1/vips', { address: '2001:db8:ff:ffff::20', rules: [rule] });
    expect(ok.status, ok.text).toBe(201);
  });

  it('the ranges change only with the whole document (PUT /v1/state), checked against every VIP', async () => {
    const doc = toPlainConfig(labConfig()) as { vipRanges: string[] };
    await refused(
      'PUT',
      '/v1/state',
      { config: { ...doc, vipRanges: ['203.0.113.128/25', '2001:db8:ff::/48'] } },
      400,
      'vips[0].address',
      /VIP 203\.0\.113\.10 is outside vipRanges \(203\.0\.113\.128\/25/,
    );
    await refused(
      'PUT',
      '/v1/state',
      { config: { ...doc, vipRanges: ['203.0.113.1/24'] } },
      400,
      'vipRanges[0]',
      /write 203\.0\.113\.0\/24/,
    );
    expect((await ctl.req('PUT', '/v1/state', { config: { ...doc, vipRanges: [...doc.vipRanges, '198.51.100.192/26'] } })).status).toBe(
      200,
    );
    expect((await ctl.req('POST', '/v1/vips', { address: '198.51.100.200', rules: [rule] })).status).toBe(201);
  });

  it("seeded from a config without vipRanges: the VIPs' own host routes are kept, so a new VIP needs a declared range", async () => {
    await ctl.cleanup();
    ctl = await startTestController({
      init: labConfig((raw) => {
        delete raw.vipRanges;
      }),
    });
    expect(((await stateBody()) as { config: { vipRanges: string[] } }).config.vipRanges).toEqual([
      '203.0.113.10/32',
      '2001:db8:ff::10/128',
    ]);
    await refused(
      'POST',
      '/v1/vips',
      { address: '203.0.113.20', rules: [rule] },
      400,
      'address',
      /outside vipRanges \(203\.0\.113\.10\/32, 2001:db8:ff::10\/128\)/,
    );
  });

  it('a state file saved before vipRanges existed gets the ranges of its VIPs when it is opened', async () => {
    await ctl.stop();
    const { readFileSync, writeFileSync } = await import('node:fs');
    const saved = JSON.parse(readFileSync(ctl.statePath, 'utf8')) as { config: Record<string, unknown> };
    delete saved.config['vipRanges'];
    writeFileSync(ctl.statePath, JSON.stringify(saved));
    await ctl.restart();
    expect(((await stateBody()) as { config: { vipRanges: string[] } }).config.vipRanges).toEqual([
      '203.0.113.10/32',
      '2001:db8:ff::10/128',
    ]);
    await refused('POST', '/v1/vips', { address: '203.0.113.20', rules: [rule] }, 400, 'address', /outside vipRanges/);
  });
});
