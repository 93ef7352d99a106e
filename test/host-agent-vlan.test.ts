// The host agent on a vlan network's port (issue 18, point 1; examples/lab-vlan.yaml): VXLAN from a MUX
// leaves the port as an 802.1Q frame tagged with the network's VLAN, a VXLAN network's nic on the same
// host gets no tag; the backend's tagged reply becomes an untagged DSR packet from the VIP; untagged and
// other-VLAN frames are dropped with named counters; ARP, ND and probe answers work tagged. Expected
// frames are built from scratch with the packet builder (its tag written by shared/ethernet.ts'
// writeEthernet, not by host-agent/vlan.ts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { LINKTYPE_RAW } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../shared/config.js';
import { compileHostTables } from '../host-agent/tables.js';
import { pushVlanTag } from '../host-agent/vlan.js';
import {
  newHostContext,
  processInbound,
  processOutbound,
  OUT_DSR,
  VERDICT_DROP,
  VERDICT_FORWARD,
  VERDICT_LOCAL,
  type HostContext,
} from '../host-agent/data-plane.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const HOST1_MAC = '02:00:00:00:00:21';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];
const CLIENT = '198.51.100.10';
const CLIENT6 = '2001:db8:c::10';
// examples/lab-vlan.yaml, host1: port 0 h1vm1 (tenant-a, VXLAN 5001), port 1 h1vl1 (tenant-v, VLAN 100, VNI 5100)
const VM = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10' };
const VL = { mac: '02:00:c6:13:64:0a', ip: '198.19.100.10', ip6: '2001:db8:100::10' };
const VLAN = 100;
const VIP_A = '203.0.113.10';
const VIP_V = '203.0.113.20';
const VIP_V6 = '2001:db8:ff::20';

function vlanConfig(): SlbxConfig {
  const r = parseConfig(readFileSync(new URL('../examples/lab-vlan.yaml', import.meta.url), 'utf8'), 'lab-vlan.yaml');
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'lab-vlan.yaml'));
  return r.config;
}

function newCtx(): HostContext {
  const config = vlanConfig();
  return newHostContext(
    compileHostTables(config, 'host1', 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
}

function vxlanTo(vni: number, innerMac: string, inner: (p: PacketBuilder) => PacketBuilder): Buffer {
  const p = pkt()
    .eth({ src: MUX_MAC, dst: HOST1_MAC })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni })
    .eth({ src: MUX_MAC, dst: innerMac });
  return inner(p).build();
}

function runIn(ctx: HostContext, frame: Buffer) {
  const v = processInbound(frame, frame.length, ctx);
  return {
    v,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    port: ctx.outPort,
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}
function runOut(ctx: HostContext, frame: Buffer, port: number) {
  const v = processOutbound(frame, frame.length, port, ctx);
  return {
    v,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v !== VERDICT_DROP ? ctx.outLen : 0))),
    port: ctx.outPort,
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}

/** A client's SYN to the VLAN VIP, through the MUX (VNI 5100) to h1vl1. */
const synV = () =>
  vxlanTo(5100, VL.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP_V, ttl: 63 }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN, seq: 7 }));

