// The flowTable section: sizes and idle timeouts of the MUX's flow tables, and the size of each host
// agent's flow table (east-west).
import { intField, sectionObj, type Checker, type Obj } from './check.js';
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
] as const;

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
  return {
    maxFlows,
    tcpIdleTimeoutS: tcpIdle,
    udpIdleTimeoutS: udpIdle,
    otherIdleTimeoutS: otherIdle,
    untrustedMaxFlows: untrustedMax,
    untrustedTimeoutS: untrustedTimeout,
    maxFastpathFlows: maxFastpath,
    fastpathUdpDatagrams: udpDatagrams,
  };
}
