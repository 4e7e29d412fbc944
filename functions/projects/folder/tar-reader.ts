/**
 * A streaming reader for gzipped tarballs: lists the archive and keeps the few
 * manifests the scan reads, without extracting anything. Web Streams only, so
 * the Worker (reading from the bucket) and the Node adapter (reading from disk)
 * run the same code.
 *
 * Formats: ustar, GNU (long names `L`/`K`) and PAX (`x`, `g`: `path`, `size`).
 * Refused with an ArchiveError: absolute paths and `..`, paths with NUL or an
 * unpaired surrogate, hard and symbolic links, devices and FIFOs, other entry
 * types, more than maxEntries members, a file over maxFileBytes, an extended
 * header (PAX, GNU long name) over maxMetaBytes, more than maxTotalBytes unpacked
 * (headers, extended headers and padding included), an unpacked/packed ratio over
 * maxRatio (a gzip bomb), a manifest over maxManifestBytes, data that is not gzip
 * or not a tar, a truncated archive, an empty one.
 */
import { GzipError, webGunzip, type Gunzip, type GunzipCounters } from "../../../shared/storage/gunzip";
import { isUnsafeText } from "../../../shared/http/safe-text";
import type { ScanLimits } from "../../../shared/storage/limits";

export type ArchiveProblem =
  | "not_gzip"
  | "not_tar"
  | "corrupt"
  | "truncated"
  | "empty"
  | "unsafe_path"
  | "link"
  | "special_file"
  | "unsupported_entry"
  | "too_many_entries"
  | "file_too_large"
  | "too_large"
  | "gzip_bomb"
  | "manifest_too_large";

export class ArchiveError extends Error {
  constructor(
    readonly problem: ArchiveProblem,
    message: string,
  ) {
    super(message);
  }
}

export interface Archive {
  /** The folder the archive was made of: "" or its single top-level directory, e.g. `my-app/`. */
  root: string;
  /** Files and directories. */
  entries: number;
  files: number;
  /** Sum of the files' sizes. */
  unpackedBytes: number;
  packedBytes: number;
  /** Paths relative to root, at most 3 levels deep (directories end in `/`); the detectors look at these. */
  paths: Set<string>;
  /** Root-level manifests the caller asked for, by file name. */
  manifests: Map<string, string>;
}

export interface ReadOptions {
  limits: ScanLimits;
  /** The file names (at the root) whose content the caller wants. */
  manifestNames: ReadonlySet<string>;
  /** The runtime's gunzip (default: DecompressionStream). */
  gunzip?: Gunzip;
}

