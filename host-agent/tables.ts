// Host agent control plane: compiles the config into the tables of one host's data plane. Everything the
// NAT needs in both directions comes from policy, nothing from remembered flows: a restarted host agent
// rebuilds the same tables and established connections carry on (the DSR return is stateless because
// config validation makes (nic address, protocol, backend port) name exactly one (VIP, frontend port)).
import { writeIpAddr, type IpAddr } from '../shared/addr.js';
import { ipv6Equal } from '../shared/hot-path.js';
import { VLAN_NONE } from '../shared/ethernet.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileEwTables, type EwTables } from './east-west-tables.js';
import { KEY_SPACE_DSR, hostKeyPart6 } from './flow-table.js';

export interface HostNetwork {
  readonly name: string;
  readonly vni: number;
  /** IPv4 gateway the ports answer ARP for, as uint32, or -1. */
  readonly gateway4: number;
  readonly gateway6: Uint32Array | null;
  /** nic MAC -> nic, for this host only. */
  readonly nicsByMac: MacTable<HostNic>;
}

/**
 * A map from MAC to value read straight from the frame's bytes: open addressing over the MAC's two
 * halves as int32 (the first two bytes, the last four). A Map keyed by macKey boxed its 48-bit key, and
 * V8 hashed that heap number in C++ on every inbound packet.
 */
export class MacTable<T> {
  /** Per slot: the MAC's first two bytes, or -1 (an empty slot). */
  private hi = new Int32Array(8).fill(-1);
  /** Per slot: its last four bytes, as int32. */
  private lo = new Int32Array(8);
  private values: (T | undefined)[] = new Array<T | undefined>(8).fill(undefined);
  private mask = 7;
  size = 0;

  /** The value for the MAC at buf[off .. off + 6), or undefined. */
  get(buf: Uint8Array, off: number): T | undefined {
    const hi = (buf[off]! << 8) | buf[off + 1]!;
    const lo = (buf[off + 2]! << 24) | (buf[off + 3]! << 16) | (buf[off + 4]! << 8) | buf[off + 5]!;
    const his = this.hi;
    const mask = this.mask;
    let i = macSlot(hi, lo) & mask;
    for (;;) {
      const h = his[i]!;
      if (h === hi && this.lo[i] === lo) return this.values[i];
      if (h < 0) return undefined;
      i = (i + 1) & mask;
    }
  }

  has(buf: Uint8Array, off: number): boolean {
    return this.get(buf, off) !== undefined;
  }

  /** Adds or replaces the value of the MAC at buf[off .. off + 6). */
  set(buf: Uint8Array, off: number, value: T): void {
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    this.put((buf[off]! << 8) | buf[off + 1]!, (buf[off + 2]! << 24) | (buf[off + 3]! << 16) | (buf[off + 4]! << 8) | buf[off + 5]!, value);
  }

  private put(hi: number, lo: number, value: T): void {
    const mask = this.mask;
    let i = macSlot(hi, lo) & mask;
    while (this.hi[i]! >= 0 && !(this.hi[i] === hi && this.lo[i] === lo)) i = (i + 1) & mask;
    if (this.hi[i]! < 0) this.size++;
    this.hi[i] = hi;
    this.lo[i] = lo;
    this.values[i] = value;
  }

  private grow(): void {
    const { hi, lo, values } = this;
    const cap = (this.mask + 1) * 2;
    this.hi = new Int32Array(cap).fill(-1);
    this.lo = new Int32Array(cap);
    this.values = new Array<T | undefined>(cap).fill(undefined);
    this.mask = cap - 1;
    this.size = 0;
    for (let i = 0; i < hi.length; i++) if (hi[i]! >= 0) this.put(hi[i]!, lo[i]!, values[i] as T);
  }
}

/** A MAC's slot before the mask: its two halves mixed (the last bytes of a MAC differ most). */
function macSlot(hi: number, lo: number): number {
  const x = Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1);
  return x ^ (x >>> 15);
}

