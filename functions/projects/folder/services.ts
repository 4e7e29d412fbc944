/**
 * Compose services between the scan and ensure: the masked read form, where
 * their captured values are encrypted, and how masked values sent back are
 * restored (from the session's captured values) or dropped.
 */
import type { Keyring } from "../../../shared/crypto/keyring";
import type { ServiceSpec } from "../../../shared/db/schema";
import { isMasked, MASK, type CapturedValues } from "./compose";
import type { ServiceView } from "./schema";

/** Where a session's captured compose values live (AES-GCM additional data). */
export const capturedContext = (orgId: string, sessionId: string) => ({ orgId, table: "upload_sessions", column: "services", rowId: sessionId });

/** Where a project service's environment values live. */
export const serviceEnvContext = (orgId: string, projectId: string, name: string) => ({
  orgId,
  table: "project_services",
  column: "environment",
  rowId: `${projectId}/${name}`,
});

export function serviceView(name: string, spec: ServiceSpec, envKeys: string[]): ServiceView {
  return {
    name,
    image: spec.image,
    build: spec.build,
    command: spec.command,
    ports: spec.ports,
    dependsOn: spec.dependsOn,
    environment: Object.fromEntries(envKeys.map((k) => [k, MASK])),
  };
}

export async function encryptCaptured(keyring: Keyring, orgId: string, sessionId: string, captured: CapturedValues): Promise<string> {
  return keyring.encrypt(JSON.stringify(captured), capturedContext(orgId, sessionId));
}

export async function decryptCaptured(keyring: Keyring, orgId: string, sessionId: string, ciphertext: string | null): Promise<CapturedValues> {
  if (!ciphertext) return {};
  return JSON.parse(await keyring.decrypt(ciphertext, capturedContext(orgId, sessionId))) as CapturedValues;
}

/**
 * The environment to store for one service: masked values come back from
 * `captured` (same service, same key) or are dropped; clear values pass through.
 */
export function restoreEnvironment(service: string, environment: Record<string, string>, captured: CapturedValues | undefined): Record<string, string> {
  // Own properties only: names like `constructor` or `__proto__` are ordinary keys here.
  const values = captured && Object.hasOwn(captured, service) ? captured[service]! : {};
  const out: Array<[string, string]> = [];
  for (const [key, value] of Object.entries(environment)) {
    if (!isMasked(value)) out.push([key, value]);
    else if (Object.hasOwn(values, key)) out.push([key, values[key]!]);
  }
  return Object.fromEntries(out);
}
