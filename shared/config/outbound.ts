// The outbound section (docs/outbound.md): outbound NAT rules. A rule gives the nics it serves (a pool's
// or listed) frontend IPs (a public VIP's address or a dedicated public IP) from which the controller
// allocates each nic's share of frontend ports in chunks of SNAT_CHUNK_PORTS. Checked against the
// normalized rest of the config, so every reference here resolves to a validated value.
import { parseIpAddr, type IpAddr } from '../addr.js';
import {
  boolField,
  enumField,
  formatValue,
  has,
  intField,
  isList,
  itemObj,
  listItems,
  listNames,
  nameField,
  quoteHint,
  type Checker,
  type Obj,
  type Path,
} from './check.js';
import { ipKey } from './addresses.js';
import { inVipRange } from './vip-ranges.js';
import type { IpProtocolNumber, RuleProtocol, SlbxConfig } from './types.js';

/** Ports are handed out in chunks of this many (Ananta allocates VIP ports to hosts in chunks of 8). */
export const SNAT_CHUNK_PORTS = 8;
/** The frontend ports outbound NAT may use on one IP: 1024-65535 (below 1024: well-known ports, left alone). */
export const SNAT_FIRST_PORT = 1024;
export const SNAT_LAST_PORT = 65535;
export const SNAT_PORTS_PER_IP = SNAT_LAST_PORT - SNAT_FIRST_PORT + 1; // 64512
/** Azure Load Balancer's default ports per instance by pool size: [largest pool, ports each]. */
export const SNAT_AUTO_TABLE: readonly (readonly [number, number])[] = [
  [50, 1024],
  [100, 512],
  [200, 256],
  [400, 128],
  [800, 64],
  [1000, 32],
];
export const OUTBOUND_DEFAULTS = { protocol: 'all' as RuleProtocol, idleTimeoutMin: 4, tcpResetOnIdle: false, preallocatedPorts: 64 };
export const OUTBOUND_LIMITS = { idleTimeoutMin: [4, 100] as const, portsPerNic: [SNAT_CHUNK_PORTS, SNAT_PORTS_PER_IP] as const };

export interface OutboundRuleConfig {
  readonly name: string;
  /** IPv4 and/or IPv6; a nic's IPv4 flows use the IPv4 ones, its IPv6 flows the IPv6 ones. */
  readonly frontendIps: readonly IpAddr[];
  /** The pool whose backends' nics it serves, or null when `nics` lists them. */
  readonly pool: string | null;
  /** The nics served (the pool's, or the listed ones). */
  readonly nics: readonly string[];
  readonly protocol: RuleProtocol;
  readonly protocols: readonly IpProtocolNumber[];
  /** Ports of each nic at most (per family), a multiple of SNAT_CHUNK_PORTS. */
  readonly portsPerNic: number;
  /** True when portsPerNic came from `auto` (the pool-size table). */
  readonly portsAuto: boolean;
  /** Ports each nic's host gets before any demand (the rest on demand, in chunks). */
  readonly preallocatedPorts: number;
  readonly idleTimeoutMin: number;
  readonly tcpResetOnIdle: boolean;
}

const RULE_KEYS = [
  'name',
  'frontendIps',
  'pool',
  'nics',
  'protocol',
  'portsPerNic',
  'preallocatedPorts',
  'idleTimeoutMin',
  'tcpResetOnIdle',
] as const;
const PROTOCOLS: Readonly<Record<RuleProtocol, readonly IpProtocolNumber[]>> = { tcp: [6], udp: [17], all: [6, 17] };

/** Azure's table: ports per nic for a pool of `n` nics; null above 1,000. */
export function autoPortsPerNic(n: number): number | null {
  for (const [max, ports] of SNAT_AUTO_TABLE) if (n <= max) return ports;
  return null;
}

