#!/usr/bin/env node
// The lab plan: which namespaces, links, addresses, routes and services a lab run builds, derived from
// an slbx config. scripts/lab/lib.sh runs this and reads its output; nothing here touches the system.
//
//   node dist/scripts/lab/plan.js --config examples/lab.yaml [--clients N] [--json]
//
// Output: one line per item, fields separated by single spaces, '-' for "none", lists joined by ','.
//   fabric   MTU BRIDGE_MTU                       the fabric segment (a bridge in its own namespace)
//   router   CLIENT4 CLIENT6 FAB4 FAB6 FABPORT FABMAC CLIENTMAC
//   controller ADDR4 ADDR6|- FABPORT MAC PORT    the controller's namespace on the fabric (.5 and ::5), API port
//   client   NAME PORT MAC ADDRS4 ADDRS6         first address of each list is the primary one
//   mux      NAME ADDR4 ADDR6|- FABPORT MAC
//   host     NAME ADDR4 ADDR6|- FABPORT MAC
//   nic      NAME HOST PORT MAC ADDR4|- ADDR6|- GW4|- GW6|- TCPPORTS UDPPORTS
//   vlan     NIC VLANID                          the nic's network is a vlan network: the VM's addresses sit on
//                                                 eth0.VLANID, its port carries 802.1Q (scripts/lab/vlan.sh)
//   vip      ADDR PREFIXLEN NEXTHOPS|-           NEXTHOPS: the muxes' provider addresses of that family
//   bgp      MUXASN ROUTERASN HOLD KEEPALIVE BFD BFDMS BFDMULT PEER4|- PEER6|-
//                                                 only with a bgp section: the router runs BIRD (bird-conf.ts)
//                                                 instead of static routes; BFD is on or off
//   rack     LEAF NET4/LEN GW4 UPLINK4 HOSTS      a routed underlay (scripts/lab/routed.sh): hosts whose gateway is
//                                                 off the fabric sit behind a leaf router LEAF (GW4 on their subnet,
//                                                 UPLINK4 on the fabric, default route to the lab router)
//   loopback ADDR4                                the lab router's loopback (BGP and BFD multihop), with racks only
//   warning  TEXT...
// ADDRS are bare addresses; the prefix lengths are fixed: /24 and /64 (see LAB_PREFIX_LEN_*).
import { readFileSync } from 'node:fs';
import { formatIpv4, formatIpv6, formatMac, inPrefix, parseIpAddr, type IpAddr } from '../../shared/addr.js';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../../shared/config.js';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

export const LAB_PREFIX_LEN_V4 = 24;
export const LAB_PREFIX_LEN_V6 = 64;
/** The outside clients' segment (docs/lab.md). */
export const CLIENT_NET4 = '198.51.100.0';
export const CLIENT_NET6 = '2001:db8:c::';
/**
 * Client k (1-based) owns CLIENT_ADDRS_PER_CLIENT addresses from 198.51.100.(10 + 40(k-1)), and as many
 * from 2001:db8:c::(the same digits): client1 198.51.100.10-41 and 2001:db8:c::10-2f.
 */
export const CLIENT_FIRST_HOST = 10;
export const CLIENT_STRIDE = 40;
export const CLIENT_ADDRS_PER_CLIENT = 32;
export const MAX_CLIENTS = 6;
/** Links to backends and clients. */
export const LAB_LINK_MTU = 1500;
/** Linux IFNAMSIZ - 1. */
const IFNAME_MAX = 15;

/** The only address ranges the lab may use (documentation and benchmarking space). */
const ALLOWED_V4: readonly (readonly [string, number])[] = [
  ['198.18.0.0', 15],
  ['192.0.2.0', 24],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
];
const ALLOWED_V6: readonly (readonly [string, number])[] = [['2001:db8::', 32]];

const RESERVED_NODES = new Set(['router', 'fabric', 'controller']);
/** Routed underlay: the lab router's loopback, the address the muxes peer with across subnets. */
export const LAB_ROUTER_LOOPBACK4 = '198.18.255.1';
/** Leaf k's address on the fabric: .(LAB_LEAF_UPLINK_BASE + k). */
export const LAB_LEAF_UPLINK_BASE = 240;
export interface PlanRack {
  leaf: string;
  net4: string;
  gw4: string;
  uplink4: string;
  hosts: string[];
}
/** The controller sits on the fabric at .5 (and ::5); its API listens on this port. */
export const LAB_CONTROLLER_HOST = 5;
export const LAB_CONTROLLER_PORT = 8480;
export interface PlanController {
  addr4: string;
  addr6: string | null;
  fabPort: string;
  mac: string;
  port: number;
}
const CLIENT_NODE_RE = /^client\d+$/;

