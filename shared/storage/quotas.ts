/**
 * Per-organization storage caps, in bytes: the deployments' stored artifacts
 * (ORG_ARTIFACT_QUOTA_MB) and the self-hosted runner's kept work directories
 * (ORG_WORKDIR_QUOTA_MB). Each entry point reads them from its environment (the
 * Node adapter: the process's; the Worker: its vars) into `ServiceConfig.storageQuotas`;
 * POST /api/deployments and POST /api/deployments/build/access enforce them
 * (functions/deployments/artifacts.ts). MB means MiB (1,048,576 bytes); 0 turns a cap off.
 */

export const MIB = 1024 * 1024;

export interface StorageQuotas {
  /** ORG_ARTIFACT_QUOTA_MB in bytes; 0: no cap. */
  artifactBytes: number;
  /** ORG_WORKDIR_QUOTA_MB in bytes; 0: no cap. */
  workDirBytes: number;
}

export const QUOTA_SETTINGS = { artifacts: "ORG_ARTIFACT_QUOTA_MB", workDirs: "ORG_WORKDIR_QUOTA_MB" } as const;

/** 5 GiB of artifacts (17 uploads at the 300 MiB limit) and 20 GiB of kept builds per organization. */
export const DEFAULT_QUOTA_MB = { artifacts: 5120, workDirs: 20480 } as const;

export const DEFAULT_STORAGE_QUOTAS: StorageQuotas = {
  artifactBytes: DEFAULT_QUOTA_MB.artifacts * MIB,
  workDirBytes: DEFAULT_QUOTA_MB.workDirs * MIB,
};

/** Up to 1 PiB; decimals allowed (0.5 = 512 KiB). */
const MB = /^\d{1,9}(\.\d{1,6})?$/;

function parseMb(name: string, raw: unknown, fallback: number): number {
  if (raw === undefined || raw === null || raw === "") return fallback * MIB;
  const text = String(raw).trim();
  if (!MB.test(text)) throw new Error(`Invalid configuration ${name}: must be a number of MB (MiB), 0 for no cap`);
  return Math.round(Number(text) * MIB);
}

/** The caps from an environment (unset: the defaults); a malformed value throws "Invalid configuration NAME: …". */
export function storageQuotasFromEnv(env: Record<string, unknown>): StorageQuotas {
  return {
    artifactBytes: parseMb(QUOTA_SETTINGS.artifacts, env[QUOTA_SETTINGS.artifacts], DEFAULT_QUOTA_MB.artifacts),
    workDirBytes: parseMb(QUOTA_SETTINGS.workDirs, env[QUOTA_SETTINGS.workDirs], DEFAULT_QUOTA_MB.workDirs),
  };
}

/** `5.0 MB (5,242,880 bytes)`: both figures, for a refusal's detail. */
export function describeBytes(bytes: number): string {
  const mb = bytes / MIB;
  const shown = mb >= 100 ? mb.toFixed(0) : mb >= 1 ? mb.toFixed(1) : mb.toFixed(3);
  return `${shown} MB (${String(bytes).replace(/\B(?=(\d{3})+(?!\d))/g, ",")} bytes)`;
}