describe('host agent, vlan network: delivery to the port', () => {
  it('a VLAN DIP gets the frame tagged with its VLAN (100), NATed to the DIP', () => {
    const r = runIn(newCtx(), synV());
    expect(r.drop).toBeNull();
    expect(r.port).toBe(1);
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[1], dst: VL.mac, vlan: VLAN })
        .ipv4({ src: CLIENT, dst: VL.ip, ttl: 63 })
        .tcp({ sport: 40000, dport: 80, flags: TCP_SYN, seq: 7 })
        .build(),
    );
  });

  it('a VXLAN DIP on the same host gets it untagged', () => {
    const r = runIn(
      newCtx(),
      vxlanTo(5001, VM.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP_A, ttl: 63 }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN, seq: 7 })),
    );
    expect(r.port).toBe(0);
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: VM.mac })
        .ipv4({ src: CLIENT, dst: VM.ip, ttl: 63 })
        .tcp({ sport: 40000, dport: 80, flags: TCP_SYN, seq: 7 })
        .build(),
    );
    expect(dissect(r.out).first('eth')).toMatchObject({ vlan: -1 });
  });

  it('IPv6: tagged too', () => {
    const r = runIn(
      newCtx(),
      vxlanTo(5100, VL.mac, (p) => p.ipv6({ src: CLIENT6, dst: VIP_V6 }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN })),
    );
    expect(r.drop).toBeNull();
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[1], dst: VL.mac, vlan: VLAN })
        .ipv6({ src: CLIENT6, dst: VL.ip6 })
        .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
        .build(),
    );
  });

  it("the VLAN VIP in tenant-a's VNI does not reach the VLAN DIP (its MAC is not in that VNI)", () => {
    const r = runIn(
      newCtx(),
      vxlanTo(5001, VL.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP_V }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN })),
    );
    expect(r.drop).toBe('drop_in_unknown_mac');
  });
});

describe('host agent, vlan network: frames from the VM', () => {
  const replyV = (vlan: number | undefined, src = VL.ip) =>
    pkt()
      .eth({ src: VL.mac, dst: PORT_MACS[1], ...(vlan !== undefined ? { vlan } : {}) })
      .ipv4({ src, dst: CLIENT, ttl: 64 })
      .tcp({ sport: 80, dport: 40000, flags: TCP_SYN | TCP_ACK, seq: 100, ack: 8 })
      .build();

  it("the backend's tagged reply leaves by DSR untagged, from the VIP", () => {
    const ctx = newCtx();
    runIn(ctx, synV());
    const r = runOut(ctx, replyV(VLAN), 1);
    expect(r.drop).toBeNull();
    expect(r.port).toBe(OUT_DSR);
    expectFrame(
      r.out,
      pkt()
        .ipv4({ src: VIP_V, dst: CLIENT, ttl: 64 })
        .tcp({ sport: 80, dport: 40000, flags: TCP_SYN | TCP_ACK, seq: 100, ack: 8 })
        .build(),
      LINKTYPE_RAW,
    );
    expect(ctx.counters.get('out_dsr')).toBe(1);
  });

  it('an untagged frame on the trunk is dropped: drop_out_vlan_missing_tag', () => {
    const ctx = newCtx();
    runIn(ctx, synV());
    const r = runOut(ctx, replyV(undefined), 1);
    expect(r.drop).toBe('drop_out_vlan_missing_tag');
    expect(ctx.counters.get('drop_out_vlan_missing_tag')).toBe(1);
    expect(ctx.counters.get('out_dsr')).toBe(0);
  });

  it.each([200, 0, 4095])('another VLAN (%s) on the trunk is dropped: drop_out_vlan_wrong_tag', (vlan) => {
    const ctx = newCtx();
    runIn(ctx, synV());
    expect(runOut(ctx, replyV(vlan), 1).drop).toBe('drop_out_vlan_wrong_tag');
    expect(ctx.counters.get('drop_out_vlan_wrong_tag')).toBe(1);
  });

  it('a tagged frame on the VXLAN network port stays drop_out_vlan', () => {
    const ctx = newCtx();
    const f = pkt()
      .eth({ src: VM.mac, dst: PORT_MACS[0], vlan: VLAN })
      .ipv4({ src: VM.ip, dst: CLIENT })
      .tcp({ sport: 80, dport: 40000, flags: TCP_ACK })
      .build();
    expect(runOut(ctx, f, 0).drop).toBe('drop_out_vlan');
  });

  it('ARP for the gateway, tagged, is answered tagged from the port', () => {
    const ctx = newCtx();
    const r = runOut(
      ctx,
      pkt()
        .eth({ src: VL.mac, dst: 'ff:ff:ff:ff:ff:ff', vlan: VLAN })
        .arp({ op: 1, senderMac: VL.mac, senderIp: VL.ip, targetIp: '198.19.100.1' })
        .build(),
      1,
    );
    expect(r.drop).toBeNull();
    expect(r.port).toBe(1);
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[1], dst: VL.mac, vlan: VLAN })
        .arp({ op: 2, senderMac: PORT_MACS[1], senderIp: '198.19.100.1', targetMac: VL.mac, targetIp: VL.ip })
        .build(),
    );
  });

  it('neighbour solicitation for gateway6, tagged, is answered tagged', () => {
    const ctx = newCtx();
    const body = new Uint8Array(24);
    body.set([0x20, 0x01, 0x0d, 0xb8, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 0); // 2001:db8:100::1
    body.set([1, 1, ...mac(VL.mac)], 16);
    const ns = pkt()
      .eth({ src: VL.mac, dst: '33:33:ff:00:00:01', vlan: VLAN })
      .ipv6({ src: VL.ip6, dst: 'ff02::1:ff00:1', hopLimit: 255 })
      .icmpv6({ type: 135 })
      .payload(body)
      .build();
    const r = runOut(ctx, ns, 1);
    expect(r.drop).toBeNull();
    expect(r.port).toBe(1);
    const d = dissect(r.out);
    expect(d.first('eth')).toMatchObject({ src: PORT_MACS[1], dst: VL.mac, vlan: VLAN });
    expect(d.first('ipv6')).toMatchObject({ src: '2001:db8:100::1', dst: VL.ip6, hopLimit: 255 });
    expect(d.first('icmpv6')).toMatchObject({ type: 136, checksumOk: true });
  });

  it("a probe's answer (to the gateway), tagged, is for the daemon: the IP packet after the tag", () => {
    const ctx = newCtx();
    const f = pkt()
      .eth({ src: VL.mac, dst: PORT_MACS[1], vlan: VLAN })
      .ipv4({ src: VL.ip, dst: '198.19.100.1' })
      .tcp({ sport: 80, dport: 33000, flags: TCP_SYN | TCP_ACK })
      .build();
    const r = runOut(ctx, f, 1);
    expect(r.v).toBe(VERDICT_LOCAL);
    expectFrame(r.out, f.subarray(18), LINKTYPE_RAW);
  });
});

