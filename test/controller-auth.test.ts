// The API token: writes and agent endpoints need it, reads do not; policies are signed with it and a
// policy client that has the token applies only signed policies. slbctl sends it from --token-file.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { authorized, bearer, loadOrCreateToken, readToken, sign, signatureValid, SIGNATURE_HEADER } from '../runtime/api-token.js';
import { PolicyClient, type AppliedPolicy } from '../runtime/policy-client.js';
import { runSlbctl } from '../cli/slbctl.js';
import { labConfig } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

const TOKEN = 'ab'.repeat(32);
const until = async (what: string, f: () => boolean | Promise<boolean>, ms = 5000) => {
  const t0 = Date.now();
  while (!(await f())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('the token file', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'slbx-token-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is made once, 64 hex digits, mode 600, and read back the same', () => {
    const p = join(dir, 'api-token');
    const t = loadOrCreateToken(p);
    expect(t).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(p).mode & 0o777).toBe(0o600);
    expect(loadOrCreateToken(p)).toBe(t);
    expect(readToken(p)).toBe(t);
  });
  it('is refused when others can read it, or when it is not a token', () => {
    const p = join(dir, 't');
    writeFileSync(p, `${TOKEN}\n`, { mode: 0o644 });
    chmodSync(p, 0o644);
    expect(readToken(p)).toMatchObject({ error: expect.stringMatching(/readable by others.*chmod 600/) });
    chmodSync(p, 0o600);
    expect(readToken(p)).toBe(TOKEN);
    writeFileSync(p, 'secret\n');
    expect(readToken(p)).toMatchObject({ error: expect.stringMatching(/not 64 hex digits/) });
    expect(readToken(join(dir, 'missing'))).toMatchObject({ error: expect.stringMatching(/cannot read/) });
  });
  it('checks bearer headers and signatures exactly', () => {
    expect(authorized(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(authorized(`Bearer ${TOKEN.slice(1)}x`, TOKEN)).toBe(false);
    expect(authorized(TOKEN, TOKEN)).toBe(false);
    expect(authorized(undefined, TOKEN)).toBe(false);
    const body = '{"generation":1}';
    expect(signatureValid(TOKEN, body, sign(TOKEN, body))).toBe(true);
    expect(signatureValid(TOKEN, `${body} `, sign(TOKEN, body))).toBe(false);
    expect(signatureValid('cd'.repeat(32), body, sign(TOKEN, body))).toBe(false);
  });
});

describe('a controller with a token', () => {
  let ctl: TestController;
  beforeEach(async () => {
    ctl = await startTestController({ token: TOKEN });
  });
  afterEach(async () => {
    await ctl.cleanup();
  });

  it('refuses every change without the token (401, counted) and changes nothing', async () => {
    const before = (await ctl.req('GET', '/v1/state')).body as any;
    for (const [m, path, body] of [
      ['PATCH', '/v1/pools/web/backends/h1vm1', { drain: true }],
      ['POST', '/v1/vips', { address: '203.0.113.50', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'web' }] }],
      ['DELETE', '/v1/vips/203.0.113.10', undefined],
      ['PUT', '/v1/state', { config: before.config }],
    ] as const) {
      const r = await ctl.req(m, path, body);
      expect(r.status, `${m} ${path}`).toBe(401);
      expect((r.body as any).error).toMatch(/needs the API token/);
    }
    const wrong = await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: true }, bearer('cd'.repeat(32)));
    expect(wrong.status).toBe(401);
    const after = (await ctl.req('GET', '/v1/state')).body as any;
    expect(after.generation).toBe(before.generation);
    expect((await ctl.req('GET', '/v1/stats')).body).toMatchObject({ authentication: true, refused: { unauthorized: 5 } });
  });

  it('accepts a change with the token', async () => {
    const r = await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: true }, bearer(TOKEN));
    expect(r.status).toBe(200);
    expect((r.body as any).generation).toBe(2);
  });

  it('lets anyone read the desired state, but not act as an agent', async () => {
    expect((await ctl.req('GET', '/v1/vips')).status).toBe(200);
    expect((await ctl.req('GET', '/v1/agents/mux/mux1/policy?after=0&waitS=0')).status).toBe(401);
    expect(
      (await ctl.req('POST', '/v1/agents/host/host1/health', { results: [{ nic: 'h1vm1', probe: 'http80', state: 'down' }] })).status,
    ).toBe(401);
    expect((await ctl.req('POST', '/v1/agents/mux/mux1/ack', { generation: 1, ok: true })).status).toBe(401);
    const h = (await ctl.req('GET', '/v1/health')).body as any;
    expect(JSON.stringify(h)).not.toMatch(/"down"/); // the forged health report changed nothing
  });

  it('signs policies; a policy client with the token applies them', async () => {
    const r = await ctl.req('GET', '/v1/agents/mux/mux1/policy?after=0&waitS=0', undefined, bearer(TOKEN));
    expect(r.status).toBe(200);
    expect(signatureValid(TOKEN, r.text, r.headers[SIGNATURE_HEADER])).toBe(true);
    const applied: AppliedPolicy[] = [];
    const c = new PolicyClient({
      url: new URL(ctl.url),
      kind: 'mux',
      name: 'mux1',
      token: TOKEN,
      bootstrap: labConfig(),
      apply: (p) => {
        applied.push(p);
      },
      waitS: 1,
      backoffMinMs: 20,
      log: () => {},
    });
    c.start();
    try {
      await until('policy', () => applied.length === 1);
      expect(c.status()).toMatchObject({ authenticated: true, policiesUnsigned: 0, appliedGeneration: 1 });
    } finally {
      c.stop();
    }
  });

  it('slbctl changes state with --token-file and is refused without', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-token-'));
    const tf = join(dir, 'tok');
    writeFileSync(tf, `${TOKEN}\n`, { mode: 0o600 });
    const out: string[] = [];
    const io = {
      out: (t: string) => {
        out.push(t);
      },
      err: (t: string) => {
        out.push(t);
      },
      env: {} as NodeJS.ProcessEnv,
    };
    try {
      expect(await runSlbctl(['--controller', ctl.url, 'backend', 'drain', 'web', 'h1vm1'], io)).toBe(1);
      expect(out.join('')).toMatch(/401.*needs the API token/);
      expect(await runSlbctl(['--controller', ctl.url, '--token-file', tf, 'backend', 'drain', 'web', 'h1vm1'], io)).toBe(0);
      expect(await runSlbctl(['--controller', ctl.url, 'vip', 'list'], io)).toBe(0); // reading needs none
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a policy client with a token', () => {
  let server: Server;
  afterEach(() => new Promise<void>((r) => server.close(() => r())));

  it('refuses a policy that is not signed with its token (a forged or foreign controller)', async () => {
    const ctlState = { stateId: 's1', generation: 7, config: JSON.parse(JSON.stringify({})), health: {} };
    // a controller that does not know the token: unsigned policies (and one signed with another key)
    let n = 0;
    server = createServer((req, res) => {
      if (req.url?.includes('/policy')) {
        n++;
        const body = JSON.stringify({ ...ctlState, config: readFileSync(new URL('../examples/lab.yaml', import.meta.url), 'utf8') });
        res.writeHead(200, {
          'content-type': 'application/json',
          ...(n % 2 === 0 ? { [SIGNATURE_HEADER]: sign('cd'.repeat(32), body) } : {}),
        });
        res.end(body);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as any).port as number;
    const applied: AppliedPolicy[] = [];
    const c = new PolicyClient({
      url: new URL(`http://127.0.0.1:${port}`),
      kind: 'host',
      name: 'host1',
      token: TOKEN,
      bootstrap: labConfig(),
      apply: (p) => {
        applied.push(p);
      },
      waitS: 0,
      backoffMinMs: 10,
      backoffMaxMs: 20,
      log: () => {},
    });
    c.start();
    try {
      await until('several forged policies', () => c.status().policiesUnsigned >= 4);
      expect(applied).toHaveLength(0);
      expect(c.status().appliedGeneration).toBe(null);
      expect(c.status().lastError).toMatch(/without a valid signature/);
    } finally {
      c.stop();
    }
  });
});
