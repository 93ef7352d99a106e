// Fail-open (issue 20, point 5): a rule's allDown, drop (the default) or spread. Expected values come from
// the hand (which backends take new flows, how many slots a lone member owns, which counter moves) and
// from the independent Maglev oracle (scripts/oracle: the whole table), never from shared/selection.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { MAGLEV_EMPTY } from '../shared/maglev.js';
import { plainConfig, serializeConfig, parseConfig, validateConfig, type SlbxConfig } from '../shared/config.js';
import { buildPoolTable, type SelectionBackend } from '../shared/selection.js';
import { compileMuxTables, type HealthView, type MuxTables } from '../mux/tables.js';
import { vipServable } from '../mux/bgp/routes.js';
import { newMuxContext, processPacket, VERDICT_DROP, VERDICT_FORWARD } from '../mux/data-plane.js';
import { oraclePoolMembers, oracleTable } from '../scripts/oracle/maglev-oracle.js';
import { oracleRule } from '../scripts/oracle/expected-backend.js';
import { labConfig } from './helpers/lab-config.js';
import { runSlbctl } from '../cli/slbctl.js';
import { startTestController, type TestController } from './helpers/controller.js';

const VIP = '203.0.113.10';
const NICS = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
const allDown = (probe = 'http80'): HealthView => ({ isHealthy: (_nic, p) => p !== probe });
const downOnly = (nics: readonly string[]): HealthView => ({ isHealthy: (nic) => !nics.includes(nic) });

/** The lab config with the VIP's rules cut to web-http (and its IPv6 twin gone), allDown as given. */
function webOnly(allDownValue?: 'drop' | 'spread', edit?: (raw: any) => void): SlbxConfig {
  return labConfig((raw) => {
    raw.vips = raw.vips.filter((v: any) => v.address === VIP);
    raw.vips[0].rules = raw.vips[0].rules.filter((r: any) => r.name === 'web-http');
    if (allDownValue !== undefined) raw.vips[0].rules[0].allDown = allDownValue;
    edit?.(raw);
  });
}

const slotsOf = (t: { slots: Uint32Array; members: readonly { name: string }[] }) =>
  Array.from(t.slots, (s) => (s === MAGLEV_EMPTY ? null : t.members[s]!.name));

describe('config: rules[].allDown', () => {
  it('defaults to drop, reads spread, and writes it out (every default spelled out)', () => {
    expect(webOnly().vips[0]!.rules[0]!.allDown).toBe('drop');
    const c = webOnly('spread');
    expect(c.vips[0]!.rules[0]!.allDown).toBe('spread');
    const plain = plainConfig(c) as any;
    expect(plain.vips[0].rules[0].allDown).toBe('spread');
    const back = parseConfig(serializeConfig(c), 'x.yaml');
    expect(back.ok && back.config.vips[0]!.rules[0]!.allDown).toBe('spread');
  });
  it('refuses another value, naming the field and the values allowed', () => {
    for (const bad of ['open', true, 1]) {
      const raw = plainConfig(webOnly()) as any;
      raw.vips[0].rules[0].allDown = bad;
      const r = validateConfig(raw, 'x.yaml');
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]!.path).toBe('vips[0].rules[0].allDown');
      expect(r.errors[0]!.message).toMatch(/must be one of drop, spread/);
    }
  });
});

describe('selection: the fail-open table', () => {
  const b = (id: string, o: Partial<SelectionBackend> = {}): SelectionBackend => ({
    id,
    enabled: true,
    healthy: false,
    drained: false,
    priority: 1,
    weight: 50,
    ...o,
  });
  // by hand: a, b and c look down (c at priority 2); d is drained and e disabled, both healthy
  const pool = [
    b('a'),
    b('b', { weight: 100 }),
    b('c', { priority: 2 }),
    b('d', { drained: true, healthy: true }),
    b('e', { enabled: false, healthy: true }),
  ];

  it('drop: no level, every slot empty', () => {
    const t = buildPoolTable(pool, { size: 101 });
    expect(t.level).toBeNull();
    expect(t.failOpen).toBe(false);
    expect(new Set(t.table.slots)).toEqual(new Set([MAGLEV_EMPTY]));
  });

  it('spread: a, b and c share the slots (all priorities), d and e get none; the level is the best spread over', () => {
    const t = buildPoolTable(pool, { size: 101, allDown: 'spread' });
    expect(t.failOpen).toBe(true);
    expect(t.level).toBe(1);
    const owners = slotsOf({ slots: t.table.slots, members: t.table.members.map((name) => ({ name })) });
    expect(owners.includes(null)).toBe(false);
    expect(new Set(owners)).toEqual(new Set(['a', 'b', 'c']));
    // the oracle's table, slot for slot
    const o = oraclePoolMembers(pool, 0, 'spread');
    expect(o.failOpen).toBe(true);
    expect(o.level).toBe(1);
    expect(owners).toEqual(oracleTable(o.members, 101));
  });

  it('spread with one backend left to spread over: it owns every slot', () => {
    const t = buildPoolTable([b('a', { drained: true }), b('b', { priority: 3 }), b('c', { enabled: false })], {
      size: 7,
      allDown: 'spread',
    });
    expect(t.failOpen).toBe(true);
    expect(t.level).toBe(3);
    expect(Array.from(t.table.slots, (s) => t.table.members[s])).toEqual(['b', 'b', 'b', 'b', 'b', 'b', 'b']);
  });

  it('spread with nothing enabled and undrained: no table, as drop', () => {
    const t = buildPoolTable([b('a', { drained: true }), b('b', { enabled: false })], { size: 7, allDown: 'spread' });
    expect(t.failOpen).toBe(false);
    expect(t.level).toBeNull();
  });

  it('spread while one backend is healthy: the ordinary table, not fail-open', () => {
    const some = [b('a', { healthy: true }), b('b'), b('c')];
    const t = buildPoolTable(some, { size: 101, allDown: 'spread' });
    expect(t.failOpen).toBe(false);
    expect(t.selection.candidates).toEqual([0]);
    expect(new Set(Array.from(t.table.slots, (s) => t.table.members[s]))).toEqual(new Set(['a']));
  });
});

