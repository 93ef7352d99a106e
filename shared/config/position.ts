// Source positions: map an error path to the YAML node it came from (its line and column).
import { isAlias, isMap, isScalar, isSeq, type Document } from 'yaml';
import type { Node as YamlNode } from 'yaml';
import type { Path } from './check.js';

export function locate(doc: Document.Parsed, path: Path, onKey: boolean): number | undefined {
  let node: unknown = doc.contents;
  let offset = rangeStart(node);
  for (let i = 0; i < path.length; i++) {
    const seg = path[i]!;
    for (let guard = 0; isAlias(node) && guard < 100; guard++) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value ?? '') : String(p.key)) === String(seg));
      if (pair === undefined) return offset;
      const last = i === path.length - 1;
      if (last && onKey) return rangeStart(pair.key) ?? offset;
      const next = pair.value ?? pair.key;
      offset = rangeStart(next) ?? rangeStart(pair.key) ?? offset;
      node = next;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg];
      if (item === undefined) return offset;
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      return offset;
    }
  }
  return offset;
}

export function rangeStart(n: unknown): number | undefined {
  const r = (n as YamlNode | null | undefined)?.range;
  return Array.isArray(r) ? r[0] : undefined;
}
