// The nics section: the backends' interfaces (host, network, port, MAC, addresses), unique per
// network and per host.
import { formatMac, parseMac } from '../addr.js';
import type { IpAddr } from '../addr.js';
import {
  formatPath,
  has,
  isList,
  itemObj,
  listItems,
  nameField,
  quoteHint,
  refField,
  type Checker,
  type Claim,
  type NameTable,
  type Path,
} from './check.js';
import { ipKey, parseAddress } from './addresses.js';
import { IFNAME_MAX_BYTES } from './defaults.js';

const NIC_KEYS = ['name', 'host', 'network', 'port', 'mac', 'addresses'] as const;

export interface NicAddr {
  addr: IpAddr;
  index: number;
}
export interface NicP {
  name?: string;
  host?: string;
  network?: string;
  port?: string;
  mac?: Uint8Array;
  /** Set only when the whole list is valid. */
  addrs?: NicAddr[];
}

export function validateNics(
  c: Checker,
  nicItems: readonly unknown[],
  hostNames: NameTable,
  netNames: NameTable,
): { nics: (NicP | undefined)[]; nicAddrClaims: Map<string, Claim> } {
  const nics: (NicP | undefined)[] = [];
  const nicAddrClaims = new Map<string, Claim>(); // network|address
  const nicMacClaims = new Map<string, Claim>(); // network|mac
  const portClaims = new Map<string, Claim>(); // host|port
  nicItems.forEach((it, i) => {
    const at: Path = ['nics', i];
    const o = itemObj(c, it, at, NIC_KEYS);
    if (o === undefined) return nics.push(undefined);
    const n: NicP = { name: nameField(c, o, at) };
    const hostIdx = refField(c, o, at, 'host', 'host', 'hosts', hostNames);
    if (hostIdx !== undefined) n.host = o['host'] as string;
    const netIdx = refField(c, o, at, 'network', 'network', 'networks', netNames);
    if (netIdx !== undefined) n.network = o['network'] as string;

    // port: default = name
    if (has(o, 'port')) {
      const p = o['port'];
      if (typeof p !== 'string') c.add([...at, 'port'], p, `must be a Linux interface name as a string${quoteHint(p)}`);
      else {
        const problem = ifnameProblem(p);
        if (problem !== null) c.add([...at, 'port'], p, `the interface name ${problem}`);
        else n.port = p;
      }
    } else if (n.name !== undefined) {
      const problem = ifnameProblem(n.name);
      if (problem !== null)
        c.add(
          [...at, 'port'],
          undefined,
          `the port defaults to the nic's name '${n.name}', which ${problem}: set 'port' to the interface name`,
        );
      else n.port = n.name;
    }

    // mac
    if (!has(o, 'mac')) c.add([...at, 'mac'], undefined, "required: the backend's MAC address, like 02:00:c0:00:02:0a");
    else {
      const m = o['mac'];
      const mac = typeof m === 'string' ? parseMac(m) : null;
      if (mac === null) c.add([...at, 'mac'], m, `must be a MAC address written as a string like 02:00:c0:00:02:0a${quoteHint(m)}`);
      else if ((mac[0]! & 1) === 1)
        c.add(
          [...at, 'mac'],
          m,
          'must be a unicast MAC: the lowest bit of the first byte (I/G) is set, which makes it multicast or broadcast',
        );
      else if (mac.every((b) => b === 0)) c.add([...at, 'mac'], m, 'must not be all zero');
      else n.mac = mac;
    }

    // addresses: 1..2, at most one per family
    const addrsAt: Path = [...at, 'addresses'];
    if (!has(o, 'addresses')) c.add(addrsAt, undefined, 'required: a list of 1 or 2 addresses, at most one IPv4 and one IPv6');
    else if (!isList(o['addresses']))
      c.add(
        addrsAt,
        o['addresses'],
        'must be a list of 1 or 2 addresses, at most one IPv4 and one IPv6, like [192.0.2.10, 2001:db8:d::10]',
      );
    else {
      const list = listItems(o['addresses'] as unknown[]);
      let ok = true;
      if (list.length < 1 || list.length > 2) {
        c.add(addrsAt, list, `must list 1 or 2 addresses (at most one IPv4 and one IPv6), not ${list.length}`);
        ok = false;
      }
      const addrs: NicAddr[] = [];
      const seen: Partial<Record<4 | 6, number>> = {};
      list.forEach((v, j) => {
        const a = parseAddress(c, [...addrsAt, j], v, 'any');
        if (a === undefined) {
          ok = false;
          return;
        }
        const prev = seen[a.family];
        if (prev !== undefined && list.length <= 2) {
          c.add([...addrsAt, j], v, `a nic has at most one IPv${a.family} address; addresses[${prev}] is IPv${a.family} too`);
          ok = false;
          return;
        }
        seen[a.family] = j;
        addrs.push({ addr: a, index: j });
      });
      if (ok) n.addrs = addrs.sort((x, y) => x.addr.family - y.addr.family);
    }

    // uniqueness across nics
    const label = `nic ${n.name ?? `nics[${i}]`}`;
    if (n.network !== undefined && n.addrs !== undefined) {
      for (const { addr, index } of n.addrs) {
        const key = `${n.network}|${ipKey(addr)}`;
        const prev = nicAddrClaims.get(key);
        if (prev !== undefined) {
          c.add(
            [...addrsAt, index],
            addr.text,
            `address ${addr.text} in network ${n.network} already belongs to ${prev.what} (${prev.path}); an address belongs to one nic per network`,
          );
        } else {
          nicAddrClaims.set(key, { what: label, path: formatPath([...addrsAt, index]) });
        }
      }
    }
    if (n.network !== undefined && n.mac !== undefined) {
      const text = formatMac(n.mac);
      const key = `${n.network}|${text}`;
      const prev = nicMacClaims.get(key);
      if (prev !== undefined) {
        c.add(
          [...at, 'mac'],
          o['mac'],
          `MAC ${text} in network ${n.network} already belongs to ${prev.what} (${prev.path}); host agents switch on (VNI, MAC), so it must be unique per network`,
        );
      } else {
        nicMacClaims.set(key, { what: label, path: formatPath([...at, 'mac']) });
      }
    }
    if (n.host !== undefined && n.port !== undefined) {
      const key = `${n.host}|${n.port}`;
      const prev = portClaims.get(key);
      const portAt: Path = has(o, 'port') ? [...at, 'port'] : [...at, 'name'];
      if (prev !== undefined) {
        c.add(
          portAt,
          n.port,
          `port ${n.port} on host ${n.host} is already the port of ${prev.what} (${prev.path}); every nic on a host needs its own interface`,
        );
      } else {
        portClaims.set(key, { what: label, path: formatPath(portAt) });
      }
    }
    nics.push(n);
  });
  return { nics, nicAddrClaims };
}

function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

/** Why `name` cannot be a Linux interface name (the kernel's dev_valid_name), or null. */
function ifnameProblem(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (utf8Length(name) > IFNAME_MAX_BYTES)
    return `is ${utf8Length(name)} bytes long; Linux interface names have at most ${IFNAME_MAX_BYTES}`;
  if (name === '.' || name === '..') return `cannot be '.' or '..'`;
  if (/[/:\s\0]/.test(name)) return `contains '/', ':', whitespace or NUL, which Linux refuses in interface names`;
  if (name.includes('%')) return `contains '%', which Linux expands as a name template; it can never be the name of an existing interface`;
  return null;
}