const BLOCK = 512;
const MAX_LISTED_PATHS = 20_000;
/** What may follow the end-of-archive blocks (tar pads to its record size, 10 KiB by default). */
const TRAILING_LIMIT = 1024 * 1024;
const utf8 = new TextDecoder();
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(n >= 10 * 1024 * 1024 ? 0 : 1)} MiB`;

function cString(block: Uint8Array, start: number, length: number): string {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return utf8.decode(end === -1 ? field : field.subarray(0, end));
}

/** An octal field, or GNU base-256 when the high bit of the first byte is set. NaN when malformed. */
function numeric(block: Uint8Array, start: number, length: number): number {
  const field = block.subarray(start, start + length);
  if (field[0]! & 0x80) {
    if (field[0] === 0xff) return NaN; // negative
    let value = field[0]! & 0x7f;
    for (let i = 1; i < field.length; i++) value = value * 256 + field[i]!;
    return value;
  }
  const text = utf8
    .decode(field)
    .replace(/[\0 ]+$/g, "")
    .replace(/^ +/, "");
  if (text === "") return 0;
  return /^[0-7]+$/.test(text) ? parseInt(text, 8) : NaN;
}

function checksumOk(block: Uint8Array): boolean {
  const stored = numeric(block, 148, 8);
  if (Number.isNaN(stored)) return false;
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= 148 && i < 156 ? 0x20 : block[i]!;
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return stored === unsigned || stored === signed;
}

const isZeroBlock = (block: Uint8Array) => block.every((b) => b === 0);

/** PAX records: `<length> <key>=<value>\n`. */
function paxRecords(data: Uint8Array): Map<string, string> {
  const records = new Map<string, string>();
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break;
    const space = data.indexOf(0x20, pos);
    const length = space === -1 ? NaN : Number(utf8.decode(data.subarray(pos, space)));
    if (!Number.isInteger(length) || length <= space - pos || pos + length > data.length) {
      throw new ArchiveError("corrupt", "A PAX header in the archive is malformed");
    }
    const record = utf8.decode(data.subarray(space + 1, pos + length - 1));
    const eq = record.indexOf("=");
    if (eq > 0) records.set(record.slice(0, eq), record.slice(eq + 1));
    pos += length;
  }
  return records;
}

/** `./a//b/` → `a/b`; refuses absolute paths and `..` (either separator), so nothing can land outside the folder. */
function safePath(raw: string): string {
  // A PAX path may hold NUL (ustar and GNU names end at the first one); Postgres text cannot.
  if (isUnsafeText(raw)) {
    throw new ArchiveError("unsafe_path", `The archive contains a path with a NUL character or an unpaired surrogate (${JSON.stringify(raw.slice(0, 200))})`);
  }
  if (raw.startsWith("/") || raw.startsWith("\\") || /^[A-Za-z]:[/\\]/.test(raw)) {
    throw new ArchiveError("unsafe_path", `The archive contains an absolute path (${JSON.stringify(raw.slice(0, 200))})`);
  }
  const segments = raw.split(/[/\\]/);
  if (segments.includes("..")) throw new ArchiveError("unsafe_path", `The archive contains a path with '..' (${JSON.stringify(raw.slice(0, 200))})`);
  return segments.filter((s) => s !== "" && s !== ".").join("/");
}

const TYPE_NAMES: Record<string, ArchiveProblem> = { "1": "link", "2": "link", "3": "special_file", "4": "special_file", "6": "special_file" };
const TYPE_LABEL: Record<string, string> = { "1": "a hard link", "2": "a symbolic link", "3": "a character device", "4": "a block device", "6": "a FIFO" };