/** The chunks of `ip` that outbound NAT may use: every chunk of 1024-65535 that holds no load-balancing rule's frontend port on it. */
export function usableChunks(config: Pick<SlbxConfig, 'vips'>, ip: IpAddr): number[] {
  const ruled = new Set<number>();
  for (const v of config.vips) if (ipKey(v.address) === ipKey(ip)) for (const r of v.rules) ruled.add(chunkOf(r.frontendPort));
  const out: number[] = [];
  for (let p = SNAT_FIRST_PORT; p <= SNAT_LAST_PORT; p += SNAT_CHUNK_PORTS) if (!ruled.has(chunkOf(p))) out.push(p);
  return out;
}

function chunkOf(port: number): number {
  return port - ((port - SNAT_FIRST_PORT) % SNAT_CHUNK_PORTS);
}

/** Validates `outbound` against the normalized rest of the config; [] when absent. */
export function validateOutbound(c: Checker, raw: Obj, config: Omit<SlbxConfig, 'outbound'>): OutboundRuleConfig[] {
  if (!has(raw, 'outbound') || raw['outbound'] === null) return [];
  const list = raw['outbound'];
  if (!isList(list)) {
    c.add(['outbound'], list, 'must be a list of outbound rules (name, frontendIps, pool or nics, portsPerNic, ...)');
    return [];
  }
  const nicByName = new Map(config.nics.map((n) => [n.name, n]));
  const poolByName = new Map(config.pools.map((p) => [p.name, p]));
  const vipByKey = new Map(config.vips.map((v) => [ipKey(v.address), v]));
  const taken = new Map<string, string>();
  for (const m of config.muxes)
    for (const a of [m.address, m.address6]) if (a !== null) taken.set(ipKey(a), `the provider address of mux ${m.name}`);
  for (const h of config.hosts)
    for (const a of [h.address, h.address6]) if (a !== null) taken.set(ipKey(a), `the provider address of host ${h.name}`);
  for (const n of config.nics) for (const a of n.addresses) taken.set(ipKey(a), `the address of nic ${n.name}`);
  const ipOwner = new Map<string, number>();
  const nicOwner = new Map<string, number>();
  const names = new Map<string, number>();
  const out: OutboundRuleConfig[] = [];
  listItems(list).forEach((it, i) => {
    const at: Path = ['outbound', i];
    const o = itemObj(c, it, at, RULE_KEYS);
    if (o === undefined) return;
    const errs = c.issues.length;
    const name = nameField(c, o, at);
    if (name !== undefined) {
      const prev = names.get(name);
      if (prev !== undefined)
        c.add([...at, 'name'], name, `duplicate outbound rule name '${name}', also outbound[${prev}]; every rule needs its own name`);
      else names.set(name, i);
    }
    const ips = frontendIps(c, o, at, config, vipByKey, taken, ipOwner, i);
    const served = servedNics(c, o, at, poolByName, nicByName);
    const protocol = enumField(c, o, at, 'protocol', ['tcp', 'udp', 'all'] as const, OUTBOUND_DEFAULTS.protocol);
    const idle = intField(
      c,
      o,
      at,
      'idleTimeoutMin',
      OUTBOUND_LIMITS.idleTimeoutMin,
      OUTBOUND_DEFAULTS.idleTimeoutMin,
      ' (minutes, as Azure allows)',
    );
    const reset = boolField(c, o, at, 'tcpResetOnIdle', OUTBOUND_DEFAULTS.tcpResetOnIdle);
    if (served !== undefined) {
      served.nics.forEach((n) => {
        const prev = nicOwner.get(n);
        if (prev !== undefined && prev !== i)
          c.add(
            [...at, served.pool !== null ? 'pool' : 'nics'],
            served.pool ?? n,
            `nic ${n} is already served by outbound[${prev}]; a nic belongs to one outbound rule`,
          );
        else nicOwner.set(n, i);
      });
    }
    const ports = portsPerNic(c, o, at, served?.nics.length);
    let pre = has(o, 'preallocatedPorts') ? intField(c, o, at, 'preallocatedPorts', [0, SNAT_PORTS_PER_IP], undefined) : undefined;
    if (!has(o, 'preallocatedPorts') && ports !== undefined) pre = Math.min(OUTBOUND_DEFAULTS.preallocatedPorts, ports.n);
    if (pre !== undefined && pre % SNAT_CHUNK_PORTS !== 0) {
      c.add(
        [...at, 'preallocatedPorts'],
        pre,
        `must be a multiple of ${SNAT_CHUNK_PORTS} (ports are allocated in chunks of ${SNAT_CHUNK_PORTS})`,
      );
      pre = undefined;
    } else if (pre !== undefined && ports !== undefined && pre > ports.n) {
      c.add([...at, 'preallocatedPorts'], pre, `must be at most portsPerNic (${ports.n})`);
      pre = undefined;
    }
    if (ips !== undefined && served !== undefined && ports !== undefined) checkFit(c, at, config, ips, served.nics, ports.n, nicByName);
    if (c.issues.length > errs) return;
    out.push({
      name: name!,
      frontendIps: ips!,
      pool: served!.pool,
      nics: served!.nics,
      protocol: protocol!,
      protocols: PROTOCOLS[protocol!],
      portsPerNic: ports!.n,
      portsAuto: ports!.auto,
      preallocatedPorts: pre!,
      idleTimeoutMin: idle!,
      tcpResetOnIdle: reset!,
    });
  });
  return out;
}

