// The host agent's flow state files per data-plane thread (docs/reliability.md, "Host agent workers"):
// one set (snapshot host-agent-SET.flows, journals host-agent-SET.journal and .journal.prev) per thread
// that runs the data plane. The one-thread agent's set is named by the host (SET = NAME, as before);
// with --workers N each worker has its own, SET = NAME.wI (I its index), written by the worker itself
// (host-agent/worker.ts) with the same FlowSnapshotter and FlowJournal.
//
// Who reads what at a start:
//   - a worker reads every set present (its own, the other workers', a one-thread agent's, those of
//     indexes >= N left by an agent that ran more workers) and keeps only the records that steering gives
//     it: steerWorker(steeringKeyOfEnd(remote end), N) === its index, the remote end being the one the
//     kernel's steering program keys both directions of the flow by (host-agent/worker-steering.ts):
//       return path (a DSR record: the host flow table's key): the client's address (key words 5-8) and
//         port (the low 16 bits of word 10); the key is (VNI|family, DIP, client, proto, DIP port, client port);
//       outbound NAT (an exportFlows record): the remote server's address (words 10-13) and port (the low
//         16 bits of word 18, DIP port << 16 | remote port).
//     So every record lands in exactly one worker, whatever N was when it was written (a flow is never
//     restored into two workers' SNAT engines), and a worker that restarts also takes the flows of its
//     share that another worker recorded while it was down (the kernel gave them to that one).
//   - at the agent's start the main thread reads every set once, before any worker starts, and hands the
//     bytes to each worker (a worker that loads rewrites its own set with only its flows: read from disk
//     by the others at the same time, a set could already have lost their share); once every worker has
//     loaded (and written its own set), the sets no worker owns any more (a one-thread agent's, indexes
//     >= N) are removed, with a log line naming them;
//   - the one-thread agent reads the workers' sets (every record: one thread takes all), then its own,
//     and removes the workers' sets once its own snapshot holds their flows.
import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { FlowJournal } from './flow-journal.js';
import {
  readSnapshotFile,
  restoreFlowState,
  type FlowRecordFilter,
  type FlowSnapshotRestore,
  type FlowSnapshotTarget,
  type FlowSnapshotterOptions,
  type FlowStateBytes,
} from './flow-snapshot.js';
import { steeringKeyOfEnd, steerWorker } from './worker-steering.js';

/** The set name (the FlowSnapshotter's `name`) of worker `index` of host agent `name`. */
export function workerFlowSetName(name: string, index: number): string {
  return `${name}.w${index}`;
}

/** A set found in the state directory: its set name and its worker index (null: the one-thread agent's). */
export interface FlowStateSet {
  set: string;
  worker: number | null;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The sets of host agent `name` in `dir` (a missing directory: none), the one-thread set first, then by index. */
export function listFlowStateSets(dir: string, name: string): FlowStateSet[] {
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch {
    return [];
  }
  const re = new RegExp(`^host-agent-${escapeRe(name)}(\\.w(\\d+))?\\.(flows|journal|journal\\.prev)$`);
  const found = new Map<string, FlowStateSet>();
  for (const f of files) {
    const m = re.exec(f);
    if (m === null) continue;
    const worker = m[2] === undefined ? null : Number(m[2]);
    const set = worker === null ? name : workerFlowSetName(name, worker);
    found.set(set, { set, worker });
  }
  return [...found.values()].sort((a, b) => (a.worker ?? -1) - (b.worker ?? -1));
}

/** A set's files as they are now: the snapshot first, then the journals (a rotation in between loses nothing: the reader takes newer journals). */
export function readFlowStateSet(dir: string, set: string, log: FlowSnapshotterOptions['log']): FlowStateBytes {
  const snapshot = readSnapshotFile(join(dir, `host-agent-${set}.flows`), log);
  const journals = new FlowJournal({ dir, name: set, log }).readFiles().map((f) => f.bytes);
  return { snapshot, journals };
}

/** Removes a set's files (and a temporary file a death may have left); returns the files removed. */
export function removeFlowStateSet(dir: string, set: string): string[] {
  const removed: string[] = [];
  for (const suffix of ['flows', 'flows.tmp', 'flows.tmp-stop', 'journal', 'journal.prev', 'journal.tmp']) {
    const f = join(dir, `host-agent-${set}.${suffix}`);
    try {
      unlinkSync(f);
      removed.push(f);
    } catch {
      // not there
    }
  }
  return removed;
}

/** The worker (of `count`) a return-path record belongs to: its client's end (key words 5-8, port in word 10's low half). */
export function dsrRecordWorker(record: Uint32Array, count: number): number {
  const family = (record[0]! & 0xff) === 6 ? 6 : 4;
  return steerWorker(steeringKeyOfEnd(family, record.subarray(5, 9), record[10]! & 0xffff), count);
}

/** The worker (of `count`) an outbound NAT record belongs to: its remote server's end (words 10-13, port in word 18's low half). */
export function snatRecordWorker(record: Uint32Array, count: number): number {
  const family = record[0] === 6 ? 6 : 4;
  return steerWorker(steeringKeyOfEnd(family, record.subarray(10, 14), record[18]! & 0xffff), count);
}

/** The records worker `index` of `count` takes (every one with one worker). */
export function steeringFilter(index: number, count: number): FlowRecordFilter {
  return {
    dsr: (r) => dsrRecordWorker(r, count) === index,
    snat: (r) => snatRecordWorker(r, count) === index,
  };
}

/** What restoring the other sets gave: per set, and the totals that count (the target's own set is FlowSnapshotter.load's). */
export interface OtherSetsRestore {
  sets: {
    set: string;
    refused: string | null;
    dsrRestored: number;
    dsrReplayed: number;
    snatRestored: number;
    dsrOther: number;
    snatOther: number;
  }[];
  dsrRestored: number;
  dsrReplayed: number;
  snatRestored: number;
}

/** Restores `sets` (each a set's files) into `t` (its filter applies), one after another. Never throws. */
export function restoreOtherSets(
  sets: readonly { set: string; bytes: FlowStateBytes }[],
  t: Omit<FlowSnapshotTarget, 'unixMs'>,
): OtherSetsRestore {
  const out: OtherSetsRestore = { sets: [], dsrRestored: 0, dsrReplayed: 0, snatRestored: 0 };
  for (const { set, bytes } of sets) {
    if (bytes.snapshot === null && bytes.journals.length === 0) continue;
    const r: FlowSnapshotRestore = restoreFlowState(bytes.snapshot, bytes.journals, { ...t, unixMs: Date.now() });
    const snatRestored = r.snat?.restored ?? 0;
    out.sets.push({
      set,
      refused: r.refused,
      dsrRestored: r.dsrRestored,
      dsrReplayed: r.journal.dsrReplayed,
      snatRestored,
      dsrOther: r.dsrOther,
      snatOther: r.snatOther,
    });
    out.dsrRestored += r.dsrRestored;
    out.dsrReplayed += r.journal.dsrReplayed;
    out.snatRestored += snatRestored;
  }
  return out;
}