export interface PlanClient {
  name: string;
  port: string;
  mac: string;
  addrs4: string[];
  addrs6: string[];
}
export interface PlanNode {
  name: string;
  addr4: string;
  addr6: string | null;
  fabPort: string;
  mac: string;
}
export interface PlanNic {
  name: string;
  host: string;
  port: string;
  mac: string;
  addr4: string | null;
  addr6: string | null;
  gw4: string | null;
  gw6: string | null;
  tcpPorts: number[];
  udpPorts: number[];
  /** The VLAN id of a vlan network's nic (its VM uses eth0.VLAN), or null. */
  vlan: number | null;
}
export interface PlanVip {
  address: string;
  prefixLen: number;
  nexthops: string[];
}
/** The router's side of BGP (the config's bgp section seen from the router). */
export interface PlanBgp {
  muxAsn: number;
  routerAsn: number;
  holdTimeS: number;
  keepaliveS: number;
  bfd: { enabled: boolean; intervalMs: number; multiplier: number };
  /** The router's addresses the muxes peer with (null: no session of that family). */
  peer4: string | null;
  peer6: string | null;
}
/** The lab uses private 2-octet ASNs only. */
export const LAB_ASN_RANGE: readonly [number, number] = [64512, 65534];
export interface LabPlan {
  fabricMtu: number;
  router: { client4: string; client6: string; fab4: string; fab6: string | null; fabPort: string; fabMac: string; clientMac: string };
  controller: PlanController;
  clients: PlanClient[];
  muxes: PlanNode[];
  hosts: PlanNode[];
  nics: PlanNic[];
  vips: PlanVip[];
  /** The config's vipRanges (`203.0.113.0/24`): what the router's policies accept and forward as VIPs. */
  vipRanges: string[];
  /** null: no bgp section, static multipath routes. */
  bgp: PlanBgp | null;
  /** Routed underlay: the racks behind leaf routers ([] on one segment) and the router's loopback (null without racks). */
  racks: PlanRack[];
  loopback4: string | null;
  warnings: string[];
}

export type PlanResult = { ok: true; plan: LabPlan } | { ok: false; errors: string[] };

function netOf(a: IpAddr, len: number): IpAddr {
  const w = new Uint32Array(a.words.length);
  let left = len;
  for (let i = 0; i < w.length; i++) {
    const bits = Math.max(0, Math.min(32, left));
    const mask = bits === 0 ? 0 : bits === 32 ? 0xffffffff : ~(0xffffffff >>> bits) >>> 0;
    w[i] = (a.words[i]! & mask) >>> 0;
    left -= 32;
  }
  return fromWords(a.family, w);
}

function fromWords(family: 4 | 6, w: Uint32Array): IpAddr {
  return { family, text: family === 4 ? formatIpv4(w[0]!) : formatIpv6(w, 0), words: w };
}

/** net + n in the last word (n small, no carry needed within the lab's prefixes). */
function plus(net: IpAddr, n: number): IpAddr {
  const w = Uint32Array.from(net.words);
  w[w.length - 1] = (w[w.length - 1]! + n) >>> 0;
  return fromWords(net.family, w);
}

/**
 * IPv6 host part written with the same digits as the decimal number: 10 -> ::10 (0x10). A client's
 * first IPv6 address has the digits of its first IPv4 address (198.51.100.50 -> 2001:db8:c::50); the
 * rest follow in hex, so the 32 form one range (client1: 2001:db8:c::10-2001:db8:c::2f).
 */
function decimalDigitsAsHex(n: number): number {
  return parseInt(String(n), 16);
}

function macOfV4(a: IpAddr): string {
  const w = a.words[0]!;
  return formatMac(Uint8Array.of(0x02, 0x00, w >>> 24, (w >>> 16) & 0xff, (w >>> 8) & 0xff, w & 0xff));
}