function frontendIps(
  c: Checker,
  o: Obj,
  at: Path,
  config: Omit<SlbxConfig, 'outbound'>,
  vipByKey: Map<string, SlbxConfig['vips'][number]>,
  taken: Map<string, string>,
  ipOwner: Map<string, number>,
  ri: number,
): IpAddr[] | undefined {
  const fAt = [...at, 'frontendIps'];
  const v = o['frontendIps'];
  if (!has(o, 'frontendIps') || !isList(v) || v.length === 0) {
    c.add(fAt, v, 'required: a list of frontend IPs, at least one (a public VIP address or a dedicated public IP inside vipRanges)');
    return undefined;
  }
  const ips: IpAddr[] = [];
  let bad = false;
  listItems(v).forEach((t, j) => {
    const a = typeof t === 'string' ? parseIpAddr(t) : null;
    if (a === null) {
      c.add([...fAt, j], t, `must be an IPv4 or IPv6 address as a string${quoteHint(t)}`);
      bad = true;
      return;
    }
    const k = ipKey(a);
    const vip = vipByKey.get(k);
    const t2 = taken.get(k);
    if (vip !== undefined && vip.scope !== 'public') {
      c.add(
        [...fAt, j],
        t,
        `VIP ${a.text} is internal; outbound NAT needs a public frontend IP (a public VIP or a dedicated address inside vipRanges)`,
      );
      bad = true;
    } else if (t2 !== undefined) {
      c.add([...fAt, j], t, `${a.text} is ${t2}; a frontend IP must be an address of its own`);
      bad = true;
    } else if (vip === undefined && !config.vipRanges.some((r) => inVipRange(a, r))) {
      const ranges = config.vipRanges.map((r) => r.text);
      c.add(
        [...fAt, j],
        t,
        `${a.text} is no VIP and lies in no vipRanges prefix (${listNames(ranges)}); add a prefix that holds it to vipRanges, or use a VIP`,
      );
      bad = true;
    }
    const prev = ipOwner.get(k);
    if (prev !== undefined && prev !== ri) {
      c.add([...fAt, j], t, `${a.text} is already a frontend IP of outbound[${prev}]; a frontend IP belongs to one outbound rule`);
      bad = true;
    } else if (ips.some((x) => ipKey(x) === k)) {
      c.add([...fAt, j], t, `${a.text} is listed twice`);
      bad = true;
    } else ipOwner.set(k, ri);
    ips.push(a);
  });
  return bad ? undefined : ips;
}

