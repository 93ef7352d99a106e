// Backend selection for new flows: Azure Front Door's origin rules applied to an L4 pool
// (docs/design.md, backend selection). Pure: backends in, candidates and a Maglev table out.
//   1. enabled, healthy and not drained
//   2. the best (lowest number) priority level that has any such backend
//   3. within latencySensitivityMs of the fastest measured backend of that level (no measurement: kept);
//      a backend that was inside the band stays in up to latencyHysteresisMs beyond its edge (flap guard)
//   4. weighted Maglev over the level
// When no backend passes 1 and the rule says allDown: spread (fail-open), new flows go to every enabled,
// undrained backend of the pool, all priorities, weighted: the backends looked down, but one of them
// may answer, and none surely will not (docs/config.md, allDown).
import { DEFAULT_MAGLEV_SIZE, buildMaglevTable, type MaglevMember, type MaglevTable } from './maglev.js';

export const MIN_PRIORITY = 1;
export const MAX_PRIORITY = 5;

export interface SelectionBackend {
  readonly id: string;
  readonly enabled: boolean;
  readonly healthy: boolean;
  /** Drained: keeps existing flows, gets no new ones. */
  readonly drained: boolean;
  /** 1 (best) .. 5. */
  readonly priority: number;
  /** 1..1000. */
  readonly weight: number;
  /** Measured; undefined = no measurement, kept in the band. */
  readonly latencyMs?: number;
  /**
   * It was a candidate of the previous selection of this pool (the flap guard): it then stays inside
   * the band up to latencyHysteresisMs beyond its edge. Undefined = false.
   */
  readonly wasInBand?: boolean;
}

export type ExclusionReason = 'disabled' | 'unhealthy' | 'drained' | 'lower_priority' | 'outside_latency_band';

export interface Selection {
  /** The chosen priority level, or null when no backend is enabled, healthy and not drained. */
  readonly level: number | null;
  /** Input indices, ascending. */
  readonly candidates: readonly number[];
  /** Every other input index, ascending, with the first rule that excluded it. */
  readonly excluded: readonly { index: number; reason: ExclusionReason }[];
}

export interface PoolTable {
  /**
   * The priority level new flows use, or null when none does (no Maglev member). Under fail-open: the
   * best priority among the backends spread over (all of them take new flows).
   */
  readonly level: number | null;
  /** Fail-open: no backend was a candidate, and the table spreads over every enabled, undrained one. */
  readonly failOpen: boolean;
  readonly selection: Selection;
  /** Maglev table over all backends of the chosen level; its members are their ids. */
  readonly table: MaglevTable;
  /** Table member index -> input index. */
  readonly memberIndex: Uint32Array;
}

/**
 * Filters the backends for new flows. Throws RangeError on API misuse (priority not an integer in
 * 1..5, negative or non-finite latency, sensitivity or hysteresis); config validation catches these first.
 */
