/**
 * Packs a folder into a gzipped tarball (Node only), honouring its ignore files
 * (the walk and its rules: shared/storage/folder-walk.ts). Symbolic links and
 * other special files are never followed nor packed (listed as skipped); empty
 * directories are not kept.
 *
 * Two ways to pack:
 * - `snapshotFolder`, for the self-hosted snapshot of a local-folder project
 *   (functions/local-folders/service.ts), whose folder a member may change while
 *   the server (root) reads it: one walk that writes each file from the
 *   descriptor it opened without following links (shared/storage/tar-write.ts),
 *   so a directory swapped for a link at any moment packs nothing from outside;
 *   a file that vanishes or changes kind mid-walk is a FolderChangedError naming it.
 * - `listFolder` then `packFolder`, for the CLI's folder upload
 *   (functions/cli/pack.ts), which shows the listing before packing its user's
 *   own folder: node-tar packs the listed names (links not followed at the last
 *   component; no guard against a swap between the two passes, which only the
 *   folder's owner could make).
 */
import { createWriteStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { create } from "tar";
import { type Listing, type ListOptions, walkFolder } from "./folder-walk";
import { TarWriter } from "./tar-write";

export {
  FolderChangedError,
  FolderLimitError,
  type Listing,
  type ListLimits,
  type ListOptions,
  MAX_IGNORE_FILE_BYTES,
  MAX_NESTING,
} from "./folder-walk";

/** The files the folder would pack, without packing them. */
export async function listFolder(root: string, options: ListOptions = {}): Promise<Listing> {
  return walkFolder(root, options);
}

/** Writes the tarball of the listing to `outFile` (portable headers: no owner names or ids; links never followed). */
export async function packFolder(root: string, outFile: string, listing: Pick<Listing, "files">): Promise<void> {
  await create({ gzip: true, portable: true, cwd: root, file: outFile, follow: false, noDirRecurse: true }, listing.files);
}

/** Walks and packs `root` into a new `outFile` in one pass from descriptors (see the header); the listing of what was packed. */
export async function snapshotFolder(root: string, outFile: string, options: ListOptions = {}): Promise<Listing> {
  const gzip = createGzip();
  const written = pipeline(gzip, createWriteStream(outFile, { flags: "wx", mode: 0o600 }));
  // A failed write surfaces through `written`; until then the walk waits on drain.
  written.catch(() => {});
  const tar = new TarWriter(gzip);
  try {
    const listing = await walkFolder(root, options, (rel, handle, info) => tar.file(rel, handle, info));
    await tar.end();
    await written;
    return listing;
  } catch (e) {
    gzip.destroy();
    await written.catch(() => {});
    throw e;
  }
}
