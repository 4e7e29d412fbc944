// @ts-check
/**
 * Packs the files of a folder chosen in the browser (`<input type=file webkitdirectory>`) into a
 * gzipped tarball, the form the folder-upload routes take (docs/folder-upload.md): ustar headers,
 * a PAX record first for a path that does not fit (long or not ASCII), gzip by the browser's
 * CompressionStream. Left out, as `wsp deploy` leaves them out through .gitignore in practice:
 * `.git/`, `.wsp/` and `node_modules/` at any depth (the build installs dependencies itself).
 * Bounded before anything is read by the scan's limits, and while compressing by the upload cap.
 */

const BLOCK = 512;
const encoder = new TextEncoder();

/** The API's caps (shared/storage/limits.ts): the tarball, and what the scan accepts unpacked. */
export const LIMITS = {
  maxUploadBytes: 300 * 1024 * 1024,
  maxEntries: 100_000,
  maxFileBytes: 512 * 1024 * 1024,
  maxUnpackedBytes: 1024 * 1024 * 1024,
};

/** Folders never uploaded (any depth). */
const LEFT_OUT = new Set([".git", ".wsp", "node_modules"]);

export class PackError extends Error {}

/** `12.3 MB` for a byte count. @param {number} n */
export const humanSize = (n) =>
  n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 / 1024).toFixed(n < 10 * 1024 * 1024 ? 1 : 0)} MB`;

/** The path a file has inside the chosen folder (its top folder included), `/`-separated. @param {File} f */
const pathOf = (f) => f.webkitRelativePath || f.name;

/**
 * The files to pack and the folders left out. @param {File[]} files
 * @returns {{kept: File[], leftOut: string[], root: string}}
 */
export function selectFiles(files) {
  const kept = [];
  const leftOut = new Set();
  for (const f of files) {
    const parts = pathOf(f).split("/");
    const skip = parts.slice(0, -1).findIndex((p) => LEFT_OUT.has(p));
    if (skip === -1) kept.push(f);
    else leftOut.add(parts.slice(0, skip + 1).join("/"));
  }
  const root = files[0] ? (pathOf(files[0]).split("/")[0] ?? "") : "";
  return { kept, leftOut: [...leftOut].sort(), root };
}

/** Writes `text` into `block` at `offset`, at most `length` bytes. @param {Uint8Array} block @param {number} offset @param {number} length @param {string} text */
function put(block, offset, length, text) {
  block.set(encoder.encode(text).subarray(0, length), offset);
}

/** An octal field: `length - 1` digits and a NUL. @param {number} value @param {number} length */
const octal = (value, length) => value.toString(8).padStart(length - 1, "0");

/**
 * One 512-byte ustar header. @param {string} name @param {number} size @param {number} mtime seconds
 * @param {string} type "0" a file, "x" a PAX record set
 */
function header(name, size, mtime, type) {
  const block = new Uint8Array(BLOCK);
  put(block, 0, 100, name);
  put(block, 100, 8, octal(0o644, 8));
  put(block, 108, 8, octal(0, 8));
  put(block, 116, 8, octal(0, 8));
  put(block, 124, 12, octal(size, 12));
  put(block, 136, 12, octal(mtime, 12));
  put(block, 148, 8, "        ");
  put(block, 156, 1, type);
  put(block, 257, 6, "ustar\0");
  put(block, 263, 2, "00");
  let sum = 0;
  for (const b of block) sum += b;
  put(block, 148, 8, `${octal(sum, 7)}\0 `);
  return block;
}

/** A PAX record `<length> path=<path>\n` (its length counts itself). @param {string} path */
function paxPath(path) {
  const body = ` path=${path}\n`;
  const bytes = encoder.encode(body).length;
  let length = bytes + String(bytes).length;
  if (String(length).length !== String(bytes).length) length += 1;
  return encoder.encode(`${length}${body}`);
}

const padding = (/** @type {number} */ size) => new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);

/**
 * The gzipped tarball of `files`. `onProgress(bytesRead, totalBytes)` follows the packing.
 * @param {File[]} files already selected (selectFiles)
 * @param {(done: number, total: number) => void} [onProgress]
 * @returns {Promise<Blob>}
 */
export async function packFiles(files, onProgress) {
  if (files.length === 0) throw new PackError("The folder has no files to upload.");
  if (files.length > LIMITS.maxEntries) throw new PackError(`The folder has ${files.length} files; at most ${LIMITS.maxEntries} can be uploaded.`);
  /** @type {BlobPart[]} */
  const parts = [];
  let unpacked = 0;
  for (const f of files) {
    const path = pathOf(f);
    if (f.size > LIMITS.maxFileBytes) throw new PackError(`${path} is ${humanSize(f.size)}; one file may be at most ${humanSize(LIMITS.maxFileBytes)}.`);
    const mtime = Math.floor(f.lastModified / 1000);
    // A name over 100 bytes or not plain ASCII goes in a PAX record the reader prefers to the ustar field.
    if (encoder.encode(path).length > 100 || !/^[\x20-\x7e]*$/.test(path)) {
      const pax = paxPath(path);
      parts.push(header("PaxHeader", pax.length, mtime, "x"), pax, padding(pax.length));
      unpacked += BLOCK * 2 + pax.length;
    }
    parts.push(header(path.slice(0, 100), f.size, mtime, "0"), f, padding(f.size));
    unpacked += BLOCK + f.size + padding(f.size).length;
    if (unpacked > LIMITS.maxUnpackedBytes)
      throw new PackError(`The folder holds more than ${humanSize(LIMITS.maxUnpackedBytes)}; that is more than can be uploaded.`);
  }
  parts.push(new Uint8Array(BLOCK * 2));
  const tar = new Blob(parts);
  // Read through a counter: the files are read lazily, so this is where the progress is.
  let read = 0;
  const counted = tar.stream().pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        read += chunk.byteLength;
        onProgress?.(read, tar.size);
        controller.enqueue(chunk);
      },
    }),
  );
  /** @type {BlobPart[]} */
  const out = [];
  let packed = 0;
  const reader = counted.pipeThrough(new CompressionStream("gzip")).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    packed += value.byteLength;
    if (packed > LIMITS.maxUploadBytes) {
      await reader.cancel();
      throw new PackError(`The packed folder is over ${humanSize(LIMITS.maxUploadBytes)}, the upload limit. Leave out what the build does not need.`);
    }
    out.push(value);
  }
  return new Blob(out, { type: "application/gzip" });
}
