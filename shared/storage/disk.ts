/**
 * Relay uploads on local disk (self-hosted adapter only: imports node:fs).
 * `DATA_DIR/uploads/<orgId>/<sessionId>.tar.gz`. A body is streamed to a unique
 * `.part` file with backpressure (constant memory), counted as it goes, and
 * renamed into place only when complete; a refused or broken upload leaves no file.
 * Deployment artifacts live in `DATA_DIR/uploads/artifacts/<orgId>/<deploymentId>.tar.gz`,
 * which list() (the orphan sweep's view) leaves out.
 */
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { constants, copyFile, mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { OBJECT_KEY } from "./limits";
import { ARTIFACT_ROOT, isStoreKey, UploadTooLargeError, type RelayStorage } from "./types";

export interface DiskStorage extends RelayStorage {
  readonly dir: string;
  /** Every stored tarball and partial upload, with its age (for the orphan sweep). */
  list(): Promise<Array<{ key: string | null; path: string; partial: boolean; mtimeMs: number }>>;
  /** Removes a file found by list(). */
  removePath(path: string): Promise<void>;
}

const PART = /\.[0-9a-f-]{36}\.part$/;
const READ_CHUNK = 1024 * 1024;

export function createDiskStorage(opts: { dir: string; publicUrl?: string }): DiskStorage {
  const dir = resolve(opts.dir);
  const pathOf = (key: string) => {
    if (!isStoreKey(key)) throw new Error(`refusing object key ${JSON.stringify(key)}`);
    return join(dir, key);
  };

  return {
    kind: "relay",
    dir,
    publicUrl: opts.publicUrl,
    async receive(key, body, maxBytes) {
      const final = pathOf(key);
      await mkdir(dirname(final), { recursive: true, mode: 0o700 });
      const part = `${final}.${randomUUID()}.part`;
      let size = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > maxBytes) done(new UploadTooLargeError(`more than ${maxBytes} bytes`));
          else done(null, chunk);
        },
      });
      try {
        await pipeline(Readable.fromWeb(body as NodeWebStream<Uint8Array>), counter, createWriteStream(part, { flags: "wx", mode: 0o600 }));
        await rename(part, final);
        return { size };
      } catch (e) {
        await rm(part, { force: true });
        throw e;
      }
    },
    async open(key) {
      const path = pathOf(key);
      const info = await stat(path).catch(() => null);
      if (!info?.isFile()) return null;
      const body = Readable.toWeb(createReadStream(path, { highWaterMark: READ_CHUNK })) as ReadableStream<Uint8Array>;
      return { size: info.size, body };
    },
    async remove(key) {
      await rm(pathOf(key), { force: true });
    },
    async size(key) {
      const info = await stat(pathOf(key)).catch(() => null);
      return info?.isFile() ? info.size : null;
    },
    async copy(fromKey, toKey) {
      const from = pathOf(fromKey);
      const final = pathOf(toKey);
      const info = await stat(from).catch(() => null);
      if (!info?.isFile()) return false;
      await mkdir(dirname(final), { recursive: true, mode: 0o700 });
      const part = `${final}.${randomUUID()}.part`;
      try {
        await copyFile(from, part, constants.COPYFILE_EXCL);
        await rename(part, final);
        return true;
      } catch (e) {
        await rm(part, { force: true });
        if ((e as NodeJS.ErrnoException).code === "ENOENT" && !(await stat(from).catch(() => null))) return false;
        throw e;
      }
    },
    async list() {
      const found: Array<{ key: string | null; path: string; partial: boolean; mtimeMs: number }> = [];
      const orgs = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const org of orgs) {
        // Deployment artifacts are durable: never listed for the orphan sweep.
        if (!org.isDirectory() || org.name === ARTIFACT_ROOT) continue;
        for (const file of await readdir(join(dir, org.name)).catch(() => [] as string[])) {
          const path = join(dir, org.name, file);
          const info = await stat(path).catch(() => null);
          if (!info?.isFile()) continue;
          const partial = PART.test(file);
          const key = `${org.name}/${partial ? file.replace(PART, "") : file}`;
          found.push({ key: OBJECT_KEY.test(key) ? key : null, path, partial, mtimeMs: info.mtimeMs });
        }
      }
      return found;
    },
    async removePath(path) {
      if (!resolve(path).startsWith(`${dir}/`)) throw new Error("refusing a path outside the upload directory");
      await rm(path, { force: true });
    },
  };
}