function servedNics(
  c: Checker,
  o: Obj,
  at: Path,
  poolByName: Map<string, SlbxConfig['pools'][number]>,
  nicByName: Map<string, SlbxConfig['nics'][number]>,
): { pool: string | null; nics: string[] } | undefined {
  const hasPool = has(o, 'pool');
  const hasNics = has(o, 'nics');
  if (hasPool === hasNics) {
    c.add(
      at,
      hasPool ? o['pool'] : undefined,
      `give exactly one of pool (the pool whose backends' nics it serves) or nics (a list of nic names)`,
    );
    return undefined;
  }
  if (hasPool) {
    const p = o['pool'];
    const pool = typeof p === 'string' ? poolByName.get(p) : undefined;
    if (pool === undefined) {
      c.add([...at, 'pool'], p, `unknown pool ${formatValue(p)}; defined pools: ${listNames([...poolByName.keys()])}`);
      return undefined;
    }
    return { pool: pool.name, nics: [...new Set(pool.backends.map((b) => b.nic))] };
  }
  const v = o['nics'];
  if (!isList(v) || v.length === 0) {
    c.add([...at, 'nics'], v, 'must be a list of nic names, at least one');
    return undefined;
  }
  const nics: string[] = [];
  let bad = false;
  listItems(v).forEach((n, j) => {
    if (typeof n !== 'string' || !nicByName.has(n)) {
      c.add([...at, 'nics', j], n, `unknown nic ${formatValue(n)}; defined nics: ${listNames([...nicByName.keys()])}`);
      bad = true;
    } else if (nics.includes(n)) {
      c.add([...at, 'nics', j], n, `nic ${n} is listed twice`);
      bad = true;
    } else nics.push(n);
  });
  return bad ? undefined : { pool: null, nics };
}

function portsPerNic(c: Checker, o: Obj, at: Path, nicCount: number | undefined): { n: number; auto: boolean } | undefined {
  const pAt = [...at, 'portsPerNic'];
  const v = has(o, 'portsPerNic') ? o['portsPerNic'] : 'auto';
  if (v === 'auto') {
    if (nicCount === undefined) return undefined;
    const n = autoPortsPerNic(nicCount);
    if (n === null) {
      c.add(pAt, v, `auto covers pools of up to 1000 nics (this rule serves ${nicCount}); give a number, or split the rule`);
      return undefined;
    }
    return { n, auto: true };
  }
  const [min, max] = OUTBOUND_LIMITS.portsPerNic;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max || v % SNAT_CHUNK_PORTS !== 0) {
    c.add(pAt, v, `must be auto (Azure's table by pool size) or an integer ${min}..${max}, a multiple of ${SNAT_CHUNK_PORTS}`);
    return undefined;
  }
  return { n: v, auto: false };
}

/** Every nic's full share must fit the usable ports of the rule's frontend IPs of each family it has addresses in. */
function checkFit(
  c: Checker,
  at: Path,
  config: Omit<SlbxConfig, 'outbound'>,
  ips: readonly IpAddr[],
  nics: readonly string[],
  ports: number,
  nicByName: Map<string, SlbxConfig['nics'][number]>,
): void {
  for (const fam of [4, 6] as const) {
    const users = nics.filter((n) => (fam === 4 ? nicByName.get(n)?.address4 : nicByName.get(n)?.address6) != null);
    if (users.length === 0) continue;
    const famIps = ips.filter((a) => a.family === fam);
    if (famIps.length === 0) {
      c.add(
        [...at, 'frontendIps'],
        ips.map((a) => a.text),
        `no IPv${fam} frontend IP, but nics ${listNames(users)} have IPv${fam} addresses; add one`,
      );
      continue;
    }
    const have = famIps.reduce((s, a) => s + usableChunks(config, a).length * SNAT_CHUNK_PORTS, 0);
    const need = users.length * ports;
    if (need > have) {
      const fitPer = Math.floor(have / users.length / SNAT_CHUNK_PORTS) * SNAT_CHUNK_PORTS;
      c.add(
        [...at, 'portsPerNic'],
        ports,
        `${users.length} nics x ${ports} ports = ${need} IPv${fam} ports, but ${famIps.length} frontend IP(s) hold ${have}: ${need - have} ports too many; give at most ${fitPer} ports per nic or add ${Math.ceil((need - have) / SNAT_PORTS_PER_IP)} more frontend IP(s)`,
      );
    }
  }
}
