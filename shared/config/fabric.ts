// The fabric section: MTU, VXLAN port and the underlay family.
import { enumField, intField, sectionObj, type Checker, type Obj } from './check.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS } from './defaults.js';
import type { FabricConfig } from './types.js';

const FABRIC_KEYS = ['mtu', 'vxlanPort', 'underlay'] as const;

export function validateFabric(c: Checker, raw: Obj): Partial<FabricConfig> {
  const D = CONFIG_DEFAULTS;
  const L = CONFIG_LIMITS;
  const fabricRaw = sectionObj(c, raw, 'fabric', FABRIC_KEYS);
  const mtu = intField(c, fabricRaw, ['fabric'], 'mtu', L.mtu, D.fabric.mtu);
  const vxlanPort = intField(c, fabricRaw, ['fabric'], 'vxlanPort', L.port, D.fabric.vxlanPort);
  const underlay = enumField(c, fabricRaw, ['fabric'], 'underlay', ['ipv4', 'ipv6'] as const, D.fabric.underlay);
  return { mtu, vxlanPort, underlay };
}
