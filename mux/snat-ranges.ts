// The MUX's outbound NAT return table (docs/outbound.md): (frontend IP, port) -> the host that owns the
// port's range. Stateless and the same on every MUX (built from the policy's ranges alone), so a reply
// that ECMP sends to any MUX reaches the same host, and no flow state is kept for it. One array of
// 8064 chunk slots (ports 1024-65535 by 8) per frontend IP: a lookup is one index, no allocation.
import { SNAT_CHUNK_PORTS, SNAT_FIRST_PORT, SNAT_LAST_PORT } from '../shared/config/outbound.js';
import { parseIpAddr, type IpAddr } from '../shared/addr.js';

const CHUNKS = (SNAT_LAST_PORT - SNAT_FIRST_PORT + 1) / SNAT_CHUNK_PORTS;

export interface SnatRangeIn {
  readonly ip: IpAddr;
  readonly first: number;
  readonly last: number;
  /** The owner: the host's index in a host list (snatTableFromPolicy), or the nic's id (snatTableForNics, the MUX's). */
  readonly host: number;
}

export interface SnatRangeTable {
  /** IPv4 frontend IP (as a number) -> chunk -> host index + 1 (0: no owner). */
  readonly v4: ReadonlyMap<number, Uint16Array>;
  readonly v6: readonly { readonly words: Uint32Array; readonly chunks: Uint16Array }[];
  readonly ranges: number;
}

/**
 * Why the ranges cannot make a table (off the chunk grid, outside 1024-65535, two owners of one chunk), or
 * the table. `frontends`: IPs to hold in the table even with no range yet (every port of theirs: no owner).
 */
export function buildSnatRangeTable(ranges: readonly SnatRangeIn[], frontends: readonly IpAddr[] = []): SnatRangeTable | string {
  const v4 = new Map<number, Uint16Array>();
  const v6: { words: Uint32Array; chunks: Uint16Array }[] = [];
  for (const a of frontends) {
    if (a.family === 4) {
      if (!v4.has(a.words[0]!)) v4.set(a.words[0]!, new Uint16Array(CHUNKS));
    } else if (!v6.some((x) => x.words.every((w, i) => w === a.words[i])))
      v6.push({ words: Uint32Array.from(a.words), chunks: new Uint16Array(CHUNKS) });
  }
  for (const r of ranges) {
    if (r.first < SNAT_FIRST_PORT || r.last > SNAT_LAST_PORT || r.last < r.first)
      return `range ${r.ip.text}:${r.first}-${r.last} is outside ${SNAT_FIRST_PORT}-${SNAT_LAST_PORT}`;
    if ((r.first - SNAT_FIRST_PORT) % SNAT_CHUNK_PORTS !== 0 || (r.last - SNAT_FIRST_PORT + 1) % SNAT_CHUNK_PORTS !== 0)
      return `range ${r.ip.text}:${r.first}-${r.last} is not whole chunks of ${SNAT_CHUNK_PORTS} from ${SNAT_FIRST_PORT}`;
    if (!Number.isInteger(r.host) || r.host < 0 || r.host > 0xfffe) return `range ${r.ip.text}:${r.first}-${r.last} names no host`;
    let chunks: Uint16Array;
    if (r.ip.family === 4) {
      const k = r.ip.words[0]!;
      let c = v4.get(k);
      if (c === undefined) v4.set(k, (c = new Uint16Array(CHUNKS)));
      chunks = c;
    } else {
      let e = v6.find((x) => x.words.every((w, i) => w === r.ip.words[i]));
      if (e === undefined) v6.push((e = { words: Uint32Array.from(r.ip.words), chunks: new Uint16Array(CHUNKS) }));
      chunks = e.chunks;
    }
    for (let p = r.first; p <= r.last; p += SNAT_CHUNK_PORTS) {
      const i = (p - SNAT_FIRST_PORT) / SNAT_CHUNK_PORTS;
      const prev = chunks[i]!;
      if (prev !== 0 && prev !== r.host + 1) return `port ${r.ip.text}:${p} has two owners (hosts ${prev - 1} and ${r.host})`;
      chunks[i] = r.host + 1;
    }
  }
  return { v4, v6, ranges: ranges.length };
}

