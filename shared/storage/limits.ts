/**
 * Folder-upload limits and lifetimes, in one place: the session route, the relay,
 * the scan, the sweeper, the CLI and the OpenAPI descriptions all read them here.
 */

/** The spec's "300 MB" tarball limit, read as MiB: 300 × 1024 × 1024 = 314,572,800 bytes (a 300,000,000-byte file fits). */
export const MAX_UPLOAD_BYTES = 300 * 1024 * 1024;

/** A session (and its upload) lives this long after it is opened. */
export const SESSION_TTL_MS = 60 * 60 * 1000;

/** An ensure that uses a session keeps it (and its tarball) for the deploy step this long. */
export const ENSURED_TTL_MS = 60 * 60 * 1000;

/** Per organization, across its unexpired sessions: how many may be open, and the bytes they may hold (uploaded size, else the hinted size). */
export const ORG_SESSION_CAPS = { maxOpen: 20, maxBytes: 2 * 1024 * 1024 * 1024 } as const;

/** A presigned PUT URL is valid this long (never beyond the session). */
export const PRESIGN_TTL_SECONDS = 15 * 60;

/** What the scan reads, and refuses beyond. */
export const SCAN_LIMITS = {
  /** Files and directories in the archive. */
  maxEntries: 100_000,
  /** One file, unpacked. */
  maxFileBytes: 512 * 1024 * 1024,
  /** The whole archive, unpacked (tar headers and padding included). */
  maxTotalBytes: 1024 * 1024 * 1024,
  /** Unpacked ÷ packed, checked once more than ratioFloorBytes were unpacked (a gzip bomb stops early). */
  maxRatio: 200,
  ratioFloorBytes: 32 * 1024 * 1024,
  /** A manifest the scan reads (package.json, compose.yaml, …). */
  maxManifestBytes: 1024 * 1024,
  /** One extended header (a PAX record set, a GNU long name); its bytes count toward maxTotalBytes too. */
  maxMetaBytes: 64 * 1024,
} as const;

export type ScanLimits = { [K in keyof typeof SCAN_LIMITS]: number };

export const GZIP_TYPE = "application/gzip";

/** Where a session's tarball lives in the upload store: under its organization's prefix. */
export const objectKeyFor = (orgId: string, sessionId: string) => `${orgId}/${sessionId}.tar.gz`;

/** Keys are made of our own ids only; anything else is refused before it reaches a path or a URL. */
export const OBJECT_KEY = /^[a-z]+_[0-9a-z]+\/[a-z]+_[0-9a-z]+\.tar\.gz$/;
