// Address fields: the family wanted, no leading zeros, a unicast address.
import { parseIpAddr, type IpAddr } from '../addr.js';
import { has, quoteHint, type Checker, type Obj, type Path } from './check.js';

export type FamilyWanted = 4 | 6 | 'any';

export function familyText(f: FamilyWanted): string {
  return f === 4 ? 'an IPv4 address' : f === 6 ? 'an IPv6 address' : 'an IPv4 or IPv6 address';
}

/** Why an address cannot be used as a config address (not a usable unicast address), or null. */
export function addressProblem(a: IpAddr): string | null {
  const w = a.words;
  if (a.family === 4) {
    const first = w[0]! >>> 24;
    if (first === 0) return 'is in 0.0.0.0/8 ("this network"), not a usable unicast address';
    if (first === 127) return 'is a loopback address';
    if (first >= 224 && first <= 239) return 'is a multicast address';
    if (first >= 240) return 'is in 240.0.0.0/4 (reserved, or broadcast), not a usable unicast address';
    return null;
  }
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0) return 'is the unspecified address';
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 1) return 'is the loopback address';
  if (w[0]! >>> 24 === 0xff) return 'is a multicast address';
  if (w[0] === 0 && w[1] === 0 && w[2] === 0xffff) return 'is an IPv4-mapped IPv6 address; write the IPv4 address itself';
  return null;
}

export function parseAddress(c: Checker, at: Path, v: unknown, family: FamilyWanted, otherField?: string): IpAddr | undefined {
  const want = familyText(family);
  if (typeof v !== 'string') {
    c.add(at, v, `must be ${want} written as a string${quoteHint(v)}`);
    return undefined;
  }
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(v) && /(^|\.)0\d/.test(v)) {
    c.add(at, v, `must be ${want}; leading zeros in an IPv4 address are ambiguous (octal in some tools): remove them`);
    return undefined;
  }
  const a = parseIpAddr(v);
  if (a === null) {
    const hint = v.includes('/') ? ' without a prefix length' : v.includes('%') ? ' without a zone index' : '';
    c.add(at, v, `must be ${want}${hint}`);
    return undefined;
  }
  if (family !== 'any' && a.family !== family) {
    const move = otherField !== undefined ? `; put it in '${otherField}'` : '';
    c.add(at, v, `must be ${want}, not IPv${a.family}${move}`);
    return undefined;
  }
  const problem = addressProblem(a);
  if (problem !== null) {
    c.add(at, v, `${a.text} ${problem}; use a unicast address`);
    return undefined;
  }
  return a;
}

/** An optional address field: absent or null -> null. */
export function optAddressField(c: Checker, o: Obj, path: Path, key: string, family: 4 | 6, otherField: string): IpAddr | null | undefined {
  if (!has(o, key) || o[key] === null) return null;
  return parseAddress(c, [...path, key], o[key], family, otherField);
}

export function reqAddressField(
  c: Checker,
  o: Obj,
  path: Path,
  key: string,
  family: FamilyWanted,
  otherField?: string,
): IpAddr | undefined {
  if (!has(o, key)) {
    c.add([...path, key], undefined, `required: ${familyText(family)}`);
    return undefined;
  }
  return parseAddress(c, [...path, key], o[key], family, otherField);
}

export function ipKey(a: IpAddr): string {
  return a.text;
}