function allowed(a: IpAddr): boolean {
  const list = a.family === 4 ? ALLOWED_V4 : ALLOWED_V6;
  return list.some(([n, l]) => inPrefix(a, parseIpAddr(n)!, l));
}

/** Builds the plan; every problem is listed at once. */
export function buildLabPlan(config: SlbxConfig, clients = 1): PlanResult {
  const errors: string[] = [];
  const warnings: string[] = [];
  if (!Number.isInteger(clients) || clients < 1 || clients > MAX_CLIENTS) {
    errors.push(
      `clients: must be an integer 1..${MAX_CLIENTS} (each client owns ${CLIENT_ADDRS_PER_CLIENT} addresses of ${CLIENT_NET4}/24), got ${clients}`,
    );
    clients = 1;
  }
  const client4Net = parseIpAddr(CLIENT_NET4)!;
  const client6Net = parseIpAddr(CLIENT_NET6)!;

  // Hard rule of the lab machine: only documentation / benchmarking ranges.
  const check = (what: string, a: IpAddr | null) => {
    if (a === null) return;
    if (!allowed(a)) {
      errors.push(
        `${what}: ${a.text} is outside the lab's address ranges (198.18.0.0/15, 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32)`,
      );
    }
    if (inPrefix(a, client4Net, LAB_PREFIX_LEN_V4) || inPrefix(a, client6Net, LAB_PREFIX_LEN_V6)) {
      errors.push(`${what}: ${a.text} is in the lab's client segment (${CLIENT_NET4}/24, ${CLIENT_NET6}/64); use another range`);
    }
  };
  config.muxes.forEach((m, i) => {
    check(`muxes[${i}].address`, m.address);
    check(`muxes[${i}].address6`, m.address6);
  });
  config.hosts.forEach((h, i) => {
    check(`hosts[${i}].address`, h.address);
    check(`hosts[${i}].address6`, h.address6);
  });
  config.networks.forEach((n, i) => {
    check(`networks[${i}].gateway`, n.gateway);
    check(`networks[${i}].gateway6`, n.gateway6);
  });
  config.nics.forEach((n, i) => n.addresses.forEach((a, j) => check(`nics[${i}].addresses[${j}]`, a)));
  config.vips.forEach((v, i) => check(`vips[${i}].address`, v.address));

  if (config.muxes.length === 0) errors.push('muxes: the lab needs at least one mux');

  // Node names become namespace names: unique across kinds, not a fixed role.
  const seen = new Map<string, string>();
  const claim = (name: string, what: string) => {
    if (RESERVED_NODES.has(name) || CLIENT_NODE_RE.test(name)) {
      errors.push(`${what}: the name ${JSON.stringify(name)} is a fixed lab node (router, fabric, clientN); rename it`);
    }
    const prev = seen.get(name);
    if (prev !== undefined)
      errors.push(`${what}: the name ${JSON.stringify(name)} is also ${prev}; lab nodes (namespaces) need distinct names`);
    else seen.set(name, what);
  };
  config.muxes.forEach((m, i) => claim(m.name, `muxes[${i}].name`));
  config.hosts.forEach((h, i) => claim(h.name, `hosts[${i}].name`));
  config.nics.forEach((n, i) => claim(n.name, `nics[${i}].name`));

  // The fabric: one /24 (and one /64) holding every provider address; the router takes .1 / ::1.
  const pas4 = [...config.muxes.map((m) => m.address), ...config.hosts.map((h) => h.address)];
  const pas6 = [...config.muxes.map((m) => m.address6), ...config.hosts.map((h) => h.address6)].filter((a): a is IpAddr => a !== null);
  const first4 = pas4[0] ?? parseIpAddr('198.18.0.11')!;
  const fabNet4 = netOf(first4, LAB_PREFIX_LEN_V4);
  const router4 = plus(fabNet4, 1);
  // a routed underlay: hosts whose gateway is off the fabric form racks, each behind a leaf router
  const racks: PlanRack[] = [];
  for (const h of config.hosts) {
    if (h.gateway == null || inPrefix(h.gateway, fabNet4, LAB_PREFIX_LEN_V4)) continue;
    const net = `${netOf(h.address, h.prefixLength!).text}/${h.prefixLength}`;
    let r = racks.find((x) => x.net4 === net);
    if (r === undefined) {
      const k = racks.length + 1;
      r = { leaf: `leaf${k}`, net4: net, gw4: h.gateway.text, uplink4: plus(fabNet4, LAB_LEAF_UPLINK_BASE + k).text, hosts: [] };
      racks.push(r);
    }
    if (r.gw4 !== h.gateway.text)
      errors.push(
        `hosts ${h.name}: gateway ${h.gateway.text} differs from ${r.gw4} of another host in ${net}; the lab has one leaf per rack`,
      );
    if (h.address6 !== null) errors.push(`hosts ${h.name}: the lab's routed underlay is IPv4 only; remove address6 of a host in a rack`);
    if (inPrefix(h.address, fabNet4, LAB_PREFIX_LEN_V4))
      errors.push(`hosts ${h.name}: its rack ${net} overlaps the fabric ${fabNet4.text}/24`);
    r.hosts.push(h.name);
  }
  const racked = new Set(racks.flatMap((r) => r.hosts));
  for (const r of racks) {
    if (seen.has(r.leaf)) errors.push(`${seen.get(r.leaf)}: the name ${r.leaf} is a leaf router of the routed lab; rename it`);
    if (pas4.some((a) => a.text === r.uplink4)) errors.push(`provider address ${r.uplink4}: it is ${r.leaf}'s on the fabric; use another`);
  }
  for (const m of config.muxes) {
    if (m.gateway != null && m.gateway.text !== router4.text)
      errors.push(`muxes ${m.name}: gateway ${m.gateway.text} is not the lab router (${router4.text}); the muxes sit on the fabric`);
  }
  for (const a of pas4) {
    if (config.hosts.some((h) => racked.has(h.name) && h.address.text === a.text)) continue;
    if (!inPrefix(a, fabNet4, LAB_PREFIX_LEN_V4))
      errors.push(
        `provider address ${a.text}: the lab puts every provider address on one fabric segment, ${fabNet4.text}/24 (from the first one); move it there`,
      );
    const last = a.words[0]! & 0xff;
    if (last === 0 || last === 1 || last === 255)
      errors.push(`provider address ${a.text}: .0, .1 (the lab router) and .255 are taken on the fabric`);
    if (last === LAB_CONTROLLER_HOST)
      errors.push(`provider address ${a.text}: .${LAB_CONTROLLER_HOST} is the lab controller's on the fabric`);
  }
  let router6: IpAddr | null = null;
  if (pas6.length > 0) {
    const fabNet6 = netOf(pas6[0]!, LAB_PREFIX_LEN_V6);
    router6 = plus(fabNet6, 1);
    for (const a of pas6) {
      if (!inPrefix(a, fabNet6, LAB_PREFIX_LEN_V6))
        errors.push(`provider address ${a.text}: every IPv6 provider address must be in ${fabNet6.text}/64 (from the first one)`);
      if (a.text === router6.text || a.text === fabNet6.text)
        errors.push(`provider address ${a.text}: ${router6.text} is the lab router's and the subnet-router anycast address is reserved`);
      if (a.text === plus(fabNet6, LAB_CONTROLLER_HOST).text)
        errors.push(`provider address ${a.text}: it is the lab controller's on the fabric`);
    }
  }
  const controller4 = plus(fabNet4, LAB_CONTROLLER_HOST);
  const controller: PlanController = {
    addr4: controller4.text,
    addr6: router6 === null ? null : plus(netOf(router6, LAB_PREFIX_LEN_V6), LAB_CONTROLLER_HOST).text,
    fabPort: 'controller',
    mac: macOfV4(controller4),
    port: LAB_CONTROLLER_PORT,
  };
  for (const v of config.vips) {
    if (inPrefix(v.address, fabNet4, LAB_PREFIX_LEN_V4) || (router6 !== null && inPrefix(v.address, netOf(router6, 64), 64))) {
      errors.push(`VIP ${v.address.text} is on the fabric segment; take VIPs from 203.0.113.0/24 or 2001:db8:ff::/64`);
    }
  }

  // Fabric bridge ports: named after the node when the name fits an interface name.
  const usedPorts = new Set<string>(['br0', 'router', 'controller']);
  const fabPort = (name: string, index: number): string => {
    let p = Buffer.byteLength(name) <= IFNAME_MAX ? name : `p${index}`;
    if (usedPorts.has(p)) p = `p${index}`;
    usedPorts.add(p);
    return p;
  };
  let portIndex = 0;
  const muxes: PlanNode[] = config.muxes.map((m) => ({
    name: m.name,
    addr4: m.address.text,
    addr6: m.address6?.text ?? null,
    fabPort: fabPort(m.name, ++portIndex),
    mac: macOfV4(m.address),
  }));
  const hosts: PlanNode[] = config.hosts.map((h) => ({
    name: h.name,
    addr4: h.address.text,
    addr6: h.address6?.text ?? null,
    fabPort: fabPort(h.name, ++portIndex),
    mac: macOfV4(h.address),
  }));

  // Services per nic: the backend ports of the rules whose pool holds the nic, and the probe ports.
  const tcpOf = new Map<string, Set<number>>();
  const udpOf = new Map<string, Set<number>>();
  const poolNics = new Map(config.pools.map((p) => [p.name, p.backends.map((b) => b.nic)]));
  const probes = new Map(config.probes.map((p) => [p.name, p]));
  const add = (m: Map<string, Set<number>>, nic: string, port: number) => {
    const s = m.get(nic) ?? new Set<number>();
    s.add(port);
    m.set(nic, s);
  };
  for (const v of config.vips) {
    for (const r of v.rules) {
      for (const nic of poolNics.get(r.pool) ?? []) {
        if (r.protocols.includes(6)) add(tcpOf, nic, r.backendPort);
        if (r.protocols.includes(17)) add(udpOf, nic, r.backendPort);
        const probe = r.probe === null ? undefined : probes.get(r.probe);
        if (probe !== undefined) add(tcpOf, nic, probe.port);
      }
    }
  }
  const sorted = (s: Set<number> | undefined, dflt: number) => (s === undefined || s.size === 0 ? [dflt] : [...s].sort((a, b) => a - b));
  const networks = new Map(config.networks.map((n) => [n.name, n]));
  const nics: PlanNic[] = config.nics.map((n, i) => {
    const net = networks.get(n.network);
    if (n.port === 'fab0' || n.port === 'lo')
      errors.push(`nics[${i}].port: ${n.port} is taken in the host's namespace; name the port otherwise`);
    if (!tcpOf.has(n.name) && !udpOf.has(n.name))
      warnings.push(`nic ${n.name} is in no pool of a rule: it gets the default services (HTTP on 80, UDP echo on 7)`);
    return {
      name: n.name,
      host: n.host,
      port: n.port,
      mac: formatMac(n.mac),
      addr4: n.address4?.text ?? null,
      addr6: n.address6?.text ?? null,
      gw4: n.address4 !== null ? (net?.gateway?.text ?? null) : null,
      gw6: n.address6 !== null ? (net?.gateway6?.text ?? null) : null,
      tcpPorts: sorted(tcpOf.get(n.name), 80),
      udpPorts: sorted(udpOf.get(n.name), 7),
      vlan: net?.vlan ?? null,
    };
  });
  for (const n of nics) {
    if (n.addr4 !== null && n.gw4 === null)
      warnings.push(`nic ${n.name}: its network has no gateway, so it has no IPv4 default route and cannot answer clients`);
    if (n.addr6 !== null && n.gw6 === null)
      warnings.push(`nic ${n.name}: its network has no gateway6, so it has no IPv6 default route and cannot answer clients`);
  }

  // internal VIPs (docs/east-west.md) are reached inside VXLAN from the hosts, never routed by the router
  const vips: PlanVip[] = config.vips
    .filter((v) => v.scope !== 'internal')
    .map((v) => {
      const v6 = v.address.family === 6;
      const nexthops = v6 ? muxes.map((m) => m.addr6).filter((a): a is string => a !== null) : muxes.map((m) => m.addr4);
      if (nexthops.length === 0)
        warnings.push(`VIP ${v.address.text}: no mux has an IPv6 provider address, so the router has no route to it`);
      return { address: v.address.text, prefixLen: v6 ? 128 : 32, nexthops };
    });

  const clientList: PlanClient[] = [];
  for (let k = 1; k <= clients; k++) {
    const base = CLIENT_FIRST_HOST + CLIENT_STRIDE * (k - 1);
    const addrs4: string[] = [];
    const addrs6: string[] = [];
    for (let j = 0; j < CLIENT_ADDRS_PER_CLIENT; j++) {
      addrs4.push(plus(client4Net, base + j).text);
      addrs6.push(plus(client6Net, decimalDigitsAsHex(base) + j).text);
    }
    clientList.push({ name: `client${k}`, port: `client${k}`, mac: macOfV4(parseIpAddr(addrs4[0]!)!), addrs4, addrs6 });
  }

  // MACs must not collide (the generated ones are 02:00 + an IPv4 address of the lab).
  const macs = new Map<string, string>();
  const routerFabMac = macOfV4(router4);
  const routerClientMac = macOfV4(plus(client4Net, 1));
  const macOwners: [string, string][] = [
    [routerFabMac, 'router fab0'],
    [routerClientMac, 'router br0'],
    [controller.mac, 'controller fab0'],
    ...muxes.map((m): [string, string] => [m.mac, `mux ${m.name}`]),
    ...hosts.map((h): [string, string] => [h.mac, `host ${h.name}`]),
    ...nics.map((n): [string, string] => [n.mac, `nic ${n.name}`]),
    ...clientList.map((c): [string, string] => [c.mac, `${c.name} eth0`]),
  ];
  for (const [m, who] of macOwners) {
    const prev = macs.get(m);
    if (prev !== undefined) errors.push(`MAC ${m} of ${who} is also the MAC of ${prev}`);
    else macs.set(m, who);
  }

  // BGP: the muxes peer with the lab router (BIRD), on its fabric addresses, port 179, private ASNs
  let bgp: PlanBgp | null = null;
  if (config.bgp !== null) {
    const b = config.bgp;
    const inRange = (asn: number) => asn >= LAB_ASN_RANGE[0] && asn <= LAB_ASN_RANGE[1];
    if (!inRange(b.asn))
      errors.push(`bgp.asn: ${b.asn} is not a private 2-octet ASN (${LAB_ASN_RANGE[0]}..${LAB_ASN_RANGE[1]}), which the lab uses`);
    let peer4: string | null = null;
    let peer6: string | null = null;
    b.peers.forEach((p, i) => {
      if (p.address.text === router4.text || (racks.length > 0 && p.address.text === LAB_ROUTER_LOOPBACK4)) peer4 = p.address.text;
      else if (router6 !== null && p.address.text === router6.text) peer6 = p.address.text;
      else
        errors.push(
          `bgp.peers[${i}].address: ${p.address.text} is not the lab router (${router4.text}${router6 !== null ? ` or ${router6.text}` : ''}${racks.length > 0 ? `, or its loopback ${LAB_ROUTER_LOOPBACK4}` : ''}): the muxes peer with the router`,
        );
      if (!inRange(p.asn))
        errors.push(
          `bgp.peers[${i}].asn: ${p.asn} is not a private 2-octet ASN (${LAB_ASN_RANGE[0]}..${LAB_ASN_RANGE[1]}), which the lab uses`,
        );
      if (p.asn !== b.peers[0]!.asn)
        errors.push(`bgp.peers[${i}].asn: ${p.asn} differs from bgp.peers[0].asn (${b.peers[0]!.asn}); the lab router has one AS`);
      if (p.asn === b.asn) errors.push(`bgp.peers[${i}].asn: ${p.asn} is the muxes' own AS; the lab router is an eBGP peer in another AS`);
      if (p.port !== 179) errors.push(`bgp.peers[${i}].port: BIRD in the lab listens on 179, not ${p.port}`);
    });
    bgp = {
      muxAsn: b.asn,
      routerAsn: b.peers[0]!.asn,
      holdTimeS: b.holdTimeS,
      keepaliveS: b.keepaliveS,
      bfd: { ...b.bfd },
      peer4,
      peer6,
    };
  }

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    plan: {
      fabricMtu: config.fabric.mtu,
      router: {
        client4: plus(client4Net, 1).text,
        client6: plus(client6Net, 1).text,
        fab4: router4.text,
        fab6: router6?.text ?? null,
        fabPort: 'router',
        fabMac: routerFabMac,
        clientMac: routerClientMac,
      },
      controller,
      clients: clientList,
      muxes,
      hosts,
      nics,
      vips,
      vipRanges: config.vipRanges.map((r) => r.text),
      bgp,
      racks,
      loopback4: racks.length > 0 ? LAB_ROUTER_LOOPBACK4 : null,
      warnings,
    },
  };
}

