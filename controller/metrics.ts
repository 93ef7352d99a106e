// GET /metrics of the controller (docs/metrics.md): the policy generation, each agent's applied
// generation and apply lag, connection, the health it holds per backend, refused requests. Read at
// scrape time from the state and the agent registry.
import { PromWriter } from '../shared/prom-text.js';
import type { AgentRegistry } from './agents.js';
import type { ControllerState } from './state.js';

export interface ControllerHealthEntry {
  nic: string;
  probe: string;
  state: string;
  effective: string;
}

export function writeControllerMetrics(
  w: PromWriter,
  state: ControllerState,
  agents: AgentRegistry,
  health: readonly ControllerHealthEntry[],
  refused: Readonly<Record<string, number>>,
): void {
  const current = state.generation;
  w.add('slbx_controller_policy_generation', 'gauge', "The controller's current policy generation.", {}, current);
  const createdAt = Date.parse(state.generationRecord(current)?.at ?? '');
  w.add(
    'slbx_controller_policy_generation_timestamp_seconds',
    'gauge',
    'When the current generation was made (Unix time).',
    {},
    Number.isNaN(createdAt) ? NaN : createdAt / 1000,
  );
  w.family('slbx_controller_agent_applied_generation', 'gauge', 'The generation each agent applied (-1: none of this state).');
  w.family('slbx_controller_agent_behind', 'gauge', '1 while the agent has not applied the current generation.');
  w.family('slbx_controller_agent_connected', 'gauge', '1 while the agent watches the controller or was seen in the last 10 s.');
  w.family(
    'slbx_controller_agent_apply_lag_seconds',
    'gauge',
    "From the making of the generation the agent runs to the agent's ack of it, seconds (NaN: not measured).",
  );
  for (const a of agents.list()) {
    const l = { kind: a.kind, agent: a.name };
    w.sample('slbx_controller_agent_applied_generation', l, a.appliedGeneration ?? -1);
    w.sample('slbx_controller_agent_behind', l, a.behind ? 1 : 0);
    w.sample('slbx_controller_agent_connected', l, a.connected ? 1 : 0);
    let lag = NaN;
    if (a.appliedGeneration !== null) {
      const r = agents.generationReport(a.appliedGeneration, [a.kind]).agents.find((x) => x.name === a.name);
      if (r?.ms != null) lag = r.ms / 1000;
    }
    w.sample('slbx_controller_agent_apply_lag_seconds', l, lag);
  }
  w.family(
    'slbx_controller_backend_healthy',
    'gauge',
    'Health the controller holds per backend and probe: 1 up (or not reported yet), 0 down.',
  );
  for (const h of health) w.sample('slbx_controller_backend_healthy', { backend: h.nic, probe: h.probe }, h.effective === 'down' ? 0 : 1);
  w.family('slbx_controller_api_refused_total', 'counter', 'API requests refused, by reason.');
  for (const [reason, n] of Object.entries(refused)) w.sample('slbx_controller_api_refused_total', { reason }, n);
}
