// The pools section: backends (nic, priority, weight, enabled, drain), all in one network.
import {
  boolField,
  has,
  intField,
  isList,
  isObj,
  itemObj,
  listItems,
  nameField,
  refField,
  type Checker,
  type NameTable,
  type Path,
} from './check.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS } from './defaults.js';
import type { NicP } from './nics.js';
import type { PoolLatencyConfig } from './types.js';

const POOL_KEYS = ['name', 'latencySensitivityMs', 'latency', 'backends'] as const;
const LATENCY_KEYS = ['intervalMs', 'samples', 'hysteresisMs'] as const;
const BACKEND_KEYS = ['nic', 'priority', 'weight', 'enabled', 'drain'] as const;

export interface BackendP {
  nic?: string;
  nicIndex?: number;
  priority?: number;
  weight?: number;
  enabled?: boolean;
  drain?: boolean;
}
export interface PoolP {
  name?: string;
  network?: string;
  latencySensitivityMs?: number;
  latency?: PoolLatencyConfig | null;
  backends?: (BackendP | undefined)[];
  backendCount: number;
}

export function validatePools(
  c: Checker,
  poolItems: readonly unknown[],
  nicNames: NameTable,
  nics: readonly (NicP | undefined)[],
  tableSize: number | undefined,
): (PoolP | undefined)[] {
  const D = CONFIG_DEFAULTS;
  const L = CONFIG_LIMITS;
  const pools: (PoolP | undefined)[] = poolItems.map((it, i) => {
    const at: Path = ['pools', i];
    const o = itemObj(c, it, at, POOL_KEYS);
    if (o === undefined) return undefined;
    const pool: PoolP = {
      name: nameField(c, o, at),
      latencySensitivityMs: intField(c, o, at, 'latencySensitivityMs', L.latencySensitivityMs, D.pool.latencySensitivityMs),
      latency: latencySection(c, o, at),
      backendCount: 0,
    };
    const bAt: Path = [...at, 'backends'];
    if (!has(o, 'backends')) {
      c.add(bAt, undefined, 'required: a list of backends, at least one');
      return pool;
    }
    if (!isList(o['backends'])) {
      c.add(bAt, o['backends'], 'must be a list of backends, at least one');
      return pool;
    }
    const list = listItems(o['backends'] as unknown[]);
    pool.backendCount = list.length;
    if (list.length === 0) c.add(bAt, list, 'must list at least one backend');
    const seenNics = new Map<string, number>();
    let firstNet: { network: string; j: number } | undefined;
    pool.backends = list.map((bv, j) => {
      const at2: Path = [...bAt, j];
      const b = itemObj(c, bv, at2, BACKEND_KEYS);
      if (b === undefined) return undefined;
      const be: BackendP = {
        priority: intField(c, b, at2, 'priority', L.priority, D.backend.priority, ' (1 is the highest)'),
        weight: intField(
          c,
          b,
          at2,
          'weight',
          L.weight,
          D.backend.weight,
          b['weight'] === 0 ? '; 0 is refused: use drain: true to stop new flows' : '',
        ),
        enabled: boolField(c, b, at2, 'enabled', D.backend.enabled),
        drain: boolField(c, b, at2, 'drain', D.backend.drain),
      };
      const ni = refField(c, b, at2, 'nic', 'nic', 'nics', nicNames);
      if (ni !== undefined) {
        const name = b['nic'] as string;
        be.nic = name;
        be.nicIndex = ni;
        const prev = seenNics.get(name);
        if (prev !== undefined) {
          c.add([...at2, 'nic'], name, `nic ${name} is already backends[${prev}] of this pool; a nic appears at most once per pool`);
        } else seenNics.set(name, j);
        const net = nics[ni]?.network;
        if (net !== undefined) {
          if (firstNet === undefined) firstNet = { network: net, j };
          else if (net !== firstNet.network) {
            c.add(
              [...at2, 'nic'],
              name,
              `nic ${name} is in network ${net}, but backends[${firstNet.j}] is in network ${firstNet.network}; every backend of a pool must be in the same network (the VXLAN VNI of the pool)`,
            );
          }
        }
      }
      return be;
    });
    if (firstNet !== undefined) pool.network = firstNet.network;
    if (tableSize !== undefined && list.length > tableSize) {
      c.add(
        bAt,
        list.length,
        `the pool has ${list.length} backends but maglevTableSize is ${tableSize}; raise maglevTableSize to a prime >= ${list.length}`,
      );
    }
    return pool;
  });
  return pools;
}

/**
 * The pool's `latency` section: absent or null = no measurement (the pool's tables are the same on every
 * MUX); a mapping (even empty: every field defaulted) = each MUX measures the backends and keeps the
 * band of latencySensitivityMs (docs/latency.md).
 */
function latencySection(c: Checker, o: Record<string, unknown>, at: Path): PoolLatencyConfig | null | undefined {
  if (!has(o, 'latency') || o['latency'] === null) return null;
  const lAt: Path = [...at, 'latency'];
  const v = o['latency'];
  if (!isObj(v)) {
    c.add(lAt, v, `must be a mapping with the fields ${LATENCY_KEYS.join(', ')} (each optional), or absent for no latency measurement`);
    return undefined;
  }
  const L = CONFIG_LIMITS;
  const D = CONFIG_DEFAULTS.latency;
  const before = c.issues.length;
  itemObj(c, v, lAt, LATENCY_KEYS);
  const intervalMs = intField(
    c,
    v,
    lAt,
    'intervalMs',
    L.latencyIntervalMs,
    D.intervalMs,
    ' (time between two measurements of a backend by a MUX)',
  );
  const samples = intField(c, v, lAt, 'samples', L.latencySamples, D.samples, ' (the median of the last this many samples is the latency)');
  const hysteresisMs = intField(
    c,
    v,
    lAt,
    'hysteresisMs',
    L.latencyHysteresisMs,
    D.hysteresisMs,
    ' (a backend inside the band stays in until it is this much beyond the edge)',
  );
  if (c.issues.length !== before || intervalMs === undefined || samples === undefined || hysteresisMs === undefined) return undefined;
  return { intervalMs, samples, hysteresisMs };
}