const dash = (s: string | null | undefined) => (s === null || s === undefined || s === '' ? '-' : s);
const list = (l: readonly (string | number)[]) => (l.length === 0 ? '-' : l.join(','));

/** The shell-readable form (see the header of this file). */
export function formatLabPlan(p: LabPlan): string {
  const lines: string[] = [];
  lines.push(`fabric ${p.fabricMtu}`);
  const r = p.router;
  lines.push(`router ${r.client4} ${r.client6} ${r.fab4} ${dash(r.fab6)} ${r.fabPort} ${r.fabMac} ${r.clientMac}`);
  const k = p.controller;
  lines.push(`controller ${k.addr4} ${dash(k.addr6)} ${k.fabPort} ${k.mac} ${k.port}`);
  for (const c of p.clients) lines.push(`client ${c.name} ${c.port} ${c.mac} ${list(c.addrs4)} ${list(c.addrs6)}`);
  for (const m of p.muxes) lines.push(`mux ${m.name} ${m.addr4} ${dash(m.addr6)} ${m.fabPort} ${m.mac}`);
  for (const h of p.hosts) lines.push(`host ${h.name} ${h.addr4} ${dash(h.addr6)} ${h.fabPort} ${h.mac}`);
  for (const n of p.nics) {
    lines.push(
      `nic ${n.name} ${n.host} ${n.port} ${n.mac} ${dash(n.addr4)} ${dash(n.addr6)} ${dash(n.gw4)} ${dash(n.gw6)} ${list(n.tcpPorts)} ${list(n.udpPorts)}`,
    );
  }
  for (const n of p.nics) if (n.vlan !== null) lines.push(`vlan ${n.name} ${n.vlan}`);
  for (const v of p.vips) lines.push(`vip ${v.address} ${v.prefixLen} ${list(v.nexthops)}`);
  if (p.bgp !== null) {
    const b = p.bgp;
    lines.push(
      `bgp ${b.muxAsn} ${b.routerAsn} ${b.holdTimeS} ${b.keepaliveS} ${b.bfd.enabled ? 'on' : 'off'} ${b.bfd.intervalMs} ${b.bfd.multiplier} ${dash(b.peer4)} ${dash(b.peer6)}`,
    );
  }
  for (const r of p.racks) lines.push(`rack ${r.leaf} ${r.net4} ${r.gw4} ${r.uplink4} ${list(r.hosts)}`);
  if (p.loopback4 !== null) lines.push(`loopback ${p.loopback4}`);
  for (const w of p.warnings) lines.push(`warning ${w}`);
  return `${lines.join('\n')}\n`;
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'config', value: 'FILE', help: 'the slbx config (YAML or JSON)', default: 'examples/lab.yaml' },
  { name: 'clients', value: 'N', help: `number of client namespaces, 1..${MAX_CLIENTS}`, default: '1' },
  { name: 'json', help: 'print the plan as JSON instead of shell-readable lines' },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'plan',
  usage: 'node dist/scripts/lab/plan.js [--config FILE] [--clients N] [--json]',
  options: OPTIONS,
  noPositional: true,
  about: 'Prints the lab topology (namespaces, links, addresses, routes, services) derived from an slbx config.',
};

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const file = one(args, 'config')!;
  const clientsText = one(args, 'clients')!;
  if (!/^\d+$/.test(clientsText)) {
    process.stderr.write(`plan: --clients must be a number 1..${MAX_CLIENTS}, got ${clientsText}\n`);
    return 2;
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    process.stderr.write(`plan: cannot read ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const r = parseConfig(text, file);
  if (!r.ok) {
    process.stderr.write(`${formatConfigErrors(r.errors, file)}\n`);
    return 1;
  }
  const p = buildLabPlan(r.config, Number(clientsText));
  if (!p.ok) {
    process.stderr.write(`${p.errors.map((e) => `${file}: lab: ${e}`).join('\n')}\n`);
    return 1;
  }
  process.stdout.write(args.flags.has('json') ? `${JSON.stringify(p.plan, null, 2)}\n` : formatLabPlan(p.plan));
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
