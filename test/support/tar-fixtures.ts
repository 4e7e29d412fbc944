/**
 * Tarball fixtures built by the tests themselves (no binaries in the repo), with
 * Web APIs only so the suites build them inside workerd too: a small ustar
 * writer that can also write what a hostile archive holds (absolute paths, `..`,
 * links, devices), gzip through CompressionStream, and generated giants (a gzip
 * bomb, a million entries) produced as streams.
 */
export interface FixtureEntry {
  name: string;
  /** `0` file (default), `5` directory, `1` hard link, `2` symlink, `3` char device, `6` FIFO, … */
  type?: string;
  content?: string | Uint8Array;
  linkname?: string;
  /** The header's size field when it must differ from the content (or there is no content). */
  size?: number;
  /** PAX records written before the entry (a long name gets `path` without asking). */
  pax?: Record<string, string>;
}

const encoder = new TextEncoder();

function writeString(block: Uint8Array, offset: number, length: number, value: string) {
  block.set(encoder.encode(value).subarray(0, length), offset);
}

function writeOctal(block: Uint8Array, offset: number, length: number, value: number) {
  writeString(block, offset, length, `${value.toString(8).padStart(length - 1, "0")}\0`);
}

/** One ustar header block (names up to 100 bytes; longer ones get a PAX record first, see tar()). */
export function tarHeader(name: string, size: number, type = "0", linkname = ""): Uint8Array {
  const block = new Uint8Array(512);
  writeString(block, 0, 100, name);
  writeOctal(block, 100, 8, type === "5" ? 0o755 : 0o644);
  writeOctal(block, 108, 8, 1000);
  writeOctal(block, 116, 8, 1000);
  writeOctal(block, 124, 12, size);
  writeOctal(block, 136, 12, 1_700_000_000);
  block.fill(0x20, 148, 156);
  block[156] = type.charCodeAt(0);
  writeString(block, 157, 100, linkname);
  writeString(block, 257, 8, "ustar\u000000");
  let sum = 0;
  for (const b of block) sum += b;
  writeString(block, 148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return block;
}

const padding = (size: number) => new Uint8Array((512 - (size % 512)) % 512);

function paxRecord(key: string, value: string): string {
  // The length counts bytes, not UTF-16 units.
  const body = encoder.encode(` ${key}=${value}\n`).length;
  let length = body + 1;
  while (String(length).length + body !== length) length = String(length).length + body;
  return `${length} ${key}=${value}\n`;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** A tar archive (uncompressed) of the entries, closed by the two zero blocks. */
export function tar(entries: FixtureEntry[]): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    const content = typeof e.content === "string" ? encoder.encode(e.content) : (e.content ?? new Uint8Array(0));
    const records = { ...(encoder.encode(e.name).length > 100 ? { path: e.name } : {}), ...e.pax };
    if (Object.keys(records).length > 0) {
      const pax = encoder.encode(
        Object.entries(records)
          .map(([k, v]) => paxRecord(k, v))
          .join(""),
      );
      parts.push(tarHeader("PaxHeader", pax.length, "x"), pax, padding(pax.length));
    }
    parts.push(tarHeader(e.name.slice(0, 100), e.size ?? content.length, e.type ?? "0", e.linkname ?? ""), content, padding(content.length));
  }
  parts.push(new Uint8Array(1024));
  return concat(parts);
}

/** Gzips a byte source, writing one chunk at a time (Node's CompressionStream would otherwise read a generator to the end first). */
export async function gzip(source: Uint8Array | AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const cs = new CompressionStream("gzip");
  const writer = cs.writable.getWriter();
  const collected = (async () => {
    const chunks: Uint8Array[] = [];
    const reader = cs.readable.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return concat(chunks);
      chunks.push(value);
    }
  })();
  if (source instanceof Uint8Array) await writer.write(source as Uint8Array<ArrayBuffer>);
  else for await (const chunk of source) await writer.write(chunk as Uint8Array<ArrayBuffer>);
  await writer.close();
  return collected;
}