describe('MUX tables: allDown per rule', () => {
  it('every backend down: the spread rule fails open over all four, the drop rule of the same pool has nothing', () => {
    const c = webOnly('spread', (raw) => {
      raw.vips[0].rules.push({ name: 'web-alt', protocol: 'tcp', frontendPort: 8080, backendPort: 8000, pool: 'web', probe: 'http80' });
    });
    const t = compileMuxTables(c, allDown(), null, 1);
    const vip = t.vips4.values().next().value!;
    const spread = vip.rules.get((6 << 16) | 80)!;
    const drop = vip.rules.get((6 << 16) | 8080)!;
    expect(spread.table.failOpen).toBe(true);
    expect(spread.table.key).toBe('web/http80#fail-open');
    expect(spread.table.candidates).toEqual(NICS);
    expect(drop.table.failOpen).toBe(false);
    expect(drop.table.level).toBeNull();
    // the two rules of the VIP no longer share a table: a later fragment cannot tell them apart
    expect(vip.fragmentRule.get(6)).toBeNull();
    // the oracle's table for the spread rule, slot for slot (the oracle reads allDown from the config)
    const o = oracleRule(c, VIP, 6, 80, { down: NICS });
    expect(o.level).toBe(1);
    expect(slotsOf(spread.table)).toEqual(o.table);
    expect(oracleRule(c, VIP, 6, 8080, { down: NICS }).level).toBeNull();
  });

  it('some backends up: a spread rule uses the ordinary table (one object with the drop rules)', () => {
    const c = webOnly('spread');
    const t = compileMuxTables(c, downOnly(['h1vm1', 'h2vm2']), null, 1);
    const table = t.vips4
      .values()
      .next()
      .value!.rules.get((6 << 16) | 80)!.table;
    expect(table.failOpen).toBe(false);
    expect(table.key).toBe('web/http80');
    expect(table.candidates).toEqual(['h1vm2', 'h2vm1']);
  });

  it('a drained or disabled backend is left out of the spread', () => {
    const c = webOnly('spread', (raw) => {
      raw.pools[0].backends[0].drain = true; // h1vm1
      raw.pools[0].backends[3].enabled = false; // h2vm2
    });
    const t = compileMuxTables(c, allDown(), null, 1);
    const table = t.vips4
      .values()
      .next()
      .value!.rules.get((6 << 16) | 80)!.table;
    expect(table.failOpen).toBe(true);
    expect(table.candidates).toEqual(['h1vm2', 'h2vm1']);
    expect(new Set(slotsOf(table))).toEqual(new Set(['h1vm2', 'h2vm1']));
  });

  it('the VIP stays servable (announced) under spread and is withdrawn under drop', () => {
    const servable = (c: SlbxConfig) => vipServable(compileMuxTables(c, allDown(), null, 1).vips4.values().next().value!);
    expect(servable(webOnly('spread'))).toBe(true);
    expect(servable(webOnly('drop'))).toBe(false);
  });

  it('identical tables on every MUX: another history of nic ids and tables gives the same slots, nic for nic', () => {
    const c = webOnly('spread');
    // MUX A: started now with everything down
    const a = compileMuxTables(c, allDown(), null, 1);
    // MUX B: ran through other configs first (another nic id order, an old fail-open table, other health)
    let prev: MuxTables | null = compileMuxTables(
      webOnly('spread', (raw) => {
        raw.nics.reverse();
        raw.pools[0].backends.reverse();
        raw.pools[0].backends[0].drain = true;
      }),
      allDown(),
      null,
      1,
    );
    prev = compileMuxTables(c, downOnly(['h1vm1']), prev, 2);
    const b = compileMuxTables(c, allDown(), prev, 3);
    const ta = a.vips4
      .values()
      .next()
      .value!.rules.get((6 << 16) | 80)!.table;
    const tb = b.vips4
      .values()
      .next()
      .value!.rules.get((6 << 16) | 80)!.table;
    expect(ta.failOpen && tb.failOpen).toBe(true);
    expect(ta.members.map((m) => m.id)).not.toEqual(tb.members.map((m) => m.id)); // the ids differ...
    expect(slotsOf(tb)).toEqual(slotsOf(ta)); // ...the backends do not
  });
});

