// The host agent's worker steering, run by the kernel: N ring sockets in one PACKET_FANOUT_CBPF group on a
// "fabric" interface (the fabric program) and N in another group on a "port" interface (the VM port
// program), socket i of each group standing for worker i, both joined in index order. The tester ends
// inject every frame of many flows (steeringPairs: return path, outbound NAT, east-west, IPv4/IPv6, an
// IPv6 underlay, VLAN-tagged ports, fragments, ICMP errors about the flows from either side, IPv6
// extension headers), the edge frames (steeringEdges: bad quotes, ICMP that is no error, extension header
// chains too long or cut short) and a frame without a key (ARP). Each flow's frame carries its flow
// number and direction in its last 8 bytes; an edge frame is known by its bytes. Run as root inside a
// network namespace that holds both veth pairs (test/host-steering.test.ts sets one up):
//
//   node dist/host-agent/worker-steering-check.js --fabric IF --fabric-tester IF --port IF --port-tester IF [--workers 2] [--flows 24]
//   ... --restarts [--workers 4] [--flows 8]     how leaving and joining again reorders a group (mainRestarts)
//
// Prints one JSON line: per flow the socket each copy of its fabric and port frames reached, the worker
// steeringKey() names for each, the worker its remote end names (flowKey, from the tuple); per edge frame
// its sockets, steeringKey's worker and the expected one; frames received per socket, the ARP frame's
// socket. It judges nothing: the test does.
import { pkt, type Ext6Opts } from '../shared/packet-builder.js';
import { ip } from '../shared/addr.js';
import { isMain } from '../runtime/command.js';
import { loadRingAddon, RingPort, fanoutGroupId } from '../runtime/ring-port.js';
import {
  buildSteeringProgram,
  encodeSockFilters,
  steerWorker,
  steeringKey,
  STEER_FABRIC,
  STEER_PORT,
  type SteeringVips,
} from './worker-steering.js';

export const CHECK_VXLAN_PORT = 4789;
const TESTER_MAC = '02:aa:00:00:00:01';
export const CHECK_INTERNAL_VIP4 = '198.19.0.101';
export const CHECK_INTERNAL_VIP6 = '2001:db8:19::101';

/** The internal VIPs of the check's flows. */
export function checkVips(): SteeringVips {
  return { v4: [ip(CHECK_INTERNAL_VIP4).words[0]!], v6: [[...ip(CHECK_INTERNAL_VIP6).words]] };
}

/**
 * One flow seen by a host agent: its frames that come in on the fabric (VXLAN to the host), its frames from
 * the VM's port (from the backend), and the flow's remote end as the tuple names it: the address and port
 * the key is made of (port 0 for a later fragment, which carries none). The expected key comes from
 * `remote` (the documented formula, flowKey), not from parsing the frames.
 */
export interface SteeringPair {
  kind: string;
  fabric: Buffer[];
  port: Buffer[];
  remote: { addr: string; port: number };
}

/** A frame the key is judged on alone (no flow of its kind): ICMP that is not an error, bad quotes, long or cut extension header chains. */
export interface SteeringEdge {
  name: string;
  side: 'fabric' | 'port';
  frame: Buffer;
  /** What the key must be: a remote end (address, port), or 0 (no key: a byte the key needs is missing). */
  expect: { addr: string; port: number } | 0;
}

/** The key of a remote end (address, port), written from the formula in docs/io-paths.md: per 32-bit word of the address, then the port, h = (h ^ w) * 0x9e3779b1; key = h ^ (h >>> 16). */
export function flowKey(addr: string, port: number): number {
  let h = 0;
  for (const w of [...ip(addr).words, port]) h = Math.imul((h ^ w) >>> 0, 0x9e3779b1) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

function tail(flow: number, dir: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(flow, 0);
  b.writeUInt32BE(dir, 4);
  return b;
}

const ROUTER4 = '198.18.0.1';
const ROUTER6 = '2001:db8:ff::1';
const VIP4 = '203.0.113.10';
const VIP6 = '2001:db8:f::10';
const DIP4 = '192.0.2.10';
const DIP6 = '2001:db8:a::10';

type L4 = { proto: 'tcp' | 'udp'; sport: number; dport: number };

/** The IP packet an ICMP error quotes (IPv4 or IPv6 by the addresses), whole: header, TCP/UDP header, 8 bytes. */
function quoted(src: string, dst: string, l4: L4, ext: Ext6Opts[] = []): Buffer {
  const b = src.includes(':') ? pkt().ipv6({ src, dst }) : pkt().ipv4({ src, dst });
  for (const e of ext) b.ext6(e);
  (l4.proto === 'tcp' ? b.tcp({ sport: l4.sport, dport: l4.dport }) : b.udp({ sport: l4.sport, dport: l4.dport })).payload(
    Buffer.alloc(8, 0x61),
  );
  return b.build();
}

const vxlan = (v6under = false, fabricMac = '02:00:00:00:00:21') => {
  const b = pkt().eth({ src: TESTER_MAC, dst: fabricMac });
  return (v6under ? b.ipv6({ src: '2001:db8:ff::11', dst: '2001:db8:ff::21' }) : b.ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }))
    .udp({ sport: 50000, dport: CHECK_VXLAN_PORT })
    .vxlan({ vni: 5001 })
    .eth({ src: '02:00:00:00:00:0a', dst: '02:00:00:00:01:10' });
};

