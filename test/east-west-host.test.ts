// Packet-in / packet-out fixtures for the host agent's east-west path (docs/east-west.md): a VM's packet
// to an internal VIP -> VXLAN to a MUX; a signed redirect -> later packets PA to PA (or delivered on this
// host); the DIP's reply -> VXLAN straight to the client's host; the client's host delivers it; every
// refused redirect and every isolation drop counted. Expected frames are built from scratch with the
// packet builder (full checksums), never by the code under test.
import { describe, expect, it } from 'vitest';
import { ip, mac, writeIpAddr } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN } from '../shared/tcp.js';
import { hashFlowV4, hashFlowV6, vxlanSourcePort } from '../shared/flow-hash.js';
import { REDIRECT_LEN, REDIRECT_PORT, REDIRECT_SIGNED_LEN, newRedirect, writeRedirect } from '../shared/redirect.js';
import { redirectMacFor } from '../runtime/redirect-mac.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileHostTables, macKey } from '../host-agent/tables.js';
import {
  newHostContext,
  processInbound,
  processOutbound,
  VERDICT_CONSUMED,
  VERDICT_DROP,
  VERDICT_FORWARD,
  type HostContext,
} from '../host-agent/data-plane.js';
import { OUT_FABRIC } from '../host-agent/east-west.js';
import { FASTPATH_CLOSING_S } from '../host-agent/flow-table.js';
import { ewStatus, listHostFlows } from '../host-agent/east-west-io.js';
import { writeHostFlows } from '../host-agent/metrics.js';
import { PromWriter } from '../shared/prom-text.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const TOKEN = 'aa'.repeat(32);
const SEED = 0x736c6278;
const VNI = 5001;
const VIP = '192.0.2.100';
const VIP6 = '2001:db8:d::100';
const MUX = [
  { pa: '198.18.0.11', mac: '02:00:00:00:00:11' },
  { pa: '198.18.0.12', mac: '02:00:00:00:00:12' },
];
const HOST = {
  host1: { pa: '198.18.0.21', mac: '02:00:00:00:00:21' },
  host2: { pa: '198.18.0.22', mac: '02:00:00:00:00:22' },
};
const VM = {
  h1vm1: { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' },
  h1vm2: { mac: '02:00:c0:00:02:0b', ip: '192.0.2.11', ip6: '2001:db8:d::11' },
  h2vm1: { mac: '02:00:c0:00:02:0c', ip: '192.0.2.12', ip6: '2001:db8:d::12' },
  other: { mac: '02:00:c0:00:03:0a', ip: '192.0.2.10' }, // tenant-b, the same address as h1vm1
};
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02', '02:00:00:01:00:03'];

/** The lab with an internal VIP (tcp 7000 and udp 7001 to backend 7000/7001, v4 and v6) and tenant-b's VM on host1. */
function ewConfig(): SlbxConfig {
  return labConfig((c) => {
    c.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1' });
    c.nics.push({ name: 'h1vmb', host: 'host1', network: 'tenant-b', mac: VM.other.mac, addresses: [VM.other.ip] });
    c.pools.push({ name: 'web-b', backends: [{ nic: 'h1vmb' }] });
    const rules = [
      { name: 'ew-tcp', protocol: 'tcp', frontendPort: 7000, pool: 'web' },
      { name: 'ew-udp', protocol: 'udp', frontendPort: 7001, pool: 'web' },
    ];
    c.vips.push({ address: VIP, scope: 'internal', network: 'tenant-a', rules });
    c.vips.push({ address: VIP6, scope: 'internal', network: 'tenant-a', rules });
    c.vips.push({
      address: '192.0.2.200',
      scope: 'internal',
      network: 'tenant-b',
      rules: [{ protocol: 'tcp', frontendPort: 7000, pool: 'web-b' }],
    });
  });
}

function newCtx(host: 'host1' | 'host2', config = ewConfig()): HostContext {
  const ctx = newHostContext(
    compileHostTables(config, host, 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  // the neighbours resolved (host-agent/neighbors.ts does it in the daemon)
  for (const p of ctx.tables.peers) {
    const m =
      p.kind === 'mux' ? MUX.find((x) => x.pa === p.address.text)?.mac : Object.values(HOST).find((x) => x.pa === p.address.text)?.mac;
    if (m !== undefined) ctx.peerMacs[p.index] = macKey(mac(m), 0);
  }
  ctx.ew.fabricMac.set(mac(HOST[host].mac));
  ctx.ew.mac = redirectMacFor(TOKEN);
  ctx.ew.unixS = 1_000_000;
  ctx.ew.nowS = 100;
  return ctx;
}

interface Tcp4 {
  src: string;
  dst: string;
  sport: number;
  dport: number;
  flags?: number;
  payload?: string;
  seq?: number;
}
const tcp4 = (p: PacketBuilder, t: Tcp4): PacketBuilder => {
  const b = p
    .ipv4({ src: t.src, dst: t.dst, id: 7, flags: 2 })
    .tcp({ sport: t.sport, dport: t.dport, flags: t.flags ?? TCP_ACK, seq: t.seq ?? 1000 });
  return t.payload !== undefined ? b.payload(t.payload) : b;
};

/** A frame from a VM on its port (to the gateway's MAC). */
function fromVm(vmMac: string, portMac: string, t: Tcp4): Buffer {
  return tcp4(pkt().eth({ src: vmMac, dst: portMac }), t).build();
}

/** VXLAN over the IPv4 underlay as the host agent writes it: IP id 0, DF clear, UDP checksum zero. */
function vxlan(
  o: { srcPa: string; srcMac: string; dstPa: string; dstMac: string; innerDst: string; innerSrc: string; hash: number; vni?: number },
  inner: (p: PacketBuilder) => PacketBuilder,
): Buffer {
  const p = pkt()
    .eth({ src: o.srcMac, dst: o.dstMac })
    .ipv4({ src: o.srcPa, dst: o.dstPa, id: 0, flags: 0, ttl: 64 })
    .udp({ sport: vxlanSourcePort(o.hash), dport: 4789, checksum: 'zero' })
    .vxlan({ vni: o.vni ?? VNI })
    .eth({ src: o.innerSrc, dst: o.innerDst });
  return inner(p).build();
}

function out(ctx: HostContext, frame: Buffer, port: number) {
  const v = processOutbound(frame, frame.length, port, ctx);
  return {
    v,
    frame: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    port: ctx.outPort,
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}
function inb(ctx: HostContext, frame: Buffer) {
  const v = processInbound(frame, frame.length, ctx);
  return {
    v,
    frame: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    port: ctx.outPort,
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}
const count = (ctx: HostContext, name: string): number => ctx.counters.values[ctx.counters.index[name as 'in_packets']]!;

const FLOW = { src: VM.h1vm1.ip, dst: VIP, sport: 40000, dport: 7000 };
const HASH = hashFlowV4(ip(FLOW.src).words[0]!, ip(VIP).words[0]!, 6, FLOW.sport, FLOW.dport, 5, SEED);
/** docs/east-west.md: the MUX is the flow hash modulo the number of MUXes, in config order. */
const CHOSEN = MUX[(HASH >>> 0) % 2]!;

interface RedirectOpts {
  from?: { pa: string; mac: string };
  sport?: number;
  target?: { mac: string; ip: string; hostPa: string };
  expiresS?: number;
  token?: string;
  vni?: number;
  corrupt?: number;
  proto?: number;
  dport?: number;
}
/** A redirect frame as a MUX sends it; the HMAC by runtime/redirect-mac.ts (its golden vector is openssl's). */
function redirect(o: RedirectOpts = {}): Buffer {
  const from = o.from ?? CHOSEN;
  const r = newRedirect();
  r.family = 4;
  r.protocol = o.proto ?? 6;
  r.vni = o.vni ?? VNI;
  r.expiresS = o.expiresS ?? 1_000_030;
  writeIpAddr(ip(FLOW.src), r.src, 0);
  writeIpAddr(ip(VIP), r.dst, 0);
  r.srcPort = o.sport ?? FLOW.sport;
  r.dstPort = o.dport ?? FLOW.dport;
  const t = o.target ?? { mac: VM.h2vm1.mac, ip: VM.h2vm1.ip, hostPa: HOST.host2.pa };
  writeIpAddr(ip(t.ip), r.dip, 0);
  writeIpAddr(ip(t.hostPa), r.dipHostPa, 0);
  r.dipMac.set(mac(t.mac));
  const body = new Uint8Array(REDIRECT_LEN);
  writeRedirect(r, body, 0);
  redirectMacFor(o.token ?? TOKEN)(body, 0, REDIRECT_SIGNED_LEN, body, REDIRECT_SIGNED_LEN);
  if (o.corrupt !== undefined) body[o.corrupt]! ^= 0x40;
  return pkt()
    .eth({ src: from.mac, dst: HOST.host1.mac })
    .ipv4({ src: from.pa, dst: HOST.host1.pa })
    .udp({ sport: REDIRECT_PORT, dport: REDIRECT_PORT })
    .payload(body)
    .build();
}

describe('east-west source side (host1)', () => {
  it('a VM packet to an internal VIP goes in VXLAN to the MUX the flow hash picks, byte for byte', () => {
    const ctx = newCtx('host1');
    const f = fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_SYN });
    const r = out(ctx, f, 0);
    expect([r.v, r.port, r.drop]).toEqual([VERDICT_FORWARD, OUT_FABRIC, null]);
    const want = vxlan(
      {
        srcPa: HOST.host1.pa,
        srcMac: HOST.host1.mac,
        dstPa: CHOSEN.pa,
        dstMac: CHOSEN.mac,
        innerDst: CHOSEN.mac,
        innerSrc: HOST.host1.mac,
        hash: HASH,
      },
      (p) => tcp4(p, { ...FLOW, flags: TCP_SYN }),
    );
    expectFrame(r.frame, want);
    expect(count(ctx, 'ew_to_mux')).toBe(1);
    expect(ctx.ew.flows.countByKind(ctx.ew.nowS)).toEqual({ to_mux: 1 });
  });

  it('skips a MUX whose MAC is not resolved', () => {
    const ctx = newCtx('host1');
    const chosenPeer = ctx.tables.peers.find((p) => p.address.text === CHOSEN.pa)!;
    ctx.peerMacs[chosenPeer.index] = -1;
    const other = MUX.find((m) => m !== CHOSEN)!;
    const r = out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_SYN }), 0);
    expect(r.v).toBe(VERDICT_FORWARD);
    expect(r.frame.subarray(30, 34)).toEqual(Buffer.from(other.pa.split('.').map(Number)));
    for (const p of ctx.tables.peers) if (p.kind === 'mux') ctx.peerMacs[p.index] = -1;
    expect(out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, sport: 40001, flags: TCP_SYN }), 0).drop).toBe('drop_out_ew_no_mux');
  });

  it("another tenant's VM (the same address, VNI 5002) cannot reach tenant-a's internal VIP", () => {
    const ctx = newCtx('host1');
    const r = out(ctx, fromVm(VM.other.mac, PORT_MACS[2]!, { ...FLOW, flags: TCP_SYN }), 2);
    expect([r.v, r.drop]).toEqual([VERDICT_DROP, 'drop_out_ew_other_network']);
    // and a port without a rule on the VIP
    expect(out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, dport: 7999, flags: TCP_SYN }), 0).drop).toBe('drop_out_ew_no_rule');
  });

  it('after a valid redirect the flow goes PA to PA to the DIP host, the inner packet unchanged; FIN makes the entry closing', () => {
    const ctx = newCtx('host1');
    out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_SYN }), 0);
    const rd = inb(ctx, redirect());
    expect([rd.v, rd.drop]).toEqual([VERDICT_CONSUMED, null]);
    expect(count(ctx, 'redirects_accepted')).toBe(1);
    const data = { ...FLOW, flags: TCP_ACK | TCP_PSH, payload: 'hello east-west' };
    const r = out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, data), 0);
    expect([r.v, r.port]).toEqual([VERDICT_FORWARD, OUT_FABRIC]);
    const want = vxlan(
      {
        srcPa: HOST.host1.pa,
        srcMac: HOST.host1.mac,
        dstPa: HOST.host2.pa,
        dstMac: HOST.host2.mac,
        innerDst: VM.h2vm1.mac,
        innerSrc: HOST.host1.mac,
        hash: HASH,
      },
      (p) => tcp4(p, data),
    );
    expectFrame(r.frame, want);
    expect(count(ctx, 'ew_fastpath_out')).toBe(1);
    // the same redirect again is harmless
    expect(inb(ctx, redirect()).v).toBe(VERDICT_CONSUMED);
    expect(count(ctx, 'redirects_repeated')).toBe(1);
    // FIN: this packet and the flow's last ACK still take the fast path (never back to a MUX) ...
    expect(out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_ACK | TCP_FIN }), 0).frame.subarray(30, 34)).toEqual(
      Buffer.from([198, 18, 0, 22]),
    );
    expect(ctx.ew.flows.countByKind(ctx.ew.nowS)).toEqual({ fastpath_closing: 1 });
    expect(out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_ACK }), 0).frame.subarray(30, 34)).toEqual(
      Buffer.from([198, 18, 0, 22]),
    );
    // ... and the entry ends FASTPATH_CLOSING_S after the last packet, not the TCP idle timeout later
    ctx.ew.nowS += FASTPATH_CLOSING_S;
    expect(ctx.ew.flows.countByKind(ctx.ew.nowS)).toEqual({});
    expect(out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW }), 0).frame.subarray(30, 34)).toEqual(
      Buffer.from(CHOSEN.pa.split('.').map(Number)),
    );
  });

  /** slbx_host_flows and slbx_host_flows_max as GET /metrics writes them from the /status part. */
  const flowSamples = (ctx: HostContext) => {
    const w = new PromWriter();
    writeHostFlows(w, ewStatus(ctx.ew) as { flows: Record<string, number>; maxFastpathFlows: number; maxFlows: number });
    const text = w.text();
    const at = (re: RegExp) => Number(re.exec(text)?.[1]);
    return {
      to_mux: at(/^slbx_host_flows\{kind="to_mux"\} (\S+)$/m),
      fastpath: at(/^slbx_host_flows\{kind="fastpath"\} (\S+)$/m),
      fastpath_closing: at(/^slbx_host_flows\{kind="fastpath_closing"\} (\S+)$/m),
      max: at(/^slbx_host_flows_max (\S+)$/m),
    };
  };

  it('GET /flows, /status and /metrics list the entries: to_mux with its MUX, then fastpath with the backend and its host', () => {
    const ctx = newCtx('host1');
    out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_SYN }), 0);
    const muxName = ctx.tables.peers.find((p) => p.address.text === CHOSEN.pa)!.name;
    const entry = { vni: VNI, protocol: 'tcp', client: `${FLOW.src}:${FLOW.sport}`, vip: `${VIP}:${FLOW.dport}` };
    expect(listHostFlows(ctx.ew, ctx.tables, 10)).toEqual([{ kind: 'to_mux', ...entry, mux: muxName, expiresInS: 240 }]);
    expect(flowSamples(ctx)).toEqual({ to_mux: 1, fastpath: 0, fastpath_closing: 0, max: 1_000_000 }); // the whole table (hostMaxFlows)
    expect(inb(ctx, redirect()).v).toBe(VERDICT_CONSUMED);
    expect(flowSamples(ctx)).toEqual({ to_mux: 0, fastpath: 1, fastpath_closing: 0, max: 1_000_000 });
    expect(listHostFlows(ctx.ew, ctx.tables, 10)).toEqual([
      { kind: 'fastpath', ...entry, backend: 'h2vm1', host: 'host2', expiresInS: 240 },
    ]);
    expect(ewStatus(ctx.ew)).toMatchObject({ flows: { to_mux: 0, fastpath: 1 }, maxFastpathFlows: 100_000, redirectKey: true });
    expect(listHostFlows(ctx.ew, ctx.tables, 0)).toEqual([]);
  });

  it('a redirect to a DIP on the same host: NAT to the DIP and delivery on its port, nothing leaves the host', () => {
    const ctx = newCtx('host1');
    out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_SYN }), 0);
    expect(inb(ctx, redirect({ target: { mac: VM.h1vm2.mac, ip: VM.h1vm2.ip, hostPa: HOST.host1.pa } })).v).toBe(VERDICT_CONSUMED);
    const data = { ...FLOW, flags: TCP_ACK | TCP_PSH, payload: 'local' };
    const r = out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, data), 0);
    expect([r.v, r.port]).toEqual([VERDICT_FORWARD, 1]);
    expectFrame(r.frame, fromVm(PORT_MACS[1]!, VM.h1vm2.mac, { ...data, dst: VM.h1vm2.ip }));
    expect(count(ctx, 'ew_fastpath_local')).toBe(1);
  });

  const refusals: [string, RedirectOpts, string][] = [
    ['a bad signature', { corrupt: REDIRECT_SIGNED_LEN + 3 }, 'drop_redirect_bad_signature'],
    ['a changed field under a good signature', { corrupt: 60 }, 'drop_redirect_bad_signature'],
    ['another key', { token: 'bb'.repeat(32) }, 'drop_redirect_bad_signature'],
    ['a flow the host never sent', { sport: 40999 }, 'drop_redirect_unbound'],
    ['the MUX the flow was not sent to', { from: MUX.find((m) => m !== CHOSEN)! }, 'drop_redirect_unbound'],
    ['a host, not a MUX', { from: HOST.host2 }, 'drop_redirect_not_mux'],
    ['expired', { expiresS: 1_000_000 }, 'drop_redirect_expired'],
    [
      "a target of another tenant's network",
      { target: { mac: VM.other.mac, ip: VM.other.ip, hostPa: HOST.host1.pa } },
      'drop_redirect_bad_target',
    ],
    ['a target at the wrong host', { target: { mac: VM.h2vm1.mac, ip: VM.h2vm1.ip, hostPa: HOST.host1.pa } }, 'drop_redirect_bad_target'],
    ['a target with the wrong DIP', { target: { mac: VM.h2vm1.mac, ip: VM.h1vm2.ip, hostPa: HOST.host2.pa } }, 'drop_redirect_bad_target'],
    ['another VNI', { vni: 5002 }, 'drop_redirect_unbound'],
  ];
  it.each(refusals)('refuses a redirect with %s, counted, and changes nothing', (_what, o, counter) => {
    const ctx = newCtx('host1');
    const syn = out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW, flags: TCP_SYN }), 0).frame;
    const r = inb(ctx, redirect(o));
    expect([r.v, r.drop]).toEqual([VERDICT_DROP, counter]);
    expect(count(ctx, counter)).toBe(1);
    expect(count(ctx, 'redirects_accepted')).toBe(0);
    // the next packet still goes to the MUX, as the SYN did
    const next = out(ctx, fromVm(VM.h1vm1.mac, PORT_MACS[0]!, { ...FLOW }), 0).frame;
    expect(next.subarray(26, 34)).toEqual(syn.subarray(26, 34));
  });
  it('refuses a short redirect as malformed', () => {
    const ctx = newCtx('host1');
    const f = pkt()
      .eth({ src: CHOSEN.mac, dst: HOST.host1.mac })
      .ipv4({ src: CHOSEN.pa, dst: HOST.host1.pa })
      .udp({ sport: REDIRECT_PORT, dport: REDIRECT_PORT })
      .payload('SLBR')
      .build();
    expect(inb(ctx, f).drop).toBe('drop_redirect_malformed');
  });
});

