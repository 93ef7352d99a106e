// The lab's delay links (docs/lab.md, "Delay links"): a lab-only file, never read by an slbx daemon, that
// says how many milliseconds of round trip to add between two lab nodes. A delay of X ms between A and B
// adds X to their round trip: X/2 to every frame from A to B and X/2 to every frame from B to A. Pure:
// parsing, validation against the lab's plan, the rewrite of one pair; scripts/lab/delay-link.ts is the
// device that applies it.
//
//   # scripts/lab.sh up --delays FILE
//   delays:
//     - { between: [mux1, host1], ms: 5 }
//     - { between: [mux2, host1], ms: 40 }
//     - { between: [mux1, h2vm1], ms: 15 }   # a MUX and a backend: VXLAN to and from that nic only
//     - { between: [host1, h1vm2], ms: 10 }  # a backend and its host: the link on the backend's port
//   queueFrames: 8192                        # optional: frames held per pair and direction
import { parseDocument } from 'yaml';

/** Largest delay the lab accepts (ms of round trip). */
export const DELAY_MAX_MS = 10_000;
/** Frames held per pair and direction before new ones are dropped (drop_queue_full). */
export const DEFAULT_QUEUE_FRAMES = 8192;
export const MAX_QUEUE_FRAMES = 1_000_000;

const FABRIC_KINDS = new Set(['mux', 'host', 'router', 'controller']);
const TOP_KEYS = ['delays', 'queueFrames'] as const;
const ITEM_KEYS = ['between', 'ms'] as const;

/** A lab node as the delay links see it: its kind, the MAC of its fabric port (or nic eth0), a nic's host. */
export interface DelayNode {
  name: string;
  kind: 'mux' | 'host' | 'router' | 'controller' | 'nic';
  mac: string;
  /** nic only: the host it is on. */
  host?: string;
}

export interface DelayPair {
  /**
   * The node whose delay link carries the pair: the first of the two on the fabric; for a MUX and a nic the
   * MUX; for a nic and its own host the nic (its link sits on the nic's port, in the host's namespace).
   */
  owner: string;
  /** The other node. */
  peer: string;
  /** Added round trip, ms. */
  ms: number;
}

export interface DelaySettings {
  pairs: DelayPair[];
  queueFrames: number;
}

export type DelayResult = { ok: true; settings: DelaySettings } | { ok: false; errors: string[] };

/** The nodes of a lab from its plan.txt (scripts/lab/plan.ts's shell-readable lines). */
export function delayNodesFromPlan(planText: string): DelayNode[] {
  const nodes: DelayNode[] = [];
  for (const line of planText.split('\n')) {
    const f = line.trim().split(/\s+/);
    switch (f[0]) {
      case 'mux':
      case 'host':
        if (f.length >= 6) nodes.push({ name: f[1]!, kind: f[0], mac: f[5]!.toLowerCase() });
        break;
      case 'router':
        if (f.length >= 7) nodes.push({ name: 'router', kind: 'router', mac: f[6]!.toLowerCase() });
        break;
      case 'controller':
        if (f.length >= 5) nodes.push({ name: 'controller', kind: 'controller', mac: f[4]!.toLowerCase() });
        break;
      case 'nic':
        if (f.length >= 5) nodes.push({ name: f[1]!, kind: 'nic', host: f[2]!, mac: f[4]!.toLowerCase() });
        break;
    }
  }
  return nodes;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Who carries the pair, or why none can. */
function ownerOf(a: DelayNode, b: DelayNode): { owner: DelayNode; peer: DelayNode } | string {
  if (a.kind === 'nic' && b.kind === 'nic')
    return 'two nics: one side must be a mux, host, router or controller (the delay link sits on its fabric port)';
  if (a.kind === 'nic' || b.kind === 'nic') {
    const nic = a.kind === 'nic' ? a : b;
    const other = a.kind === 'nic' ? b : a;
    // a nic and its own host: the link sits on the nic's port, in the host's namespace (every frame of it)
    if (other.kind === 'host' && other.name === nic.host) return { owner: nic, peer: other };
    if (other.kind !== 'mux')
      return `${nic.name} is a nic on ${nic.host}: its partner must be its host ${nic.host} (the link on its port) or a MUX (VXLAN to and from it), not the ${other.kind} ${other.name}`;
    return { owner: other, peer: nic };
  }
  return { owner: a, peer: b };
}

/** The canonical key of an unordered pair. */
export function pairKey(a: string, b: string): string {
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}

function checkMs(v: unknown, at: string, errors: string[]): number | null {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > DELAY_MAX_MS) {
    errors.push(`${at}: must be a number of milliseconds 0..${DELAY_MAX_MS} (the added round trip), got ${JSON.stringify(v)}`);
    return null;
  }
  return v;
}