type Builder = ReturnType<typeof pkt>;
const tcp = (sport: number, dport: number): L4 => ({ proto: 'tcp', sport, dport });
const udp = (sport: number, dport: number): L4 => ({ proto: 'udp', sport, dport });

/** The rest of a flow's frame after its IP header(s): the TCP or UDP header, then the (flow, direction) tail. */
function seg(b: Builder, l4: L4, f: number, dir: number): Buffer {
  const t = l4.proto === 'tcp' ? b.tcp({ sport: l4.sport, dport: l4.dport }) : b.udp({ sport: l4.sport, dport: l4.dport });
  return t.payload(tail(f, dir)).build();
}

/** An ICMP error after its IP header (ICMPv6 when `v6`): type, code, the quoted packet, the tail. */
function err(b: Builder, v6: boolean, type: number, code: number, quote: Buffer, f: number, dir: number): Buffer {
  return (v6 ? b.icmpv6({ type, code }) : b.icmp({ type, code })).payload(Buffer.concat([quote, tail(f, dir)])).build();
}

/**
 * `perKind` flows of each kind, flow numbers from 0 in order, each with its fabric frames (VXLAN to the
 * host) and its port frames (from the backend), as a host agent sees the two directions of one flow, and
 * ICMP errors about it from either side. Frames end with (flow, direction) so that a receiver can tell
 * them apart.
 */