describe('east-west return path', () => {
  const reply = { src: VM.h2vm1.ip, dst: VM.h1vm1.ip, sport: 7000, dport: 40000, flags: TCP_ACK | TCP_PSH, payload: 'pong' };
  it("the DIP's reply is NATed to the VIP and sent in VXLAN straight to the client's host", () => {
    const ctx = newCtx('host2');
    const r = out(ctx, fromVm(VM.h2vm1.mac, PORT_MACS[0]!, reply), 0);
    expect([r.v, r.port, r.drop]).toEqual([VERDICT_FORWARD, OUT_FABRIC, null]);
    const hash = hashFlowV4(ip(VM.h1vm1.ip).words[0]!, ip(VIP).words[0]!, 6, 40000, 7000, 5, SEED);
    const want = vxlan(
      {
        srcPa: HOST.host2.pa,
        srcMac: HOST.host2.mac,
        dstPa: HOST.host1.pa,
        dstMac: HOST.host1.mac,
        innerDst: VM.h1vm1.mac,
        innerSrc: HOST.host2.mac,
        hash,
      },
      (p) => tcp4(p, { ...reply, src: VIP }),
    );
    expectFrame(r.frame, want);
    expect(count(ctx, 'ew_return')).toBe(1);
  });
  it('a reply to a client on the same host is delivered on its port', () => {
    const ctx = newCtx('host1');
    const r = out(ctx, fromVm(VM.h1vm2.mac, PORT_MACS[1]!, { ...reply, src: VM.h1vm2.ip }), 1);
    expect([r.v, r.port]).toEqual([VERDICT_FORWARD, 0]);
    expectFrame(r.frame, fromVm(PORT_MACS[0]!, VM.h1vm1.mac, { ...reply, src: VIP }));
  });
  it('a reply to an address no nic of the network has is dropped', () => {
    const ctx = newCtx('host2');
    expect(out(ctx, fromVm(VM.h2vm1.mac, PORT_MACS[0]!, { ...reply, dst: '192.0.2.77' }), 0).drop).toBe('drop_out_ew_unknown_client');
  });
  it("the client's host delivers the VIP's reply unchanged; another VNI's VIP is refused", () => {
    const ctx = newCtx('host1');
    const inner = { ...reply, src: VIP };
    const f = vxlan(
      {
        srcPa: HOST.host2.pa,
        srcMac: HOST.host2.mac,
        dstPa: HOST.host1.pa,
        dstMac: HOST.host1.mac,
        innerDst: VM.h1vm1.mac,
        innerSrc: HOST.host2.mac,
        hash: 1,
      },
      (p) => tcp4(p, inner),
    );
    const r = inb(ctx, f);
    expect([r.v, r.port, r.drop]).toEqual([VERDICT_FORWARD, 0, null]);
    expectFrame(r.frame, fromVm(PORT_MACS[0]!, VM.h1vm1.mac, inner));
    expect(count(ctx, 'ew_reply_in')).toBe(1);
    // tenant-b's VM, same address: tenant-a's internal VIP is no source for it
    const g = vxlan(
      {
        srcPa: HOST.host2.pa,
        srcMac: HOST.host2.mac,
        dstPa: HOST.host1.pa,
        dstMac: HOST.host1.mac,
        innerDst: VM.other.mac,
        innerSrc: HOST.host2.mac,
        hash: 1,
        vni: 5002,
      },
      (p) => tcp4(p, inner),
    );
    expect(inb(ctx, g).drop).toBe('drop_in_not_vip_of_vni');
  });
  it('the destination host NATs Fastpath VXLAN from another host like the MUX path', () => {
    const ctx = newCtx('host2');
    const data = { ...FLOW, flags: TCP_ACK | TCP_PSH, payload: 'hello' };
    const f = vxlan(
      {
        srcPa: HOST.host1.pa,
        srcMac: HOST.host1.mac,
        dstPa: HOST.host2.pa,
        dstMac: HOST.host2.mac,
        innerDst: VM.h2vm1.mac,
        innerSrc: HOST.host1.mac,
        hash: HASH,
      },
      (p) => tcp4(p, data),
    );
    const r = inb(ctx, f);
    expect([r.v, r.port]).toEqual([VERDICT_FORWARD, 0]);
    expectFrame(r.frame, fromVm(PORT_MACS[0]!, VM.h2vm1.mac, { ...data, dst: VM.h2vm1.ip }));
  });
});

