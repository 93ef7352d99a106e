// Packet fixtures for what the MUX does with the established flows of a backend when the pool changes
// (docs/reliability.md, "A removed backend is gone; a drained one finishes its flows"):
//   * removed from the pool (slbctl backend del), deleted from the config with its nic, or disabled:
//     the backend is gone, so each of its flows is re-placed at its next packet, by the new table, onto
//     the backend any MUX would choose for it (a MUX that never saw the flow computes the same), and
//     stays there; over TCP that backend has no such connection and answers with a reset (scenario
//     23-backend-removed shows it end to end);
//   * drained, down in health, another backend re-weighted or added: every flow stays where it is.
// Each row: the change, then one packet of every flow; the verdict, the exact VXLAN frame out (built with
// the packet builder from the lab config's addresses, typed here), and the counters.
import { describe, expect, it } from 'vitest';
import { mac, ip } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { IPV4_FLAG_DF } from '../shared/ipv4.js';
import { ETHERTYPE_IPV4 } from '../shared/ethernet.js';
import { hashFlowV4, vxlanSourcePort } from '../shared/flow-hash.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileMuxTables, ALL_HEALTHY, type HealthView } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_FORWARD, type MuxContext } from '../mux/data-plane.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const ROUTER_MAC = '02:00:00:00:00:01';
const HOST_MACS: Record<string, string> = { host1: '02:00:00:00:00:21', host2: '02:00:00:00:00:22' };
const HOST_PA: Record<string, string> = { host1: '198.18.0.21', host2: '198.18.0.22' };
// examples/lab.yaml's nics (and the fifth one some rows add), typed again here, not read from the tables
const NICS: Record<string, { host: string; mac: string }> = {
  h1vm1: { host: 'host1', mac: '02:00:c0:00:02:0a' },
  h1vm2: { host: 'host1', mac: '02:00:c0:00:02:0b' },
  h2vm1: { host: 'host2', mac: '02:00:c0:00:02:0c' },
  h2vm2: { host: 'host2', mac: '02:00:c0:00:02:0d' },
  h2vm3: { host: 'host2', mac: '02:00:c0:00:02:0e' },
};
const CLIENT = '198.51.100.10';
const VIP = '203.0.113.10';
const SEED = 0x736c6278;
/** The backend whose flows each row is about. */
const SUBJECT = 'h2vm1';
const ESTABLISHED = Array.from({ length: 400 }, (_, i) => 30000 + i);
const SEEN_ONCE = Array.from({ length: 200 }, (_, i) => 45000 + i);

function newCtx(config: SlbxConfig, health: HealthView = ALL_HEALTHY): MuxContext {
  const tables = compileMuxTables(config, health, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST_MACS[h.name]!));
    h.macKnown = true;
  }
  const mux = config.muxes[0]!;
  return newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: mux.address.words[0]!,
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: config.flowTable,
  });
}

const tcp4 = (sport: number, flags: number, payload = '') =>
  pkt()
    .eth({ src: ROUTER_MAC, dst: MUX_MAC })
    .ipv4({ src: CLIENT, dst: VIP, flags: IPV4_FLAG_DF })
    .tcp({ sport, dport: 80, flags })
    .payload(payload)
    .build();

/** The VXLAN frame a MUX must send for `client` to `nic` (the IP packet starts at byte 14). */
function encap(client: Buffer, nic: string, sport: number, ipId: number): Buffer {
  const n = NICS[nic]!;
  const h = hashFlowV4(ip(CLIENT).words[0]!, ip(VIP).words[0]!, 6, sport, 80, 5, SEED);
  return pkt()
    .eth({ src: MUX_MAC, dst: HOST_MACS[n.host]! })
    .ipv4({ src: '198.18.0.11', dst: HOST_PA[n.host]!, id: ipId, ttl: 64, flags: 0 })
    .udp({ sport: vxlanSourcePort(h), dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ src: MUX_MAC, dst: n.mac, type: ETHERTYPE_IPV4 })
    .payload(client.subarray(14))
    .build();
}

/** Sends one frame; returns the nic it went to (from the frame's inner destination MAC), checking the whole frame. */
function send(ctx: MuxContext, frame: Buffer, sport: number): string {
  const id = (ctx.ipId + 1) & 0xffff;
  expect(processPacket(frame, frame.length, ctx)).toBe(VERDICT_FORWARD);
  const out = Buffer.from(ctx.out.subarray(0, ctx.outLen));
  const innerMac = [...out.subarray(50, 56)].map((b) => b.toString(16).padStart(2, '0')).join(':');
  const nic = Object.keys(NICS).find((k) => NICS[k]!.mac === innerMac);
  if (nic === undefined) expect.fail(`inner destination MAC ${innerMac} is no nic of the lab`);
  expectFrame(out, encap(frame, nic, sport, id));
  return nic;
}

type Outcome = 'kept' | 're-placed';
interface Row {
  change: string;
  config: () => SlbxConfig;
  health?: HealthView;
  subject: Outcome;
}
const withFifthNic = (raw: any) => {
  raw.nics.push({
    name: 'h2vm3',
    host: 'host2',
    network: 'tenant-a',
    port: 'h2vm3',
    mac: '02:00:c0:00:02:0e',
    addresses: ['192.0.2.14', '2001:db8:d::14'],
  });
};
const backendOf = (raw: any, nic: string) => raw.pools[0].backends.find((b: any) => b.nic === nic);

