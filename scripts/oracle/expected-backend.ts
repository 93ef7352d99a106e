// "The backend Maglev chooses" for a flow to a VIP rule of a config, answered by the independent oracle
// (maglev-oracle.ts), for tests and scenario verifiers. The config comes from the project's loader (a
// type only: nothing of the code under test runs here); the pool's members and their availability
// (priority level, enabled, drain, health, latency band), the table and the flow hash are the oracle's.
import type { SlbxConfig } from '../../shared/config.js';
import { flowHash, oraclePoolMembers, oracleTable, slotOf, type OracleBackend } from './maglev-oracle.js';

export interface ExpectedBackendOptions {
  /** Backends (nic names) whose probe fails; default none. */
  readonly down?: readonly string[];
  /** Measured latency per nic, for the pool's latency band; default none. */
  readonly latencyMs?: ReadonlyMap<string, number>;
}

export interface OracleRule {
  readonly pool: string;
  /** 5, 3 or 2. */
  readonly mode: number;
  readonly size: number;
  /** The chosen priority level, or null when no backend is available. */
  readonly level: number | null;
  /** The Maglev members (nic names) in the pool's order, and whether each is available. */
  readonly members: readonly { id: string; weight: number; available: boolean }[];
  /** slot -> nic name, or null (empty). */
  readonly table: readonly (string | null)[];
  /** The backend for a flow from src:sport (IPv4 or IPv6 text; an IPv4-mapped IPv6 is read as IPv4). */
  choose(src: string, sport: number): string | null;
}

const unmap = (a: string) => (a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a);

/** The oracle's view of the rule of `vip` for (protocol, frontend port). Throws when there is no such rule. */
export function oracleRule(config: SlbxConfig, vip: string, protocol: number, port: number, opts: ExpectedBackendOptions = {}): OracleRule {
  const v = config.vips.find((x) => x.address.text === vip);
  const rule = v?.rules.find((r) => r.frontendPort === port && (r.protocols as readonly number[]).includes(protocol));
  if (rule === undefined) throw new Error(`no rule for ${vip} protocol ${protocol} port ${port} in the config`);
  const pool = config.pools.find((p) => p.name === rule.pool);
  if (pool === undefined) throw new Error(`rule ${rule.name}: no pool ${rule.pool}`);
  const down = new Set(opts.down ?? []);
  const backends: OracleBackend[] = pool.backends.map((b) => {
    const lat = opts.latencyMs?.get(b.nic);
    return {
      id: b.nic,
      enabled: b.enabled,
      drained: b.drain,
      priority: b.priority,
      weight: b.weight,
      // a rule without a probe sees every backend healthy
      healthy: rule.probe === null || !down.has(b.nic),
      ...(lat === undefined ? {} : { latencyMs: lat }),
    };
  });
  const { level, members } = oraclePoolMembers(backends, pool.latencySensitivityMs, rule.allDown);
  const size = config.maglevTableSize;
  const table = oracleTable(members, size);
  const mode = rule.distribution;
  return {
    pool: pool.name,
    mode,
    size,
    level,
    table,
    members: members.map((m) => ({ id: m.id, weight: m.weight, available: m.available !== false })),
    choose: (src, sport) => table[slotOf(flowHash(unmap(src), vip, protocol, sport, port, mode, config.hashSeed), size)] ?? null,
  };
}

/** Shorthand: the chooser of oracleRule. */
export function expectedBackendOf(
  config: SlbxConfig,
  vip: string,
  protocol: number,
  port: number,
  opts: ExpectedBackendOptions = {},
): (src: string, sport: number) => string | null {
  return oracleRule(config, vip, protocol, port, opts).choose;
}
