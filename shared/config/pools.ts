// The pools section: backends (nic, priority, weight, enabled, drain), all in one network.
import {
  boolField,
  has,
  intField,
  isList,
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

const POOL_KEYS = ['name', 'latencySensitivityMs', 'backends'] as const;
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