/** Validates a parsed delays document against the lab's nodes; every problem at once, each naming its field. */
export function validateDelays(doc: unknown, nodes: readonly DelayNode[], owners?: ReadonlySet<string>): DelayResult {
  const errors: string[] = [];
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const known = () =>
    `fabric nodes: ${nodes
      .filter((n) => n.kind !== 'nic')
      .map((n) => n.name)
      .join(', ')}; nics: ${
      nodes
        .filter((n) => n.kind === 'nic')
        .map((n) => n.name)
        .join(', ') || '-'
    }`;
  if (doc === null || doc === undefined) doc = {};
  if (!isObj(doc)) return { ok: false, errors: [`(top): must be a mapping with the fields ${TOP_KEYS.join(', ')}`] };
  for (const k of Object.keys(doc))
    if (!(TOP_KEYS as readonly string[]).includes(k)) errors.push(`${k}: unknown field; allowed: ${TOP_KEYS.join(', ')}`);
  let queueFrames = DEFAULT_QUEUE_FRAMES;
  if (doc['queueFrames'] !== undefined) {
    const q = doc['queueFrames'];
    if (typeof q !== 'number' || !Number.isInteger(q) || q < 1 || q > MAX_QUEUE_FRAMES)
      errors.push(`queueFrames: must be an integer 1..${MAX_QUEUE_FRAMES} (frames held per pair and direction), got ${JSON.stringify(q)}`);
    else queueFrames = q;
  }
  const list = doc['delays'] ?? [];
  const pairs: DelayPair[] = [];
  if (!Array.isArray(list)) errors.push(`delays: must be a list of { between: [NODE, NODE], ms: MS }, got ${JSON.stringify(list)}`);
  else {
    const seen = new Map<string, number>();
    list.forEach((item: unknown, i) => {
      const at = `delays[${i}]`;
      if (!isObj(item)) {
        errors.push(`${at}: must be a mapping { between: [NODE, NODE], ms: MS }, got ${JSON.stringify(item)}`);
        return;
      }
      for (const k of Object.keys(item))
        if (!(ITEM_KEYS as readonly string[]).includes(k)) errors.push(`${at}.${k}: unknown field; allowed: ${ITEM_KEYS.join(', ')}`);
      const ms = checkMs(item['ms'], `${at}.ms`, errors);
      const b = item['between'];
      if (!Array.isArray(b) || b.length !== 2 || b.some((x) => typeof x !== 'string')) {
        errors.push(`${at}.between: must be two node names, e.g. [mux1, host1], got ${JSON.stringify(b)}`);
        return;
      }
      const [na, nb] = b as [string, string];
      const a = byName.get(na);
      const c = byName.get(nb);
      if (a === undefined) errors.push(`${at}.between[0]: '${na}' is no node of this lab (${known()})`);
      if (c === undefined) errors.push(`${at}.between[1]: '${nb}' is no node of this lab (${known()})`);
      if (a === undefined || c === undefined) return;
      if (na === nb) {
        errors.push(`${at}.between: '${na}' twice; a delay is between two different nodes`);
        return;
      }
      const o = ownerOf(a, c);
      if (typeof o === 'string') {
        errors.push(`${at}.between: ${o}`);
        return;
      }
      const key = pairKey(na, nb);
      const prev = seen.get(key);
      if (prev !== undefined) errors.push(`${at}.between: ${na} and ${nb} are also delays[${prev}]; one delay per pair`);
      else seen.set(key, i);
      if (owners !== undefined && !owners.has(o.owner.name))
        errors.push(
          `${at}.between: ${o.owner.name} has no delay link in this lab (links: ${[...owners].join(', ') || 'none'}); name the pair in the --delays file at lab_up (0 ms is fine) so that its link is built`,
        );
      if (ms !== null) pairs.push({ owner: o.owner.name, peer: o.peer.name, ms });
    });
  }
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, settings: { pairs, queueFrames } };
}

/** Parses and validates the text of a delays file. */
export function parseDelays(text: string, nodes: readonly DelayNode[], owners?: ReadonlySet<string>): DelayResult {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) return { ok: false, errors: doc.errors.map((e) => `YAML: ${e.message}`) };
  return validateDelays(doc.toJS(), nodes, owners);
}

/** The nodes that carry a delay link for these settings, in order of first mention. */
export function delayOwners(s: DelaySettings): string[] {
  return [...new Set(s.pairs.map((p) => p.owner))];
}

/** The settings written back as a delays file (what `set` leaves behind). */
export function formatDelays(s: DelaySettings): string {
  const lines = ['# lab-only delay links (docs/lab.md, "Delay links"); rewritten by lab_delay_set', 'delays:'];
  for (const p of s.pairs) lines.push(`  - { between: [${p.owner}, ${p.peer}], ms: ${p.ms} }`);
  if (s.pairs.length === 0) lines[1] = 'delays: []';
  lines.push(`queueFrames: ${s.queueFrames}`);
  return `${lines.join('\n')}\n`;
}

/** The settings with the delay of A-B set to ms (added when it is not there yet); errors as validateDelays. */
export function setDelay(
  s: DelaySettings,
  a: string,
  b: string,
  ms: number,
  nodes: readonly DelayNode[],
  owners?: ReadonlySet<string>,
): DelayResult {
  const doc = {
    delays: s.pairs.map((p) => ({ between: [p.owner, p.peer], ms: p.ms })),
    queueFrames: s.queueFrames,
  };
  const key = pairKey(a, b);
  const item = doc.delays.find((d) => pairKey(d.between[0]!, d.between[1]!) === key);
  if (item !== undefined) item.ms = ms;
  else doc.delays.push({ between: [a, b], ms });
  return validateDelays(doc, nodes, owners);
}

export const isFabricKind = (k: string): boolean => FABRIC_KINDS.has(k);
