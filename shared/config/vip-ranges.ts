// vipRanges: the prefixes the operator delegates to the load balancer (docs/config.md). The router
// accepts a MUX's host route only inside them, so a VIP outside one could never be reached: refused.

import { formatIpv4, formatIpv6, inPrefix, parseIpAddr, type IpAddr } from '../addr.js';
import { has, isList, listItems, listNames, quoteHint, type Checker, type Claim, type Obj, type Path } from './check.js';
import { addressProblem, ipKey } from './addresses.js';
import type { NodeP } from './nodes.js';
import type { BgpConfig, VipRange } from './types.js';
import type { VipP } from './vips.js';

/** True when `a` lies inside `r` (same family, the first prefixLen bits equal). */
export function inVipRange(a: IpAddr, r: VipRange): boolean {
  return inPrefix(a, r.network, r.prefixLen);
}

/** The host route of one address: `/32` or `/128`. */
export function hostVipRange(a: IpAddr): VipRange {
  const len = a.family === 4 ? 32 : 128;
  return { network: a, prefixLen: len, text: `${a.text}/${len}` };
}

/** Reads `ADDR/LEN`; a string that says what is wrong otherwise. */
export function parseVipRange(text: string): VipRange | string {
  const m = /^([^/\s]+)\/(\d{1,3})$/.exec(text);
  if (m === null) return 'must be a prefix ADDRESS/LENGTH, like 203.0.113.0/24 or 2001:db8:ff::/48';
  const a = parseIpAddr(m[1]!);
  if (a === null) return `${m[1]} is not an IPv4 or IPv6 address (leading zeros are refused); write a prefix like 203.0.113.0/24`;
  const max = a.family === 4 ? 32 : 128;
  const len = Number(m[2]);
  if (len < 1 || len > max) return `the length must be 1..${max} for IPv${a.family} (/0 would delegate every address)`;
  const words = Uint32Array.from(a.words, (w, i) => {
    const left = len - 32 * i;
    return left >= 32 ? w : left <= 0 ? 0 : (w & ~(0xffffffff >>> left)) >>> 0;
  });
  const net = parseIpAddr(a.family === 4 ? formatIpv4(words[0]!) : formatIpv6(words))!;
  if (net.text !== a.text) return `${text} has host bits set: write ${net.text}/${len}`;
  const problem = addressProblem(net);
  if (problem !== null && !(a.family === 6 && problem.includes('unspecified'))) return `${net.text} ${problem}; delegate a unicast prefix`;
  return { network: net, prefixLen: len, text: `${net.text}/${len}` };
}

/** The `vipRanges` list: null when absent (derived from the VIPs), undefined when invalid (reported). */
export function validateVipRanges(
  c: Checker,
  raw: Obj,
  nodes: readonly (readonly [string, readonly (NodeP | undefined)[]])[],
): VipRange[] | null | undefined {
  if (!has(raw, 'vipRanges') || raw['vipRanges'] === null) return null;
  const v = raw['vipRanges'];
  const hint = 'prefixes like 203.0.113.0/24 and 2001:db8:ff::/48';
  if (!isList(v) || v.length === 0) {
    c.add(['vipRanges'], v, `must be a list of ${hint}, at least one (or leave it out: the VIPs' own /32 and /128)`);
    return undefined;
  }
  const out: VipRange[] = [];
  let ok = true;
  const seen = new Map<string, number>();
  listItems(v).forEach((it, i) => {
    const at: Path = ['vipRanges', i];
    const r = typeof it === 'string' ? parseVipRange(it) : `must be a prefix written as a string${quoteHint(it)}, like 203.0.113.0/24`;
    if (typeof r === 'string') {
      c.add(at, it, r);
      ok = false;
      return;
    }
    const prev = seen.get(r.text);
    if (prev !== undefined) {
      c.add(at, it, `${r.text} is already vipRanges[${prev}]; list each prefix once`);
      ok = false;
      return;
    }
    seen.set(r.text, i);
    const held: string[] = [];
    for (const [section, list] of nodes) {
      list.forEach((n, ni) => {
        for (const a of [n?.address, n?.address6])
          if (a != null && inVipRange(a, r)) held.push(`${a.text} (${n?.name ?? `${section}[${ni}]`})`);
      });
    }
    if (held.length > 0) {
      c.add(
        at,
        it,
        `${r.text} holds the provider address${held.length > 1 ? 'es' : ''} ${listNames(held, 4)}; the router would accept routes into its own fabric from a MUX: delegate a prefix of VIPs only`,
      );
      ok = false;
    }
    out.push(r);
  });
  return ok ? out : undefined;
}

/** Every VIP inside a range, no BGP peer inside one; the ranges in force (derived when absent). */
export function checkVipsInRanges(
  c: Checker,
  given: VipRange[] | null | undefined,
  vips: readonly (VipP | undefined)[],
  taken: ReadonlyMap<string, Claim>,
  bgp: BgpConfig | null | undefined,
): VipRange[] | undefined {
  if (given === undefined) return undefined;
  if (given === null) {
    // absent: the VIPs' own host routes. They are written out in the normalized config (plainConfig),
    // so a controller seeded from this config keeps them: a VIP added later needs a declared range.
    const derived: VipRange[] = [];
    for (const v of vips)
      if (v?.address !== undefined && v.scope !== 'internal' && !derived.some((r) => r.network.text === v.address!.text))
        derived.push(hostVipRange(v.address)); // an internal VIP is never announced (docs/east-west.md)
    return derived;
  }
  const list = given.map((r) => r.text).join(', ');
  vips.forEach((v, vi) => {
    const a = v?.address;
    if (a === undefined || taken.has(ipKey(a)) || given.some((r) => inVipRange(a, r))) return; // a taken address is refused already
    if (v?.scope !== 'public') return; // internal: never announced (checkInternalOutsideRanges); undefined: scope reported
    c.add(
      ['vips', vi, 'address'],
      a.text,
      `VIP ${a.text} is outside vipRanges (${list}), the prefixes the router accepts from the MUXes, so no client could reach it: take an address inside one, or add a prefix that holds it to vipRanges (and to the router's import policy, docs/bgp.md)`,
    );
  });
  bgp?.peers.forEach((p, pi) => {
    const r = given.find((x) => inVipRange(p.address, x));
    if (r !== undefined)
      c.add(
        ['bgp', 'peers', pi, 'address'],
        p.address.text,
        `${p.address.text} is inside vipRanges (${r.text}); the router's address must not be a prefix it accepts from the MUXes`,
      );
  });
  return given;
}