/**
 * A map from an int32 key to a value, for the inbound path's lookups by the peer's address and by VNI:
 * open addressing, Fibonacci hashing (the product's top bits), a slot empty while its value is undefined.
 * Map.get was a call into V8's hash builtin; this inlines, about 20 instructions fewer per lookup under
 * callgrind. HostNic.inbound stays a Map: as an IntTable it cost findRule4/6 about 50 instructions more
 * (measured, not explained). Built once by compileHostTables: no delete.
 */
export class IntTable<T> {
  private keys = new Int32Array(8);
  private values: (T | undefined)[] = new Array<T | undefined>(8).fill(undefined);
  private mask = 7;
  /** 32 - log2(capacity): the hash's top bits index the slots. */
  private shift = 29;
  size = 0;

  /** The value for key (an int32: `| 0` an unsigned one first), or undefined. */
  get(key: number): T | undefined {
    const keys = this.keys;
    const mask = this.mask;
    let i = Math.imul(key, 0x9e3779b1) >>> this.shift;
    for (;;) {
      // an empty slot's key may equal this one: its value, undefined, is then the answer too (the probe
      // would stop there)
      if (keys[i] === key) return this.values[i];
      if (this.values[i] === undefined) return undefined;
      i = (i + 1) & mask;
    }
  }

  /** Adds or replaces key's value (not undefined). */
  set(key: number, value: T): void {
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    this.put(key | 0, value);
  }

  private put(key: number, value: T): void {
    const mask = this.mask;
    let i = Math.imul(key, 0x9e3779b1) >>> this.shift;
    while (this.values[i] !== undefined && this.keys[i] !== key) i = (i + 1) & mask;
    if (this.values[i] === undefined) this.size++;
    this.keys[i] = key;
    this.values[i] = value;
  }

  private grow(): void {
    const { keys, values } = this;
    const cap = (this.mask + 1) * 2;
    this.keys = new Int32Array(cap);
    this.values = new Array<T | undefined>(cap).fill(undefined);
    this.mask = cap - 1;
    this.shift--;
    this.size = 0;
    for (let i = 0; i < keys.length; i++) if (values[i] !== undefined) this.put(keys[i]!, values[i] as T);
  }
}

/** Inbound NAT: VIP:frontendPort -> DIP:backendPort for one nic. */
export interface NatRule {
  readonly ruleName: string;
  readonly family: 4 | 6;
  readonly protocol: number;
  readonly vip: IpAddr;
  readonly frontendPort: number;
  readonly backendPort: number;
  /** The nic's address of the VIP's family. */
  readonly dip: IpAddr;
  /** The addresses as wire bytes (4 or 16), for rewrites. */
  readonly vipBytes: Uint8Array;
  readonly dipBytes: Uint8Array;
  /** An internal VIP's rule: its replies go back over the overlay to the client's host, not by DSR (docs/east-west.md). */
  readonly internal: boolean;
  /**
   * RFC 1624's sum for a reply's source rewrite DIP -> VIP, over the address's 16-bit words: the sum of
   * ~dip and vip, not folded (host-agent/data-plane.ts natIpv6Sum). The DSR return checks that the source
   * is the DIP first, so the frame's address need not be read again.
   */
  readonly dsrSum: number;
  /**
   * The same for the inbound rewrite VIP -> DIP: the sum of ~vip and dip. The rule was found by the
   * packet's destination, so that is the VIP and need not be read or summed again.
   */
  readonly inSum: number;
  /**
   * An IPv4 rule's VIP and DIP as int32 (words[0] | 0), for the inbound path's rule match and rewrite
   * without the addresses' typed-array loads; 0 for an IPv6 rule (whose family the match checks first).
   */
  readonly vip4: number;
  readonly dip4: number;
  /**
   * An IPv6 rule's share of its DSR flows' key hash (hostKeyPart6 of the nic's VNI, the DIP and the
   * protocol in the DSR key space): inboundIpv6 adds the client's address and the ports per packet
   * (dsrLearnRule6). 0 for an IPv4 rule.
   */
  readonly dsrKeyPart: number;
}