export function steeringPairs(perKind: number, fabricMac = '02:00:00:00:00:21', portMac = '02:00:00:00:00:31'): SteeringPair[] {
  const out: SteeringPair[] = [];
  const vx = (v6under = false) => vxlan(v6under, fabricMac);
  const vm = (vlan?: number) => pkt().eth({ src: TESTER_MAC, dst: portMac, ...(vlan === undefined ? {} : { vlan }) });
  let flow = 0;
  type Frame = (f: number) => Buffer;
  const add = (kind: string, remote: (f: number) => { addr: string; port: number }, fabric: Frame[], port: Frame[]) => {
    for (let i = 0; i < perKind; i++, flow++) {
      const f = flow;
      out.push({ kind, fabric: fabric.map((g) => g(f)), port: port.map((g) => g(f)), remote: remote(f) });
    }
  };
  const c4 = (f: number) => `198.51.100.${1 + (f % 250)}`;
  const c6 = (f: number) => `2001:db8:c::${(1 + f).toString(16)}`;
  const cport = (f: number) => 20000 + ((f * 7919) % 40000);
  const client4 = (f: number) => ({ addr: c4(f), port: cport(f) });
  const client6 = (f: number) => ({ addr: c6(f), port: cport(f) });
  // the return path: client -> VIP:80 in, DIP:8080 -> client out (NAT by the host agent in between)
  const req = (f: number) => tcp(cport(f), 80);
  const rep = (f: number) => tcp(8080, cport(f));
  const in4 = (f: number, under = false) => vx(under).ipv4({ src: c4(f), dst: VIP4 });
  const in6 = (f: number, under = false) => vx(under).ipv6({ src: c6(f), dst: VIP6 });
  const out4 = (f: number, vlan?: number) => vm(vlan).ipv4({ src: DIP4, dst: c4(f) });
  const out6 = (f: number, vlan?: number) => vm(vlan).ipv6({ src: DIP6, dst: c6(f) });
  add('return-v4', client4, [(f) => seg(in4(f), req(f), f, 0)], [(f) => seg(out4(f), rep(f), f, 1)]);
  add('return-v6', client6, [(f) => seg(in6(f), req(f), f, 0)], [(f) => seg(out6(f), rep(f), f, 1)]);
  add(
    'return-v4-ipv6-underlay',
    client4,
    [(f) => seg(in4(f, true), udp(cport(f), 53), f, 0)],
    [(f) => seg(out4(f), udp(53, cport(f)), f, 1)],
  );
  add('return-v4-vlan', client4, [(f) => seg(in4(f), req(f), f, 0)], [(f) => seg(out4(f, 100), rep(f), f, 1)]);
  add('return-v6-vlan', client6, [(f) => seg(in6(f), req(f), f, 0)], [(f) => seg(out6(f, 200), rep(f), f, 1)]);
  // outbound NAT: DIP:port -> server out on the port; server -> frontend:port in (through a MUX)
  const srv4 = (f: number) => `203.0.113.${100 + (f % 50)}`;
  const server4 = (f: number) => ({ addr: srv4(f), port: 443 + (f % 3) });
  const FRONTEND4 = '198.51.100.250';
  add(
    'snat-v4',
    server4,
    [(f) => seg(vx().ipv4({ src: srv4(f), dst: FRONTEND4 }), tcp(443 + (f % 3), 1024 + f), f, 0)],
    [(f) => seg(vm().ipv4({ src: DIP4, dst: srv4(f) }), tcp(40000 + f, 443 + (f % 3)), f, 1)],
  );
  add(
    'snat-v6-udp',
    (f) => ({ addr: c6(f), port: 53 }),
    [(f) => seg(vx().ipv6({ src: c6(f), dst: '2001:db8:5::1' }), udp(53, 1024 + f), f, 0)],
    [(f) => seg(out6(f), udp(40000 + f, 53), f, 1)],
  );
  // east-west, this host the client's: client -> internal VIP out on the port, the DIP host's reply in
  const EW4 = '192.0.2.20';
  const EW6 = '2001:db8:a::20';
  const ew4 = (f: number) => ({ addr: EW4, port: cport(f) });
  const ew6 = (f: number) => ({ addr: EW6, port: cport(f) });
  add(
    'east-west-client-v4',
    ew4,
    [(f) => seg(vx().ipv4({ src: CHECK_INTERNAL_VIP4, dst: EW4 }), tcp(80, cport(f)), f, 0)],
    [(f) => seg(vm().ipv4({ src: EW4, dst: CHECK_INTERNAL_VIP4 }), tcp(cport(f), 80), f, 1)],
  );
  add(
    'east-west-client-v6',
    ew6,
    [(f) => seg(vx().ipv6({ src: CHECK_INTERNAL_VIP6, dst: EW6 }), tcp(80, cport(f)), f, 0)],
    [(f) => seg(vm().ipv6({ src: EW6, dst: CHECK_INTERNAL_VIP6 }), tcp(cport(f), 80), f, 1)],
  );
  // east-west, this host the DIP's: client -> internal VIP in (from a MUX or, after Fastpath, its host)
  add(
    'east-west-backend-v4',
    ew4,
    [(f) => seg(vx().ipv4({ src: EW4, dst: CHECK_INTERNAL_VIP4 }), tcp(cport(f), 80), f, 0)],
    [(f) => seg(vm().ipv4({ src: DIP4, dst: EW4 }), tcp(8080, cport(f)), f, 1)],
  );
  // later fragments (no ports): keyed by the remote address and port 0 (the data plane translates them
  // without a flow: any worker does it alike)
  const later = (b: Builder, f: number, dir: number) => b.payload(Buffer.concat([Buffer.alloc(16), tail(f, dir)])).build();
  add(
    'fragment-v4',
    (f) => ({ addr: c4(f), port: 0 }),
    [(f) => later(vx().ipv4({ src: c4(f), dst: VIP4, fragOffset: 8, protocol: 17 }), f, 0)],
    [(f) => later(vm().ipv4({ src: DIP4, dst: c4(f), fragOffset: 8, protocol: 17 }), f, 1)],
  );
  // a first fragment (MF, offset 0) has the ports (the data plane records and finds the flow by them)
  add(
    'first-fragment',
    client4,
    [(f) => seg(vx().ipv4({ src: c4(f), dst: VIP4, flags: 1 }), udp(cport(f), 53), f, 0), (f) => seg(in4(f), udp(cport(f), 53), f, 0)],
    [(f) => seg(vm().ipv4({ src: DIP4, dst: c4(f), flags: 1 }), udp(53, cport(f)), f, 1), (f) => seg(out4(f), udp(53, cport(f)), f, 1)],
  );
  // ICMP errors about a flow: from the fabric (a router's about a DSR reply VIP -> client, sent to the VIP
  // and on to this host by a MUX), from the port (the backend's about a client packet it got)
  const r4 = (under = false) => vx(under).ipv4({ src: ROUTER4, dst: VIP4 });
  const r6 = (under = false) => vx(under).ipv6({ src: ROUTER6, dst: VIP6 });
  add(
    'icmp-return-v4',
    client4,
    [
      (f) => seg(in4(f), udp(cport(f), 53), f, 0),
      (f) => err(r4(), false, 11, 0, quoted(VIP4, c4(f), udp(53, cport(f))), f, 0),
      (f) => err(r4(true), false, 3, 4, quoted(VIP4, c4(f), udp(53, cport(f))), f, 0),
    ],
    [
      (f) => seg(out4(f), udp(5353, cport(f)), f, 1),
      (f) => err(out4(f), false, 3, 3, quoted(c4(f), DIP4, udp(cport(f), 5353)), f, 1),
      (f) => err(out4(f, 100), false, 12, 0, quoted(c4(f), DIP4, udp(cport(f), 5353)), f, 1),
    ],
  );
  add(
    'icmp-return-v6',
    client6,
    [
      (f) => seg(in6(f), req(f), f, 0),
      (f) => err(r6(), true, 2, 0, quoted(VIP6, c6(f), tcp(80, cport(f))), f, 0),
      (f) => err(r6(true), true, 3, 0, quoted(VIP6, c6(f), tcp(80, cport(f)), [{ type: 'dest' }]), f, 0),
    ],
    [
      (f) => seg(out6(f), rep(f), f, 1),
      (f) => err(out6(f), true, 1, 4, quoted(c6(f), DIP6, req(f)), f, 1),
      (f) =>
        err(
          out6(f, 200).ext6({ type: 'dest' }),
          true,
          4,
          0,
          quoted(c6(f), DIP6, req(f), [{ type: 'hop' }, { type: 'routing', len8: 1 }]),
          f,
          1,
        ),
    ],
  );
  // outbound NAT: a router's error about the NATed packet frontend -> server (from the fabric), the
  // backend's about the server's reply it got (from the port)
  add(
    'icmp-snat-v4',
    server4,
    [
      (f) => seg(vx().ipv4({ src: srv4(f), dst: FRONTEND4 }), udp(443 + (f % 3), 1024 + f), f, 0),
      (f) => err(vx().ipv4({ src: ROUTER4, dst: FRONTEND4 }), false, 3, 1, quoted(FRONTEND4, srv4(f), udp(1024 + f, 443 + (f % 3))), f, 0),
    ],
    [
      (f) => seg(vm().ipv4({ src: DIP4, dst: srv4(f) }), udp(40000 + f, 443 + (f % 3)), f, 1),
      (f) => err(vm().ipv4({ src: DIP4, dst: srv4(f) }), false, 3, 3, quoted(srv4(f), DIP4, udp(443 + (f % 3), 40000 + f)), f, 1),
    ],
  );
  // east-west with this host the client's: the quote's internal VIP is looked past as in the flow's frames
  add(
    'icmp-east-west-client-v6',
    ew6,
    [
      (f) => seg(vx().ipv6({ src: CHECK_INTERNAL_VIP6, dst: EW6 }), udp(53, cport(f)), f, 0),
      (f) => err(vx().ipv6({ src: ROUTER6, dst: EW6 }), true, 1, 3, quoted(EW6, CHECK_INTERNAL_VIP6, udp(cport(f), 53)), f, 0),
    ],
    [
      (f) => seg(vm().ipv6({ src: EW6, dst: CHECK_INTERNAL_VIP6 }), udp(cport(f), 53), f, 1),
      (f) => err(vm().ipv6({ src: EW6, dst: CHECK_INTERNAL_VIP6 }), true, 1, 4, quoted(CHECK_INTERNAL_VIP6, EW6, udp(53, cport(f))), f, 1),
    ],
  );
  // IPv6 extension headers before the ports: hop-by-hop, routing, destination options, a first fragment
  add(
    'ext6-return',
    client6,
    [
      (f) => seg(in6(f).ext6({ type: 'hop' }).ext6({ type: 'dest', len8: 2 }), req(f), f, 0),
      (f) => seg(in6(f, true).ext6({ type: 'routing', len8: 1 }).ext6({ type: 'fragment', more: true }), req(f), f, 0),
    ],
    [
      (f) => seg(out6(f).ext6({ type: 'dest' }), rep(f), f, 1),
      (f) => {
        const b = out6(f, 200).ext6({ type: 'hop' }).ext6({ type: 'dest' }).ext6({ type: 'routing' });
        return seg(b.ext6({ type: 'fragment', more: true }).ext6({ type: 'dest', len8: 3 }), rep(f), f, 1);
      },
    ],
  );
  return out;
}