export function selectCandidates(backends: readonly SelectionBackend[], latencySensitivityMs = 0, latencyHysteresisMs = 0): Selection {
  if (!Number.isFinite(latencySensitivityMs) || latencySensitivityMs < 0) {
    throw new RangeError(`latencySensitivityMs must be a finite number >= 0, got ${String(latencySensitivityMs)}`);
  }
  if (!Number.isFinite(latencyHysteresisMs) || latencyHysteresisMs < 0) {
    throw new RangeError(`latencyHysteresisMs must be a finite number >= 0, got ${String(latencyHysteresisMs)}`);
  }
  const reasons: (ExclusionReason | null)[] = new Array<ExclusionReason | null>(backends.length).fill(null);

  // 1. enabled, healthy, not drained; and the best priority among those.
  let level: number | null = null;
  for (let i = 0; i < backends.length; i++) {
    const b = backends[i]!;
    if (!Number.isInteger(b.priority) || b.priority < MIN_PRIORITY || b.priority > MAX_PRIORITY) {
      throw new RangeError(
        `backend ${JSON.stringify(b.id)}: priority must be an integer in ${MIN_PRIORITY}..${MAX_PRIORITY}, got ${String(b.priority)}`,
      );
    }
    if (b.latencyMs !== undefined && (!Number.isFinite(b.latencyMs) || b.latencyMs < 0)) {
      throw new RangeError(
        `backend ${JSON.stringify(b.id)}: latencyMs must be a finite number >= 0 or undefined, got ${String(b.latencyMs)}`,
      );
    }
    if (!b.enabled) reasons[i] = 'disabled';
    else if (!b.healthy) reasons[i] = 'unhealthy';
    else if (b.drained) reasons[i] = 'drained';
    else if (level === null || b.priority < level) level = b.priority;
  }

  // 2. other priority levels; and the fastest measured latency of the chosen level.
  let fastest = Infinity;
  for (let i = 0; i < backends.length; i++) {
    const b = backends[i]!;
    if (reasons[i] !== null) continue;
    if (b.priority !== level) reasons[i] = 'lower_priority';
    else if (b.latencyMs !== undefined && b.latencyMs < fastest) fastest = b.latencyMs;
  }

  // 3. latency band, inclusive; backends without a measurement stay in; one that was in stays in up to
  //    the hysteresis beyond the edge.
  const candidates: number[] = [];
  const excluded: { index: number; reason: ExclusionReason }[] = [];
  for (let i = 0; i < backends.length; i++) {
    const b = backends[i]!;
    if (reasons[i] === null && b.latencyMs !== undefined) {
      const edge = fastest + latencySensitivityMs + (b.wasInBand === true ? latencyHysteresisMs : 0);
      if (b.latencyMs > edge) reasons[i] = 'outside_latency_band';
    }
    const r = reasons[i];
    if (r === null || r === undefined) candidates.push(i);
    else excluded.push({ index: i, reason: r });
  }
  return { level, candidates, excluded };
}

/**
 * Selection plus the Maglev table for new flows. The table is built over ALL backends of the chosen
 * level with `available` = is a candidate, so a health, drain or enable change inside the level moves
 * only that backend's slots. With no level, the table has no members and every slot is MAGLEV_EMPTY.
 */
export function buildPoolTable(
  backends: readonly SelectionBackend[],
  opts: { latencySensitivityMs?: number; latencyHysteresisMs?: number; size?: number; allDown?: 'drop' | 'spread' } = {},
): PoolTable {
  const selection = selectCandidates(backends, opts.latencySensitivityMs ?? 0, opts.latencyHysteresisMs ?? 0);
  if (selection.level === null && opts.allDown === 'spread') {
    const open = failOpenTable(backends, selection, opts.size ?? DEFAULT_MAGLEV_SIZE);
    if (open !== null) return open;
  }
  const { level } = selection;
  const isCandidate = new Uint8Array(backends.length);
  for (const i of selection.candidates) isCandidate[i] = 1;

  const members: MaglevMember[] = [];
  const indices: number[] = [];
  if (level !== null) {
    for (let i = 0; i < backends.length; i++) {
      const b = backends[i]!;
      if (b.priority !== level) continue;
      members.push({ id: b.id, weight: b.weight, available: isCandidate[i] === 1 });
      indices.push(i);
    }
  }
  const table = buildMaglevTable(members, opts.size ?? DEFAULT_MAGLEV_SIZE);
  return { level, failOpen: false, selection, table, memberIndex: Uint32Array.from(indices) };
}

/** Whether a backend takes new flows under fail-open: enabled, not drained, a weight above 0 (health ignored). */
export function spreadsTo(b: SelectionBackend): boolean {
  return b.enabled && !b.drained && b.weight > 0;
}

/**
 * The fail-open table: every backend of the pool is a member, in input order, available when spreadsTo
 * (so the table is a function of the config alone while it lasts, the same on every MUX). Null when no
 * backend qualifies (all disabled or drained: nothing to spread over). `selection` is kept as made: it
 * says why each backend is no candidate.
 */
function failOpenTable(backends: readonly SelectionBackend[], selection: Selection, size: number): PoolTable | null {
  let level: number | null = null;
  const members: MaglevMember[] = [];
  for (const b of backends) {
    const on = spreadsTo(b);
    if (on && (level === null || b.priority < level)) level = b.priority;
    members.push({ id: b.id, weight: b.weight, available: on });
  }
  if (level === null) return null;
  const table = buildMaglevTable(members, size);
  return { level, failOpen: true, selection, table, memberIndex: Uint32Array.from(backends.keys()) };
}