describe('MUX data plane: new flows under fail-open', () => {
  const MUX_MAC = '02:00:00:00:00:11';
  const ctxFor = (c: SlbxConfig) => {
    const tables = compileMuxTables(c, allDown(), null, 1);
    for (const h of tables.hosts.values()) {
      h.mac.set(mac('02:00:00:00:00:21'));
      h.macKnown = true;
    }
    const m = c.muxes[0]!;
    return newMuxContext({
      tables,
      localMac: mac(MUX_MAC),
      localPa4: m.address.words[0]!,
      localPa6: m.address6!.words,
      underlay6: false,
      hashSeed: c.hashSeed,
      mtu: c.fabric.mtu,
      vxlanPort: c.fabric.vxlanPort,
      flowTable: c.flowTable,
    });
  };
  const syn = (sport: number) =>
    pkt()
      .eth({ src: '02:00:00:00:00:01', dst: MUX_MAC })
      .ipv4({ src: '198.51.100.10', dst: VIP })
      .tcp({ sport, dport: 80, flags: TCP_SYN })
      .build();

  it('spread: each SYN is forwarded to the oracle backend and counted as flow_fail_open', () => {
    const c = webOnly('spread');
    const ctx = ctxFor(c);
    const o = oracleRule(c, VIP, 6, 80, { down: NICS });
    for (let i = 0; i < 20; i++) {
      const f = syn(40000 + i);
      expect(processPacket(f, f.length, ctx)).toBe(VERDICT_FORWARD);
      expect(ctx.lastNic!.name).toBe(o.choose('198.51.100.10', 40000 + i));
    }
    expect(ctx.counters.snapshot()).toMatchObject({ flow_new: 20, flow_fail_open: 20 });
    expect(ctx.counters.snapshot()['drop_no_backend']).toBeUndefined();
  });

  it('drop: each SYN is dropped as drop_no_backend, nothing counted as fail-open', () => {
    const ctx = ctxFor(webOnly('drop'));
    for (let i = 0; i < 20; i++) {
      const f = syn(40000 + i);
      expect(processPacket(f, f.length, ctx)).toBe(VERDICT_DROP);
    }
    expect(ctx.counters.snapshot()).toMatchObject({ drop_no_backend: 20 });
    expect(ctx.counters.snapshot()['flow_fail_open']).toBeUndefined();
  });
});

describe('slbctl rule add/set --all-down, rule list', () => {
  let ctl: TestController;
  beforeAll(async () => {
    ctl = await startTestController();
  });
  afterAll(async () => {
    await ctl.cleanup();
  });
  const slbctl = async (...argv: string[]) => {
    let out = '';
    let err = '';
    const code = await runSlbctl(argv, { out: (t) => void (out += t), err: (t) => void (err += t), env: { SLBX_CONTROLLER: ctl.url } });
    return { code, out, err };
  };

  it('sets spread on a rule, lists it, and the controller refuses another value naming the field', async () => {
    expect((await slbctl('rule', 'set', VIP, 'web-http', '--all-down', 'spread')).code).toBe(0);
    const rule = (await ctl.req('GET', `/v1/vips/${VIP}/rules/web-http`)).body as Record<string, unknown>;
    expect(rule['allDown']).toBe('spread');
    const list = await slbctl('rule', 'list', VIP);
    const header = list.out.split('\n')[0]!.trim().split(/\s+/);
    const row = list.out
      .split('\n')
      .find((l) => l.startsWith('web-http'))!
      .trim()
      .split(/\s+/);
    expect(row[header.indexOf('ALL-DOWN')]).toBe('spread');
    expect(
      list.out
        .split('\n')
        .find((l) => l.startsWith('echo '))!
        .trim()
        .split(/\s+/)[header.indexOf('ALL-DOWN')],
    ).toBe('drop');
    const bad = await slbctl('rule', 'set', VIP, 'web-http', '--all-down', 'open');
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/allDown/);
    expect(bad.err).toMatch(/drop, spread/);
    expect(
      (await slbctl('rule', 'add', VIP, '--protocol', 'tcp', '--frontend-port', '8443', '--pool', 'web', '--all-down', 'spread')).code,
    ).toBe(0);
    expect(((await ctl.req('GET', `/v1/vips/${VIP}/rules/tcp-8443`)).body as Record<string, unknown>)['allDown']).toBe('spread');
  });
});
