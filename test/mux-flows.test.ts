// GET /flows of the MUX (mux/flow-list.ts): both flow tables are listed, IPv6 flows with their addresses
// in RFC 5952 text inside brackets, each with the backend the MUX chose. The expected backend comes from
// the independent oracle (scripts/oracle), the expected text is written out here.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_FORWARD, type MuxContext } from '../mux/data-plane.js';
import { listFlows } from '../mux/flow-list.js';
import { oracleRule } from '../scripts/oracle/expected-backend.js';
import { labConfig } from './helpers/lab-config.js';

const MUX_MAC = '02:00:00:00:00:11';
const ROUTER_MAC = '02:00:00:00:00:01';
const HOST_MACS: Record<string, string> = { host1: '02:00:00:00:00:21', host2: '02:00:00:00:00:22' };

function newCtx(): MuxContext {
  const config = labConfig();
  const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST_MACS[h.name]!));
    h.macKnown = true;
  }
  const mux = config.muxes[0]!;
  return newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: mux.address.words[0]!,
    localPa6: mux.address6!.words,
    underlay6: false,
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: config.flowTable,
  });
}

const tcp6 = (src: string, sport: number, flags: number) =>
  pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv6({ src, dst: '2001:db8:ff::10' }).tcp({ sport, dport: 80, flags }).build();
const tcp4 = (src: string, sport: number, flags: number) =>
  pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv4({ src, dst: '203.0.113.10' }).tcp({ sport, dport: 80, flags }).build();

/** A TCP flow's first two packets (SYN, then ACK): a flow seen twice is in the trusted table. */
function open(ctx: MuxContext, build: (flags: number) => Buffer): void {
  for (const flags of [TCP_SYN, TCP_ACK]) {
    const f = build(flags);
    expect(processPacket(f, f.length, ctx)).toBe(VERDICT_FORWARD);
  }
}

describe('mux GET /flows', () => {
  it('lists an IPv6 flow with its addresses, ports and backend', () => {
    const ctx = newCtx();
    open(ctx, (flags) => tcp6('2001:db8:c::10', 40000, flags));
    const expectedNic = oracleRule(labConfig(), '2001:db8:ff::10', 6, 80).choose('2001:db8:c::10', 40000);
    expect(expectedNic).not.toBeNull();
    const flows = listFlows(ctx, 100);
    expect(flows).toHaveLength(1);
    expect(flows[0]).toMatchObject({ src: '[2001:db8:c::10]:40000', dst: '[2001:db8:ff::10]:80', protocol: 'tcp', nic: expectedNic });
    expect(flows[0]!.idleExpiresInS).toBeGreaterThan(0);
  });

  it('lists IPv4 and IPv6 flows together, IPv4 first, and keeps to the limit', () => {
    const ctx = newCtx();
    open(ctx, (flags) => tcp6('2001:db8:c::11', 40001, flags));
    open(ctx, (flags) => tcp4('198.51.100.10', 40002, flags));
    const flows = listFlows(ctx, 100);
    expect(flows.map((f) => [f.src, f.dst, f.nic])).toEqual([
      ['198.51.100.10:40002', '203.0.113.10:80', oracleRule(labConfig(), '203.0.113.10', 6, 80).choose('198.51.100.10', 40002)],
      ['[2001:db8:c::11]:40001', '[2001:db8:ff::10]:80', oracleRule(labConfig(), '2001:db8:ff::10', 6, 80).choose('2001:db8:c::11', 40001)],
    ]);
    expect(listFlows(ctx, 1)).toHaveLength(1);
  });
});