/** Reads the whole archive (so a hostile member anywhere is found) and returns its listing. */
export async function readArchive(body: ReadableStream<Uint8Array>, options: ReadOptions): Promise<Archive> {
  const { limits, manifestNames } = options;
  const counters: GunzipCounters = { in: 0, out: 0 };

  const header = new Uint8Array(BLOCK);
  let headerFill = 0;
  /** Bytes of the current member still to come, then its padding. */
  let remaining = 0;
  let padding = 0;
  /** Where the current member's content goes: a meta record, a manifest, or nowhere. */
  let sink: { kind: "meta" | "manifest"; type: string; path: string; data: Uint8Array; fill: number } | undefined;
  let zeroBlocks = 0;
  let blocks = 0;
  let ended = false;

  // Pending attributes for the next member (PAX `x`, GNU `L`).
  let nextPath: string | undefined;
  let nextSize: number | undefined;
  let metaCount = 0;

  let entries = 0;
  let files = 0;
  /** Sum of the files' sizes (reported). */
  let declared = 0;
  /** Everything the archive unpacks to, as declared by the headers read so far: headers, extended headers, contents, padding. */
  let unpacked = 0;
  const topDirs = new Set<string>();
  let fileAtTop = false;
  const listed: string[] = [];
  const captured = new Map<string, string>();
  const oversized = new Map<string, number>();

  function capturable(path: string): boolean {
    const parts = path.split("/");
    const name = parts[parts.length - 1]!;
    if (!manifestNames.has(name)) return false;
    // At the top, or one level down while the archive still looks like a single folder.
    return parts.length === 1 || (parts.length === 2 && topDirs.size === 1 && !fileAtTop);
  }

  /** Counts a member (header, content, padding) toward the unpacked limit when its header is read, before its content streams. */
  function charge(size: number) {
    unpacked += BLOCK + size + ((BLOCK - (size % BLOCK)) % BLOCK);
    if (unpacked > limits.maxTotalBytes) throw new ArchiveError("too_large", `The archive unpacks to more than ${mib(limits.maxTotalBytes)}`);
  }

  function onHeader(block: Uint8Array) {
    blocks++;
    if (isZeroBlock(block)) {
      zeroBlocks++;
      if (zeroBlocks === 2) ended = true;
      return;
    }
    if (zeroBlocks > 0) throw new ArchiveError("corrupt", "The archive has data after an end-of-archive block");
    if (!checksumOk(block)) {
      if (blocks === 1) throw new ArchiveError("not_tar", "The upload is gzip data but not a tar archive");
      throw new ArchiveError("corrupt", `The archive is corrupt (bad header checksum after ${entries} entries)`);
    }
    const type = String.fromCharCode(block[156]!);
    const isMeta = type === "x" || type === "g" || type === "L" || type === "K";
    // A PAX size applies to the next real member, not to another record.
    const size = (isMeta ? undefined : nextSize) ?? numeric(block, 124, 12);
    if (Number.isNaN(size)) throw new ArchiveError("corrupt", "An entry of the archive has an unreadable size");

    if (isMeta) {
      if (++metaCount > limits.maxEntries) throw new ArchiveError("too_many_entries", `The archive has more than ${limits.maxEntries} entries`);
      if (size > limits.maxMetaBytes)
        throw new ArchiveError(
          "corrupt",
          `A ${type === "L" || type === "K" ? "long name" : "PAX"} record of ${size} bytes is over the ${limits.maxMetaBytes}-byte limit`,
        );
      charge(size);
      sink = { kind: "meta", type, path: "", data: new Uint8Array(size), fill: 0 };
      startContent(size);
      return;
    }

    const magic = cString(block, 257, 6);
    const name = cString(block, 0, 100);
    const prefix = magic === "ustar" && block[263] === 0x30 ? cString(block, 345, 155) : "";
    const raw = nextPath ?? (prefix ? `${prefix}/${name}` : name);
    nextPath = undefined;
    nextSize = undefined;

    const problem = TYPE_NAMES[type];
    if (problem)
      throw new ArchiveError(
        problem,
        `The archive contains ${TYPE_LABEL[type]} (${JSON.stringify(raw.slice(0, 200))}); only files and directories are accepted`,
      );
    const isFile = type === "0" || type === "\0" || type === "7";
    if (!isFile && type !== "5")
      throw new ArchiveError("unsupported_entry", `The archive contains an entry of unsupported type '${type.replace(/[^\x20-\x7e]/g, "?")}'`);

    const path = safePath(raw);
    if (++entries > limits.maxEntries) throw new ArchiveError("too_many_entries", `The archive has more than ${limits.maxEntries} entries`);
    // A directory's size should be 0; whatever it declares is skipped and counted like file data.
    if (size > limits.maxFileBytes)
      throw new ArchiveError("file_too_large", `${path || "."} is ${mib(size)}; files over ${mib(limits.maxFileBytes)} are refused`);
    declared += size;
    charge(size);
    if (path === "") {
      startContent(size);
      return;
    }
    const parts = path.split("/");
    if (topDirs.size < 2) topDirs.add(parts[0]!);
    if (isFile && parts.length === 1) fileAtTop = true;
    if (listed.length < MAX_LISTED_PATHS && parts.length <= 4) listed.push(isFile ? path : `${path}/`);

    if (!isFile) {
      startContent(size);
      return;
    }
    files++;
    if (capturable(path)) {
      if (size > limits.maxManifestBytes) oversized.set(path, size);
      else sink = { kind: "manifest", type, path, data: new Uint8Array(size), fill: 0 };
    }
    startContent(size);
  }

  function startContent(size: number) {
    remaining = size;
    padding = (BLOCK - (size % BLOCK)) % BLOCK;
    if (size === 0) finishContent();
  }

  function finishContent() {
    const done = sink;
    sink = undefined;
    if (!done) return;
    if (done.kind === "manifest") {
      captured.set(done.path, utf8.decode(done.data));
      return;
    }
    if (done.type === "L") nextPath = cString(done.data, 0, done.data.length);
    else if (done.type === "x") {
      const records = paxRecords(done.data);
      const path = records.get("path");
      const size = records.get("size");
      if (path !== undefined) nextPath = path;
      if (size !== undefined) {
        if (!/^\d+$/.test(size)) throw new ArchiveError("corrupt", "A PAX size record is malformed");
        nextSize = Number(size);
      }
    }
    // `g` (global) and `K` (long link name) carry nothing the listing needs.
  }

  function push(chunk: Uint8Array) {
    let pos = 0;
    while (pos < chunk.length && !ended) {
      if (remaining > 0) {
        const n = Math.min(remaining, chunk.length - pos);
        if (sink) {
          sink.data.set(chunk.subarray(pos, pos + n), sink.fill);
          sink.fill += n;
        }
        remaining -= n;
        pos += n;
        if (remaining === 0) finishContent();
      } else if (padding > 0) {
        const n = Math.min(padding, chunk.length - pos);
        padding -= n;
        pos += n;
      } else {
        const n = Math.min(BLOCK - headerFill, chunk.length - pos);
        header.set(chunk.subarray(pos, pos + n), headerFill);
        headerFill += n;
        pos += n;
        if (headerFill === BLOCK) {
          headerFill = 0;
          onHeader(header);
        }
      }
    }
  }

  // After the end-of-archive blocks only the record padding may follow; the gzip stream is still read to its end (checksum, trailing garbage).
  let trailing = 0;
  try {
    for await (const chunk of (options.gunzip ?? webGunzip)(body, counters)) {
      if (counters.out > limits.ratioFloorBytes && counters.out / counters.in > limits.maxRatio) {
        throw new ArchiveError("gzip_bomb", `The archive unpacks to more than ${limits.maxRatio} times its size (a gzip bomb?)`);
      }
      if (ended) trailing += chunk.length;
      else push(chunk);
      if (trailing > TRAILING_LIMIT) throw new ArchiveError("corrupt", "The archive has data after its end");
    }
  } catch (e) {
    if (e instanceof GzipError) throw new ArchiveError(e.notGzip ? "not_gzip" : "truncated", `The upload is ${e.message}; send a gzipped tarball`);
    throw e;
  }

  if (!ended && (remaining > 0 || padding > 0 || headerFill > 0)) {
    if (blocks === 0) throw new ArchiveError("not_tar", "The upload is gzip data but not a tar archive");
    throw new ArchiveError("truncated", "The archive is truncated");
  }
  if (entries === 0) throw new ArchiveError("empty", "The archive contains no files");

  const root = topDirs.size === 1 && !fileAtTop ? `${[...topDirs][0]}/` : "";
  const manifests = new Map<string, string>();
  for (const [path, text] of captured) if (path.startsWith(root) && !path.slice(root.length).includes("/")) manifests.set(path.slice(root.length), text);
  for (const [path, size] of oversized) {
    if (path.startsWith(root) && !path.slice(root.length).includes("/")) {
      throw new ArchiveError("manifest_too_large", `${path} is ${mib(size)}; manifests over ${mib(limits.maxManifestBytes)} are refused`);
    }
  }
  const paths = new Set<string>();
  for (const p of listed) if (p.startsWith(root) && p.length > root.length) paths.add(p.slice(root.length));
  return { root, entries, files, unpackedBytes: declared, packedBytes: counters.in, paths, manifests };
}
