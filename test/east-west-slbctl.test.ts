// slbctl lists internal VIPs with their scope (docs/east-west.md), against a controller on 127.0.0.1
// whose state holds the lab plus one internal VIP; the lab alone keeps its three-column table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSlbctl } from '../cli/slbctl.js';
import { labConfig } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

let ctl: TestController;
beforeAll(async () => {
  ctl = await startTestController({
    init: labConfig((c) => {
      c.vips.push({
        address: '192.0.2.100',
        scope: 'internal',
        network: 'tenant-a',
        rules: [{ name: 'ew-tcp', protocol: 'tcp', frontendPort: 7000, pool: 'web' }],
      });
    }),
  });
});
afterAll(async () => {
  await ctl.cleanup();
});

async function slbctl(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runSlbctl(argv, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    env: { SLBX_CONTROLLER: ctl.url },
  });
  return { code, out, err };
}

describe('slbctl and internal VIPs', () => {
  it('vip list shows each VIP scope, and the internal VIP network', async () => {
    const r = await slbctl('vip', 'list');
    expect(r).toMatchObject({ code: 0, err: '' });
    const lines = r.out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^VIP +SCOPE +RULES +FRONTENDS$/);
    expect(lines.find((l) => l.startsWith('192.0.2.100 '))).toMatch(/^192\.0\.2\.100 +internal:tenant-a +1 +tcp\/7000$/);
    expect(lines.find((l) => l.startsWith('203.0.113.10 '))).toMatch(/^203\.0\.113\.10 +public +\d+ /);
    const json = JSON.parse((await slbctl('--json', 'vip', 'list')).out) as { address: string; scope?: string; network?: string }[];
    expect(json.find((v) => v.address === '192.0.2.100')).toMatchObject({ scope: 'internal', network: 'tenant-a' });
  });
});
