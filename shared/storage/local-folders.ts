/**
 * Local folders (self-hosted, LOCAL_ROOTS): the Node-only service the routes of
 * functions/local-folders/ and the deployments route use through
 * `c.get("services").localFolders`. Only this interface lives here, so the Worker bundle
 * never pulls node:fs; the implementation is functions/local-folders/service.ts,
 * built by the Node adapter. Absent on the Worker.
 */

export interface LocalFolderRead {
  /** The folder's real path. */
  path: string;
  /** Paths relative to the folder, at most 4 levels deep (directories end in `/`), for the detectors. */
  paths: Set<string>;
  /** Root-level manifests asked for, by file name (regular files only, each within the scan's manifest cap). */
  manifests: Map<string, string>;
  /** Files seen by the walk. */
  files: number;
  /** Files and directories seen by the walk. */
  entries: number;
  /** The walk stopped at its entry cap: the detectors saw the first entries in breadth-first order (the root level first). */
  truncated: boolean;
}

export interface LocalSnapshot {
  files: number;
  /** The files' bytes, unpacked. */
  bytes: number;
  /** The gzipped tarball's size. */
  sizeBytes: number;
  /** Symbolic links and special files left out. */
  skipped: number;
}

export interface LocalFolders {
  /** The allowed roots (real paths); empty when LOCAL_ROOTS is unset. */
  readonly roots: readonly string[];
  /** A caller-given folder's real path; 409 when no roots are configured, 400 naming `path` when it is refused (nothing read). */
  resolve(path: string): Promise<string>;
  /** Bounded read of a folder for the detectors (after resolve's checks). */
  read(path: string, manifestNames: ReadonlySet<string>): Promise<LocalFolderRead>;
  /** Whether a recorded folder still exists as a folder under a root. */
  exists(path: string): Promise<boolean>;
  /** Packs a recorded folder (ignore files honoured, nothing outside it ever read) into the upload store at `key`; 409 when it is gone, no longer under a root, empty, too large, or changed while it was read (naming what changed). */
  snapshot(input: { path: string; key: string; now: Date }): Promise<LocalSnapshot>;
}
