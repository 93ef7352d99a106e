// The data-plane paths the micro benches time or count: the same frames through the MUX's processPacket
// and the host agent's processInbound and processOutbound, per path (TCP/UDP, IPv4/IPv6, a new flow or an
// existing one, 64- and 1400-byte frames), built with this build's packet builder from the lab config.
// The data planes come from a Planes value: this build's (currentPlanes, for micro.ts) or another dist/
// root's (loadPlanes, for micro-count.ts comparing two builds on identical frames).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { mac } from '../../shared/addr.js';
import type { SlbxConfig } from '../../shared/config.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../../shared/tcp.js';
import * as muxPlane from '../../mux/data-plane.js';
import * as muxTables from '../../mux/tables.js';
import * as hostPlane from '../../host-agent/data-plane.js';
import * as hostTables from '../../host-agent/tables.js';

type MuxContext = muxPlane.MuxContext;
type HostContext = hostPlane.HostContext;

/** One build's data planes and their tables. */
export interface Planes {
  mux: typeof muxPlane;
  muxTables: typeof muxTables;
  host: typeof hostPlane;
  hostTables: typeof hostTables;
}

export const currentPlanes: Planes = { mux: muxPlane, muxTables, host: hostPlane, hostTables };

/** The data planes of another dist/ root (an older build). */
export async function loadPlanes(root: string): Promise<Planes> {
  const at = (rel: string) => pathToFileURL(join(root, rel)).href;
  return {
    mux: (await import(at('mux/data-plane.js'))) as Planes['mux'],
    muxTables: (await import(at('mux/tables.js'))) as Planes['muxTables'],
    host: (await import(at('host-agent/data-plane.js'))) as Planes['host'],
    hostTables: (await import(at('host-agent/tables.js'))) as Planes['hostTables'],
  };
}

export const MUX_MAC = '02:00:00:00:00:11';
export const ROUTER_MAC = '02:00:00:00:00:01';
export const HOST1_MAC = '02:00:00:00:00:21';
export const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];
export const NIC = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };
export const CLIENT = '198.51.100.10';
export const CLIENT6 = '2001:db8:c::10';
export const VIP = '203.0.113.10';
export const VIP6 = '2001:db8:ff::10';
export const FRAMES = 4096; // distinct flows per path (a power of two)

export function newMux(config: SlbxConfig, planes: Planes = currentPlanes): MuxContext {
  const tables = planes.muxTables.compileMuxTables(config, planes.muxTables.ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST1_MAC));
    h.macKnown = true;
  }
  return planes.mux.newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: config.muxes[0]!.address.words[0]!,
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: { ...config.flowTable, maxFlows: 10_000_000 },
  });
}

export interface Case {
  plane: 'mux' | 'host-in' | 'host-out';
  path: string;
  /** One iteration; i counts up from 0. Returns the verdict (checked once, before timing). */
  step: (i: number) => number;
  /** host agent: the restore copy alone. */
  copy?: (i: number) => number;
}

export function payload(frameLen: number, headers: number): Uint8Array {
  return new Uint8Array(Math.max(0, frameLen - headers));
}

function muxCases(config: SlbxConfig, planes: Planes, frames: number): Case[] {
  const cases: Case[] = [];
  const processPacket = planes.mux.processPacket;
  const add = (path: string, frames: Buffer[], isNew: boolean, v6: boolean) => {
    const ctx = newMux(config, planes);
    const mask = frames.length - 1;
    cases.push({
      plane: 'mux',
      path,
      step: isNew
        ? (i) => {
            if ((i & mask) === 0) (v6 ? ctx.flows6 : ctx.flows4).clear();
            const f = frames[i & mask]!;
            return processPacket(f, f.length, ctx);
          }
        : (i) => {
            const f = frames[i & mask]!;
            return processPacket(f, f.length, ctx);
          },
    });
  };
  const eth = () => pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC });
  const range = (fn: (k: number) => Buffer) => Array.from({ length: frames }, (_, k) => fn(k));
  const udp4 = (len: number) =>
    range((k) =>
      eth()
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 1024 + k, dport: 7, checksum: 'zero' })
        .payload(payload(len, 42))
        .build(),
    );
  const tcp4 = (flags: number) =>
    range((k) =>
      eth()
        .ipv4({ src: CLIENT, dst: VIP })
        .tcp({ sport: 1024 + k, dport: 80, flags })
        .build(),
    );
  const udp6 = () =>
    range((k) =>
      eth()
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(64, 62))
        .build(),
    );
  const tcp6 = (flags: number) =>
    range((k) =>
      eth()
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .tcp({ sport: 1024 + k, dport: 80, flags })
        .build(),
    );
  add('udp4 existing flow, 64 B', udp4(64), false, false);
  add('udp4 new flow, 64 B', udp4(64), true, false);
  add('udp4 existing flow, 1400 B', udp4(1400), false, false);
  add('tcp4 existing flow (ACK)', tcp4(TCP_ACK), false, false);
  add('tcp4 new flow (SYN)', tcp4(TCP_SYN), true, false);
  add('udp6 existing flow', udp6(), false, true);
  add('udp6 new flow', udp6(), true, true);
  add('tcp6 existing flow (ACK)', tcp6(TCP_ACK), false, true);
  add('tcp6 new flow (SYN)', tcp6(TCP_SYN), true, true);
  return cases;
}

