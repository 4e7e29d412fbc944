-- Stored bytes per deployment, for the per-organization caps (ORG_ARTIFACT_QUOTA_MB, ORG_WORKDIR_QUOTA_MB): the artifact's size,
-- and the runner's kept work directory's. Rows written before have none: the upload sweep records their artifact's size.
ALTER TABLE "deployments" ADD COLUMN "artifact_bytes" bigint;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "work_dir_bytes" bigint;--> statement-breakpoint
CREATE INDEX "deployments_org_storage_idx" ON "deployments" USING btree ("org_id") WHERE "deployments"."artifact_key" is not null or "deployments"."work_dir_bytes" is not null;