// The Prometheus text exposition format (version 0.0.4), written by hand: one `# HELP` and one `# TYPE`
// line per metric family, then its samples, `name{label="value",...} number`. The daemons build the
// whole text at scrape time from the counters their data planes already keep (nothing per packet).
// Format rules (Prometheus "Exposition formats", text format): metric names match
// [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and not starting with `__`; in a label
// value `\`, `"` and a newline are escaped as `\\`, `\"` and `\n`; in HELP text `\` and newline; the
// samples of one family are contiguous and a family appears once.

export const PROM_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type PromType = 'counter' | 'gauge' | 'untyped';
export type PromLabels = Readonly<Record<string, string | number>>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** A sample value as the format spells it: NaN, +Inf, -Inf, or the shortest decimal. */
export function formatPromValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/**
 * Collects metric families and writes them in the order first added. A family added twice must keep
 * its type and help; its samples then join the first ones (so the output stays grouped).
 */
export class PromWriter {
  private readonly families = new Map<string, { type: PromType; help: string; lines: string[]; seen: Set<string> }>();

  /** Declares a family (no sample yet); a family with no sample is written with its HELP and TYPE only. */
  family(name: string, type: PromType, help: string): void {
    if (!METRIC_NAME.test(name)) throw new Error(`bad metric name ${JSON.stringify(name)}`);
    if (type === 'counter' && !name.endsWith('_total')) throw new Error(`counter ${name} must end in _total`);
    const f = this.families.get(name);
    if (f === undefined) this.families.set(name, { type, help, lines: [], seen: new Set() });
    else if (f.type !== type) throw new Error(`metric ${name} declared as ${f.type} and ${type}`);
  }

  /** One sample; the family must have been declared. The same name and labels twice is refused. */
  sample(name: string, labels: PromLabels, value: number): void {
    const f = this.families.get(name);
    if (f === undefined) throw new Error(`metric ${name} has no family (call family() first)`);
    const keys = Object.keys(labels);
    let text = name;
    if (keys.length > 0) {
      const parts: string[] = [];
      for (const k of keys) {
        if (!LABEL_NAME.test(k) || k.startsWith('__')) throw new Error(`bad label name ${JSON.stringify(k)} on ${name}`);
        parts.push(`${k}="${escapeLabelValue(String(labels[k]))}"`);
      }
      text += `{${parts.join(',')}}`;
    }
    if (f.seen.has(text)) throw new Error(`duplicate sample ${text}`);
    f.seen.add(text);
    f.lines.push(`${text} ${formatPromValue(value)}`);
  }

  /** family() and sample() in one call. */
  add(name: string, type: PromType, help: string, labels: PromLabels, value: number): void {
    this.family(name, type, help);
    this.sample(name, labels, value);
  }

  text(): string {
    const out: string[] = [];
    for (const [name, f] of this.families) {
      out.push(`# HELP ${name} ${escapeHelp(f.help)}`, `# TYPE ${name} ${f.type}`, ...f.lines);
    }
    return out.length === 0 ? '' : `${out.join('\n')}\n`;
  }
}

/**
 * A daemon's data-plane counters (shared/counters.ts names) as metric families under `prefix`:
 * `drop_<reason>` -> `<prefix>_drops_total{reason}`, `send_error_<what>` -> `<prefix>_send_errors_total
 * {reason}`, each of `direction` (name -> [metric, label]) as given, and every other counter as
 * `<prefix>_<name>_total`. Zeros included: a reason that never happened still has its series.
 */
export function writeCounterFamilies(
  w: PromWriter,
  prefix: string,
  counters: Readonly<Record<string, number>>,
  mapped: Readonly<Record<string, { metric: string; help: string; labels: PromLabels }>> = {},
): void {
  w.family(`${prefix}_drops_total`, 'counter', 'Packets dropped, by reason (the drop_<reason> counters of GET /counters).');
  w.family(
    `${prefix}_send_errors_total`,
    'counter',
    'Sends the kernel refused (or that had no socket), by path or reason; never expected.',
  );
  for (const [name, v] of Object.entries(counters)) {
    const m = mapped[name];
    if (m !== undefined) w.add(m.metric, 'counter', m.help, m.labels, v);
    else if (name.startsWith('drop_')) w.sample(`${prefix}_drops_total`, { reason: name.slice(5) }, v);
    else if (name.startsWith('send_error_')) w.sample(`${prefix}_send_errors_total`, { reason: name.slice(11) }, v);
    else w.add(`${prefix}_${name}_total`, 'counter', `The ${name} counter of GET /counters.`, {}, v);
  }
}