function hostCases(config: SlbxConfig, planes: Planes, frames: number): Case[] {
  const cases: Case[] = [];
  const { processInbound, processOutbound } = planes.host;
  const newHost = (): HostContext =>
    planes.host.newHostContext(
      planes.hostTables.compileHostTables(config, 'host1', 1),
      config.fabric.vxlanPort,
      PORT_MACS.map((m) => mac(m)),
    );
  /**
   * seed: the clients' packets of the replies' flows, given to processInbound first: a reply leaves by
   * DSR only for a flow the host agent recorded (host-agent/dsr-flows.ts), so each host-out path
   * measures a recorded flow's reply (the entry found, refreshed for TCP), not the drop of an unsolicited one.
   */
  const inFrames = new Map<string, Buffer[]>();
  const add = (plane: 'host-in' | 'host-out', path: string, frames: Buffer[], seed: Buffer[] = []) => {
    if (plane === 'host-in') inFrames.set(path, frames);
    const ctx = newHost();
    for (const f of seed) {
      const w = Buffer.from(f);
      if (processInbound(w, w.length, ctx) !== planes.host.VERDICT_FORWARD)
        throw new Error(`bench ${path}: a seed frame was not delivered`);
    }
    const mask = frames.length - 1;
    const work = frames.map((f) => Buffer.from(f));
    cases.push({
      plane,
      path,
      step:
        plane === 'host-in'
          ? (i) => {
              const k = i & mask;
              const w = work[k]!;
              w.set(frames[k]!);
              return processInbound(w, w.length, ctx);
            }
          : (i) => {
              const k = i & mask;
              const w = work[k]!;
              w.set(frames[k]!);
              return processOutbound(w, w.length, 0, ctx);
            },
      copy: (i) => {
        const k = i & mask;
        const w = work[k]!;
        w.set(frames[k]!);
        return w[0]!;
      },
    });
  };
  const range = (fn: (k: number) => Buffer) => Array.from({ length: frames }, (_, k) => fn(k));
  const vx = () =>
    pkt()
      .eth({ src: MUX_MAC, dst: HOST1_MAC })
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
      .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: 5001 });
  add(
    'host-in',
    'udp4, 64 B inner',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(64, 42))
        .build(),
    ),
  );
  add(
    'host-in',
    'udp4, 1400 B inner',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(1400, 42))
        .build(),
    ),
  );
  add(
    'host-in',
    'tcp4',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .tcp({ sport: 1024 + k, dport: 80, flags: TCP_ACK })
        .build(),
    ),
  );
  add(
    'host-in',
    'udp6',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac, type: 0x86dd })
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(64, 62))
        .build(),
    ),
  );
  add(
    'host-in',
    'tcp6',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac, type: 0x86dd })
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .tcp({ sport: 1024 + k, dport: 80, flags: TCP_ACK })
        .build(),
    ),
  );
  const back = () => pkt().eth({ src: NIC.mac, dst: PORT_MACS[0] });
  add(
    'host-out',
    'udp4 reply, 64 B',
    range((k) =>
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .udp({ sport: 7, dport: 1024 + k })
        .payload(payload(64, 42))
        .build(),
    ),
    inFrames.get('udp4, 64 B inner'),
  );
  add(
    'host-out',
    'udp4 reply, 1400 B',
    range((k) =>
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .udp({ sport: 7, dport: 1024 + k })
        .payload(payload(1400, 42))
        .build(),
    ),
    inFrames.get('udp4, 64 B inner'),
  );
  add(
    'host-out',
    'tcp4 reply',
    range((k) =>
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .tcp({ sport: 80, dport: 1024 + k, flags: TCP_ACK })
        .build(),
    ),
    inFrames.get('tcp4'),
  );
  add(
    'host-out',
    'udp6 reply',
    range((k) =>
      back()
        .ipv6({ src: NIC.ip6, dst: CLIENT6 })
        .udp({ sport: 7, dport: 1024 + k })
        .payload(payload(64, 62))
        .build(),
    ),
    inFrames.get('udp6'),
  );
  add(
    'host-out',
    'tcp6 reply',
    range((k) =>
      back()
        .ipv6({ src: NIC.ip6, dst: CLIENT6 })
        .tcp({ sport: 80, dport: 1024 + k, flags: TCP_ACK })
        .build(),
    ),
    inFrames.get('tcp6'),
  );
  return cases;
}

/**
 * Every path, MUX first, each over `frames` distinct flows (a power of two: the new-flow paths empty the
 * flow table every `frames` frames).
 */
export function pathCases(config: SlbxConfig, planes: Planes = currentPlanes, frames = FRAMES): Case[] {
  if (frames < 1 || (frames & (frames - 1)) !== 0) throw new Error(`pathCases: frames must be a power of two, not ${frames}`);
  return [...muxCases(config, planes, frames), ...hostCases(config, planes, frames)];
}

/** The verdict a path's step must return. */
export function forwardVerdict(c: Case, planes: Planes = currentPlanes): number {
  return c.plane === 'mux' ? planes.mux.VERDICT_FORWARD : planes.host.VERDICT_FORWARD;
}