/** The host index owning an IPv4 frontend IP's port; -1 when the IP is no frontend or no host owns the port. */
export function lookupSnat4(t: SnatRangeTable, dst: number, port: number): number {
  const c = t.v4.get(dst);
  if (c === undefined || port < SNAT_FIRST_PORT) return -1;
  return c[(port - SNAT_FIRST_PORT) >>> 3]! - 1;
}

/** As lookupSnat4, for IPv6: the address as four big-endian words at buf[off]. */
export function lookupSnat6(t: SnatRangeTable, buf: Uint8Array, off: number, port: number): number {
  if (port < SNAT_FIRST_PORT) return -1;
  for (const e of t.v6) {
    let same = true;
    for (let i = 0; i < 4 && same; i++) {
      const o = off + i * 4;
      same = ((buf[o]! << 24) | (buf[o + 1]! << 16) | (buf[o + 2]! << 8) | buf[o + 3]!) >>> 0 === e.words[i];
    }
    if (same) return e.chunks[(port - SNAT_FIRST_PORT) >>> 3]! - 1;
  }
  return -1;
}

/** The chunk owners of an IPv6 frontend IP given as four words (index (port - 1024) >>> 3; value owner + 1, 0: none), or undefined. */
export function snatChunks6(t: SnatRangeTable, w: Uint32Array | readonly number[]): Uint16Array | undefined {
  for (const e of t.v6) {
    const x = e.words;
    if (x[0] === w[0] && x[1] === w[1] && x[2] === w[2] && x[3] === w[3]) return e.chunks;
  }
  return undefined;
}

/** True when `dst` is an IPv4 frontend IP of outbound NAT (its replies are looked up here, not as a VIP's). */
export function isSnatFrontend4(t: SnatRangeTable, dst: number): boolean {
  return t.v4.has(dst);
}

/** The table from the policy's ranges (controller/snat-alloc.ts SnatRange): host names -> indexes into `hosts`. */
export function snatTableFromPolicy(
  ranges: readonly { readonly ip: string; readonly first: number; readonly last: number; readonly host: string }[],
  hosts: readonly string[],
): SnatRangeTable | string {
  const ins: SnatRangeIn[] = [];
  for (const r of ranges) {
    const a = parseIpAddr(r.ip);
    const h = hosts.indexOf(r.host);
    if (a === null) return `range ${r.ip}:${r.first}-${r.last}: not an address`;
    if (h < 0) return `range ${r.ip}:${r.first}-${r.last}: no host ${r.host}`;
    ins.push({ ip: a, first: r.first, last: r.last, host: h });
  }
  return buildSnatRangeTable(ins);
}

/** A range as the policy carries it (controller/snat-alloc.ts SnatRange). */
export interface SnatPolicyRange {
  readonly ip: string;
  readonly first: number;
  readonly last: number;
  readonly host: string;
  readonly nic: string;
}

/**
 * The MUX's table from the policy's ranges with the owning nic as the owner (its id in `nicIds`), so a
 * reply goes to the nic's host in the nic's VNI. Refuses a range naming an unknown nic, or a nic on another
 * host than the range says (a policy out of step with its config).
 */
export function snatTableForNics(
  ranges: readonly SnatPolicyRange[],
  nics: ReadonlyMap<string, { readonly id: number; readonly host: string }>,
  frontends: readonly IpAddr[],
): SnatRangeTable | string {
  const ins: SnatRangeIn[] = [];
  for (const r of ranges) {
    const a = parseIpAddr(r.ip);
    const n = nics.get(r.nic);
    if (a === null) return `range ${r.ip}:${r.first}-${r.last}: not an address`;
    if (n === undefined) return `range ${r.ip}:${r.first}-${r.last}: no nic ${r.nic}`;
    if (n.host !== r.host) return `range ${r.ip}:${r.first}-${r.last}: nic ${r.nic} is on ${n.host}, not ${r.host}`;
    if (!frontends.some((f) => f.family === a.family && f.words.every((w, i) => w === a.words[i])))
      return `range ${r.ip}:${r.first}-${r.last}: ${r.ip} is no frontend IP of an outbound rule`;
    ins.push({ ip: a, first: r.first, last: r.last, host: n.id });
  }
  return buildSnatRangeTable(ins, frontends);
}