/** The sum of ~from and to over the 16-bit words of two addresses (RFC 1624 eqn. 3's terms), not folded. */
export function rewriteSum(from: Uint32Array, to: Uint32Array): number {
  let d = 0;
  for (let i = 0; i < from.length; i++) {
    const o = ~from[i]!;
    const n = to[i]!;
    d += (o >>> 16) + (o & 0xffff) + (n >>> 16) + (n & 0xffff);
  }
  return d;
}

export interface HostNic {
  /** Index in HostTables.nics: the port number the io layer uses. */
  readonly index: number;
  readonly name: string;
  /** Interface name of the port on the host. */
  readonly port: string;
  readonly mac: Uint8Array;
  readonly network: HostNetwork;
  /** The 802.1Q VLAN id of every frame on this port (a vlan network's trunk), or VLAN_NONE: untagged. */
  readonly vlanId: number;
  readonly addr4: number; // -1 when none
  readonly addr6: Uint32Array | null;
  /** (protocol << 16 | frontendPort) -> rules (one per VIP using that port toward this nic). */
  readonly inbound: Map<number, NatRule[]>;
  /** (family << 24 | protocol << 16 | backendPort) -> the one rule whose replies these are (public VIPs: DSR). */
  readonly outbound: Map<number, NatRule>;
  /** The same for internal VIPs: their replies go back over the overlay (host-agent/east-west.ts), never by DSR. */
  readonly ewOutbound: Map<number, NatRule>;
  /**
   * The backend ports of `outbound`'s rules, any family and protocol, as a bit set (bit p of word p >>> 5):
   * processOutbound tries its IPv4 fast path only for a frame from one of them, so that every other frame
   * (a backend's own connection under outbound NAT, east-west) costs it one load, not its checks.
   */
  readonly replyPorts: Uint32Array;
  /** VIPs (IPv4, uint32) served by this nic, for non-first fragments (which carry no port). */
  readonly vips4: Set<number>;
  readonly vips6: IpAddr[];
  /** family << 8 | protocol -> the VIP a reply fragment without ports belongs to, when unique. */
  readonly fragmentVip: Map<number, IpAddr | null>;
}

export interface HostTables {
  readonly generation: number;
  readonly hostName: string;
  /** This host's IPv4 provider address (uint32). */
  readonly pa4: number;
  /** This host's IPv6 provider address (four words), or null: VXLAN over an IPv6 underlay arrives there. */
  readonly pa6: Uint32Array | null;
  readonly vnis: IntTable<HostNetwork>;
  readonly nics: readonly HostNic[];
  /** IPv4 provider addresses VXLAN is accepted from: the MUXes and the other hosts. */
  readonly trustedSources4: Set<number>;
  /** The same for IPv6 provider addresses (compared word by word; there are few). */
  readonly trustedSources6: readonly Uint32Array[];
  /**
   * The fabric peers VXLAN is accepted from, one per (node, family): each MUX's and each other host's
   * provider address. The index is the slot of the peer's learned MAC in HostContext.peerMacs
   * (host-agent/neighbors.ts learns them by ARP and neighbour solicitation; docs/security.md).
   */
  readonly peers: readonly FabricPeer[];
  /** IPv4 provider address (uint32) -> index in peers. */
  readonly peerIndex4: Map<number, number>;
  /**
   * The same, keyed by the address as int32 (`| 0`), for the inbound path: an unsigned address >= 2^31
   * was a heap number as a Map key, hashed in C++ on every packet.
   */
  readonly peerIndex4i: IntTable<number>;
  /** Internal VIPs, the nics of their networks, the MUXes (docs/east-west.md). */
  readonly ew: EwTables;
  /**
   * Outbound NAT (docs/outbound.md): the frontend IPs of every outbound rule (IPv4 as uint32, IPv6 as
   * four words). A reply a MUX encapsulates to one of them goes to the SNAT engine before the VIP rules.
   */
  readonly snatFrontends4: Set<number>;
  readonly snatFrontends6: readonly Uint32Array[];
}

