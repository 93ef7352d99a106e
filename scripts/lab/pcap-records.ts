// Counts the records of pcap files and those cut short by the snapshot length (captured length below
// the packet's length), for the lab's capture check (scripts/lab/lib.sh _lab_capture_stop_pids), which
// runs tcpdump with a snapshot length sized to the interface's MTU.
//   node dist/scripts/lab/pcap-records.js FILE.pcap...
//   prints one line per file: "FILE RECORDS TRUNCATED LONGEST" (LONGEST: the longest packet's length);
//   exit status 1 if a file is not a classic pcap file or ends inside a record.
import { readFileSync, realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { PCAP_GLOBAL_HEADER_LEN, PCAP_MAGIC_NS, PCAP_MAGIC_US, PCAP_RECORD_HEADER_LEN } from '../../shared/pcap-file.js';

export interface PcapRecordCount {
  records: number;
  truncated: number;
  longest: number;
}

/** Walks a classic pcap file's record headers; throws on a bad magic or a record cut short. */
export function countPcapRecords(buf: Uint8Array): PcapRecordCount {
  if (buf.length < PCAP_GLOBAL_HEADER_LEN) throw new Error(`${buf.length} bytes: shorter than a pcap file header`);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const be = v.getUint32(0, false);
  let little: boolean;
  if (be === PCAP_MAGIC_US || be === PCAP_MAGIC_NS) little = false;
  else {
    const le = v.getUint32(0, true);
    if (le !== PCAP_MAGIC_US && le !== PCAP_MAGIC_NS) throw new Error(`not a classic pcap file (magic 0x${be.toString(16)})`);
    little = true;
  }
  const out: PcapRecordCount = { records: 0, truncated: 0, longest: 0 };
  let off = PCAP_GLOBAL_HEADER_LEN;
  while (off < buf.length) {
    if (off + PCAP_RECORD_HEADER_LEN > buf.length) throw new Error(`a record header cut short at byte ${off}`);
    const incl = v.getUint32(off + 8, little);
    const orig = v.getUint32(off + 12, little);
    off += PCAP_RECORD_HEADER_LEN;
    if (off + incl > buf.length) throw new Error(`record ${out.records + 1} cut short at byte ${off}`);
    off += incl;
    out.records++;
    if (incl < orig) out.truncated++;
    if (orig > out.longest) out.longest = orig;
  }
  return out;
}

const runAsMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
if (runAsMain) {
  const files = process.argv.slice(2);
  if (files.length === 0 || files.includes('--help') || files.includes('-h')) {
    process.stdout.write(
      'usage: node dist/scripts/lab/pcap-records.js FILE.pcap...\n  prints "FILE RECORDS TRUNCATED LONGEST" per file (TRUNCATED: records shorter than their packet)\n',
    );
    process.exit(files.length === 0 ? 2 : 0);
  }
  let status = 0;
  for (const f of files) {
    try {
      const r = countPcapRecords(readFileSync(f));
      process.stdout.write(`${f} ${r.records} ${r.truncated} ${r.longest}\n`);
    } catch (e) {
      process.stderr.write(`pcap-records: ${f}: ${(e as Error).message}\n`);
      status = 1;
    }
  }
  process.exit(status);
}