const ROWS: Row[] = [
  {
    change: `${SUBJECT} removed from the pool (slbctl backend del)`,
    subject: 're-placed',
    config: () =>
      labConfig((raw) => {
        withFifthNic(raw);
        raw.pools[0].backends = raw.pools[0].backends.filter((b: any) => b.nic !== SUBJECT);
      }),
  },
  {
    change: `${SUBJECT}'s nic deleted from the config with its pool membership`,
    subject: 're-placed',
    config: () =>
      labConfig((raw) => {
        withFifthNic(raw);
        raw.pools[0].backends = raw.pools[0].backends.filter((b: any) => b.nic !== SUBJECT);
        raw.nics = raw.nics.filter((n: any) => n.name !== SUBJECT);
      }),
  },
  {
    change: `${SUBJECT} disabled (slbctl backend disable)`,
    subject: 're-placed',
    config: () =>
      labConfig((raw) => {
        withFifthNic(raw);
        backendOf(raw, SUBJECT).enabled = false;
      }),
  },
  {
    change: `${SUBJECT} drained (slbctl backend drain)`,
    subject: 'kept',
    config: () =>
      labConfig((raw) => {
        withFifthNic(raw);
        backendOf(raw, SUBJECT).drain = true;
      }),
  },
  {
    change: `${SUBJECT} down by its probe`,
    subject: 'kept',
    config: () => labConfig(withFifthNic),
    health: { isHealthy: (nic) => nic !== SUBJECT },
  },
  {
    change: 'another backend re-weighted (h1vm1 weight 200)',
    subject: 'kept',
    config: () =>
      labConfig((raw) => {
        withFifthNic(raw);
        backendOf(raw, 'h1vm1').weight = 200;
      }),
  },
  {
    change: 'a fifth backend added (h2vm3)',
    subject: 'kept',
    config: () =>
      labConfig((raw) => {
        withFifthNic(raw);
        raw.pools[0].backends.push({ nic: 'h2vm3' });
      }),
  },
];

describe('mux: the established flows of a backend when the pool changes', () => {
  it.each(ROWS)('$change: its flows are $subject, every other flow stays', (row) => {
    const before = labConfig(withFifthNic);
    const after = row.config();
    const ctx = newCtx(before);
    // established flows (SYN, then the handshake's ACK: trusted) and flows seen once (a SYN: untrusted)
    const first = new Map<number, string>();
    for (const p of ESTABLISHED) {
      first.set(p, send(ctx, tcp4(p, TCP_SYN), p));
      expect(send(ctx, tcp4(p, TCP_ACK), p)).toBe(first.get(p));
    }
    for (const p of SEEN_ONCE) first.set(p, send(ctx, tcp4(p, TCP_SYN), p));
    const onSubject = [...first.entries()].filter(([, n]) => n === SUBJECT).map(([p]) => p);
    expect(ESTABLISHED.filter((p) => first.get(p) === SUBJECT).length).toBeGreaterThan(50); // a quarter of 400, give or take
    expect(SEEN_ONCE.filter((p) => first.get(p) === SUBJECT).length).toBeGreaterThan(20);
    const c0 = ctx.counters.snapshot();

    ctx.tables = compileMuxTables(after, row.health ?? ALL_HEALTHY, ctx.tables, 2);
    // what a MUX that never saw these flows would choose with the new tables (after a failover, say)
    const fresh = newCtx(after, row.health ?? ALL_HEALTHY);
    const members = new Set(after.pools[0]!.backends.filter((b) => b.enabled).map((b) => b.nic));
    const second = new Map<number, string>();
    for (const p of [...ESTABLISHED, ...SEEN_ONCE]) {
      const nic = send(ctx, tcp4(p, TCP_ACK, 'GET / HTTP/1.1\r\n\r\n'), p);
      second.set(p, nic);
      if (first.get(p) !== SUBJECT || row.subject === 'kept') {
        expect(nic, `port ${p}`).toBe(first.get(p));
      } else {
        expect(nic, `port ${p}`).not.toBe(SUBJECT);
        expect(members.has(nic), `port ${p}: ${nic} is an enabled member of the new pool`).toBe(true);
        expect(nic, `port ${p}: where a MUX without the flow puts it`).toBe(send(fresh, tcp4(p, TCP_ACK), p));
      }
    }
    const d = (k: string) => (ctx.counters.snapshot()[k] ?? 0) - (c0[k] ?? 0);
    const replaced = row.subject === 're-placed' ? onSubject.length : 0;
    const seenOnceKept = SEEN_ONCE.length - (row.subject === 're-placed' ? SEEN_ONCE.filter((p) => first.get(p) === SUBJECT).length : 0);
    expect({
      flow_replaced: d('flow_replaced'),
      flow_hit: d('flow_hit'),
      flow_promoted: d('flow_promoted'),
      flow_new: d('flow_new'),
    }).toEqual({
      flow_replaced: replaced,
      flow_hit: ESTABLISHED.length - (row.subject === 're-placed' ? ESTABLISHED.filter((p) => first.get(p) === SUBJECT).length : 0),
      flow_promoted: seenOnceKept,
      flow_new: 0,
    });
    // a re-placed flow stays on its new backend; a kept one on its old
    for (const p of [...ESTABLISHED, ...SEEN_ONCE]) expect(send(ctx, tcp4(p, TCP_ACK), p), `port ${p}`).toBe(second.get(p));
    // new connections reach the subject only if the change left it a candidate for new flows
    const fresh4 = new Set<string>();
    for (let p = 50000; p < 50400; p++) fresh4.add(send(ctx, tcp4(p, TCP_SYN), p));
    const candidate = row.subject === 'kept' && !/drained|down/.test(row.change);
    expect(fresh4.has(SUBJECT)).toBe(candidate);
  });
});