/**
 * Frames judged alone, on either side: what an ICMP error with a quote the key cannot use, ICMP that is not
 * an error and IPv6 extension header chains too long or cut short steer to. Each expectation is stated from
 * the frame's addresses (flowKey), or 0 where the program's load runs past the frame's end.
 */
export function steeringEdges(fabricMac = '02:00:00:00:00:21', portMac = '02:00:00:00:00:31'): SteeringEdge[] {
  const out: SteeringEdge[] = [];
  const vm = () => pkt().eth({ src: TESTER_MAC, dst: portMac });
  const vx = () => vxlan(false, fabricMac);
  const C4 = '198.51.100.77';
  const C6 = '2001:db8:c::77';
  const cut = (b: Buffer, drop: number) => b.subarray(0, b.length - drop);
  const q4 = quoted(C4, DIP4, { proto: 'udp', sport: 33333, dport: 5353 }); // 20 + 8 + 8 bytes
  const q6 = quoted(C6, DIP6, { proto: 'tcp', sport: 33333, dport: 8080 }); // 40 + 20 + 8 bytes
  const err4 = (quote: Buffer, type = 3) => vm().ipv4({ src: DIP4, dst: C4 }).icmp({ type, code: 3 }).payload(quote).build();
  const err6 = (quote: Buffer, type = 1) => vm().ipv6({ src: DIP6, dst: C6 }).icmpv6({ type, code: 4 }).payload(quote).build();
  const edge = (name: string, side: 'fabric' | 'port', frame: Buffer, expect: SteeringEdge['expect']) =>
    out.push({ name, side, frame, expect });
  edge('icmp4 error, whole quote', 'port', err4(q4), { addr: C4, port: 33333 });
  edge('icmp4 error, quote cut after the ports', 'port', err4(q4.subarray(0, 24)), { addr: C4, port: 33333 });
  edge('icmp4 error, quote cut inside the ports', 'port', err4(q4.subarray(0, 23)), 0);
  edge('icmp4 error, quote cut inside its IP header', 'port', err4(q4.subarray(0, 19)), 0);
  edge('icmp4 error, no quote', 'port', err4(Buffer.alloc(0)), 0);
  edge(
    'icmp4 error, the quote an ICMP echo (no ports)',
    'port',
    err4(pkt().ipv4({ src: C4, dst: DIP4 }).icmp({ type: 8 }).payload(Buffer.alloc(8)).build()),
    {
      addr: C4,
      port: 0,
    },
  );
  edge(
    'icmp4 error, the quote a later fragment',
    'port',
    err4(pkt().ipv4({ src: C4, dst: DIP4, fragOffset: 4, protocol: 17 }).payload(Buffer.alloc(8, 0x55)).build()),
    { addr: C4, port: 0 },
  );
  edge(
    'icmp4 echo reply (not an error): the frame itself, port 0',
    'port',
    vm().ipv4({ src: DIP4, dst: C4 }).icmp({ type: 0 }).payload(q4).build(),
    {
      addr: C4,
      port: 0,
    },
  );
  edge(
    'icmp4 error in a first fragment (not handled as an error)',
    'port',
    vm().ipv4({ src: DIP4, dst: C4, flags: 1 }).icmp({ type: 3 }).payload(q4).build(),
    {
      addr: C4,
      port: 0,
    },
  );
  edge(
    'icmp4 error with IP options before it',
    'port',
    vm()
      .ipv4({ src: DIP4, dst: C4, options: new Uint8Array([1, 1, 1, 0]) })
      .icmp({ type: 3, code: 3 })
      .payload(q4)
      .build(),
    { addr: C4, port: 33333 },
  );
  edge(
    'icmp4 error from the fabric, quote cut inside the ports',
    'fabric',
    vx()
      .ipv4({ src: ROUTER4, dst: VIP4 })
      .icmp({ type: 11 })
      .payload(quoted(VIP4, C4, { proto: 'tcp', sport: 80, dport: 33333 }).subarray(0, 22))
      .build(),
    0,
  );
  edge('icmp6 error, whole quote', 'port', err6(q6), { addr: C6, port: 33333 });
  edge('icmp6 error, quote cut inside the ports', 'port', err6(q6.subarray(0, 43)), 0);
  edge('icmp6 error, quote cut inside its IPv6 header', 'port', err6(q6.subarray(0, 39)), 0);
  edge(
    'icmp6 error, the quote an echo request',
    'port',
    err6(pkt().ipv6({ src: C6, dst: DIP6 }).icmpv6({ type: 128 }).payload(Buffer.alloc(8)).build()),
    {
      addr: C6,
      port: 0,
    },
  );
  edge('icmp6 type 5+ (not an error): the frame itself, port 0', 'port', err6(q6, 129), { addr: C6, port: 0 });
  edge(
    'icmp6 error behind a fragment header (not handled as an error)',
    'port',
    vm().ipv6({ src: DIP6, dst: C6 }).ext6({ type: 'fragment', more: true }).icmpv6({ type: 1 }).payload(q6).build(),
    { addr: C6, port: 0 },
  );
  edge(
    'icmp6 error, the quote with a destination options header cut short',
    'port',
    err6(quoted(C6, DIP6, { proto: 'tcp', sport: 33333, dport: 8080 }, [{ type: 'dest', len8: 4 }]).subarray(0, 40 + 40)),
    0,
  );
  edge(
    'icmp6 error from the fabric about a DSR reply',
    'fabric',
    vx()
      .ipv6({ src: ROUTER6, dst: VIP6 })
      .icmpv6({ type: 2 })
      .payload(quoted(VIP6, C6, { proto: 'tcp', sport: 80, dport: 33333 }))
      .build(),
    { addr: C6, port: 33333 },
  );
  const chain = (n: number) => {
    const b = vm().ipv6({ src: DIP6, dst: C6 });
    for (let i = 0; i < n; i++) b.ext6({ type: 'dest' });
    return b.udp({ sport: 5353, dport: 33333 }).payload(Buffer.alloc(8)).build();
  };
  edge('8 destination options headers: walked', 'port', chain(8), { addr: C6, port: 33333 });
  edge('9 destination options headers: too long, port 0', 'port', chain(9), { addr: C6, port: 0 });
  edge(
    'a destination options header longer than the frame',
    'port',
    vm()
      .ipv6({ src: DIP6, dst: C6 })
      .ext6({ type: 'dest', len8: 20 })
      .udp({ sport: 5353, dport: 33333 })
      .build()
      .subarray(0, 14 + 40 + 64),
    0,
  );
  edge(
    'a hop-by-hop header cut after its first byte',
    'port',
    cut(vm().ipv6({ src: DIP6, dst: C6 }).ext6({ type: 'hop' }).udp({ sport: 5353, dport: 33333 }).build(), 15),
    0,
  );
  edge(
    'ports cut after an extension header',
    'port',
    cut(vm().ipv6({ src: DIP6, dst: C6 }).ext6({ type: 'dest' }).udp({ sport: 5353, dport: 33333 }).build(), 6),
    0,
  );
  edge(
    'a later fragment: port 0',
    'port',
    vm().ipv6({ src: DIP6, dst: C6 }).ext6({ type: 'fragment', offset8: 3 }).udp({ sport: 5353, dport: 33333 }).build(),
    { addr: C6, port: 0 },
  );
  edge(
    'a fragment header cut inside its offset',
    'port',
    vm()
      .ipv6({ src: DIP6, dst: C6, nextHeader: 44 })
      .payload(Buffer.from([17, 0, 0]))
      .build(),
    0,
  );
  // AH (RFC 4302: length in 4-octet units minus 2): 24 octets, then UDP
  const ah = Buffer.alloc(24);
  ah[0] = 17;
  ah[1] = 4;
  const udp = Buffer.from([0x14, 0xe9, 0x82, 0x35, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // 5353 -> 33333
  edge(
    'an AH header, then UDP',
    'port',
    vm()
      .ipv6({ src: DIP6, dst: C6, nextHeader: 51 })
      .payload(Buffer.concat([ah, udp]))
      .build(),
    { addr: C6, port: 33333 },
  );
  edge(
    'fabric: destination options on the client packet',
    'fabric',
    vx().ipv6({ src: C6, dst: VIP6 }).ext6({ type: 'dest' }).ext6({ type: 'hop' }).tcp({ sport: 33333, dport: 80 }).build(),
    { addr: C6, port: 33333 },
  );
  return out;
}

function arg(name: string, dflt?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : dflt;
  if (v === undefined) {
    process.stderr.write(`worker-steering-check.js: --${name} is required (--help)\n`);
    process.exit(2);
  }
  return v;
}

/**
 * --restarts: how the kernel orders a group's members when workers leave and join again. The key picks an
 * index (value modulo the group's size) into the group's member array, which the kernel keeps in join
 * order, except that a leaving member's slot is taken by the last member. Phases, each sending every
 * flow's two directions once and recording which WORKER (not socket index) got each:
 *   start      all N workers joined both groups in index order 0..N-1
 *   restart    worker 0 left both groups and joined again (as a restarted worker would)
 *   regrouped  every worker left both groups, then all joined in index order again
 *   two-died   (from index order) workers 0 and 1 left the fabric group in the order 0, 1 and the port
 *              group 1, 0 (two threads dying at once close their sockets in no set order), then joined
 *              again, 0 then 1
 *   regrouped-again  as regrouped
 * Prints one JSON line per run: per phase the flows whose directions reached different workers (split)
 * and those whose worker is not steerWorker(key, N) (the worker the index order names).
 */
async function mainRestarts(): Promise<void> {
  const workers = Number(arg('workers', '4'));
  const perKind = Number(arg('flows', '8'));
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const vips = checkVips();
  const ifaces = [arg('fabric'), arg('port')] as const;
  const progs = [
    encodeSockFilters(buildSteeringProgram(STEER_FABRIC, CHECK_VXLAN_PORT, vips)),
    encodeSockFilters(buildSteeringProgram(STEER_PORT, CHECK_VXLAN_PORT, vips)),
  ] as const;
  const groups = [fanoutGroupId(process.pid, 0), fanoutGroupId(process.pid, 1)] as const;
  // got[side].get(flow) = the workers that received it in the current phase
  let got: [Map<number, number[]>, Map<number, number[]>] = [new Map(), new Map()];
  const keys: [Map<number, number>, Map<number, number>] = [new Map(), new Map()];
  const member: (RingPort | null)[][] = [new Array<RingPort | null>(workers).fill(null), new Array<RingPort | null>(workers).fill(null)];
  const join = (side: 0 | 1, w: number): void => {
    const p = new RingPort(ifaces[side], r.addon, { fanoutGroup: groups[side], fanoutProgram: progs[side] });
    p.open(`ether src ${TESTER_MAC}`, (f, len) => {
      if (f[12] === 0x08 && f[13] === 0x06) return;
      const flow = f.readUInt32BE(len - 8);
      const l = got[side].get(flow) ?? [];
      l.push(w);
      got[side].set(flow, l);
      keys[side].set(flow, steeringKey(f, 0, len, side === 0 ? STEER_FABRIC : STEER_PORT, CHECK_VXLAN_PORT, vips));
    });
    member[side]![w] = p;
  };
  const leave = (side: 0 | 1, w: number): void => {
    member[side]![w]?.close();
    member[side]![w] = null;
  };
  const pairs = steeringPairs(perKind);
  const txF = new RingPort(arg('fabric-tester'), r.addon, { fanoutGroup: 0 });
  const txP = new RingPort(arg('port-tester'), r.addon, { fanoutGroup: 0 });
  txF.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  txP.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  const phase = async (name: string) => {
    got = [new Map(), new Map()];
    for (const p of pairs) {
      for (const b of p.fabric) txF.send(b, 0, b.length);
      for (const b of p.port) txP.send(b, 0, b.length);
    }
    txF.flush();
    txP.flush();
    await new Promise((res) => setTimeout(res, 500));
    let split = 0;
    let offIndex = 0;
    let missing = 0;
    pairs.forEach((_, f) => {
      const a = got[0].get(f);
      const b = got[1].get(f);
      if (a === undefined || b === undefined) {
        missing++;
        return;
      }
      if (new Set([...a, ...b]).size !== 1) split++;
      if (a[0] !== steerWorker(keys[0].get(f) ?? 0, workers)) offIndex++;
    });
    return { phase: name, flows: pairs.length, missing, split, offIndex };
  };
  const out = [];
  for (const side of [0, 1] as const) for (let w = 0; w < workers; w++) join(side, w);
  out.push(await phase('start'));
  for (const side of [0, 1] as const) leave(side, 0);
  for (const side of [0, 1] as const) join(side, 0);
  out.push(await phase('restart'));
  const regroup = () => {
    for (const side of [0, 1] as const) for (let w = 0; w < workers; w++) leave(side, w);
    for (let w = 0; w < workers; w++) for (const side of [0, 1] as const) join(side, w);
  };
  regroup();
  out.push(await phase('regrouped'));
  leave(0, 0);
  leave(0, 1);
  leave(1, 1);
  leave(1, 0);
  for (const side of [0, 1] as const) join(side, 0);
  for (const side of [0, 1] as const) join(side, 1);
  out.push(await phase('two-died'));
  regroup();
  out.push(await phase('regrouped-again'));
  txF.close();
  txP.close();
  for (const side of member) for (const p of side) p?.close();
  process.stdout.write(JSON.stringify({ workers, phases: out }) + '\n');
}

async function main(): Promise<void> {
  if (process.argv.includes('--restarts')) return mainRestarts();
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(
      'usage: node dist/host-agent/worker-steering-check.js --fabric IF --fabric-tester IF --port IF --port-tester IF [--workers 2] [--flows 24]\n' +
        'N ring sockets per interface in a PACKET_FANOUT_CBPF group with the host agent steering programs; both directions of\n' +
        'every flow injected from the tester ends; prints one JSON line (per flow the sockets of each direction). Root, in a netns.\n' +
        '--restarts: workers leave and join again (one restart, two at once, a regroup); per phase the flows split or moved.\n',
    );
    return;
  }
  const fabric = arg('fabric');
  const port = arg('port');
  const workers = Number(arg('workers', '2'));
  const perKind = Number(arg('flows', '24'));
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const vips = checkVips();
  const progs = {
    fabric: encodeSockFilters(buildSteeringProgram(STEER_FABRIC, CHECK_VXLAN_PORT, vips)),
    port: encodeSockFilters(buildSteeringProgram(STEER_PORT, CHECK_VXLAN_PORT, vips)),
  };
  // got[dir][flow] = the sockets that frame's copies reached (one entry per copy)
  const got: [Map<number, number[]>, Map<number, number[]>] = [new Map(), new Map()];
  // tsKeys[dir][flow] = the worker steeringKey() names for each copy received
  const tsKeys: [Map<number, number[]>, Map<number, number[]>] = [new Map(), new Map()];
  // the edge frames, known by their bytes (a cut frame has no room for a tail)
  const edges = steeringEdges();
  const edgeOf = new Map(edges.map((e, n) => [e.frame.toString('hex'), n]));
  const edgeGot = edges.map((): number[] => []);
  const edgeKey = edges.map(() => -1);
  const perSocket = [new Array<number>(workers).fill(0), new Array<number>(workers).fill(0)];
  let arpSocket = -1;
  const sockets: RingPort[] = [];
  const open = (iface: string, side: 0 | 1, group: number): void => {
    for (let i = 0; i < workers; i++) {
      const p = new RingPort(iface, r.addon, { fanoutGroup: group, fanoutProgram: side === 0 ? progs.fabric : progs.port });
      p.open(`ether src ${TESTER_MAC}`, (f, len) => {
        perSocket[side]![i]!++;
        if (f[12] === 0x08 && f[13] === 0x06) {
          arpSocket = i;
          return;
        }
        const w = steerWorker(steeringKey(f, 0, len, side === 0 ? STEER_FABRIC : STEER_PORT, CHECK_VXLAN_PORT, vips), workers);
        const e = edgeOf.get(f.toString('hex', 0, len));
        if (e !== undefined) {
          edgeGot[e]!.push(i);
          edgeKey[e] = w;
          return;
        }
        const flow = f.readUInt32BE(len - 8);
        const l = got[side].get(flow) ?? [];
        l.push(i);
        got[side].set(flow, l);
        const k = tsKeys[side].get(flow) ?? [];
        k.push(w);
        tsKeys[side].set(flow, k);
      });
      sockets.push(p);
    }
  };
  open(fabric, 0, fanoutGroupId(process.pid, 0));
  open(port, 1, fanoutGroupId(process.pid, 1));
  const pairs = steeringPairs(perKind);
  const txF = new RingPort(arg('fabric-tester'), r.addon, { fanoutGroup: 0 });
  const txP = new RingPort(arg('port-tester'), r.addon, { fanoutGroup: 0 });
  txF.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  txP.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  const arp = pkt().eth({ src: TESTER_MAC, dst: 'ff:ff:ff:ff:ff:ff' }).arp({ senderIp: '192.0.2.10', targetIp: '192.0.2.1' }).build();
  let sent = 0;
  for (let round = 0; round < 2; round++) {
    for (const p of pairs) {
      for (const b of p.fabric) if (txF.send(b, 0, b.length)) sent++;
      for (const b of p.port) if (txP.send(b, 0, b.length)) sent++;
    }
    for (const e of edges) if ((e.side === 'fabric' ? txF : txP).send(e.frame, 0, e.frame.length)) sent++;
    txF.flush();
    txP.flush();
    await new Promise((res) => setTimeout(res, 20));
  }
  if (txP.send(arp, 0, arp.length)) sent++;
  txP.flush();
  await new Promise((res) => setTimeout(res, 500));
  const refused = txF.deferredSendErrors() + txP.deferredSendErrors();
  txF.close();
  txP.close();
  const drops = sockets.reduce((s, p) => s + (p.stats()?.rxKernelDrops ?? 0), 0);
  for (const s of sockets) s.close();
  const flows = pairs.map((p, f) => ({
    flow: f,
    kind: p.kind,
    fabric: got[0].get(f) ?? [],
    port: got[1].get(f) ?? [],
    keyFabric: tsKeys[0].get(f) ?? [],
    keyPort: tsKeys[1].get(f) ?? [],
    expect: steerWorker(flowKey(p.remote.addr, p.remote.port), workers),
  }));
  process.stdout.write(
    JSON.stringify({
      workers,
      sent: sent - refused,
      received: perSocket[0]!.reduce((a, b) => a + b, 0) + perSocket[1]!.reduce((a, b) => a + b, 0),
      perSocket,
      kernelDrops: drops,
      arpSocket,
      flows,
      edges: edges.map((e, n) => ({
        name: e.name,
        side: e.side,
        sockets: edgeGot[n],
        key: edgeKey[n],
        expect: steerWorker(e.expect === 0 ? 0 : flowKey(e.expect.addr, e.expect.port), workers),
      })),
    }) + '\n',
  );
}

if (isMain(import.meta.url)) {
  main().catch((e: unknown) => {
    process.stderr.write(`worker-steering-check.js: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
