/**
 * Writes a tar stream from descriptors already opened and checked (Node only),
 * for the local-folder snapshot: node-tar's own packer opens files by name,
 * which would follow a directory swapped for a link after the walk checked it.
 * The headers are node-tar's (ustar, a PAX record first for a long path), in its
 * portable form: no owner names or ids, permissions normalized to at least 0600
 * and at most 0755. Exactly the size fstat gave is written: a file that shrinks
 * while it is read is a FolderChangedError (a tarball never holds a torn member).
 */
import type { Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { once } from "node:events";
import type { Writable } from "node:stream";
import { Header, Pax } from "tar";
import { FolderChangedError } from "./folder-walk";

const BLOCK = 512;
const CHUNK = 64 * 1024;

export class TarWriter {
  constructor(private readonly out: Writable) {}

  private async write(chunk: Buffer): Promise<void> {
    if (!this.out.write(chunk)) await once(this.out, "drain");
  }

  /** One regular file, its content read from `handle` (position 0 on). */
  async file(path: string, handle: FileHandle, info: Stats): Promise<void> {
    const data = { path, mode: ((info.mode & 0o777) | 0o600) & ~0o022, size: info.size, mtime: info.mtime, type: "File" as const };
    const header = new Header(data);
    if (header.encode()) await this.write(new Pax({ path, size: info.size, mtime: info.mtime }).encode());
    await this.write(header.block!);
    let position = 0;
    while (position < info.size) {
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK, info.size - position));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) throw new FolderChangedError(path, "changed");
      position += bytesRead;
      await this.write(buffer.subarray(0, bytesRead));
    }
    const pad = (BLOCK - (info.size % BLOCK)) % BLOCK;
    if (pad) await this.write(Buffer.alloc(pad));
  }

  /** The end-of-archive blocks, then the end of the stream. */
  async end(): Promise<void> {
    await this.write(Buffer.alloc(2 * BLOCK));
    this.out.end();
  }
}
