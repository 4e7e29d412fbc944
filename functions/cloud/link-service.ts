/**
 * Linking an organization of this instance to a cloud organization: the token is
 * checked against the cloud (`GET /api/me`) before it is stored, encrypted; the
 * decrypted credentials are built per call and never leave the process except in
 * the Authorization header of requests to the cloud.
 */
import type { Keyring } from "../../shared/crypto/keyring";
import type { Db } from "../../shared/db/types";
import { badRequest } from "../../shared/http/errors";
import type { Logger } from "../../shared/http/logger";
import { type CloudLinkCredentials, CloudRefused, CloudUnreachable, cloudJson } from "./client";
import { findLink, firstOrganization, type LinkRow, linkTokenContext, saveLink } from "./link-store";

interface CloudMe {
  activeOrganizationId: string | null;
  organizations: Array<{ id: string; name: string }>;
}

/** Asks the cloud who the token is; 400 naming `apiUrl`, `token` or `organizationId` when the cloud cannot be linked with them. */
export async function verifyCloudToken(apiUrl: string, token: string, organizationId?: string): Promise<{ id: string; name: string }> {
  let me: CloudMe;
  try {
    me = await cloudJson<CloudMe>({ apiUrl, token, cloudOrgId: organizationId ?? "" }, "api/me");
  } catch (e) {
    if (e instanceof CloudUnreachable) throw badRequest("apiUrl", `The cloud API at this URL could not be used: ${e.message}`);
    if (e instanceof CloudRefused && e.status === 401) throw badRequest("token", "The cloud refused this token (invalid, expired or revoked)");
    if (e instanceof CloudRefused && e.status === 403) throw badRequest("organizationId", "The token's user is not a member of this cloud organization");
    throw badRequest("apiUrl", `The cloud answered ${e instanceof CloudRefused ? e.status : "unexpectedly"} to GET /api/me`);
  }
  const org = me?.organizations?.find((o) => o.id === (organizationId ?? me.activeOrganizationId));
  if (!org || typeof org.name !== "string")
    throw badRequest("organizationId", "The token's user has no organization on the cloud to link; name one with organizationId");
  return { id: org.id, name: org.name };
}

/** Checks and stores a link (the token encrypted); `fromEnvironment` marks one CLOUD_TOKEN owns. */
export async function linkOrganization(
  db: Db,
  keyring: Keyring,
  orgId: string,
  input: { apiUrl: string; token: string; organizationId?: string; linkedBy: string | null; fromEnvironment: boolean },
  now: Date,
): Promise<LinkRow> {
  const cloudOrg = await verifyCloudToken(input.apiUrl, input.token, input.organizationId);
  return saveLink(
    db,
    {
      orgId,
      apiUrl: input.apiUrl,
      tokenCiphertext: await keyring.encrypt(input.token, linkTokenContext(orgId)),
      tokenHint: input.token.slice(-4),
      cloudOrgId: cloudOrg.id,
      cloudOrgName: cloudOrg.name,
      fromEnvironment: input.fromEnvironment ? "CLOUD_TOKEN" : null,
      linkedBy: input.linkedBy,
    },
    now,
  );
}

/** The organization's link with its token decrypted, or undefined when it has none. */
export async function linkCredentials(db: Db, keyring: Keyring, orgId: string): Promise<CloudLinkCredentials | undefined> {
  const link = await findLink(db, orgId);
  if (!link) return undefined;
  return { apiUrl: link.apiUrl, cloudOrgId: link.cloudOrgId, token: await keyring.decrypt(link.tokenCiphertext, linkTokenContext(orgId)) };
}

/**
 * CLOUD_API_URL + CLOUD_TOKEN link the instance's first organization at start.
 * The cloud may be down then: it is tried again every `retryMs` until it answers,
 * and a link stored earlier keeps working meanwhile.
 */
export function linkFromEnvironment(
  db: Db,
  keyring: Keyring,
  cloud: { apiUrl?: string; token?: string; organizationId?: string },
  logger: Logger,
  retryMs = 30_000,
): { stop(): void } {
  const { apiUrl, token } = cloud;
  if (!apiUrl || !token) return { stop() {} };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const attempt = async () => {
    try {
      const orgId = await firstOrganization(db);
      if (!orgId) throw new Error("no organization yet");
      const link = await linkOrganization(
        db,
        keyring,
        orgId,
        { apiUrl, token, organizationId: cloud.organizationId, linkedBy: null, fromEnvironment: true },
        new Date(),
      );
      logger.info("cloud link set from CLOUD_TOKEN", { orgId, cloudOrganization: link.cloudOrgId });
    } catch (e) {
      const detail = e instanceof Error ? e.message : String(e);
      logger.error("cloud link from CLOUD_TOKEN not set yet; retrying", { detail, retryMs });
      if (!stopped) timer = setTimeout(attempt, retryMs);
      timer?.unref?.();
    }
  };
  void attempt();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