describe('east-west over IPv6 (IPv4 underlay)', () => {
  it('a VM packet to an IPv6 internal VIP goes to the MUX; the reply comes back straight to its host', () => {
    const ctx = newCtx('host1');
    const inner = (p: PacketBuilder, src: string, dst: string, sport: number, dport: number) =>
      p.ipv6({ src, dst }).udp({ sport, dport }).payload('datagram');
    const f = inner(pkt().eth({ src: VM.h1vm1.mac, dst: PORT_MACS[0]! }), VM.h1vm1.ip6, VIP6, 50000, 7001).build();
    const r = out(ctx, f, 0);
    expect([r.v, r.port, r.drop]).toEqual([VERDICT_FORWARD, OUT_FABRIC, null]);
    const hash = hashFlowV6(ip(VM.h1vm1.ip6).words, 0, ip(VIP6).words, 0, 17, 50000, 7001, 5, SEED);
    const m = MUX[(hash >>> 0) % 2]!;
    expectFrame(
      r.frame,
      vxlan(
        { srcPa: HOST.host1.pa, srcMac: HOST.host1.mac, dstPa: m.pa, dstMac: m.mac, innerDst: m.mac, innerSrc: HOST.host1.mac, hash },
        (p) => inner(p, VM.h1vm1.ip6, VIP6, 50000, 7001),
      ),
    );
    const ctx2 = newCtx('host2');
    const back = out(ctx2, inner(pkt().eth({ src: VM.h2vm1.mac, dst: PORT_MACS[0]! }), VM.h2vm1.ip6, VM.h1vm1.ip6, 7001, 50000).build(), 0);
    const h2 = hashFlowV6(ip(VM.h1vm1.ip6).words, 0, ip(VIP6).words, 0, 17, 50000, 7001, 5, SEED);
    expectFrame(
      back.frame,
      vxlan(
        {
          srcPa: HOST.host2.pa,
          srcMac: HOST.host2.mac,
          dstPa: HOST.host1.pa,
          dstMac: HOST.host1.mac,
          innerDst: VM.h1vm1.mac,
          innerSrc: HOST.host2.mac,
          hash: h2,
        },
        (p) => inner(p, VIP6, VM.h1vm1.ip6, 7001, 50000),
      ),
    );
  });
});