/** A gzipped tarball of the files (`name → content`). */
export const tgz = (files: Record<string, string | Uint8Array>) => gzip(tar(Object.entries(files).map(([name, content]) => ({ name, content }))));

/** One file of `size` zero bytes: a tiny gzip that unpacks enormously. */
export async function* zerosArchive(size: number): AsyncGenerator<Uint8Array> {
  yield tarHeader("zeros.bin", size);
  const zeros = new Uint8Array(1024 * 1024);
  for (let left = size; left > 0; left -= zeros.length) yield left >= zeros.length ? zeros : zeros.subarray(0, left);
  yield padding(size);
  yield new Uint8Array(1024);
}

/** `count` empty files with distinct random names, generated lazily in batches from one template header. */
export async function* manyEntriesArchive(count: number): AsyncGenerator<Uint8Array> {
  const template = tarHeader("", 0);
  template.fill(0x20, 148, 156);
  let base = 0;
  for (const b of template) base += b;
  const hex = "0123456789abcdef";
  const batch = 4096;
  for (let i = 0; i < count; i += batch) {
    const n = Math.min(batch, count - i);
    const out = new Uint8Array(n * 512);
    const random = crypto.getRandomValues(new Uint8Array(n * 6));
    for (let j = 0; j < n; j++) {
      const at = j * 512;
      out.set(template, at);
      // name: f/<12 random hex>-<index>
      const name = `f/${Array.from(random.subarray(j * 6, j * 6 + 6), (b) => hex[b >> 4]! + hex[b & 15]!).join("")}-${i + j}`;
      let sum = base;
      for (let k = 0; k < name.length; k++) {
        out[at + k] = name.charCodeAt(k);
        sum += name.charCodeAt(k);
      }
      const checksum = sum.toString(8).padStart(6, "0");
      for (let k = 0; k < 6; k++) out[at + 148 + k] = checksum.charCodeAt(k);
      out[at + 154] = 0;
      out[at + 155] = 0x20;
    }
    yield out;
  }
  yield new Uint8Array(1024);
}

/**
 * PAX extended headers (`x`, each `recordBytes` long, a `comment` record) whose
 * payloads add up to more than `totalBytes`, then one small file. Each record holds
 * 512 random bytes (as hex) so the stream compresses about 100×, under the
 * gzip-bomb ratio; generated in 1 MiB batches.
 */
export async function* paxFloodArchive(totalBytes: number, recordBytes = 64 * 1024): AsyncGenerator<Uint8Array> {
  const header = tarHeader("PaxHeader", recordBytes, "x");
  const prefix = `${recordBytes} comment=`;
  const template = new Uint8Array(recordBytes).fill(0x61);
  template.set(encoder.encode(prefix));
  template[recordBytes - 1] = 0x0a;
  const hex = encoder.encode("0123456789abcdef");
  const member = 512 + recordBytes + padding(recordBytes).length;
  // The payloads alone exceed totalBytes (headers on top).
  const count = Math.floor(totalBytes / recordBytes) + 1;
  const perBatch = Math.max(1, Math.floor((1024 * 1024) / member));
  for (let i = 0; i < count; i += perBatch) {
    const n = Math.min(perBatch, count - i);
    const out = new Uint8Array(n * member);
    for (let j = 0; j < n; j++) {
      const at = j * member;
      out.set(header, at);
      out.set(template, at + 512);
      const random = crypto.getRandomValues(new Uint8Array(512));
      for (let k = 0; k < random.length; k++) {
        out[at + 512 + prefix.length + 2 * k] = hex[random[k]! >> 4]!;
        out[at + 512 + prefix.length + 2 * k + 1] = hex[random[k]! & 15]!;
      }
    }
    yield out;
  }
  yield tar([{ name: "index.html", content: "<p>" }]);
}
