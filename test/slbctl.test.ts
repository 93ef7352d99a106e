// slbctl against a controller on 127.0.0.1 (no namespaces): tables, --json, --help on every command,
// exit codes (0 done, 1 refused or unreachable, 2 usage), and the commands that change backends,
// rules and VIPs, wait for the agents, show health, agents, counters and flows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { runSlbctl, formatTable, slbctlCommands } from '../cli/slbctl.js';
import { parseConfig } from '../shared/config.js';
import { toPlainConfig } from '../controller/document.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

let ctl: TestController;
beforeAll(async () => {
  ctl = await startTestController();
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

describe('slbctl', () => {
  it('formats aligned tables', () => {
    expect(
      formatTable(
        ['A', 'LONGER', 'C'],
        [
          ['xxxx', 'y', 'z'],
          ['', 'yyyyyyyy', ''],
        ],
      ),
    ).toBe('A     LONGER    C\nxxxx  y         z\n      yyyyyyyy\n');
  });

  it('vip list / show, as tables and as JSON', async () => {
    let r = await slbctl('vip', 'list');
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toBe(
      'VIP              RULES  FRONTENDS\n' +
        '203.0.113.10     5      tcp/80 udp/7 tcp/8080 udp/7003 udp/7002\n' +
        '2001:db8:ff::10  2      tcp/80 udp/7\n',
    );
    expect((await slbctl('vip')).out).toBe(r.out); // the object alone lists
    r = await slbctl('--json', 'vip', 'list');
    expect(JSON.parse(r.out)).toEqual((await ctl.req('GET', '/v1/vips')).body);
    r = await slbctl('vip', 'show', '2001:db8:ff::10');
    expect(r.out).toContain(
      'vip 2001:db8:ff::10: 2 rules\nNAME      PROTO  FRONTEND  BACKEND  POOL  DIST     PROBE   ALL-DOWN\nweb-http  tcp    80        80       web   5-tuple  http80  drop\n',
    );
    r = await slbctl('vip', 'show', '203.0.113.99');
    expect(r).toMatchObject({ code: 1, out: '', err: 'slbctl: 404: no vip 203.0.113.99\n' });
  });

  it('--help on every command exits 0 and shows its usage', async () => {
    for (const words of slbctlCommands()) {
      const cmd = words.filter((w) => /^[a-z]/.test(w));
      const r = await slbctl(...cmd, '--help');
      expect(r.code, cmd.join(' ')).toBe(0);
      expect(r.out, cmd.join(' ')).toContain(`usage: slbctl ${cmd.join(' ')}`);
    }
    expect((await slbctl('--help')).out).toContain('backend drain POOL NIC');
    expect((await slbctl('help')).code).toBe(0);
    expect((await slbctl('backend', '--help')).out).toContain('slbctl backend drain POOL NIC');
  });

  it('usage errors exit 2; an unreachable controller exits 1', async () => {
    expect((await slbctl()).code).toBe(2);
    expect(await slbctl('frobnicate')).toMatchObject({ code: 2, err: expect.stringContaining("unknown command 'frobnicate'") });
    expect(await slbctl('backend', 'drain', 'web')).toMatchObject({ code: 2, err: expect.stringContaining('missing NIC') });
    expect(await slbctl('backend', 'set', 'web', 'h1vm1', '--weight', 'heavy')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--weight must be a whole number'),
    });
    expect(await slbctl('backend', 'set', 'web', 'h1vm1')).toMatchObject({ code: 2, err: expect.stringContaining('nothing to change') });
    expect(await slbctl('vip', 'list', '--bogus')).toMatchObject({ code: 2, err: expect.stringContaining('unknown option --bogus') });
    expect(await slbctl('rule', 'add', '203.0.113.10', '--protocol', 'tcp')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--frontend-port, --pool'),
    });
    expect(await slbctl('vip', 'show', 'a', 'b')).toMatchObject({ code: 2, err: expect.stringContaining("unexpected argument 'b'") });
    expect((await slbctl('--controller', 'ftp://x', 'vip', 'list')).code).toBe(2);
    const r = await slbctl('--controller', 'http://127.0.0.1:1', 'vip', 'list');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/cannot reach the controller at http:\/\/127\.0\.0\.1:1\/: .*ECONNREFUSED/);
  });

  it('refusals exit 1 and print the field; --json prints the API error body', async () => {
    const g = ((await ctl.req('GET', '/v1/state')).body as { generation: number }).generation;
    let r = await slbctl('backend', 'set', 'web', 'h1vm1', '--weight', '1001');
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toBe(
      'slbctl: 400: refused: 1 problem in the result; nothing was changed\n  weight: must be an integer 1..1000 (got 1001)\n',
    );
    r = await slbctl('backend', 'set', 'web', 'h1vm1', '--weight', '0');
    expect(r.err).toMatch(/weight: must be an integer 1\.\.1000; 0 is refused: use drain: true/);
    r = await slbctl('backend', 'set', 'web', 'h1vm1', '--priority', '6');
    expect(r.err).toMatch(/\n {2}priority: must be an integer 1\.\.5/);
    r = await slbctl('rule', 'add', '203.0.113.10', '--protocol', 'tcp', '--frontend-port', '70000', '--pool', 'web');
    expect(r.err).toMatch(/\n {2}frontendPort: must be an integer 1\.\.65535 \(got 70000\)/);
    r = await slbctl('rule', 'add', '203.0.113.99', '--protocol', 'tcp', '--frontend-port', '81', '--pool', 'web');
    expect(r).toMatchObject({ code: 1, err: 'slbctl: 404: no vip 203.0.113.99\n' });
    r = await slbctl('rule', 'add', '203.0.113.10', '--protocol', 'tcp', '--frontend-port', '80', '--pool', 'web', '--name', 'again');
    expect(r.err).toMatch(/frontendPort: tcp port 80 of this VIP is already taken by rules\[0\]/);
    r = await slbctl('api', 'POST', '/v1/muxes', '{"name":"mux3","address":"2001:db8:f::13"}');
    expect(r).toMatchObject({ code: 1, err: expect.stringMatching(/address: must be an IPv4 address, not IPv6; put it in 'address6'/) });
    r = await slbctl('--json', 'backend', 'set', 'web', 'h1vm1', '--weight', '1001');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).errors[0]).toMatchObject({ path: 'weight', configPath: 'pools[0].backends[0].weight', value: 1001 });
    expect(((await ctl.req('GET', '/v1/state')).body as { generation: number }).generation).toBe(g);
  });

  it('backend commands change the pool; backend list shows it; a repeat is a no-op', async () => {
    let r = await slbctl('backend', 'drain', 'web', 'h1vm1');
    expect(r.out).toMatch(/^generation \d+: backend h1vm1 of pool web drained \(no new flows\)\n$/);
    expect((await slbctl('backend', 'drain', 'web', 'h1vm1')).out).toMatch(/^unchanged \(generation \d+\)/);
    await slbctl('backend', 'set', 'web', 'h2vm1', '--weight', '100', '--priority', '2');
    await slbctl('backend', 'disable', 'web', 'h2vm2');
    r = await slbctl('backend', 'list', 'web');
    expect(r.out).toBe(
      'NIC    HOST   ADDRESSES                  PRIORITY  WEIGHT  ENABLED  DRAIN  HEALTH\n' +
        'h1vm1  host1  192.0.2.10,2001:db8:d::10  1         50      yes      yes    unknown\n' +
        'h1vm2  host1  192.0.2.11,2001:db8:d::11  1         50      yes      no     unknown\n' +
        'h2vm1  host2  192.0.2.12,2001:db8:d::12  2         100     yes      no     unknown\n' +
        'h2vm2  host2  192.0.2.13,2001:db8:d::13  1         50      no       no     unknown\n',
    );
    await slbctl('backend', 'undrain', 'web', 'h1vm1');
    await slbctl('backend', 'enable', 'web', 'h2vm2');
    await slbctl('backend', 'del', 'web', 'h2vm2');
    r = await slbctl('backend', 'add', 'web', 'h2vm2', '--weight', '7', '--drain');
    expect(r.code).toBe(0);
    r = await slbctl('--json', 'backend', 'list', 'web');
    expect(JSON.parse(r.out)[3]).toEqual({ nic: 'h2vm2', priority: 1, weight: 7, enabled: true, drain: true });
    expect((await slbctl('pool', 'list')).out).toMatch(/^POOL {2}BACKENDS {2}ACTIVE {2}RULES\nweb {3}4 {9}3 {7}203\.0\.113\.10\/web-http/);
    expect((await slbctl('pool', 'add', 'alt', '--backend', 'h1vm1,h1vm2')).code).toBe(0);
    expect((await slbctl('pool', 'show', 'alt')).out).toContain('pool alt: latencySensitivityMs 0\nNIC ');
    expect((await slbctl('pool', 'del', 'alt')).code).toBe(0);
  });

  it('rules and VIPs: add, set, del', async () => {
    let r = await slbctl(
      'vip',
      'add',
      '203.0.113.30',
      '--protocol',
      'tcp',
      '--frontend-port',
      '80',
      '--backend-port',
      '8082',
      '--pool',
      'web',
    );
    expect(r).toMatchObject({ code: 0, out: expect.stringMatching(/^generation \d+: vip 203\.0\.113\.30 added\n$/) });
    r = await slbctl(
      'rule',
      'add',
      '203.0.113.30',
      '--protocol',
      'udp',
      '--frontend-port',
      '53',
      '--pool',
      'web',
      '--distribution',
      '2-tuple',
      '--probe',
      'tcp80',
    );
    expect(r.code).toBe(0);
    r = await slbctl('rule', 'set', '203.0.113.30', 'udp-53', '--probe', 'none', '--distribution', '3-tuple');
    expect(r.code).toBe(0);
    r = await slbctl('rule', 'list', '203.0.113.30');
    expect(r.out).toBe(
      'NAME    PROTO  FRONTEND  BACKEND  POOL  DIST     PROBE  ALL-DOWN\ntcp-80  tcp    80        8082     web   5-tuple  -      drop\nudp-53  udp    53        53       web   3-tuple  -      drop\n',
    );
    expect((await slbctl('rule', 'del', '203.0.113.30', 'udp-53')).code).toBe(0);
    expect((await slbctl('vip', 'del', '203.0.113.30')).code).toBe(0);
    expect((await slbctl('probe', 'add', 'tcp7', '--protocol', 'tcp', '--port', '7')).code).toBe(0);
    expect((await slbctl('probe', 'list')).out).toContain('tcp7    tcp    7     -        5000ms    2000ms   2   2');
    expect((await slbctl('probe', 'del', 'tcp7')).code).toBe(0);
    expect((await slbctl('nic', 'list')).out).toContain('h1vm1  host1  tenant-a  h1vm1  02:00:c0:00:02:0a  192.0.2.10,2001:db8:d::10');
    expect((await slbctl('mux', 'show', 'mux1')).out).toBe('name:     mux1\naddress:  198.18.0.11\naddress6: 2001:db8:f::11\n');
  });

  it('state, state --yaml (a valid config), state apply, generations', async () => {
    let r = await slbctl('state');
    expect(r.out).toMatch(/^generation \d+ \(state [0-9a-f]{16}\)\nvips: 2 \(1 IPv4, 1 IPv6\)/);
    r = await slbctl('state', '--yaml');
    const parsed = parseConfig(r.out, 'state.yaml');
    expect(parsed.ok).toBe(true);
    const file = join(ctl.dir, 'new.yaml');
    writeFileSync(file, r.out.replace('latencySensitivityMs: 0', 'latencySensitivityMs: 3'));
    r = await slbctl('state', 'apply', file);
    expect(r.out).toMatch(/^generation \d+: config replaced from /);
    expect(((await ctl.req('GET', '/v1/pools/web')).body as { latencySensitivityMs: number }).latencySensitivityMs).toBe(3);
    writeFileSync(file, 'networks: [\n');
    r = await slbctl('state', 'apply', file);
    expect(r).toMatchObject({ code: 1, err: expect.stringMatching(/YAML syntax error/) });
    r = await slbctl('generations');
    expect(r.out).toMatch(/^GEN +AT +CAUSE\n/);
    expect(r.out).toContain('PUT /v1/state');
    // --yaml is the controller's document, as a config file
    expect(parseYaml((await slbctl('state', '--yaml')).out)).toEqual(
      ((await ctl.req('GET', '/v1/state')).body as { config: unknown }).config,
    );
    expect(toPlainConfig(labConfig())).not.toEqual(((await ctl.req('GET', '/v1/state')).body as { config: unknown }).config);
  });

  it('agents, wait (with the time to each ack), health, counters and flows from the agents', async () => {
    const s = (await ctl.req('GET', '/v1/state')).body as { stateId: string; generation: number };
    for (const [k, n] of [
      ['mux', 'mux1'],
      ['mux', 'mux2'],
      ['host', 'host1'],
    ]) {
      await ctl.req('POST', `/v1/agents/${k}/${n}/ack`, { generation: s.generation, ok: true, stateId: s.stateId, applyMs: 2 });
    }
    let r = await slbctl('agents');
    expect(r.out).toMatch(/^KIND +NAME +APPLIED +CURRENT +BEHIND +CONNECTED +LAST-SEEN +LAST-ERROR\n/);
    expect(r.out).toMatch(new RegExp(`mux +mux1 +${s.generation} +${s.generation} +no +yes +now +-`));
    expect(r.out).toMatch(new RegExp(`host +host2 +- +${s.generation} +yes +no +- +-`));
    r = await slbctl('wait', '--kind', 'mux', '--wait-s', '2');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(
      new RegExp(
        `^generation ${s.generation} \\(.*\\): applied by 2/2 agents within \\d+ ms of the change \\(last mux: \\d+ ms; slowest: mux mux\\d\\)\n`,
      ),
    );
    r = await slbctl('wait', String(s.generation), '--wait-s', '0.2');
    expect(r.code).toBe(1);
    expect(r.out).toContain('still waiting for host/host2');
    // --wait on a change: complete when every agent acks it
    const pending = slbctl('backend', 'set', 'web', 'h1vm1', '--weight', '9', '--wait', '--timeout', '5');
    await new Promise((res) => setTimeout(res, 300));
    const g2 = s.generation + 1;
    for (const [k, n] of [
      ['mux', 'mux1'],
      ['mux', 'mux2'],
      ['host', 'host1'],
      ['host', 'host2'],
    ]) {
      await ctl.req('POST', `/v1/agents/${k}/${n}/ack`, { generation: g2, ok: true, stateId: s.stateId });
    }
    r = await pending;
    expect(r.code).toBe(0);
    expect(r.out).toMatch(
      new RegExp(
        `^generation ${g2}: backend h1vm1 of pool web set to weight 9\ngeneration ${g2} \\(PATCH /v1/pools/web/backends/h1vm1\\): applied by 4/4 agents within \\d+ ms of the change \\(last mux: \\d+ ms; slowest: `,
      ),
    );
    // health
    await ctl.req('POST', '/v1/agents/host/host1/health', {
      results: [{ nic: 'h1vm1', probe: 'http80', state: 'down', detail: 'http 503' }],
    });
    r = await slbctl('health');
    expect(r.out).toMatch(/h1vm1 +http80 +down +host1 +now +now +http 503\n/);
    expect(r.out).toMatch(/h2vm1 +http80 +unknown \(not reported\) +host2/);
    expect((await slbctl('backend', 'list', 'web')).out).toMatch(/h1vm1 .* down \(http80\)\n/);
    // counters and flows come from the heartbeats
    await ctl.req('POST', '/v1/agents/mux/mux1/status', {
      status: { generation: 3, flows: { ipv4: 2, ipv6: 0 }, counters: { rx_packets: 10, tx_packets: 9, drop_not_vip: 1 } },
      flows: [{ src: '198.51.100.10:40000', dst: '203.0.113.10:80', protocol: 'tcp', nic: 'h1vm2', idleExpiresInS: 230 }],
    });
    r = await slbctl('counters');
    expect(r.out).toMatch(/^KIND +NAME +HEARTBEAT +TABLES-GEN +PKTS-IN +PKTS-OUT +DROPS +FLOWS\nmux +mux1 +now +3 +10 +9 +1 +2\n/);
    expect(r.out).toMatch(/host +host2 +- +- +- +- +- +-\n/);
    r = await slbctl('counters', 'mux1');
    expect(r.out).toBe(
      'mux mux1, heartbeat now, tables generation 3\nCOUNTER       VALUE\nrx_packets    10\ntx_packets    9\ndrop_not_vip  1\n',
    );
    expect((await slbctl('counters', 'nosuch')).code).toBe(1);
    r = await slbctl('flows', 'mux1');
    expect(r.out).toBe(
      'mux mux1: 2 flows (2 IPv4, 0 IPv6), heartbeat now\nSRC                  DST              PROTO  NIC    IDLE-EXPIRES\n198.51.100.10:40000  203.0.113.10:80  tcp    h1vm2  230s\n',
    );
    expect((await slbctl('flows', 'mux2')).code).toBe(1);
    // a host agent's east-west entries (docs/east-west.md): its name instead of a MUX's
    await ctl.req('POST', '/v1/agents/host/host1/status', {
      status: {
        generation: 3,
        eastWest: {
          flows: { to_mux: 1, fastpath: 1, dsr: 0, snat_out: 1, snat_in: 1 },
          maxFlows: 1_000_000,
          quotas: { eastWest: { max: 100_000, used: 2 }, dsr: { max: 400_000, used: 0 }, snat: { max: 500_000, used: 2 } },
        },
        counters: {},
      },
      flows: [
        {
          kind: 'fastpath',
          vni: 5001,
          protocol: 'tcp',
          client: '198.19.1.20:40000',
          vip: '198.19.0.100:7000',
          backend: 'h2vm1',
          host: 'host2',
          expiresInS: 239,
        },
        { kind: 'to_mux', vni: 5001, protocol: 'udp', client: '198.19.1.20:40001', vip: '198.19.0.100:7001', mux: 'mux2', expiresInS: 30 },
        {
          kind: 'snat_out',
          vni: 5001,
          protocol: 'tcp',
          client: '192.0.2.10:40000',
          vip: '198.51.100.5:9000',
          backend: 'h1vm1',
          frontend: '203.0.113.200:1024',
          expiresInS: 200,
        },
      ],
    });
    r = await slbctl('flows', 'host1');
    expect(r.out).toBe(
      'host host1: 4 entries of 1000000 in one flow table (1 to_mux, 1 fastpath, 1 snat_out, 1 snat_in), quotas eastWest 2/100000, dsr 0/400000, snat 2/500000, heartbeat now\n' +
        'KIND      CLIENT             VIP                PROTO  VNI   VIA                            IDLE-EXPIRES\n' +
        'fastpath  198.19.1.20:40000  198.19.0.100:7000  tcp    5001  h2vm1 on host2                 239s\n' +
        'to_mux    198.19.1.20:40001  198.19.0.100:7001  udp    5001  mux2                           30s\n' +
        'snat_out  192.0.2.10:40000   198.51.100.5:9000  tcp    5001  h1vm1 from 203.0.113.200:1024  200s\n',
    );
    // counters: a host agent's FLOWS are its one table's entries, every kind (1 + 1 + 1 + 1)
    expect((await slbctl('counters')).out).toMatch(/\nhost +host1 +now +3 +0 +0 +0 +4\n/);
  });
});

