/**
 * The self-hosted adapter's storage caps (ORG_ARTIFACT_QUOTA_MB, ORG_WORKDIR_QUOTA_MB,
 * read by storageQuotasFromEnv from the environment the configuration came from)
 * put into the services' configuration, where the deploying routes read them.
 */
import type { RequestServices } from "../../shared/http/context";
import type { StorageQuotas } from "../../shared/storage/quotas";

export function withStorageQuotas(services: RequestServices, storageQuotas: StorageQuotas | undefined): RequestServices {
  return storageQuotas ? { ...services, config: { ...services.config, storageQuotas } } : services;
}
