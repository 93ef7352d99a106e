#!/usr/bin/env node
// Scenario verifiers: decode a run's captures with slbx's own codecs (and tshark) and check what the
// scenario claims. Exit code 0 when every check passes.
//   node dist/scripts/scenarios/lib/verify.js north-south|udp-modes|bad-traffic ... | gen-bad ... | account FILE RUNDIR
import { verifyNorthSouth } from './north-south.js';
import { verifyWorkers } from './workers.js';
import { verifyHostWorkers } from './host-workers.js';
import { verifyWorkerRestart } from './worker-restart.js';
import { verifyUdpModes } from './udp-modes.js';
import { generateBadTraffic, verifyBadTraffic } from './bad-traffic.js';
import { printAccount } from './account.js';
import { verifyEcmpSpread, verifyMuxAddRemove, verifyMuxFailure, verifyPoolMove } from './bgp.js';
import { verifyControllerRestart } from './controller-restart.js';
import { generateForged, verifyTenants } from './tenants.js';
import { generateIcmp, verifyPmtu } from './pmtu.js';
import { generateUnknownVxlan, verifyForged } from './forged.js';
import { verifyHostRestart, verifyMuxRestart } from './restarts.js';
import { generateSynFlood, verifySynFlood } from './syn-flood.js';
import { verifyVipApi } from './vip-api.js';
import { verifyBackendRemoved } from './backend-removed.js';
import { verifyFailOpen } from './fail-open.js';
import { verifyMetricsPrometheus } from './metrics-prometheus.js';
import { verifyLatencyPerMux } from './latency-per-mux.js';
import { verifyEastWestFastpath } from './east-west.js';
import { verifyEastWestFailures } from './east-west-failures.js';
import { verifyEightMuxes } from './eight-muxes.js';
import { generateBadTags, verifyVlanDips } from './vlan-dips.js';
import { verifyOutboundSnat } from './outbound-snat.js';

const [cmd, ...rest] = process.argv.slice(2);
try {
  switch (cmd) {
    case 'north-south':
      verifyNorthSouth(rest).exit();
      break;
    case 'workers':
      verifyWorkers(rest).exit();
      break;
    case 'host-workers':
      verifyHostWorkers(rest).exit();
      break;
    case 'worker-restart':
      verifyWorkerRestart(rest).exit();
      break;
    case 'udp-modes':
      verifyUdpModes(rest).exit();
      break;
    case 'bad-traffic':
      verifyBadTraffic(rest).exit();
      break;
    case 'gen-bad':
      generateBadTraffic(rest);
      break;
    case 'account':
      printAccount(rest[0]!, rest[1] ?? '.');
      break;
    case 'ecmp-spread':
      verifyEcmpSpread(rest).exit();
      break;
    case 'mux-failure':
      verifyMuxFailure(rest).exit();
      break;
    case 'mux-add-remove':
      verifyMuxAddRemove(rest).exit();
      break;
    case 'pool-move':
      verifyPoolMove(rest).exit();
      break;
    case 'controller-restart':
      verifyControllerRestart(rest).exit();
      break;
    case 'gen-forged':
      generateForged(rest);
      break;
    case 'tenants':
      verifyTenants(rest).exit();
      break;
    case 'gen-syn-flood':
      generateSynFlood(rest);
      break;
    case 'syn-flood':
      verifySynFlood(rest).exit();
      break;
    case 'gen-icmp':
      generateIcmp(rest);
      break;
    case 'pmtu':
      verifyPmtu(rest).exit();
      break;
    case 'gen-unknown-vxlan':
      generateUnknownVxlan(rest);
      break;
    case 'forged':
      verifyForged(rest).exit();
      break;
    case 'host-restart':
      verifyHostRestart(rest).exit();
      break;
    case 'mux-restart':
      verifyMuxRestart(rest).exit();
      break;
    case 'vip-api':
      verifyVipApi(rest).exit();
      break;
    case 'backend-removed':
      verifyBackendRemoved(rest).exit();
      break;
    case 'fail-open':
      verifyFailOpen(rest).exit();
      break;
    case 'metrics-prometheus':
      verifyMetricsPrometheus(rest).exit();
      break;
    case 'latency-per-mux':
      verifyLatencyPerMux(rest).exit();
      break;
    case 'east-west-fastpath':
      verifyEastWestFastpath(rest).exit();
      break;
    case 'east-west-failures':
      verifyEastWestFailures(rest).exit();
      break;
    case 'eight-muxes':
      verifyEightMuxes(rest).exit();
      break;
    case 'gen-bad-tags':
      generateBadTags(rest);
      break;
    case 'outbound-snat':
      verifyOutboundSnat(rest).exit();
      break;
    case 'vlan-dips':
      verifyVlanDips(rest).exit();
      break;
    default:
      process.stderr.write('usage: verify.js north-south|udp-modes|bad-traffic|gen-bad --name value ... | account FILE RUNDIR\n');
      process.exit(2);
  }
} catch (e) {
  process.stderr.write(`verify ${cmd}: ${(e as Error).message}\n`);
  process.exit(2);
}
