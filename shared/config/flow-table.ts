// The flowTable section: sizes and idle timeouts of the MUX's flow tables, and the bound of each host
// agent's one flow table (hostMaxFlows) with the quotas of its features: east-west (maxFastpathFlows),
// outbound NAT (snatMaxFlows, two entries a flow) and the return path (the rest).
import { has, intField, sectionObj, type Checker, type Obj } from './check.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS } from './defaults.js';
import type { FlowTableConfig } from './types.js';

const FLOW_KEYS = [
  'maxFlows',
  'tcpIdleTimeoutS',
  'udpIdleTimeoutS',
  'otherIdleTimeoutS',
  'untrustedMaxFlows',
  'untrustedTimeoutS',
  'maxFastpathFlows',
  'fastpathUdpDatagrams',
  'hostMaxFlows',
  'snatMaxFlows',
] as const;

/**
 * hostMaxFlows when the config does not set it: the default, or more when the other quotas would leave
 * the return path less than HOST_DSR_MIN_DEFAULT_FLOWS (its bound before the table was shared with
 * outbound NAT), so that a config written before hostMaxFlows existed stays valid.
 */
export const HOST_DSR_MIN_DEFAULT_FLOWS = 100_000;
export function defaultHostMaxFlows(snatMaxFlows: number, maxFastpathFlows: number): number {
  return Math.max(CONFIG_DEFAULTS.flowTable.hostMaxFlows, 2 * snatMaxFlows + maxFastpathFlows + HOST_DSR_MIN_DEFAULT_FLOWS);
}

/** Entries of a host flow table left to the return path (DSR) by the other features' quotas. */
export function hostDsrQuota(f: Pick<FlowTableConfig, 'hostMaxFlows' | 'snatMaxFlows' | 'maxFastpathFlows'>): number {
  return f.hostMaxFlows - 2 * f.snatMaxFlows - f.maxFastpathFlows;
}

export function validateFlowTable(c: Checker, raw: Obj): Partial<FlowTableConfig> {
  const D = CONFIG_DEFAULTS;
  const L = CONFIG_LIMITS;
  const flowRaw = sectionObj(c, raw, 'flowTable', FLOW_KEYS);
  const maxFlows = intField(c, flowRaw, ['flowTable'], 'maxFlows', L.maxFlows, D.flowTable.maxFlows);
  const tcpIdle = intField(c, flowRaw, ['flowTable'], 'tcpIdleTimeoutS', L.idleTimeoutS, D.flowTable.tcpIdleTimeoutS);
  const udpIdle = intField(c, flowRaw, ['flowTable'], 'udpIdleTimeoutS', L.idleTimeoutS, D.flowTable.udpIdleTimeoutS);
  const otherIdle = intField(c, flowRaw, ['flowTable'], 'otherIdleTimeoutS', L.idleTimeoutS, D.flowTable.otherIdleTimeoutS);
  const untrustedMax = intField(c, flowRaw, ['flowTable'], 'untrustedMaxFlows', L.maxFlows, D.flowTable.untrustedMaxFlows);
  const untrustedTimeout = intField(c, flowRaw, ['flowTable'], 'untrustedTimeoutS', L.idleTimeoutS, D.flowTable.untrustedTimeoutS);
  const maxFastpath = intField(c, flowRaw, ['flowTable'], 'maxFastpathFlows', L.maxFlows, D.flowTable.maxFastpathFlows);
  const udpDatagrams = intField(
    c,
    flowRaw,
    ['flowTable'],
    'fastpathUdpDatagrams',
    L.fastpathUdpDatagrams,
    D.flowTable.fastpathUdpDatagrams,
  );
  const snatMax = intField(c, flowRaw, ['flowTable'], 'snatMaxFlows', L.snatMaxFlows, D.flowTable.snatMaxFlows);
  const hostSet = has(flowRaw, 'hostMaxFlows');
  let hostMax = hostSet ? intField(c, flowRaw, ['flowTable'], 'hostMaxFlows', L.maxFlows, undefined) : undefined;
  if (!hostSet && snatMax !== undefined && maxFastpath !== undefined) hostMax = defaultHostMaxFlows(snatMax, maxFastpath);
  if (hostSet && hostMax !== undefined && snatMax !== undefined && maxFastpath !== undefined) {
    const rest = hostDsrQuota({ hostMaxFlows: hostMax, snatMaxFlows: snatMax, maxFastpathFlows: maxFastpath });
    if (rest < 1) {
      c.add(
        ['flowTable', 'hostMaxFlows'],
        hostMax,
        `leaves the return path (DSR) no entry: outbound NAT takes 2 x snatMaxFlows = ${2 * snatMax} and east-west maxFastpathFlows = ${maxFastpath} of it; ` +
          `raise hostMaxFlows above ${2 * snatMax + maxFastpath}, or lower snatMaxFlows or maxFastpathFlows`,
      );
    }
  }
  return {
    maxFlows,
    tcpIdleTimeoutS: tcpIdle,
    udpIdleTimeoutS: udpIdle,
    otherIdleTimeoutS: otherIdle,
    untrustedMaxFlows: untrustedMax,
    untrustedTimeoutS: untrustedTimeout,
    maxFastpathFlows: maxFastpath,
    fastpathUdpDatagrams: udpDatagrams,
    hostMaxFlows: hostMax,
    snatMaxFlows: snatMax,
  };
}