describe('slbctl against a controller with an API token', () => {
  const TOKEN = '0123456789abcdef'.repeat(4); // a token is 64 hex digits
  let tc: TestController;
  let dir: string;
  beforeAll(async () => {
    tc = await startTestController({ token: TOKEN });
    dir = tc.dir;
    writeFileSync(join(dir, 'token'), `${TOKEN}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'wrong-token'), `${'fedcba9876543210'.repeat(4)}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'state.yaml'), readFileSync(LAB_YAML_PATH, 'utf8'));
  });
  afterAll(async () => {
    await tc.cleanup();
  });

  const run = async (env: Record<string, string>, ...argv: string[]) => {
    let out = '';
    let err = '';
    const code = await runSlbctl(argv, {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
      env: { SLBX_CONTROLLER: tc.url, ...env },
    });
    return { code, out, err };
  };
  const refusedCount = async () =>
    ((await tc.req('GET', '/v1/stats')).body as { refused: { unauthorized?: number } }).refused.unauthorized ?? 0;
  // a value for each argument word of `slbctl --help`, so that every command reaches the API
  const SAMPLE: Record<string, string> = {
    VIP: '203.0.113.10',
    RULE: 'web-alt',
    POOL: 'web',
    NIC: 'h1vm1',
    PROBE: 'http80',
    NETWORK: 'tenant-a',
    MUX: 'mux1',
    HOST: 'host1',
    '[AGENT]': 'mux1',
    '[GEN]': '1',
    METHOD: 'POST',
    PATH: '/v1/agents/mux/mux1/ack',
    '[JSON]': '{}',
  };
  const OPTIONS: Record<string, string[]> = {
    'vip add': ['--protocol', 'tcp', '--frontend-port', '81', '--pool', 'web'],
    'rule add': ['--protocol', 'tcp', '--frontend-port', '82', '--pool', 'web'],
    'rule set': ['--frontend-port', '83'],
    'pool add': ['--backend', 'h1vm1'],
    wait: ['--wait-s', '0.1'],
    'backend add': ['--priority', '1'],
    'backend set': ['--weight', '7'],
    'probe add': ['--protocol', 'tcp', '--port', '80'],
  };

  it('every command the controller refuses for want of the token says it needs the token and how to give it, exits 1, prints no table', async () => {
    const refusedCommands: string[] = [];
    for (const words of slbctlCommands()) {
      const cmd = words.filter((w) => /^[a-z]/.test(w)).join(' ');
      const argv = [
        ...words.map((w) => (/^[a-z]/.test(w) ? w : w === 'FILE' ? join(dir, 'state.yaml') : (SAMPLE[w] ?? w))),
        ...(OPTIONS[cmd] ?? []),
      ];
      const before = await refusedCount();
      const r = await run({}, ...argv, '--timeout', '5');
      if ((await refusedCount()) === before) continue; // a read of the desired state: no token needed
      refusedCommands.push(cmd);
      expect(r.code, cmd).toBe(1);
      expect(r.out, cmd).toBe('');
      expect(r.err, cmd).toMatch(
        /^slbctl: 401: (GET|POST|PUT|PATCH|DELETE) \/v1\/\S+ needs the API token, and none was given: use --token-file FILE or set SLBX_TOKEN_FILE=FILE .*runs\/lab\/NAME\/api-token/,
      );
    }
    // the commands of issue 11 point 9, and every kind of change, are among them
    for (const cmd of ['counters', 'flows', 'backend drain', 'backend set', 'vip add', 'rule del', 'state apply', 'pool add'])
      expect(refusedCommands, cmd).toContain(cmd);
  });

  it('counters without the token is an error, not a table of dashes; with it, the table', async () => {
    let r = await run({}, 'counters');
    expect(r).toMatchObject({ code: 1, out: '' });
    expect(r.err).toContain('needs the API token, and none was given');
    r = await run({ SLBX_TOKEN_FILE: join(dir, 'token') }, 'counters');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^KIND +NAME +HEARTBEAT/);
    expect(r.out).toMatch(/mux +mux1 +- +- +- +- +- +-\n/); // no heartbeat yet: dashes, rightly
  });

  it('a wrong token says which file it came from; --token-file and SLBX_TOKEN_FILE both work', async () => {
    let r = await run({ SLBX_TOKEN_FILE: join(dir, 'wrong-token') }, 'backend', 'drain', 'web', 'h1vm1');
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      `401: the controller refused the API token from SLBX_TOKEN_FILE (${join(dir, 'wrong-token')}) for PATCH /v1/pools/web/backends/h1vm1`,
    );
    r = await run({}, '--token-file', join(dir, 'wrong-token'), 'flows', 'mux1');
    expect(r.err).toContain(
      `401: the controller refused the API token from ${join(dir, 'wrong-token')} for GET /v1/agents/mux/mux1/status`,
    );
    r = await run({}, '--token-file', join(dir, 'token'), 'backend', 'drain', 'web', 'h1vm1');
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toMatch(/^generation \d+: backend h1vm1 of pool web drained/);
  });
});