describe('pushVlanTag', () => {
  const frame = () =>
    pkt().eth({ src: PORT_MACS[0], dst: VM.mac }).ipv4({ src: CLIENT, dst: VM.ip }).udp({ sport: 1, dport: 7 }).payload('x').build();
  const golden = () =>
    pkt()
      .eth({ src: PORT_MACS[0], dst: VM.mac, vlan: 4094 })
      .ipv4({ src: CLIENT, dst: VM.ip })
      .udp({ sport: 1, dport: 7 })
      .payload('x')
      .build();

  it('with headroom: the MACs move back 4 bytes', () => {
    const f = frame();
    const buf = Buffer.alloc(f.length + 10);
    f.copy(buf, 6);
    const off = pushVlanTag(buf, 6, f.length, 4094);
    expect(off).toBe(2);
    expect(buf.subarray(off, off + f.length + 4).toString('hex')).toBe(golden().toString('hex'));
  });

  it('at offset 0 with room after: the payload moves forward 4 bytes', () => {
    const f = frame();
    const buf = Buffer.alloc(f.length + 4);
    f.copy(buf, 0);
    expect(pushVlanTag(buf, 0, f.length, 4094)).toBe(0);
    expect(buf.toString('hex')).toBe(golden().toString('hex'));
  });

  it('the 802.1Q bytes: 81 00, then PCP 0, DEI 0, VID', () => {
    const f = frame();
    const buf = Buffer.alloc(f.length + 4);
    f.copy(buf, 4);
    pushVlanTag(buf, 4, f.length, 100);
    expect(buf.subarray(12, 16).toString('hex')).toBe('81000064');
  });

  it('no room either way: -1, the frame unchanged', () => {
    const f = frame();
    const copy = Buffer.from(f);
    expect(pushVlanTag(f, 0, f.length, 100)).toBe(-1);
    expect(f.equals(copy)).toBe(true);
  });
});