/** A MUX or another host, as a source of VXLAN on the fabric. */
export interface FabricPeer {
  readonly index: number;
  readonly name: string;
  readonly kind: 'mux' | 'host';
  readonly address: IpAddr;
}

/** A MAC as one number (48 bits fit a double exactly), for Map keys without strings. */
export function macKey(buf: Uint8Array, off: number): number {
  return (
    ((buf[off]! << 8) | buf[off + 1]!) * 0x100000000 +
    (((buf[off + 2]! << 24) | (buf[off + 3]! << 16) | (buf[off + 4]! << 8) | buf[off + 5]!) >>> 0)
  );
}

/** The index in tables.peers of an IPv6 provider address (four words), or -1. */
export function peerIndex6(tables: HostTables, a: Uint32Array): number {
  const peers = tables.peers;
  for (let i = 0; i < peers.length; i++) {
    const w = peers[i]!.address.words;
    if (w.length === 4 && ipv6Equal(w, a)) return i;
  }
  return -1;
}

export function compileHostTables(config: SlbxConfig, hostName: string, generation: number): HostTables {
  const host = config.hosts.find((h) => h.name === hostName);
  if (host === undefined) {
    throw new Error(`host ${JSON.stringify(hostName)} is not in the config (hosts: ${config.hosts.map((h) => h.name).join(', ')})`);
  }
  const vnis = new IntTable<HostNetwork>();
  const netByName = new Map<string, HostNetwork>();
  for (const n of config.networks) {
    const net: HostNetwork = {
      name: n.name,
      vni: n.vni,
      gateway4: n.gateway ? n.gateway.words[0]! : -1,
      gateway6: n.gateway6 ? n.gateway6.words : null,
      nicsByMac: new MacTable<HostNic>(),
    };
    vnis.set(n.vni, net);
    netByName.set(n.name, net);
  }
  const nics: HostNic[] = [];
  const nicByName = new Map<string, HostNic>();
  for (const n of config.nics) {
    if (n.host !== hostName) continue;
    const net = netByName.get(n.network)!;
    const nic: HostNic = {
      index: nics.length,
      name: n.name,
      port: n.port,
      mac: n.mac,
      network: net,
      vlanId: config.networks.find((x) => x.name === n.network)?.vlan ?? VLAN_NONE,
      addr4: n.address4 ? n.address4.words[0]! : -1,
      addr6: n.address6 ? n.address6.words : null,
      inbound: new Map(),
      outbound: new Map(),
      ewOutbound: new Map(),
      replyPorts: new Uint32Array(65536 / 32),
      vips4: new Set(),
      vips6: [],
      fragmentVip: new Map(),
    };
    nics.push(nic);
    nicByName.set(n.name, nic);
    net.nicsByMac.set(n.mac, 0, nic);
  }
  const nicConf = new Map(config.nics.map((n) => [n.name, n]));
  for (const v of config.vips) {
    for (const r of v.rules) {
      const pool = config.pools.find((p) => p.name === r.pool)!;
      for (const b of pool.backends) {
        const nic = nicByName.get(b.nic);
        if (nic === undefined) continue; // on another host
        const nc = nicConf.get(b.nic)!;
        const dip = v.address.family === 4 ? nc.address4 : nc.address6;
        if (dip === null) continue; // config validation refuses this; be safe
        for (const proto of r.protocols) {
          const rule: NatRule = {
            ruleName: r.name,
            family: v.address.family,
            protocol: proto,
            vip: v.address,
            frontendPort: r.frontendPort,
            backendPort: r.backendPort,
            dip,
            vipBytes: addrBytes(v.address),
            dipBytes: addrBytes(dip),
            internal: v.scope === 'internal',
            dsrSum: rewriteSum(dip.words, v.address.words),
            inSum: rewriteSum(v.address.words, dip.words),
            vip4: v.address.family === 4 ? v.address.words[0]! | 0 : 0,
            dip4: dip.family === 4 ? dip.words[0]! | 0 : 0,
            dsrKeyPart: dip.family === 6 ? hostKeyPart6((nic.network.vni << 8) | 6, dip.words, proto | (KEY_SPACE_DSR << 8)) : 0,
          };
          const ik = (proto << 16) | r.frontendPort;
          const list = nic.inbound.get(ik) ?? [];
          list.push(rule);
          nic.inbound.set(ik, list);
          (rule.internal ? nic.ewOutbound : nic.outbound).set(((v.address.family << 24) | (proto << 16) | r.backendPort) >>> 0, rule);
          if (rule.internal) continue; // east-west carries no fragments: no DSR fragment VIP
          nic.replyPorts[r.backendPort >>> 5]! |= 1 << (r.backendPort & 31);
          const fk = (v.address.family << 8) | proto;
          const prev = nic.fragmentVip.get(fk);
          if (prev === undefined) nic.fragmentVip.set(fk, v.address);
          else if (prev !== null && prev.text !== v.address.text) nic.fragmentVip.set(fk, null);
        }
        if (v.address.family === 4) nic.vips4.add(v.address.words[0]!);
        else if (!nic.vips6.some((a) => a.text === v.address.text)) nic.vips6.push(v.address);
      }
    }
  }
  const trustedSources4 = new Set<number>();
  for (const m of config.muxes) trustedSources4.add(m.address.words[0]!);
  for (const h of config.hosts) if (h.name !== hostName) trustedSources4.add(h.address.words[0]!);
  const trustedSources6: Uint32Array[] = [];
  for (const n of [...config.muxes, ...config.hosts.filter((h) => h.name !== hostName)])
    if (n.address6) trustedSources6.push(n.address6.words);
  const peers: FabricPeer[] = [];
  const peerIndex4 = new Map<number, number>();
  const others: [string, 'mux' | 'host', IpAddr, IpAddr | null][] = [
    ...config.muxes.map((m): [string, 'mux', IpAddr, IpAddr | null] => [m.name, 'mux', m.address, m.address6]),
    ...config.hosts
      .filter((h) => h.name !== hostName)
      .map((h): [string, 'host', IpAddr, IpAddr | null] => [h.name, 'host', h.address, h.address6]),
  ];
  for (const [name, kind, a4, a6] of others) {
    if (!peerIndex4.has(a4.words[0]!)) {
      peerIndex4.set(a4.words[0]!, peers.length);
      peers.push({ index: peers.length, name, kind, address: a4 });
    }
    if (a6 !== null && !peers.some((p) => p.address.text === a6.text)) peers.push({ index: peers.length, name, kind, address: a6 });
  }
  return {
    generation,
    hostName,
    pa4: host.address.words[0]!,
    pa6: host.address6 ? host.address6.words : null,
    vnis,
    nics,
    trustedSources4,
    trustedSources6,
    peers,
    peerIndex4,
    peerIndex4i: intTableOf(peerIndex4),
    ew: compileEwTables(config, hostName, peers, peerIndex4, nicByName),
    snatFrontends4: new Set(config.outbound.flatMap((r) => r.frontendIps.filter((a) => a.family === 4).map((a) => a.words[0]!))),
    snatFrontends6: config.outbound.flatMap((r) => r.frontendIps.filter((a) => a.family === 6).map((a) => a.words)),
  };
}

/** An IntTable of a Map's entries, its keys as int32. */
function intTableOf<T>(m: Map<number, T>): IntTable<T> {
  const t = new IntTable<T>();
  for (const [k, v] of m) t.set(k | 0, v);
  return t;
}

function addrBytes(a: IpAddr): Uint8Array {
  const b = new Uint8Array(a.family === 4 ? 4 : 16);
  writeIpAddr(a, b, 0);
  return b;
}
